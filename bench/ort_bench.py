"""The onnxruntime side of bench/run.sh (run by the test venv's python).

usage: python bench/ort_bench.py MODEL --input NAME=FILE.npy ... [--warmup N]
           [--iterations N] [--rounds N] [--threads N] [--paced] [--json]

Times onnxruntime's Python package (CPU execution provider, ORT_ENABLE_ALL,
intra_op_num_threads = --threads, inter_op_num_threads 1, sequential) the way
`tandem bench` times tandem: one session, --warmup untimed runs, then
--rounds x --iterations timed runs of session.run alone (time.perf_counter_ns,
monotonic). Every model input must be given as a .npy file.

--paced speaks `tandem bench --paced`'s protocol: after the warm-up it prints
{"event": "ready"}; before each round it waits for a line on stdin, after it
prints {"event": "round", "round": K, "samples_ms": [...]}. At the end it
prints the same figures as `tandem bench --json` (one JSON document), with
peak_rss_bytes (VmHWM of this process) and also baseline_rss_bytes (the
resident size of the Python interpreter itself, before numpy and onnxruntime
were imported) and peak_rss_net_bytes (their difference).

onnxruntime (pinned in scripts/py/requirements.txt) comes from the test venv
that scripts/testenv.sh makes; `sh scripts/testenv.sh --print` names its
python. Errors: one sentence on stderr, exit status 1 (2 for bad usage).
"""
import os
import re
import sys


def resident_bytes():
    """The resident size of this process now (VmRSS)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# Measured first, before anything heavy is imported: the runtime's own baseline.
BASELINE_RSS = resident_bytes()
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

USAGE = ("usage: python bench/ort_bench.py MODEL --input NAME=FILE.npy ... [--warmup N] "
         "[--iterations N] [--rounds N] [--threads N] [--paced] [--json]\n")


def die(msg, code=1):
    sys.stderr.write("ort_bench: %s\n" % " ".join(str(msg).split()))
    sys.exit(code)


def parse_args(argv):
    a = {"model": None, "inputs": {}, "warmup": 10, "iterations": 50, "rounds": 1, "threads": 1,
         "paced": False, "json": False}

    def count(opt, v, lo, hi):
        if not re.fullmatch(r"[0-9]+", v) or not lo <= int(v) <= hi:
            die("%s expects a number from %d to %d, not '%s'." % (opt, lo, hi, v), 2)
        return int(v)

    i = 0
    while i < len(argv):
        arg, val = argv[i], None
        if arg.startswith("--") and "=" in arg:
            arg, val = arg.split("=", 1)

        def value():
            nonlocal i
            if val is not None:
                return val
            if i + 1 >= len(argv):
                die("option '%s' needs a value." % arg, 2)
            i += 1
            return argv[i]

        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        elif arg == "--json":
            a["json"] = True
        elif arg == "--paced":
            a["paced"] = True
        elif arg == "--warmup":
            a["warmup"] = count(arg, value(), 0, 1000000)
        elif arg == "--iterations":
            a["iterations"] = count(arg, value(), 1, 1000000)
        elif arg == "--rounds":
            a["rounds"] = count(arg, value(), 1, 10000)
        elif arg == "--threads":
            a["threads"] = count(arg, value(), 0, 4096)
        elif arg == "--input":
            p = value()
            name, eq, path = p.rpartition("=")
            if not eq or not name or not path:
                die("--input expects NAME=FILE.npy, not '%s'." % p, 2)
            if name in a["inputs"]:
                die("input '%s' is given twice." % name, 2)
            a["inputs"][name] = path
        elif arg.startswith("-"):
            die("unknown option '%s'." % arg, 2)
        elif a["model"]:
            die("one MODEL only ('%s' and '%s' given)." % (a["model"], arg), 2)
        else:
            a["model"] = arg
        i += 1
    if not a["model"]:
        die("no MODEL given; see --help.", 2)
    return a


def peak_rss_bytes():
    try:
        with open("/proc/self/status") as f:
            m = re.search(r"^VmHWM:\s*(\d+)\s*kB", f.read(), re.M)
        if m:
            return int(m.group(1)) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def stats(samples):
    """Same definitions as tools/tandem/bench.c: nearest-rank percentiles, the
    median of an even count is the mean of the two middle samples."""
    s = sorted(samples)
    n = len(s)
    total = sum(s)
    mean = total / n

    def pct(p):
        return s[min(n, max(1, math.ceil(p / 100.0 * n))) - 1]

    var = sum((x - mean) ** 2 for x in s) / (n - 1) if n > 1 else 0.0
    return {
        "median_ms": s[(n - 1) // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2,
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "min_ms": s[0],
        "mean_ms": mean,
        "max_ms": s[-1],
        "stddev_ms": math.sqrt(var),
        "samples": n,
        "throughput_per_s": 1e3 * n / total if total > 0 else 0,
    }


def emit(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def main(argv):
    a = parse_args(argv)
    if not os.path.isfile(a["model"]):
        die("model file %s does not exist." % a["model"])
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        die("cannot import onnxruntime (%s); run it with the test venv's python "
            "(sh scripts/testenv.sh --print)." % e)
    ort.set_default_logger_severity(4)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = a["threads"]
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 4
    try:
        session = ort.InferenceSession(a["model"], so, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        die("onnxruntime cannot load %s: %s" % (a["model"], e))
    names = [i.name for i in session.get_inputs()]
    for name in a["inputs"]:
        if name not in names:
            die("model has no input named '%s' (its inputs are: %s)." % (name, ", ".join(names)))
    feeds, shape = {}, {}
    for name in names:
        if name not in a["inputs"]:
            die("no value given for model input '%s'; give --input %s=FILE.npy." % (name, name), 2)
        try:
            arr = np.ascontiguousarray(np.load(a["inputs"][name], allow_pickle=False))
        except (OSError, ValueError) as e:
            die("cannot read %s: %s" % (a["inputs"][name], e))
        feeds[name] = arr
        shape[name] = [int(d) for d in arr.shape]

    def run_once():
        t0 = time.perf_counter_ns()
        try:
            session.run(None, feeds)
        except Exception as e:
            die("onnxruntime failed to run %s: %s" % (a["model"], e))
        return (time.perf_counter_ns() - t0) / 1e6

    for _ in range(a["warmup"]):
        run_once()
    if a["paced"]:
        emit('{"event": "ready"}\n')
    samples = []
    for r in range(a["rounds"]):
        if a["paced"] and not sys.stdin.buffer.readline():
            break
        rnd = [run_once() for _ in range(a["iterations"])]
        samples += rnd
        if a["paced"]:
            emit('{"event": "round", "round": %d, "samples_ms": [%s]}\n' % (r, ", ".join("%.6f" % x for x in rnd)))
    if not samples:
        die("no timed run was made (the input of --paced ended first).")
    st = stats(samples)
    first = shape.get(names[0]) if names else None
    batch = first[0] if first else 1
    peak = peak_rss_bytes()
    out = {
        "model": a["model"],
        "runtime": "onnxruntime %s (Python %d.%d)" % (ort.__version__, sys.version_info[0], sys.version_info[1]),
        "devices": ["cpu"],
        "threads": a["threads"],
        "warmup": a["warmup"],
        "iterations": a["iterations"],
        "rounds": a["rounds"],
        "shape": shape,
    }
    out.update(st)
    out.update({
        "batch": batch,
        "items_per_s": st["throughput_per_s"] * batch,
        "peak_rss_bytes": peak,
        "baseline_rss_bytes": BASELINE_RSS,
        "peak_rss_net_bytes": peak - BASELINE_RSS,
    })
    if a["json"]:
        emit(json.dumps(out, indent=2) + "\n")
    else:
        emit("model       %s\nruntime     %s\nthreads     %d\n"
             "latency ms  median %.3f  p90 %.3f  p99 %.3f  min %.3f  mean %.3f  max %.3f\n"
             "throughput  %.2f runs/s\n"
             "peak RSS    %.1f MiB (the Python interpreter itself: %.1f MiB)\n" % (
                 a["model"], out["runtime"], a["threads"], st["median_ms"], st["p90_ms"], st["p99_ms"],
                 st["min_ms"], st["mean_ms"], st["max_ms"], st["throughput_per_s"], peak / 1048576.0,
                 BASELINE_RSS / 1048576.0))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
