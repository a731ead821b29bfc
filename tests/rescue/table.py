#!/usr/bin/env python3
"""The README "Rescue" table, measured with the CLI (not a test).

  table.py TANDEM CACHE [MODEL ...]

For every model (default: the model set) x shipped vnpu profile: with
--rescue off, safe and all, the fallback nodes, partitions and modeled
estimate (`tandem plan --json`; the PP-OCR models at the SHAPES below), the rescues kept, and — where a rescue
was kept — the output error of `tandem run` (the refs' inputs) against
`tandem run --devices cpu`: cosine and max |diff| / max |cpu| of the worst
output. Prints markdown rows; combinations where no rule was even tried
are listed at the end.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

TANDEM, CACHE = sys.argv[1:3]
MODELS = sys.argv[3:] or ["resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0", "efficientnet_b0",
                          "transformer_op13", "transformer_op17", "ppocr_det", "ppocr_rec", "ppocr_cls", "silero_vad"]
PROFILES = ["edge-npu", "server-npu", "rk3588", "qnn-htp", "coreml-ane", "intel-npu"]
# models with dynamic image sizes are planned at one size (static-shape profiles refuse unknown dimensions)
SHAPES = {"ppocr_det": "x=1x3x640x640", "ppocr_rec": "x=1x3x48x320", "ppocr_cls": "x=1x3x48x192"}
MODES = ["off", "safe", "all"]


def plan(model, profile, mode):
    r = subprocess.run([TANDEM, "plan", model, "--devices", f"vnpu:{profile},cpu", "--rescue", mode, "--json"]
                       + shape_args(model), capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def shape_args(model):
    shape = SHAPES.get(os.path.basename(model)[:-5])
    return ["--shape", shape] if shape else []


def run(model, devices, mode, inputs):
    out = tempfile.mkdtemp()
    cmd = [TANDEM, "run", model, "--devices", devices, "--rescue", mode, "--output-dir", out] + shape_args(model)
    for k, v in inputs.items():
        cmd += ["--input", f"{k}={v}"]
    if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
        return None
    return {f: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out)) if f.endswith(".npy")}


def error(ref, got):
    if got is None:
        return "run failed"
    worst = (1.0, 0.0)
    for k in ref:
        a, b = ref[k].astype(np.float64).ravel(), got[k].astype(np.float64).ravel()
        if not np.issubdtype(ref[k].dtype, np.floating):
            continue
        n = np.sqrt((a @ a) * (b @ b))
        cos = float(a @ b / n) if n > 0 else 1.0
        rel = float(np.max(np.abs(a - b)) / max(1e-30, np.max(np.abs(a))))
        worst = (min(worst[0], cos), max(worst[1], rel))
    return f"{worst[0]:.6f} / {worst[1]:.1e}"


print("| model | profile | fallbacks off / safe / all | partitions off / safe / all | modeled ms off / safe / all "
      "| kept (safe / all) | output vs cpu (cosine / max rel.) off · safe · all |")
print("|---|---|---|---|---|---|---|")
untouched = []
for m in MODELS:
    model = os.path.join(CACHE, "models", m + ".onnx")
    refs = os.path.join(CACHE, "refs", m, "inputs.txt")
    inputs = dict(line.strip().split("=", 1) for line in open(refs) if "=" in line) if os.path.exists(refs) else {}
    ref = None
    for p in PROFILES:
        ps = {md: plan(model, p, md) for md in MODES}
        if any(v is None for v in ps.values()):
            untouched.append(f"{m} × {p} (plan failed)")
            continue
        tried = {md: ps[md].get("rescue", {}).get("attempts", []) for md in MODES}
        kept = {md: [a for a in tried[md] if a["kept"]] for md in MODES}
        if not tried["safe"] and not tried["all"]:
            untouched.append(f"{m} × {p}")
            continue
        s = {md: ps[md]["summary"] for md in MODES}
        errs = "–"
        if (kept["safe"] or kept["all"]) and inputs:
            if ref is None:
                ref = run(model, "cpu", "off", inputs)
            errs = " · ".join(error(ref, run(model, f"vnpu:{p},cpu", md, inputs)) for md in MODES)

        def rules(md):
            c = {}
            for a in kept[md]:
                c[a["rule"]] = c.get(a["rule"], 0) + 1
            return ", ".join(f"{k} ×{v}" for k, v in sorted(c.items())) or "none"

        print(f"| {m} | {p} | {' / '.join(str(s[md]['fallback_nodes']) for md in MODES)} | "
              f"{' / '.join(str(s[md]['partitions']) for md in MODES)} | "
              f"{' / '.join('%.3f' % s[md]['estimated_ms']['total'] for md in MODES)} | "
              f"{rules('safe')} / {rules('all')} | {errs} |")
        for a in tried["all"]:
            if not a["kept"]:
                print(f"<!-- {m} {p}: {a['rule']} on {a['node']} not kept: {a.get('why', '')} -->")
print()
print("No rule applies (nothing rejected that a rule rewrites): " + "; ".join(untouched))
