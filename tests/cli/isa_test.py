#!/usr/bin/python3
"""TANDEM_ISA (the CPU kernels' instruction set, src/ops/isa.c):
   isa_test.py TANDEM WORKDIR

An unknown word, or an instruction set this CPU lacks, stops plan and run
with exit 1 and the library's sentence naming TANDEM_ISA; portable, avx2 and
(where the CPU has it) avx512 run a 1x1 Conv + Gemm model to outputs within
float tolerance of each other, avx512 bit-identical to avx2 (the AVX-512 GEMM
kernels compute the same sums in the same order; the rest is the AVX2 code)."""
import os
import sys

from chain import check, enter, finish, tandem

try:
    from onnx import TensorProto, helper, numpy_helper
    import onnx
    import numpy as np
except ImportError:
    print("python3-onnx or numpy is missing")
    sys.exit(77)

TANDEM = sys.argv[1]
WORK = enter(sys.argv[2], "isa")


def conv_model(name="c.onnx"):
    """X [1, 40, 7, 7] -> 1x1 Conv (24 out, bias) -> Relu -> Flatten -> Gemm (transB, 10 out) -> Y:
    N = 49 pixels (a 1-column last panel), then one row times a matrix (the dot-product path)."""
    rs = np.random.RandomState(3)
    w = numpy_helper.from_array(rs.uniform(-1, 1, (24, 40, 1, 1)).astype(np.float32), "W")
    b = numpy_helper.from_array(rs.uniform(-1, 1, (24,)).astype(np.float32), "B")
    fw = numpy_helper.from_array(rs.uniform(-1, 1, (10, 24 * 49)).astype(np.float32), "FW")
    fb = numpy_helper.from_array(rs.uniform(-1, 1, (10,)).astype(np.float32), "FB")
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["t"], name="conv"),
             helper.make_node("Relu", ["t"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "FW", "FB"], ["Y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "c", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 40, 7, 7])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 10])], [w, b, fw, fb])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, name)
    return name


def env(isa):
    return dict(os.environ, TANDEM_ISA=isa, TANDEM_PLUGINS="")


flags = open("/proc/cpuinfo").read().split()
has512 = all(f in flags for f in ("avx512f", "avx512dq", "avx512vl"))
model = conv_model()
np.save("x.npy", np.random.RandomState(5).uniform(-1, 1, (1, 40, 7, 7)).astype(np.float32))
for cmd in (["plan", model], ["run", model, "--input", "X=x.npy", "--output-dir", "bad"], ["devices"]):
    so, se = tandem(TANDEM, cmd, 1, env("sse9"))
    check("TANDEM_ISA=sse9: not an instruction set (portable, avx2 or avx512)" in se,
          "%s with TANDEM_ISA=sse9: the sentence: %r" % (cmd[0], se))
outs = {}
for isa in ("portable", "avx2", "avx512"):
    if isa == "avx512" and not has512:
        so, se = tandem(TANDEM, ["plan", model], 1, env(isa))
        check("TANDEM_ISA=avx512: this CPU (or its OS) supports at most" in se, "avx512 refused: %r" % se)
        continue
    tandem(TANDEM, ["run", model, "--input", "X=x.npy", "--output-dir", isa], 0, env(isa))
    outs[isa] = np.load(os.path.join(isa, "Y.npy"))
for isa, y in outs.items():
    check(np.allclose(y, outs["portable"], rtol=1e-5, atol=1e-4), "%s: Y as portable's" % isa)
# the AVX-512 GEMM kernels compute the AVX2 ones' sums in the same order,
# and every other kernel is the AVX2 one: the same bits
if "avx512" in outs:
    check(outs["avx512"].tobytes() == outs["avx2"].tobytes(), "avx512: Y bit-identical to avx2's (max diff %g)"
          % float(np.abs(outs["avx512"] - outs["avx2"]).max()))
check(len(outs) >= 2, "at least portable and one more ran")
finish()
