"""A float64 referee: evaluates a float32 model in float64 with onnx's
reference evaluator, so that where onnxruntime and tandem disagree the exact
answer decides (onnxruntime approximates some functions: its Sigmoid is off
by about 1e-7 absolute, which a model with large activations multiplies).

usage: python f64_ref.py MODEL OUTDIR NAME=FILE.npy ...   (the test venv's python)

Every float32 initializer, Constant, graph input/output and Cast-to-float is
promoted to float64 (subgraphs too); inputs are read as float32 and widened.
Writes OUTDIR/<sanitized output name>.npy as float64. When the model cannot
be promoted or evaluated (an op the evaluator lacks in double, say), writes
nothing and prints why on stderr: the case is then judged against
onnxruntime alone.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_inputs import sanitize  # noqa: E402
from ort_run import parse_feeds  # noqa: E402

F32, F64 = 1, 11  # TensorProto.FLOAT, DOUBLE


def promote_graph(g, numpy_helper):
    for i, t in enumerate(g.initializer):
        if t.data_type == F32:
            g.initializer[i].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.float64), t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == F32:
            v.type.tensor_type.elem_type = F64
    del g.value_info[:]
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name == "value" and a.t.data_type == F32:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            if n.op_type in ("Cast", "ConstantOfShape", "RandomNormal", "RandomUniform",
                             "RandomNormalLike", "RandomUniformLike", "EyeLike") and a.name in ("to", "dtype") \
                    and a.i == F32:
                a.i = F64
            if n.op_type == "ConstantOfShape" and a.name == "value" and a.t.data_type == F32:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            if a.g is not None and len(a.g.node):
                promote_graph(a.g, numpy_helper)
            for sg in a.graphs:
                promote_graph(sg, numpy_helper)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: f64_ref.py MODEL OUTDIR NAME=FILE.npy ...\n")
        return 2
    import warnings
    import onnx
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
    model_path, outdir = argv[1], argv[2]
    m = onnx.load(model_path)
    promote_graph(m.graph, numpy_helper)
    feeds = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in parse_feeds(argv[3:]).items()}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sess = ReferenceEvaluator(m)
            outs = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - any failure means: no referee
        sys.stderr.write("f64_ref: no float64 referee for %s: %s\n"
                         % (os.path.basename(model_path), " ".join(str(e).split())[:200]))
        return 0
    os.makedirs(outdir, exist_ok=True)
    for o, v in zip(m.graph.output, outs):
        v = np.asarray(v)
        if v.dtype == np.float64:
            np.save(os.path.join(outdir, sanitize(o.name) + ".npy"), v)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
