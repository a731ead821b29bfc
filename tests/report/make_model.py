#!/usr/bin/python3
"""Writes the small model the diagnostics tests use into argv[1]:
small.onnx: x[1,3,16,16] -> Conv -> Relu -> Erf (not on edge-npu: falls
back to cpu, OP_UNSUPPORTED) -> Mul -> Sigmoid -> GlobalAveragePool -> y."""
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print("make_model: %s" % e)
    sys.exit(77)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
w = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.uniform(-0.1, 0.1, (8,)).astype(np.float32), "b")
k = numpy_helper.from_array(np.array([1.7], dtype=np.float32), "k")
nodes = [
    helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    helper.make_node("Relu", ["c"], ["r"], name="relu"),
    helper.make_node("Erf", ["r"], ["e"], name="erf"),
    helper.make_node("Mul", ["e", "k"], ["m"], name="mul"),
    helper.make_node("Sigmoid", ["m"], ["s"], name="sigmoid"),
    helper.make_node("GlobalAveragePool", ["s"], ["y"], name="gap"),
]
g = helper.make_graph(nodes, "diag_small",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])],
                      initializer=[w, b, k])
m = helper.make_model(g, producer_name="tandem-tests", opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
path = os.path.join(out, "small.onnx")
onnx.save(m, path + ".tmp")
os.replace(path + ".tmp", path)
