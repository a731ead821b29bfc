"""How much a quantized model's answers move from its float model's.

usage: python quant_accuracy.py CACHE_DIR [--images N] [--pages N] [--tandem TANDEM]

On rendered inputs that neither calibration (quantize.py, seeds 500+) nor the
reference cases (seed 1234) use — seeds 2000 + i, the same variants as
quantize.py's calibration (scene or page of other shapes and text, mirrored,
brightness changed):
  classifiers (resnet18_qdq, mobilenet_v2_qdq, resnet18_qop against their
  float model): top-1 agreement over N scenes (default 32), and how many
  distinct classes the float model chose (the classifiers have random
  weights: agreement means something only when the float answers vary);
  ppocr_det_qdq against ppocr_det: the text boxes (4-connected regions above
  0.3, as tests/models/semantic.py finds them) on N pages (default 4): boxes
  of each, and boxes with a partner of IoU >= 0.5.
The quantized model runs in onnxruntime (default optimisation); with --tandem
also in tandem on cpu, whose figures are printed beside. Prints one line per
model. Runs in the test venv.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "models"))
import quantize  # noqa: E402
from semantic import regions  # noqa: E402

EVAL_SEED = 2000
CLASSIFIERS = [("resnet18_qdq", "resnet18"), ("mobilenet_v2_qdq", "mobilenet_v2"), ("resnet18_qop", "resnet18")]


def ort_runner(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return lambda x: s.run(None, {name: x})[0]


def tandem_runner(tandem, path):
    import onnx
    name = quantize.input_of(path)
    out_name = onnx.load(path, load_external_data=False).graph.output[0].name

    def run(x):
        tmp = tempfile.mkdtemp(prefix="quant-acc.")
        try:
            np.save(os.path.join(tmp, "x.npy"), x)
            subprocess.run([tandem, "run", path, "--input", "%s=%s" % (name, os.path.join(tmp, "x.npy")),
                            "--output-dir", os.path.join(tmp, "out")], check=True, capture_output=True)
            return np.load(os.path.join(tmp, "out", quantize.make_inputs.sanitize(out_name) + ".npy"))
        finally:
            shutil.rmtree(tmp)
    return run


def iou(a, b):
    y0, x0 = max(a[0], b[0]), max(a[1], b[1])
    y1, x1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, y1 - y0 + 1) * max(0, x1 - x0 + 1)
    area = lambda r: (r[2] - r[0] + 1) * (r[3] - r[1] + 1)  # noqa: E731
    return inter / float(area(a) + area(b) - inter)


def matched(ref, got):
    return sum(1 for r in ref if any(iou(r, g) >= 0.5 for g in got))


def main(argv):
    if len(argv) < 2:
        quantize.die("usage: quant_accuracy.py CACHE_DIR [--images N] [--pages N] [--tandem TANDEM]")
    models = os.path.join(argv[1], "models")
    opts = dict(zip(argv[2::2], argv[3::2]))
    n_img, n_page = int(opts.get("--images", 32)), int(opts.get("--pages", 4))
    tandem = opts.get("--tandem")
    scenes = [quantize.rendered("imagenet", EVAL_SEED + i, 224, 224) for i in range(n_img)]
    for qname, fname in CLASSIFIERS:
        f = ort_runner(os.path.join(models, fname + ".onnx"))
        ref = [int(f(x).argmax()) for x in scenes]
        runners = [("onnxruntime", ort_runner(os.path.join(models, qname + ".onnx")))]
        if tandem:
            runners.append(("tandem", tandem_runner(tandem, os.path.join(models, qname + ".onnx"))))
        figs = []
        for label, run in runners:
            top = [int(run(x).argmax()) for x in scenes]
            figs.append("%s %d/%d" % (label, sum(a == b for a, b in zip(ref, top)), n_img))
        print("%s vs %s: top-1 agreement %s (float chose %d distinct classes)" % (
            qname, fname, ", ".join(figs), len(set(ref))))
    pages = [quantize.rendered("ocr-det", EVAL_SEED + i, 640, 640) for i in range(n_page)]
    f = ort_runner(os.path.join(models, "ppocr_det.onnx"))
    ref = [regions(f(x)[0, 0] > 0.3) for x in pages]
    runners = [("onnxruntime", ort_runner(os.path.join(models, "ppocr_det_qdq.onnx")))]
    if tandem:
        runners.append(("tandem", tandem_runner(tandem, os.path.join(models, "ppocr_det_qdq.onnx"))))
    figs = []
    for label, run in runners:
        got = [regions(run(x)[0, 0] > 0.3) for x in pages]
        figs.append("%s %d boxes, %d equal, %d of float's matched at IoU >= 0.5" % (
            label, sum(map(len, got)), sum(len(set(a) & set(b)) for a, b in zip(ref, got)),
            sum(matched(r, g) for r, g in zip(ref, got))))
    print("ppocr_det_qdq vs ppocr_det on %d pages: float %d boxes; %s" % (
        n_page, sum(map(len, ref)), "; ".join(figs)))


if __name__ == "__main__":
    main(sys.argv)
