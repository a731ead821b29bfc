"""The estimated end-to-end time of every granularity, per model and npu
profile: the table of the cost-aware placement issue's closing note.

estimates_table.py TANDEM CACHE [--markdown]

For each model of CACHE/models (shapes from CACHE/refs/MODEL/inputs.txt;
ppocr_det also at 1x3x960x960) on vnpu:edge-npu,cpu and
vnpu:server-npu,cpu, `tandem plan MODEL --granularity G --json` for op,
subgraph, graph and auto; prints summary.estimated_ms.total (ms, modeled)
and the nodes on the device. Exit 1 when auto is above the best of the
others (the model-set property), else 0.
"""
import json
import os
import subprocess
import sys

import numpy as np

tandem, cache = sys.argv[1:3]
md = "--markdown" in sys.argv
models = sorted(f[:-5] for f in os.listdir(os.path.join(cache, "models")) if f.endswith(".onnx"))
grans = ["op", "subgraph", "graph", "auto"]


def shapes(m):
    out = []
    path = os.path.join(cache, "refs", m, "inputs.txt")
    if not os.path.exists(path):
        return out
    for line in open(path):
        line = line.strip()
        if "=" not in line:
            continue
        name, f = line.rsplit("=", 1)
        a = np.load(f, mmap_mode="r")
        out += ["--shape", "%s=%s" % (name, "x".join(str(d) for d in a.shape))]
    return out


cases = []
for m in models:
    cases.append((m, shapes(m)))
    if m == "ppocr_det":
        cases.append(("ppocr_det@960", ["--shape", "x=1x3x960x960"]))
bad = 0
rows = []
for name, sh in cases:
    m = name.split("@")[0]
    for prof in ("edge-npu", "server-npu"):
        est, dev = {}, {}
        for g in grans:
            p = subprocess.run([tandem, "plan", os.path.join(cache, "models", m + ".onnx"), "--devices",
                                "vnpu:%s,cpu" % prof, "--granularity", g, "--json"] + sh,
                               capture_output=True, text=True)
            try:
                j = json.loads(p.stdout)
                s = j["summary"]
                est[g] = s["estimated_ms"]["total"]
                dev[g] = s["nodes_by_device"].get("vnpu:" + prof, 0)
            except Exception:
                est[g], dev[g] = float("nan"), -1
        best = min(est[g] for g in grans[:3])
        ok = est["auto"] <= best * (1 + 1e-9) + 1e-9
        bad += not ok
        rows.append((name, prof, est, dev, ok))
if md:
    print("| model | profile | op ms | subgraph ms | graph ms | auto ms | auto nodes on npu |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, prof, est, dev, ok in rows:
        print("| %s | %s | %s | %d |" % (name, prof, " | ".join("%.3f" % est[g] for g in grans), dev["auto"]))
else:
    print("%-22s %-11s %12s %12s %12s %12s  %s" % ("model", "profile", "op", "subgraph", "graph", "auto",
                                                  "npu nodes (op/sub/graph/auto)"))
    for name, prof, est, dev, ok in rows:
        print("%-22s %-11s %12.3f %12.3f %12.3f %12.3f  %s%s" % (
            name, prof, est["op"], est["subgraph"], est["graph"], est["auto"], "/".join(str(dev[g]) for g in grans),
            "" if ok else "  auto above the best"))
sys.exit(1 if bad else 0)
