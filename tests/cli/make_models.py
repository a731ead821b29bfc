#!/usr/bin/python3
"""Writes the small ONNX models the CLI tests use into the folder given as
argv[1] (run by ctest at test time; nothing binary is committed)."""
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # no onnx for this python: the CLI tests skip
    print("make_models: %s" % e)
    sys.exit(77)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(model, name):
    model.ir_version = 8
    path = os.path.join(out, name)
    onnx.save(model, path + ".tmp")
    os.replace(path + ".tmp", path)


def opset(v=13):
    return [helper.make_opsetid("", v)]


# add.onnx: z = Relu(x + y), w = Identity(x); x, y float [2, 3].
g = helper.make_graph(
    [helper.make_node("Add", ["x", "y"], ["s"], name="add"),
     helper.make_node("Relu", ["s"], ["z"], name="relu"),
     helper.make_node("Identity", ["x"], ["w"], name="id")],
    "addrelu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3])])
m = helper.make_model(g, producer_name="tandem-tests", producer_version="1.2", opset_imports=opset())
m.model_version = 7
helper.set_model_props(m, {"author": "cli \"tests\"\n"})
save(m, "add.onnx")

# dyn.onnx: symbolic batch dim N; a weight initializer (params); y = Relu(x + b).
b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
g = helper.make_graph(
    [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
    "dyn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    [b])
save(helper.make_model(g, producer_name="tandem-tests", opset_imports=opset()), "dyn.onnx")

# names.onnx: outputs whose names collide once sanitised, and one that
# needs escaping in JSON.
NAMES = ("a/b", "a:b", "a_b", "q\"\\\u00e9")
g = helper.make_graph(
    [helper.make_node("Identity", ["x"], [n]) for n in NAMES],
    "names",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in NAMES])
save(helper.make_model(g, producer_name="tandem-tests", opset_imports=opset()), "names.onnx")

# types.onnx: int64 and bool pass through Identity.
g = helper.make_graph(
    [helper.make_node("Identity", ["i"], ["io"]), helper.make_node("Identity", ["b"], ["bo"])],
    "types",
    [helper.make_tensor_value_info("i", TensorProto.INT64, [4]),
     helper.make_tensor_value_info("b", TensorProto.BOOL, [2, 2])],
    [helper.make_tensor_value_info("io", TensorProto.INT64, [4]),
     helper.make_tensor_value_info("bo", TensorProto.BOOL, [2, 2])])
save(helper.make_model(g, producer_name="tandem-tests", opset_imports=opset()), "types.onnx")

# seq.onnx: a sequence output (SequenceConstruct) next to a tensor.
g = helper.make_graph(
    [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]), helper.make_node("Identity", ["x"], ["t"])],
    "seq",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
save(helper.make_model(g, producer_name="tandem-tests", opset_imports=opset(15)), "seq.onnx")

# opt.onnx: an absent optional output (Optional without input) and a tensor.
tt = helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
g = helper.make_graph(
    [helper.make_node("Optional", [], ["o"], type=tt), helper.make_node("Identity", ["x"], ["t"])],
    "opt",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    [helper.make_value_info("o", helper.make_optional_type_proto(tt)),
     helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
save(helper.make_model(g, producer_name="tandem-tests", opset_imports=opset(15)), "opt.onnx")

# str.onnx: strings pass through Identity.
g = helper.make_graph(
    [helper.make_node("Identity", ["s"], ["so"])],
    "str",
    [helper.make_tensor_value_info("s", TensorProto.STRING, [3])],
    [helper.make_tensor_value_info("so", TensorProto.STRING, [3])])
save(helper.make_model(g, producer_name="tandem-tests", opset_imports=opset()), "str.onnx")
np.save(os.path.join(out, "s3.npy"), np.array(["h\u00e9llo", "", "\u4e2d\U0001F600"]))
np.lib.format.write_array(open(os.path.join(out, "x_v2.npy"), "wb"),
                          np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32), version=(2, 0))
np.lib.format.write_array(open(os.path.join(out, "x_v3.npy"), "wb"),
                          np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32), version=(3, 0))
np.save(os.path.join(out, "x_fortran.npy"), np.asfortranarray(np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32)))
np.save(os.path.join(out, "x_be.npy"), np.array([[1, -2, 3], [-4, 5, -6]], dtype=">f4"))

# Inputs for add.onnx, and broken files.
x = np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32)
y = np.array([[0.5, 0.5, 0.5], [1, 1, 1]], dtype=np.float32)
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "y.npy"), y)
np.save(os.path.join(out, "x_f64.npy"), x.astype(np.float64))
np.save(os.path.join(out, "x_3x2.npy"), x.reshape(3, 2))
np.save(os.path.join(out, "v3.npy"), np.array([1, 2, 3], dtype=np.float32))
np.save(os.path.join(out, "i4.npy"), np.array([3, -1, 7, 0], dtype=np.int64))
np.save(os.path.join(out, "b22.npy"), np.array([[True, False], [False, True]]))
with open(os.path.join(out, "x.pb"), "wb") as f:
    f.write(numpy_helper.from_array(x, "x").SerializeToString())
with open(os.path.join(out, "x.npy"), "rb") as f:
    good = f.read()
with open(os.path.join(out, "truncated.npy"), "wb") as f:
    f.write(good[:-5])
with open(os.path.join(out, "garbage.npy"), "wb") as f:
    f.write(b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4}\n" + b"\0" * 24)
with open(os.path.join(out, "bad.onnx"), "wb") as f:
    f.write(b"this is not a protobuf\xff\xff\xff\xff")
