"""Sequence ops the ONNX 1.12 node tests do not cover (SplitToSequence,
ConcatFromSequence, SequenceErase, SequenceAt, SequenceLength,
SequenceConstruct), run through `tandem run` and checked against numpy.
usage: seq_test.py TANDEM WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as h
from onnx import TensorProto as T

tandem, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
fails = []


def model(name, nodes, outputs, opset=13):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, [2, 6, 3])], outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    return path


def run(path, x):
    xin = os.path.join(work, "x.npy")
    np.save(xin, x)
    out = os.path.join(work, os.path.basename(path) + ".out")
    p = subprocess.run([tandem, "run", path, "--input", "x=" + xin, "--output-dir", out, "--overwrite"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        fails.append("%s: exit %d: %s" % (path, p.returncode, p.stderr.strip()))
        return None
    return out


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL: " + what, file=sys.stderr)


x = np.arange(36, dtype=np.float32).reshape(2, 6, 3)
f = h.make_tensor_value_info
seq = h.make_tensor_sequence_value_info

# split into [1, 2, 3] along axis 1, concatenate back along axis 1 and stack along a new axis 0
p = model("split_concat", [
    h.make_node("Constant", [], ["s"], value=h.make_tensor("s", T.INT64, [3], [1, 2, 3])),
    h.make_node("SplitToSequence", ["x", "s"], ["q"], axis=1),
    h.make_node("ConcatFromSequence", ["q"], ["y"], axis=1),
    h.make_node("SequenceLength", ["q"], ["n"]),
    h.make_node("SequenceAt", ["q", "i"], ["last"]),
    h.make_node("Constant", [], ["i"], value=h.make_tensor("i", T.INT64, [], [-1])),
], [f("y", T.FLOAT, None), f("n", T.INT64, None), f("last", T.FLOAT, None)])
o = run(p, x)
if o:
    check(np.array_equal(np.load(o + "/y.npy"), x), "ConcatFromSequence(SplitToSequence(x)) == x")
    check(int(np.load(o + "/n.npy")) == 3, "SequenceLength == 3")
    check(np.array_equal(np.load(o + "/last.npy"), x[:, 3:, :]), "SequenceAt -1 is the last chunk")

# no split input, keepdims 0: 6 slices of shape 2x3; stacked with new_axis at axis -1
p = model("split_stack", [
    h.make_node("SplitToSequence", ["x"], ["q"], axis=1, keepdims=0),
    h.make_node("SequenceErase", ["q", "z"], ["r"]),
    h.make_node("Constant", [], ["z"], value=h.make_tensor("z", T.INT64, [], [0])),
    h.make_node("ConcatFromSequence", ["r"], ["y"], axis=-1, new_axis=1),
], [f("y", T.FLOAT, None)])
o = run(p, x)
if o:
    y = np.load(o + "/y.npy")
    want = np.stack([x[:, k, :] for k in range(1, 6)], axis=-1)
    check(y.shape == want.shape and np.array_equal(y, want), "erase 0 then stack on a new last axis: %s" % (y.shape,))

# a scalar split: chunks of 4 along axis 1 (4 + 2)
p = model("split_scalar", [
    h.make_node("Constant", [], ["s"], value=h.make_tensor("s", T.INT64, [], [4])),
    h.make_node("SplitToSequence", ["x", "s"], ["q"], axis=1),
    h.make_node("SequenceAt", ["q", "one"], ["b"]),
    h.make_node("Constant", [], ["one"], value=h.make_tensor("one", T.INT64, [], [1])),
], [f("b", T.FLOAT, None)])
o = run(p, x)
if o:
    check(np.array_equal(np.load(o + "/b.npy"), x[:, 4:, :]), "scalar split: second chunk has the remaining 2")

# bad split sizes are refused with a sentence naming the node
p = model("split_bad", [
    h.make_node("Constant", [], ["s"], value=h.make_tensor("s", T.INT64, [2], [1, 2])),
    h.make_node("SplitToSequence", ["x", "s"], ["q"], axis=1, name="split"),
    h.make_node("ConcatFromSequence", ["q"], ["y"], axis=1),
], [f("y", T.FLOAT, None)])
xin = os.path.join(work, "x.npy")
r = subprocess.run([tandem, "run", p, "--input", "x=" + xin], capture_output=True, text=True)
check(r.returncode == 2 and "split" in r.stderr and "add up to 3" in r.stderr, "bad split: %d %s" % (r.returncode, r.stderr))

if fails:
    print("\n".join(fails), file=sys.stderr)
    sys.exit(1)
print("ok: sequence ops")
