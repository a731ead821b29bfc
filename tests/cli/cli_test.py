#!/usr/bin/python3
"""Golden tests of the tandem command line: exit code, a stderr fragment and
stdout content for each command. Usage:

    cli_test.py TANDEM DATA_DIR CASE

DATA_DIR holds the models and inputs make_models.py wrote. Each case runs in
a fresh folder under DATA_DIR/work/. Exit 0 pass, 1 fail, 77 skip."""
import json
import os
import shutil
import subprocess
import sys

TANDEM, DATA, CASE = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
if not os.path.exists(os.path.join(DATA, "add.onnx")):
    print("no test models in %s (cli.models did not run or python3-onnx is missing)" % DATA)
    sys.exit(77)
try:
    import numpy as np
except ImportError:
    np = None

WORK = os.path.join(DATA, "work", CASE)
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)

failures = []
checks = 0


def d(name):
    return os.path.join(DATA, name)


def run(args, code, err=None, out=None, no_out=False):
    """Runs tandem ARGS and checks the exit code, that stderr contains every
    fragment in err, stdout every fragment in out; returns (stdout, stderr)."""
    global checks
    p = subprocess.run([TANDEM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    what = "tandem " + " ".join(args)
    checks += 1
    if p.returncode != code:
        failures.append("%s: exit %d, expected %d\n  stderr: %s" % (what, p.returncode, code, se.strip()))
    for frag in ([err] if isinstance(err, str) else err or []):
        checks += 1
        if frag not in se:
            failures.append("%s: stderr lacks %r\n  stderr: %s" % (what, frag, se.strip()))
    for frag in ([out] if isinstance(out, str) else out or []):
        checks += 1
        if frag not in so:
            failures.append("%s: stdout lacks %r\n  stdout: %s" % (what, frag, so.strip()))
    if code != 0 and code != 0 and p.returncode == code and not args[-1:] == ["--help"]:
        # An error is one sentence starting "tandem: ", at most ~200 chars a line.
        checks += 1
        lines = se.splitlines()
        if not lines or not lines[0].startswith("tandem: ") or any(len(l) > 210 for l in lines):
            failures.append("%s: malformed error output %r" % (what, se))
        if no_out and so:
            failures.append("%s: printed to stdout on failure: %r" % (what, so))
    return so, se


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def listing(folder):
    if not os.path.isdir(folder):
        return []
    found = []
    for root, dirs, files in os.walk(folder):
        for f in dirs + files:
            found.append(os.path.relpath(os.path.join(root, f), folder))
    return sorted(found)


def load(path):
    return np.load(path)


X = np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32) if np else None
Y = np.array([[0.5, 0.5, 0.5], [1, 1, 1]], dtype=np.float32) if np else None
ADD_IN = ["--input", "x=" + d("x.npy"), "--input", "y=" + d("y.npy")]


def case_help():
    run(["--help"], 0, out=["usage: tandem COMMAND", "exit codes:", "70"])
    run(["help"], 0, out="usage: tandem COMMAND")
    run(["help", "run"], 0, out="usage: tandem run MODEL")
    run(["help", "--help"], 0, out="usage: tandem COMMAND")
    # --devices names every kind of device and every shipped profile
    so, _ = run(["run", "--help"], 0)
    profiles = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles")
    shipped = sorted(f[:-5] for f in os.listdir(profiles) if f.endswith(".json"))
    check(len(shipped) >= 7, "profiles/: %r" % shipped)
    for name in ["opencl[:N]", "vnpu:PROFILE", "cpu"] + shipped:
        check(name in so, "run --help: --devices does not name %s" % name)
    run(["run", "--help"], 0, out=["usage: tandem run MODEL", "--output-dir", "--overwrite"])
    run(["info", "--help"], 0, out=["usage: tandem info MODEL", "--json"])
    run(["--version"], 0, out="tandem 0.3.0")


def case_usage():
    run([], 1, err="usage: tandem COMMAND")
    run(["run"], 1, err="no MODEL", no_out=True)
    run(["info"], 1, err="no MODEL", no_out=True)
    run(["info", d("add.onnx"), d("dyn.onnx")], 1, err="one MODEL only")
    run(["info", d("add.onnx"), "--bogus"], 1, err="unknown option '--bogus'")
    run(["run", d("add.onnx"), "--bogus"], 1, err="unknown option '--bogus'")
    run(["run", d("add.onnx"), "--threads", "abc"] + ADD_IN, 1, err="--threads")
    run(["run", d("add.onnx"), "--threads", "-2"] + ADD_IN, 1, err="--threads")
    run(["run", d("add.onnx"), "--input", "noequals"], 1, err="NAME=FILE")
    run(["run", d("add.onnx"), "--input"], 1, err="'--input' needs a value")
    run(["run", d("add.onnx"), "--shape", "x=2xq", "--random"], 1, err="--shape x=2xq")
    run(["run", d("add.onnx"), "--input", "x=a.npy", "--input", "x=b.npy"], 1, err="'x' is given twice")
    run(["run", d("add.onnx"), "--devices", "cpu,,cpu", "--random"], 1, err="--devices")
    run(["run", d("add.onnx"), "--fallback", "never", "--random"], 1, err="--fallback")
    # the words are the library's (tdm_*_parse), and so is the sentence
    run(["run", d("add.onnx"), "--granularity", "sub-graph", "--random"], 1,
        err="run: --granularity: 'sub-graph' is not a granularity (op, subgraph, graph, auto or greedy)", no_out=True)
    run(["plan", d("add.onnx"), "--fallback", "never"], 1,
        err="plan: --fallback: 'never' is not a fallback mode (allow, deny or deny-compute)", no_out=True)
    run(["run", d("add.onnx"), "--verify", "every:0", "--random"], 1,
        err="--verify: 'every:0' is not a verify mode (off, first or every:N (N >= 1))", no_out=True)


def case_unknown_command():
    run(["frobnicate"], 1, err="unknown command 'frobnicate'", no_out=True)
    run(["--frobnicate"], 1, err="unknown option '--frobnicate'")
    for cmd in ():  # every command is implemented (calibrate: issue 5)
        run([cmd, d("add.onnx")], 1, err="'%s' is not implemented yet" % cmd, no_out=True)


def case_missing_model():
    run(["info", "nope.onnx"], 5, err="nope.onnx", no_out=True)
    run(["run", "nope.onnx", "--random"], 5, err="nope.onnx", no_out=True)


def case_malformed_model():
    run(["info", d("bad.onnx")], 2, err="bad.onnx", no_out=True)
    run(["run", d("bad.onnx"), "--random"], 2, err="bad.onnx", no_out=True)
    # An .npy file is not a model either.
    run(["info", d("x.npy")], 2, err="x.npy", no_out=True)


def case_info_text():
    so, _ = run(["info", d("add.onnx")], 0,
                out=["producer    tandem-tests 1.2", "ir version  8", "opsets      ai.onnx 13",
                     "version     7", "graph       addrelu", 'author = cli "tests"\\n',
                     "inputs      2", "  x  float [2, 3]", "outputs     2", "  z  float [2, 3]",
                     "nodes       3", "  Add       1", "  Identity  1", "  Relu      1",
                     "params      0 (0 B)", "flops       0.000 GFLOPs"])
    run(["info", d("dyn.onnx")], 0, out=["  x  float [N, 4]", "  y  float [N, 4]", "params      4 (16 B)",
                                         "nodes       2"])
    run(["info", d("seq.onnx")], 0, out=["s  sequence<float>"])


def case_info_json():
    so, _ = run(["info", d("add.onnx"), "--json"], 0)
    doc = json.loads(so)
    check(doc["producer"] == {"name": "tandem-tests", "version": "1.2"}, "producer: %r" % doc.get("producer"))
    check(doc["ir_version"] == 8 and doc["model_version"] == 7, "ir/model version")
    check(doc["opsets"] == [{"domain": "ai.onnx", "version": 13}], "opsets: %r" % doc["opsets"])
    check(doc["metadata"] == {"author": 'cli "tests"\n'}, "metadata escaping: %r" % doc["metadata"])
    check([(i["name"], i["kind"], i["dtype"], i["shape"]) for i in doc["inputs"]] ==
          [("x", "tensor", "float", [2, 3]), ("y", "tensor", "float", [2, 3])], "inputs: %r" % doc["inputs"])
    check([o["name"] for o in doc["outputs"]] == ["z", "w"], "outputs: %r" % doc["outputs"])
    check(doc["nodes"] == 3, "nodes")
    check(sorted((o["op"], o["count"]) for o in doc["op_types"]) == [("Add", 1), ("Identity", 1), ("Relu", 1)],
          "op_types: %r" % doc["op_types"])
    check(doc["params"] == {"count": 0, "bytes": 0}, "params")
    check(doc["flops"] == 0 and doc["gflops"] == 0, "flops")
    doc = json.loads(run(["info", d("dyn.onnx"), "--json"], 0)[0])
    check(doc["inputs"][0]["shape"] == ["N", 4], "symbolic dim: %r" % doc["inputs"][0])
    check(doc["params"] == {"count": 4, "bytes": 16}, "params: %r" % doc["params"])
    doc = json.loads(run(["info", d("names.onnx"), "--json"], 0)[0])
    check([o["name"] for o in doc["outputs"]] == ["a/b", "a:b", "a_b", 'q"\\\u00e9'],
          "escaped names: %r" % [o["name"] for o in doc["outputs"]])
    doc = json.loads(run(["info", d("seq.onnx"), "--json"], 0)[0])
    check(doc["outputs"][0]["kind"] == "sequence", "sequence kind: %r" % doc["outputs"][0])


def case_info_cache_models():
    models = os.path.join(os.environ.get("TANDEM_CACHE", ""), "models")
    files = sorted(f for f in os.listdir(models) if f.endswith(".onnx")) if os.path.isdir(models) else []
    if not files:
        print("no models in %s" % models)
        sys.exit(77)
    import collections
    import onnx
    import onnx.numpy_helper as nh
    for f in files:
        so, _ = run(["info", os.path.join(models, f), "--json"], 0)
        try:
            doc = json.loads(so)
        except ValueError as e:
            check(False, "%s: info --json is not JSON: %s" % (f, e))
            continue
        # Golden figures straight from the file, with onnx's own reader.
        m = onnx.load(os.path.join(models, f))
        g = m.graph
        inits = {t.name for t in g.initializer}
        hist = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in g.node)
        got = {(o["domain"], o["op"]): o["count"] for o in doc["op_types"]}
        check(doc["nodes"] == len(g.node), "%s: nodes %r, the file has %d" % (f, doc["nodes"], len(g.node)))
        check(got == dict(hist), "%s: op histogram %r differs from the file's %r" % (f, got, dict(hist)))
        # A dim of -1 (PaddlePaddle's exports) or an empty dim_param is dynamic
        # without a name: null in the JSON.
        want_in = [(i.name, [(d.dim_value if d.dim_value >= 0 else None) if d.HasField("dim_value")
                             else (d.dim_param or None)
                             for d in i.type.tensor_type.shape.dim]) for i in g.input if i.name not in inits]
        got_in = [(i["name"], i["shape"]) for i in doc["inputs"]]
        check(got_in == want_in, "%s: inputs %r, the file declares %r" % (f, got_in, want_in))
        want_out = [o.name for o in g.output]
        check([o["name"] for o in doc["outputs"]] == want_out, "%s: outputs differ from %r" % (f, want_out))
        # Initializers and Constant values, subgraphs included (Silero VAD keeps
        # its weights inside the branches of an If).
        def graph_params(gr):
            n_params = sum(nh.to_array(t).size for t in gr.initializer)
            for n in gr.node:
                for a in n.attribute:
                    if n.op_type == "Constant" and a.name == "value":
                        n_params += nh.to_array(a.t).size
                    if a.type == onnx.AttributeProto.GRAPH:
                        n_params += graph_params(a.g)
                    for sub in a.graphs:
                        n_params += graph_params(sub)
            return n_params
        params = graph_params(g)
        check(doc["params"]["count"] == params, "%s: params %r, the file has %d" % (f, doc["params"], params))


def case_run_roundtrip():
    so, _ = run(["run", d("add.onnx")] + ADD_IN + ["--output-dir", "out"], 0,
                out=["z  float  2x3  min=0  max=6  mean=1.83333  -> out/z.npy",
                     "w  float  2x3  min=-6  max=5  mean=-0.5  -> out/w.npy"])
    check(listing("out") == ["w.npy", "z.npy"], "files: %r" % listing("out"))
    z, w = load("out/z.npy"), load("out/w.npy")
    check(z.dtype == np.float32 and z.shape == (2, 3) and np.array_equal(z, np.maximum(X + Y, 0)), "z: %r" % z)
    check(w.dtype == np.float32 and np.array_equal(w, X), "w: %r" % w)
    # The written file reads back as an input (and .pb inputs work).
    run(["run", d("add.onnx"), "--input", "x=out/w.npy", "--input", "y=" + d("y.npy")], 0,
        out="z  float  2x3  min=0  max=6")
    run(["run", d("add.onnx"), "--input", "x=" + d("x.pb"), "--input", "y=" + d("y.npy")], 0,
        out="z  float  2x3  min=0  max=6  mean=1.83333")
    # A nested, missing output folder is created.
    run(["run", d("add.onnx")] + ADD_IN + ["--output-dir", "a/b/c"], 0)
    check(listing("a/b/c") == ["w.npy", "z.npy"], "nested: %r" % listing("a/b/c"))
    # Integer and boolean values are kept exactly.
    run(["run", d("types.onnx"), "--input", "i=" + d("i4.npy"), "--input", "b=" + d("b22.npy"),
         "--output-dir", "t"], 0, out=["io  int64  4  min=-1  max=7  mean=2.25", "bo  bool  2x2  min=0  max=1"])
    io, bo = load("t/io.npy"), load("t/bo.npy")
    check(io.dtype == np.int64 and io.tolist() == [3, -1, 7, 0], "io: %r" % io)
    check(bo.dtype == np.bool_ and bo.tolist() == [[True, False], [False, True]], "bo: %r" % bo)
    run(["run", d("add.onnx"), "--threads", "2", "--devices", "cpu"] + ADD_IN, 0, out="z  float  2x3")
    # one thread rule for every command: --threads, else TANDEM_THREADS, 0..4096
    run(["run", d("add.onnx"), "--threads", "5000"] + ADD_IN, 1, err="--threads expects a number from 0 to 4096")
    os.environ["TANDEM_THREADS"] = "abc"
    try:
        run(["run", d("add.onnx")] + ADD_IN, 1, err="TANDEM_THREADS expects a number")
        run(["run", d("add.onnx"), "--threads", "1"] + ADD_IN, 0, out="z  float  2x3")
    finally:
        del os.environ["TANDEM_THREADS"]


def case_run_sequence_optional():
    run(["run", d("seq.onnx"), "--input", "x=" + d("v3.npy"), "--output-dir", "out"], 0,
        out=["s  sequence<float>  2 items  -> out/s", "t  float  3  min=1  max=3  mean=2  -> out/t.npy"])
    check(listing("out") == ["s", "s/0.npy", "s/1.npy", "t.npy"], "sequence files: %r" % listing("out"))
    check(load("out/s/1.npy").tolist() == [1, 2, 3], "sequence item")
    run(["run", d("seq.onnx"), "--input", "x=" + d("v3.npy"), "--output-dir", "out"], 5, err="out/s")
    run(["run", d("seq.onnx"), "--input", "x=" + d("v3.npy"), "--output-dir", "out", "--overwrite"], 0)
    check(listing("out") == ["s", "s/0.npy", "s/1.npy", "t.npy"], "sequence files after overwrite")
    run(["run", d("opt.onnx"), "--input", "x=" + d("v3.npy"), "--output-dir", "o2"], 0,
        out=["o  (absent)", "t  float  3"])
    check(listing("o2") == ["t.npy"], "absent optional writes nothing: %r" % listing("o2"))


def case_run_random():
    run(["run", d("dyn.onnx"), "--random"], 2, err=["input 'x'", "dynamic dimension 'N'", "--shape"],
        no_out=True)
    so1, se = run(["run", d("dyn.onnx"), "--random", "--shape", "x=3x4"], 0, err="fixed-seed random",
                  out="y  float  3x4  min=0")
    so2, _ = run(["run", d("dyn.onnx"), "--random", "--shape", "x=3x4"], 0)
    check(so1 == so2, "random inputs are not deterministic:\n%s\n%s" % (so1, so2))
    run(["run", d("dyn.onnx"), "--random", "--shape", "x=3x5"], 2, err="x")
    run(["run", d("dyn.onnx"), "--random", "--shape", "q=3x4"], 2, err="'q'")
    run(["run", d("add.onnx"), "--random", "--output-dir", "out"], 0, err="'x', 'y'")
    w = load("out/w.npy")
    check(w.shape == (2, 3) and (w >= -1).all() and (w <= 1).all() and len(set(w.ravel().tolist())) > 1,
          "random floats in [-1, 1]: %r" % w)
    run(["run", d("types.onnx"), "--random", "--output-dir", "t"], 0)
    io, bo = load("t/io.npy"), load("t/bo.npy")
    check(io.dtype == np.int64 and (io >= 0).all() and (io < 10).all(), "random ints in [0, 10): %r" % io)
    check(bo.dtype == np.bool_, "random bools")
    # Only the inputs not given are random.
    run(["run", d("add.onnx"), "--random", "--input", "x=" + d("x.npy"), "--output-dir", "o3"], 0,
        err="input 'y'")
    check(np.array_equal(load("o3/w.npy"), X), "given input kept under --random")


def case_output_naming():
    run(["run", d("names.onnx"), "--input", "x=" + d("v3.npy"), "--output-dir", "out"], 0,
        out=["-> out/a_b.npy", "-> out/a_b_1.npy", "-> out/a_b_2.npy", "-> out/q____.npy"])
    check(listing("out") == ["a_b.npy", "a_b_1.npy", "a_b_2.npy", "q____.npy"], "names: %r" % listing("out"))
    for f in listing("out"):
        check(load(os.path.join("out", f)).tolist() == [1, 2, 3], "content of %s" % f)


def case_no_overwrite():
    os.makedirs("out")
    with open("out/w.npy", "wb") as f:
        f.write(b"sentinel")
    run(["run", d("add.onnx")] + ADD_IN + ["--output-dir", "out"], 5,
        err=["out/w.npy", "exists", "--overwrite"], no_out=True)
    check(open("out/w.npy", "rb").read() == b"sentinel", "w.npy was overwritten")
    check(listing("out") == ["w.npy"], "partial files left: %r" % listing("out"))
    run(["run", d("add.onnx")] + ADD_IN + ["--output-dir", "out", "--overwrite"], 0)
    check(np.array_equal(load("out/w.npy"), X), "--overwrite did not replace w.npy")
    check(listing("out") == ["w.npy", "z.npy"], "files: %r" % listing("out"))
    # --output-dir naming a file is an I/O error.
    open("file", "w").close()
    run(["run", d("add.onnx")] + ADD_IN + ["--output-dir", "file"], 5, err="file")


def case_failed_run_no_files():
    run(["run", d("add.onnx"), "--input", "x=" + d("x_3x2.npy"), "--input", "y=" + d("y.npy"),
         "--output-dir", "out"], 2, err="input 'x'", no_out=True)
    check(listing("out") == [], "a failed run left files: %r" % listing("out"))
    os.makedirs("out2")
    run(["run", d("add.onnx"), "--input", "x=" + d("garbage.npy"), "--input", "y=" + d("y.npy"),
         "--output-dir", "out2"], 2, no_out=True)
    check(listing("out2") == [], "a failed run left files: %r" % listing("out2"))


def case_bad_inputs():
    # --shape naming no input, or the wrong rank: plan and run alike exit 2
    for cmd in (["plan"], ["run", "--random"]):
        run([cmd[0], d("dyn.onnx")] + cmd[1:] + ["--shape", "q=3x4"], 2,
            err=["--shape names 'q'", "not an input of the model"], no_out=True)
        run([cmd[0], d("dyn.onnx")] + cmd[1:] + ["--shape", "x=3x4x5"], 2,
            err=["input 'x' rank 3", "rank 2"], no_out=True)
    run(["run", d("add.onnx"), "--input", "q=" + d("x.npy"), "--input", "y=" + d("y.npy")], 2,
        err=["'q'", "not an input", "'x', 'y'"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=" + d("x.npy")], 2,
        err=["input 'y' is missing", "--random"], no_out=True)
    run(["run", d("add.onnx")], 2, err=["input 'x' and 1 more are missing"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=" + d("x_3x2.npy"), "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "3x2", "2x3"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=" + d("x_f64.npy"), "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "double", "float"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=" + d("garbage.npy"), "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "garbage.npy"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=" + d("truncated.npy"), "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "truncated.npy", "bytes"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=" + d("bad.onnx"), "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "bad.onnx"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=nope.npy", "--input", "y=" + d("y.npy")], 5,
        err=["input 'x'", "nope.npy"], no_out=True)
    # The name is split at the last '=': "a=b" names input "a=b".
    run(["run", d("add.onnx"), "--input", "x=y=" + d("x.npy")], 2, err="'x=y'", no_out=True)


def case_npy_interop():
    # numpy's format versions 2.0 and 3.0 read like 1.0.
    for v in ("x_v2.npy", "x_v3.npy"):
        run(["run", d("add.onnx"), "--input", "x=" + d(v), "--input", "y=" + d("y.npy")], 0,
            out="z  float  2x3  min=0  max=6  mean=1.83333")
    run(["run", d("add.onnx"), "--input", "x=" + d("x_fortran.npy"), "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "x_fortran.npy", "Fortran order"], no_out=True)
    run(["run", d("add.onnx"), "--input", "x=" + d("x_be.npy"), "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "x_be.npy", "big-endian"], no_out=True)
    # Unicode strings: '<U' in, UTF-8 inside, '<U' out.
    run(["run", d("str.onnx"), "--input", "s=" + d("s3.npy"), "--output-dir", "out"], 0, out="so  string  3")
    so = load("out/so.npy")
    check(so.dtype == np.dtype("<U5") and so.tolist() == ["h\u00e9llo", "", "\u4e2d\U0001F600"],
          "strings: %r %r" % (so.dtype, so.tolist()))


def case_devices():
    run(["run", d("add.onnx"), "--devices", "cpu"] + ADD_IN, 0, out="z  float")
    run(["run", d("add.onnx"), "--devices", "vnpu:edge-npu,cpu"] + ADD_IN, 0, out="z  float")
    run(["run", d("add.onnx"), "--devices", "vnpu:no-such-profile"] + ADD_IN, 4, err="no-such-profile", no_out=True)
    run(["run", d("add.onnx"), "--devices", "opencl:99"] + ADD_IN, 4, err="opencl", no_out=True)


def case_run_pb_forms():
    """Inputs and outputs in every file form of the ONNX node tests:
    OptionalProto (of a tensor, of a sequence, absent), SequenceProto,
    TensorProto; --output-format pb writes them back in the same forms."""
    import onnx
    from onnx import OptionalProto, SequenceProto, TensorProto, helper, numpy_helper as nh

    def model(name, inputs, outputs, nodes):
        m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs), producer_name="tandem-tests",
                              opset_imports=[helper.make_opsetid("", 16)])
        m.ir_version = 8
        onnx.save(m, name + ".onnx")
        return name + ".onnx"

    def write(name, msg):
        with open(name, "wb") as f:
            f.write(msg.SerializeToString())
        return name

    def parse(cls, path):
        m = cls()
        with open(path, "rb") as f:
            m.ParseFromString(f.read())
        return m

    ft3 = helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
    fseq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    optin = model("optin", [helper.make_value_info("oi", helper.make_optional_type_proto(ft3))],
                  [helper.make_tensor_value_info("has", TensorProto.BOOL, []),
                   helper.make_value_info("oo", helper.make_optional_type_proto(ft3))],
                  [helper.make_node("OptionalHasElement", ["oi"], ["has"]), helper.make_node("Identity", ["oi"], ["oo"])])
    optseq = model("optseq", [helper.make_value_info("os", helper.make_optional_type_proto(fseq))],
                   [helper.make_value_info("so", helper.make_optional_type_proto(fseq))],
                   [helper.make_node("Identity", ["os"], ["so"])])
    bf = model("bf", [helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [3])],
               [helper.make_tensor_value_info("f", TensorProto.FLOAT, [3]),
                helper.make_tensor_value_info("bo", TensorProto.BFLOAT16, [3])],
               [helper.make_node("Cast", ["b"], ["f"], to=TensorProto.FLOAT), helper.make_node("Identity", ["b"], ["bo"])])
    v3 = np.array([1, 2, 3], dtype=np.float32)
    present = OptionalProto(name="oi", elem_type=OptionalProto.TENSOR)
    present.tensor_value.CopyFrom(nh.from_array(v3))
    write("oi_present.pb", present)
    write("oi_absent.pb", OptionalProto(name="oi", elem_type=OptionalProto.UNDEFINED))  # as onnx 1.12 writes it
    write("oi_plain.pb", nh.from_array(v3, "oi"))
    np.save("oi.npy", v3)
    sq = SequenceProto(elem_type=SequenceProto.TENSOR)
    sq.tensor_values.extend([nh.from_array(v3), nh.from_array(v3[:2] * 2)])
    ospres = OptionalProto(name="os", elem_type=OptionalProto.SEQUENCE)
    ospres.sequence_value.CopyFrom(sq)
    write("os_present.pb", ospres)
    nested = SequenceProto(name="os", elem_type=SequenceProto.SEQUENCE)
    nested.sequence_values.extend([sq, sq])
    write("nested.pb", nested)

    # optional(tensor), present: the value, and written back as an OptionalProto
    run(["run", optin, "--input", "oi=oi_present.pb", "--output-dir", "p", "--output-format", "pb"], 0,
        out=["has  bool  scalar  min=1  max=1  mean=1  -> p/has.pb", "oo   float  3  min=1  max=3  mean=2  -> p/oo.pb"])
    check(listing("p") == ["has.pb", "oo.pb"], "pb files: %r" % listing("p"))
    if listing("p") == ["has.pb", "oo.pb"]:
        oo = parse(OptionalProto, "p/oo.pb")
        check(oo.name == "oo" and oo.elem_type == OptionalProto.TENSOR and oo.HasField("tensor_value") and
              nh.to_array(oo.tensor_value).tolist() == [1, 2, 3], "oo.pb: %r" % oo)
        has = parse(TensorProto, "p/has.pb")
        check(has.name == "has" and has.data_type == TensorProto.BOOL and nh.to_array(has).tolist() is True,
              "has.pb: %r" % has)
    # the same value as a plain TensorProto and as .npy
    for f in ("oi_plain.pb", "oi.npy"):
        run(["run", optin, "--input", "oi=" + f], 0, out=["has  bool  scalar  min=1", "oo   float  3  min=1  max=3"])
    # absent (given, or not given at all): an OptionalProto without a value in
    # pb form, nothing in .npy form
    run(["run", optin, "--input", "oi=oi_absent.pb", "--output-dir", "a", "--output-format", "pb"], 0,
        out=["has  bool  scalar  min=0  max=0", "oo   (absent)  -> a/oo.pb"])
    if os.path.exists("a/oo.pb"):
        oo = parse(OptionalProto, "a/oo.pb")
        check(oo.name == "oo" and oo.elem_type == OptionalProto.TENSOR and not oo.HasField("tensor_value"),
              "absent oo.pb: %r" % oo)
    run(["run", optin, "--input", "oi=oi_absent.pb", "--output-dir", "an"], 0, out="oo   (absent)")
    check(listing("an") == ["has.npy"], "absent optional writes no .npy: %r" % listing("an"))
    run(["run", optin], 0, out=["has  bool  scalar  min=0", "oo   (absent)"])
    # an absent optional for an input that is not optional
    run(["run", d("add.onnx"), "--input", "x=oi_absent.pb", "--input", "y=" + d("y.npy")], 2,
        err=["input 'x'", "oi_absent.pb"], no_out=True)
    # optional(sequence): read, and written back whole (.pb) or as a folder (.npy)
    run(["run", optseq, "--input", "os=os_present.pb", "--output-dir", "s", "--output-format", "pb"], 0,
        out=["so  sequence<float>  2 items  -> s/so.pb"])
    if os.path.exists("s/so.pb"):
        so = parse(OptionalProto, "s/so.pb")
        check(so.elem_type == OptionalProto.SEQUENCE and so.HasField("sequence_value") and
              [nh.to_array(t).tolist() for t in so.sequence_value.tensor_values] == [[1, 2, 3], [2, 4]],
              "so.pb: %r" % so)
    run(["run", optseq, "--input", "os=os_present.pb", "--output-dir", "sn"], 0)
    check(listing("sn") == ["so", "so/0.npy", "so/1.npy"], "optional sequence as .npy: %r" % listing("sn"))
    # a sequence of sequences: one sentence, exit 2
    run(["run", optseq, "--input", "os=nested.pb"], 2,
        err=["input 'os'", "nested.pb", "sequence of sequences; tandem supports sequences of tensors"], no_out=True)
    # a sequence output is one SequenceProto file in pb form
    run(["run", d("seq.onnx"), "--input", "x=" + d("v3.npy"), "--output-dir", "q", "--output-format", "pb"], 0,
        out=["s  sequence<float>  2 items  -> q/s.pb", "-> q/t.pb"])
    check(listing("q") == ["s.pb", "t.pb"], "sequence output in pb form: %r" % listing("q"))
    if os.path.exists("q/s.pb"):
        sp = parse(SequenceProto, "q/s.pb")
        check(sp.name == "s" and sp.elem_type == SequenceProto.TENSOR and len(sp.tensor_values) == 2 and
              nh.to_array(sp.tensor_values[1]).tolist() == [1, 2, 3], "s.pb: %r" % sp)
    run(["run", d("seq.onnx"), "--input", "x=" + d("v3.npy"), "--output-dir", "q", "--output-format", "xml"], 1,
        err="--output-format expects npy or pb, not 'xml'", no_out=True)
    # bfloat16: a uint16 .npy holds its bits (as tandem writes it); pb keeps the type
    bits = np.array([0x3F80, 0x4000, 0xC040], dtype=np.uint16)  # 1, 2, -3
    np.save("b.npy", bits)
    run(["run", bf, "--input", "b=b.npy", "--output-dir", "bfo", "--output-format", "pb"], 0,
        out="f   float  3  min=-3  max=2")
    if os.path.exists("bfo/bo.pb"):
        bo = parse(TensorProto, "bfo/bo.pb")
        check(bo.data_type == TensorProto.BFLOAT16 and np.frombuffer(bo.raw_data, "<u2").tolist() == bits.tolist(),
              "bo.pb: %r" % bo)


CASES = {name[5:].replace("_", "-"): fn for name, fn in globals().items() if name.startswith("case_")}
if CASE not in CASES:
    print("unknown case %r; cases: %s" % (CASE, " ".join(sorted(CASES))))
    sys.exit(1)
if np is None:
    print("numpy is missing")
    sys.exit(77)
CASES[CASE]()
for f in failures:
    print("FAIL: " + f)
print("%s: %d checks, %d failed" % (CASE, checks, len(failures)))
if not failures:
    shutil.rmtree(WORK, ignore_errors=True)
sys.exit(1 if failures else 0)
