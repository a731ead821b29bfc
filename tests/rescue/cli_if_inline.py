#!/usr/bin/env python3
"""If inlining at plan time through the CLI (ctest rescue.if_inline; issue 18).

  cli_if_inline.py TANDEM CACHE NPU_PROFILE WORKDIR

silero_vad (its whole network inside If_0 on the sample rate), on
vnpu:rk3588,cpu with --granularity op and static shapes:
  without --bind  If_0 and everything in it on cpu (4 nodes, none on the
                  device);
  --bind sr=16000 If_0 is a rescue entry "if-inline" (then branch) whose
                  nodes are mostly on the device; outputs against cpu's
                  unbound run within the guard's bounds (cosine >= 0.999,
                  max |diff| <= 1e-2 x max |cpu|); a run giving sr=8000 is
                  refused (exit 2, one sentence); a --bind naming no input
                  exits 2 naming the inputs.
A small authored model (written here) whose If has a constant condition
and a branch value named like an outer one is inlined without --bind on
rescue-npu.json: every node on the device, outputs equal cpu's.
Exit 77 when silero_vad is absent.
"""
import json
import os
import subprocess
import sys

import numpy as np

TANDEM, CACHE, NPU, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
failures = []
ENV = dict(os.environ, TANDEM_PLUGINS="", TANDEM_FALLBACK="")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def tandem(args, code=0):
    r = subprocess.run([TANDEM] + args, capture_output=True, text=True, env=ENV, timeout=600)
    check(r.returncode == code, "tandem %s: exit %d, expected %d (%s)" % (" ".join(args), r.returncode, code,
                                                                          r.stderr.strip()[-600:]))
    return r


def outputs(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def inline_entries(ledger):
    return [a for a in ledger.get("rescue", {}).get("attempts", []) if a["rule"] == "if-inline" and a["kept"]]


def on(ledger, device):
    return [n for n in ledger["nodes"] if n["device"] == device]


# ---- silero_vad ----
model = os.path.join(CACHE, "models", "silero_vad.onnx")
refs = os.path.join(CACHE, "refs", "silero_vad", "inputs")
if not os.path.exists(model) or not os.path.isdir(refs):
    print("silero_vad is absent from the cache")
    sys.exit(77)
dev = "vnpu:rk3588,cpu"
shapes = ["--shape", "input=1x576", "--shape", "state=2x1x128", "--granularity", "op"]
ins = []
for k in ("input", "state", "sr"):
    ins += ["--input", "%s=%s" % (k, os.path.join(refs, k + ".npy"))]

before = json.loads(tandem(["plan", model, "--devices", dev, "--json"] + shapes).stdout)
after = json.loads(tandem(["plan", model, "--devices", dev, "--json", "--bind", "sr=16000"] + shapes).stdout)
n_before, dev_before = len(before["nodes"]), len(on(before, "vnpu:rk3588"))
n_after, dev_after = len(after["nodes"]), len(on(after, "vnpu:rk3588"))
print("silero_vad nodes: before %d (%d on the device), after %d (%d on the device)" % (n_before, dev_before, n_after,
                                                                                       dev_after))
check(any(n["op"] == "If" and n["device"] == "cpu" for n in before["nodes"]) and dev_before == 0,
      "without --bind: If_0 on cpu, nothing on the device")
check(not inline_entries(before), "without --bind: no if-inline entry")
ent = inline_entries(after)
top = [a for a in ent if a["node"] == "If_0"]
check(len(top) == 1 and top[0]["branch"] == "then" and top[0]["op"] == "If", "--bind sr=16000: If_0 inlined (then branch)")
became = [b for a in ent for b in a.get("became", [])]
check(len(became) >= 30 and all("/inline/" in b["name"] for b in became), "the inlined nodes are listed (%d)" % len(became))
check(dev_after >= 30 and sum(b["device"] == "vnpu:rk3588" for b in became) >= 30,
      "nodes from inside the If on the device (%d of %d)" % (dev_after, n_after))
check(all(b["reason"] == "RESCUED" for b in became if b["device"] == "vnpu:rk3588"), "reason RESCUED on the device")
check(not any(n["name"] == "If_0" for n in after["nodes"]), "If_0 itself is gone")
text = tandem(["plan", model, "--devices", dev, "--nodes", "--bind", "sr=16000"] + shapes).stdout
check("RESCUED if-inline (then branch)" in text, "plan shows the inlining")

cpu_dir, dev_dir = os.path.join(WORK, "cpu"), os.path.join(WORK, "dev")
tandem(["run", model, "--devices", "cpu", "--output-dir", cpu_dir, "--overwrite"] + ins)
tandem(["run", model, "--devices", dev, "--bind", "sr=16000", "--output-dir", dev_dir, "--overwrite"] + ins + shapes)
ref, got = outputs(cpu_dir), outputs(dev_dir)
check(sorted(ref) == sorted(got) == ["output", "stateN"], "both runs wrote output and stateN")
for k in sorted(ref):
    a, b = ref[k].astype(np.float64).ravel(), got.get(k, np.zeros(0)).astype(np.float64).ravel()
    if a.shape != b.shape:
        check(False, "%s: shapes %s and %s" % (k, a.shape, b.shape))
        continue
    diff = float(np.abs(a - b).max())
    cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    check(cos >= 0.999 and diff <= 1e-2 * max(float(np.abs(a).max()), 1e-6),
          "%s against cpu: max |diff| %.3g, cosine %.7f" % (k, diff, cos))

np.save(os.path.join(WORK, "sr8k.npy"), np.array(8000, dtype=np.int64))
r = tandem(["run", model, "--devices", dev, "--bind", "sr=16000", "--input", "input=" + os.path.join(refs, "input.npy"),
            "--input", "state=" + os.path.join(refs, "state.npy"), "--input", "sr=" + os.path.join(WORK, "sr8k.npy")]
           + shapes, 2)
check("'sr' is bound to 16000" in r.stderr and "8000" in r.stderr, "a run with sr=8000 is refused with one sentence")
r = tandem(["run", model, "--devices", dev, "--bind", "rate=16000"] + ins, 2)
check("'rate'" in r.stderr and "'input', 'state', 'sr'" in r.stderr, "--bind rate=: exit 2 naming the inputs")
r = tandem(["plan", model, "--devices", dev, "--bind", "rate=16000"], 2)
check("'input', 'state', 'sr'" in r.stderr, "plan --bind rate=: exit 2 naming the inputs")

# ---- a small model with a constant-condition If ----
from onnx import TensorProto, helper, save  # noqa: E402

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
then_g = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["t"], name="relu"), helper.make_node("Mul", ["t", "x"], ["r"], name="mul")],
    "then", [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 4])])
else_g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"], name="sig")], "else", [],
                           [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 4])])
g = helper.make_graph([
    helper.make_node("Constant", [], ["c"], name="cond", value=helper.make_tensor("cv", TensorProto.BOOL, [], [True])),
    helper.make_node("Add", ["x", "x"], ["t"], name="add"),
    helper.make_node("If", ["c"], ["o"], name="branch", then_branch=then_g, else_branch=else_g),
    helper.make_node("Add", ["o", "t"], ["y"], name="out"),
], "small_if", [x], [y])
small = os.path.join(WORK, "small_if.onnx")
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), small)
xin = os.path.join(WORK, "x.npy")
np.save(xin, np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4))
led = json.loads(tandem(["plan", small, "--devices", "vnpu:%s,cpu" % NPU, "--json"]).stdout)
ent = inline_entries(led)
check(len(ent) == 1 and ent[0]["node"] == "branch" and ent[0]["branch"] == "then",
      "small model: the constant-condition If is inlined without --bind")
check(len(led["nodes"]) == 4 and all(n["device"] != "cpu" for n in led["nodes"]),
      "small model: all %d nodes on the device" % len(led["nodes"]))
tandem(["run", small, "--devices", "cpu", "--input", "x=" + xin, "--output-dir", os.path.join(WORK, "s_cpu"), "--overwrite"])
tandem(["run", small, "--devices", "vnpu:%s,cpu" % NPU, "--input", "x=" + xin, "--output-dir",
        os.path.join(WORK, "s_dev"), "--overwrite"])
a, b = outputs(os.path.join(WORK, "s_cpu"))["y"], outputs(os.path.join(WORK, "s_dev"))["y"]
xv = np.load(xin)
check(np.array_equal(a, b) and np.allclose(a, np.maximum(xv, 0) * xv + 2 * xv), "small model: outputs equal cpu's")

if failures:
    print("%d checks failed" % len(failures), file=sys.stderr)
    sys.exit(1)
print("ok")
