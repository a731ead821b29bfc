#!/usr/bin/python3
"""On-chip memory and row tiling (a vnpu profile's "onchip_bytes",
src/devices/vnpu/tiling.c), through `tandem plan --json`:

    tiling_test.py TANDEM CACHE WORKDIR

edge-tiled.json is edge-npu with 4 MiB on chip and 256 MiB of device memory.
- PP-OCRv4 det at 1x3x640x640: on edge-npu (4 MiB, nothing else) most nodes
  fall back for MEMORY; on edge-tiled every node stays on the NPU (its large
  maps run in row tiles, the global pools stream), and a tiled node is
  estimated with one dispatch per tile;
- resnet18: the layer4 convolutions' weights (4.7 MB at fp16) do not fit on
  chip: MEMORY with that sentence;
- a Conv whose tensors exceed the on-chip memory and whose output has a single
  row cannot be tiled: MEMORY naming the rows;
- a profile whose onchip_bytes exceeds memory_bytes is refused naming both.
Skips (77) when the cache lacks the models."""
import json
import os
import subprocess
import sys

tandem, cache, work = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
tiled = "vnpu:" + os.path.join(here, "edge-tiled.json")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def plan(model, devices, extra=()):
    p = subprocess.run([tandem, "plan", model, "--devices", devices, "--json"] + list(extra), capture_output=True,
                       text=True, timeout=600)
    return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else {}), p.stderr


def on(led, dev):
    return sum(1 for n in led.get("nodes", []) if n["device"] == dev)


det = os.path.join(cache, "models", "ppocr_det.onnx")
r18 = os.path.join(cache, "models", "resnet18.onnx")
if not (os.path.isfile(det) and os.path.isfile(r18)):
    print("the cache lacks ppocr_det/resnet18 (make data)")
    sys.exit(77)

shape = ["--shape", "x=1x3x640x640"]
rc, small, err = plan(det, "vnpu:edge-npu,cpu", shape)
mem = sum(1 for n in small.get("nodes", []) if n["reason"] == "MEMORY")
check(rc == 0 and mem > 200, "det on edge-npu: most nodes fall back for MEMORY (%d; %s)" % (mem, err))
rc, big, err = plan(det, tiled + ",cpu", shape)
n = len(big.get("nodes", []))
check(rc == 0 and n == 330 and on(big, "vnpu:edge-tiled") == n,
      "det on edge-tiled: every node on the NPU (%d of %d; %s)" % (on(big, "vnpu:edge-tiled"), n, err))
print("ppocr_det 640x640: edge-npu %d of %d nodes on the NPU (%d MEMORY), edge-tiled %d of %d, modeled %.1f ms"
      % (on(small, "vnpu:edge-npu"), len(small.get("nodes", [])), mem, on(big, "vnpu:edge-tiled"), n,
         big.get("summary", {}).get("estimated_ms", {}).get("total", -1)))

# A tiled node costs a dispatch per tile: its estimate on edge-tiled is above
# the same node's on a copy of the profile with all of it on chip.
prof = json.load(open(os.path.join(here, "edge-tiled.json")))
prof["name"], prof["onchip_bytes"] = "edge-roomy", prof["memory_bytes"]
os.makedirs(work, exist_ok=True)
roomy_path = os.path.join(work, "edge-roomy.json")
json.dump(prof, open(roomy_path, "w"))
rc, roomy, err = plan(det, "vnpu:" + roomy_path + ",cpu", shape)
ms = {x["name"]: x["estimated_ms"] for x in roomy.get("nodes", [])}
dearer = [x["name"] for x in big.get("nodes", []) if x["name"] in ms and x["estimated_ms"] > ms[x["name"]] + 1e-9]
check(rc == 0 and len(dearer) > 0, "det: tiled nodes are estimated above the untiled ones (%d; %s)" % (len(dearer), err))
check(all(x["estimated_ms"] >= ms.get(x["name"], 0) - 1e-9 for x in big.get("nodes", [])),
      "det: no node is cheaper tiled")
print("%d nodes of det run in row tiles on edge-tiled" % len(dearer))

rc, led, err = plan(r18, tiled + ",cpu", ["--granularity", "op"])
refused = [x for x in led.get("nodes", []) if x["reason"] == "MEMORY"]
check(rc == 0 and refused and all("weights" in x.get("detail", "") and "do not fit the 4194304 bytes of on-chip"
                                  in x["detail"] for x in refused),
      "resnet18: layer4's convolutions refused for their weights: %s" % [x.get("detail") for x in refused][:2])

# a 1x1 Conv on a 1x128x1x20000 map (tensors 10.2 MB at fp16, one output row)
sys.path.insert(0, os.path.join(os.path.dirname(here), "cli"))
os.chdir(work)
try:
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np
except ImportError:
    print("python3-onnx is missing")
    sys.exit(77)
w = numpy_helper.from_array(np.ones((128, 128, 1, 1), np.float32), "w")
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="wide")], "wide",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 1, 20000])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128, 1, 20000])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
with open("wide.onnx", "wb") as f:
    f.write(m.SerializeToString())
rc, led, err = plan("wide.onnx", tiled + ",cpu")
node = (led.get("nodes") or [{}])[0]
check(rc == 0 and node.get("reason") == "MEMORY" and "fewer rows than the tiles" in node.get("detail", ""),
      "a one-row map too large for the chip: MEMORY naming the rows: %s" % node)

prof["name"], prof["onchip_bytes"] = "edge-bad", prof["memory_bytes"] * 2
bad_path = os.path.join(work, "edge-bad.json")
json.dump(prof, open(bad_path, "w"))
p = subprocess.run([tandem, "plan", "wide.onnx", "--devices", "vnpu:" + bad_path + ",cpu"], capture_output=True,
                   text=True)
check(p.returncode != 0 and "onchip_bytes" in p.stderr and "memory_bytes" in p.stderr and len(p.stderr.splitlines()) == 1,
      "onchip_bytes above memory_bytes: one sentence naming both (%d: %r)" % (p.returncode, p.stderr))

print("tiling: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
