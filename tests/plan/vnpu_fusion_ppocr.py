#!/usr/bin/python3
"""auto on a fusing vendor profile keeps PP-OCR's convolution chains on the NPU:

    vnpu_fusion_ppocr.py TANDEM CACHE

With cpu's partitions priced fused and the vnpu's not, auto on
vnpu:rk3588,cpu moved 261 of ppocr_det's nodes (640x640) to cpu in 46
partitions with 104.6 MB of copies, and 379 of ppocr_rec's (48x320) in 43;
with rk3588's "fusion": "epilogue" it moves 35 in 5 partitions (6.6 MB)
and 178 in 11 (3.1 MB). Checks: ppocr_det at most 60 cpu nodes, 8
partitions and 10 MB of copies; ppocr_rec at most 12 partitions (greedy's
12) and 5 MB. Skips (77) when the cache lacks the models."""
import json
import os
import subprocess
import sys

tandem, cache = sys.argv[1:3]
failures = []
cases = [("ppocr_det", "x=1x3x640x640", 60, 8, 10e6), ("ppocr_rec", "x=1x3x48x320", None, 12, 5e6)]
if not all(os.path.isfile(os.path.join(cache, "models", m + ".onnx")) for m, *_ in cases):
    print("the cache lacks ppocr_det/ppocr_rec (make data)")
    sys.exit(77)
for m, shape, max_cpu, max_parts, max_bytes in cases:
    r = subprocess.run([tandem, "plan", os.path.join(cache, "models", m + ".onnx"), "--devices", "vnpu:rk3588,cpu",
                        "--granularity", "auto", "--shape", shape, "--json"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        failures.append("%s: plan failed: %s" % (m, r.stderr.strip()))
        continue
    d = json.loads(r.stdout)
    s = d["summary"]
    cpu = sum(1 for n in d["nodes"] if n["device"] == "cpu")
    fused = sum(1 for n in d["nodes"] if n["device"] != "cpu" and n.get("fused"))
    print("%s on vnpu:rk3588,cpu auto: %d cpu nodes, %d partitions, %d boundary bytes, %d vnpu nodes fused, %.3f ms"
          % (m, cpu, s["partitions"], s["boundary_bytes"], fused, s["estimated_ms"]["total"]))
    if max_cpu is not None and cpu > max_cpu:
        failures.append("%s: %d nodes on cpu (at most %d)" % (m, cpu, max_cpu))
    if s["partitions"] > max_parts:
        failures.append("%s: %d partitions (at most %d)" % (m, s["partitions"], max_parts))
    if s["boundary_bytes"] > max_bytes:
        failures.append("%s: %d boundary bytes (at most %d)" % (m, s["boundary_bytes"], max_bytes))
    if fused == 0:
        failures.append("%s: no vnpu node priced fused" % m)
for f in failures:
    print("FAIL:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
