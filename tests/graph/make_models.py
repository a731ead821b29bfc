#!/usr/bin/python3
"""Writes the small ONNX models the graph.load.* tests read.

usage: /usr/bin/python3 tests/graph/make_models.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def model(nodes, inputs, outputs, inits=(), opset=13, name="g", **kw):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_models.py",
                          **kw)
    m.ir_version = 8
    return m


def flatten():
    """x[2,3,4] -> Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape -> MatMul -> Add -> Relu,
    the way PyTorch exports a flatten before a Linear layer."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.array(0, dtype=np.int64), "idx0"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1"),
        numpy_helper.from_array(rng.standard_normal((12, 5)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="/Shape"),
        helper.make_node("Gather", ["s", "idx0"], ["n"], name="/Gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["nu"], name="/Unsqueeze"),
        helper.make_node("Concat", ["nu", "minus1"], ["shp"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["x", "shp"], ["flat"], name="/Reshape"),
        helper.make_node("MatMul", ["flat", "W"], ["mm"], name="/fc/MatMul"),
        helper.make_node("Add", ["mm", "b"], ["lin"], name="/fc/Add"),
        helper.make_node("Relu", ["lin"], ["y"], name="/Relu"),
    ]
    m = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, name="flatten")
    helper.set_model_props(m, {"author": "tests", "purpose": "fold"})
    return m


def symbolic():
    nodes = [helper.make_node("Add", ["x", "bias"], ["y"], name="add")]
    return model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
                         helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def opset999():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], opset=999)


def unknown_op():
    nodes = [helper.make_node("FrobnicateNoSuchOp", ["x"], ["y"], name="frob")]
    return model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])


def cycle():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Relu", ["a"], ["y"], name="third")]
    return model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, fn in [("flatten", flatten), ("symbolic", symbolic), ("opset999", opset999),
                     ("unknown_op", unknown_op), ("cycle", cycle)]:
        save(fn(), os.path.join(out, name + ".onnx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
