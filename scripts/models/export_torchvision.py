#!/usr/bin/python3
"""Export tandem's test models from torchvision / torch.nn to ONNX.

usage: /usr/bin/python3 export_torchvision.py OUTDIR NAME [NAME ...]

NAME is one of: resnet18 mobilenet_v2 squeezenet1_1 shufflenet_v2_x1_0
efficientnet_b0 transformer_op13 transformer_op17.

Every model is built with random weights (weights=None, fixed seed), its
BatchNorm running statistics calibrated on seeded random batches (see
calibrate_batchnorm), put in eval mode and exported with batch 1, input "input", output "output",
do_constant_folding=True. Each file is written under a temporary name and
renamed, so an interrupted run leaves nothing half-written. Existing files are
not re-exported.
"""
import os
import sys
import warnings

SEED = 20240601

IMAGE_MODELS = ("resnet18", "mobilenet_v2", "squeezenet1_1",
                "shufflenet_v2_x1_0", "efficientnet_b0")
TRANSFORMERS = {"transformer_op13": 13, "transformer_op17": 17}


def calibrate_batchnorm(model, forward=None):
    """Give BatchNorm layers realistic running statistics.

    Freshly initialised BatchNorm layers hold mean 0 / var 1, so with
    torchvision's random init the activations of deep nets shrink layer by
    layer (mobilenet_v2's logits end near 1e-9, efficientnet_b0's near 1e-14)
    and BN folding is trivial. Running a few seeded random batches in train
    mode with a cumulative average (momentum=None) sets the statistics a
    trained net would have: unit-scale activations and non-trivial BN
    parameters. Only running_mean / running_var change; weights stay as
    initialised. forward(batch), default model(batch), runs the part of the
    model that holds the BatchNorm layers on an 8x3x224x224 batch
    (scripts/models/export_detection.py passes its backbone and head).
    """
    import torch
    forward = forward or model
    bns = [m for m in model.modules()
           if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    gen = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for _ in range(4):
            forward(torch.rand(8, 3, 224, 224, generator=gen) * 2 - 1)
        # Rendered scenes too (the model tests' realistic inputs come from the
        # same renderer, other seeds): calibrated on noise alone,
        # efficientnet_b0's activations reach 1e4 on a natural image, where
        # float32 rounding alone moves its logits by 1e-5 of their range
        # (onnxruntime's approximate Sigmoid by 7e-2).
        for b in range(4):
            forward(scene_batch(8, SEED + 100 + 8 * b))
    for m, mom in zip(bns, saved):
        m.momentum = mom


def scene_batch(n, seed):
    """n rendered scenes (scripts/oracle/make_inputs.py's renderer), ImageNet-
    normalised, as an NCHW float tensor."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
    from make_inputs import IMAGENET_MEAN, IMAGENET_STD, scene
    imgs = []
    for k in range(n):
        a = (scene(224, 224, np.random.default_rng(seed + k)) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
        imgs.append(np.transpose(a, (2, 0, 1)))
    return torch.from_numpy(np.stack(imgs).astype(np.float32))


def build_image(name):
    import torch
    import torchvision
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, name)(weights=None)
    calibrate_batchnorm(model)
    model.eval()
    return model, torch.zeros(1, 3, 224, 224), 13


def build_transformer(name):
    import torch
    torch.manual_seed(SEED)
    layer = torch.nn.TransformerEncoderLayer(
        d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0,
        activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4,
                                        enable_nested_tensor=False)
    # TransformerEncoder deep-copies `layer`, so all layers start identical.
    # Give every layer its own weights, drawn from a seeded generator.
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for lname, p in model.named_parameters():
            if p.dim() >= 2:
                bound = (6.0 / (p.shape[0] + p.shape[1])) ** 0.5
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * bound)
            elif ".norm" in lname and lname.endswith(".weight"):
                p.copy_(1.0 + 0.1 * (torch.rand(p.shape, generator=gen) * 2 - 1))
            else:
                p.copy_(0.1 * (torch.rand(p.shape, generator=gen) * 2 - 1))
    model.eval()
    return model, torch.zeros(1, 128, 256), TRANSFORMERS[name]


def export(name, outdir):
    import torch
    if name in IMAGE_MODELS:
        model, x, opset = build_image(name)
    elif name in TRANSFORMERS:
        model, x, opset = build_transformer(name)
    else:
        raise SystemExit("export_torchvision.py: unknown model '%s'." % name)
    final = os.path.join(outdir, name + ".onnx")
    tmp = os.path.join(outdir, ".%s.onnx.tmp.%d" % (name, os.getpid()))
    try:
        # Grad stays enabled: under no_grad, eval-mode TransformerEncoderLayer
        # takes its fused fast path (aten::_transformer_encoder_layer_fwd),
        # which has no ONNX symbolic.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (x,), tmp, opset_version=opset,
                              do_constant_folding=True,
                              input_names=["input"], output_names=["output"],
                              verbose=False)
        check(name, tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check(name, path):
    import onnx
    import onnx.numpy_helper
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = {n.op_type for n in m.graph.node}
    if name == "transformer_op17" and "LayerNormalization" not in ops:
        raise SystemExit("export_torchvision.py: transformer_op17 has no "
                         "LayerNormalization node (torch cannot emit it).")
    if name.startswith("transformer"):
        # every layer must have distinct weights
        inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
        big = [a for a in inits.values() if a.ndim == 2 and a.size >= 256 * 256]
        seen = set()
        for a in big:
            key = a.tobytes()[:4096]
            if key in seen:
                raise SystemExit("export_torchvision.py: %s has duplicated "
                                 "layer weights." % name)
            seen.add(key)


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
