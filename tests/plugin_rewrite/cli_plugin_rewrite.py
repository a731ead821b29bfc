#!/usr/bin/env python3
"""A plugin's own rescue rewrite (device ABI 3) through the CLI (ctest rescue.plugin_rewrite).

  cli_plugin_rewrite.py TANDEM PLUGIN PLUGIN_V1 WORKDIR

The example plugin has Relu, Sigmoid, Add and Mul but no HardSwish (nor the
Clip of tandem's own hardswish rule). On Y = HardSwish(X) + X:
  rewrite=0  the plugin offers nothing: HardSwish falls back to cpu
             (OP_UNSUPPORTED), the built-in rule is refused naming Clip;
  rewrite=1  its rewrite (Relu/Add/Mul) is kept: rule
             plugin:example:hardswish-relu, 9 nodes RESCUED on the plugin,
             no fallback, verification figures in the ledger, outputs equal
             cpu's (max |diff| <= 1e-5 x max |cpu|);
  rewrite=2  its wrong rewrite (no clamp at 1) is refused by verification
             with the figures in the sentence; HardSwish falls back;
  rewrite=3  its malformed rewrite (reads a value nothing produces) is
             refused with a sentence; HardSwish falls back;
  the version-1 build (whose table still carries rewrite) loads and runs,
  and tandem does not ask it for a rewrite.
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model  # noqa: E402

TANDEM, PLUGIN, PLUGIN_V1, WORK = sys.argv[1:5]
gen_model.write(WORK)
MODEL, X = os.path.join(WORK, "hardswish.onnx"), os.path.join(WORK, "x.npy")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def tandem(args):
    r = subprocess.run([TANDEM] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tandem {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def plan(plugin, args):
    return json.loads(tandem(["plan", MODEL, "--plugin", plugin, "--devices", f"example:{args},cpu", "--json"]))


def run(plugin, devices, out):
    tandem(["run", MODEL, "--plugin", plugin, "--devices", devices, "--input", f"X={X}", "--output-dir", out,
            "--overwrite"])
    return np.load(os.path.join(out, "Y.npy"))


def node(ledger, name):
    return next((n for n in ledger["nodes"] if n["name"] == name), None)


def attempts(ledger, rule):
    return [a for a in ledger.get("rescue", {}).get("attempts", []) if a["rule"] == rule]


ref = run(PLUGIN, "cpu", os.path.join(WORK, "cpu"))

# no rewrite offered
p0 = plan(PLUGIN, "rewrite=0")
hs = node(p0, "hs")
check(hs is not None and hs["device"] == "cpu" and hs["reason"] == "OP_UNSUPPORTED",
      "rewrite=0: HardSwish falls back to cpu (OP_UNSUPPORTED)")
builtin = attempts(p0, "hardswish")
check(len(builtin) == 1 and not builtin[0]["kept"] and "Clip" in builtin[0]["why"],
      "rewrite=0: the built-in hardswish rule is refused naming Clip")
check(not [a for a in p0["rescue"]["attempts"] if a["rule"].startswith("plugin:")], "rewrite=0: no plugin attempt")

# the plugin's rewrite, kept
p1 = plan(PLUGIN, "rewrite=1")
kept = attempts(p1, "plugin:example:hardswish-relu")
check(len(kept) == 1 and kept[0]["kept"] and kept[0]["device"] == "example",
      "rewrite=1: rule plugin:example:hardswish-relu kept for example")
became = kept[0].get("became", []) if kept else []
print("became:", " ".join(f"{b['op']}@{b['device']}/{b['reason']}" for b in became))
check(len(became) == 9 and all(b["device"] == "example" and b["reason"] == "RESCUED" for b in became) and
      {b["op"] for b in became} == {"Mul", "Add", "Relu"},
      "rewrite=1: its 9 Mul/Add/Relu nodes run on example with reason RESCUED")
v = kept[0].get("verification", {}) if kept else {}
print("verification:", v)
check(v.get("pass") is True and v.get("max_abs", 1) <= 1e-5 * max(1.0, v.get("ref_max_abs", 0)) and
      v.get("cosine", 0) >= 0.99999 and v.get("input_sets") == 2, "rewrite=1: verified on cpu fp32 with figures")
check(node(p1, "hs") is None and p1["summary"]["fallback_nodes"] == 0 and p1["summary"]["partitions"] == 1,
      f"rewrite=1: no fallback, one partition ({p1['summary']['fallback_nodes']}, {p1['summary']['partitions']})")
n0 = node(p1, "hs/rescue/Mul_0") or {}
check("plugin:example:hardswish-relu" in n0.get("detail", ""), "rewrite=1: the node's ledger detail names the rule")
text = tandem(["plan", MODEL, "--plugin", PLUGIN, "--devices", "example:rewrite=1,cpu", "--nodes"])
check("plugin:example:hardswish-relu 1;" in text and "RESCUED plugin:example:hardswish-relu (decompose)" in text,
      "rewrite=1: tandem plan's story and rescued block name the rule")
got = run(PLUGIN, "example:rewrite=1,cpu", os.path.join(WORK, "rw1"))
d, m = float(np.max(np.abs(ref.astype(np.float64) - got))), float(np.max(np.abs(ref)))
print(f"rewrite=1: max |diff| {d:.3g} against cpu (max |cpu| {m:.3g})")
check(d <= 1e-5 * max(1.0, m), "rewrite=1: outputs equal cpu's")

# a wrong rewrite, refused by verification
p2 = plan(PLUGIN, "rewrite=2")
bad = attempts(p2, "plugin:example:hardswish-noclamp")
why = bad[0].get("why", "") if bad else ""
print("rewrite=2:", why)
check(len(bad) == 1 and not bad[0]["kept"] and "verification on cpu fp32 failed" in why and "max |diff|" in why and
      bad[0].get("verification", {}).get("pass") is False, "rewrite=2: refused by verification, figures in the sentence")
hs = node(p2, "hs")
check(hs is not None and hs["device"] == "cpu" and hs["reason"] == "OP_UNSUPPORTED", "rewrite=2: HardSwish falls back")
got = run(PLUGIN, "example:rewrite=2,cpu", os.path.join(WORK, "rw2"))
check(float(np.max(np.abs(ref.astype(np.float64) - got))) <= 1e-6 * max(1.0, m), "rewrite=2: outputs equal cpu's")

# a malformed rewrite (reads a value nothing makes): refused with a sentence
p3 = plan(PLUGIN, "rewrite=3")
bad = attempts(p3, "plugin:example:hardswish-broken")
why = bad[0].get("why", "") if bad else ""
print("rewrite=3:", why)
check(len(bad) == 1 and not bad[0]["kept"] and "does not build" in why and "no node produces" in why,
      "rewrite=3: a malformed rewrite is refused with a sentence")
hs = node(p3, "hs")
check(hs is not None and hs["device"] == "cpu", "rewrite=3: HardSwish falls back")

# a version-1 plugin: loads, runs, is not asked
pv1 = plan(PLUGIN_V1, "rewrite=1")
hs = node(pv1, "hs")
check(hs is not None and hs["device"] == "cpu" and not [a for a in pv1.get("rescue", {}).get("attempts", [])
                                                         if a["rule"].startswith("plugin:")],
      "version-1 plugin: loads, HardSwish falls back, its rewrite member is not read")
got = run(PLUGIN_V1, "example,cpu", os.path.join(WORK, "v1"))
check(float(np.max(np.abs(ref.astype(np.float64) - got))) <= 1e-6 * max(1.0, m), "version-1 plugin: outputs equal cpu's")

if failures:
    sys.exit("failed: " + "; ".join(failures))
print("all ok")
