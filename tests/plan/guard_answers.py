#!/usr/bin/python3
"""The precision guard's "done when" (issue 16): with no calibration file and
no flags, on a shipped reduced-precision profile, a model gives cpu's answer.

usage: guard_answers.py TANDEM CACHE MODEL PROFILE [--before]

Runs `tandem run CACHE/models/MODEL.onnx` on the realistic inputs
(CACHE/refs/MODEL/inputs.txt) twice: on `--devices cpu` and on
`--devices vnpu:PROFILE,cpu` with no other flag (the guard on by default),
then checks, against tandem's cpu outputs:
  - the answer, by tests/models/semantic.py: a detector's text boxes
    (threshold 0.3, connected regions), a CTC recogniser's string (and the
    rendered text), a classifier's top-1 (1 x C, C >= 100);
  - every float output's cosine >= 0.999 (the probability map's included);
  - a small classifier's top-1 too (ppocr_cls: 1 x 2, below semantic.py's
    C >= 100).
Prints one line per check and a last line "row: ..." with the guard's
figures from the ledger (nodes moved, the first, output cosine before and
after, first-run extra ms, the guarded run's wall time). The guard must be
active unless the plan puts no node on the profile's device. --before also runs with
`--verify off` and prints that answer (for the README table; not checked).
Exits 1 when a check fails, 77 (skipped) when the model or its inputs are
not in CACHE.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import semantic  # noqa: E402  (tests/models/semantic.py)


def run(tandem, model, inputs, devices, out, extra=()):
    cmd = [tandem, "run", model, "--devices", devices, "--output-dir", out] + list(extra)
    for line in inputs:
        cmd += ["--input", line]
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    secs = time.monotonic() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("FAIL: %s exited %d" % (" ".join(cmd), p.returncode))
    return p.stderr, secs


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    if not np.all(np.isfinite(a)):
        return 0.0
    na, nb = float(a @ a), float(b @ b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b) / np.sqrt(na * nb)


def outputs(folder):
    return {f[:-4]: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def answer(model_path, outs):
    """A short human form of the answer (for --before)."""
    words = []
    for name, t in outs.items():
        if not np.issubdtype(t.dtype, np.floating):
            continue
        if t.ndim == 4 and t.shape[:2] == (1, 1):
            words.append("%d boxes" % len(semantic.regions(t[0, 0] > 0.3)))
        elif t.ndim == 3:
            chars = semantic.characters(model_path) or []
            if len(chars) == t.shape[2]:
                words.append(repr(semantic.ctc_decode(t, chars)))
        elif t.ndim == 2 and t.shape[0] == 1:
            words.append("top-1 %d" % int(t.argmax()))
    return ", ".join(words)


def main(argv):
    if len(argv) not in (5, 6) or (len(argv) == 6 and argv[5] != "--before"):
        sys.stderr.write(__doc__)
        return 2
    tandem, cache, name, profile = argv[1:5]
    model = os.path.join(cache, "models", name + ".onnx")
    case = os.path.join(cache, "refs", name)
    if not os.path.isfile(model) or not os.path.isfile(os.path.join(case, "inputs.txt")):
        print("skipped: %s or %s/inputs.txt is missing (make data)" % (model, case))
        return 77
    with open(os.path.join(case, "inputs.txt")) as f:
        inputs = [line.strip() for line in f if line.strip()]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="tandem-guard-answers.") as tmp:
        cpu_dir, npu_dir = os.path.join(tmp, "cpu"), os.path.join(tmp, "npu")
        ledger = os.path.join(tmp, "ledger.json")
        run(tandem, model, inputs, "cpu", cpu_dir)
        err, secs = run(tandem, model, inputs, "vnpu:%s,cpu" % profile, npu_dir, ["--ledger", ledger])
        sys.stdout.write("".join("stderr: " + line + "\n" for line in err.splitlines()))
        sys.stdout.flush()
        rc = subprocess.run([sys.executable, os.path.join(os.path.dirname(semantic.__file__), "semantic.py"),
                             npu_dir, cpu_dir, model, case]).returncode
        failed += rc != 0
        ref, got = outputs(cpu_dir), outputs(npu_dir)
        for k, r in ref.items():
            if k not in got or not np.issubdtype(r.dtype, np.floating):
                continue
            c = cosine(got[k], r)
            ok = got[k].shape == r.shape and c >= 0.999
            print("%s: %s cosine %.6f against cpu" % (k, "ok" if ok else "FAIL", c))
            failed += not ok
            if r.ndim == 2 and r.shape[0] == 1 and 2 <= r.shape[1] < 100:
                ok = int(got[k].argmax()) == int(r.argmax())
                print("%s: %s top-1 class %d (cpu %d)" % (k, "ok" if ok else "FAIL", got[k].argmax(), r.argmax()))
                failed += not ok
        with open(ledger) as f:
            led = json.load(f)
        g = led.get("guard", {})
        on_npu = sum(n.get("device") == "vnpu:" + profile for n in led.get("nodes", []))
        if not g.get("active") and on_npu:
            print("FAIL: the precision guard is not active on vnpu:%s with %d nodes there" % (profile, on_npu))
            failed += 1
        elif not g.get("active"):
            print("guard inactive: the plan puts no node on vnpu:%s (nothing to guard)" % profile)
        if any(d.get("kind") == "unverified" for d in g.get("decisions", [])):
            print("FAIL: the guard left the outputs unverified: %r" % g.get("decisions"))
            failed += 1
        before = ""
        if len(argv) == 6:
            off_dir = os.path.join(tmp, "off")
            _, off_secs = run(tandem, model, inputs, "vnpu:%s,cpu" % profile, off_dir, ["--verify", "off"])
            off = outputs(off_dir)
            worst = min((cosine(off[k], r) for k, r in ref.items() if k in off and
                         np.issubdtype(r.dtype, np.floating)), default=1.0)
            before = " | before (--verify off, %.1f s): cosine %.6f, %s; cpu: %s" % (
                off_secs, worst, answer(model, off), answer(model, ref))
        print("row: %s | %s | moved %d | %s | cosine before %s after %s | first-run extra ms %.0f | "
              "guarded run s %.1f%s" % (name, profile, g.get("moved_nodes", 0), g.get("first_moved", ""),
                                         g.get("output_cosine_before", "-"), g.get("output_cosine_after", "-"),
                                         g.get("first_run_extra_ms", -1), secs, before))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
