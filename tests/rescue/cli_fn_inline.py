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
Functions whose body holds a subgraph (each on three inputs, sum(x) of
either sign, on cpu and on vnpu:NPU,cpu, equal to onnxruntime's):
  fn_if       custom.Branchy(a, b): t = a * b, If(sum(a) > 0) then t + b
              else a - t, called twice (the second on the first's output);
  fn_loop     custom.Repeat(a): a Loop of 3 with v = v * a + a (a read from
              the Loop body); on rescue-unroll.json the Loop is unrolled,
              every node on the device;
  fn_if_const custom.Pick(a, b): If(true) then a * b else a + b: inlined at
              plan time after the function, one Mul on the device.
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

def against_ort(path, d, dev, args, want, label):
    """Runs path on dev into folder d; its "out" must equal onnxruntime's want."""
    tandem(["run", path, "--devices", dev, "--output-dir", d, "--overwrite"] + args)
    got = outputs(d).get("out") if os.path.isdir(d) else None
    diff = float(np.abs(got.astype(np.float64) - want).max()) if got is not None and got.shape == want.shape else -1
    check(0 <= diff <= 1e-6 * max(1.0, float(np.abs(want).max())),
          "%s on %s against onnxruntime: max |diff| %.3g" % (label, dev, diff))


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
        against_ort(path, os.path.join(WORK, name + "_" + dev.split(":")[0]), dev, ins, want, name)
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

# functions whose body holds a subgraph: every name in it renamed for the call, its references to the
# body's values (formal inputs, computed values) the call's
F17 = [helper.make_opsetid("", 17)]


def tvi(name, shape=(2, 3)):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def const(name, value, dt=TensorProto.FLOAT):
    return helper.make_node("Constant", [], [name], name=name, value=helper.make_tensor(name + "_v", dt, [], [value]))


# Branchy(a, b): t = a * b; If(sum(a) > 0) then t + b else a - t (both branches read the body's t, a, b)
BRANCHY = helper.make_function("custom", "Branchy", ["a", "b"], ["r"], [
    helper.make_node("Mul", ["a", "b"], ["t"], name="mul"),
    helper.make_node("ReduceSum", ["a"], ["s"], name="sum", keepdims=0),
    const("zero", 0.0),
    helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
    helper.make_node("If", ["c"], ["r"], name="branch",
                     then_branch=helper.make_graph([helper.make_node("Add", ["t", "b"], ["u"], name="add")], "then", [],
                                                   [tvi("u")]),
                     else_branch=helper.make_graph([helper.make_node("Sub", ["a", "t"], ["u"], name="sub")], "else", [],
                                                   [tvi("u")]))], F17)
# Repeat(a): a Loop of 3 (a Constant of the body) with v = v * a + a, a read from the Loop body
REPEAT = helper.make_function("custom", "Repeat", ["a"], ["v"], [
    const("three", 3, TensorProto.INT64),
    helper.make_node("Loop", ["three", "", "a"], ["v"], name="loop", body=helper.make_graph([
        helper.make_node("Mul", ["v_in", "a"], ["p"], name="mul"),
        helper.make_node("Add", ["p", "a"], ["v_out"], name="add"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), tvi("v_in")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), tvi("v_out")]))], F17)
# Pick(a, b): If(true) then a * b else a + b: the If is inlined at plan time, its nodes on the device
PICK = helper.make_function("custom", "Pick", ["a", "b"], ["r"], [
    const("yes", True, TensorProto.BOOL),
    helper.make_node("If", ["yes"], ["r"], name="branch",
                     then_branch=helper.make_graph([helper.make_node("Mul", ["a", "b"], ["u"], name="mul")], "then", [],
                                                   [tvi("u")]),
                     else_branch=helper.make_graph([helper.make_node("Add", ["a", "b"], ["u"], name="add")], "else", [],
                                                   [tvi("u")]))], F17)
SUB_CASES = {
    # two calls: their If branches both define u, renamed per call; the second reads the first's output
    "fn_if": ([helper.make_node("Branchy", ["x", "y"], ["m"], name="call1", domain="custom"),
               helper.make_node("Branchy", ["m", "x"], ["out"], name="call2", domain="custom")], [BRANCHY], False),
    "fn_loop": ([helper.make_node("Repeat", ["x"], ["m"], name="rep", domain="custom"),
                 helper.make_node("Add", ["m", "y"], ["out"], name="add")], [REPEAT], False),
    "fn_if_const": ([helper.make_node("Pick", ["x", "y"], ["out"], name="pick", domain="custom")], [PICK], True),
}
for name, (nodes, funcs, on_device) in SUB_CASES.items():
    path = os.path.join(WORK, name + ".onnx")
    g = helper.make_graph(nodes, name, [vi("x"), vi("y")], [vi("out")])
    save(helper.make_model(g, opset_imports=OPS, functions=funcs, ir_version=10), path)
    for fx, fy in ((feeds["x"], feeds["y"]), (-np.abs(feeds["x"]), feeds["y"]), (np.abs(feeds["x"]), -feeds["y"])):
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": fx, "y": fy})[0]
        args = []
        for k, v in (("x", fx), ("y", fy)):
            np.save(os.path.join(WORK, "%s_%s.npy" % (name, k)), v)
            args += ["--input", "%s=%s" % (k, os.path.join(WORK, "%s_%s.npy" % (name, k)))]
        for dev in ("cpu", "vnpu:%s,cpu" % NPU):
            against_ort(path, os.path.join(WORK, name + "_" + dev.split(":")[0]), dev, args, want,
                        "%s (sum x %+.2f)" % (name, float(fx.sum())))
    led = json.loads(tandem(["plan", path, "--devices", "vnpu:%s,cpu" % NPU, "--json"]).stdout or "{}")
    nodes_l = led.get("nodes", [])
    ent = [a for a in led.get("rescue", {}).get("attempts", []) if a["rule"] == "function-inline"]
    check(len(ent) == len(nodes) - (name == "fn_loop") and all(a["kept"] for a in ent),
          "%s: %d function-inline attempts (%s)" % (name, len(ent), " ".join(
              "%s:%s" % (a["node"], "+".join(b["op"] for b in a.get("became", []))) for a in ent)))
    if on_device:
        check(nodes_l and all(n["device"] != "cpu" for n in nodes_l) and [n["op"] for n in nodes_l] == ["Mul"],
              "%s: the If inlined at plan time, its Mul on the device (%s)" % (name, [n["op"] for n in nodes_l]))
    else:
        want_ops = {"fn_if": ["call1/fn/branch", "call2/fn/branch"], "fn_loop": ["rep/fn/loop"]}[name]
        got_ops = [n["name"] for n in nodes_l if n["op"] in ("If", "Loop")]
        check(got_ops == want_ops, "%s: its %s kept (on cpu: the device has neither), named for the call (%s)" % (
            name, "If" if name == "fn_if" else "Loop", got_ops))
    if name == "fn_loop":
        # on a device that unrolls loops, the function's Loop becomes 3 copies on the device
        unroll = os.path.join(os.path.dirname(NPU), "rescue-unroll.json")
        led = json.loads(tandem(["plan", path, "--devices", "vnpu:%s,cpu" % unroll, "--json"]).stdout or "{}")
        ops = [n["op"] for n in led.get("nodes", []) if n["device"] != "cpu"]
        check(sorted(ops) == ["Add"] * 4 + ["Identity"] + ["Mul"] * 3 and len(ops) == len(led.get("nodes", [])),
              "fn_loop on rescue-unroll: the function's Loop unrolled, all on the device (%s)" % " ".join(ops))
        against_ort(path, os.path.join(WORK, "fn_loop_unroll"), "vnpu:%s,cpu" % unroll, args, want, "fn_loop unrolled")

path = os.path.join(WORK, "recursive.onnx")
g = helper.make_graph([helper.make_node("Rec", ["x"], ["out"], name="rec", domain="custom")], "recursive",
                      [vi("x")], [vi("out")])
save(helper.make_model(g, opset_imports=OPS, functions=[REC], ir_version=10), path)
r = tandem(["plan", path, "--devices", "cpu"], 2)
check("function 'Rec' calls itself" in r.stderr and r.stderr.strip().count("\n") == 0,
      "a recursive function is refused with one sentence: %s" % r.stderr.strip())

cli.finish()
