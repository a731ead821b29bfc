"""y = Relu(2 * x) for x of shape [1, 4]: the model prog.c runs."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

g = helper.make_graph(
    [helper.make_node("Mul", ["x", "two"], ["t"], name="double"),
     helper.make_node("Relu", ["t"], ["y"], name="relu")],
    "install_test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    [numpy_helper.from_array(np.array(2, dtype=np.float32), "two")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
