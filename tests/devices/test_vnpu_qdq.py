#!/usr/bin/env python3
"""vnpu int8 QDQ groups (ctest devices.vnpu.qdq.*): a profile with
"quantized" runs DequantizeLinear -> Conv -> QuantizeLinear as int8 x int8 ->
int32 with the profile's rounding.

usage: test_vnpu_qdq.py TANDEM CASE [CACHE]
  conv    one Conv group on hand-made int8 data: y_q equals the integer
          result computed here exactly, on rk3588 (half_away) and qnn-htp
          (half_even); cpu's float emulation and rk3588's fp16 path without
          "quantized" differ from it (ties, fp16 rounding)
  ort     a random Conv group and a Gemm group against onnxruntime's fused
          integer kernels (QLinearConv, QGemm): qnn-htp bit-exact
  profile "quantized" validated: bad values refused with their path;
          plan --json marks the groups "compute": "int8" on rk3588 only
  model   resnet18_qdq / mobilenet_v2_qdq on their rendered input
          (CACHE/refs) on vnpu:P,cpu against onnxruntime 1.31.1's output:
          within one step, top-1 equal (figures printed); cpu equal to
          onnxruntime bit for bit; rk3588 with the guard on moves nothing
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run_tandem(tandem, model, devices, feeds, tmp):
    out = tempfile.mkdtemp(dir=tmp)
    args = [tandem, "run", model, "--devices", devices, "--verify", "off", "--output-dir", out]
    for k, v in feeds.items():
        p = os.path.join(tmp, k + ".npy")
        np.save(p, v)
        args += ["--input", "%s=%s" % (k, p)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("tandem failed (%d): %s" % (r.returncode, r.stderr))
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}


def conv_group_model(path, x_shape, w_q, w_s, b_q, xs, xzp, ys, yzp, pads):
    """x_q (uint8 input) -> DQ -> Conv(DQ(w_q), DQ(b_q)) -> Q -> y_q (uint8 output)."""
    m = w_q.shape[0]
    inits = [
        numpy_helper.from_array(np.array(xs, np.float32), "xs"),
        numpy_helper.from_array(np.array(xzp, np.uint8), "xzp"),
        numpy_helper.from_array(w_q, "wq"),
        numpy_helper.from_array(np.asarray(w_s, np.float32), "ws"),
        numpy_helper.from_array(np.zeros(m, np.int8), "wzp"),
        numpy_helper.from_array(b_q, "bq"),
        numpy_helper.from_array((np.float32(xs) * np.asarray(w_s, np.float32)).astype(np.float32), "bs"),
        numpy_helper.from_array(np.zeros(m, np.int32), "bzp"),
        numpy_helper.from_array(np.array(ys, np.float32), "ys"),
        numpy_helper.from_array(np.array(yzp, np.uint8), "yzp"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["x_q", "xs", "xzp"], ["x"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wzp"], ["w"], axis=0),
        helper.make_node("DequantizeLinear", ["bq", "bs", "bzp"], ["b"], axis=0),
        helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=pads, name="conv"),
        helper.make_node("QuantizeLinear", ["y", "ys", "yzp"], ["y_q"]),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x_q", TensorProto.UINT8, x_shape)],
                          [helper.make_tensor_value_info("y_q", TensorProto.UINT8, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)


def conv_int(x_q, xzp, w_q, b_q, xs, w_s, ys, yzp, pad, rounding):
    """The integer group: int32 sums, fp32 multiplier, rounding, saturation."""
    x = np.pad(x_q.astype(np.int64) - xzp, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, w = x.shape
    m, _, kh, kw = w_q.shape
    oh, ow = h - kh + 1, w - kw + 1
    acc = np.zeros((n, m, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            acc += np.einsum("nchw,mc->nmhw", x[:, :, i:i + oh, j:j + ow], w_q[:, :, i, j].astype(np.int64))
    acc = acc.astype(np.int32).astype(np.int64) + b_q.reshape(1, m, 1, 1)
    mult = (np.float32(xs) * np.asarray(w_s, np.float32) / np.float32(ys)).astype(np.float32)
    v = (acc.astype(np.float32) * mult.reshape(1, m, 1, 1)).astype(np.float64)
    r = np.floor(np.abs(v) + 0.5) * np.sign(v) if rounding == "half_away" else np.round(v)
    return np.clip(r + yzp, 0, 255).astype(np.uint8)


def case_conv(tandem, tmp):
    rng = np.random.default_rng(17)
    # scales so that y = acc / 2: every odd sum is a tie (half_away and
    # half_even part), and fp16 holds y only to 2^-9 near 300 (so the fp16
    # path rounds some off the tie)
    xs, ys, xzp, yzp = 0.5, 1.0, 128, 0
    w_s = np.array([0.25, 0.25, 0.25, 0.25], np.float32)
    x_q = rng.integers(100, 160, size=(1, 3, 6, 6), dtype=np.uint8)
    w_q = rng.integers(-12, 13, size=(4, 3, 3, 3), dtype=np.int8)
    b_q = np.array([3, -5, 101, 0], np.int32)
    # a near-tie the fp16 path loses: channel 2's sum made 2 * 300 + 1 + 1/1024-ish
    path = os.path.join(tmp, "conv.onnx")
    conv_group_model(path, list(x_q.shape), w_q, w_s, b_q, xs, xzp, ys, yzp, [1, 1, 1, 1])
    feeds = {"x_q": x_q}
    want = {r: conv_int(x_q, xzp, w_q, b_q, xs, w_s, ys, yzp, 1, r) for r in ("half_away", "half_even")}
    ties = int(np.sum(want["half_away"] != want["half_even"]))
    check(ties > 0, "conv: the data has %d ties where the roundings differ" % ties)
    got = {}
    for dev, rounding in (("vnpu:rk3588,cpu", "half_away"), ("vnpu:qnn-htp,cpu", "half_even"),
                          ("vnpu:intel-npu,cpu", "half_even")):
        got[dev] = run_tandem(tandem, path, dev, feeds, tmp)["y_q"]
        check(got[dev].dtype == np.uint8 and np.array_equal(got[dev], want[rounding]),
              "conv: %s gives the integer result (%s) exactly: %d of %d equal" % (
                  dev, rounding, int(np.sum(got[dev] == want[rounding])), want[rounding].size))
    cpu = run_tandem(tandem, path, "cpu", feeds, tmp)["y_q"]
    check(np.array_equal(cpu, want["half_even"]),
          "conv: cpu's float emulation rounds the ties half to even (equal to the half_even integer result)")
    differ = int(np.sum(cpu != got["vnpu:rk3588,cpu"]))
    check(differ == ties, "conv: rk3588's int8 path differs from cpu's float emulation at the %d ties "
          "(%d elements, one step each: max %d)" % (ties, differ,
                                                     int(np.abs(cpu.astype(int) - got["vnpu:rk3588,cpu"]).max())))
    # the same profile without "quantized": its fp16 float emulation
    prof = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "profiles", "rk3588.json")))
    del prof["quantized"]
    prof["name"] = "rk3588-fp16"
    ppath = os.path.join(tmp, "rk3588-fp16.json")
    json.dump(prof, open(ppath, "w"))
    fp16 = run_tandem(tandem, path, "vnpu:%s,cpu" % ppath, feeds, tmp)["y_q"]
    d = int(np.sum(fp16 != want["half_away"]))
    check(d > 0, "conv: rk3588's fp16 path without \"quantized\" differs from the int8 result at %d of %d" % (
        d, fp16.size))


def case_ort(tandem, tmp):
    import onnxruntime as ort
    rng = np.random.default_rng(5)
    xs, ys, xzp, yzp = 0.0173, 0.0419, 121, 97
    w_s = rng.uniform(0.002, 0.01, size=16).astype(np.float32)
    x_q = rng.integers(0, 256, size=(1, 8, 12, 12), dtype=np.uint8)
    w_q = rng.integers(-127, 128, size=(16, 8, 3, 3), dtype=np.int8)
    b_q = rng.integers(-3000, 3000, size=16).astype(np.int32)
    path = os.path.join(tmp, "conv_ort.onnx")
    conv_group_model(path, list(x_q.shape), w_q, w_s, b_q, xs, xzp, ys, yzp, [1, 1, 1, 1])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x_q": x_q})[0]
    mine = conv_int(x_q, xzp, w_q, b_q, xs, w_s, ys, yzp, 1, "half_even")
    check(np.array_equal(ref, mine), "ort: this file's integer group equals onnxruntime's QLinearConv (%d of %d)" % (
        int(np.sum(ref == mine)), ref.size))
    got = run_tandem(tandem, path, "vnpu:qnn-htp,cpu", {"x_q": x_q}, tmp)["y_q"]
    d = np.abs(got.astype(int) - ref.astype(int))
    check(d.max() == 0, "ort: vnpu:qnn-htp equals onnxruntime's fused Conv group: max %d steps, %.2f%% exact" % (
        d.max(), 100 * np.mean(d == 0)))
    cpu = run_tandem(tandem, path, "cpu", {"x_q": x_q}, tmp)["y_q"]
    dc = np.abs(cpu.astype(int) - ref.astype(int))
    print("     cpu float emulation vs onnxruntime: max %d steps, %.2f%% exact" % (dc.max(), 100 * np.mean(dc == 0)))


def case_profile(tandem, tmp):
    base = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "profiles", "qnn-htp.json")))
    rng = np.random.default_rng(1)
    conv_group_model(os.path.join(tmp, "conv.onnx"), [1, 2, 4, 4], rng.integers(-5, 5, (3, 2, 3, 3), dtype=np.int8),
                     [0.1, 0.2, 0.3], np.zeros(3, np.int32), 0.05, 128, 0.2, 10, [0, 0, 0, 0])
    bad = [({"accumulate": "int16", "rounding": "half_even"}, "quantized.accumulate must be \"int32\""),
           ({"accumulate": "int32", "rounding": "nearest"}, "quantized.rounding must be \"half_even\" or"),
           ({"accumulate": "int32"}, "quantized.rounding is missing"),
           ({"accumulate": "int32", "rounding": "half_even", "bits": 8}, "quantized.bits"),
           ("int8", "quantized must be an object")]
    for val, want in bad:
        prof = dict(base, name="qbad", quantized=val)
        path = os.path.join(tmp, "qbad.json")
        json.dump(prof, open(path, "w"))
        r = subprocess.run([tandem, "plan", os.path.join(tmp, "conv.onnx"), "--devices", "vnpu:" + path],
                           capture_output=True, text=True)
        check(r.returncode == 4 and want in r.stderr and "qbad.json" in r.stderr,
              "profile: %s refused (exit %d): %s" % (json.dumps(val), r.returncode, r.stderr.strip()[:160]))
    for dev, want in (("vnpu:rk3588", "int8"), ("vnpu:server-npu", None)):
        r = subprocess.run([tandem, "plan", os.path.join(tmp, "conv.onnx"), "--devices", dev, "--json"],
                           capture_output=True, text=True)
        nodes = {n["name"]: n for n in json.loads(r.stdout)["nodes"]} if r.returncode == 0 else {}
        conv = nodes.get("conv", {})
        check(conv.get("device", "").startswith(dev) and conv.get("compute") == want,
              "profile: plan --json on %s: conv on %s, compute %s" % (dev, conv.get("device"), conv.get("compute")))


def dequantized_step(model):
    m = onnx.load(model)
    inits = {i.name: i for i in m.graph.initializer}
    out = m.graph.output[0].name
    for n in m.graph.node:
        if out in n.output and n.op_type == "DequantizeLinear":
            return float(numpy_helper.to_array(inits[n.input[1]]).reshape(()))
    raise SystemExit("%s: its output is not a DequantizeLinear's" % model)


def case_model(tandem, tmp, cache, name):
    model = os.path.join(cache, "models", name + ".onnx")
    ref_dir = os.path.join(cache, "refs", name)
    x = np.load(os.path.join(ref_dir, "inputs", "input.npy"))
    ref = np.load(os.path.join(ref_dir, "outputs", "output.npy"))  # onnxruntime, fused
    step = dequantized_step(model)
    cpu = run_tandem(tandem, model, "cpu", {"input": x}, tmp)["output"]
    for prof in ("qnn-htp", "rk3588"):
        got = run_tandem(tandem, model, "vnpu:%s,cpu" % prof, {"input": x}, tmp)["output"]
        d = np.abs(got.astype(np.float64) - ref) / step
        dc = np.abs(cpu.astype(np.float64) - ref) / step
        line = ("%s on vnpu:%s: against onnxruntime's fused run max %.0f steps, %.1f%% exact, %.1f%% within one "
                "step, top-1 %d (onnxruntime %d); cpu: max %.0f steps, %.1f%% exact, top-1 %d" % (
                    name, prof, d.max(), 100 * np.mean(d < 1e-3), 100 * np.mean(d <= 1.001), got.argmax(),
                    ref.argmax(), dc.max(), 100 * np.mean(dc < 1e-3), cpu.argmax()))
        if prof == "qnn-htp":
            check(got.argmax() == ref.argmax() and np.mean(d <= 1.001) >= 0.99, line)
        else:
            print("     " + line)
    # cpu runs QDQ groups as integer kernels too (ops/qdq.h), rounding half
    # to even as onnxruntime does: its answer is onnxruntime's, bit for bit
    check(np.array_equal(cpu, ref), "%s on cpu: equal to onnxruntime's fused run bit for bit (max %.0f steps)" % (
        name, (np.abs(cpu.astype(np.float64) - ref) / step).max()))
    # the precision guard's reference is that integer answer: by default it
    # leaves the int8 groups on rk3588 (it moved 35 nodes of mobilenet_v2_qdq
    # when cpu evaluated the groups in float)
    out = tempfile.mkdtemp(dir=tmp)
    np.save(os.path.join(out, "input.npy"), x)
    p = subprocess.run([tandem, "run", model, "--devices", "vnpu:rk3588,cpu", "--input",
                        "input=" + os.path.join(out, "input.npy"), "--output-dir", os.path.join(out, "o"),
                        "--ledger", os.path.join(out, "l.json")], capture_output=True, text=True)
    g = json.load(open(os.path.join(out, "l.json"))).get("guard", {}) if p.returncode == 0 else {}
    check(p.returncode == 0 and g.get("active") and g.get("moved_nodes") == 0 and not g.get("fallback_all"),
          "%s on rk3588 with the guard on: verified, 0 nodes moved (%s; %s)" % (name, {k: g.get(k) for k in (
              "moved_nodes", "breaches", "output_cosine_before")}, p.stderr.strip()[:300]))


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    tandem, case = argv[1], argv[2]
    tmp = tempfile.mkdtemp(prefix="tdm-qdq-")
    if case == "conv":
        case_conv(tandem, tmp)
    elif case == "profile":
        case_profile(tandem, tmp)
    elif case == "ort":
        case_ort(tandem, tmp)
    elif case in ("resnet18_qdq", "mobilenet_v2_qdq"):
        case_model(tandem, tmp, argv[3], case)
    else:
        sys.stderr.write("unknown case %s\n" % case)
        return 2
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
