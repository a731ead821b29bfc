"""Quantize a float model the way users do: onnxruntime's own static quantizer.

usage: python quantize.py FLOAT_MODEL OUT_MODEL FORMAT KIND

FORMAT  qdq   QuantizeLinear/DequantizeLinear pairs around every op that
              onnxruntime quantizes (QuantFormat.QDQ), the default ops
        qop   QOperator format restricted to the standard ONNX integer ops:
              Conv -> QLinearConv, MatMul -> QLinearMatMul (a Gemm is first
              written as MatMul + Add so the classifier head becomes a
              QLinearMatMul); onnxruntime's com.microsoft ops (QLinearAdd,
              QGemm, QLinearGlobalAveragePool) are not asked for
KIND    imagenet  calibrate on rendered scenes (scripts/oracle/make_inputs.py)
        ocr-det   calibrate on rendered pages of text
Both formats: onnxruntime.quantization.quant_pre_process first (onnx shape
inference, basic graph optimisation), then quantize_static with per-channel
int8 weights, uint8 activations (U8S8, onnxruntime's CPU recommendation),
MinMax calibration over CALIBRATION_IMAGES rendered inputs whose seeds differ
from the reference case's (make_inputs.py uses 1234 + k) and from
quant_accuracy.py's evaluation set. The input shape is the float model's
(dynamic dimensions taken as 1x3x224x224 or 1x3x640x640).
Runs in the test venv (onnxruntime 1.31.1, onnx, numpy, pillow).
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import make_inputs  # noqa: E402

CALIBRATION_SEED = 500
CALIBRATION_IMAGES = {"imagenet": 8, "ocr-det": 4}
SIZE = {"imagenet": (224, 224), "ocr-det": (640, 640)}


def die(msg):
    sys.stderr.write("quantize: %s\n" % msg)
    sys.exit(1)


def rendered(kind, seed, h, w):
    """One rendered input, 1x3xHxW float32, normalised as the model expects.

    Variants: the scene or page of make_inputs.py drawn with another seed
    (other shapes, sizes and noise), the page's lines rotated so each image
    reads other text first, every other image mirrored and its brightness
    changed by up to 20%."""
    rng = np.random.default_rng(seed)
    if kind == "imagenet":
        a = make_inputs.scene(h, w, rng)
    else:
        saved = make_inputs.LINES
        r = seed % len(saved)
        make_inputs.LINES = saved[r:] + saved[:r]
        try:
            a = make_inputs.page(h, w, rng)
        finally:
            make_inputs.LINES = saved
    if seed % 2:
        a = a[:, ::-1]
    a = np.clip(a * rng.uniform(0.8, 1.2), 0, 255)
    if kind == "imagenet":
        a = (a / 255.0 - make_inputs.IMAGENET_MEAN) / make_inputs.IMAGENET_STD
    else:
        a = (a[:, :, ::-1] / 255.0 - make_inputs.IMAGENET_MEAN) / make_inputs.IMAGENET_STD
    return np.ascontiguousarray(np.transpose(a, (2, 0, 1))[None]).astype(np.float32)


def input_of(model_path):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [v for v in m.graph.input if v.name not in inits]
    if len(ins) != 1:
        die("%s has %d inputs; only one-input image models are quantized here." % (model_path, len(ins)))
    return ins[0].name


class Reader:
    """onnxruntime's CalibrationDataReader protocol: get_next() -> feed or None."""

    def __init__(self, name, kind, count):
        h, w = SIZE[kind]
        self.feeds = iter([{name: rendered(kind, CALIBRATION_SEED + i, h, w)} for i in range(count)])

    def get_next(self):
        return next(self.feeds, None)

    def rewind(self):
        raise RuntimeError("calibration is read once")


def gemm_to_matmul(model):
    """Gemm (alpha = beta = 1, constant B and C) -> MatMul + Add, in place."""
    from onnx import helper, numpy_helper
    inits = {i.name: i for i in model.graph.initializer}
    nodes = []
    for n in model.graph.node:
        if n.op_type != "Gemm":
            nodes.append(n)
            continue
        at = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if at.get("alpha", 1.0) != 1.0 or at.get("beta", 1.0) != 1.0 or at.get("transA", 0) or \
                len(n.input) != 3 or n.input[1] not in inits or n.input[2] not in inits:
            die("Gemm '%s' is not the plain classifier head this rewrite handles." % n.name)
        w = numpy_helper.to_array(inits[n.input[1]])
        if at.get("transB", 0):
            w = w.T
        wname = n.input[1] + "_kn"
        model.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w), wname))
        mid = n.output[0] + "_matmul"
        nodes.append(helper.make_node("MatMul", [n.input[0], wname], [mid], name=n.name + "_MatMul"))
        nodes.append(helper.make_node("Add", [mid, n.input[2]], [n.output[0]], name=n.name + "_Add"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {i for n in model.graph.node for i in n.input}
    keep = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)


def main(argv):
    if len(argv) != 5 or argv[3] not in ("qdq", "qop") or argv[4] not in SIZE:
        die("usage: quantize.py FLOAT_MODEL OUT_MODEL qdq|qop imagenet|ocr-det")
    src, out, fmt, kind = argv[1:]
    import onnx
    from onnxruntime.quantization import (CalibrationMethod, QuantFormat, QuantType, quant_pre_process,
                                          quantize_static)
    name = input_of(src)
    with tempfile.TemporaryDirectory() as tmp:
        pre = os.path.join(tmp, "pre.onnx")
        # (symbolic shape inference needs sympy, not in the venv; onnx's suffices)
        quant_pre_process(src, pre, skip_symbolic_shape=True)
        model = onnx.load(pre)
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        if opset < 13:
            # Per-channel DequantizeLinear (its axis) is opset 13: onnxruntime
            # would write it into the opset 12 model as it is (ppocr_det), an
            # invalid model; users convert first, as its documentation says.
            from onnx import version_converter
            onnx.save(version_converter.convert_version(model, 13), pre)
        if fmt == "qop":
            # after the optimiser, which would fuse MatMul + Add back into Gemm
            model = onnx.load(pre)
            gemm_to_matmul(model)
            onnx.save(model, pre)
        part = out + ".tmp.%d" % os.getpid()
        try:
            quantize_static(
                pre, part, Reader(name, kind, CALIBRATION_IMAGES[kind]),
                quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                op_types_to_quantize=None if fmt == "qdq" else ["Conv", "MatMul"],
                per_channel=True,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=CalibrationMethod.MinMax)
            q = onnx.load(part)
            foreign = sorted({n.op_type for n in q.graph.node if n.domain not in ("", "ai.onnx")})
            if foreign:
                die("%s would hold non-standard ops %s." % (out, ", ".join(foreign)))
            onnx.checker.check_model(q)
            os.replace(part, out)
        finally:
            if os.path.exists(part):
                os.remove(part)
    from collections import Counter
    ops = Counter(n.op_type for n in onnx.load(out).graph.node)
    print("quantize: wrote %s (%s, %s calibration on %d images): %s" % (
        os.path.basename(out), fmt, kind, CALIBRATION_IMAGES[kind],
        ", ".join("%s %d" % kv for kv in sorted(ops.items()))))


if __name__ == "__main__":
    main(sys.argv)
