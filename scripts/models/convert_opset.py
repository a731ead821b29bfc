"""Convert a model to a newer default-domain opset with onnx.version_converter.

usage: python convert_opset.py IN.onnx OPSET OUT.onnx   (the test venv's python: onnx)

Checks the result (onnx.checker, full check) and that it really uses the new
forms: the opset import is OPSET, and no node of an op whose axes/split/pads/
scales moved from attributes to inputs (Reduce* from 18, Split, Pad, Resize,
Squeeze, Unsqueeze) still carries them as attributes. Exits 1 with one
sentence when a check fails. Written under a temporary name and renamed.
"""
import os
import sys

import onnx
from onnx import version_converter

# op type -> attributes that became inputs by opset 18
MOVED = {"Split": ("split",), "Pad": ("pads",), "Resize": ("scales", "sizes"),
         "Squeeze": ("axes",), "Unsqueeze": ("axes",)}


def moved_attrs(op_type):
    if op_type.startswith("Reduce"):
        return ("axes",)
    return MOVED.get(op_type, ())


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: convert_opset.py IN.onnx OPSET OUT.onnx\n")
        return 2
    src, target, out = argv[1], int(argv[2]), argv[3]
    model = version_converter.convert_version(onnx.load(src), target)
    onnx.checker.check_model(model, full_check=True)
    got = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if got != [target]:
        sys.stderr.write("convert_opset: %s converted to opset %s, not %d.\n" % (src, got, target))
        return 1
    for n in model.graph.node:
        stale = [a.name for a in n.attribute if a.name in moved_attrs(n.op_type)]
        if stale:
            sys.stderr.write("convert_opset: node '%s' (%s) still has attribute %s at opset %d.\n"
                             % (n.name, n.op_type, stale[0], target))
            return 1
    tmp = "%s.tmp.%d" % (out, os.getpid())
    onnx.save(model, tmp)
    os.replace(tmp, out)
    print("models: converted %s to opset %d as %s" % (os.path.basename(src), target, os.path.basename(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
