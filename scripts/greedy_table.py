#!/usr/bin/env python3
"""Greedy against auto on the shipped vendor profiles (issue 17): one markdown
row per model x profile with partitions, fallbacks by reason, boundary bytes
and modeled ms. Usage: greedy_table.py TANDEM MODELS_DIR"""
import collections, json, subprocess, sys

SHAPES = {"ppocr_det": ["x=1x3x640x640"], "ppocr_rec": ["x=1x3x48x320"], "ppocr_cls": ["x=1x3x48x192"],
          "silero_vad": ["input=1x576", "state=2x1x128"]}
MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0", "efficientnet_b0",
          "transformer_op13", "transformer_op17", "ppocr_det", "ppocr_rec", "ppocr_cls", "silero_vad"]
PROFILES = ["rk3588", "qnn-htp", "coreml-ane", "intel-npu"]


def plan(tandem, path, prof, gran, shapes):
    cmd = [tandem, "plan", path, "--devices", f"vnpu:{prof},cpu", "--granularity", gran, "--json"]
    for s in shapes:
        cmd += ["--shape", s]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[0] if r.stderr else f"exit {r.returncode}"
    return json.loads(r.stdout), None


def cell(d):
    s = d["summary"]
    fb = collections.Counter(n["reason"] for n in d["nodes"] if n["device"] == "cpu" and n["reason"] != "OK")
    reasons = ", ".join(f"{v} {k}" for k, v in sorted(fb.items(), key=lambda kv: -kv[1])) or "0"
    ms = s["estimated_ms"]["total"] if isinstance(s.get("estimated_ms"), dict) else s.get("estimated_ms")
    return f"{s['partitions']} | {reasons} | {s['boundary_bytes']:,} | {ms:.3f}"


def main():
    tandem, models = sys.argv[1], sys.argv[2]
    print("| model | profile | greedy: partitions | fallbacks | boundary B | ms | auto: partitions | fallbacks | boundary B | ms |")
    print("|---|---|---:|---|---:|---:|---:|---|---:|---:|")
    for m in MODELS:
        for p in PROFILES:
            row = [m, p]
            for g in ("greedy", "auto"):
                d, err = plan(tandem, f"{models}/{m}.onnx", p, g, SHAPES.get(m, []))
                row.append(cell(d) if d else f"- | error: {err[:60]} | - | -")
            print("| " + " | ".join(row) + " |", flush=True)


main()
