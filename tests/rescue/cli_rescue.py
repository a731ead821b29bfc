#!/usr/bin/env python3
"""The rescue pass through the CLI on the transformer encoders (ctest rescue.cli).

  cli_rescue.py TANDEM CACHE NPU_PROFILE SMALL_PROFILE WORKDIR

On rescue-npu.json (fp32, the primitives, no LayerNormalization):
  --rescue off   every LayerNormalization falls back to cpu;
  --rescue safe  none does: each became a group of RESCUED nodes on the
                 device, fewer partitions, outputs equal cpu's (max |diff|
                 <= 1e-4 x max |cpu|).
On the same profile without Erf (written here):
  safe           the Erf nodes fall back (the exact GELU needs Erf);
  all            they become tanh approximations on the device (erf-tanh),
                 outputs within cosine 0.9999 of cpu's.
Exit 77 when the model set is absent.
"""
import json
import os
import subprocess
import sys

import numpy as np

TANDEM, CACHE, NPU, SMALL, WORK = sys.argv[1:6]
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def plan(model, profile, mode):
    r = subprocess.run([TANDEM, "plan", model, "--devices", f"vnpu:{profile},cpu", "--rescue", mode, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tandem plan failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def run(model, devices, mode, inputs, out):
    cmd = [TANDEM, "run", model, "--devices", devices, "--rescue", mode, "--output-dir", out, "--overwrite"]
    for k, v in inputs.items():
        cmd += ["--input", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tandem run failed ({r.returncode}): {r.stderr}")
    return {f: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out)) if f.endswith(".npy")}


def fallbacks(ledger, op):
    return [n for n in ledger["nodes"] if n["op"] == op and n["device"] == "cpu"]


def rescued(ledger, rule):
    return [a for a in ledger.get("rescue", {}).get("attempts", []) if a["rule"] == rule and a["kept"]]


noerf = json.load(open(NPU))
del noerf["ops"]["Erf"]
noerf["name"] = "rescue-noerf"
noerf_path = os.path.join(WORK, "rescue-noerf.json")
json.dump(noerf, open(noerf_path, "w"))

# a profile naming a rule tandem does not have is refused (exit 4) with its path
bad = dict(noerf, name="rescue-bad", rescue=["layernorm", "no-such-rule"])
bad_path = os.path.join(WORK, "rescue-bad.json")
json.dump(bad, open(bad_path, "w"))
r = subprocess.run([TANDEM, "plan", os.path.join(CACHE, "models", "transformer_op17.onnx"), "--devices",
                    f"vnpu:{bad_path},cpu"], capture_output=True, text=True)
print(r.stderr.strip())
check(r.returncode == 4 and "rescue[1]" in r.stderr, "a profile with an unknown rescue rule is refused, naming rescue[1]")
r = subprocess.run([TANDEM, "plan", os.path.join(CACHE, "models", "transformer_op17.onnx"), "--rescue", "most"],
                   capture_output=True, text=True)
print(r.stderr.strip())
check(r.returncode == 1 and "'most'" in r.stderr, "--rescue most is a usage error quoting the word")

for name in ("transformer_op13", "transformer_op17"):
    model = os.path.join(CACHE, "models", name + ".onnx")
    refs = os.path.join(CACHE, "refs", name, "inputs.txt")
    if not os.path.exists(model) or not os.path.exists(refs):
        print("model set absent")
        sys.exit(77)
    inputs = dict(line.strip().split("=", 1) for line in open(refs) if "=" in line)
    off, safe = plan(model, NPU, "off"), plan(model, NPU, "safe")
    n_ln = len(fallbacks(off, "LayerNormalization"))
    print(f"{name}: LayerNormalization fallbacks off/safe: {n_ln}/{len(fallbacks(safe, 'LayerNormalization'))}; "
          f"partitions {off['summary']['partitions']} -> {safe['summary']['partitions']}; "
          f"fallback nodes {off['summary']['fallback_nodes']} -> {safe['summary']['fallback_nodes']}")
    check(not fallbacks(safe, "LayerNormalization"), f"{name}: no LayerNormalization falls back with --rescue safe")
    if name == "transformer_op17":
        check(n_ln == 8, f"{name}: 8 LayerNormalization fallbacks without rescue")
        kept = rescued(safe, "layernorm")
        check(len(kept) == n_ln, f"{name}: every LayerNormalization rescued ({len(kept)})")
        check(all(b["device"] == "vnpu:rescue-npu" and b["reason"] == "RESCUED" for a in kept for b in a["became"]),
              f"{name}: the rescued groups run on the device with reason RESCUED")
        check(safe["summary"]["partitions"] < off["summary"]["partitions"], f"{name}: fewer partitions")
    ref = run(model, "cpu", "off", inputs, os.path.join(WORK, name + "-cpu"))
    got = run(model, f"vnpu:{NPU},cpu", "safe", inputs, os.path.join(WORK, name + "-safe"))
    for k in ref:
        d = float(np.max(np.abs(ref[k].astype(np.float64) - got[k])))
        m = float(np.max(np.abs(ref[k])))
        print(f"{name} safe {k}: max |diff| {d:.3g} (max |cpu| {m:.3g})")
        check(d <= 1e-4 * max(1.0, m), f"{name}: outputs with --rescue safe equal cpu's")
    # Erf: only the approximation rescues it
    s2, a2 = plan(model, noerf_path, "safe"), plan(model, noerf_path, "all")
    n_erf = len(fallbacks(s2, "Erf"))
    print(f"{name} without Erf: Erf fallbacks safe/all: {n_erf}/{len(fallbacks(a2, 'Erf'))}; "
          f"partitions {s2['summary']['partitions']} -> {a2['summary']['partitions']}")
    check(n_erf == 4, f"{name}: 4 Erf fallbacks with --rescue safe")
    check(not fallbacks(a2, "Erf") and len(rescued(a2, "erf-tanh")) == n_erf, f"{name}: Erf rescued with --rescue all")
    got = run(model, f"vnpu:{noerf_path},cpu", "all", inputs, os.path.join(WORK, name + "-all"))
    for k in ref:
        a, b = ref[k].astype(np.float64).ravel(), got[k].astype(np.float64).ravel()
        cos = float(a @ b / np.sqrt((a @ a) * (b @ b)))
        print(f"{name} all {k}: cosine {cos:.7f}, max |diff| {np.max(np.abs(a - b)):.3g}")
        check(cos >= 0.9999, f"{name}: outputs with --rescue all within cosine 0.9999 of cpu's")

if failures:
    sys.exit("failed: " + "; ".join(failures))
print("all ok")
