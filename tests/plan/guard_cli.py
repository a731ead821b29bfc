#!/usr/bin/python3
"""The precision guard through `tandem run` (src/run/guard.h), one case per
argument: guard_cli.py TANDEM MODELS_DIR CASE
  overflow   an fp16 overflow: the probe refuses the node (PRECISION, cause
             overflow, the figure in the sentence); outputs equal cpu's
  underflow  values that flush to zero in fp16: refused with cause "flush to
             zero"
  chain      error accumulated along 20 Adds that no single node shows flips
             a Softmax head's top-1: with --verify off the answer differs
             from cpu's; by default the probe's chain rule refuses the node
             where it crosses 0.99; with --min-cosine 0.5 output
             verification finds the crossing node; the answer is cpu's
  sampled    --verify every:2 checks runs 1, 3, 5 of 5; first checks one
  nofire     vnpu:fp32-all: the guard is not active, nothing is refused, no
             stderr line; a benign net on fp16: active, nothing moves
  policy     --fallback deny names every node the guard moved; a malformed
             --verify exits 1
  static     a profile's precision_sensitive op is kept off the fp16 device
             until the probe shows it safe
  calibration  --calibration-input: a calibration set that overflows fp16
             makes the guard refuse the node at load although the first
             run's input would not (NAME=FILE, a folder, a lone FILE; two
             sets combine: any set that shows it); a harmless calibration
             set and an overflowing first run: the first run is still
             verified and re-planned (cause output verification); a bad
             file or a wrong name: one sentence naming it, exit 2
  diag       profile and report show the plan the guard left, not the one
             it replaced: g_mul2 on cpu with PRECISION in profile --json, the
             report's node list and its summary; plan --calibration-input
             shows the plan the guard makes of it
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

tandem, models, case = sys.argv[1:4]
failures = []
NPU = "vnpu:server-npu,cpu"


def run(args):
    p = subprocess.run([tandem] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def model(name):
    return os.path.join(models, name + ".onnx")


def go(name, x, devices=NPU, extra=()):
    """Runs name; returns (rc, stderr, ledger, y)."""
    with tempfile.TemporaryDirectory() as d:
        ledger, out = os.path.join(d, "l.json"), os.path.join(d, "out")
        rc, _, err = run(["run", model(name), "--devices", devices, "--input", "x=" + os.path.join(models, x),
                          "--ledger", ledger, "--output-dir", out] + list(extra))
        led = json.load(open(ledger)) if rc == 0 else {}
        y = np.load(os.path.join(out, "y.npy")) if rc == 0 else None
        return rc, err, led, y


def refused(led):
    return {r["node"]: r for r in led.get("precision", {}).get("refused", [])}


def same_as_cpu(name, x, y, tol):
    _, _, _, ref = go(name, x, "cpu")
    return ref is not None and y is not None and np.allclose(y, ref, rtol=tol, atol=tol)


if case == "overflow":
    rc, err, led, y = go("guard_overflow", "guard_x64.npy")
    check(rc == 0, "overflow: run exits 0 (%s)" % err)
    r = refused(led)
    check("g_mul2" in r and r["g_mul2"]["cause"] == "overflow" and r["g_mul2"]["source"] == "guard",
          "overflow: g_mul2 refused for overflow by the guard: %s" % r)
    check("g_mul1" not in r, "overflow: g_mul1 (max 300) is not refused")
    det = [n for n in led.get("nodes", []) if n["name"] == "g_mul2"]
    check(det and det[0]["reason"] == "PRECISION" and "9e+04 overflows float16" in json.dumps(det[0]),
          "overflow: the node's sentence gives the figure: %s" % det)
    check("precision guard: " in err and "moved" in err, "overflow: one stderr line: %r" % err)
    check(len([l for l in err.splitlines() if "precision guard" in l]) == 1, "overflow: exactly one line")
    check(same_as_cpu("guard_overflow", "guard_x64.npy", y, 1e-3), "overflow: outputs are cpu's")
    rc, err, led, y = go("guard_overflow", "guard_x64.npy", extra=["--verify", "off"])
    check(rc == 0 and not np.isfinite(y).all(), "overflow: without the guard the output is not finite")
    check("precision guard" not in err and "guard" not in led, "overflow: --verify off says nothing")
elif case == "underflow":
    rc, err, led, y = go("guard_underflow", "guard_x64.npy")
    check(rc == 0, "underflow: run exits 0 (%s)" % err)
    r = refused(led)
    check("u_mul2" in r and r["u_mul2"]["cause"] == "flush to zero", "underflow: u_mul2 refused, flush: %s" % r)
    check("u_mul1" not in r, "underflow: u_mul1 (1e-4) is not refused")
    check(same_as_cpu("guard_underflow", "guard_x64.npy", y, 1e-3), "underflow: outputs are cpu's")
    rc, err, led, y = go("guard_underflow", "guard_x64.npy", extra=["--verify", "off"])
    check(rc == 0 and np.abs(y).max() < 0.5, "underflow: without the guard the output collapses (%s)" % y)
elif case == "chain":
    rc, err, led, y0 = go("guard_chain", "guard_chain_x.npy", extra=["--verify", "off"])
    _, _, _, ref = go("guard_chain", "guard_chain_x.npy", "cpu")
    check(rc == 0 and y0.argmax() != ref.argmax(), "chain: fp16 without the guard flips the top-1 (%s vs %s)" % (y0, ref))
    # the probe: no node alone, but the chain crosses the per-node threshold at the Softmax
    rc, err, led, y = go("guard_chain", "guard_chain_x.npy")
    check(rc == 0 and y.argmax() == ref.argmax(), "chain: with the guard the top-1 is cpu's (%s)" % y)
    r = refused(led)
    check(list(r) == ["c_softmax"] and r["c_softmax"]["kind"] == "accumulated", "chain: the probe's chain rule: %s" % r)
    # a per-node threshold the chain never crosses: output verification finds the crossing node
    rc, err, led, y = go("guard_chain", "guard_chain_x.npy", extra=["--min-cosine", "0.5"])
    check(rc == 0 and y.argmax() == ref.argmax(), "chain: verification gives cpu's top-1 (%s)" % y)
    g = led.get("guard", {})
    dec = [d for d in g.get("decisions", []) if d["kind"] == "verify"]
    check(g.get("breaches", 0) >= 1 and dec and dec[0]["node"].startswith("c_") and "output 'y'" in dec[0]["why"],
          "chain: verification found the crossing node: %s" % g)
    probe = [d for d in g.get("decisions", []) if d["kind"] == "probe"]
    check(probe and not probe[0]["refused"], "chain: no single node shows it (the probe refuses none)")
    r = refused(led)
    check(any(v["cause"] == "output verification" for v in r.values()), "chain: PRECISION from verification: %s" % r)
elif case == "sampled":
    rc, err, led, _ = go("guard_benign", "guard_benign_x.npy", extra=["--verify", "every:2", "--repeat", "5"])
    check(rc == 0 and led.get("guard", {}).get("checks") == 3, "sampled: every:2 checks 3 of 5 runs: %s" % led.get("guard"))
    rc, err, led, _ = go("guard_benign", "guard_benign_x.npy", extra=["--repeat", "5"])
    check(rc == 0 and led.get("guard", {}).get("checks") == 1, "sampled: first checks 1 of 5 runs")
    rc, err, led, _ = go("guard_chain", "guard_chain_x.npy", extra=["--verify", "every:1", "--repeat", "3",
                                                                 "--min-cosine", "0.5"])
    check(rc == 0 and led.get("guard", {}).get("checks") == 3 and led["guard"].get("breaches") == 1,
          "sampled: after the fix, later checked runs do not breach: %s" % led.get("guard"))
elif case == "nofire":
    for name, x in [("guard_benign", "guard_benign_x.npy"), ("guard_overflow", "guard_x64.npy"),
                    ("guard_chain", "guard_chain_x.npy")]:
        rc, err, led, _ = go(name, x, "vnpu:fp32-all,cpu")
        check(rc == 0 and "guard" not in led and not refused(led) and "precision guard" not in err,
              "nofire: %s on fp32-all: the guard does not fire (%s)" % (name, err))
    rc, err, led, _ = go("guard_benign", "guard_benign_x.npy")
    g = led.get("guard", {})
    check(rc == 0 and g.get("active") and g.get("moved_nodes") == 0 and not refused(led) and "precision guard" not in err,
          "nofire: a benign net on fp16 moves nothing: %s" % g)
elif case == "diag":
    x = "x=" + os.path.join(models, "guard_x64.npy")
    rc, out, err = run(["profile", model("guard_overflow"), "--devices", NPU, "--input", x, "--json"])
    prof = json.loads(out) if rc == 0 else {}
    nodes = {n["node"]: n for n in prof.get("nodes", [])}
    check(rc == 0 and nodes.get("g_mul2", {}).get("device") == "cpu" and nodes["g_mul2"].get("reason") == "PRECISION",
          "diag: profile's table has g_mul2 on cpu for PRECISION: %s (%s)" % (nodes.get("g_mul2"), err))
    check(prof.get("guard_moved_nodes", 0) >= 1, "diag: profile counts the moved nodes: %s" % prof.get("guard_moved_nodes"))
    with tempfile.TemporaryDirectory() as d:
        html = os.path.join(d, "r.html")
        rc, out, err = run(["report", model("guard_overflow"), "--devices", NPU, "--input", x, "--html", html])
        page = open(html).read() if rc == 0 else ""
    check(rc == 0 and "g_mul2</td><td>Mul</td><td>cpu" in page, "diag: the report lists g_mul2 on cpu (%s)" % err)
    check("g_mul2</td><td>Mul</td><td>vnpu" not in page, "diag: the report does not list g_mul2 on the NPU")
    check("placement: 0 of 3 nodes on vnpu:server-npu, 3 on cpu" in page and "PRECISION 1" in page,
          "diag: the report's summary is the guarded plan's")
    # plan runs nothing, but with --calibration-input the guard checks the plan on the set
    rc, out, err = run(["plan", model("guard_overflow"), "--devices", NPU, "--calibration-input", x, "--json"])
    led = json.loads(out) if rc == 0 else {}
    check(rc == 0 and "g_mul2" in refused(led), "diag: plan --calibration-input refuses g_mul2: %s (%s)" % (refused(led), err))
    rc, out, err = run(["plan", model("guard_overflow"), "--devices", NPU, "--calibration-input", x])
    check(rc == 0 and "PRECISION 1" in out, "diag: plan's story counts the PRECISION fallback: %r" % out)
    rc, out, err = run(["plan", model("guard_overflow"), "--devices", NPU, "--json"])
    led = json.loads(out) if rc == 0 else {}
    check(rc == 0 and not refused(led), "diag: without a calibration set plan refuses nothing: %s" % refused(led))
elif case == "policy":
    rc, _, err = run(["run", model("guard_overflow"), "--devices", NPU, "--input", "x=" + os.path.join(models, "guard_x64.npy"),
                      "--fallback", "deny"])
    check(rc == 3 and "g_mul2: PRECISION" in err and "overflows float16" in err,
          "policy: deny exits 3 naming the guard's node (%d: %s)" % (rc, err))
    rc, _, err = run(["run", model("guard_benign"), "--devices", NPU, "--input", "x=" + os.path.join(models, "guard_benign_x.npy"),
                      "--verify", "sometimes"])
    check(rc == 1 and "--verify" in err, "policy: a malformed --verify exits 1 (%d: %s)" % (rc, err))
elif case == "static":
    prof = "vnpu:" + os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitive-npu.json") + ",cpu"
    rc, out, err = run(["plan", model("guard_benign"), "--devices", prof, "--granularity", "op", "--json"])
    nodes = {n["name"]: n for n in json.loads(out)["nodes"]} if rc == 0 else {}
    check(nodes.get("b_relu", {}).get("reason") == "PRECISION" and "precision-sensitive" in json.dumps(nodes["b_relu"]),
          "static: the profile's precision-sensitive Relu is kept off the fp16 device (%s)" % err)
    rc, err, led, _ = go("guard_benign", "guard_benign_x.npy", prof, ["--granularity", "op"])
    nodes = {n["name"]: n for n in led.get("nodes", [])}
    check(rc == 0 and nodes.get("b_relu", {}).get("device", "").startswith("vnpu:") and led["guard"]["moved_nodes"] == 0,
          "static: the probe shows it safe, so it runs on the device: %s" % nodes.get("b_relu"))
    rc, err, led, _ = go("guard_benign", "guard_benign_x.npy", prof, ["--granularity", "op", "--verify", "off"])
    nodes = {n["name"]: n for n in led.get("nodes", [])}
    check(rc == 0 and nodes.get("b_relu", {}).get("device") == "cpu", "static: without the probe it stays on cpu")
elif case == "calibration":
    with tempfile.TemporaryDirectory() as tmp:
        small, big = os.path.join(tmp, "small.npy"), os.path.join(models, "guard_x64.npy")
        np.save(small, np.linspace(-0.1, 0.1, 64, dtype=np.float32).reshape(1, 64))  # max 9e3 after two Muls
        folder = os.path.join(tmp, "set")
        os.mkdir(folder)
        np.save(os.path.join(folder, "x.npy"), np.load(big))

        def go_small(extra):
            d = os.path.join(tmp, "run")
            ledger, out = os.path.join(tmp, "l.json"), os.path.join(d, "out")
            rc, _, err = run(["run", model("guard_overflow"), "--devices", NPU, "--input", "x=" + small,
                              "--ledger", ledger, "--output-dir", out, "--overwrite"] + list(extra))
            led = json.load(open(ledger)) if rc == 0 else {}
            return rc, err, led, (np.load(os.path.join(out, "y.npy")) if rc == 0 else None)

        rc, err, led, y = go_small([])
        check(rc == 0 and not refused(led) and led["guard"]["moved_nodes"] == 0,
              "calibration: the first run's input alone does not overflow: %s" % refused(led))
        ref = np.linspace(-0.1, 0.1, 64, dtype=np.float32).reshape(1, 64)
        for form in (["x=" + big], [folder], [big], [small, "x=" + big], ["x=" + big, small]):
            extra = sum((["--calibration-input", f] for f in form), [])
            rc, err, led, y = go_small(extra)
            r, g = refused(led), led.get("guard", {})
            check(rc == 0 and "g_mul2" in r and r["g_mul2"]["cause"] == "overflow" and r["g_mul2"]["source"] == "guard"
                  and "g_mul1" not in r, "calibration %s: g_mul2 refused for overflow at load: %s (%s)" % (form, r, err))
            check(g.get("calibration_input_sets") == len(form) and g.get("moved_nodes", 0) >= 1,
                  "calibration %s: the ledger counts the sets and the moved node: %s" % (form, g))
            probes = [d for d in g.get("decisions", []) if d["kind"] == "probe"]
            check(len(probes) == 1 and "calibration input set" in probes[0].get("why", ""),
                  "calibration %s: one probe, on the calibration inputs (the first run is not probed again): %s"
                  % (form, probes))
            check(g.get("checks") == len(form) + 1, "calibration %s: every set and the first run verified: %s"
                  % (form, g.get("checks")))
            check(y is not None and np.allclose(y, ref, rtol=1e-3, atol=1e-3), "calibration %s: outputs are cpu's" % form)
            check("precision guard: " in err and "moved off" in err, "calibration %s: the stderr line: %r" % (form, err))
        # a harmless calibration set, then an overflowing first run: still verified, re-planned
        rc, err, led, y = go("guard_overflow", "guard_x64.npy", extra=["--calibration-input", "x=" + small])
        r, g = refused(led), led.get("guard", {})
        check(rc == 0 and "g_mul2" in r and r["g_mul2"]["cause"] == "output verification",
              "calibration: the first run is verified and g_mul2 refused by verification: %s (%s)" % (r, err))
        check(y is not None and np.isfinite(y).all() and same_as_cpu("guard_overflow", "guard_x64.npy", y, 1e-3),
              "calibration: the first run's outputs are cpu's")
        check(not [d for d in g.get("decisions", []) if d["kind"] == "unverified"], "calibration: verified: %s" % g)
        # --verify off: no guard, the calibration inputs are not used
        rc, err, led, y = go_small(["--calibration-input", "x=" + big, "--verify", "off"])
        check(rc == 0 and "guard" not in led and not refused(led), "calibration: --verify off uses no calibration input")
        rc, err, led, y = go_small(["--calibration-input", "z=" + big, "--verify", "off"])
        check(rc == 2 and "names 'z'" in err, "calibration: a bad set is refused with --verify off too (%d: %r)" % (rc, err))
        # bad input: one sentence naming it; exit 2 (invalid input), 5 for
        # a file that does not exist and 1 for a malformed SET (as --input)
        bad = os.path.join(tmp, "bad.npy")
        open(bad, "w").write("not a numpy file\n")
        for arg, needle, want in ((["x=" + bad], bad, 2), ([bad], bad, 2), (["z=" + big], "'z'", 2),
                                  ([small, "x=" + os.path.join(models, "guard_benign_x.npy")], "set 2", 2),
                                  ([os.path.join(tmp, "missing.npy")], "missing.npy", 5),
                                  (["x=" + big + "," + big], "is not NAME=FILE", 1)):
            extra = sum((["--calibration-input", f] for f in arg), [])
            rc, err, led, y = go_small(extra)
            lines = [l for l in err.splitlines() if l.strip()]
            check(rc == want and len(lines) == 1 and needle in lines[0],
                  "calibration: a bad set %s exits %d with one sentence naming %s (%d: %r)" % (arg, want, needle, rc,
                                                                                             err))
else:
    check(False, "unknown case " + case)
sys.exit(1 if failures else 0)
