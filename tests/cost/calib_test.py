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
