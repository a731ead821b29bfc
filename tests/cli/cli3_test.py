#!/usr/bin/python3
"""The last pieces of issue 19 item 3:
   cli3_test.py TANDEM WORKDIR CASE

shape         info --shape NAME=DxD describes the model specialised to that
              shape: inputs' and outputs' shapes fixed, FLOPs counted (unknown
              before); --json the same; a name that is not an input exits 2
              listing the inputs, a wrong rank exits 2, a repeated name 1"""
import json
import os
import subprocess
import sys

from chain import check, counted, enter, failures

try:
    from onnx import TensorProto, helper, numpy_helper
    import onnx
    import numpy as np
except ImportError:
    print("python3-onnx or numpy is missing")
    sys.exit(77)

TANDEM, CASE = sys.argv[1], sys.argv[3]
WORK = enter(sys.argv[2], CASE)


def run(args, code, env=None):
    p = subprocess.run([TANDEM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, env=env)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "tandem %s: exit %d, expected %d\n  stderr: %s\n  stdout: %s"
          % (" ".join(args), p.returncode, code, se[-2000:], so[-2000:]))
    return so, se


def matmul_model(name="mm.onnx", k=8, n=16):
    """X [N, K] -> MatMul W [K, N'] -> Relu -> Y [N, N']: N is dynamic, so
    the FLOPs (2 * N * K * N') are known only once N is fixed."""
    w = numpy_helper.from_array(np.linspace(-1, 1, k * n, dtype=np.float32).reshape(k, n), "W")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["t"], name="mm"),
             helper.make_node("Relu", ["t"], ["Y"], name="relu")]
    g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", k])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", n])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, name)
    return name


def line(text, key):
    return next((l for l in text.splitlines() if l.startswith(key)), "")


def case_shape():
    mm = matmul_model()
    so, _ = run(["info", mm], 0)
    check("[N, 8]" in so and "[N, 16]" in so, "without --shape the dims are symbolic: %s" % so)
    check("unknown shapes" in line(so, "flops"), "without --shape the MatMul's FLOPs are unknown: %s" % so)
    so, _ = run(["info", mm, "--shape", "X=4x8"], 0)
    check("X  float [4, 8]" in so, "input shape fixed: %s" % so)
    check("Y  float [4, 16]" in so, "output shape inferred from it: %s" % so)
    check("unknown" not in line(so, "flops") and "0.000 GFLOPs" in line(so, "flops"),
          "FLOPs known: %s" % line(so, "flops"))
    # the same as JSON: 2 * 4 * 8 * 16 FLOPs, none unknown
    so, _ = run(["info", mm, "--shape=X=4x8", "--json"], 0)
    d = json.loads(so)
    check(d["inputs"][0]["shape"] == [4, 8] and d["outputs"][0]["shape"] == [4, 16], "json shapes: %s" % d)
    check(d["flops"] == 2 * 4 * 8 * 16 and d["flops_unknown_nodes"] == 0, "json flops: %s" % d)
    so, _ = run(["info", mm, "--json", "--shape", "X=32x8"], 0)
    check(json.loads(so)["flops"] == 2 * 32 * 8 * 16, "flops follow the shape: %s" % so)
    so, _ = run(["info", mm, "--json"], 0)
    d = json.loads(so)
    check(d["flops"] == 0 and d["flops_unknown_nodes"] == 1 and d["inputs"][0]["shape"] == ["N", 8],
          "json without --shape: %s" % d)
    # '?' keeps a dimension
    so, _ = run(["info", mm, "--shape", "X=?x8"], 0)
    check("[N, 8]" in so, "'?' keeps N: %s" % so)
    # a name that is not an input: exit 2 naming the inputs, nothing on stdout
    so, se = run(["info", mm, "--shape", "Z=4x8"], 2)
    check("'Z'" in se and "its inputs: 'X'" in se and so == "", "bad name: %s" % se)
    _, se = run(["info", mm, "--shape", "X=4"], 2)
    check("rank" in se, "wrong rank: %s" % se)
    _, se = run(["info", mm, "--shape", "X=4x8", "--shape", "X=2x8"], 1)
    check("twice" in se, "repeated name: %s" % se)
    _, se = run(["info", mm, "--shape", "X=4xq"], 1)
    check(se.startswith("tandem: "), "bad dims: %s" % se)
    _, se = run(["info", mm, "--shape"], 1)
    check("needs a value" in se, "missing value: %s" % se)
    so, _ = run(["help", "info"], 0)
    check("--shape NAME=DxD" in so, "help info: %s" % so)


CASES = {"shape": case_shape}
CASES[CASE]()
if failures:
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print("%d of %d checks failed" % (len(failures), counted[0]), file=sys.stderr)
    sys.exit(1)
print("ok: %d checks" % counted[0])
