#!/usr/bin/python3
"""Tests of `tandem bench` and bench/run.sh. No timing is asserted: only the
shape of the reports, their internal consistency and the protocol.

    bench_test.py TANDEM WORKDIR CASE

CASE is one of: json, threads, sweep, input-file, paced, errors, text,
ort-bench, run-quick. Exit 0 pass, 1 fail, 77 skip (python3-onnx or, for
ort-bench and run-quick, the test venv of scripts/testenv.sh and, for
run-quick, the cached models or reference inputs missing). This script runs on
/usr/bin/python3; onnxruntime runs in the venv's python."""
import json
import math
import os
import subprocess
import sys

TANDEM, WORK, CASE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.abspath(os.environ.get("TANDEM_CACHE") or os.path.join(ROOT, ".cache"))
REQUIRED = ["model", "median_ms", "p90_ms", "p99_ms", "min_ms", "mean_ms", "throughput_per_s", "threads",
            "devices", "iterations", "warmup", "peak_rss_bytes", "shape"]

failures = []
checks = 0


def check(cond, msg):
    global checks
    checks += 1
    if not cond:
        failures.append(msg)


def tandem(args, env=None, code=0, err=None):
    e = dict(os.environ)
    e.pop("TANDEM_THREADS", None)
    e.update(env or {})
    p = subprocess.run([TANDEM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, timeout=300)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "tandem %s: exit %d, expected %d; stderr: %s" % (" ".join(args), p.returncode, code,
                                                                               se.strip()))
    if err:
        check(err in se, "tandem %s: stderr lacks %r: %s" % (" ".join(args), err, se.strip()))
    if code != 0:
        check(se.startswith("tandem: "), "tandem %s: error not a 'tandem: ' sentence: %r" % (" ".join(args), se))
    return so, se


def bench_json(args, env=None):
    so, _ = tandem(["bench"] + args + ["--json"], env=env)
    try:
        return json.loads(so)
    except ValueError:
        failures.append("tandem bench %s --json: stdout is not one JSON document: %r" % (" ".join(args), so[:300]))
        return None


def check_stats(d, what):
    """Required fields present, and the figures consistent with each other."""
    if d is None:
        return
    for k in REQUIRED:
        check(k in d, "%s: field %r missing" % (what, k))
    if not all(k in d for k in REQUIRED):
        return
    nums = [d[k] for k in ("min_ms", "median_ms", "p90_ms", "p99_ms", "mean_ms", "throughput_per_s")]
    check(all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in nums),
          "%s: latencies and throughput must be positive numbers: %r" % (what, nums))
    if not all(isinstance(x, (int, float)) for x in nums):
        return
    check(d["min_ms"] <= d["median_ms"] <= d["p90_ms"] <= d["p99_ms"],
          "%s: expected min <= median <= p90 <= p99: %r" % (what, nums[:4]))
    if "max_ms" in d:
        check(d["p99_ms"] <= d["max_ms"], "%s: p99 above max" % what)
        check(d["min_ms"] <= d["mean_ms"] <= d["max_ms"], "%s: mean outside [min, max]" % what)
    # throughput is runs per second over the timed runs: 1000 / mean.
    check(abs(d["throughput_per_s"] * d["mean_ms"] - 1000.0) < 1e-6 * 1000.0,
          "%s: throughput %r is not 1000/mean (mean %r)" % (what, d["throughput_per_s"], d["mean_ms"]))
    if "batch" in d and "items_per_s" in d:
        check(abs(d["items_per_s"] - d["throughput_per_s"] * d["batch"]) <= 1e-9 * d["items_per_s"] + 1e-12,
              "%s: items_per_s is not throughput x batch" % what)


def make_model():
    """tiny.onnx: y = Relu(x @ W + b), x float [N, 16] with a dynamic N."""
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        print("skip: %s" % e)
        sys.exit(77)
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
         helper.make_node("Add", ["m", "b"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu")],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], initializer=[w, b])
    m = helper.make_model(g, producer_name="tandem-tests", opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(WORK, "tiny.onnx")
    onnx.save(m, path)
    np.save(os.path.join(WORK, "x3.npy"), rng.uniform(-1, 1, (3, 16)).astype(np.float32))
    return path


def case_json(model):
    d = bench_json([model, "--shape", "x=4x16", "--warmup", "2", "--iterations", "25"])
    check_stats(d, "bench --json")
    if d is None:
        return
    check(d.get("model") == model, "model field %r" % d.get("model"))
    check(d.get("iterations") == 25 and d.get("warmup") == 2, "iterations/warmup %r/%r" % (d.get("iterations"),
                                                                                         d.get("warmup")))
    check(d.get("samples") == 25, "samples %r, expected 25" % d.get("samples"))
    check(d.get("shape") == {"x": [4, 16]}, "shape %r" % d.get("shape"))
    check(d.get("batch") == 4, "batch %r, expected 4" % d.get("batch"))
    check(d.get("devices") == ["cpu"], "devices %r" % d.get("devices"))
    check(d.get("threads") == 0, "threads %r, expected 0 (the default)" % d.get("threads"))
    check(isinstance(d.get("peak_rss_bytes"), int) and 1 << 20 < d["peak_rss_bytes"] < 1 << 34,
          "peak_rss_bytes %r is not a plausible size" % d.get("peak_rss_bytes"))
    check("sweep" not in d, "a single shape has no sweep")
    # The defaults: 10 warm-up runs, 50 timed.
    d = bench_json([model, "--shape", "x=1x16"])
    if d:
        check(d.get("warmup") == 10 and d.get("iterations") == 50 and d.get("samples") == 50,
              "defaults: warmup %r iterations %r samples %r" % (d.get("warmup"), d.get("iterations"),
                                                                d.get("samples")))
        check_stats(d, "bench --json (defaults)")
    # Rounds multiply the samples.
    d = bench_json([model, "--shape", "x=1x16", "--warmup", "0", "--iterations", "4", "--rounds", "3"])
    if d:
        check(d.get("samples") == 12 and d.get("rounds") == 3, "rounds: samples %r rounds %r" % (
            d.get("samples"), d.get("rounds")))


def case_threads(model):
    base = [model, "--shape", "x=2x16", "--warmup", "1", "--iterations", "3"]
    d = bench_json(base + ["--threads", "2"])
    check(d is not None and d.get("threads") == 2, "--threads 2 gives threads %r" % (d or {}).get("threads"))
    d = bench_json(base, env={"TANDEM_THREADS": "3"})
    check(d is not None and d.get("threads") == 3, "TANDEM_THREADS=3 gives threads %r" % (d or {}).get("threads"))
    d = bench_json(base + ["--threads", "1"], env={"TANDEM_THREADS": "3"})
    check(d is not None and d.get("threads") == 1, "--threads overrides TANDEM_THREADS: %r" % (d or {}).get("threads"))
    tandem(["bench"] + base, env={"TANDEM_THREADS": "many"}, code=1, err="TANDEM_THREADS")


def case_sweep(model):
    d = bench_json([model, "--shape", "x=1x16", "--shape", "x=8x16", "--shape", "x=32x16", "--warmup", "1",
                    "--iterations", "5"])
    if d is None:
        return
    sw = d.get("sweep")
    check(isinstance(sw, list) and len(sw) == 3, "sweep has %r entries, expected 3" % (sw if sw is None else len(sw)))
    if not isinstance(sw, list) or len(sw) != 3:
        return
    for entry, n in zip(sw, (1, 8, 32)):
        check(entry.get("shape") == {"x": [n, 16]}, "sweep shape %r, expected x=[%d, 16]" % (entry.get("shape"), n))
        check(entry.get("batch") == n, "sweep batch %r, expected %d" % (entry.get("batch"), n))
        for k in ("median_ms", "p90_ms", "p99_ms", "min_ms", "throughput_per_s", "items_per_s"):
            check(k in entry, "sweep entry lacks %r" % k)
        if all(k in entry for k in ("min_ms", "median_ms", "p90_ms", "p99_ms", "throughput_per_s")):
            entry = dict(entry, **{k: d[k] for k in REQUIRED if k not in entry})
            check_stats(entry, "sweep x=%dx16" % n)
    check(d.get("shape") == sw[0].get("shape") and d.get("median_ms") == sw[0].get("median_ms"),
          "the top level should repeat the first sweep value")
    so, _ = tandem(["bench", model, "--shape", "x=1x16", "--shape", "x=8x16", "--warmup", "0", "--iterations", "2"])
    check("x=1x16" in so and "x=8x16" in so and "items/s" in so, "text sweep lacks a row per value: %r" % so)


def case_input_file(model):
    x3 = os.path.join(WORK, "x3.npy")
    d = bench_json([model, "--input", "x=" + x3, "--warmup", "1", "--iterations", "5"])
    check_stats(d, "bench --input")
    check(d is not None and d.get("shape") == {"x": [3, 16]}, "shape from the file: %r" % (d or {}).get("shape"))
    _, se = tandem(["bench", model, "--input", "x=" + x3, "--warmup", "0", "--iterations", "1"])
    check("random" not in se, "no random values when every input is given: %r" % se)
    tandem(["bench", model, "--input", "x=" + x3, "--shape", "x=1x16", "--shape", "x=2x16"], code=1,
           err="cannot sweep")


def case_paced(model):
    e = dict(os.environ)
    e.pop("TANDEM_THREADS", None)
    p = subprocess.Popen([TANDEM, "bench", model, "--shape", "x=2x16", "--warmup", "1", "--iterations", "4",
                          "--rounds", "3", "--paced", "--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e)
    try:
        first = json.loads(p.stdout.readline())
        check(first == {"event": "ready"}, "paced: first line %r" % first)
        for r in range(3):
            p.stdin.write(b"go\n")
            p.stdin.flush()
            ev = json.loads(p.stdout.readline())
            check(ev.get("event") == "round" and ev.get("round") == r, "paced: round event %r" % ev)
            s = ev.get("samples_ms", [])
            check(len(s) == 4 and all(x > 0 for x in s), "paced: round %d samples %r" % (r, s))
        p.stdin.close()
        rest = p.stdout.read().decode()
        rc = p.wait(timeout=60)
        check(rc == 0, "paced: exit %d" % rc)
        d = json.loads(rest)
        check_stats(d, "paced final report")
        check(d.get("samples") == 12, "paced: final samples %r, expected 12" % d.get("samples"))
    finally:
        if p.poll() is None:
            p.kill()
    # End of input stops early, with the rounds made so far.
    p = subprocess.run([TANDEM, "bench", model, "--shape", "x=2x16", "--warmup", "0", "--iterations", "2",
                        "--rounds", "5", "--paced", "--json"], input=b"\n", stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=e, timeout=60)
    lines = p.stdout.decode().split("\n", 2)
    check(p.returncode == 0 and len(lines) == 3, "paced early end: exit %d" % p.returncode)
    if len(lines) == 3:
        d = json.loads(lines[2])
        check(d.get("samples") == 2, "paced early end: samples %r, expected 2" % d.get("samples"))
    tandem(["bench", model, "--shape", "x=1x16", "--shape", "x=2x16", "--paced"], code=1, err="--paced")


def case_errors(model):
    tandem(["bench", model, "--shape", "x=1x16", "--iterations", "0"], code=1, err="--iterations")
    tandem(["bench", model, "--shape", "x=1x16", "--warmup", "-1"], code=1, err="--warmup")
    tandem(["bench", model, "--bogus"], code=1, err="--bogus")
    tandem(["bench"], code=1, err="no MODEL")
    tandem(["bench", os.path.join(WORK, "nope.onnx")], code=5, err="nope.onnx")
    tandem(["bench", model], code=2, err="--shape x=")
    tandem(["bench", model, "--shape", "q=1x16"], code=2, err="'q'")
    tandem(["bench", model, "--shape", "x=1x16", "--devices", "nonesuch"], code=4, err="nonesuch")
    so, _ = tandem(["bench", "--help"])
    check("--iterations" in so and "--shape" in so and "TANDEM_THREADS" in so, "bench --help text")
    so, _ = tandem(["help", "bench"])
    check("--paced" in so, "tandem help bench")


def case_text(model):
    so, se = tandem(["bench", model, "--shape", "x=2x16", "--warmup", "1", "--iterations", "7"])
    for frag in ("median", "p90", "p99", "min", "runs/s", "peak RSS", "x=2x16", "7 timed"):
        check(frag in so, "text report lacks %r: %r" % (frag, so))
    check("fixed-seed random" in se, "the random fill is announced on stderr: %r" % se)


def pinned_ort():
    """'onnxruntime X.Y.Z' as pinned in scripts/py/requirements.txt."""
    with open(os.path.join(ROOT, "scripts", "py", "requirements.txt")) as f:
        for line in f:
            if line.strip().startswith("onnxruntime=="):
                return "onnxruntime " + line.split("==", 1)[1].split("#")[0].strip()
    return "onnxruntime"


def venv_python():
    """The test venv's python, or None when scripts/testenv.sh has not made it."""
    py = os.path.join(CACHE, "venv", "bin", "python")
    return py if os.path.isfile(py) and os.access(py, os.X_OK) else None


def ort_bench(args, code=0, err=None, stdin=None):
    """bench/ort_bench.py ARGS in the venv's python."""
    e = dict(os.environ, ORT_DISABLE_TELEMETRY="1")
    p = subprocess.run([venv_python(), os.path.join(ROOT, "bench", "ort_bench.py")] + args, input=stdin or b"",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, timeout=300)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    what = "ort_bench.py %s" % " ".join(args)
    check(p.returncode == code, "%s: exit %d, expected %d; stderr: %s" % (what, p.returncode, code, se.strip()))
    if err:
        check(err in se, "%s: stderr lacks %r: %s" % (what, err, se.strip()))
    if code != 0:
        check(se.startswith("ort_bench: ") and se.count("\n") == 1,
              "%s: error not one 'ort_bench: ' sentence: %r" % (what, se))
    return so, se


def case_ort_bench(model):
    """The onnxruntime side alone: the --paced protocol, the report's fields, errors."""
    if venv_python() is None:
        print("skip: needs the test venv (sh scripts/testenv.sh)")
        sys.exit(77)
    x3 = os.path.join(WORK, "x3.npy")
    base = [model, "--input", "x=" + x3, "--warmup", "1", "--iterations", "4", "--rounds", "3", "--threads", "1"]
    so, _ = ort_bench(base + ["--paced", "--json"], stdin=b"go\n" * 3)
    lines = so.split("\n", 4)
    check(len(lines) == 5, "ort paced: expected ready, 3 rounds and a report: %r" % so[:300])
    if len(lines) == 5:
        check(json.loads(lines[0]) == {"event": "ready"}, "ort paced: first line %r" % lines[0])
        for r in range(3):
            ev = json.loads(lines[1 + r])
            check(ev.get("event") == "round" and ev.get("round") == r, "ort paced: round event %r" % ev)
            s = ev.get("samples_ms", [])
            check(len(s) == 4 and all(x > 0 for x in s), "ort paced: round %d samples %r" % (r, s))
        d = json.loads(lines[4])
        check_stats(d, "ort_bench.py paced final report")
        check(d.get("samples") == 12 and d.get("rounds") == 3, "ort paced: samples %r rounds %r" % (
            d.get("samples"), d.get("rounds")))
        check(d.get("shape") == {"x": [3, 16]} and d.get("batch") == 3, "ort: shape %r batch %r" % (
            d.get("shape"), d.get("batch")))
        check(d.get("threads") == 1 and d.get("devices") == ["cpu"], "ort: threads %r devices %r" % (
            d.get("threads"), d.get("devices")))
        check(str(d.get("runtime", "")).startswith(pinned_ort() + " "), "ort: runtime %r, expected %s" % (
            d.get("runtime"), pinned_ort()))
        peak, base_rss, net = d.get("peak_rss_bytes"), d.get("baseline_rss_bytes"), d.get("peak_rss_net_bytes")
        check(all(isinstance(v, int) for v in (peak, base_rss, net)) and 1 << 20 < base_rss < net + base_rss == peak,
              "ort: peak %r = baseline %r + net %r expected, baseline a plausible size" % (peak, base_rss, net))
    # End of input stops early, with the rounds made so far.
    so, _ = ort_bench(base + ["--paced", "--json"], stdin=b"\n")
    lines = so.split("\n", 2)
    check(len(lines) == 3 and json.loads(lines[2]).get("samples") == 4, "ort paced early end: %r" % so[:300])
    ort_bench(base + ["--paced", "--json"], code=1, err="no timed run")
    # Without --paced: every round at once; the text report.
    so, _ = ort_bench(base)
    for frag in ("median", "p90", "runs/s", "peak RSS", pinned_ort() + " "):
        check(frag in so, "ort text report lacks %r: %r" % (frag, so))
    # Errors: usage 2, others 1; one sentence each.
    ort_bench([model, "--bogus"], code=2, err="--bogus")
    ort_bench([], code=2, err="no MODEL")
    ort_bench([model, "--input", "x=" + x3, "--iterations", "0"], code=2, err="--iterations")
    ort_bench([model], code=2, err="--input x=")
    ort_bench([model, "--input", "q=" + x3], code=1, err="'q'")
    ort_bench([os.path.join(WORK, "nope.onnx"), "--input", "x=" + x3], code=1, err="nope.onnx")
    ort_bench([model, "--input", "x=" + os.path.join(WORK, "nope.npy")], code=1, err="nope.npy")


def case_run_quick():
    need = [os.path.join(CACHE, "models", "squeezenet1_1.onnx"),
            os.path.join(CACHE, "refs", "squeezenet1_1", "inputs.txt")]
    missing = [p for p in need if not os.path.exists(p)]
    if missing or venv_python() is None:
        print("skip: needs %s (make data)" % (", ".join(missing) or "the test venv (sh scripts/testenv.sh)"))
        sys.exit(77)
    out = os.path.join(WORK, "quick.json")
    p = subprocess.run([os.path.join(ROOT, "bench", "run.sh"), "--quick", "--models", "squeezenet1_1", "--threads",
                        "1", "--tandem", TANDEM, "--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=900)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == 0, "bench/run.sh --quick: exit %d; stderr: %s" % (p.returncode, se.strip()[-800:]))
    rows = [l for l in so.splitlines() if l.startswith("| squeezenet1_1 |")]
    check(len(rows) == 1, "table lacks exactly one squeezenet1_1 row: %r" % so)
    if rows:
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        check(len(cells) == 9, "row has %d cells: %r" % (len(cells), rows[0]))
        try:
            vals = [float(c) for c in cells[1:]]
            check(all(v > 0 for v in vals), "row values not positive: %r" % rows[0])
            check(abs(vals[3] - vals[1] / vals[2]) <= 0.011 * vals[3] + 0.006,
                  "ratio %r is not tandem/onnxruntime (%r/%r)" % (vals[3], vals[1], vals[2]))
        except ValueError:
            failures.append("row has non-numeric cells: %r" % rows[0])
    check(any(l.startswith("| **geometric mean** | 1 |") for l in so.splitlines()), "no geometric mean row: %r" % so)
    try:
        with open(out) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        failures.append("JSON file %s: %s" % (out, e))
        return
    res = doc.get("results", [])
    check(len(res) == 1, "JSON has %d results, expected 1" % len(res))
    if res:
        r = res[0]
        for k in ("tandem", "ort"):
            check_stats(r.get(k), "run.sh %s report" % k)
            check(len(r.get(k, {}).get("samples_ms", [])) == 6, "%s: expected 2 rounds x 3 runs = 6 samples" % k)
            check((r.get(k) or {}).get("threads") == 1, "%s ran with threads %r" % (k, (r.get(k) or {}).get("threads")))
        check(r.get("flops") and r["flops"] > 1e8, "squeezenet FLOPs %r" % r.get("flops"))
        check(r.get("ratio") and abs(r["ratio"] - r["tandem"]["median_ms"] / r["ort"]["median_ms"]) < 1e-9,
              "JSON ratio inconsistent")
        check(r.get("ort", {}).get("peak_rss_net_bytes", 0) > 0, "onnxruntime net RSS missing")
        check(str((r.get("ort") or {}).get("runtime", "")).startswith(pinned_ort() + " "),
              "onnxruntime is not the pinned %s: %r" % (pinned_ort(), (r.get("ort") or {}).get("runtime")))
    check(doc.get("summary", {}).get("1", {}).get("geomean_ratio"), "JSON lacks the geometric mean")


def main():
    os.makedirs(WORK, exist_ok=True)
    if CASE == "run-quick":
        case_run_quick()
    else:
        model = make_model()
        cases = {"json": case_json, "threads": case_threads, "sweep": case_sweep, "input-file": case_input_file,
                 "paced": case_paced, "errors": case_errors, "text": case_text, "ort-bench": case_ort_bench}
        if CASE not in cases:
            print("unknown case %r" % CASE)
            return 1
        cases[CASE](model)
    for f in failures:
        print("FAIL: " + f)
    print("%s: %d checks, %d failed" % (CASE, checks, len(failures)))
    return 1 if failures or checks == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
