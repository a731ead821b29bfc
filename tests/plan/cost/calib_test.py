"""Calibration and the precision trigger (ctest cost.calib.*).

cost_calib.py TANDEM WORKDIR CACHE CASE
  chain     a chain of 24 Mul nodes by constants, calibrated on vnpu:edge-npu
            (fp16): every node alone stays above a threshold the chain falls
            below; the planner must refuse exactly the node where the chain's
            cosine first crosses it (kind "accumulated"), and the same after
            every node is renamed (the signature survives renames).
  ppocr_det ppocr_det calibrated on vnpu:edge-npu,vnpu:server-npu: with
            --calibration the BatchNormalization whose fp16 variance
            overflows is refused (PRECISION) on both without a hand pin, and
            `tandem run --granularity auto --calibration` matches the cpu
            outputs (cosine >= 0.999).
  fused     Relu(x) -> Conv -> Relu -> Conv -> Relu: the two Relus after
            the Convs share an entry and are fused away in the all-cpu
            session, so its fused_ms is 0 (the mean over the entry's nodes
            the fusion does not swallow) and its threaded_ms is not; the
            first Relu runs (fused_ms > 0); planned all on cpu with the
            file the fused Relus cost 0 and the total is the nodes' sum.
"""
import json
import os
import subprocess
import sys

import numpy as np

tandem, work, cache, case = sys.argv[1:5]
os.makedirs(work, exist_ok=True)


def sh(args, ok=0):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != ok:
        print("FAIL: %s exited %d\n%s\n%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        sys.exit(1)
    return p


def chain_model(path, rename):
    import onnx
    from onnx import TensorProto, helper
    rng = np.random.default_rng(5)
    nodes, inits = [], []
    prev = "x"
    for i in range(24):
        c = np.array([rng.uniform(0.71, 1.39)], dtype=np.float32)
        cname = "c%d" % i
        inits.append(helper.make_tensor(cname, TensorProto.FLOAT, [1], c))
        out = "y" if i == 23 else "t%d" % i
        nodes.append(helper.make_node("Mul", [prev, cname], [out], name=("renamed_%d" if rename else "mul%d") % i))
        prev = out
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8192])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8192])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def refused(ledger):
    return [(r["node"], r["device"], r["kind"]) for r in ledger["precision"]["refused"]]


if case == "chain":
    model, renamed = os.path.join(work, "chain.onnx"), os.path.join(work, "chain_renamed.onnx")
    chain_model(model, False)
    chain_model(renamed, True)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 8192)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    cal = os.path.join(work, "chain.calib.json")
    sh([tandem, "calibrate", model, "--devices", "vnpu:edge-npu", "--input", "x=" + os.path.join(work, "x.npy"),
        "--out", cal, "--repeat", "1"])
    c = json.load(open(cal))
    order = {}
    for k, v in c["nodes"].items():
        for n in v["names"]:
            order[n] = v["devices"]["vnpu:edge-npu"]
    alone = [order["mul%d" % i]["error"]["cosine"] for i in range(24)]
    chain = [order["mul%d" % i]["chain"]["cosine"] for i in range(24)]
    print("alone cosine: worst %.10f; chain cosine: first %.10f, last %.10f" % (min(alone), chain[0], chain[-1]))
    if not chain[-1] < min(alone):
        print("FAIL: the chain does not accumulate error beyond the worst single node")
        sys.exit(1)
    thr = (min(alone) + chain[-1]) / 2
    expect = next(i for i in range(24) if chain[i] < thr)
    print("threshold %.10f: the chain crosses it at mul%d" % (thr, expect))
    for path, prefix in ((model, "mul"), (renamed, "renamed_")):
        p = sh([tandem, "plan", path, "--devices", "vnpu:edge-npu", "--calibration", cal, "--min-cosine", repr(thr),
                "--json"])
        led = json.loads(p.stdout)
        got = refused(led)
        print(os.path.basename(path), "refused:", got)
        want = [("%s%d" % (prefix, expect), "vnpu:edge-npu", "accumulated")]
        if got != want:
            print("FAIL: expected", want)
            sys.exit(1)
        node = next(n for n in led["nodes"] if n["name"] == want[0][0])
        if node["device"] != "cpu" or node["reason"] != "PRECISION" or "accumulated" not in node["detail"]:
            print("FAIL: node", node)
            sys.exit(1)
        print("  ", node["detail"])
    # default threshold: nothing refused
    led = json.loads(sh([tandem, "plan", model, "--devices", "vnpu:edge-npu", "--calibration", cal, "--json"]).stdout)
    if refused(led):
        print("FAIL: refusals at the default threshold", refused(led))
        sys.exit(1)
    # through `tandem run`: the default thresholds refuse nothing; --max-abs 0
    # refuses every node whose fp16 result differs at all
    for extra, want_all in (([], False), (["--max-abs", "0"], True)):
        ledger = os.path.join(work, "run-ledger.json")
        sh([tandem, "run", model, "--input", "x=" + os.path.join(work, "x.npy"), "--devices", "vnpu:edge-npu",
            "--calibration", cal, "--ledger", ledger] + extra)
        got = refused(json.load(open(ledger)))
        differs = sum(1 for i in range(24) if order["mul%d" % i]["error"]["max_abs"] > 0)
        print("run", " ".join(extra) or "(default thresholds)", "refused", len(got), "nodes;", differs,
              "differ at all alone")
        if (len(got) != differs or differs == 0) if want_all else got:
            print("FAIL")
            sys.exit(1)
    print("ok")
elif case == "fused":
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = lambda *s: numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32))
    w1, w2 = w(16, 16, 3, 3), w(16, 16, 3, 3)
    w1.name, w2.name = "w1", "w2"
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r_in"),
             helper.make_node("Conv", ["a", "w1"], ["c1"], name="c1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="r1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="c2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["y"], name="r2")]
    g = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 14, 14])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])], [w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    model, cal = os.path.join(work, "fused.onnx"), os.path.join(work, "fused.calib.json")
    onnx.save(m, model)
    sh([tandem, "calibrate", model, "--devices", "vnpu:edge-npu", "--random", "--out", cal, "--repeat", "3"])
    by = {n: v["devices"]["cpu"] for v in json.load(open(cal))["nodes"].values() for n in v["names"]}
    print({n: (by[n]["fused_ms"], by[n]["threaded_ms"]) for n in ("r_in", "r1", "r2")})
    if not (by["r1"]["fused_ms"] == 0 and by["r2"]["fused_ms"] == 0 and by["r1"]["threaded_ms"] > 0):
        print("FAIL: the fused Relus' entry has fused_ms", by["r1"]["fused_ms"])
        sys.exit(1)
    if not by["r_in"]["fused_ms"] > 0:
        print("FAIL: the Relu that runs has fused_ms", by["r_in"]["fused_ms"])
        sys.exit(1)
    led = json.loads(sh([tandem, "plan", model, "--devices", "cpu", "--calibration", cal, "--json"]).stdout)
    est = {n["name"]: n for n in led["nodes"]}
    total = led["summary"]["estimated_ms"]["total"]
    if not (est["r1"]["estimated_ms"] == 0 and est["r2"]["estimated_ms"] == 0 and est["r1"].get("fused")
            and not est["r_in"].get("fused") and abs(total - sum(n["estimated_ms"] for n in led["nodes"])) < 1e-5):
        print("FAIL: plan", est, total)
        sys.exit(1)
    print("ok")
elif case == "ppocr_det":
    model = os.path.join(cache, "models", "ppocr_det.onnx")
    xin = os.path.join(cache, "refs", "ppocr_det", "inputs", "x.npy")
    if not os.path.exists(model) or not os.path.exists(xin):
        print("ppocr_det is missing (skipped)")
        sys.exit(77)
    cal = os.path.join(work, "det.calib.json")
    sh([tandem, "calibrate", model, "--devices", "vnpu:edge-npu,vnpu:server-npu", "--input", "x=" + xin, "--out", cal,
        "--repeat", "1"])
    for prof in ("edge-npu", "server-npu"):
        led = json.loads(sh([tandem, "plan", model, "--shape", "x=1x3x640x640", "--devices", "vnpu:" + prof,
                             "--granularity", "auto", "--calibration", cal, "--json"]).stdout)
        got = refused(led)
        print(prof, "refused:", got)
        if ("p2o.BatchNormalization.1", "vnpu:" + prof, "node") not in got:
            print("FAIL: the overflowing BatchNormalization is not refused")
            sys.exit(1)
        outs = {}
        for name, extra in (("cpu", ["--devices", "cpu"]),
                            (prof, ["--devices", "vnpu:" + prof, "--granularity", "auto", "--calibration", cal])):
            d = os.path.join(work, "out-" + name)
            sh([tandem, "run", model, "--input", "x=" + xin, "--output-dir", d, "--overwrite"] + extra)
            outs[name] = {f: np.load(os.path.join(d, f)).astype(np.float64).ravel() for f in sorted(os.listdir(d))}
        for f, a in outs["cpu"].items():
            b = outs[prof][f]
            cos = float(a @ b / np.sqrt((a @ a) * (b @ b)))
            print("  %s output %s: cosine %.7f against cpu" % (prof, f, cos))
            if not (np.all(np.isfinite(b)) and cos >= 0.999):
                print("FAIL")
                sys.exit(1)
    print("ok")
elif case == "opencl":
    # calibration on a real device (PoCL): per node the median of repeated
    # runs on the device (its profiling timer), the error against cpu fp32
    # (max abs, RMSE, cosine; alone and along the chain), the measured copy
    # cost; the file's measured times then replace the plan's estimates
    model = os.path.join(cache, "models", "squeezenet1_1.onnx")
    xin = os.path.join(cache, "refs", "squeezenet1_1", "inputs", "input.npy")
    if not os.path.exists(model) or not os.path.exists(xin):
        print("squeezenet1_1 is missing (skipped)")
        sys.exit(77)
    cal = os.path.join(work, "ocl.calib.json")
    sh([tandem, "calibrate", model, "--devices", "opencl", "--input", "input=" + xin, "--out", cal, "--repeat", "5"])
    c = json.load(open(cal))
    dev = next(d for d in c["devices"] if d["kind"] == "opencl")
    cp = dev["copy"]
    print("copy (measured on %s): to device %.4f ms + %.3g ms/byte, to host %.4f ms + %.3g ms/byte" % (
        dev["name"], cp["to_device_per_copy_ms"], cp["to_device_per_byte_ms"], cp["to_host_per_copy_ms"],
        cp["to_host_per_byte_ms"]))
    bad = cp["modeled"] or not (cp["to_device_per_byte_ms"] > 0 and cp["to_host_per_byte_ms"] > 0)
    n_sup, worst, tot_dev, tot_cpu = 0, 1.0, 0.0, 0.0
    for k, v in c["nodes"].items():
        o = v["devices"].get(dev["name"], {})
        if not o.get("supported"):
            continue
        n_sup += 1
        e = o.get("error", {})
        if o.get("modeled") is not False or o.get("timer") != "device" or not (o.get("ms", -1) >= 0) \
                or "cosine" not in e or "rmse" not in e or "max_abs" not in e or "chain" not in o:
            print("FAIL: node %s lacks device figures: %s" % (v["names"], o))
            bad = True
            continue
        worst = min(worst, e["cosine"], o["chain"]["cosine"])
        tot_dev += o["ms"]
        tot_cpu += v["devices"]["cpu"]["ms"]
    print("%d nodes on %s: device time (median of 5) sum %.3f ms vs cpu %.3f ms; worst cosine vs cpu fp32 %.9f" % (
        n_sup, dev["name"], tot_dev, tot_cpu, worst))
    bad = bad or n_sup < 20 or worst < 0.9999
    led = json.loads(sh([tandem, "plan", model, "--devices", "opencl,cpu", "--granularity", "auto", "--calibration",
                         cal, "--json"]).stdout)
    meas = led["precision"]["measured_estimates"]
    print("plan with the file: %d measured estimates, estimated %.3f ms, nodes %s" % (
        meas, led["summary"]["estimated_ms"]["total"], led["summary"]["nodes_by_device"]))
    if bad or meas < n_sup:
        print("FAIL")
        sys.exit(1)
    print("ok")
