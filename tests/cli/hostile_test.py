#!/usr/bin/python3
"""Hostile side files, signals and long values against the tandem CLI
(issue 13, item 4). Usage:

    hostile_test.py TANDEM DATA_DIR CASE

DATA_DIR holds the models make_models.py wrote (add.onnx, dyn.onnx, x.npy,
y.npy); this script writes the few it needs itself. Every tandem process runs
with its address space capped (ulimit -v) and a timeout, so a reader that
reads /dev/zero or a FIFO fails the test instead of the machine. Under
AddressSanitizer (env TDM_SANITIZED=1, set by the test's CMake), which
reserves terabytes of shadow address space, the cap is on resident memory
instead: the test watches the process and kills it past MEM_CAP.
Exit 0 pass, 1 fail, 77 skip."""
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

TANDEM, DATA, CASE = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
if not os.path.exists(os.path.join(DATA, "add.onnx")):
    print("no test models in %s (cli.models did not run or python3-onnx is missing)" % DATA)
    sys.exit(77)
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print("hostile_test: %s" % e)
    sys.exit(77)

WORK = os.path.join(DATA, "work", "hostile-" + CASE)
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)

MEM_CAP = 2 << 30  # bytes of address space per tandem process
TIMEOUT = 60
failures = []
checks = 0


def d(name):
    return os.path.join(DATA, name)


SANITIZED = os.environ.get("TDM_SANITIZED") == "1"


def capped():
    if not SANITIZED:
        resource.setrlimit(resource.RLIMIT_AS, (MEM_CAP, MEM_CAP))


def rss(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def run(args, code, err=()):
    """Runs tandem ARGS (memory capped, with a timeout); checks the exit code,
    that stderr's first line holds every fragment of err and that every line
    stays within ~200 characters; returns stderr."""
    t0 = time.monotonic()
    p = subprocess.Popen([TANDEM] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=capped)
    peak = 0
    while p.poll() is None:
        peak = max(peak, rss(p.pid))
        if peak > MEM_CAP or time.monotonic() - t0 > TIMEOUT:
            p.kill()
            p.wait()
            check(False, "tandem %s: %s" % (" ".join(args)[:200], "resident memory passed %d bytes" % MEM_CAP
                                             if peak > MEM_CAP else "still running after %d s" % TIMEOUT))
            return ""
        time.sleep(0.005)
    took = time.monotonic() - t0
    se = p.stderr.read().decode("utf-8", "replace")
    p.stderr.close()
    what = "tandem " + " ".join(a if len(a) < 80 else a[:40] + "..." for a in args)
    check(p.returncode == code, "%s: exit %d, expected %d\n  stderr: %s" % (what, p.returncode, code, se.strip()))
    errs = [l for l in se.splitlines() if not l.startswith("tandem: using fixed-seed random")]
    first = errs[0] if errs else ""
    for frag in [err] if isinstance(err, str) else err:
        check(frag in first, "%s: the error line lacks %r\n  stderr: %s" % (what, frag, se.strip()))
    check(all(len(l) <= 210 for l in se.splitlines()), "%s: a line of stderr is longer than 210: %r" % (what, se))
    check(took < 20, "%s: took %.1f s" % (what, took))
    return se


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, producer_name="tandem-tests", opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, name + ".onnx")
    return os.path.abspath(name + ".onnx")


ADD_Y = ["--input", "y=" + d("y.npy")]


def listing(folder):
    found = []
    for root, dirs, files in os.walk(folder):
        for f in dirs + files:
            found.append(os.path.relpath(os.path.join(root, f), folder))
    return sorted(found)


# --------------------------------------------------------- special files

def case_dev_zero():
    """/dev/zero as MODEL, --input, --calibration, vnpu profile, plugin:
    refused at once, naming the path, without reading it."""
    nr = "not a regular file"
    run(["info", "/dev/zero"], 5, ["model '/dev/zero'", "character device", nr])
    run(["run", "/dev/zero", "--random"], 5, ["model '/dev/zero'", nr])
    run(["run", d("add.onnx"), "--input", "x=/dev/zero"] + ADD_Y, 5, ["input 'x'", "'/dev/zero'", nr])
    run(["run", d("add.onnx"), "--input", "x=/dev/zero.npy"] + ADD_Y, 5, ["input 'x'", "does not exist"])
    run(["plan", d("add.onnx"), "--calibration", "/dev/zero"], 5, ["calibration file '/dev/zero'", nr])
    run(["run", d("add.onnx"), "--random", "--calibration", "/dev/zero"], 5, ["calibration file '/dev/zero'", nr])
    run(["plan", d("add.onnx"), "--devices", "vnpu:/dev/zero"], 5, ["vnpu profile '/dev/zero'", nr])
    run(["plan", d("add.onnx"), "--plugin", "/dev/zero"], 5, ["plugin '/dev/zero'", nr])


def case_fifo():
    """A FIFO nobody writes to: refused without blocking on open()."""
    for name in ("pipe.onnx", "pipe.npy", "pipe.pb", "pipe", "pipe.json"):
        os.mkfifo(name)
    nr = ["a FIFO", "not a regular file"]
    run(["info", "pipe.onnx"], 5, ["model 'pipe.onnx'"] + nr)
    for f in ("pipe.npy", "pipe.pb", "pipe"):
        run(["run", d("add.onnx"), "--input", "x=" + f] + ADD_Y, 5, ["input 'x'", "'%s'" % f] + nr)
    run(["plan", d("add.onnx"), "--calibration", "pipe.json"], 5, ["calibration file 'pipe.json'"] + nr)
    run(["plan", d("add.onnx"), "--devices", "vnpu:./pipe.json"], 5, ["vnpu profile './pipe.json'"] + nr)
    # a folder is refused as plainly
    os.mkdir("dir.npy")
    run(["run", d("add.onnx"), "--input", "x=dir.npy"] + ADD_Y, 5, ["input 'x'", "'dir.npy' is a folder"])


def case_oversized():
    """Files past their kind's documented limit (sparse: no disk used) are
    refused from their size, before a byte is read: exit 2 (4 for a profile)."""
    def sparse(name, size):
        with open(name, "wb") as f:
            f.truncate(size)
    sparse("big.onnx", (2 << 30) + 1)
    sparse("big.pb", (2 << 30) + 1)
    sparse("big.npy", (16 << 30) + 1)
    sparse("big.json", (256 << 20) + 1)
    sparse("big-profile.json", (16 << 20) + 1)
    run(["info", "big.onnx"], 2, ["model 'big.onnx'", "past the 2 GiB limit"])
    run(["run", d("add.onnx"), "--input", "x=big.pb"] + ADD_Y, 2, ["input 'x'", "'big.pb'", "past the 2 GiB limit"])
    run(["run", d("add.onnx"), "--input", "x=big.npy"] + ADD_Y, 2, ["input 'x'", "'big.npy'", "past the 16 GiB"])
    run(["plan", d("add.onnx"), "--calibration", "big.json"], 2, ["'big.json'", "past the 256 MiB limit"])
    run(["plan", d("add.onnx"), "--devices", "vnpu:./big-profile.json"], 4,
        ["'./big-profile.json'", "past the 16 MiB limit"])


# ------------------------------------------------------------- signals

def big_model():
    """Six outputs of 48 MiB each (ConstantOfShape): writing them takes a
    moment, so a signal can arrive in the middle."""
    shape = numpy_helper.from_array(np.array([12 << 20], dtype=np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5]))]
    outs = []
    for i in range(6):
        nodes.append(helper.make_node("Add", ["c", "x"], ["o%d" % i]))
        outs.append(helper.make_tensor_value_info("o%d" % i, TensorProto.FLOAT, [12 << 20]))
    return model("big", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], outs, [shape])


def tmp_folders(out):
    return [f for f in os.listdir(out) if f.startswith(".tandem-tmp-")] if os.path.isdir(out) else []


def writing(out):
    """Whether a run has set up its temporary folder (owner file written)."""
    return any(os.path.exists(os.path.join(out, f, ".tandem-owner")) for f in tmp_folders(out))


def interrupt(path, out, sig):
    """Starts a run writing into out, sends sig once its temporary folder
    appears; returns (exit code, stderr, whether the signal was sent)."""
    p = subprocess.Popen([TANDEM, "run", path, "--random", "--output-dir", out], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=capped)
    sent = False
    deadline = time.monotonic() + TIMEOUT
    while p.poll() is None and time.monotonic() < deadline:
        if writing(out):
            p.send_signal(sig)
            sent = True
            break
        time.sleep(0.0005)
    try:
        _, se = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        _, se = p.communicate()
    return p.returncode, se.decode("utf-8", "replace"), sent


def case_signals():
    """SIGINT, SIGTERM and SIGHUP while the outputs are written: no file is
    left behind, and the exit code is 128 + the signal."""
    path = big_model()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        trials = 1 if sig == signal.SIGHUP else 3
        for t in range(trials):
            out = "out-%s-%d" % (sig.name, t)
            rc, se, sent = interrupt(path, out, sig)
            check(sent, "%s trial %d: the run ended before its temporary folder was seen (rc %d)" % (sig.name, t, rc))
            if not sent:
                continue
            check(rc == 128 + sig, "%s trial %d: exit %d, expected %d; stderr: %s" % (sig.name, t, rc, 128 + sig, se))
            check("interrupted by %s" % sig.name in se, "%s trial %d: stderr lacks the reason: %r" % (sig.name, t, se))
            check(listing(out) == [], "%s trial %d: files left behind: %r" % (sig.name, t, listing(out)))


def case_stale_temp():
    """A temporary folder left by a killed run (SIGKILL: no cleanup) is
    removed by a later run into the same folder; folders that cannot be
    proven a dead tandem run's own are kept."""
    path = big_model()
    rc, se, sent = interrupt(path, "out", signal.SIGKILL)
    check(sent and rc == -signal.SIGKILL, "SIGKILL: rc %d, sent %s" % (rc, sent))
    left = tmp_folders("out")
    check(len(left) == 1, "SIGKILL left %r" % left)
    # Look-alikes that are not provably ours: no owner file; a live pid (this
    # script's); an owner file that names another pid.
    dead = subprocess.Popen(["true"])
    dead.wait()
    keep = [".tandem-tmp-%d-aaaaaa" % dead.pid, ".tandem-tmp-%d-bbbbbb" % os.getpid(),
            ".tandem-tmp-%d-cccccc" % dead.pid, ".tandem-tmp-XXXXXX"]
    for k in keep:
        os.makedirs(os.path.join("out", k))
    if left:
        owner = open(os.path.join("out", left[0], ".tandem-owner")).read()
        with open(os.path.join("out", keep[1], ".tandem-owner"), "w") as f:
            f.write(owner.replace("pid %s\n" % left[0].split("-")[2], "pid %d\n" % os.getpid()))
        with open(os.path.join("out", keep[2], ".tandem-owner"), "w") as f:
            f.write(owner.replace("pid ", "pid 1"))
    se = run(["run", d("add.onnx"), "--input", "x=" + d("x.npy")] + ADD_Y + ["--output-dir", "out"], 0)
    check(left and "removed" in se and left[0] in se, "the later run did not say it removed %r: %r" % (left, se))
    check(sorted(tmp_folders("out")) == sorted(keep), "after the later run: %r, expected %r" % (tmp_folders("out"), keep))
    check(os.path.exists("out/z.npy") and os.path.exists("out/w.npy"), "the later run's outputs: %r" % listing("out"))


# ------------------------------------------------- long values, calibration

def case_long_name():
    """An output named with 5,000 characters: the error line keeps its
    reason ("File name too long") within ~200 characters."""
    name = "o" * 5000
    path = model("long", [helper.make_node("Identity", ["x"], [name])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                 [helper.make_tensor_value_info(name, TensorProto.FLOAT, [3])])
    se = run(["run", path, "--random", "--output-dir", "out"], 5, ["output 'oooo", "\u2026", "File name too long"])
    line = [l for l in se.splitlines() if "File name too long" in l]
    check(line and len(line[0]) <= 200, "the error line: %d characters" % (len(line[0]) if line else -1))
    check(tmp_folders("out") == [] and listing("out") == [], "files left: %r" % listing("out"))
    # a 5,000-character input path: the reason stays on the line too
    run(["run", d("add.onnx"), "--input", "x=" + "d" * 5000 + ".npy"] + ADD_Y, 5,
        ["input 'x'", "\u2026", "File name too long"])


def case_calibration_match():
    """A calibration file made for another model: says how many entries
    matched, and warns when none or few did."""
    run(["calibrate", d("add.onnx"), "--random", "--devices", "vnpu:edge-npu", "--out", "cal.json"], 0)
    se = run(["plan", d("add.onnx"), "--devices", "vnpu:edge-npu", "--calibration", "cal.json"], 0)
    check("calibration 'cal.json': 3 of 3 entries match this model's nodes" in se and "warning" not in se,
          "the matching file: %r" % se)
    se = run(["plan", d("dyn.onnx"), "--devices", "vnpu:edge-npu", "--calibration", "cal.json"], 0)
    check("warning: calibration 'cal.json': none of its 3 entries match" in se, "another model's file: %r" % se)
    se = run(["run", d("dyn.onnx"), "--random", "--shape", "x=2x4", "--devices", "vnpu:edge-npu",
              "--calibration", "cal.json"], 0)
    check("none of its 3 entries match" in se, "run with another model's file: %r" % se)


def case_onehot_depth():
    """OneHot with a depth of 1e12 says it is too large, with the range."""
    vals = numpy_helper.from_array(np.array([0, 1], dtype=np.float32), "values")
    path = model("onehot", [helper.make_node("OneHot", ["i", "depth", "values"], ["y"])],
                 [helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
                  helper.make_tensor_value_info("depth", TensorProto.INT64, [])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [vals], opset=11)
    np.save("i.npy", np.array([0, 1], dtype=np.int64))
    for depth, frag in ((10 ** 12, "is too large"), (0, "must be a number from 1")):
        np.save("depth.npy", np.array(depth, dtype=np.int64))
        run(["run", path, "--input", "i=i.npy", "--input", "depth=depth.npy"], 2,
            ["'depth'", frag, "below 1e12"])


CASES = {name[5:].replace("_", "-"): fn for name, fn in globals().items() if name.startswith("case_")}
if CASE not in CASES:
    print("unknown case %r; cases: %s" % (CASE, " ".join(sorted(CASES))))
    sys.exit(1)
CASES[CASE]()
for f in failures:
    print("FAIL: " + f)
print("%s: %d checks, %d failed" % (CASE, checks, len(failures)))
if not failures:
    shutil.rmtree(WORK, ignore_errors=True)
sys.exit(1 if failures else 0)
