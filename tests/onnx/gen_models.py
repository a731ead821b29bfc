#!/usr/bin/python3
"""Writes the loader's test models into OUT (run at test time, never committed).

Usage: gen_models.py OUT            the unit-test data
       gen_models.py --corpus OUT   a small seed corpus for the fuzzer

Tensors are built field by field (not with onnx.helper.make_tensor) so that
every element type, including the ones this onnx version does not know
(float8, 4-bit), is written exactly as the ONNX spec describes.
"""
import os
import random
import shutil
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

IR = 8


def tensor(name, dtype, dims, raw=None, **fields):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    if raw is not None:
        t.raw_data = raw
    for k, v in fields.items():
        getattr(t, k).extend(v)
    return t


def model(graph, opsets=(("", 17),), ir=IR, **kw):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], **kw)
    m.ir_version = ir
    return m


def save(m, path):
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def identity_graph(inits, name="g"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    return helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], name, [x], [y], inits)


def pack4(vals):
    nib = [v & 0xF for v in vals]
    if len(nib) % 2:
        nib.append(0)
    return bytes(nib[i] | (nib[i + 1] << 4) for i in range(0, len(nib), 2))


def pack2(vals):
    crumbs = [v & 0x3 for v in vals]
    while len(crumbs) % 4:
        crumbs.append(0)
    return bytes(crumbs[i] | (crumbs[i + 1] << 2) | (crumbs[i + 2] << 4) | (crumbs[i + 3] << 6)
                 for i in range(0, len(crumbs), 4))


# ---------------------------------------------------------------- dtypes

def dtypes(out):
    """Every element type from raw_data and from its typed field, with a
    manifest of the bytes tandem must hold (one element per byte for 4-bit
    types, host = little-endian order)."""
    inits, lines = [], []

    def add(name, dtype, dims, expect, raw=None, **fields):
        inits.append(tensor(name, dtype, dims, raw, **fields))
        lines.append("%s %d %s %s" % (name, dtype, ",".join(map(str, dims)) or "-", expect.hex() or "-"))

    D = [2, 3]
    f32 = np.array([1.5, -2, 0, 3.25, 1e-3, 7], np.float32)
    add("float_raw", 1, D, f32.tobytes(), f32.tobytes())
    add("float_typed", 1, D, f32.tobytes(), float_data=f32.tolist())
    ints = {2: (np.uint8, [0, 1, 2, 200, 255, 7]), 3: (np.int8, [-128, -1, 0, 1, 127, 5]),
            4: (np.uint16, [0, 1, 65535, 300, 2, 3]), 5: (np.int16, [-32768, -1, 0, 1, 32767, 9]),
            6: (np.int32, [-2**31, -1, 0, 1, 2**31 - 1, 9]), 9: (np.bool_, [1, 0, 1, 1, 0, 0])}
    for dt, (npt, v) in ints.items():
        a = np.array(v, npt)
        add("t%d_raw" % dt, dt, D, a.tobytes(), a.tobytes())
        add("t%d_typed" % dt, dt, D, a.tobytes(), int32_data=[int(x) for x in v])
    i64 = np.array([-2**63, -1, 0, 1, 2**63 - 1, 9], np.int64)
    add("int64_raw", 7, D, i64.tobytes(), i64.tobytes())
    add("int64_typed", 7, D, i64.tobytes(), int64_data=i64.tolist())
    f16 = np.array([1, -2, 0.5, 65504, 0, -0.0], np.float16)
    add("float16_raw", 10, D, f16.tobytes(), f16.tobytes())
    add("float16_typed", 10, D, f16.tobytes(), int32_data=f16.view(np.uint16).astype(int).tolist())
    f64 = np.array([1.5, -2, 1e300, 3.25, -1e-300, 7], np.float64)
    add("double_raw", 11, D, f64.tobytes(), f64.tobytes())
    add("double_typed", 11, D, f64.tobytes(), double_data=f64.tolist())
    u32 = np.array([0, 1, 2**32 - 1, 5, 6, 7], np.uint32)
    add("uint32_raw", 12, D, u32.tobytes(), u32.tobytes())
    add("uint32_typed", 12, D, u32.tobytes(), uint64_data=u32.astype(np.uint64).tolist())
    u64 = np.array([0, 1, 2**64 - 1, 5, 2**63, 7], np.uint64)
    add("uint64_raw", 13, D, u64.tobytes(), u64.tobytes())
    add("uint64_typed", 13, D, u64.tobytes(), uint64_data=[int(x) for x in u64])
    c64 = np.array([1 + 2j, -3.5 + 0j, 0 - 1j], np.complex64)
    add("complex64_raw", 14, [3], c64.tobytes(), c64.tobytes())
    add("complex64_typed", 14, [3], c64.tobytes(), float_data=c64.view(np.float32).tolist())
    c128 = np.array([1 + 2j, -3.5 + 0j, 0 - 1j], np.complex128)
    add("complex128_raw", 15, [3], c128.tobytes(), c128.tobytes())
    add("complex128_typed", 15, [3], c128.tobytes(), double_data=c128.view(np.float64).tolist())
    bf = np.array([0x3F80, 0xC000, 0x0000, 0x7F80, 0xFFC0, 0x4049], np.uint16)
    add("bfloat16_raw", 16, D, bf.tobytes(), bf.tobytes())
    add("bfloat16_typed", 16, D, bf.tobytes(), int32_data=bf.astype(int).tolist())
    for dt in (17, 18, 19, 20):
        b = np.array([0x00, 0x38, 0x7E, 0x80, 0xB8, 0x01], np.uint8)
        add("f8_%d_raw" % dt, dt, D, b.tobytes(), b.tobytes())
        add("f8_%d_typed" % dt, dt, D, b.tobytes(), int32_data=b.astype(int).tolist())
    u4 = [0, 1, 15, 7, 9]
    add("uint4_raw", 21, [5], bytes(u4), pack4(u4))
    add("uint4_typed", 21, [5], bytes(u4), int32_data=list(pack4(u4)))
    i4 = [-8, -1, 0, 7, 3]
    e4 = np.array(i4, np.int8).tobytes()
    add("int4_raw", 22, [5], e4, pack4(i4))
    add("int4_typed", 22, [5], e4, int32_data=list(pack4(i4)))
    f4 = [0, 1, 7, 8, 15]  # float4e2m1 codes (0, 0.5, 6, -0, -6), held as they are
    add("float4e2m1_raw", 23, [5], bytes(f4), pack4(f4))
    add("float4e2m1_typed", 23, [5], bytes(f4), int32_data=list(pack4(f4)))
    e8 = np.array([0x00, 0x7F, 0x80, 0xFE, 0xFF, 0x01], np.uint8)  # float8e8m0 exponent bytes
    add("float8e8m0_raw", 24, D, e8.tobytes(), e8.tobytes())
    add("float8e8m0_typed", 24, D, e8.tobytes(), int32_data=e8.astype(int).tolist())
    u2 = [0, 1, 2, 3, 1]
    add("uint2_raw", 25, [5], bytes(u2), pack2(u2))
    add("uint2_typed", 25, [5], bytes(u2), int32_data=list(pack2(u2)))
    i2 = [-2, -1, 0, 1, -2]
    e2 = np.array(i2, np.int8).tobytes()
    add("int2_raw", 26, [5], e2, pack2(i2))
    add("int2_typed", 26, [5], e2, int32_data=list(pack2(i2)))
    s = [b"a", b"", b"hello", b"x y"]
    inits.append(tensor("strings", 8, [2, 2], string_data=s))
    lines.append("strings 8 2,2 s:" + ",".join(x.hex() or "-" for x in s))
    add("scalar", 1, [], np.array([42], np.float32).tobytes(), np.array([42], np.float32).tobytes())
    add("empty", 1, [0, 3], b"", b"")
    add("empty_typed", 7, [3, 0], b"")
    save(model(identity_graph(inits, "dtypes")), os.path.join(out, "dtypes.onnx"))
    with open(os.path.join(out, "dtypes.expect"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------- graph features

def features(out):
    mk = helper.make_tensor_value_info
    # then / else branches of an If, each with its own initializer
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "tc"], ["then_out"], name="then_add")], "then_branch", [],
        [mk("then_out", TensorProto.FLOAT, ["N", 3])], [tensor("tc", 1, [1], np.float32([1]).tobytes())])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "ec"], ["else_out"], name="else_sub")], "else_branch", [],
        [mk("else_out", TensorProto.FLOAT, ["N", 3])], [tensor("ec", 1, [1], np.float32([2]).tobytes())])
    # a Loop body with a nested If inside (two levels of subgraphs)
    inner_then = helper.make_graph([helper.make_node("Identity", ["v"], ["io"], name="inner_id")], "inner_then",
                                   [], [mk("io", TensorProto.FLOAT, None)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("If", ["cond_in"], ["v_out"], name="body_if", then_branch=inner_then,
                          else_branch=inner_then)],
        "body", [mk("iter", TensorProto.INT64, []), mk("cond_in", TensorProto.BOOL, []),
                 mk("v", TensorProto.FLOAT, None)],
        [mk("cond_out", TensorProto.BOOL, []), mk("v_out", TensorProto.FLOAT, None)])

    sparse = onnx.SparseTensorProto()
    sparse.values.CopyFrom(tensor("sp", 1, [2], np.float32([5, 6]).tobytes()))
    sparse.indices.CopyFrom(tensor("sp_idx", 7, [2], int64_data=[1, 4]))
    sparse.dims.extend([2, 3])
    sparse2 = onnx.SparseTensorProto()
    sparse2.values.CopyFrom(tensor("sp_attr", 7, [1], int64_data=[9]))
    sparse2.indices.CopyFrom(tensor("sp_attr_idx", 7, [1, 2], int64_data=[1, 0]))
    sparse2.dims.extend([2, 2])

    tp = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, ["B"]))
    custom = helper.make_node(
        "Custom", ["x"], ["c_out"], name="custom", domain="com.test",
        f=0.5, i=-7, s="text", t=tensor("attr_t", 7, [2], int64_data=[3, 4]),
        floats=[1.0, 2.5], ints=[1, -2, 3], strings=["a", "bc"],
        tensors=[tensor("t0", 1, [1], np.float32([1]).tobytes()), tensor("t1", 6, [2], int32_data=[5, 6])],
        graphs=[then_g])
    custom.attribute.extend([helper.make_attribute("sp", sparse2)])
    a = onnx.AttributeProto()
    a.name = "tp"
    a.type = onnx.AttributeProto.TYPE_PROTO
    a.tp.CopyFrom(tp)
    custom.attribute.append(a)
    e = onnx.AttributeProto()   # an empty list attribute
    e.name = "empty_ints"
    e.type = onnx.AttributeProto.INTS
    custom.attribute.append(e)
    custom.doc_string = "a custom node"

    nodes = [
        helper.make_node("Gemm", ["x", "w", ""], ["g_out"], name="gemm", alpha=1.0, transB=1),
        helper.make_node("If", ["cond"], ["if_out"], name="if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Loop", ["trip", "cond", "g_out"], ["loop_out"], name="loop", body=body),
        custom,
        helper.make_node("Relu", ["g_out"], ["mid"]),  # unnamed: the loader names it
        helper.make_node("Identity", ["mid"], ["y"], name="last"),
    ]
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, [2]))
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    inputs = [mk("x", TensorProto.FLOAT, ["N", 3]), mk("cond", TensorProto.BOOL, []),
              mk("trip", TensorProto.INT64, []), mk("w", TensorProto.FLOAT, [3, 3]),
              helper.make_value_info("s", seq_t), helper.make_value_info("o", opt_t)]
    g = helper.make_graph(nodes, "features", inputs,
                          [mk("y", TensorProto.FLOAT, ["N", 3]), mk("if_out", TensorProto.FLOAT, ["N", 3])],
                          [tensor("w", 1, [3, 3], np.arange(9, dtype=np.float32).tobytes())],
                          value_info=[mk("mid", TensorProto.FLOAT, ["N", None]), mk("g_out", TensorProto.FLOAT, [None, 3])],
                          doc_string="graph doc")
    g.sparse_initializer.append(sparse)
    m = model(g, opsets=(("", 17), ("com.test", 2)), producer_name="gen_models", producer_version="1.2",
              doc_string="model doc")
    m.domain = "org.test"
    m.model_version = 42
    for k, v in (("author", "loader"), ("purpose", "tests")):
        p = m.metadata_props.add()
        p.key, p.value = k, v
    save(m, os.path.join(out, "features.onnx"))

    # opset domain spelled "ai.onnx"; IR 3 with the initializer listed as an input
    g = identity_graph([tensor("x", 1, [1], np.float32([3]).tobytes())])
    save(model(g, opsets=(("ai.onnx", 13), ("ai.onnx.ml", 3)), ir=3), os.path.join(out, "opset_alias.onnx"))


# ---------------------------------------------------------------- a small CNN (truncation cuts)

def cnn(out):
    rng = np.random.default_rng(7)
    mk = helper.make_tensor_value_info

    def w(name, *shape):
        return tensor(name, 1, list(shape), rng.standard_normal(shape).astype(np.float32).tobytes())
    inits = [w("c1.w", 16, 3, 3, 3), w("c1.b", 16), w("c2.w", 32, 16, 3, 3), w("c2.b", 32), w("fc.w", 10, 32),
             w("fc.b", 10)]
    nodes = [helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="relu1"),
             helper.make_node("Conv", ["b", "c2.w", "c2.b"], ["c"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["d"], name="gap"),
             helper.make_node("Flatten", ["d"], ["e"], name="flat"),
             helper.make_node("Gemm", ["e", "fc.w", "fc.b"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "cnn", [mk("x", TensorProto.FLOAT, [1, 3, 8, 8])], [mk("y", TensorProto.FLOAT, [1, 10])],
                          inits)
    save(model(g, producer_name="gen_models"), os.path.join(out, "cnn.onnx"))


# ---------------------------------------------------------------- external data

def ext_tensor(name, dtype, dims, location, offset=None, length=None):
    t = tensor(name, dtype, dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def external(out):
    base = os.path.join(out, "ext")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    blob = np.arange(6, dtype=np.float32).tobytes() + b"\0" * 8 + np.int32([7, -8, 9, 10]).tobytes() + \
        np.int64([123456789]).tobytes()  # 24 + 8 + 16 + 8 = 56 bytes
    with open(os.path.join(base, "secret.bin"), "wb") as f:
        f.write(blob)

    def case(name, tensors, files=True):
        d = os.path.join(base, name)
        os.makedirs(d, exist_ok=True)
        if files:
            with open(os.path.join(d, "weights.bin"), "wb") as f:
                f.write(blob)
            os.makedirs(os.path.join(d, "sub"), exist_ok=True)
            with open(os.path.join(d, "sub", "w.bin"), "wb") as f:
                f.write(blob)
        save(model(identity_graph(tensors)), os.path.join(d, "model.onnx"))
        return d

    case("ok", [ext_tensor("w1", 1, [2, 3], "weights.bin", 0, 24),
                ext_tensor("w2", 6, [4], "sub/w.bin", 32, 16),
                ext_tensor("w3", 7, [1], "weights.bin", 48)])  # no length: to the end
    d = case("symlink_in", [ext_tensor("w1", 1, [2, 3], "link.bin", 0, 24)])
    os.symlink("weights.bin", os.path.join(d, "link.bin"))
    case("absolute", [ext_tensor("w1", 1, [2, 3], os.path.abspath(os.path.join(base, "secret.bin")), 0, 24)])
    case("dotdot", [ext_tensor("w1", 1, [2, 3], "../secret.bin", 0, 24)])
    case("dotdot_inner", [ext_tensor("w1", 1, [2, 3], "sub/../../secret.bin", 0, 24)])
    d = case("symlink_out", [ext_tensor("w1", 1, [2, 3], "link.bin", 0, 24)])
    os.symlink(os.path.join("..", "secret.bin"), os.path.join(d, "link.bin"))
    case("missing", [ext_tensor("w1", 1, [2, 3], "nothere.bin", 0, 24)])
    case("past_end", [ext_tensor("w1", 1, [2, 3], "weights.bin", 40, 24)])
    case("offset_past_end", [ext_tensor("w1", 1, [2, 3], "weights.bin", 4096, 24)])
    case("bad_length", [ext_tensor("w1", 1, [2, 3], "weights.bin", 0, 20)])
    case("bad_offset", [ext_tensor("w1", 1, [2, 3], "weights.bin", "-4", 24)])
    case("no_location", [ext_tensor("w1", 1, [2, 3], None, 0, 24)])

    # Mapped in place (issue 20 item 5): tensors of at least 4 KiB aligned
    # for their type stay in a mapping of the file; the others are read.
    # big: page-aligned; odd: 4-byte aligned inside a page; skew: 2 bytes
    # off a float's alignment (read); small: under 4 KiB (read). inline:
    # a 4 KiB+ raw_data inside the model file, wherever it falls.
    d = os.path.join(base, "mapped")
    os.makedirs(d, exist_ok=True)
    vals = lambda n, k: (np.arange(n, dtype=np.float32) * np.float32(0.5) + np.float32(k))
    big, odd, skew, small = vals(4096, 1), vals(2048, 2), vals(1500, 3), vals(4, 4)
    lay = bytearray(4096)
    at = {}
    for name, v in (("big", big), ("odd", odd), ("skew", skew), ("small", small)):
        pad = {"big": (-len(lay)) % 4096, "odd": 4, "skew": 2, "small": 0}[name]
        lay += b"\1" * pad
        at[name] = len(lay)
        lay += v.tobytes()
    with open(os.path.join(d, "weights.bin"), "wb") as f:
        f.write(bytes(lay))
    ts = [ext_tensor(n, 1, [len(v)], "weights.bin", at[n], v.nbytes)
          for n, v in (("big", big), ("odd", odd), ("skew", skew), ("small", small))]
    # inline: raw_data 4-byte aligned in the file (mapped); inline_skew: 2
    # bytes off (read). The graph's name and the second name move them.
    r1, r2 = vals(2048, 5).tobytes(), vals(1200, -1000).tobytes()
    for p in range(64):
        m = model(identity_graph(ts + [tensor("inline", 1, [2048], raw=r1),
                                       tensor("inline_skew" + "x" * (p % 4), 1, [1200], raw=r2)],
                                 name="g" + "p" * (p // 4)))
        b = m.SerializeToString()
        if b.find(r1) % 4 == 0 and b.find(r2) % 4 == 2:
            break
    else:
        raise SystemExit("gen_models: no layout puts inline raw_data where the test wants it")
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(b)
    with open(os.path.join(d, "skew_name.txt"), "w") as f:
        f.write("inline_skew" + "x" * (p % 4))


# ---------------------------------------------------------------- malformed models

def malformed(out):
    d = os.path.join(out, "bad")
    os.makedirs(d, exist_ok=True)

    def w(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    def m(name, inits, **kw):
        save(model(identity_graph(inits), **kw), os.path.join(d, name))

    w("empty.onnx", b"")
    w("random.onnx", random.Random(1234).randbytes(4096))
    w("text.onnx", b"This is a text file, not an ONNX model.\nIt has two lines.\n")
    m("rawlen.onnx", [tensor("fc.weight", 1, [2, 3], b"\0" * 20)])
    m("typedlen.onnx", [tensor("w", 1, [2, 3], float_data=[1, 2, 3, 4, 5])])
    m("overflow.onnx", [tensor("huge", 1, [2**62, 2**62], b"")])
    m("overflow_size.onnx", [tensor("huge", 1, [2**31, 2**31, 4], b"")])
    m("negdim.onnx", [tensor("neg", 1, [-1, 3], b"")])
    m("rank17.onnx", [tensor("r17", 1, [1] * 17, b"\0" * 4)])
    m("nodtype.onnx", [tensor("nodt", 0, [1], b"\0" * 4)])
    m("dtype99.onnx", [tensor("dt99", 99, [1], b"\0" * 4)])
    m("string_raw.onnx", [tensor("sr", 8, [1], b"abc")])
    m("dup_init.onnx", [tensor("w", 1, [1], b"\0" * 4), tensor("w", 1, [1], b"\0" * 4)])
    m("noname_init.onnx", [tensor("", 1, [1], b"\0" * 4)])
    m("dup_opset.onnx", [], opsets=(("", 13), ("ai.onnx", 14)))
    g = identity_graph([])
    g.node[0].attribute.extend([helper.make_attribute("a", 1), helper.make_attribute("a", 2)])
    save(model(g), os.path.join(d, "dup_attr.onnx"))
    g = identity_graph([])
    g.node[0].op_type = ""
    save(model(g), os.path.join(d, "no_op_type.onnx"))
    g = identity_graph([])
    g.input[0].type.map_type.key_type = TensorProto.INT64
    g.input[0].type.map_type.value_type.tensor_type.elem_type = TensorProto.FLOAT
    save(model(g), os.path.join(d, "map_input.onnx"))
    mp = model(identity_graph([]))
    mp.ClearField("graph")
    save(mp, os.path.join(d, "nograph.onnx"))
    mp = model(identity_graph([]))
    mp.ClearField("ir_version")
    save(mp, os.path.join(d, "no_ir_version.onnx"))
    mp = model(identity_graph([]))
    mp.ClearField("opset_import")
    save(mp, os.path.join(d, "no_opset.onnx"))
    sp = onnx.SparseTensorProto()
    sp.values.CopyFrom(tensor("sp", 1, [1], np.float32([1]).tobytes()))
    sp.indices.CopyFrom(tensor("i", 7, [1], int64_data=[6]))
    sp.dims.extend([2, 3])
    g = identity_graph([])
    g.sparse_initializer.append(sp)
    save(model(g), os.path.join(d, "sparse_oob.onnx"))
    sp.indices.CopyFrom(tensor("i", 7, [1], int64_data=[0]))
    del sp.dims[:]
    sp.dims.extend([1 << 20, 1 << 20])
    g = identity_graph([])
    g.sparse_initializer.append(sp)
    save(model(g), os.path.join(d, "sparse_huge.onnx"))


# ---------------------------------------------------------------- value files

def values(out):
    d = os.path.join(out, "values")
    os.makedirs(d, exist_ok=True)

    def w(name, msg):
        with open(os.path.join(d, name), "wb") as f:
            f.write(msg.SerializeToString())

    w("tensor.pb", tensor("x", 1, [2, 2], np.float32([1, 2, 3, 4]).tobytes()))
    w("strings.pb", tensor("s", 8, [3], string_data=[b"ab", b"", b"cde"]))
    w("tensor_bad.pb", tensor("x", 1, [2, 2], b"\0" * 12))
    sq = onnx.SequenceProto()
    sq.name = "seq"
    sq.elem_type = onnx.SequenceProto.TENSOR
    sq.tensor_values.extend([tensor("a", 7, [2], int64_data=[1, 2]), tensor("b", 7, [3], int64_data=[3, 4, 5])])
    w("seq.pb", sq)
    se = onnx.SequenceProto()
    se.name = "empty"
    se.elem_type = onnx.SequenceProto.TENSOR
    w("seq_empty.pb", se)
    sm = onnx.SequenceProto()
    sm.elem_type = onnx.SequenceProto.TENSOR
    sm.tensor_values.extend([tensor("a", 7, [1], int64_data=[1]), tensor("b", 1, [1], float_data=[1])])
    w("seq_mixed.pb", sm)
    sn = onnx.SequenceProto()
    sn.elem_type = onnx.SequenceProto.SEQUENCE
    sn.sequence_values.add().CopyFrom(sq)
    w("seq_nested.pb", sn)
    op = onnx.OptionalProto()
    op.name = "opt"
    op.elem_type = onnx.OptionalProto.TENSOR
    op.tensor_value.CopyFrom(tensor("x", 6, [3], int32_data=[7, 8, 9]))
    w("opt_tensor.pb", op)
    oe = onnx.OptionalProto()
    oe.name = "none"
    oe.elem_type = onnx.OptionalProto.TENSOR
    w("opt_empty.pb", oe)
    os_ = onnx.OptionalProto()
    os_.elem_type = onnx.OptionalProto.SEQUENCE
    os_.sequence_value.CopyFrom(sq)
    w("opt_seq.pb", os_)
    with open(os.path.join(d, "garbage.pb"), "wb") as f:
        f.write(b"\xff\xff\xff")


def corpus(out, node_dir=None):
    """Small valid inputs for the fuzzer: models and value files, plus a few
    ONNX node tests (model and first input) when node_dir has them."""
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, ".gen")
    os.makedirs(tmp, exist_ok=True)
    features(tmp)
    cnn(tmp)
    values(tmp)
    small = [tensor("a", 1, [2], np.float32([1, 2]).tobytes()), tensor("b", 8, [1], string_data=[b"s"]),
             tensor("c", 22, [3], pack4([1, -2, 3])), tensor("d", 7, [2], int64_data=[1, 2])]
    save(model(identity_graph(small)), os.path.join(out, "small.onnx"))
    for name in ("features.onnx", "opset_alias.onnx"):
        os.replace(os.path.join(tmp, name), os.path.join(out, name))
    for name in os.listdir(os.path.join(tmp, "values")):
        os.replace(os.path.join(tmp, "values", name), os.path.join(out, "value_" + name))
    # the CNN is mostly weights: keep a copy with small ones
    m = onnx.load(os.path.join(tmp, "cnn.onnx"))
    for t in m.graph.initializer:
        t.raw_data = t.raw_data[:4 * int(np.prod(t.dims[:1]))]
        del t.dims[1:]
    save(m, os.path.join(out, "cnn_small.onnx"))
    shutil.rmtree(tmp)
    if node_dir and os.path.isdir(node_dir):
        picks = ("test_if", "test_loop", "test_scan", "test_sequence", "test_optional", "test_cast", "test_conv",
                 "test_constant", "test_split", "test_string", "test_bitshift", "test_dequantize")
        n = 0
        for name in sorted(os.listdir(node_dir)):
            if n >= 80 or not name.startswith(picks):
                continue
            for f in ("model.onnx", os.path.join("test_data_set_0", "input_0.pb")):
                src = os.path.join(node_dir, name, f)
                if os.path.isfile(src) and os.path.getsize(src) <= 65536:
                    shutil.copyfile(src, os.path.join(out, "node_%s_%s" % (name, os.path.basename(f))))
                    n += 1


def maps(out):
    """ZipMap's output, a seq(map(K, float)): declared (string keys), left
    to inference (int64 keys), and two key/value types tandem refuses."""
    d = os.path.join(out, "maps")
    os.makedirs(d, exist_ok=True)

    def zipmap(name, labels, key=None, value=TensorProto.FLOAT):
        attr = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_int64s"
        node = helper.make_node("ZipMap", ["x"], ["z"], domain="ai.onnx.ml", name="zm", **{attr: labels})
        z = onnx.ValueInfoProto(name="z")
        if key is not None:
            mt = z.type.sequence_type.elem_type.map_type  # by hand: the system onnx has no make_map_type_proto
            mt.key_type = key
            mt.value_type.tensor_type.elem_type = value
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])], [z])
        save(model(g, opsets=(("", 17), ("ai.onnx.ml", 1))), os.path.join(d, name + ".onnx"))

    zipmap("zipmap_strings", ["a", "b", "c"], TensorProto.STRING)
    zipmap("zipmap_int64_inferred", [1, 2, 3])
    zipmap("bad_key_int32", [1, 2, 3], TensorProto.INT32)
    zipmap("bad_value_string", [1, 2, 3], TensorProto.INT64, TensorProto.STRING)


def main():
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--corpus":
        corpus(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    dtypes(out)
    features(out)
    cnn(out)
    external(out)
    malformed(out)
    values(out)
    maps(out)


if __name__ == "__main__":
    main()
