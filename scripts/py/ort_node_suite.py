"""Runs an ONNX node-test suite (folders of model.onnx + test_data_set_N)
on onnxruntime's CPU provider and prints `N passed, N failed` with the
tolerances of tests/onnx-node/compare.c's default (rtol 1e-3, atol 1e-7),
for the README's comparison with tandem on the same suite.

    .cache/venv/bin/python scripts/py/ort_node_suite.py .cache/onnx-node-1.23/node
"""
import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def load_pb(path, vi):
    data = open(path, "rb").read()
    t = vi.type
    if t.HasField("sequence_type"):
        s = onnx.SequenceProto()
        s.ParseFromString(data)
        return numpy_helper.to_list(s)
    if t.HasField("optional_type"):
        o = onnx.OptionalProto()
        o.ParseFromString(data)
        return numpy_helper.to_optional(o)
    tp = onnx.TensorProto()
    tp.ParseFromString(data)
    return numpy_helper.to_array(tp)


def close(got, want):
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(close(g, w) for g, w in zip(got, want))
    if want is None:
        return got is None
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "fc":
        return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-7, equal_nan=True))
    if want.dtype.kind in "OUS":
        return bool(np.array_equal(got.astype(str), want.astype(str)))
    try:
        return bool(np.array_equal(got.view(np.uint8), want.view(np.uint8)))
    except ValueError:
        return bool(np.array_equal(got, want))


def main():
    root = sys.argv[1]
    passed = failed = 0
    so = ort.SessionOptions()
    so.log_severity_level = 4
    for case in sorted(os.listdir(root)):
        d = os.path.join(root, case)
        try:
            m = onnx.load(os.path.join(d, "model.onnx"))
            s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
            ok = True
            for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
                inits = {i.name for i in m.graph.initializer}
                ins = [i for i in m.graph.input if i.name not in inits]
                feed = {}
                for k, vi in enumerate(ins):
                    p = os.path.join(ds, "input_%d.pb" % k)
                    if os.path.exists(p):
                        feed[vi.name] = load_pb(p, vi)
                outs = s.run(None, feed)
                for k, vi in enumerate(m.graph.output):
                    p = os.path.join(ds, "output_%d.pb" % k)
                    if os.path.exists(p) and not close(outs[k], load_pb(p, vi)):
                        ok = False
            passed += ok
            failed += not ok
        except Exception:  # noqa: BLE001 - any refusal is that case's failure
            failed += 1
    print("%d passed, %d failed" % (passed, failed))


main()
