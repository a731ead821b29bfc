#!/usr/bin/python3
"""Synthetic models for the planner tests (tests/plan), written into OUTDIR.

Each model has a known placement on vnpu:edge-npu (profiles/edge-npu.json:
4 MiB, fp16, conv-centric, no LayerNormalization, float/float16 only,
rank <= 5, no dilated convolution) and on the example plugin.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(4)
F = TensorProto.FLOAT


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def save(name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name + ".onnx"))


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def w(*shape):
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


X = vi("x", [1, 3, 8, 8])

# OK: Conv -> Relu, all on the edge NPU.
save("ok", [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], name="relu")],
     [X], [vi("y", [1, 4, 8, 8])], [init("w", w(4, 3, 3, 3))])

# OP_UNSUPPORTED: LayerNormalization between two supported nodes.
save("op_unsupported",
     [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
      helper.make_node("LayerNormalization", ["c", "s", "b"], ["l"], name="ln", axis=-1),
      helper.make_node("Relu", ["l"], ["y"], name="relu")],
     [X], [vi("y", [1, 4, 8, 8])], [init("w", w(4, 3, 3, 3)), init("s", np.ones(8, np.float32)),
                                     init("b", np.zeros(8, np.float32))])

# DTYPE_UNSUPPORTED: Relu on float64.
save("dtype", [helper.make_node("Relu", ["x"], ["y"], name="relu64")],
     [vi("x", [1, 3, 8, 8], TensorProto.DOUBLE)], [vi("y", [1, 3, 8, 8], TensorProto.DOUBLE)])

# ATTR_UNSUPPORTED: a dilated convolution.
save("attr", [helper.make_node("Conv", ["x", "w"], ["y"], name="dilated", pads=[2, 2, 2, 2], dilations=[2, 2])],
     [X], [vi("y", [1, 4, 8, 8])], [init("w", w(4, 3, 3, 3))])

# SHAPE_UNSUPPORTED: rank 6 (the profile takes rank <= 5).
save("shape", [helper.make_node("Relu", ["x"], ["y"], name="relu6d")],
     [vi("x", [1, 1, 1, 2, 3, 4])], [vi("y", [1, 1, 1, 2, 3, 4])])

# MEMORY: a MatMul whose weight (8 MiB) exceeds the device's 4 MiB, then a Relu.
save("memory", [helper.make_node("MatMul", ["x", "w"], ["m"], name="big_matmul"),
                helper.make_node("Relu", ["m"], ["y"], name="relu")],
     [vi("x", [1, 1024])], [vi("y", [1, 2048])], [init("w", w(1024, 2048))])

# Split, not abandoned: two convolutions of 2.53 MiB of weights each at fp16
# (edge-npu's storage type; 5.06 MiB each as float32) fit one at a time but
# not together: two partitions on the NPU.
save("split", [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
               helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c2"], ["y"], name="relu2")],
     [vi("x", [1, 384, 4, 4])], [vi("y", [1, 384, 4, 4])], [init("w1", w(384, 384, 3, 3)),
                                                            init("w2", w(384, 384, 3, 3))])

# Memory at the storage type: a Relu over 3 MiB of float32 in and 3 MiB out
# holds 6 MiB as float32 but 3 MiB at fp16 (edge-npu: fits its 4 MiB; the
# fp32 test-npu: MEMORY).
save("storage", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
     [vi("x", [1, 768, 1024])], [vi("y", [1, 768, 1024])])

# GRANULARITY (subgraph): a Relu island between two LayerNormalizations.
save("island", [helper.make_node("LayerNormalization", ["x", "s", "b"], ["l1"], name="ln1", axis=-1),
                helper.make_node("Relu", ["l1"], ["r"], name="island_relu"),
                helper.make_node("LayerNormalization", ["r", "s", "b"], ["y"], name="ln2", axis=-1)],
     [X], [vi("y", [1, 3, 8, 8])], [init("s", np.ones(8, np.float32)), init("b", np.zeros(8, np.float32))])

# Three offenders for --fallback deny (all must be listed).
save("three_ln",
     [helper.make_node("LayerNormalization", ["x", "s", "b"], ["l1"], name="ln_a", axis=-1),
      helper.make_node("Conv", ["l1", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
      helper.make_node("LayerNormalization", ["c", "s", "b"], ["l2"], name="ln_b", axis=-1),
      helper.make_node("Relu", ["l2"], ["r"], name="relu"),
      helper.make_node("LayerNormalization", ["r", "s", "b"], ["y"], name="ln_c", axis=-1)],
     [X], [vi("y", [1, 4, 8, 8])], [init("w", w(4, 3, 3, 3)), init("s", np.ones(8, np.float32)),
                                     init("b", np.zeros(8, np.float32))])

# deny-compute: only a bookkeeping op (Shape) falls back.
save("shape_op", [helper.make_node("Relu", ["x"], ["y"], name="relu"),
                  helper.make_node("Shape", ["x"], ["s"], name="shape_of_x")],
     [vi("x", ["n", 3, 8, 8])], [vi("y", ["n", 3, 8, 8]), vi("s", [4], TensorProto.INT64)])

# Acyclic partitions: a diamond whose one branch falls back.
save("diamond", [helper.make_node("Conv", ["x", "w"], ["a"], name="top", pads=[1, 1, 1, 1]),
                 helper.make_node("LayerNormalization", ["a", "s", "b"], ["l"], name="left_ln", axis=-1),
                 helper.make_node("Relu", ["l"], ["lr"], name="left_relu"),
                 helper.make_node("Sigmoid", ["a"], ["rs"], name="right_sigmoid"),
                 helper.make_node("Relu", ["rs"], ["rr"], name="right_relu"),
                 helper.make_node("Add", ["lr", "rr"], ["y"], name="join")],
     [X], [vi("y", [1, 4, 8, 8])], [init("w", w(4, 3, 3, 3)), init("s", np.ones(8, np.float32)),
                                     init("b", np.zeros(8, np.float32))])

# A node no device can run: cpu has no int8 kernel for Conv.
save("nodevice", [helper.make_node("Conv", ["x", "w"], ["y"], name="conv_int8")],
     [vi("x", [1, 1, 4, 4], TensorProto.INT8)], [vi("y", [1, 1, 2, 2], TensorProto.INT8)],
     [init("w", np.ones((1, 1, 3, 3), np.int8))], opset=13)

# Mixed placement for the threads test on server-npu (no Erf there): a
# conv net with an Erf in the middle.
save("mixed", [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
               helper.make_node("Erf", ["c1"], ["e"], name="erf"),
               helper.make_node("Conv", ["e", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
               helper.make_node("Sigmoid", ["c2"], ["s"], name="sigmoid"),
               helper.make_node("Mul", ["s", "c2"], ["y"], name="mul")],
     [vi("x", [1, 3, 32, 32])], [vi("y", [1, 8, 32, 32])], [init("w1", w(8, 3, 3, 3)), init("w2", w(8, 8, 3, 3))])

# A cpu partition between two NPU nodes (plan.fused_estimate): Conv (pinned to
# cpu), BatchNormalization (no kernel on test-npu) and Relu (pinned), which the
# partition's fusion runs as one Winograd Conv with the BN folded and the Relu
# in its epilogue.
save("fused_part", [helper.make_node("Mul", ["x", "k"], ["a"], name="pre_mul"),
                    helper.make_node("Conv", ["a", "wc", "bc"], ["c"], name="cbr_conv", pads=[1, 1, 1, 1]),
                    helper.make_node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["n"], name="cbr_bn"),
                    helper.make_node("Relu", ["n"], ["r"], name="cbr_relu"),
                    helper.make_node("Add", ["r", "k"], ["y"], name="post_add")],
     [vi("x", [1, 16, 12, 12])], [vi("y", [1, 16, 12, 12])],
     [init("k", np.full((1,), 0.5, np.float32)), init("wc", w(16, 16, 3, 3)), init("bc", w(16)),
      init("s", np.abs(w(16)) + 1), init("b", w(16)), init("mu", w(16)), init("var", np.abs(w(16)) + 0.5)])

# The same with the Conv's output also read on the NPU after the partition:
# the Relu may not fuse (the Conv's output leaves the partition).
save("fused_escape", [helper.make_node("Mul", ["x", "k"], ["a"], name="pre_mul"),
                      helper.make_node("Conv", ["a", "wc", "bc"], ["c"], name="cbr_conv", pads=[1, 1, 1, 1]),
                      helper.make_node("Relu", ["c"], ["r"], name="cbr_relu"),
                      helper.make_node("Add", ["r", "c"], ["y"], name="post_add")],
     [vi("x", [1, 16, 12, 12])], [vi("y", [1, 16, 12, 12])],
     [init("k", np.full((1,), 0.5, np.float32)), init("wc", w(16, 16, 3, 3)), init("bc", w(16))])

# The example plugin (Relu, Sigmoid, Add, Mul) with a LayerNormalization on cpu.
save("plugin", [helper.make_node("Relu", ["x"], ["r"], name="p_relu"),
                helper.make_node("LayerNormalization", ["r", "s", "b"], ["l"], name="p_ln", axis=-1),
                helper.make_node("Sigmoid", ["l"], ["g"], name="p_sigmoid"),
                helper.make_node("Mul", ["g", "r"], ["y"], name="p_mul")],
     [X], [vi("y", [1, 3, 8, 8])], [init("s", np.ones(8, np.float32)), init("b", np.zeros(8, np.float32))])

# The precision guard (tests/plan/guard_cli.py), on vnpu:server-npu (fp16).
# guard_overflow: x in [-1, 1] times 300 twice reaches 9e4, beyond fp16's
# 65504 (the second Mul's output overflows; the third then gets an inf).
f32 = np.float32
save("guard_overflow", [helper.make_node("Mul", ["x", "k300"], ["a"], name="g_mul1"),
                        helper.make_node("Mul", ["a", "k300"], ["b"], name="g_mul2"),
                        helper.make_node("Mul", ["b", "kinv"], ["y"], name="g_mul3")],
     [vi("x", [1, 64])], [vi("y", [1, 64])], [init("k300", f32(300)), init("kinv", f32(1 / 9e4))])
# guard_underflow: x times 1e-4 twice is ~1e-8, below fp16's smallest
# subnormal: it flushes to zero; scaled back by 1e4 twice.
save("guard_underflow", [helper.make_node("Mul", ["x", "k"], ["a"], name="u_mul1"),
                         helper.make_node("Mul", ["a", "k"], ["b"], name="u_mul2"),
                         helper.make_node("Mul", ["b", "kb"], ["c"], name="u_mul3"),
                         helper.make_node("Mul", ["c", "kb"], ["y"], name="u_mul4")],
     [vi("x", [1, 64])], [vi("y", [1, 64])], [init("k", f32(1e-4)), init("kb", f32(1e4))])
# guard_chain: logits near 100 (fp16 spacing 0.0625) get 20 small increments,
# then a Softmax head; each node alone is within any per-node threshold
# (cosine ~1), but along the chain fp16 keeps logit 0 at 100.3125 while
# logit 1 climbs by 0.0625 a step: cpu's top-1 is 0 (100.9 vs 100.7), the
# fp16 chain's is 1.
nodes, prev = [], "x"
for i in range(20):
    nodes.append(helper.make_node("Add", [prev, "inc"], [f"s{i}"], name=f"c_add{i}"))
    prev = f"s{i}"
nodes.append(helper.make_node("Softmax", [prev], ["y"], name="c_softmax", axis=-1))
save("guard_chain", nodes, [vi("x", [1, 2])], [vi("y", [1, 2])], [init("inc", np.array([[0.03, 0.035]], f32))])
# guard_benign: a small conv net whose fp16 error is far inside every rule.
save("guard_benign", [helper.make_node("Conv", ["x", "w1"], ["c1"], name="b_conv1", pads=[1, 1, 1, 1]),
                      helper.make_node("Relu", ["c1"], ["r"], name="b_relu"),
                      helper.make_node("Conv", ["r", "w2"], ["y"], name="b_conv2", pads=[1, 1, 1, 1])],
     [vi("x", [1, 3, 16, 16])], [vi("y", [1, 4, 16, 16])], [init("w1", w(8, 3, 3, 3)), init("w2", w(4, 8, 3, 3))])
np.save(os.path.join(OUT, "guard_x64.npy"), np.linspace(-1, 1, 64, dtype=f32).reshape(1, 64))
np.save(os.path.join(OUT, "guard_chain_x.npy"), np.array([[100.3, 100.0]], f32))
np.save(os.path.join(OUT, "guard_benign_x.npy"), rng.uniform(-1, 1, (1, 3, 16, 16)).astype(f32))

# Control flow priced as it runs (plan.cf_estimate), planned on cpu alone
# (no If inlining nor Loop unrolling there): the then branch a MatMul of
# 64x64 reading the outer weight "wm", the else branch a Relu; the bodies
# read "wm" from the main graph too.
B = TensorProto.BOOL
I64 = TensorProto.INT64
XF = vi("x", [1, 64])
YF = vi("y", [1, 64])
WM = init("wm", w(64, 64))


def branches():
    th = helper.make_graph([helper.make_node("MatMul", ["x", "wm"], ["t_out"], name="then_matmul")], "then",
                           [], [vi("t_out", [1, 64])])
    el = helper.make_graph([helper.make_node("Relu", ["x"], ["e_out"], name="else_relu")], "else",
                           [], [vi("e_out", [1, 64])])
    return {"then_branch": th, "else_branch": el}


save("cf_if_const", [helper.make_node("If", ["c"], ["y"], name="cf_if", **branches())],
     [XF], [YF], [WM, init("c", np.array(False))])
save("cf_if_var", [helper.make_node("If", ["c"], ["y"], name="cf_if", **branches())],
     [XF, vi("c", [], B)], [YF], [WM])


def loop_body(extra=()):
    return helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("MatMul", ["v_in", "wm"], ["mm"], name="body_matmul"),
         helper.make_node("Tanh", ["mm"], ["v_out"], name="body_tanh")] + list(extra),
        "body", [vi("iter", [], I64), vi("cond_in", [], B), vi("v_in", [1, 64])],
        [vi("cond_out", [], B), vi("v_out", [1, 64])])


save("cf_loop_const", [helper.make_node("Loop", ["m", "t", "x"], ["y"], name="cf_loop", body=loop_body())],
     [XF], [YF], [WM, init("m", np.array(5, np.int64)), init("t", np.array(True))])
save("cf_loop_unknown", [helper.make_node("Loop", ["m", "t", "x"], ["y"], name="cf_loop", body=loop_body())],
     [XF, vi("m", [], I64)], [YF], [WM, init("t", np.array(True))])
# M = INT64_MAX (exporters' "no limit"): no trip count; a constant false
# initial condition: the body never runs.
save("cf_loop_nolimit", [helper.make_node("Loop", ["m", "t", "x"], ["y"], name="cf_loop", body=loop_body())],
     [XF], [YF], [WM, init("m", np.array(np.iinfo(np.int64).max, np.int64)), init("t", np.array(True))])
save("cf_loop_false", [helper.make_node("Loop", ["m", "t", "x"], ["y"], name="cf_loop", body=loop_body())],
     [XF], [YF], [WM, init("m", np.array(5, np.int64)), init("t", np.array(False))])
# A Loop whose body holds an If on the main graph's constant "c" (false:
# the Relu, not the dearer MatMul), 3 iterations: priced recursively, the
# condition found in the enclosing graph.
nested = helper.make_graph(
    [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
     helper.make_node("If", ["c"], ["b_if"], name="body_if", **branches()),
     helper.make_node("Add", ["v_in", "b_if"], ["v_out"], name="body_add")],
    "body", [vi("iter", [], I64), vi("cond_in", [], B), vi("v_in", [1, 64])],
    [vi("cond_out", [], B), vi("v_out", [1, 64])])
save("cf_nested", [helper.make_node("Loop", ["m", "t", "x"], ["y"], name="cf_loop", body=nested)],
     [XF], [YF], [WM, init("m", np.array(3, np.int64)), init("t", np.array(True)), init("c", np.array(False))])
# Scan over 6 rows of 64: state += row @ wm.
scan_body = helper.make_graph(
    [helper.make_node("MatMul", ["row", "wm"], ["rm"], name="scan_matmul"),
     helper.make_node("Add", ["s_in", "rm"], ["s_out"], name="scan_add"),
     helper.make_node("Identity", ["s_out"], ["row_out"], name="scan_id")],
    "scan_body", [vi("s_in", [1, 64]), vi("row", [1, 64])], [vi("s_out", [1, 64]), vi("row_out", [1, 64])])
save("cf_scan", [helper.make_node("Scan", ["x", "xs"], ["y", "ys"], name="cf_scan", body=scan_body, num_scan_inputs=1)],
     [XF, vi("xs", [6, 1, 64])], [YF, vi("ys", [6, 1, 64])], [WM])
