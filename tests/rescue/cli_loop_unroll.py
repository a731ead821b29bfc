#!/usr/bin/env python3
"""Loop unrolling for a device that asks for it (ctest rescue.loop_unroll; issue 18).

  cli_loop_unroll.py TANDEM NPU_PROFILE UNROLL_PROFILE WORKDIR

A model written here: Loop with trip count 4 (an initializer), no
condition, x = x * 2 + 1 on a 2x3 float (the 2 an outer constant, the 1 a
Constant in the body), then Relu. On NPU_PROFILE (no Loop, no
unroll_loops) the Loop stays on cpu; on UNROLL_PROFILE (unroll_loops 8) it
is a "loop-unroll" attempt that became 4 x 2 nodes and an Identity, all on
the device; outputs equal cpu's and onnxruntime's. The same Loop with its
trip count a graph input is left alone with the sentence, and unrolled
with --bind m=4. With a scan output (x * 2 of each iteration) it becomes
4 Unsqueeze and a Concat too, outputs equal onnxruntime's.
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from clitest import Cli
from onnx import TensorProto, helper, numpy_helper, save

TANDEM, NPU, UNROLL, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
cli = Cli(TANDEM)
check, tandem = cli.check, cli.tandem


def model(path, dynamic, scan=False):
    f = TensorProto.FLOAT
    body = helper.make_graph([
        helper.make_node("Constant", [], ["one"], name="one", value=numpy_helper.from_array(np.float32(1), "one")),
        helper.make_node("Mul", ["x_in", "two"], ["y"], name="mul"),
        helper.make_node("Add", ["y", "one"], ["x_out"], name="add"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond"),
    ], "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("x_in", f, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", f, [2, 3])] +
        ([helper.make_tensor_value_info("y", f, [2, 3])] if scan else []))
    inits = [numpy_helper.from_array(np.float32(2), "two")]
    inputs = [helper.make_tensor_value_info("x", f, [2, 3])]
    if dynamic:
        inputs.append(helper.make_tensor_value_info("m", TensorProto.INT64, []))
    else:
        inits.append(numpy_helper.from_array(np.int64(4), "m"))
    g = helper.make_graph([helper.make_node("Loop", ["m", "", "x"], ["xs"] + (["ys"] if scan else []), name="loop",
                                            body=body),
                           helper.make_node("Relu", ["xs"], ["out"], name="relu")], "loop4", inputs,
                          [helper.make_tensor_value_info("out", f, [2, 3])] +
                          ([helper.make_tensor_value_info("ys", f, [4, 2, 3])] if scan else []), inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)


def attempts(led):
    return [a for a in led.get("rescue", {}).get("attempts", []) if a["rule"] == "loop-unroll"]


x = np.linspace(-3, 2, 6, dtype=np.float32).reshape(2, 3)
np.save(os.path.join(WORK, "x.npy"), x)
np.save(os.path.join(WORK, "m.npy"), np.int64(4))
xin = ["--input", "x=" + os.path.join(WORK, "x.npy")]
static, dyn = os.path.join(WORK, "loop4.onnx"), os.path.join(WORK, "loop_dyn.onnx")
model(static, False)
model(dyn, True)
want = ort.InferenceSession(static, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
expect = x.copy()
for _ in range(4):
    expect = expect * 2 + 1
check(np.array_equal(want, np.maximum(expect, 0)), "onnxruntime computes relu(x*2+1 four times)")

before = json.loads(tandem(["plan", static, "--devices", "vnpu:%s,cpu" % NPU, "--json"]).stdout or "{}")
after = json.loads(tandem(["plan", static, "--devices", "vnpu:%s,cpu" % UNROLL, "--json"]).stdout or "{}")
dev_b = [n for n in before.get("nodes", []) if n["device"] != "cpu"]
dev_a = [n for n in after.get("nodes", []) if n["device"] != "cpu"]
print("nodes on the device: %d of %d without unroll_loops, %d of %d with" % (
    len(dev_b), len(before.get("nodes", [])), len(dev_a), len(after.get("nodes", []))))
check(any(n["op"] == "Loop" and n["device"] == "cpu" for n in before.get("nodes", [])) and not attempts(before),
      "without unroll_loops: the Loop on cpu, no loop-unroll attempt")
ent = attempts(after)
became = ent[0].get("became", []) if ent else []
check(len(ent) == 1 and ent[0]["kept"] and ent[0]["node"] == "loop" and ent[0]["device"] == "vnpu:rescue-unroll",
      "with unroll_loops 8: one kept loop-unroll attempt")
check(len(became) == 9 and sorted(b["op"] for b in became) == ["Add"] * 4 + ["Identity"] + ["Mul"] * 4 and
      all(b["name"].startswith("loop/unroll/") for b in became),
      "the Loop became 9 nodes (%s)" % " ".join(b["name"] for b in became))
check(len(dev_a) == len(after.get("nodes", [])) == 10 and all(b["reason"] == "RESCUED" for b in became),
      "every node on the device, the unrolled ones RESCUED")
text = tandem(["plan", static, "--devices", "vnpu:%s,cpu" % UNROLL, "--nodes"]).stdout
check("RESCUED loop-unroll (4 iterations)" in text, "plan shows the unrolling")

for name, dev in (("cpu", "cpu"), ("dev", "vnpu:%s,cpu" % UNROLL)):
    d = os.path.join(WORK, name)
    tandem(["run", static, "--devices", dev, "--output-dir", d, "--overwrite"] + xin)
    got = np.load(os.path.join(d, "out.npy")) if os.path.exists(os.path.join(d, "out.npy")) else None
    check(got is not None and np.array_equal(got, want), "%s: outputs equal onnxruntime's" % name)

led = json.loads(tandem(["plan", dyn, "--devices", "vnpu:%s,cpu" % UNROLL, "--json"]).stdout or "{}")
ent = attempts(led)
check(len(ent) == 1 and not ent[0]["kept"] and "trip count M is not a constant" in ent[0].get("why", ""),
      "a dynamic trip count is left alone: %s" % (ent[0].get("why") if ent else None))
check(any(n["op"] == "Loop" for n in led.get("nodes", [])), "the dynamic Loop stays")
led = json.loads(tandem(["plan", dyn, "--devices", "vnpu:%s,cpu" % UNROLL, "--json", "--bind",
                         "m=" + os.path.join(WORK, "m.npy")]).stdout or "{}")
ent = attempts(led)
check(len(ent) == 1 and ent[0]["kept"] and len(ent[0].get("became", [])) == 9, "--bind m=4: unrolled")
d = os.path.join(WORK, "bound")
tandem(["run", dyn, "--devices", "vnpu:%s,cpu" % UNROLL, "--bind", "m=" + os.path.join(WORK, "m.npy"),
        "--output-dir", d, "--overwrite", "--input", "m=" + os.path.join(WORK, "m.npy")] + xin)
got = np.load(os.path.join(d, "out.npy")) if os.path.exists(os.path.join(d, "out.npy")) else None
check(got is not None and np.array_equal(got, want), "--bind m=4: outputs equal onnxruntime's")

# a scan output: each iteration's x * 2 stacked along a new axis 0
scanm = os.path.join(WORK, "loop_scan.onnx")
model(scanm, False, scan=True)
want_s = ort.InferenceSession(scanm, providers=["CPUExecutionProvider"]).run(None, {"x": x})
led = json.loads(tandem(["plan", scanm, "--devices", "vnpu:%s,cpu" % UNROLL, "--json"]).stdout or "{}")
ent = attempts(led)
became = ent[0].get("became", []) if ent else []
check(len(ent) == 1 and ent[0]["kept"] and sum(b["op"] == "Unsqueeze" for b in became) == 4 and
      sum(b["op"] == "Concat" for b in became) == 1 and all(n["device"] != "cpu" for n in led.get("nodes", [])),
      "scan output: unrolled with 4 Unsqueeze and a Concat, all %d nodes on the device" % len(led.get("nodes", [])))
d = os.path.join(WORK, "scan")
tandem(["run", scanm, "--devices", "vnpu:%s,cpu" % UNROLL, "--output-dir", d, "--overwrite"] + xin)
for k, w in zip(("out", "ys"), want_s):
    p = os.path.join(d, k + ".npy")
    got = np.load(p) if os.path.exists(p) else None
    check(got is not None and got.shape == w.shape and np.array_equal(got, w),
          "scan output: %s equals onnxruntime's %s" % (k, list(w.shape)))

# a computed condition: cond = i < 2 of M = 6 (its iteration number against a constant), a scan output of x * 2:
# folding makes each copy's condition a constant, the copies stop after iteration 2 (3 run, as onnxruntime's)
def cond_model(path, on_x, scan_len=None):
    f = TensorProto.FLOAT
    cond = ([helper.make_node("ReduceSum", ["x_out"], ["s"], name="sum", keepdims=0),
             helper.make_node("Less", ["s", "limit"], ["cond_out"], name="less")] if on_x else
            [helper.make_node("Less", ["i", "two_i"], ["cond_out"], name="less")])
    body = helper.make_graph([
        helper.make_node("Mul", ["x_in", "two"], ["y"], name="mul"),
        helper.make_node("Add", ["y", "one"], ["x_out"], name="add")] + cond,
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("x_in", f, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", f, [2, 3]), helper.make_tensor_value_info("y", f, [2, 3])])
    inits = [numpy_helper.from_array(np.float32(2), "two"), numpy_helper.from_array(np.float32(1), "one"),
             numpy_helper.from_array(np.int64(2), "two_i"), numpy_helper.from_array(np.float32(100), "limit"),
             numpy_helper.from_array(np.int64(6), "m"), numpy_helper.from_array(np.bool_(True), "c0")]
    g = helper.make_graph([helper.make_node("Loop", ["m", "c0", "x"], ["xs", "ys"], name="loop", body=body),
                           helper.make_node("Relu", ["xs"], ["out"], name="relu")], "loop_cond",
                          [helper.make_tensor_value_info("x", f, [2, 3])],
                          [helper.make_tensor_value_info("out", f, [2, 3]),
                           helper.make_tensor_value_info("ys", f, [scan_len, 2, 3])], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)


condm, condx = os.path.join(WORK, "loop_cond.onnx"), os.path.join(WORK, "loop_cond_x.onnx")
cond_model(condm, False)
cond_model(condx, True)
want_c = ort.InferenceSession(condm, providers=["CPUExecutionProvider"]).run(None, {"x": x})
check(want_c[1].shape == (3, 2, 3), "onnxruntime: i < 2 of 6 runs 3 iterations (ys %s)" % list(want_c[1].shape))
led = json.loads(tandem(["plan", condm, "--devices", "vnpu:%s,cpu" % UNROLL, "--json"]).stdout or "{}")
ent = attempts(led)
became = ent[0].get("became", []) if ent else []
ops = sorted(b["op"] for b in became)
check(len(ent) == 1 and ent[0]["kept"] and ops.count("Mul") == 3 and ops.count("Add") == 3 and
      ops.count("Unsqueeze") == 3 and ops.count("Concat") == 1 and "Loop" not in [n["op"] for n in led.get("nodes", [])]
,
      "computed condition i < 2: unrolled to 3 of 6 iterations (%s)" % " ".join(ops))
text = tandem(["plan", condm, "--devices", "vnpu:%s,cpu" % UNROLL, "--nodes"]).stdout
check("RESCUED loop-unroll (3 of 6 iterations, its condition false after iteration 2)" in text,
      "plan shows where the copies stop")
check(all(n["device"] != "cpu" for n in led.get("nodes", [])),
      "computed condition: all %d nodes on the device" % len(led.get("nodes", [])))
for name, dev in (("cond_cpu", "cpu"), ("cond_dev", "vnpu:%s,cpu" % UNROLL)):
    d = os.path.join(WORK, name)
    tandem(["run", condm, "--devices", dev, "--output-dir", d, "--overwrite"] + xin)
    for k, w in zip(("out", "ys"), want_c):
        p = os.path.join(d, k + ".npy")
        got = np.load(p) if os.path.exists(p) else None
        check(got is not None and got.shape == w.shape and np.array_equal(got, w),
              "computed condition on %s: %s equals onnxruntime's %s" % (dev, k, list(w.shape)))
# the scan output declared [3, 2, 3]: the probe (6 copies beside the Loop) does not contradict it
decl = os.path.join(WORK, "loop_cond_decl.onnx")
cond_model(decl, False, 3)
text = tandem(["plan", decl, "--devices", "vnpu:%s,cpu" % UNROLL, "--nodes"]).stdout
check("RESCUED loop-unroll (3 of 6 iterations" in text, "a scan output declared with 3 rows: unrolled to 3")
d = os.path.join(WORK, "cond_decl")
tandem(["run", decl, "--devices", "vnpu:%s,cpu" % UNROLL, "--output-dir", d, "--overwrite"] + xin)
p = os.path.join(d, "ys.npy")
got = np.load(p) if os.path.exists(p) else None
check(got is not None and np.array_equal(got, want_c[1]), "declared [3, 2, 3]: ys equals onnxruntime's")
led = json.loads(tandem(["plan", condx, "--devices", "vnpu:%s,cpu" % UNROLL, "--json"]).stdout or "{}")
ent = attempts(led)
check(len(ent) == 1 and not ent[0]["kept"] and "not a constant at plan time in iteration 0" in ent[0].get("why", "")
      and any(n["op"] == "Loop" for n in led.get("nodes", [])),
      "a condition on the carried value is left alone: %s" % (ent[0].get("why") if ent else None))
d = os.path.join(WORK, "cond_x")
tandem(["run", condx, "--devices", "vnpu:%s,cpu" % UNROLL, "--output-dir", d, "--overwrite"] + xin)
want_x = ort.InferenceSession(condx, providers=["CPUExecutionProvider"]).run(None, {"x": x})
p = os.path.join(d, "ys.npy")
got = np.load(p) if os.path.exists(p) else None
check(got is not None and got.shape == want_x[1].shape and np.array_equal(got, want_x[1]),
      "the Loop left alone equals onnxruntime's (%s iterations)" % (list(want_x[1].shape)[:1]))

# a bad "unroll_loops" is refused with its path
prof = json.load(open(UNROLL))
prof["unroll_loops"] = -1
bad = os.path.join(WORK, "bad-unroll.json")
json.dump(prof, open(bad, "w"))
r = tandem(["plan", static, "--devices", "vnpu:%s,cpu" % bad], 4)
check("unroll_loops must be an integer from 0 to 4096, got -1" in r.stderr, "unroll_loops -1 refused: %s" % r.stderr.strip())

cli.finish()
