"""The Python package (python/tandem) against numpy references and, where
installed, onnxruntime. Runs under pytest and under run_tests.py (Debian's
python3 has no pytest). Models are made with onnx's helpers.

Environment: TANDEM_LIBRARY (the libtandem.so under test),
TANDEM_TEST_REQUIRE_ORT=1 (onnxruntime must be importable: the test venv),
TANDEM_CACHE and TANDEM_TEST_REQUIRE_MODELS=1 (the real models must exist).
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tandem

_TMP = tempfile.mkdtemp(prefix="tandem-py-")
_MODELS = {}


def skip(why):
    raise unittest.SkipTest(why)


def ort():
    try:
        import onnxruntime
    except ImportError:
        if os.environ.get("TANDEM_TEST_REQUIRE_ORT") == "1":
            raise AssertionError("onnxruntime is required here (TANDEM_TEST_REQUIRE_ORT=1) but not importable")
        skip("onnxruntime is not installed in this python")
    return onnxruntime


def save(name, graph, opset=17):
    if name not in _MODELS:
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        path = os.path.join(_TMP, name + ".onnx")
        onnx.save(m, path)
        _MODELS[name] = path
    return _MODELS[name]


W = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


def tiny():
    """x[N,4] -> MatMul W -> Relu -> LayerNormalization (edge-npu lacks it) -> z."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
         helper.make_node("Relu", ["y"], ["r"], name="relu"),
         helper.make_node("LayerNormalization", ["r", "s", "b"], ["z"], name="ln", axis=-1)],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.ones(3, np.float32), "s"),
         numpy_helper.from_array(np.zeros(3, np.float32), "b")])
    return save("tiny", g)


def tiny_ref(x):
    r = np.maximum(x @ W, 0).astype(np.float64)
    mu = r.mean(-1, keepdims=True)
    var = ((r - mu) ** 2).mean(-1, keepdims=True)
    return (r - mu) / np.sqrt(var + 1e-5)


def identities():
    types = [("f16", TensorProto.FLOAT16), ("f64", TensorProto.DOUBLE), ("i64", TensorProto.INT64),
             ("b", TensorProto.BOOL), ("u8", TensorProto.UINT8), ("s", TensorProto.STRING)]
    g = helper.make_graph(
        [helper.make_node("Identity", [n], [n + "_out"], name="id_" + n) for n, _ in types],
        "ids", [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in types],
        [helper.make_tensor_value_info(n + "_out", t, [2, 3]) for n, t in types])
    return save("ids", g)


def x_in(n=2, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


def test_version():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "tandem", "tandem.h")) as f:
        hdr = f.read()
    want = re.search(r'#define TDM_VERSION_STRING "([^"]+)"', hdr).group(1)
    assert tandem.__version__ == want, (tandem.__version__, want)
    assert "cpu" in tandem.get_available_providers()


def test_inputs_outputs():
    s = tandem.InferenceSession(tiny(), providers=["cpu"])
    (i,), (o,) = s.get_inputs(), s.get_outputs()
    assert (i.name, i.shape, i.type) == ("x", ["N", 4], "tensor(float)"), i
    assert (o.name, o.shape, o.type) == ("z", ["N", 3], "tensor(float)"), o


def test_inputs_outputs_like_onnxruntime():
    rt = ort()
    path = identities()
    a = tandem.InferenceSession(path, providers=["cpu"])
    b = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    for x, y in zip(a.get_inputs() + a.get_outputs(), b.get_inputs() + b.get_outputs()):
        assert (x.name, x.shape, x.type) == (y.name, y.shape, y.type), (x, y)


def test_run_cpu_matches_numpy():
    s = tandem.InferenceSession(tiny(), providers=["cpu"])
    x = x_in(5)
    (z,) = s.run(None, {"x": x})
    assert z.dtype == np.float32 and z.shape == (5, 3)
    assert np.abs(z - tiny_ref(x)).max() < 1e-5
    (z2,) = s.run(["z"], {"x": x})
    assert np.array_equal(z, z2)


def test_run_matches_onnxruntime():
    rt = ort()
    x = x_in(7, seed=3)
    b = rt.InferenceSession(tiny(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    a = tandem.InferenceSession(tiny(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(a - b).max() <= 1e-5, np.abs(a - b).max()


def zipmap_model():
    """LinearClassifier -> ZipMap (string labels), as skl2onnx exports a
    classifier: output_probability is a seq(map(string, tensor(float)))."""
    path = os.path.join(_TMP, "zipmap.onnx")
    if not os.path.exists(path):
        ml = "ai.onnx.ml"
        labels = ["ant", "bee", "cat"]
        z = onnx.ValueInfoProto(name="output_probability")
        mt = z.type.sequence_type.elem_type.map_type  # by hand: Debian's onnx has no make_map_type_proto
        mt.key_type = TensorProto.STRING
        mt.value_type.tensor_type.elem_type = TensorProto.FLOAT
        g = helper.make_graph(
            [helper.make_node("LinearClassifier", ["x"], ["label", "probabilities"], domain=ml, name="lc",
                              coefficients=W.T.ravel().tolist(), intercepts=[0.1, 0.0, -0.1],
                              classlabels_strings=labels, post_transform="SOFTMAX"),
             helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain=ml, name="zm",
                              classlabels_strings=labels)],
            "zipmap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
            [helper.make_tensor_value_info("label", TensorProto.STRING, ["N"]), z])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ml, 1)])
        m.ir_version = 8
        onnx.save(m, path)
    return path


def test_zipmap_list_of_dicts():
    s = tandem.InferenceSession(zipmap_model(), providers=["cpu"])
    assert s.get_outputs()[1].type == "seq(map(string,tensor(float)))", s.get_outputs()[1]
    label, probs = s.run(None, {"x": x_in(3)})
    assert isinstance(probs, list) and len(probs) == 3 and list(probs[0]) == ["ant", "bee", "cat"], probs
    for row, lab in zip(probs, label):
        assert abs(sum(row.values()) - 1.0) < 1e-5 and max(row, key=row.get) == lab, (row, lab)


def test_zipmap_like_onnxruntime():
    rt = ort()
    x = x_in(4, seed=5)
    a = tandem.InferenceSession(zipmap_model(), providers=["cpu"])
    b = rt.InferenceSession(zipmap_model(), providers=["CPUExecutionProvider"])
    assert a.get_outputs()[1].type == b.get_outputs()[1].type, (a.get_outputs()[1], b.get_outputs()[1])
    (pa,), (pb,) = a.run(["output_probability"], {"x": x}), b.run(["output_probability"], {"x": x})
    assert [list(r) for r in pa] == [list(r) for r in pb], (pa, pb)
    assert all(abs(ra[k] - rb[k]) <= 1e-5 * abs(rb[k]) + 1e-6 for ra, rb in zip(pa, pb) for k in rb), (pa, pb)


def test_model_from_bytes():
    with open(tiny(), "rb") as f:
        data = f.read()
    s = tandem.InferenceSession(data, providers=["cpu"])
    x = x_in()
    assert np.abs(s.run(None, {"x": x})[0] - tiny_ref(x)).max() < 1e-5


def test_dtypes_round_trip():
    s = tandem.InferenceSession(identities(), providers=["cpu"])
    feed = {"f16": np.arange(6, dtype=np.float16).reshape(2, 3) / 3,
            "f64": np.arange(6, dtype=np.float64).reshape(2, 3) / 7,
            "i64": np.arange(6, dtype=np.int64).reshape(2, 3) * (1 << 40),
            "b": np.array([[True, False, True], [False, False, True]]),
            "u8": np.arange(250, 256, dtype=np.uint8).reshape(2, 3),
            "s": np.array([["a", "bé", ""], ["long string", "x", "yz"]], dtype=object)}
    outs = s.run(None, feed)
    for (name, want), got in zip(feed.items(), outs):
        assert got.shape == want.shape, name
        if name == "s":
            assert got.tolist() == want.tolist(), got
        else:
            assert got.dtype == want.dtype and np.array_equal(got, want), name


def edge_session(**kw):
    so = tandem.SessionOptions()
    so.shapes = {"x": [2, 4]}
    so.granularity = "op"  # at "subgraph" the 2-node island would join cpu
    for k, v in kw.items():
        setattr(so, k, v)
    return tandem.InferenceSession(tiny(), providers=["vnpu:edge-npu", "cpu"], sess_options=so)


def test_vnpu_plan_ledger_explain():
    s = edge_session()
    assert s.plan.devices == {"vnpu:edge-npu": 2, "cpu": 1}, s.plan.devices
    assert s.get_providers() == ["vnpu:edge-npu", "cpu"]
    x = x_in()
    (z,) = s.run(None, {"x": x})
    assert np.abs(z - tiny_ref(x)).max() < 1e-2  # fp16 on edge-npu
    led = s.ledger
    assert led["summary"]["nodes_by_device"] == {"vnpu:edge-npu": 2, "cpu": 1}, led["summary"]
    assert led["summary"]["fallback_nodes"] == 1
    assert "run" in led
    e = s.explain("ln")
    assert e["device"] == "cpu" and e["reason"] == "OP_UNSUPPORTED", e
    assert e["rejected"][0]["device"] == "vnpu:edge-npu"
    assert s.explain("mm")["reason"] == "OK"
    try:
        s.explain("no such node")
    except KeyError as err:
        assert "no such node" in str(err)
    else:
        raise AssertionError("explain of an unknown node did not raise")
    assert "fallback" in s.plan.report or "cpu" in s.plan.report


def test_compare_against_cpu_reference():
    s = edge_session()
    c = s.compare({"x": x_in()})
    assert c["compared"] == 3 and c["skipped"] == 0, c
    by = {r["name"]: r for r in c["nodes"]}
    assert by["mm"]["device"] == "vnpu:edge-npu"
    assert 0 < by["mm"]["max_abs"] < 1e-2 and by["mm"]["cosine"] > 0.999, by["mm"]
    assert by["ln"]["device"] == "cpu"
    assert c["first"] is None


def test_profile_and_metrics():
    s = edge_session()
    p = s.profile({"x": x_in()}, iterations=3)
    assert len(p["runs"]) == 3
    assert [n["name"] for n in p["nodes"]] == ["mm", "relu", "ln"], p["nodes"]
    assert p["nodes"][0]["modeled_ms"] is not None and p["nodes"][2]["fallback"]
    assert any(c["direction"] == "h2d" for c in p["copies"]), p["copies"]
    s.enable_metrics()
    for _ in range(2):
        s.run(None, {"x": x_in()})
    m = s.metrics()
    assert m["runs"] == 2 and m["nodes"] == 6, m
    assert m["nodes_by_reason"].get("OP_UNSUPPORTED") == 2, m["nodes_by_reason"]
    assert "tandem_runs_total 2" in s.metrics(prometheus=True)


def test_fallback_deny():
    so = tandem.SessionOptions()
    so.shapes = {"x": [2, 4]}
    so.fallback = "deny"
    so.granularity = "op"
    p = tandem.plan(tiny(), providers=["vnpu:edge-npu", "cpu"], sess_options=so)
    assert p.policy_error, p.policy_error
    assert [v["node"] for v in p.violations] == ["ln"], p.violations
    try:
        edge_session(fallback="deny")
    except tandem.TandemError as e:
        assert e.status == 8 and e.status_name == "TDM_E_POLICY", e
        assert "ln" in e.message
    else:
        raise AssertionError("fallback deny did not raise")


def expect_error(status, fn):
    try:
        fn()
    except tandem.TandemError as e:
        assert e.status == status, (e.status, e.message)
        assert e.message and e.status_name.startswith("TDM_E_")
        return e
    raise AssertionError("no TandemError raised")


def test_option_words():
    """granularity, fallback, fusion and verify are read by the library's
    parser: a refused word raises TDM_E_USAGE with its sentence, accepted ones
    plan as asked."""
    for field, word, what in [("granularity", "sub-graph", "a granularity"), ("fallback", "never", "a fallback mode"),
                              ("fusion", "sometimes", "a fusion mode"), ("verify", "every:0", "a verify mode")]:
        so = tandem.SessionOptions()
        setattr(so, field, word)
        e = expect_error(1, lambda: tandem.InferenceSession(tiny(), sess_options=so, providers=["cpu"]))
        assert e.message.startswith("'%s' is not %s (" % (word, what)), e.message
    so = tandem.SessionOptions()
    so.granularity, so.fallback, so.fusion, so.verify = "graph", "deny-compute", False, "every:3"
    s = tandem.InferenceSession(tiny(), sess_options=so, providers=["cpu"])
    assert s.ledger["granularity"] == "graph" and s.ledger["fallback"] == "deny-compute", s.ledger
    (y,) = s.run(None, {"x": x_in()})
    np.testing.assert_allclose(y, tiny_ref(x_in()), rtol=1e-4, atol=1e-4)
    so.fusion = "observed"
    tandem.InferenceSession(tiny(), sess_options=so, providers=["cpu"])


def test_calibration_inputs():
    """SessionOptions.calibration_inputs: the precision guard probes them at
    load; an overflowing set refuses the node although the first run's input
    would not overflow; a set naming no model input raises TDM_E_INPUT."""
    k = numpy_helper.from_array(np.array(300, np.float32), "k")
    kinv = numpy_helper.from_array(np.array(1 / 9e4, np.float32), "kinv")
    path = save("guard_overflow", helper.make_graph(
        [helper.make_node("Mul", ["x", "k"], ["a"], name="g_mul1"), helper.make_node("Mul", ["a", "k"], ["b"], name="g_mul2"),
         helper.make_node("Mul", ["b", "kinv"], ["y"], name="g_mul3")],
        "guard_overflow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [k, kinv]))
    big = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)  # 9e4 after two Muls: beyond fp16
    small = big / 10
    so = tandem.SessionOptions()
    so.calibration_inputs = [{"x": small}, {"x": big}]
    s = tandem.InferenceSession(path, providers=["vnpu:server-npu", "cpu"], sess_options=so)
    g = s.ledger["guard"]
    assert g["calibration_input_sets"] == 2 and g["moved_nodes"] >= 1, g
    refused = {r["node"]: r for r in s.ledger["precision"]["refused"]}
    assert refused["g_mul2"]["cause"] == "overflow", refused
    (y,) = s.run(None, {"x": small})
    np.testing.assert_allclose(y, small, rtol=1e-3, atol=1e-3)
    so.calibration_inputs = [{"z": big}]
    e = expect_error(4, lambda: tandem.InferenceSession(path, providers=["vnpu:server-npu", "cpu"], sess_options=so))
    assert "calibration input set 1 names 'z'" in e.message, e.message


def test_errors():
    s = tandem.InferenceSession(tiny(), providers=["cpu"])
    e = expect_error(4, lambda: s.run(None, {"nope": x_in()}))
    assert "nope" in e.message
    e = expect_error(4, lambda: s.run(None, {"x": x_in().astype(np.float64)}))
    assert "'x'" in e.message and "double" in e.message, e.message
    e = expect_error(5, lambda: tandem.InferenceSession(os.path.join(_TMP, "missing.onnx")))
    assert "missing.onnx" in e.message
    bad = os.path.join(_TMP, "garbage.onnx")
    with open(bad, "wb") as f:
        f.write(b"\xff\x00not a model")
    expect_error(2, lambda: tandem.InferenceSession(bad))
    expect_error(7, lambda: tandem.InferenceSession(tiny(), providers=["vnpu:no-such-profile"]))
    expect_error(4, lambda: s.run(["nope"], {"x": x_in()}))


def test_library_not_found_is_an_import_error():
    env = dict(os.environ, TANDEM_LIBRARY=os.path.join(_TMP, "no", "libtandem.so"))
    r = subprocess.run([sys.executable, "-c", "import tandem"], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "TANDEM_LIBRARY" in r.stderr, r.stderr


def squeezenet():
    path = os.path.join(os.environ.get("TANDEM_CACHE", ""), "models", "squeezenet1_1.onnx")
    if not os.path.exists(path):
        if os.environ.get("TANDEM_TEST_REQUIRE_MODELS") == "1":
            raise AssertionError("%s is missing (make data)" % path)
        skip("no model set")
    return path


def test_squeezenet_edge_npu_ledger():
    s = tandem.InferenceSession(squeezenet(), providers=["vnpu:edge-npu", "cpu"])
    by = s.ledger["summary"]["nodes_by_device"]
    assert by.get("vnpu:edge-npu", 0) > 0 and sum(by.values()) == len(s.plan.nodes), by
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    (y,) = s.run(None, {s.get_inputs()[0].name: x})
    assert y.shape == (1, 1000) and np.isfinite(y).all()


def test_squeezenet_vs_onnxruntime():
    path = squeezenet()
    rt = ort()
    b = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    a = tandem.InferenceSession(path, providers=["cpu"])
    name = b.get_inputs()[0].name
    shape = [d if isinstance(d, int) else 1 for d in b.get_inputs()[0].shape]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = b.run(None, {name: x})[0]
    got = a.run(None, {name: x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    err = float(np.abs(got - want).max())
    cos = float((got * want).sum() / np.sqrt((got * got).sum() * (want * want).sum()))
    assert err <= 1e-4 * float(np.abs(want).max()) and cos >= 0.99999, (err, cos)
