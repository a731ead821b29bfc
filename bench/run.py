#!/usr/bin/python3
"""tandem against onnxruntime on the CPU, on the same models and inputs, in one run.

usage: bench/run.sh [--models LIST] [--threads LIST] [--rounds N] [--iterations N]
                    [--warmup N] [--quick] [--tandem PATH] [--out FILE] [--timeout S]

For every model and thread count, one `tandem bench --paced --json` process and
one `bench/ort_bench.py --paced --json` process (run by the test venv's python,
onnxruntime from PyPI) are started (each warms up alone, the other idle), then
the driver alternates them round by round (tandem first in even rounds,
onnxruntime first in odd ones) so that machine noise hits both, each round
starting once neither process is using the CPU (onnxruntime's worker threads
spin for about 100 ms after a round); every timed run of every round is a
sample. Each runtime runs in its own
process, whose peak resident memory (VmHWM) is reported at the end.

Reported per model: median ms of both, the latency ratio tandem/onnxruntime,
GFLOP/s of both (FLOPs from `tandem info --json`; for a model with dynamic
input dimensions, on a copy whose inputs are fixed to the benchmark's shapes),
peak RSS of both (onnxruntime's net of the Python interpreter's own resident
size before onnxruntime was imported, which is also in the JSON), and per
thread count the geometric mean of the ratios. A markdown table goes to stdout,
every figure and sample to the JSON file (--out; default
$TANDEM_CACHE/bench/bench-<date>.json).

Inputs are $TANDEM_CACHE/refs/<model>/inputs.txt (scripts/refs.sh makes them,
and is run for the missing ones); models are $TANDEM_CACHE/models/<model>.onnx.
onnxruntime (pinned in scripts/py/requirements.txt) comes from the test venv,
$TANDEM_CACHE/venv: `sh scripts/testenv.sh --print` makes it when needed and
names its python, which runs bench/ort_bench.py. This driver itself needs only
/usr/bin/python3 and its standard library.
The tandem binary: --tandem, else $TANDEM_BIN, else <repo>/build/tandem, else
`tandem` on PATH.

Exit status: 0 when every benchmark ran, 1 when one failed (its row says
why), 2 for bad usage or a missing prerequisite.
"""
import datetime
import json
import math
import os
import queue
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.abspath(os.environ.get("TANDEM_CACHE") or os.path.join(ROOT, ".cache"))
ALL_MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "shufflenet_v2_x1_0",
              "transformer_op17", "ppocr_det", "ppocr_rec", "ppocr_cls", "ssdlite320"]


def die(msg, code=2):
    sys.stderr.write("bench: %s\n" % msg)
    sys.exit(code)


def note(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


def parse_args(argv):
    a = {"models": list(ALL_MODELS), "threads": [1, 2], "rounds": 5, "iterations": 10, "warmup": 10,
         "tandem": None, "out": None, "timeout": 900.0, "quick": False}
    explicit = set()
    i = 0

    def value(opt):
        nonlocal i
        if "=" in argv[i]:
            return argv[i].split("=", 1)[1]
        i += 1
        if i >= len(argv):
            die("option %s needs a value" % opt)
        return argv[i]

    def count(opt, v, lo):
        if not v.isdigit() or int(v) < lo:
            die("%s expects a whole number of at least %d, not '%s'" % (opt, lo, v))
        return int(v)

    while i < len(argv):
        opt = argv[i].split("=", 1)[0]
        if opt in ("-h", "--help"):
            sys.stdout.write(__doc__)
            sys.exit(0)
        elif opt == "--quick":
            a["quick"] = True
        elif opt == "--models":
            a["models"] = [m for m in value(opt).split(",") if m]
            if not a["models"]:
                die("--models expects a comma-separated list of models")
        elif opt == "--threads":
            a["threads"] = [count(opt, t, 0) for t in value(opt).split(",")]
        elif opt in ("--rounds", "--iterations", "--warmup"):
            a[opt[2:]] = count(opt, value(opt), 0 if opt == "--warmup" else 1)
            explicit.add(opt[2:])
        elif opt == "--tandem":
            a["tandem"] = value(opt)
        elif opt == "--out":
            a["out"] = value(opt)
        elif opt == "--timeout":
            try:
                a["timeout"] = float(value(opt))
            except ValueError:
                die("--timeout expects seconds")
        else:
            die("unknown option '%s'; see bench/run.sh --help" % argv[i])
        i += 1
    if a["quick"]:
        # A smoke run: the protocol end to end, figures not meant to be quoted.
        for k, v in (("rounds", 2), ("iterations", 3), ("warmup", 1)):
            if k not in explicit:
                a[k] = v
    return a


def find_tandem(given):
    for cand in (given, os.environ.get("TANDEM_BIN"), os.path.join(ROOT, "build", "tandem")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
        if cand and cand == given:
            die("the tandem binary '%s' does not exist or is not executable" % given)
    p = shutil.which("tandem")
    if p:
        return p
    die("no tandem binary: build it (make) or give --tandem PATH")


def venv_python():
    """The test venv's python (onnxruntime from PyPI): scripts/testenv.sh makes
    the venv when it is missing or stale and prints the path."""
    env = dict(os.environ, TANDEM_CACHE=CACHE)
    try:
        p = subprocess.run(["sh", os.path.join(ROOT, "scripts", "testenv.sh"), "--print"], stdout=subprocess.PIPE,
                           env=env)
    except OSError as e:
        die("cannot run scripts/testenv.sh: %s" % e)
    lines = p.stdout.decode("utf-8", "replace").split()
    if p.returncode != 0 or not lines:
        die("scripts/testenv.sh could not make the test venv (exit status %d)" % p.returncode)
    py = lines[-1]
    if not (os.path.isfile(py) and os.access(py, os.X_OK)):
        die("scripts/testenv.sh named %s, which is not an executable python" % py)
    return py


def ensure_prereqs(models):
    missing = [m for m in models if not os.path.isfile(os.path.join(CACHE, "refs", m, "inputs.txt"))]
    if missing:
        note("making reference inputs for %s (scripts/refs.sh)" % " ".join(missing))
        env = dict(os.environ, TANDEM_CACHE=CACHE)
        if subprocess.call(["sh", os.path.join(ROOT, "scripts", "refs.sh")] + missing, env=env) != 0:
            die("scripts/refs.sh failed for %s" % " ".join(missing))


def read_inputs(model):
    path = os.path.join(CACHE, "refs", model, "inputs.txt")
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def npy_shape(path):
    """The shape in a .npy header (format 1-3), without numpy."""
    with open(path, "rb") as f:
        magic = f.read(8)
        if magic[:6] != b"\x93NUMPY":
            raise ValueError("%s is not a .npy file" % path)
        n = int.from_bytes(f.read(2 if magic[6] == 1 else 4), "little")
        header = f.read(n).decode("latin1")
    import ast
    return list(ast.literal_eval(header)["shape"])


def tandem_info(tandem, model_path):
    p = subprocess.run([tandem, "info", "--json", model_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode(errors="replace").strip() or "tandem info failed")
    return json.loads(p.stdout)


# Run by the venv's python (its onnx package): copies argv[1] to argv[2] with
# the graph inputs' dimensions fixed to the JSON shapes of argv[3].
FIX_SHAPES = """
import json, sys
import onnx
m = onnx.load(sys.argv[1])
shapes = json.loads(sys.argv[3])
for vi in m.graph.input:
    if vi.name in shapes and vi.type.HasField("tensor_type"):
        for d, v in zip(vi.type.tensor_type.shape.dim, shapes[vi.name]):
            d.ClearField("dim_param")
            d.dim_value = v
onnx.save(m, sys.argv[2])
"""


def model_flops(tandem, py, model_path, inputs, tmpdir):
    """FLOPs from `tandem info --json`; a model with dynamic input dimensions
    is first copied with its inputs fixed to the shapes of the .npy inputs
    (by the venv's onnx), so that shape inference reaches every Conv/MatMul."""
    info = tandem_info(tandem, model_path)
    if not info.get("flops_unknown_nodes"):
        return info.get("flops"), "tandem info"
    shapes = {}
    for item in inputs:
        name, path = item.rsplit("=", 1)
        shapes[name] = npy_shape(path)
    fixed = os.path.join(tmpdir, os.path.basename(model_path))
    p = subprocess.run([py, "-c", FIX_SHAPES, model_path, fixed, json.dumps(shapes)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, "unknown: dynamic shapes, and onnx could not fix them (%s)" % (err[-1] if err else p.returncode)
    info = tandem_info(tandem, fixed)
    if info.get("flops_unknown_nodes"):
        return info.get("flops"), "tandem info, %d nodes of unknown shape left out" % info["flops_unknown_nodes"]
    return info.get("flops"), "tandem info with inputs fixed to %s" % shapes


class Proc:
    """A benchmark process speaking the --paced protocol."""

    def __init__(self, label, cmd, env, timeout):
        self.label, self.cmd, self.timeout = label, cmd, timeout
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, bufsize=0)
        self.lines = queue.Queue()
        self.err = []
        self.tail = []  # stdout lines after the last event: the final JSON
        threading.Thread(target=self._pump, args=(self.p.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._drain_err, daemon=True).start()

    @staticmethod
    def _pump(stream, q):
        for raw in iter(stream.readline, b""):
            q.put(raw.decode("utf-8", "replace"))
        q.put(None)

    def _drain_err(self):
        for raw in iter(self.p.stderr.readline, b""):
            self.err.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def failure(self, what):
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        errs = [e for e in self.err if e and "fixed-seed random" not in e]
        detail = errs[-1] if errs else "exit status %s" % self.p.returncode
        return RuntimeError("%s %s: %s" % (self.label, what, detail))

    def event(self, want):
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise RuntimeError("%s: no '%s' within %.0f s" % (self.label, want, self.timeout))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise self.failure("stopped before '%s'" % want)
            s = line.strip()
            if s.startswith('{"event"'):
                ev = json.loads(s)
                if ev.get("event") == want:
                    return ev
            elif s:
                self.tail.append(line)

    def go(self):
        try:
            self.p.stdin.write(b"\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise self.failure("stopped")
        return self.event("round")["samples_ms"]

    def finish(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError("%s: no final report within %.0f s" % (self.label, self.timeout))
                continue
            if line is None:
                break
            self.tail.append(line)
        rc = self.p.wait()
        if rc != 0:
            raise self.failure("failed")
        try:
            return json.loads("".join(self.tail))
        except ValueError:
            raise RuntimeError("%s: the final report is not JSON: %r" % (self.label, "".join(self.tail)[:200]))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_ticks(pid):
    """User + system clock ticks of process pid (all its threads), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def settle(procs, window=0.02, limit=0.5):
    """Waits until no benchmark process is burning CPU between rounds (at most
    limit seconds): onnxruntime's idle worker threads keep spinning for about
    100 ms after a round, which would slow the round that follows it — always
    tandem's in even rounds, since tandem's own workers sleep after 0.4 ms."""
    end = time.monotonic() + limit
    last = [cpu_ticks(p.p.pid) for p in procs]
    while time.monotonic() < end:
        time.sleep(window)
        now = [cpu_ticks(p.p.pid) for p in procs]
        if now == last:
            return
        last = now


def bench_one(a, tandem, py, model, threads, inputs):
    model_path = os.path.join(CACHE, "models", model + ".onnx")
    common = ["--warmup", str(a["warmup"]), "--iterations", str(a["iterations"]), "--rounds", str(a["rounds"]),
              "--threads", str(threads), "--paced", "--json"]
    in_args = []
    for item in inputs:
        in_args += ["--input", item]
    env = dict(os.environ, TANDEM_CACHE=CACHE, ORT_DISABLE_TELEMETRY="1")
    env.pop("TANDEM_THREADS", None)
    procs = {}
    try:
        # Started one after the other so that the warm-ups do not overlap.
        procs["tandem"] = Proc("tandem", [tandem, "bench", model_path] + in_args + common, env, a["timeout"])
        procs["tandem"].event("ready")
        procs["ort"] = Proc("onnxruntime", [py, os.path.join(ROOT, "bench", "ort_bench.py"), model_path] +
                            in_args + common, env, a["timeout"])
        procs["ort"].event("ready")
        samples = {"tandem": [], "ort": []}
        for r in range(a["rounds"]):
            order = ("tandem", "ort") if r % 2 == 0 else ("ort", "tandem")
            for k in order:
                settle(list(procs.values()))
                samples[k] += procs[k].go()
        reports = {k: procs[k].finish() for k in ("tandem", "ort")}
    finally:
        for p in procs.values():
            p.kill()
    for k in reports:
        reports[k]["samples_ms"] = samples[k]
        if reports[k].get("samples") != len(samples[k]):
            raise RuntimeError("%s reported %s samples, the driver saw %d" % (k, reports[k].get("samples"),
                                                                              len(samples[k])))
    return reports


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def mib(b):
    return None if b is None else b / 1048576.0


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main(argv):
    a = parse_args(argv)
    tandem = find_tandem(a["tandem"])
    for m in a["models"]:
        if not os.path.isfile(os.path.join(CACHE, "models", m + ".onnx")) and m not in ALL_MODELS:
            die("no model '%s' in %s/models" % (m, CACHE))
    py = venv_python()
    ensure_prereqs(a["models"])

    started = datetime.datetime.now()
    load_start = loadavg()
    results = []
    failed = 0
    flops = {}
    with tempfile.TemporaryDirectory(prefix="tandem-bench-") as tmp:
        for m in a["models"]:
            try:
                inputs = read_inputs(m)
                flops[m] = model_flops(tandem, py, os.path.join(CACHE, "models", m + ".onnx"), inputs, tmp)
            except (OSError, RuntimeError, ValueError) as e:
                flops[m] = (None, "unknown: %s" % e)
            for t in a["threads"]:
                row = {"model": m, "threads": t, "flops": flops[m][0], "flops_source": flops[m][1]}
                note("%s, %d thread%s" % (m, t, "" if t == 1 else "s"))
                try:
                    rep = bench_one(a, tandem, py, m, t, read_inputs(m))
                    row["tandem"], row["ort"] = rep["tandem"], rep["ort"]
                    row["ratio"] = rep["tandem"]["median_ms"] / rep["ort"]["median_ms"]
                    for k in ("tandem", "ort"):
                        f = row["flops"]
                        row[k + "_gflops_per_s"] = f / (rep[k]["median_ms"] * 1e6) if f else None
                    note("  tandem %.3f ms, onnxruntime %.3f ms, ratio %.2f" %
                         (rep["tandem"]["median_ms"], rep["ort"]["median_ms"], row["ratio"]))
                except (OSError, RuntimeError, ValueError) as e:
                    row["error"] = str(e)
                    failed += 1
                    note("  failed: %s" % e)
                results.append(row)
    load_end = loadavg()

    geo = {}
    for t in a["threads"]:
        rows = [r for r in results if r["threads"] == t]
        g = geomean([r.get("ratio") for r in rows])
        geo[str(t)] = {"geomean_ratio": g, "models": sum(1 for r in rows if "ratio" in r),
                       "max_ratio": max([r["ratio"] for r in rows if "ratio" in r], default=None)}

    cmdline = "bench/run.sh" + "".join(" " + shlex.quote(x) for x in argv)
    doc = {
        "command": cmdline,
        "date": started.isoformat(timespec="seconds"),
        "host": {"cpu": cpu_model(), "cpus": os.cpu_count()},
        "load_average_start": load_start,
        "load_average_end": load_end,
        "tandem": tandem,
        "onnxruntime_python": py,
        "onnxruntime": ort_runtime(results),
        "protocol": {"warmup": a["warmup"], "rounds": a["rounds"], "iterations_per_round": a["iterations"],
                     "alternation": "tandem first in even rounds, onnxruntime first in odd ones",
                     "settle": "each round starts once neither process has used CPU time for 20 ms (at most 0.5 s)"},
        "results": results,
        "summary": geo,
    }
    out = a["out"] or os.path.join(CACHE, "bench", "bench-%s.json" % started.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")

    # The markdown report.
    w = sys.stdout.write
    w("## tandem vs onnxruntime (CPU)\n\n")
    w("`%s` — %s, %s (%s CPUs); %s; %d warm-up run(s), then %d rounds × %d runs alternating; "
      "load average %s at start, %s at end.\n\n" % (
          cmdline, doc["date"], doc["host"]["cpu"], doc["host"]["cpus"], doc["onnxruntime"] or "onnxruntime",
          a["warmup"], a["rounds"],
          a["iterations"], fmt_load(load_start), fmt_load(load_end)))
    w("| model | threads | tandem ms | onnxruntime ms | ratio | tandem GFLOP/s | onnxruntime GFLOP/s "
      "| tandem peak RSS MiB | onnxruntime peak RSS MiB |\n")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for t in a["threads"]:
        for r in (r for r in results if r["threads"] == t):
            if "error" in r:
                w("| %s | %d | failed: %s | | | | | | |\n" % (r["model"], t, r["error"].replace("|", "/")[:160]))
                continue
            w("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n" % (
                r["model"], t, fmt(r["tandem"]["median_ms"], ".2f"), fmt(r["ort"]["median_ms"], ".2f"),
                fmt(r["ratio"], ".2f"), fmt(r["tandem_gflops_per_s"], ".1f"), fmt(r["ort_gflops_per_s"], ".1f"),
                fmt(mib(r["tandem"]["peak_rss_bytes"]), ".1f"), fmt(mib(r["ort"]["peak_rss_net_bytes"]), ".1f")))
        g = geo[str(t)]
        w("| **geometric mean** | %d | | | **%s** | | | | |\n" % (t, fmt(g["geomean_ratio"], ".2f")))
    w("\nratio = tandem median / onnxruntime median (below 1: tandem is faster). Medians over all "
      "timed runs of all rounds. onnxruntime's peak RSS is net of the Python interpreter's own resident "
      "size before onnxruntime was imported (%s MiB here); the JSON has both.\n" % fmt_baseline(results))
    w("\nJSON: %s\n" % out)
    sys.stdout.flush()
    return 1 if failed else 0


def fmt_load(l):
    return "—" if not l else "/".join("%.2f" % x for x in l)


def ort_runtime(results):
    """onnxruntime's version as its reports name it (e.g. "onnxruntime 1.31.1 (Python 3.11)")."""
    return next((r["ort"].get("runtime") for r in results if "ort" in r), None)


def fmt_baseline(results):
    b = [r["ort"]["baseline_rss_bytes"] for r in results if "ort" in r]
    return "—" if not b else "%.0f" % mib(sorted(b)[len(b) // 2])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
