"""Writes hardswish.onnx (Y = HardSwish(X) + X, X float32 [2,3,16], opset 14)
and x.npy (values over HardSwish's three pieces: below -3, between, above 3)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def write(work):
    os.makedirs(work, exist_ok=True)
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 16])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3, 16])
    g = helper.make_graph([helper.make_node("HardSwish", ["X"], ["H"], name="hs"),
                          helper.make_node("Add", ["H", "X"], ["Y"], name="add")], "plugin_rewrite", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(work, "hardswish.onnx"))
    v = np.random.default_rng(18).normal(0.0, 4.0, (2, 3, 16)).astype(np.float32)
    v.flat[:6] = [-3.0, 3.0, 0.0, -8.0, 8.0, 1.5]
    np.save(os.path.join(work, "x.npy"), v)


if __name__ == "__main__":
    write(sys.argv[1])
