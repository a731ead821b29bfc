#!/usr/bin/python3
"""Compare a run's outputs with reference outputs.

usage: /usr/bin/python3 tests/models/compare.py GOT_DIR REF_DIR [REF64_DIR]
           [--model MODEL --unfused UNFUSED_DIR]

For every .npy in REF_DIR (onnxruntime's outputs), GOT_DIR must hold the same
file name with equal shape and dtype. Floating outputs pass when their cosine
similarity is at least 0.99999 (only checked when the output has more than
one element) and their largest absolute difference is at most
1e-4 * max|ref| (1e-6 when max|ref| is 0). Integer and bool outputs must be
equal.

REF64_DIR, when given and holding the output, is a float64 referee
(scripts/oracle/f64_ref.py): an output that misses onnxruntime's bound still
passes when it meets the same bound against the exact float64 answer and is
closer to it than onnxruntime is — onnxruntime approximates some functions
(Sigmoid), and a model with large activations magnifies that. Both figures
are printed.

With --model, an output that MODEL produces with a DequantizeLinear of one
scale s (a quantized model's) is judged in steps of s instead: it passes when
every element is within one step of onnxruntime's, or when at least 99% of
its elements are and its cosine to onnxruntime's is at least 0.999. tandem,
like onnxruntime, runs each QDQ group (DequantizeLinear -> Conv/MatMul/Gemm ->
QuantizeLinear) as an integer kernel (ops/qdq.h), so resnet18_qdq and
mobilenet_v2_qdq are equal bit for bit; onnxruntime also fuses other ops of a
QDQ graph (Sigmoid, Resize, Concat) that tandem evaluates in float between
DequantizeLinear and QuantizeLinear, so a value on a rounding boundary can
land a step apart. UNFUSED_DIR (onnxruntime with graph optimisation off, the
float evaluation as written) is printed beside, not judged.

Prints one line per output and exits 1 when any output fails, 2 on bad usage.
"""
import os
import re
import sys

import numpy as np

COS_MIN = 0.99999
REL_TOL = 1e-4
ABS_TOL_ZERO = 1e-6


def compare_one(name, got, ref):
    """Returns (ok, line)."""
    if got.shape != ref.shape:
        return False, "%s: FAIL shape %s, expected %s" % (name, got.shape, ref.shape)
    if got.dtype != ref.dtype:
        return False, "%s: FAIL dtype %s, expected %s" % (name, got.dtype, ref.dtype)
    if np.issubdtype(ref.dtype, np.floating):
        g = got.astype(np.float64).ravel()
        r = ref.astype(np.float64).ravel()
        if ref.size == 0:
            return True, "%s: ok (empty %s)" % (name, ref.dtype)
        # NaN / +inf / -inf must sit at the same positions in both.
        nonfinite_ok = (np.array_equal(np.isnan(g), np.isnan(r))
                        and np.array_equal(np.isposinf(g), np.isposinf(r))
                        and np.array_equal(np.isneginf(g), np.isneginf(r)))
        both = np.isfinite(g) & np.isfinite(r)
        g = g[both]
        r = r[both]
        maxref = float(np.abs(r).max()) if r.size else 0.0
        maxabs = float(np.abs(g - r).max()) if r.size else 0.0
        limit = REL_TOL * maxref if maxref > 0 else ABS_TOL_ZERO
        if ref.size > 1:
            ng = np.linalg.norm(g)
            nr = np.linalg.norm(r)
            if ng == 0 and nr == 0:
                cos = 1.0
            elif ng == 0 or nr == 0:
                cos = 0.0
            else:
                cos = float(np.dot(g, r) / (ng * nr))
            cos_ok = cos >= COS_MIN
            cos_txt = "%.7f" % cos
        else:
            cos_ok = True
            cos_txt = "n/a"
        ok = cos_ok and maxabs <= limit and nonfinite_ok
        line = "%s: %s cosine %s maxabs %.3e max|ref| %.3e (limit %.3e)%s" % (
            name, "ok" if ok else "FAIL", cos_txt, maxabs, maxref, limit,
            "" if nonfinite_ok else " non-finite values differ")
        return ok, line
    if ref.dtype == np.bool_ or np.issubdtype(ref.dtype, np.integer):
        diff = int(np.count_nonzero(got != ref))
        ok = diff == 0
        return ok, "%s: %s exact %s, %d of %d elements differ" % (
            name, "ok" if ok else "FAIL", ref.dtype, diff, ref.size)
    ok = np.array_equal(got, ref)
    return ok, "%s: %s exact %s" % (name, "ok" if ok else "FAIL", ref.dtype)


def sanitize_name(name):
    """As the oracle names its files (scripts/oracle/make_inputs.py)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def rel_err(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    both = np.isfinite(a) & np.isfinite(b)
    m = float(np.abs(b[both]).max()) if both.any() else 0.0
    return float(np.abs(a[both] - b[both]).max()) / m if m > 0 else 0.0


def referee(name, got, ref, ref64_dir):
    """(ok, line) against the float64 referee, or None when it has no say."""
    if not ref64_dir or not np.issubdtype(ref.dtype, np.floating):
        return None
    path = os.path.join(ref64_dir, name + ".npy")
    if not os.path.isfile(path):
        return None
    exact = np.load(path, allow_pickle=False)
    if exact.shape != got.shape:
        return None
    ok, line = compare_one(name, got, exact.astype(got.dtype))
    e_got, e_ort = rel_err(got, exact), rel_err(ref, exact)
    ok = ok and e_got <= e_ort
    return ok, "%s: %s against the float64 referee: %s; tandem %.2e, onnxruntime %.2e of max|exact|" % (
        name, "ok" if ok else "FAIL", line.split(": ", 1)[1], e_got, e_ort)


QUANT_IN_STEP = 0.99
QUANT_COS_MIN = 0.999


def dequantized_outputs(model_path):
    """{graph output name: its DequantizeLinear's scale} for outputs a
    DequantizeLinear of one constant scale produces."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(model_path, load_external_data=False)
    consts = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = n.attribute[0].t
    outs = {o.name for o in m.graph.output}
    found = {}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] in outs and len(n.input) > 1 and n.input[1] in consts:
            scale = numpy_helper.to_array(consts[n.input[1]])
            if scale.size == 1:
                found[n.output[0]] = float(scale.reshape(()))
    return found


def steps_figures(got, ref, step):
    g = got.astype(np.float64).ravel()
    r = ref.astype(np.float64).ravel()
    d = np.abs(g - r) / step
    ng, nr = np.linalg.norm(g), np.linalg.norm(r)
    cos = float(np.dot(g, r) / (ng * nr)) if ng > 0 and nr > 0 else float(ng == nr)
    # (1e-3: the dequantized values themselves are rounded to float32)
    within = float(np.mean(d <= 1.001)) if d.size else 1.0
    return float(d.max()) if d.size else 0.0, within, cos


def compare_quantized(name, got, ref, step, unfused_dir):
    """(ok, line) for a dequantized output, judged in steps of its scale."""
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return compare_one(name, got, ref)
    mx, within, cos = steps_figures(got, ref, step)
    line = "%s: VERDICT dequantized (step %.4g): max %.1f steps, %.2f%% within one step, cosine %.6f" % (
        name, step, mx, 100 * within, cos)
    ok = mx <= 1.001 or (within >= QUANT_IN_STEP and cos >= QUANT_COS_MIN)
    line = line.replace("VERDICT", "ok" if ok else "FAIL")
    if mx > 1.001:
        line += " (needs all within one step, or %.0f%% and cosine %.3f)" % (100 * QUANT_IN_STEP, QUANT_COS_MIN)
    path = os.path.join(unfused_dir, name + ".npy") if unfused_dir else ""
    if os.path.isfile(path):
        umx, uwithin, ucos = steps_figures(got, np.load(path, allow_pickle=False), step)
        line += "; against onnxruntime unfused: max %.1f steps, %.2f%% within one step, cosine %.6f" % (
            umx, 100 * uwithin, ucos)
    return ok, line


def main(argv):
    argv = list(argv)
    opts = {}
    for flag in ("--model", "--unfused"):
        if flag in argv:
            i = argv.index(flag)
            if i + 1 >= len(argv):
                sys.stderr.write("compare: %s needs a value.\n" % flag)
                return 2
            opts[flag] = argv[i + 1]
            del argv[i:i + 2]
    if len(argv) not in (3, 4):
        sys.stderr.write("usage: compare.py GOT_DIR REF_DIR [REF64_DIR] [--model MODEL --unfused DIR]\n")
        return 2
    got_dir, ref_dir = argv[1], argv[2]
    ref64_dir = argv[3] if len(argv) == 4 else None
    quant = {}
    if "--model" in opts:
        from_model = dequantized_outputs(opts["--model"])
        quant = {sanitize_name(k): v for k, v in from_model.items()}
    if not os.path.isdir(ref_dir):
        sys.stderr.write("compare: reference folder %s does not exist.\n" % ref_dir)
        return 2
    names = sorted(f for f in os.listdir(ref_dir) if f.endswith(".npy"))
    if not names:
        sys.stderr.write("compare: reference folder %s holds no .npy file.\n" % ref_dir)
        return 2
    failed = []
    for f in names:
        name = f[:-4]
        gpath = os.path.join(got_dir, f)
        if not os.path.isfile(gpath):
            print("%s: FAIL missing %s" % (name, gpath))
            failed.append(name)
            continue
        try:
            got = np.load(gpath, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - report any unreadable file
            print("%s: FAIL cannot read %s (%s)" % (name, gpath, e))
            failed.append(name)
            continue
        ref = np.load(os.path.join(ref_dir, f), allow_pickle=False)
        if name in quant:
            ok, line = compare_quantized(name, got, ref, quant[name], opts.get("--unfused"))
            print(line)
            if not ok:
                failed.append(name)
            continue
        ok, line = compare_one(name, got, ref)
        print(line)
        if not ok and got.shape == ref.shape:
            r = referee(name, got, ref, ref64_dir)
            if r:
                ok, line = r
                print(line)
        if not ok:
            failed.append(name)
    if failed:
        if len(failed) == 1:
            sys.stderr.write("compare: output '%s' does not match the reference.\n" % failed[0])
        else:
            sys.stderr.write("compare: outputs %s do not match the reference.\n"
                             % ", ".join("'%s'" % n for n in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
