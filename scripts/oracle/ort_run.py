"""Runs a model with onnxruntime (the oracle) and writes its outputs as .npy.

usage: python ort_run.py MODEL OUTDIR NAME=FILE.npy ...   (the test venv's python)

CPU execution provider, graph optimisation ORT_ENABLE_ALL (ORT_DISABLE_ALL
when env ORT_OPT is "off": a QDQ model then runs as written, float ops between
DequantizeLinear and QuantizeLinear, instead of fused into integer kernels),
intra-op threads from env ORT_THREADS (default 1), sequential. Writes one
OUTDIR/<sanitized output name>.npy per graph output, where every character
outside [A-Za-z0-9._-] becomes '_'. On error: one sentence on stderr, exit 1
(2 for bad usage).
"""
import os
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from make_inputs import sanitize  # noqa: E402


def die(msg, code=1):
    sys.stderr.write("ort_run: %s\n" % " ".join(str(msg).split()))
    sys.exit(code)


def session(model, threads=None, extra_outputs=()):
    """An onnxruntime session on MODEL (a path or serialized bytes)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if os.environ.get("ORT_OPT") == "off":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = int(os.environ.get("ORT_THREADS", "1")) if threads is None else threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 4
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def parse_feeds(pairs):
    feeds = {}
    for p in pairs:
        name, eq, path = p.rpartition("=")
        if not eq or not name or not path:
            die("input argument '%s' is not of the form NAME=FILE.npy." % p, 2)
        if name in feeds:
            die("input '%s' is given twice." % name, 2)
        feeds[name] = np.load(path, allow_pickle=False)
    return feeds


def run(model, outdir, feeds):
    try:
        sess = session(model)
    except Exception as e:  # noqa: BLE001 - one sentence for any load error
        die("onnxruntime cannot load %s: %s" % (model, e))
    names = [o.name for o in sess.get_outputs()]
    try:
        outs = sess.run(names, feeds)
    except Exception as e:  # noqa: BLE001
        die("onnxruntime cannot run %s: %s" % (model, e))
    os.makedirs(outdir, exist_ok=True)
    for name, value in zip(names, outs):
        np.save(os.path.join(outdir, sanitize(name) + ".npy"), np.asarray(value))


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        die("usage: ort_run.py MODEL OUTDIR NAME=FILE.npy ...", 2)
    model, outdir = argv[1], argv[2]
    if not os.path.isfile(model):
        die("model file %s does not exist." % model)
    run(model, outdir, parse_feeds(argv[3:]))


if __name__ == "__main__":
    main(sys.argv)
