#!/usr/bin/env python3
"""Kept rescues checked on the inputs that reach them (ctest rescue.verify, rescue.verify_npu).

  cli_verify.py plugin TANDEM PLUGIN TEST_VERIFY WORKDIR
  cli_verify.py npu    TANDEM CACHE NPU_PROFILE WORKDIR

plugin: Y = HardSwish(X) + X (tests/plugin_rewrite/gen_model.py) on the example
plugin, X of N(0, 4) with 5000, -5000, 2000, 999, 1000, 1001 among it.
  rewrite=4 ("hardswish-upto1000", exact for x <= 1000, wrong above) passes
            the synthetic check (`plan --json`: kept, run_check pending) and is
            dropped at the first run: `tandem run` says so on stderr with the
            figures, the ledger's attempt has the synthetic and first-run
            checks, the node HardSwish on cpu with the sentence in its detail,
            outputs equal cpu's;
  rewrite=1 (right) stays, with first-run figures in the ledger;
  calibration `plan --json --calibration-input` shows the result: rewrite=4
            dropped on set 1, rewrite=1 kept with both sets' figures;
  --verify off leaves rewrite=4 unchecked and says so (stderr, ledger), and its
            outputs are off by 4000 — what the check prevents;
  and the C API half (test_verify: TDM_EVENT_REPLAN, second runs).
npu: transformer_op17 on rescue-npu.json (fp32) with its reference inputs:
  its 8 LayerNormalization rescues stay, each with first-run figures, and the
  outputs match onnxruntime's. Exit 77 when the model set is absent.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "plugin_rewrite"))
from clitest import Cli  # noqa: E402

cli = Cli(sys.argv[2])
check = cli.check


def tandem(args):
    r = cli.tandem(args)
    if r.returncode != 0:
        cli.finish()
    return r


def attempt(ledger, rule):
    a = [x for x in ledger.get("rescue", {}).get("attempts", []) if x["rule"] == rule]
    return a[0] if len(a) == 1 else {}


def checks(a):
    return [(c["inputs"], c.get("set"), c["pass"]) for c in a.get("verification", {}).get("checks", [])]


def node(ledger, name):
    return next((n for n in ledger["nodes"] if n["name"] == name), {})


def plugin_cases(plugin, test_verify, work):
    import gen_model
    gen_model.write(work)
    model = os.path.join(work, "hardswish.onnx")
    x = np.load(os.path.join(work, "x.npy"))
    x.flat[10:16] = [5000, -5000, 2000, 999, 1000, 1001]
    xp = os.path.join(work, "x5000.npy")
    np.save(xp, x)
    dev = lambda k: ["--plugin", plugin, "--devices", f"example:rewrite={k},cpu"]

    def run(k, name, extra=()):
        out, led = os.path.join(work, name), os.path.join(work, name + ".json")
        r = tandem(["run", model] + dev(k) + ["--input", f"X={xp}", "--output-dir", out, "--overwrite", "--ledger",
                                              led] + list(extra))
        return np.load(os.path.join(out, "Y.npy")), json.load(open(led)), r.stderr

    ref, _, _ = run(0, "cpu", ["--devices", "cpu"])
    m = float(np.max(np.abs(ref)))

    rule4 = "plugin:example:hardswish-upto1000"
    p4 = json.loads(tandem(["plan", model] + dev(4) + ["--json"]).stdout)
    a = attempt(p4, rule4)
    check(a.get("kept") is True and a["verification"].get("run_check", "").startswith("pending") and
          checks(a) == [("synthetic", None, True)], "rewrite=4: the synthetic check passes it (plan: kept, pending)")

    y, led, err = run(4, "rw4")
    a = attempt(led, rule4)
    why = a.get("why", "")
    print("rewrite=4 first run:", why)
    print("stderr:", err.strip())
    check(not a.get("kept", True) and why.startswith(f"rescue {rule4} failed verification on the first run's inputs: "
                                                     "max |diff| 4e+03 over the allowed 0.05, cosine "),
          "rewrite=4: dropped at the first run, the figures in its sentence")
    check(checks(a) == [("synthetic", None, True), ("first-run", None, False)] and
          a["verification"]["pass"] is False and a["verification"]["run_check"].startswith("dropped"),
          "rewrite=4: the ledger's attempt lists the synthetic (pass) and first-run (fail) checks")
    hs = node(led, "hs")
    check(hs.get("device") == "cpu" and why in hs.get("detail", ""), "rewrite=4: HardSwish on cpu, the sentence in its detail")
    check("rescue: 1 rewrite dropped before any output was returned" in err and "max |diff| 4e+03" in err,
          "rewrite=4: tandem run says so on stderr")
    check(float(np.max(np.abs(y.astype(np.float64) - ref))) == 0, "rewrite=4: outputs equal cpu's")

    y, led, err = run(1, "rw1")
    a = attempt(led, "plugin:example:hardswish-relu")
    first = [c for c in a.get("verification", {}).get("checks", []) if c["inputs"] == "first-run"]
    print("rewrite=1 first run:", first)
    check(a.get("kept") is True and len(first) == 1 and first[0]["pass"] and first[0]["max_abs"] <= first[0]["allowed"]
          and first[0]["ref_max_abs"] == 5000 and a["verification"]["run_check"].startswith("done"),
          "rewrite=1: kept, first-run figures in the ledger")
    check("rescue:" not in err, "rewrite=1: nothing on stderr about the rescue")
    check(float(np.max(np.abs(y.astype(np.float64) - ref))) <= 1e-5 * max(1.0, m), "rewrite=1: outputs equal cpu's")

    cal = ["--calibration-input", f"X={xp}", "--calibration-input", f"X={os.path.join(work, 'x.npy')}", "--json"]
    p = json.loads(tandem(["plan", model] + dev(4) + cal).stdout)
    a = attempt(p, rule4)
    print("calibration rewrite=4:", a.get("why"))
    check(not a.get("kept", True) and "failed verification on calibration input set 1: max |diff|" in a.get("why", "")
          and checks(a) == [("synthetic", None, True), ("calibration", 1, False)] and node(p, "hs").get("device") == "cpu",
          "calibration: plan --json shows rewrite=4 dropped on set 1")
    p = json.loads(tandem(["plan", model] + dev(1) + cal).stdout)
    a = attempt(p, "plugin:example:hardswish-relu")
    check(a.get("kept") is True and checks(a) == [("synthetic", None, True), ("calibration", 1, True),
                                                  ("calibration", 2, True)],
          "calibration: plan --json shows rewrite=1 kept with both sets' figures")

    y, led, err = run(4, "off", ["--verify", "off"])
    a = attempt(led, rule4)
    d = float(np.max(np.abs(y.astype(np.float64) - ref)))
    print("verify off:", err.strip(), "max |diff|", d)
    check(a.get("kept") is True and checks(a) == [("synthetic", None, True)] and
          a["verification"]["run_check"].startswith("off (--verify off)") and
          "verified on synthetic inputs only, not on this run's (--verify off)" in err,
          "--verify off: the rescue stays unverified and tandem run says so")
    check(abs(d - 4000) < 1, f"--verify off: its outputs are off by {d:.0f} (what the check prevents)")

    r = subprocess.run([test_verify, model, plugin], capture_output=True, text=True, env=cli.env, timeout=300)
    print(r.stdout.strip())
    check(r.returncode == 0, "test_verify (C API): " + (r.stdout.strip().splitlines() or [""])[-1])


def npu_cases(cache, npu, work):
    model = os.path.join(cache, "models", "transformer_op17.onnx")
    refs = os.path.join(cache, "refs", "transformer_op17")
    if not os.path.exists(model) or not os.path.isdir(refs):
        print("model set absent")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    out, led = os.path.join(work, "out"), os.path.join(work, "ledger.json")
    r = tandem(["run", model, "--devices", f"vnpu:{npu},cpu", "--input",
                f"input={os.path.join(refs, 'inputs', 'input.npy')}", "--output-dir", out, "--overwrite",
                "--ledger", led])
    led = json.load(open(led))
    kept = [a for a in led["rescue"]["attempts"] if a["kept"] and a["rule"] == "layernorm"]
    firsts = [c for a in kept for c in a["verification"]["checks"] if c["inputs"] == "first-run"]
    worst = max((c["max_abs"] for c in firsts), default=float("nan"))
    cos = min((c["cosine"] for c in firsts), default=float("nan"))
    print(f"transformer_op17: {len(kept)} layernorm rescues kept, first-run max |diff| <= {worst:.3g}, "
          f"cosine >= {cos:.7f}; first run cost {led['guard'].get('first_run_extra_ms', -1):.0f} ms more")
    check(len(kept) == 8 and len(firsts) == 8 and all(c["pass"] for c in firsts) and
          all(a["verification"]["run_check"].startswith("done") for a in kept),
          "transformer_op17 on rescue-npu (fp32): 8 LayerNormalization rescues stay, each with first-run figures")
    check("rescue:" not in r.stderr, "transformer_op17: nothing on stderr about the rescues")
    got = np.load(os.path.join(out, "output.npy")).astype(np.float64)
    ref = np.load(os.path.join(refs, "outputs", "output.npy")).astype(np.float64)
    d = float(np.max(np.abs(got - ref)))
    check(d <= 1e-4 * max(1.0, float(np.max(np.abs(ref)))), f"transformer_op17: outputs match onnxruntime's ({d:.3g})")


if sys.argv[1] == "plugin":
    plugin_cases(sys.argv[3], sys.argv[4], sys.argv[5])
else:
    npu_cases(sys.argv[3], sys.argv[4], sys.argv[5])
cli.finish()
