#!/usr/bin/python3
"""The rest of issue 19 item 3 (the CLI tells the story):
   cli2_test.py TANDEM WORKDIR CASE

compare       compare on opencl,cpu compares every node (a plugin device's
              outputs are copied to the host for the observer; it compared 0 of
              49 on resnet18 and exited 0); a compare that compared nothing
              (string outputs only) exits 4 with one sentence. Skipped (77)
              when opencl is not available here."""
import json
import os
import re
import subprocess
import sys

from chain import check, counted, enter, failures, model

try:
    from onnx import TensorProto, helper
    import onnx
except ImportError:
    print("python3-onnx is missing")
    sys.exit(77)

TANDEM, CASE = sys.argv[1], sys.argv[3]
WORK = enter(sys.argv[2], CASE)
CACHE = os.environ.get("TANDEM_CACHE", "")


def run(args, code):
    p = subprocess.run([TANDEM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "tandem %s: exit %d, expected %d\n  stderr: %s\n  stdout: %s"
          % (" ".join(args), p.returncode, code, se.strip()[:2000], so[:2000]))
    return so, se


def available(dev):
    so, _ = run(["devices"], 0)
    return any(l.split()[:3] == [dev, dev.split(":")[0], "available"] for l in so.splitlines() if l.split())


def string_model():
    """X -> Cast(to=STRING) -> Y: nothing numeric to compare."""
    n = helper.make_node("Cast", ["X"], ["Y"], to=TensorProto.STRING, name="cast_0")
    g = helper.make_graph([n], "str", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("Y", TensorProto.STRING, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, "str.onnx")
    return "str.onnx"


def case_compare():
    # nothing comparable: not a silent success
    _, se = run(["compare", string_model(), "--devices", "cpu"], 4)
    check(se.strip() == "tandem: compare: none of the 1 node could be compared: no output of it was a numeric "
          "tensor on the host in both runs", "one sentence: %r" % se)
    if not available("opencl"):
        print("opencl is not available here")
        sys.exit(77)
    mix = model("mix", ["Relu", "Sigmoid", "Tanh", "Relu"], dims=(1, 64))
    so, _ = run(["compare", mix, "--devices", "opencl,cpu", "--json"], 0)
    try:
        j = json.loads(so)
    except ValueError:
        j = {}
    check(j.get("nodes_compared") == 4 and j.get("nodes_skipped") == 0, "4 of 4 compared: %s" % so[:400])
    check(sorted(r["device"] for r in j.get("nodes", [])) == ["opencl"] * 4, "on opencl: %s" % so[:400])
    check(all(r["cosine"] > 0.9999 and r["max_abs"] < 1e-4 for r in j.get("nodes", [])), "close to cpu: %s" % so)
    res = os.path.join(CACHE, "models", "resnet18.onnx")
    if os.path.exists(res):
        so, _ = run(["compare", res, "--devices", "opencl,cpu", "--top", "3"], 0)
        m = re.search(r"nodes compared: (\d+), skipped: (\d+)", so)
        check(m is not None and m.groups() == ("49", "0"), "resnet18: 49 of 49 compared: %s" % so[:600])
        check(re.search(r"^\s+\d+\s+/fc/Gemm\s+Gemm\s+opencl\s", so, re.M) is not None, "Gemm on opencl: %s" % so)


CASES = {"compare": case_compare}
CASES[CASE]()
if failures:
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print("%d of %d checks failed" % (len(failures), counted[0]), file=sys.stderr)
    sys.exit(1)
print("ok: %d checks" % counted[0])
