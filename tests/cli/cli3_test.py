#!/usr/bin/python3
"""The last pieces of issue 19 item 3:
   cli3_test.py TANDEM WORKDIR CASE

shape         info --shape NAME=DxD describes the model specialised to that
              shape: inputs' and outputs' shapes fixed, FLOPs counted (unknown
              before); --json the same; a name that is not an input exits 2
              listing the inputs, a wrong rank exits 2, a repeated name 1
aliases       one vocabulary: calibrate --iterations N = --repeat N (the file
              records the same count, the same nodes), extract --output-dir
              DIR = --out DIR (the same files), --top 0 means all in compare
              and profile as in audit and logs
progress      progress goes to stderr only on a terminal: calibrate, bench,
              profile, audit and report with stderr a pipe print no progress (no '\r',
              no 'N% [i/n]') and never on stdout; bench with stderr a pty
              (python's pty module) for a run sized from a first timing to
              last about 5 s shows 'bench: ...% [i/n] runs' lines there and
              erases the line at the end (a run that ended within 2 s is made
              longer, twice at most); stdout stays the same table"""
import json
import os
import pty
import re
import subprocess
import sys
import time

from chain import check, enter, finish, tandem

try:
    from onnx import TensorProto, helper, numpy_helper
    import onnx
    import numpy as np
except ImportError:
    print("python3-onnx or numpy is missing")
    sys.exit(77)

TANDEM, CASE = sys.argv[1], sys.argv[3]
WORK = enter(sys.argv[2], CASE)


def run(args, code):
    return tandem(TANDEM, args, code)


def matmul_model(name="mm.onnx", k=8, n=16):
    """X [N, K] -> MatMul W [K, N'] -> Relu -> Y [N, N']: N is dynamic, so
    the FLOPs (2 * N * K * N') are known only once N is fixed."""
    w = numpy_helper.from_array(np.linspace(-1, 1, k * n, dtype=np.float32).reshape(k, n), "W")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["t"], name="mm"),
             helper.make_node("Relu", ["t"], ["Y"], name="relu")]
    g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", k])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", n])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, name)
    return name


def line(text, key):
    return next((l for l in text.splitlines() if l.startswith(key)), "")


def case_shape():
    mm = matmul_model()
    so, _ = run(["info", mm], 0)
    check("[N, 8]" in so and "[N, 16]" in so, "without --shape the dims are symbolic: %s" % so)
    check("unknown shapes" in line(so, "flops"), "without --shape the MatMul's FLOPs are unknown: %s" % so)
    so, _ = run(["info", mm, "--shape", "X=4x8"], 0)
    check("X  float [4, 8]" in so, "input shape fixed: %s" % so)
    check("Y  float [4, 16]" in so, "output shape inferred from it: %s" % so)
    check("unknown" not in line(so, "flops") and "0.000 GFLOPs" in line(so, "flops"),
          "FLOPs known: %s" % line(so, "flops"))
    # the same as JSON: 2 * 4 * 8 * 16 FLOPs, none unknown
    so, _ = run(["info", mm, "--shape=X=4x8", "--json"], 0)
    d = json.loads(so)
    check(d["inputs"][0]["shape"] == [4, 8] and d["outputs"][0]["shape"] == [4, 16], "json shapes: %s" % d)
    check(d["flops"] == 2 * 4 * 8 * 16 and d["flops_unknown_nodes"] == 0, "json flops: %s" % d)
    so, _ = run(["info", mm, "--json", "--shape", "X=32x8"], 0)
    check(json.loads(so)["flops"] == 2 * 32 * 8 * 16, "flops follow the shape: %s" % so)
    so, _ = run(["info", mm, "--json"], 0)
    d = json.loads(so)
    check(d["flops"] == 0 and d["flops_unknown_nodes"] == 1 and d["inputs"][0]["shape"] == ["N", 8],
          "json without --shape: %s" % d)
    # '?' keeps a dimension
    so, _ = run(["info", mm, "--shape", "X=?x8"], 0)
    check("[N, 8]" in so, "'?' keeps N: %s" % so)
    # a name that is not an input: exit 2 naming the inputs, nothing on stdout
    so, se = run(["info", mm, "--shape", "Z=4x8"], 2)
    check("'Z'" in se and "its inputs: 'X'" in se and so == "", "bad name: %s" % se)
    _, se = run(["info", mm, "--shape", "X=4"], 2)
    check("rank" in se, "wrong rank: %s" % se)
    _, se = run(["info", mm, "--shape", "X=4x8", "--shape", "X=2x8"], 1)
    check("twice" in se, "repeated name: %s" % se)
    _, se = run(["info", mm, "--shape", "X=4xq"], 1)
    check(se.startswith("tandem: "), "bad dims: %s" % se)
    _, se = run(["info", mm, "--shape"], 1)
    check("needs a value" in se, "missing value: %s" % se)
    so, _ = run(["help", "info"], 0)
    check("--shape NAME=DxD" in so, "help info: %s" % so)


SHAPE = ["--shape", "X=4x8"]
VNPU = "vnpu:edge-npu,cpu"
PROGRESS = re.compile(r"\d+% \[\d+/\d+\]")


def case_aliases():
    mm = matmul_model()
    run(["calibrate", mm, "--devices", "vnpu:edge-npu", "--random"] + SHAPE + ["--iterations", "3", "--out", "a.json"], 0)
    run(["calibrate", mm, "--devices", "vnpu:edge-npu", "--random"] + SHAPE + ["--repeat", "3", "--out", "b.json"], 0)
    a, b = json.load(open("a.json")), json.load(open("b.json"))
    check(a["repeat"] == 3 and b["repeat"] == 3, "--iterations 3 and --repeat 3 both recorded: %s %s"
          % (a.get("repeat"), b.get("repeat")))
    check(sorted(a["nodes"]) == sorted(b["nodes"]) and len(a["nodes"]) == 2, "same nodes: %s %s"
          % (sorted(a["nodes"]), sorted(b["nodes"])))
    _, se = run(["calibrate", mm, "--devices", "cpu", "--random"] + SHAPE + ["--iterations", "0", "--out", "c.json"], 1)
    check("--iterations expects a number" in se, "calibrate --iterations 0: %s" % se)
    so, _ = run(["help", "calibrate"], 0)
    check("--iterations N" in so and "--repeat N" in so, "help calibrate names both: %s" % so)

    run(["extract", mm] + SHAPE + ["--node", "mm", "--output-dir", "d1"], 0)
    run(["extract", mm] + SHAPE + ["--node", "mm", "--out", "d2"], 0)
    for f in ("model.onnx", "input_0.pb", "input_1.pb", "output_0.pb"):
        if os.path.exists(os.path.join("d2", f)) or os.path.exists(os.path.join("d1", f)):
            check(open(os.path.join("d1", f), "rb").read() == open(os.path.join("d2", f), "rb").read(),
                  "extract: %s differs between --output-dir and --out" % f)
    check(os.path.exists("d1/model.onnx") and os.path.exists("d1/input_0.pb"), "extract --output-dir wrote d1")
    readme = open("d1/README.txt").read()
    check(readme == open("d2/README.txt").read().replace("d2/", "d1/"), "README.txt the same but the folder")
    run(["extract", mm] + SHAPE + ["--node", "mm", "--output-dir=d3"], 0)
    check(os.path.exists("d3/model.onnx"), "--output-dir=DIR")

    all_, _ = run(["compare", mm] + SHAPE + ["--devices", VNPU, "--top", "0"], 0)
    many, _ = run(["compare", mm] + SHAPE + ["--devices", VNPU, "--top", "1000"], 0)
    one, _ = run(["compare", mm] + SHAPE + ["--devices", VNPU, "--top", "1"], 0)
    check(all_ == many and "worst 2:" in all_, "compare --top 0 lists all: %s" % all_)
    check("worst 1:" in one, "compare --top 1: %s" % one)
    so, _ = run(["profile", mm] + SHAPE + ["--warmup", "0", "--iterations", "2", "--top", "0", "--json"], 0)
    d = json.loads(so)
    check(len(d.get("nodes", [])) == 2, "profile --top 0 --json: every node: %s" % so[:300])
    so, _ = run(["profile", mm] + SHAPE + ["--warmup", "0", "--iterations", "2", "--top", "0"], 0)
    check("more nodes" not in so and "relu" in so and "mm" in so, "profile --top 0 shows every node: %s" % so)
    so, _ = run(["profile", mm] + SHAPE + ["--warmup", "0", "--iterations", "2", "--top", "1"], 0)
    check("1 more nodes" in so or "(1 more node" in so, "profile --top 1: %s" % so)


def no_progress(args, code=0):
    so, se = run(args, code)
    check("\r" not in se and not PROGRESS.search(se), "%s: no progress on a non-terminal stderr: %r"
          % (args[0], se[-300:]))
    check("\r" not in so and not PROGRESS.search(so), "%s: no progress on stdout: %r" % (args[0], so[-300:]))
    return so


def with_pty_stderr(args):
    """Runs tandem with stderr a pseudo-terminal, stdout a pipe."""
    master, slave = pty.openpty()
    p = subprocess.Popen([TANDEM] + args, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    err = b""
    while True:
        try:
            b = os.read(master, 4096)
        except OSError:  # EIO: the child closed its side
            break
        if not b:
            break
        err += b
    os.close(master)
    out = p.stdout.read()
    p.wait(timeout=600)
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def big_model(name="big.onnx", k=256):
    """X [1, K] -> K MatMul [K, K] in a chain: slow enough per run to time."""
    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "X"
    for i in range(8):
        w = numpy_helper.from_array((rng.standard_normal((k, k)) / k).astype(np.float32), "W%d" % i)
        inits.append(w)
        out = "Y" if i == 7 else "t%d" % i
        nodes.append(helper.make_node("MatMul", [prev, "W%d" % i], [out], name="mm%d" % i))
        prev = out
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [64, k])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [64, k])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, name)
    return name


def case_progress():
    mm = matmul_model()
    big = big_model()
    no_progress(["calibrate", mm, "--devices", "vnpu:edge-npu", "--random"] + SHAPE + ["--out", "c.json"])
    no_progress(["profile", mm] + SHAPE + ["--warmup", "0", "--iterations", "3"])
    no_progress(["audit", mm, big, "--devices", VNPU, "--shape", "mm.onnx:X=4x8"])
    no_progress(["report", mm] + SHAPE + ["--iterations", "3", "--html", "r.html"])
    # a first timing sizes the terminal run to about 5 s (never asserted)
    so = no_progress(["bench", big, "--warmup", "0", "--iterations", "20", "--threads", "1", "--json"])
    per_run = max(json.loads(so)["median_ms"] / 1e3, 1e-5)
    n = int(min(max(5.0 / per_run, 20), 500000))
    for _ in range(3):  # a run that ended within 2 s (a busy first timing) is made longer
        t = time.monotonic()
        rc, out, err = with_pty_stderr(["bench", big, "--warmup", "0", "--iterations", str(n), "--threads", "1"])
        if time.monotonic() - t > 3 or PROGRESS.search(err):
            break
        n *= 2
    check(rc == 0, "bench on a terminal: exit %d: %s" % (rc, err[-300:]))
    lines = [l for l in err.split("\r") if PROGRESS.search(l)]
    check(len(lines) >= 1 and all(l.startswith("bench: ") and l.rstrip().endswith("runs") for l in lines),
          "bench on a terminal: progress lines on stderr (%d runs): %r" % (n, err[-400:]))
    check(err.endswith("\r") and err.split("\r")[-2].strip() == "", "the progress line is erased at the end: %r"
          % err[-200:])
    check("\r" not in out and not PROGRESS.search(out) and "median" in out, "stdout without progress: %r" % out)


CASES = {"shape": case_shape, "aliases": case_aliases, "progress": case_progress}
CASES[CASE]()
finish()
