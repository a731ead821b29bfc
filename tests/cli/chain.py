"""What the CLI test scripts that write their own models share (audit_test.py,
story_test.py): the case's work folder, the checks and a chain model."""
import os
import shutil
import sys

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:
    print("python3-onnx is missing")
    sys.exit(77)

failures = []
counted = [0]


def check(cond, what):
    counted[0] += 1
    if not cond:
        failures.append(what)


def enter(work, case):
    """Makes WORK/CASE afresh and enters it; returns its path."""
    work = os.path.join(os.path.abspath(work), case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    return work


def model(name, ops, dims=(1, 8)):
    """A chain X -> ops[0] -> ... -> Y of unary float ops (opset 13), saved
    as NAME.onnx; a str dim is dynamic."""
    nodes, prev = [], "X"
    for i, op in enumerate(ops):
        out = "Y" if i == len(ops) - 1 else "t%d" % i
        nodes.append(helper.make_node(op, [prev], [out], name="%s_%d" % (op.lower(), i)))
        prev = out
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(dims))],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(dims))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, name + ".onnx")
    return name + ".onnx"


def tandem(exe, args, code, env=None):
    """Runs exe ARGS, checks its exit code; returns (stdout, stderr)."""
    import subprocess
    p = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, env=env)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "tandem %s: exit %d, expected %d\n  stderr: %s\n  stdout: %s"
          % (" ".join(args), p.returncode, code, se[-2000:], so[-2000:]))
    return so, se


def finish():
    """Prints the failed checks and exits 1, or prints the count."""
    if failures:
        for f in failures:
            print("FAIL:", f, file=sys.stderr)
        print("%d of %d checks failed" % (len(failures), counted[0]), file=sys.stderr)
        sys.exit(1)
    print("ok: %d checks" % counted[0])
