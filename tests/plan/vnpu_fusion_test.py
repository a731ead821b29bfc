#!/usr/bin/python3
"""A vnpu profile's "fusion" (profiles/README.md), through `tandem plan --json`:

    vnpu_fusion_test.py TANDEM WORKDIR

A Conv -> BatchNormalization -> Relu chain, all three on the vnpu:
- "fusion": "epilogue": one launch. The Conv is priced as before
  (FLOPs / peak + launch + bytes / bandwidth); the BatchNormalization is
  folded into its weights (0, fused); the Relu is its arithmetic only
  (one FLOP per output element at peak, no launch, no bytes: it reads the
  chain's value), fused;
- "fusion": "none" (and the field absent): three launches, each node at
  least launch_overhead_us, none fused;
- a residual Add in a Conv -> Relu -> Add chain on the fusing profile pays the residual
  operand's bytes (read from memory) but no launch;
- "fusion": "fused" is refused naming the field and the values it takes."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

tandem, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)
failures = []
rng = np.random.default_rng(7)
C, H, W, K = 8, 32, 32, 16
LAUNCH_US, PEAK_GFLOPS, BW_GBPS = 10.0, 100.0, 10.0


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def model(name, residual):
    F = TensorProto.FLOAT
    inits = [numpy_helper.from_array((rng.standard_normal((K, C, 3, 3)) * 0.1).astype(np.float32), "w"),
             numpy_helper.from_array(np.zeros(K, np.float32), "b")]
    for n, v in (("s", 1.0), ("bb", 0.0), ("mu", 0.0), ("var", 1.0)):
        inits.append(numpy_helper.from_array(np.full(K, v, np.float32), n))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu")]
    if residual:  # Conv -> Relu -> Add(residual): a chain after a folded BatchNormalization takes no residual
        nodes = [nodes[0], helper.make_node("Relu", ["c"], ["r"], name="relu")]
    inputs = [helper.make_tensor_value_info("x", F, [1, C, H, W])]
    out = "r"
    if residual:
        inputs.append(helper.make_tensor_value_info("res", F, [1, K, H, W]))
        nodes.append(helper.make_node("Add", ["r", "res"], ["y"], name="add"))
        out = "y"
    g = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info(out, F, [1, K, H, W])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    return path


def profile(name, fusion):
    p = {"name": name, "precision": "fp32", "memory_bytes": 1 << 30, "peak_gflops": PEAK_GFLOPS,
         "launch_overhead_us": LAUNCH_US, "memory_bandwidth_gbps": BW_GBPS, "host_bandwidth_gbps": 4,
         "host_latency_us": 10, "defaults": {"dtypes": ["float"]},
         "ops": {"Conv": {}, "BatchNormalization": {}, "Relu": {}, "Add": {}}}
    if fusion is not None:
        p["fusion"] = fusion
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(p, f)
    return path


def plan(model_path, prof):
    r = subprocess.run([tandem, "plan", model_path, "--devices", "vnpu:%s,cpu" % prof, "--granularity", "op",
                        "--json"], capture_output=True, text=True, timeout=300)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else {}), r.stderr


def by_name(led):
    return {n["name"]: n for n in led.get("nodes", [])}


cbr = model("cbr", False)
res = model("cbr_res", True)
fuse = profile("fuse-npu", "epilogue")
none = profile("nofuse-npu", "none")
absent = profile("plain-npu", None)
launch_ms = LAUNCH_US / 1000.0
relu_ms = K * H * W / (PEAK_GFLOPS * 1e6)  # one FLOP per output element at peak, in ms

rc, f, err = plan(cbr, fuse)
check(rc == 0, "plan on the fusing profile runs (%s)" % err)
nf = by_name(f)
if rc == 0:
    check(all(n["device"] == "vnpu:fuse-npu" for n in nf.values()), "every node on the fusing vnpu")
    conv, bn, relu = nf["conv"], nf["bn"], nf["relu"]
    check(not conv.get("fused") and conv["estimated_ms"] >= launch_ms, "the Conv is the one launch (%r)" % conv)
    check(bn.get("fused") and bn["estimated_ms"] == 0, "the BatchNormalization is folded: fused, 0 ms (%r)" % bn)
    check(relu.get("fused") and abs(relu["estimated_ms"] - relu_ms) < 2e-6 and relu["estimated_ms"] < launch_ms,
          "the Relu is fused: its arithmetic only, %.6f ms, no launch (%r)" % (relu_ms, relu))
    launches = sum(1 for n in nf.values() if not n.get("fused"))
    check(launches == 1, "Conv+BatchNormalization+Relu is one launch on \"epilogue\" (%d)" % launches)

for prof in (none, absent):
    rc, u, err = plan(cbr, prof)
    check(rc == 0, "plan on %s runs (%s)" % (prof, err))
    nu = by_name(u)
    if rc == 0:
        check(not any(n.get("fused") for n in nu.values()), "%s: nothing fused" % prof)
        check(all(n["estimated_ms"] >= launch_ms for n in nu.values()),
              "%s: three launches, each node at least the launch overhead (%r)" % (prof, list(nu.values())))
        if nf:
            check(nu["conv"]["estimated_ms"] == nf["conv"]["estimated_ms"], "%s: the Conv priced as on epilogue" % prof)
            saved = u["summary"]["estimated_ms"]["total"] - f["summary"]["estimated_ms"]["total"]
            check(saved > 2 * launch_ms, "%s: fusing saves at least two launches (%.6f ms)" % (prof, saved))

rc, r, err = plan(res, fuse)
check(rc == 0, "plan of the residual chain runs (%s)" % err)
if rc == 0:
    add = by_name(r)["add"]
    res_ms = K * H * W * 4 / (BW_GBPS * 1e6)  # the residual operand, read from memory
    check(add.get("fused") and abs(add["estimated_ms"] - (relu_ms + res_ms)) < 2e-6,
          "the residual Add is fused: its arithmetic and the residual's %d bytes, no launch (%r)" % (K * H * W * 4, add))

bad = profile("bad-npu", "fused")
rc, _, err = plan(cbr, bad)
check(rc != 0 and "fusion must be one of \"none\", \"epilogue\", got \"fused\"" in err,
      "an unknown fusion value is refused with its path (%s)" % err.strip())

if failures:
    sys.exit(1)
print("Conv+BatchNormalization+Relu: epilogue 1 launch (%s ms), none 3 launches" %
      ", ".join("%s %.6f" % (k, v["estimated_ms"]) for k, v in nf.items()))
