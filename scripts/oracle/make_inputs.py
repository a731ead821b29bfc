#!/usr/bin/python3
"""Write fixed-seed random inputs for an ONNX model.

usage: /usr/bin/python3 make_inputs.py MODEL OUTDIR SHAPE [SHAPE ...]

SHAPE is like 1x3x224x224, one per graph input (inputs that are also
initializers are skipped), in graph order. Input names and element types come
from the model; a SHAPE must agree with every fixed dimension of the model.
Writes OUTDIR/inputs/<sanitized name>.npy (float inputs: uniform [-1, 1];
integer inputs: uniform integers in [0, 10); bool: random) and OUTDIR/inputs.txt
with one NAME=PATH line per input, PATH absolute as it will be once OUTDIR is
renamed to FINAL (env REFS_FINAL_DIR, default OUTDIR).
"""
import os
import re
import sys

import numpy as np
import onnx
from onnx import mapping

SEED = 1234


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def die(msg):
    sys.stderr.write("make_inputs: %s\n" % msg)
    sys.exit(1)


def main(argv):
    if len(argv) < 4:
        die("usage: make_inputs.py MODEL OUTDIR SHAPE [SHAPE ...]")
    model_path, outdir, shapes = argv[1], argv[2], argv[3:]
    final = os.path.abspath(os.environ.get("REFS_FINAL_DIR", outdir))
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inputs = [v for v in m.graph.input if v.name not in inits]
    if len(inputs) != len(shapes):
        die("%s has %d inputs but %d shapes were given."
            % (model_path, len(inputs), len(shapes)))
    os.makedirs(os.path.join(outdir, "inputs"), exist_ok=True)
    lines = []
    for k, (v, s) in enumerate(zip(inputs, shapes)):
        shape = tuple(int(d) for d in s.split("x"))
        tt = v.type.tensor_type
        dims = list(tt.shape.dim)
        if len(dims) != len(shape) or any(
                d.HasField("dim_value") and d.dim_value != n
                for d, n in zip(dims, shape)):
            die("shape %s does not fit input '%s' of %s." % (s, v.name, model_path))
        dtype = mapping.TENSOR_TYPE_TO_NP_TYPE[tt.elem_type]
        rng = np.random.default_rng(SEED + k)
        if np.issubdtype(dtype, np.floating):
            a = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        elif dtype == np.bool_:
            a = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            a = rng.integers(0, 10, size=shape).astype(dtype)
        else:
            die("input '%s' of %s has an unsupported type." % (v.name, model_path))
        fname = sanitize(v.name) + ".npy"
        np.save(os.path.join(outdir, "inputs", fname), a)
        lines.append("%s=%s\n" % (v.name, os.path.join(final, "inputs", fname)))
    with open(os.path.join(outdir, "inputs.txt"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main(sys.argv)
