#!/usr/bin/python3
"""Tests of `tandem audit`: verdicts, groups by op and reason, hints,
partitions, JSON, exit codes. The models are written here (onnx's helper).
Usage:

    audit_test.py TANDEM WORK_DIR CASE

Exit 0 pass, 1 fail (also when python3-onnx is missing: 77, which ctest counts as a failure here)."""
import json
import subprocess
import sys

from chain import check, counted, enter, failures, model

TANDEM, CASE = sys.argv[1], sys.argv[3]
WORK = enter(sys.argv[2], CASE)


def run(args, code):
    p = subprocess.run([TANDEM, "audit"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "tandem audit %s: exit %d, expected %d\n  stderr: %s\n  stdout: %s"
          % (" ".join(args), p.returncode, code, se.strip(), so[:2000]))
    return so, se


def cell(doc, model_name, device):
    for c in doc["cells"]:
        if ("/" + c["model"]).endswith(model_name if "/" in model_name else "/" + model_name) and c["device"] == device:
            return c
    failures.append("no cell for %s on %s in %s" % (model_name, device, json.dumps(doc)[:500]))
    return None


EDGE, ALL = "vnpu:edge-npu", "vnpu:fp32-all"

if CASE == "verdicts":
    # fits, falls back (two Erf nodes: one group of 2), and the table
    fit = model("fit", ["Relu", "Sigmoid"])
    erf = model("erf", ["Relu", "Erf", "Relu", "Erf", "Relu"])
    so, se = run([fit, erf, "--devices", EDGE + "," + ALL + ",cpu", "--granularity", "op"], 0)
    check("audit: 2 models x 2 devices" in so, "header: %r" % so[:300])
    lines = [l for l in so.splitlines() if l.startswith(("fit.onnx ", "erf.onnx ")) and " on " not in l]
    check(len(lines) == 4, "4 table rows, got %r" % lines)
    check(any(l.startswith("fit.onnx") and EDGE in l and " fits " in l and "2/2" in l for l in lines),
          "fit on edge-npu fits: %r" % lines)
    check(any(l.startswith("erf.onnx") and EDGE in l and "falls back" in l and "3/5" in l
              and "2 OP_UNSUPPORTED" in l for l in lines), "erf on edge-npu falls back: %r" % lines)
    check(any(l.startswith("erf.onnx") and ALL in l and " fits " in l for l in lines),
          "erf on fp32-all fits: %r" % lines)
    check("erf.onnx on vnpu:edge-npu: falls back: 3 of 5 nodes on vnpu:edge-npu, 2 elsewhere" in so, so)
    check("2  Erf                  OP_UNSUPPORTED     e.g. erf_1: edge-npu has no Erf kernel" in so, so)
    check("hint: vnpu:edge-npu has no Erf" in so and "--pin Erf=cpu" in so, so)
    # the two Erf nodes split the NPU's chain: 5 partitions, 3 on the NPU
    check("partitions: 5 (3 on vnpu:edge-npu, 2 on cpu)" in so, so)
    check("top blockers on vnpu:edge-npu (all models):" in so, so)
    check("fit.onnx on" not in so, "a fitting cell has no detail section: %r" % so)
    # subgraph granularity moves the Relu islands between the Erfs to cpu: nothing left on the NPU
    so, se = run([erf, "--devices", EDGE], 0)
    check("erf.onnx on vnpu:edge-npu: blocked: no node of the model runs on the device" in so, so)
    check("3  Relu                 GRANULARITY" in so and "--granularity op or auto keeps it" in so, so)
elif CASE == "json":
    fit = model("fit", ["Relu", "Sigmoid"])
    erf = model("erf", ["Relu", "Erf", "Relu", "Erf", "Relu"])
    so, se = run([fit, erf, "--devices", EDGE + "," + ALL, "--json", "--granularity", "op"], 0)
    doc = json.loads(so)
    check(doc["devices"] == [EDGE, ALL], doc["devices"])
    check(len(doc["cells"]) == 4, "4 cells")
    c = cell(doc, "erf.onnx", EDGE)
    if c:
        check(c["verdict"] == "falls_back" and c["nodes"] == 5 and c["on_device"] == 3 and c["fallback_nodes"] == 2,
              c)
        check(c["by_reason"] == {"OP_UNSUPPORTED": 2}, c["by_reason"])
        g = c["groups"]
        check(len(g) == 1 and g[0]["op"] == "Erf" and g[0]["count"] == 2 and g[0]["first_node"] == "erf_1"
              and "--pin Erf=cpu" in g[0]["hint"], g)
        check([p["device"] for p in c["partitions"]] == [EDGE, "cpu", EDGE, "cpu", EDGE], c["partitions"])
        e = c["estimated_ms"]
        check(e["modeled"] is True and e["total"] > 0 and e["all_cpu"] > 0 and e["fallback_nodes"] > 0, e)
        check(c["policy"]["violations"] == 0, c["policy"])
    c = cell(doc, "fit.onnx", EDGE)
    if c:
        check(c["verdict"] == "fits" and c["groups"] == [] and c["by_reason"] == {} and len(c["partitions"]) == 1, c)
    tb = doc["top_blockers"]
    check(tb[ALL] == [] and len(tb[EDGE]) == 1 and tb[EDGE][0]["count"] == 2, tb)
elif CASE == "deny":
    # --fallback deny: exit 3 and every offending node listed; --pin keeps it quiet
    erf = model("erf", ["Relu", "Erf", "Relu", "Erf", "Relu"])
    so, se = run([erf, "--devices", EDGE, "--fallback", "deny", "--granularity", "op"], 3)
    check("1 of 1 plans violate the fallback policy" in se, se)
    check("erf_1 (OP_UNSUPPORTED)" in so and "erf_3 (OP_UNSUPPORTED)" in so, so)
    so, se = run([erf, "--devices", EDGE, "--fallback", "deny", "--json", "--granularity", "op"], 3)
    c = cell(json.loads(so), "erf.onnx", EDGE)
    if c:
        check(c["policy"]["violations"] == 2 and len(c["policy"]["offending"]) == 2, c["policy"])
    so, se = run([erf, "--devices", EDGE, "--fallback", "deny", "--pin", "Erf=cpu", "--granularity", "op"], 0)
    check("erf.onnx" in so and " fits " in so, "pinned nodes are no fallback: %r" % so)
elif CASE == "shapes":
    # a dynamic dimension on a static-shape profile: SHAPE, a --shape hint; --shape fixes it
    dyn = model("dyn", ["Relu", "Sigmoid"], dims=("N", 8))
    so, se = run([dyn, "--devices", EDGE], 0)
    check("blocked" in so and "SHAPE_UNSUPPORTED" in so, so)
    check("hint: dynamic dimensions: give --shape for X [N, 8]" in so, so)
    so, se = run([dyn, "--devices", EDGE, "--shape", "X=2x8", "--json"], 0)
    c = cell(json.loads(so), "dyn.onnx", EDGE)
    if c:
        check(c["verdict"] == "fits", c)
    so, se = run([dyn, "--devices", EDGE, "--shape", "Z=2x8"], 1)
    check("'Z', which is an input of none of the models" in se, se)
    # scoped to one model: the other keeps its dynamic dimension
    dyn2 = model("dyn2", ["Relu", "Sigmoid"], dims=("N", 8))
    so, se = run([dyn, dyn2, "--devices", EDGE, "--shape", "dyn2.onnx:X=3x8", "--json"], 0)
    doc = json.loads(so)
    c, c2 = cell(doc, "/dyn.onnx", EDGE), cell(doc, "dyn2.onnx", EDGE)
    if c and c2:
        check(c["verdict"] == "blocked" and c2["verdict"] == "fits", (c["verdict"], c2["verdict"]))
    so, se = run([dyn, dyn2, "--devices", EDGE, "--shape", "dyn2.onnx:X=3x8", "--shape", "dyn2.onnx:X=4x8"], 1)
    check("input 'X' is given twice with --shape" in se, se)
elif CASE == "rescue":
    # the rescue pass's attempts per cell: Softplus rewritten for qnn-htp
    # (Relu, Exp, Log, ... all listed there), refused on edge-npu
    hs = model("hs", ["Relu", "HardSigmoid", "Relu", "Softplus", "Relu"])
    so, _ = run([hs, "--devices", "vnpu:qnn-htp,vnpu:edge-npu"], 0)
    check("  rescued: 1 of 1 node rewritten for the device (--rescue safe): softplus 1; 7 nodes in their place\n" in so,
          "qnn-htp: the rescued line: %s" % so)
    check("  rescued: 0 of 1 node rewritten for the device (--rescue safe); 1 refused (plan --nodes says why)\n" in so,
          "edge-npu: the refused rescue: %s" % so)
    doc = json.loads(run([hs, "--devices", "vnpu:qnn-htp,vnpu:edge-npu", "--json"], 0)[0])
    c = cell(doc, "hs.onnx", "vnpu:qnn-htp")
    check(c and c["rescued"] == {"tried": 1, "kept": 1, "nodes": 7, "by_rule": {"softplus": 1}},
          "qnn-htp json: %s" % (c or {}).get("rescued"))
    c = cell(doc, "hs.onnx", "vnpu:edge-npu")
    check(c and c["rescued"] == {"tried": 1, "kept": 0, "nodes": 0, "by_rule": {}},
          "edge-npu json: %s" % (c or {}).get("rescued"))
    so, _ = run([hs, "--devices", "vnpu:qnn-htp", "--rescue", "off"], 0)
    check("rescued:" not in so, "--rescue off: nothing tried: %s" % so)
elif CASE == "modelset":
    # issue 17's "audit works on the whole model set": every model of the
    # cache (the set make test exports) on the four vendor profiles
    import glob
    import os
    cache = os.environ.get("TANDEM_CACHE", "")
    models = sorted(glob.glob(os.path.join(cache, "models", "*.onnx")))
    if len(models) < 10:
        print("the cache has %d models (make data)" % len(models))
        sys.exit(77)
    devs = ["vnpu:rk3588", "vnpu:qnn-htp", "vnpu:coreml-ane", "vnpu:intel-npu"]
    shapes = []
    for name, shape in (("ppocr_det", "1x3x640x640"), ("ppocr_det_qdq", "1x3x640x640"), ("ppocr_det_op19", "1x3x640x640"),
                        ("ppocr_rec", "1x3x48x320"), ("ppocr_cls", "1x3x48x192")):
        if os.path.join(cache, "models", name + ".onnx") in models:
            shapes += ["--shape", "%s.onnx:x=%s" % (name, shape)]
    doc = json.loads(run(models + ["--devices", ",".join(devs), "--json"] + shapes, 0)[0] or "{}")
    cells = doc.get("cells", [])
    check(len(cells) == len(models) * len(devs), "a cell per model and device: %d of %d" % (len(cells), len(models) * 4))
    for c in cells:
        what = "%s on %s" % (os.path.basename(c["model"]), c["device"])
        check(c["verdict"] in ("fits", "falls_back", "blocked"), "%s: a verdict (%s)" % (what, c["verdict"]))
        if c["verdict"] == "blocked":
            check(bool(c.get("error")), "%s: blocked says why" % what)
            continue
        check(sum(c["by_reason"].values()) == c["fallback_nodes"] and c["on_device"] + c["fallback_nodes"] <= c["nodes"],
              "%s: the fallbacks counted by reason (%s, %d)" % (what, c["by_reason"], c["fallback_nodes"]))
        check(sum(g["count"] for g in c["groups"]) <= c["fallback_nodes"] and
              all(g["detail"] and g["reason"] for g in c["groups"]), "%s: each group with its sentence" % what)
        check((c["verdict"] == "fits") == (c["fallback_nodes"] == 0), "%s: fits exactly when nothing falls back" % what)
    check(sorted(doc.get("top_blockers", {}).keys()) == sorted(devs), "top blockers per device")
    so, _ = run(models + ["--devices", ",".join(devs)] + shapes, 0)
    check(so.count("\n") > len(cells) and "top blockers on vnpu:rk3588" in so, "the text form: the table and blockers")
    verdicts = {}
    for c in cells:
        verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
    print("audit of %d models x %d profiles: %s" % (len(models), len(devs), verdicts))
elif CASE == "errors":
    fit = model("fit", ["Relu"])
    so, se = run([fit], 1)
    check("--devices LIST is required" in se, se)
    so, se = run([fit, "--devices", "cpu"], 1)
    check("names no device but cpu" in se, se)
    so, se = run([fit, "--devices", EDGE, "--frobnicate"], 1)
    check("unknown option '--frobnicate'" in se, se)
    so, se = run(["--devices", EDGE], 1)
    check("no MODEL given" in se, se)
    # a missing model: exit 5, the other model is still audited
    so, se = run(["missing.onnx", fit, "--devices", EDGE, "--json"], 5)
    doc = json.loads(so)
    c = cell(doc, "missing.onnx", EDGE)
    if c:
        check(c["verdict"] == "blocked" and "missing.onnx" in c["error"], c)
    c = cell(doc, "fit.onnx", EDGE)
    if c:
        check(c["verdict"] == "fits", c)
    # an unknown profile: a device error (4) or I/O (5) naming it, the cell blocked
    so, se = run([fit, "--devices", "vnpu:no-such-profile", "--json"], 4)
    c = cell(json.loads(so), "fit.onnx", "vnpu:no-such-profile")
    if c:
        check(c["verdict"] == "blocked" and "no-such-profile" in c["error"], c)
    so, se = run(["--help"], 0)
    check("usage: tandem audit MODEL..." in so, so)
else:
    print("unknown case " + CASE)
    sys.exit(1)

for f in failures:
    print("FAIL: " + str(f))
print("%s: %d checks, %d failures" % (CASE, counted[0], len(failures)))
sys.exit(1 if failures else 0)
