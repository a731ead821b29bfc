"""Author matmul_ext384: a weight-heavy model whose weights are external data.

usage: python make_matmul_chain.py OUT.onnx     (onnx and numpy: the test venv's
       python, or Debian's python3 with onnx 1.12)

24 chained MatMul with float32 weights 2048x2048 (16 MiB each, 384 MiB in all),
a Relu after each but the last:
  input [8, 2048] float -> (MatMul W_i -> Relu) x 23 -> MatMul W_23
  -> output [8, 2048]
The weights are seeded (SEED), N(0, 2/2048) (He: Relu keeps the scale), and
live in OUT.data beside the model (external data, location "OUT.data", one
offset per weight, 4 KiB aligned), so that the model file itself is a few
KiB. The weights are written straight to the data file one at a time (never
all in memory, never through onnx's own external-data writer), which keeps
generation to a few seconds. Written under temporary names and renamed.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

SEED = 20261207
LAYERS = 24
N = 2048
BATCH = 8
ALIGN = 4096


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_matmul_chain.py OUT.onnx")
    out = sys.argv[1]
    data_name = os.path.splitext(os.path.basename(out))[0] + ".data"
    data_path = os.path.join(os.path.dirname(out) or ".", data_name)
    tmp_model, tmp_data = out + ".tmp", data_path + ".tmp"
    rng = np.random.default_rng(SEED)
    scale = np.float32(np.sqrt(2.0 / N))
    inits, nodes = [], []
    x = "input"
    with open(tmp_data, "wb") as f:
        for i in range(LAYERS):
            w = rng.standard_normal((N, N), dtype=np.float32)
            w *= scale
            off = f.tell()
            f.write(w.astype("<f4", copy=False).tobytes())
            pad = (-f.tell()) % ALIGN
            f.write(b"\0" * pad)
            t = TensorProto()
            t.name = "W%d" % i
            t.data_type = TensorProto.FLOAT
            t.dims.extend([N, N])
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(off)), ("length", str(N * N * 4))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
            y = "output" if i == LAYERS - 1 else "mm%d" % i
            nodes.append(helper.make_node("MatMul", [x, t.name], [y], name="MatMul_%d" % i))
            if i < LAYERS - 1:
                r = "relu%d" % i
                nodes.append(helper.make_node("Relu", [y], [r], name="Relu_%d" % i))
                y = r
            x = y
    graph = helper.make_graph(
        nodes, "matmul_ext384",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [BATCH, N])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [BATCH, N])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tandem scripts/models/make_matmul_chain.py")
    model.ir_version = 7
    with open(tmp_model, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp_data, data_path)
    os.replace(tmp_model, out)


if __name__ == "__main__":
    main()
