#!/usr/bin/env python3
"""ONNX model-local functions inlined at load (ctest rescue.fn_inline; issue 18).

  cli_fn_inline.py TANDEM CACHE NPU_PROFILE WORKDIR

Models written here with onnx.helper.make_function:
  two_ops     custom.AddMul(a, b) = (a + b) * a, called twice;
  attr_ref    custom.Scale(x) = x * alpha (a Constant whose value_float
              refers to the attribute alpha; default 0.5), called with
              alpha=3 and without (the default): the Constant is folded, one
              Mul each;
  nested      custom.Outer(x, y) = Relu(custom.AddMul(x, y));
  in_if       AddMul called inside the then branch of an If with a constant
              condition (expanded in the branch, not listed; the If is
              inlined at plan time, its nodes on the device);
  pass_through custom.Pass(a, b) = (a, a + b): its first output is its
              input (an Identity); onnxruntime refuses this model ("failed
              validating the check: !(it.GetName().empty())"), so numpy
              gives its answer;
  recursive   custom.Rec calls itself: refused at load with one sentence.
Each (but the last) runs on cpu and on vnpu:NPU,cpu with outputs equal to
onnxruntime's (max |diff| <= 1e-6 x max |ort|), every node on the device,
and one "function-inline" rescue attempt per call (the nodes it became,
named CALL/fn/NODE).
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from clitest import Cli, outputs
from onnx import AttributeProto, TensorProto, helper, save

TANDEM, CACHE, NPU, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
cli = Cli(TANDEM)
check, tandem = cli.check, cli.tandem
OPS = [helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)]


def vi(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])


ADDMUL = helper.make_function("custom", "AddMul", ["a", "b"], ["c"], [
    helper.make_node("Add", ["a", "b"], ["t"], name="add"),
    helper.make_node("Mul", ["t", "a"], ["c"], name="mul")], [helper.make_opsetid("", 17)])
alpha_ref = helper.make_attribute_ref("value_float", AttributeProto.FLOAT)
alpha_ref.ref_attr_name = "alpha"
SCALE = helper.make_function("custom", "Scale", ["x"], ["y"], [
    helper.make_node("Constant", [], ["k"], name="k"),
    helper.make_node("Mul", ["x", "k"], ["y"], name="mul")], [helper.make_opsetid("", 17)],
    attribute_protos=[helper.make_attribute("alpha", 0.5)])
SCALE.node[0].attribute.append(alpha_ref)
OUTER = helper.make_function("custom", "Outer", ["x", "y"], ["z"], [
    helper.make_node("AddMul", ["x", "y"], ["u"], name="inner", domain="custom"),
    helper.make_node("Relu", ["u"], ["z"], name="relu")], [helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])
PASS = helper.make_function("custom", "Pass", ["a", "b"], ["a", "s"], [
    helper.make_node("Add", ["a", "b"], ["s"], name="add")], [helper.make_opsetid("", 17)])
REC = helper.make_function("custom", "Rec", ["x"], ["y"], [
    helper.make_node("Rec", ["x"], ["y"], name="again", domain="custom")],
    [helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])

THEN = helper.make_graph([helper.make_node("AddMul", ["x", "y"], ["r"], name="in_branch", domain="custom")], "then",
                         [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3])])
ELSE = helper.make_graph([helper.make_node("Sub", ["x", "y"], ["q"], name="sub")], "else", [],
                         [helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, 3])])
CASES = {
    "two_ops": ([helper.make_node("AddMul", ["x", "y"], ["m"], name="call1", domain="custom"),
                 helper.make_node("AddMul", ["m", "x"], ["out"], name="call2", domain="custom")], [ADDMUL],
                {"call1": 2, "call2": 2}),
    "attr_ref": ([helper.make_node("Scale", ["x"], ["s"], name="scale3", domain="custom", alpha=3.0),
                  helper.make_node("Scale", ["y"], ["d"], name="scale_default", domain="custom"),
                  helper.make_node("Add", ["s", "d"], ["out"], name="sum")], [SCALE],
                 {"scale3": 1, "scale_default": 1}),
    "nested": ([helper.make_node("Outer", ["x", "y"], ["out"], name="outer", domain="custom")], [OUTER, ADDMUL],
               {"outer": 1, "outer/fn/inner": 2}),
    "in_if": ([helper.make_node("Constant", [], ["c"], name="cond",
                                value=helper.make_tensor("cv", TensorProto.BOOL, [], [True])),
               helper.make_node("If", ["c"], ["out"], name="branch", then_branch=THEN, else_branch=ELSE)], [ADDMUL], {}),
    "pass_through": ([helper.make_node("Pass", ["x", "y"], ["p", "s"], name="pt", domain="custom"),
                      helper.make_node("Mul", ["p", "s"], ["out"], name="mul")], [PASS], {"pt": 2}),
}

rng = np.random.default_rng(7)
feeds = {"x": rng.uniform(-2, 2, (2, 3)).astype(np.float32), "y": rng.uniform(-2, 2, (2, 3)).astype(np.float32)}
ins = []
for k, v in feeds.items():
    np.save(os.path.join(WORK, k + ".npy"), v)
    ins += ["--input", "%s=%s" % (k, os.path.join(WORK, k + ".npy"))]

for name, (nodes, funcs, calls) in CASES.items():
    path = os.path.join(WORK, name + ".onnx")
    g = helper.make_graph(nodes, name, [vi("x"), vi("y")], [vi("out")])
    save(helper.make_model(g, opset_imports=OPS, functions=funcs, ir_version=10), path)
    if name == "pass_through":  # onnxruntime 1.31.1 refuses a function output that is its input
        want = feeds["x"].astype(np.float64) * (feeds["x"] + feeds["y"]).astype(np.float32)
    else:
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for dev in ("cpu", "vnpu:%s,cpu" % NPU):
        d = os.path.join(WORK, name + "_" + dev.split(":")[0])
        tandem(["run", path, "--devices", dev, "--output-dir", d, "--overwrite"] + ins)
        got = outputs(d).get("out") if os.path.isdir(d) else None
        diff = float(np.abs(got.astype(np.float64) - want).max()) if got is not None and got.shape == want.shape else -1
        check(0 <= diff <= 1e-6 * max(1.0, float(np.abs(want).max())),
              "%s on %s against onnxruntime: max |diff| %.3g" % (name, dev, diff))
    led = json.loads(tandem(["plan", path, "--devices", "vnpu:%s,cpu" % NPU, "--json"]).stdout or "{}")
    nodes_l = led.get("nodes", [])
    check(nodes_l and all(n["device"] != "cpu" for n in nodes_l),
          "%s: all %d nodes on the device" % (name, len(nodes_l)))
    ent = {a["node"]: a for a in led.get("rescue", {}).get("attempts", []) if a["rule"] == "function-inline"}
    check(sorted(ent) == sorted(calls), "%s: function-inline attempts %s" % (name, sorted(ent)))
    for call, n in calls.items():
        became = ent.get(call, {}).get("became", [])
        check(len(became) == n and all(b["name"].startswith(call + "/fn/") for b in became),
              "%s: %s became %d nodes (%s)" % (name, call, len(became), " ".join(b["name"] for b in became)))
        check(all(b["reason"] == "RESCUED" for b in became if b["device"] != "cpu"),
              "%s: %s's nodes on the device are RESCUED" % (name, call))

path = os.path.join(WORK, "recursive.onnx")
g = helper.make_graph([helper.make_node("Rec", ["x"], ["out"], name="rec", domain="custom")], "recursive",
                      [vi("x")], [vi("out")])
save(helper.make_model(g, opset_imports=OPS, functions=[REC], ir_version=10), path)
r = tandem(["plan", path, "--devices", "cpu"], 2)
check("function 'Rec' calls itself" in r.stderr and r.stderr.strip().count("\n") == 0,
      "a recursive function is refused with one sentence: %s" % r.stderr.strip())

cli.finish()
