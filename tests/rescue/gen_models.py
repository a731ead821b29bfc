#!/usr/bin/env python3
"""Models for the rescue tests (tests/rescue), written into OUTDIR.

One model per rewrite rule and element type (the node alone, its inputs
graph inputs, its weights initializers), and pad_conv: Pad(reflect)
between convolutions, which tests/rescue/rescue-npu.json (Pad constant
only) splits into several partitions unless the pads are rescued.
Needs onnx >= 1.15 (Gelu is opset 20): the PyPI venv's python.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(18)
T = {"f32": (TensorProto.FLOAT, np.float32), "f16": (TensorProto.FLOAT16, np.float16),
     "f64": (TensorProto.DOUBLE, np.float64)}


def save(name, nodes, inputs, outputs, inits=(), opset=17, check=True):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if check:  # onnx 1.23's checker refuses GroupNormalization-18 (deprecated), which models still use
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name + ".onnx"))


def vi(name, t, shape):
    """A value's type; an int shape is a rank of unknown dimensions."""
    if isinstance(shape, int):
        shape = [None] * shape
    return helper.make_tensor_value_info(name, t, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def unary(name, op, t, shape, opset, **attrs):
    et, _ = T[t]
    save(f"{name}_{t}", [helper.make_node(op, ["x"], ["y"], name="n", **attrs)], [vi("x", et, shape)],
         [vi("y", et, len(shape))], opset=opset)


EINSUM_MORE = [
    ("einsum_diag", "ii,ij->j", [[4, 4], [4, 5]], 13),
    ("einsum_sum", "ij,jk->i", [[3, 4], [4, 5]], 13),
    ("einsum_sum12", "bij,bjk->bk", [[2, 3, 4], [2, 4, 5]], 12),
    ("einsum_sum_both", "ij,kl->ik", [[3, 4], [5, 2]], 13),
    ("einsum_t", "ij->ji", [[3, 4]], 13),
    ("einsum_r", "ij->i", [[3, 4]], 13),
    ("einsum_bt", "bij->bji", [[2, 3, 4]], 13),
    ("einsum_all", "ij->", [[3, 4]], 13),
    ("einsum_same", "ij->ij", [[3, 4]], 13),
    ("einsum_chain3", "ij,jk,kl->il", [[3, 4], [4, 5], [5, 2]], 13),
    ("einsum_outer3", "bi,bj,bk->bijk", [[2, 3], [2, 4], [2, 2]], 13),
    ("einsum_cycle3", "ab,bc,ca->", [[3, 4], [4, 5], [5, 3]], 13),
    ("einsum_skip3", "ij,jk,ik->k", [[3, 4], [4, 5], [3, 5]], 12),
    ("einsum_chain4", "ij,jk,kl,lm->im", [[3, 4], [4, 5], [5, 2], [2, 3]], 13),
    ("einsum_diag1", "ii->i", [[4, 4]], 13),
    ("einsum_bdiag", "bii->bi", [[2, 3, 3]], 13),
    ("einsum_trace", "ii", [[4, 4]], 13),
    ("einsum_diag_mid", "ibi->bi", [[3, 2, 3]], 13),
    ("einsum_many", "ab,bc,cd,de,ef->af", [[2, 2]] * 5, 13),
    ("einsum_diag_dyn", "ii->i", [["N", "N"]], 13),
]

for t in ("f32", "f16", "f64"):
    et, nt = T[t]
    # LayerNormalization over the last axis (scale, bias) and over axes 1.. (no bias)
    save(f"layernorm_{t}", [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="n", epsilon=1e-5)],
         [vi("x", et, [2, 3, 8])], [vi("y", et, 3)],
         [init("s", (1 + 0.1 * rng.standard_normal(8)).astype(nt)), init("b", (0.1 * rng.standard_normal(8)).astype(nt))])
    save(f"layernorm_axis1_{t}", [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="n", axis=1)],
         [vi("x", et, ["N", 4, 5])], [vi("y", et, 3)], [init("s", (1 + 0.1 * rng.standard_normal((4, 5))).astype(nt))])
    save(f"instancenorm_{t}", [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="n", epsilon=1e-4)],
         [vi("x", et, [2, 3, 4, 5])], [vi("y", et, 4)],
         [init("s", (1 + 0.1 * rng.standard_normal(3)).astype(nt)), init("b", (0.1 * rng.standard_normal(3)).astype(nt))])
    save(f"groupnorm18_{t}", [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="n", num_groups=3)],
         [vi("x", et, [2, 6, 4, 4])], [vi("y", et, 4)],
         [init("s", (1 + 0.1 * rng.standard_normal(3)).astype(nt)), init("b", (0.1 * rng.standard_normal(3)).astype(nt))],
         opset=18, check=False)
    save(f"groupnorm21_{t}", [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="n", num_groups=2)],
         [vi("x", et, [2, 6, 3, 3])], [vi("y", et, 4)],
         [init("s", (1 + 0.1 * rng.standard_normal(6)).astype(nt)), init("b", (0.1 * rng.standard_normal(6)).astype(nt))],
         opset=21)
    unary("gelu", "Gelu", t, [3, 40], 20)
    unary("gelu_tanh", "Gelu", t, [3, 40], 20, approximate="tanh")
    unary("erf", "Erf", t, [3, 40], 13)
    unary("hardsigmoid", "HardSigmoid", t, [3, 40], 17, alpha=0.25, beta=0.4)
    unary("hardswish", "HardSwish", t, [3, 40], 17)
    unary("softplus", "Softplus", t, [3, 40], 17)
    unary("mish", "Mish", t, [3, 40], 18)
    for mode in ("reflect", "edge"):
        save(f"pad_{mode}_{t}", [helper.make_node("Pad", ["x", "p"], ["y"], name="n", mode=mode)],
             [vi("x", et, [1, 2, 5, 6])], [vi("y", et, 4)], [init("p", np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64))],
             opset=13)
    save(f"pad_reflect_axes_{t}", [helper.make_node("Pad", ["x", "p", "", "a"], ["y"], name="n", mode="reflect")],
         [vi("x", et, [2, 7])], [vi("y", et, 2)],
         [init("p", np.array([6, 6], np.int64)), init("a", np.array([-1], np.int64))], opset=18)
    save(f"split_{t}", [helper.make_node("Split", ["x", "s"], ["y0", "y1", "y2"], name="n", axis=1)],
         [vi("x", et, [2, 9, 3])], [vi("y0", et, 3), vi("y1", et, 3), vi("y2", et, 3)],
         [init("s", np.array([2, 3, 4], np.int64))], opset=13)
    save(f"split18_{t}", [helper.make_node("Split", ["x"], ["y0", "y1", "y2"], name="n", axis=-1, num_outputs=3)],
         [vi("x", et, [2, 8])], [vi("y0", et, 2), vi("y1", et, 2), vi("y2", et, 2)], opset=18)
    save(f"matmul_add_{t}",
         [helper.make_node("MatMul", ["x", "w"], ["m"], name="n"), helper.make_node("Add", ["m", "c"], ["a"], name="add"),
          helper.make_node("Relu", ["a"], ["y"], name="relu")],
         [vi("x", et, [4, 8])], [vi("y", et, 2)],
         [init("w", (0.3 * rng.standard_normal((8, 5))).astype(nt)), init("c", (0.1 * rng.standard_normal(5)).astype(nt))],
         opset=13)

    # gather-scalar: a rank-0 index (constant, negative and int32, a graph input)
    save(f"gather_scalar_{t}", [helper.make_node("Gather", ["x", "i"], ["y"], name="n", axis=1)],
         [vi("x", et, [3, 4, 5])], [vi("y", et, 2)], [init("i", np.array(2, np.int64))], opset=13)
    save(f"gather_scalar_neg_{t}", [helper.make_node("Gather", ["x", "i"], ["y"], name="n", axis=-1)],
         [vi("x", et, [3, 4, 5])], [vi("y", et, 2)], [init("i", np.array(-2, np.int32))], opset=11)
    save(f"gather_scalar_input_{t}", [helper.make_node("Gather", ["x", "i"], ["y"], name="n", axis=0)],
         [vi("x", et, [3, 4]), vi("i", TensorProto.INT64, [])], [vi("y", et, 1)], opset=13)
    # einsum: the two-operand contractions, and forms it refuses
    for k, (eq, sa, sb) in enumerate([("bij,bjk->bik", [2, 3, 4], [2, 4, 5]), ("bhqd,bhkd->bhqk", [1, 2, 3, 4], [1, 2, 5, 4]),
                                      ("ij,jk->ik", [3, 4], [4, 5]), ("ji,kj->ik", [4, 3], [5, 4]),
                                      ("bij,bj->bi", [2, 3, 4], [2, 4]), ("abc,cd->abd", [2, 3, 4], [4, 5]),
                                      ("ij,jk", [3, 4], [4, 5]), ("bqhd,bkhd->bhqk", [2, 3, 2, 4], [2, 5, 2, 4])]):
        save(f"einsum{k}_{t}", [helper.make_node("Einsum", ["a", "b"], ["y"], name="n", equation=eq)],
             [vi("a", et, sa), vi("b", et, sb)], [vi("y", et, len(eq.split("->")[1]) if "->" in eq else 2)], opset=13)
    save(f"einsum_ellipsis_{t}", [helper.make_node("Einsum", ["a", "b"], ["y"], name="n", equation="...ij,...jk->...ik")],
         [vi("a", et, [2, 3, 4]), vi("b", et, [2, 4, 5])], [vi("y", et, 3)], opset=13)
    save(f"einsum_ellipsis2_{t}", [helper.make_node("Einsum", ["a", "b"], ["y"], name="n", equation="...ij,jk")],
         [vi("a", et, [2, 2, 3, 4]), vi("b", et, [4, 5])], [vi("y", et, 4)], opset=13)
    # einsum beyond two operands of shared labels: a label summed in one operand (ReduceSum; axes an
    # attribute at opset 12), one operand, three and four operands, diagonals (Slice with step n+1);
    # einsum_many (5 operands) and einsum_diag_dyn (a diagonal of unknown size) are refused
    for name, eq, shapes, opset in EINSUM_MORE:
        ins = [chr(ord("a") + i) for i in range(len(shapes))]
        out_rank = len(eq.split("->")[1]) if "->" in eq else sum(eq.count(c) == 1 for c in set(eq) if c.isalpha())
        save(f"{name}_{t}", [helper.make_node("Einsum", ins, ["y"], name="n", equation=eq)],
             [vi(x, et, sh) for x, sh in zip(ins, shapes)], [vi("y", et, out_rank)], opset=opset)
    # conv-bn: Conv (bias, pads) / depthwise Conv (no bias) / ConvTranspose (groups, stride 2) + BatchNormalization
    def bn(c):
        return [init("sc", (1 + 0.2 * rng.standard_normal(c)).astype(nt)), init("bb", (0.1 * rng.standard_normal(c)).astype(nt)),
                init("mu", (0.1 * rng.standard_normal(c)).astype(nt)), init("var", (0.5 + rng.random(c)).astype(nt))]
    bn_node = helper.make_node("BatchNormalization", ["c", "sc", "bb", "mu", "var"], ["bn"], name="n", epsilon=1e-3)
    save(f"conv_bn_{t}", [helper.make_node("Conv", ["x", "w", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]), bn_node,
                          helper.make_node("Relu", ["bn"], ["y"], name="relu")],
         [vi("x", et, [1, 3, 8, 8])], [vi("y", et, 4)],
         [init("w", (0.3 * rng.standard_normal((4, 3, 3, 3))).astype(nt)), init("cb", (0.1 * rng.standard_normal(4)).astype(nt))]
         + bn(4), opset=13)
    save(f"conv_bn_dw_{t}", [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", group=3, strides=[2, 2]), bn_node],
         [vi("x", et, [1, 3, 9, 9])], [vi("bn", et, 4)],
         [init("w", (0.3 * rng.standard_normal((3, 1, 3, 3))).astype(nt))] + bn(3), opset=13)
    save(f"convt_bn_{t}", [helper.make_node("ConvTranspose", ["x", "w"], ["c"], name="conv", group=2, strides=[2, 2]), bn_node],
         [vi("x", et, [1, 4, 5, 5])], [vi("bn", et, 4)],
         [init("w", (0.3 * rng.standard_normal((4, 3, 3, 3))).astype(nt))] + bn(6), opset=13)
    save(f"convt_add_bn_{t}", [helper.make_node("ConvTranspose", ["x", "w"], ["ct"], name="conv", strides=[2, 2]),
                               helper.make_node("Add", ["ct", "ab"], ["c"], name="add"), bn_node],
         [vi("x", et, [1, 4, 5, 5])], [vi("bn", et, 4)],
         [init("w", (0.3 * rng.standard_normal((4, 3, 2, 2))).astype(nt)),
          init("ab", (0.1 * rng.standard_normal((3, 1, 1))).astype(nt))] + bn(3), opset=13)
    save(f"conv_bn_shared_{t}", [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), bn_node,
                                 helper.make_node("Add", ["bn", "c"], ["y"], name="add")],
         [vi("x", et, [1, 3, 6, 6])], [vi("y", et, 4)],
         [init("w", (0.3 * rng.standard_normal((4, 3, 3, 3))).astype(nt))] + bn(4), opset=13)

# cast-insert: int64 index arithmetic on a device with int32 only (rescue-int32.json)
i64 = TensorProto.INT64
save("cast_add", [helper.make_node("Gather", ["tab", "i"], ["p"], name="gather"), helper.make_node("Add", ["p", "c"], ["q"], name="add"),
                  helper.make_node("Mul", ["q", "m"], ["y"], name="mul")],
     [vi("i", i64, [6])], [vi("y", i64, 1)],
     [init("tab", np.arange(-50, 50, 10, dtype=np.int64)), init("c", np.int64(7)), init("m", np.int64(3))], opset=13)
save("cast_range", [helper.make_node("Gather", ["tab", "i"], ["n"], name="gather"),
                    helper.make_node("Range", ["z", "n", "one"], ["r"], name="range"),
                    helper.make_node("Cast", ["r"], ["y"], name="cast", to=TensorProto.FLOAT)],
     [vi("i", i64, [])], [vi("y", TensorProto.FLOAT, 1)],
     [init("tab", np.array([3, 5, 7, 2, 4], np.int64)), init("z", np.int64(0)), init("one", np.int64(1))], opset=13)
save("cast_noproof", [helper.make_node("Gather", ["tab", "i"], ["p"], name="gather"), helper.make_node("Add", ["p", "c"], ["y"], name="add")],
     [vi("i", i64, [6])], [vi("y", i64, 1)], [init("tab", np.arange(10, dtype=np.int64) << 40), init("c", np.int64(7))], opset=13)
save("cast_dynamic", [helper.make_node("Shape", ["x"], ["s"], name="shape"), helper.make_node("Add", ["s", "c"], ["y"], name="add")],
     [vi("x", TensorProto.FLOAT, ["N", 3])], [vi("y", i64, 1)], [init("c", np.int64(1))], opset=13)

# Pad(reflect) between convolutions: three partitions without rescue, one with.
w1 = (0.2 * rng.standard_normal((4, 3, 3, 3))).astype(np.float32)
w2 = (0.2 * rng.standard_normal((4, 4, 3, 3))).astype(np.float32)
w3 = (0.2 * rng.standard_normal((2, 4, 3, 3))).astype(np.float32)
pads = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)
save("pad_conv",
     [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1"), helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
      helper.make_node("Pad", ["r1", "p"], ["p1"], name="pad1", mode="reflect"),
      helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2"), helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
      helper.make_node("Pad", ["r2", "p"], ["p2"], name="pad2", mode="reflect"),
      helper.make_node("Conv", ["p2", "w3"], ["y"], name="conv3")],
     [vi("x", TensorProto.FLOAT, [1, 3, 16, 16])], [vi("y", TensorProto.FLOAT, 4)],
     [init("w1", w1), init("w2", w2), init("w3", w3), init("p", pads)], opset=13)
print("rescue models in", OUT)

# cast-fp16: a float32 Conv + Relu for a device that computes them in float16 only (rescue-fp16.json)
save("conv_relu", [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                   helper.make_node("Relu", ["c"], ["y"], name="relu")],
     [vi("x", TensorProto.FLOAT, [1, 4, 8, 8])], [vi("y", TensorProto.FLOAT, 4)],
     [init("w", (0.3 * rng.standard_normal((4, 4, 3, 3))).astype(np.float32)),
      init("b", (0.1 * rng.standard_normal(4)).astype(np.float32))])
# and an EyeLike whose "dtype" names a type: refused by cast-fp16 with a sentence
save("cast_to", [helper.make_node("EyeLike", ["x"], ["y"], name="eye", dtype=TensorProto.FLOAT)],
     [vi("x", TensorProto.FLOAT, [3, 3])], [vi("y", TensorProto.FLOAT, 2)])
