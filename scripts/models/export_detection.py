#!/usr/bin/python3
"""Export tandem's detection test model from torchvision to ONNX.

usage: /usr/bin/python3 export_detection.py OUTDIR NAME [NAME ...]

NAME is ssdlite320: torchvision's ssdlite320_mobilenet_v3_large with random
weights (weights=None, weights_backbone=None, fixed seed) and 91 classes,
its BatchNorm statistics calibrated as the classifiers' are
(export_torchvision.calibrate_batchnorm, through its backbone and head), in
eval mode, exported at opset 13 with the post-processing torchvision traces
(per-class score threshold, TopK, NonZero/GatherND, box decoding, a batched
NonMaxSuppression inside an If, the final TopK of 300 detections). Input
"images" 3x320x320, RGB in [0, 1] (the model normalises and resizes
inside); outputs "boxes" (N x 4, x1 y1 x2 y2 in input pixels), "scores" (N)
and "labels" (N, int64), N <= 300. The file is written under a temporary
name and renamed; an existing file is not re-exported.
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torchvision import SEED, calibrate_batchnorm  # noqa: E402

MODELS = ("ssdlite320",)
SIZE = 320


def build_ssdlite():
    import torch
    import torch.nn.functional as F
    import torchvision
    torch.manual_seed(SEED)
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None)

    def backbone_and_head(batch):
        x = F.interpolate(batch, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
        return model.head(list(model.backbone(x).values()))

    calibrate_batchnorm(model, backbone_and_head)
    model.eval()
    return model, torch.zeros(3, SIZE, SIZE)


def export(name, outdir):
    import torch
    if name not in MODELS:
        raise SystemExit("export_detection.py: unknown model '%s'." % name)
    model, x = build_ssdlite()
    final = os.path.join(outdir, name + ".onnx")
    tmp = os.path.join(outdir, ".%s.onnx.tmp.%d" % (name, os.getpid()))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, ([x],), tmp, opset_version=13,
                              do_constant_folding=True, input_names=["images"],
                              output_names=["boxes", "scores", "labels"],
                              verbose=False)
        check(tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check(path):
    import onnx
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = {n.op_type for n in m.graph.node}
    for want in ("TopK", "NonZero", "GatherND", "If"):
        if want not in ops:
            raise SystemExit("export_detection.py: the export has no %s node." % want)
    nms = [n for n in m.graph.node if n.op_type == "If"
           for g in n.attribute for sub in [g.g] for k in sub.node if k.op_type == "NonMaxSuppression"]
    if not nms:
        raise SystemExit("export_detection.py: the export has no NonMaxSuppression inside an If.")


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__.strip().splitlines()[2])
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    for name in argv[2:]:
        if os.path.exists(os.path.join(outdir, name + ".onnx")):
            continue
        export(name, outdir)
        print("models: exported %s.onnx" % name)


if __name__ == "__main__":
    main(sys.argv)
