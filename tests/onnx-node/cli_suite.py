#!/usr/bin/python3
"""The ONNX backend node tests through the command line.

For every case folder (model.onnx + test_data_set_N/input_K.pb, output_K.pb)
not in an allow-list, and every data set of it, runs

    tandem run model.onnx --input NAME=input_K.pb ... \
        --output-dir D --output-format pb --overwrite --threads 1

then reads each D/<output>.pb and output_K.pb in the form the model declares
(TensorProto, SequenceProto, OptionalProto) and compares them with the rules
and tolerances of the C runner (compare.c): floats within
atol + rtol * |expected| (rtol 1e-3, atol 1e-7), NaN equal to NaN, infinities
only to themselves, complex by the magnitude of the difference; integers,
booleans and strings exactly; element types and shapes must match; sequences
item by item; an absent optional equals only an absent optional.

Prints one line per failing case, then `K allow-listed` and last, on its own
line, `N passed, N failed`. Exits 0 only when nothing failed and every case
named by --require ran and passed; 77 when the node folder is missing.
Reads the .pb files with Debian's python3-onnx (1.12) and numpy.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

RTOL = 1e-3  # CMP_RTOL in compare.h
ATOL = 1e-7  # CMP_ATOL in compare.h

FLOATS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
COMPLEX = {TensorProto.COMPLEX64, TensorProto.COMPLEX128}


def read_allowlist(path):
    names = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.add(line.split()[0])
    return names


# ------------------------------------------------------------ values

def tensor_value(tp, declared_elem):
    """(data_type, dims, numpy array) of a TensorProto. bfloat16 as float32;
    ONNX's generator stores bfloat16 data as uint16 bits (as the C runner,
    a uint16 tensor declared bfloat16 is taken as bfloat16)."""
    dt = tp.data_type
    if dt == TensorProto.UINT16 and declared_elem == TensorProto.BFLOAT16:
        dt = TensorProto.BFLOAT16
    dims = tuple(tp.dims)
    if dt == TensorProto.BFLOAT16:
        if tp.raw_data:
            bits = np.frombuffer(tp.raw_data, dtype="<u2").astype(np.uint32)
        else:
            bits = np.asarray(tp.int32_data, dtype=np.uint32) & 0xFFFF
        arr = (bits << 16).view(np.float32).reshape(dims)
    else:
        t = TensorProto()
        t.CopyFrom(tp)
        t.data_type = dt
        arr = numpy_helper.to_array(t)
    return (dt, dims, arr)


def elem_of(type_proto):
    """The element type of a declared tensor (through sequences/optionals)."""
    w = type_proto.WhichOneof("value")
    if w == "tensor_type":
        return type_proto.tensor_type.elem_type
    if w == "sequence_type":
        return elem_of(type_proto.sequence_type.elem_type)
    if w == "optional_type":
        return elem_of(type_proto.optional_type.elem_type)
    return 0


def sequence_value(sp, declared_elem):
    if len(sp.sequence_values) or len(sp.map_values) or len(sp.optional_values):
        raise ValueError("a sequence of non-tensors")
    return ("seq", [tensor_value(t, declared_elem) for t in sp.tensor_values])


def read_value(path, type_proto):
    """A value file read as the declared type says the node tests store it:
    ("tensor", …), ("seq", [...]) or ("none",)."""
    with open(path, "rb") as f:
        data = f.read()
    w = type_proto.WhichOneof("value")
    elem = elem_of(type_proto)
    if w == "optional_type":
        o = onnx.OptionalProto()
        o.ParseFromString(data)
        if o.HasField("tensor_value"):
            return ("tensor", tensor_value(o.tensor_value, elem))
        if o.HasField("sequence_value"):
            return sequence_value(o.sequence_value, elem)
        if o.HasField("sparse_tensor_value") or o.HasField("map_value") or o.HasField("optional_value"):
            raise ValueError("an optional of something other than a tensor or a sequence")
        return ("none",)
    if w == "sequence_type":
        s = onnx.SequenceProto()
        s.ParseFromString(data)
        return sequence_value(s, elem)
    t = TensorProto()
    t.ParseFromString(data)
    return ("tensor", tensor_value(t, elem))


def kind_name(v):
    return {"tensor": "a tensor", "seq": "a sequence", "none": "an absent optional"}[v[0]]


def cmp_tensor(got, want):
    gdt, gdims, g = got
    wdt, wdims, w = want
    if gdt != wdt:
        return "element type is %s, expected %s" % (TensorProto.DataType.Name(gdt), TensorProto.DataType.Name(wdt))
    if gdims != wdims:
        return "shape is %s, expected %s" % (list(gdims), list(wdims))
    g = np.asarray(g).reshape(-1)
    w = np.asarray(w).reshape(-1)
    n = w.size
    if wdt in FLOATS:
        a = g.astype(np.float64)
        b = w.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            finite = np.isfinite(a) & np.isfinite(b)
            ok = np.where(np.isnan(b), np.isnan(a),
                          np.where(np.isinf(b), a == b,
                                   finite & (np.abs(a - b) <= ATOL + RTOL * np.abs(b))))
    elif wdt in COMPLEX:
        a = g.astype(np.complex128)
        b = w.astype(np.complex128)
        special = ~(np.isfinite(a.real) & np.isfinite(a.imag) & np.isfinite(b.real) & np.isfinite(b.imag))

        def same(x, y):
            return np.where(np.isnan(y), np.isnan(x), x == y)

        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.where(special, same(a.real, b.real) & same(a.imag, b.imag),
                          np.abs(a - b) <= ATOL + RTOL * np.abs(b))
    elif wdt == TensorProto.STRING:
        ok = np.array([x == y for x, y in zip(g.tolist(), w.tolist())], dtype=bool)
    elif wdt == TensorProto.BOOL:
        ok = (g != 0) == (w != 0)
    else:
        ok = g == w
    bad = int(n - np.count_nonzero(ok))
    if bad:
        i = int(np.argmin(ok))
        idx = list(np.unravel_index(i, wdims)) if wdims else []
        return "%d of %d elements differ beyond rtol %g, atol %g; first at %s: %r, expected %r" % (
            bad, n, RTOL, ATOL, [int(k) for k in idx], g[i], w[i])
    return None


def cmp_values(got, want):
    """None when got matches want, else one sentence."""
    if got[0] != want[0]:
        return "got %s, expected %s" % (kind_name(got), kind_name(want))
    if want[0] == "none":
        return None
    if want[0] == "tensor":
        return cmp_tensor(got[1], want[1])
    if len(got[1]) != len(want[1]):
        return "sequence has %d items, expected %d" % (len(got[1]), len(want[1]))
    for i, (g, w) in enumerate(zip(got[1], want[1])):
        msg = cmp_tensor(g, w)
        if msg:
            return "item %d: %s" % (i, msg)
    return None


# --------------------------------------------------------- file names

def output_entries(names):
    """File names of --output-dir DIR --output-format pb (DESIGN.md): each
    character outside [A-Za-z0-9._-] becomes '_', '.' and '..' become
    underscores, an empty name is output_<index>, a collision with an
    earlier name gets _1, _2, ... in output order."""
    bases, entries = [], []
    for i, name in enumerate(names):
        if not name:
            base = "output_%d" % i
        else:
            base = re.sub(r"[^A-Za-z0-9._-]", "_", name)
            if base in (".", ".."):
                base = "_" * len(base)
        cand, k = base, 0
        while cand in bases or cand + ".pb" in entries:
            k += 1
            cand = "%s_%d" % (base, k)
        bases.append(cand)
        entries.append(cand + ".pb")
    return entries


# --------------------------------------------------------------- cases

def run_case(tandem, case_dir, timeout):
    """None for a pass, else the reason."""
    try:
        m = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - any load failure is the case's failure
        return "cannot read model.onnx with onnx: %s" % e
    inits = {t.name for t in m.graph.initializer}
    inputs = [v for v in m.graph.input if v.name not in inits]
    outputs = list(m.graph.output)
    entries = output_entries([v.name for v in outputs])
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    if not sets:
        return "no test_data_set_* folder"
    with tempfile.TemporaryDirectory(prefix="tdm-cli-node-") as tmp:
        for s in sets:
            sd = os.path.join(case_dir, s)
            fin = 0
            while os.path.exists(os.path.join(sd, "input_%d.pb" % fin)):
                fin += 1
            fout = 0
            while os.path.exists(os.path.join(sd, "output_%d.pb" % fout)):
                fout += 1
            if fin > len(inputs):
                return "%s has %d input files, the model has %d inputs" % (s, fin, len(inputs))
            if fout != len(outputs):
                return "%s has %d output files, the model has %d outputs" % (s, fout, len(outputs))
            od = os.path.join(tmp, s)
            cmd = [tandem, "run", os.path.join(case_dir, "model.onnx"), "--output-dir", od,
                   "--output-format", "pb", "--overwrite", "--threads", "1"]
            for k in range(fin):
                cmd += ["--input", "%s=%s" % (inputs[k].name, os.path.join(sd, "input_%d.pb" % k))]
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
            except subprocess.TimeoutExpired:
                return "%s: tandem run did not finish in %d s" % (s, timeout)
            if r.returncode != 0:
                err = r.stderr.decode("utf-8", "replace").strip().splitlines()
                return "%s: tandem run exited %d: %s" % (s, r.returncode, err[0] if err else "(no message)")
            for k, v in enumerate(outputs):
                gp = os.path.join(od, entries[k])
                try:
                    want = read_value(os.path.join(sd, "output_%d.pb" % k), v.type)
                except Exception as e:  # noqa: BLE001
                    return "%s/output_%d.pb: cannot read the expected value: %s" % (s, k, e)
                if not os.path.exists(gp):
                    return "%s: output '%s' was not written to %s" % (s, v.name, entries[k])
                try:
                    got = read_value(gp, v.type)
                except Exception as e:  # noqa: BLE001
                    return "%s: %s is not the declared form: %s" % (s, entries[k], e)
                msg = cmp_values(got, want)
                if msg:
                    return "%s output %d '%s': %s" % (s, k, v.name, msg)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tandem", required=True, help="the tandem executable")
    ap.add_argument("-a", "--allow", action="append", default=[], help="an allow-list (repeatable)")
    ap.add_argument("-k", "--only", action="append", default=[], help="run only these cases (repeatable)")
    ap.add_argument("--require", default="", help="comma-separated cases that must run and pass")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("-t", "--timeout", type=int, default=300, help="seconds per data set")
    ap.add_argument("node_dir")
    a = ap.parse_args()

    if not os.path.isdir(a.node_dir):
        print("no node tests in %s (run scripts/gen-node-tests.sh)" % a.node_dir)
        return 77
    allowed = set()
    for p in a.allow:
        allowed |= read_allowlist(p)
    cases = sorted(d for d in os.listdir(a.node_dir) if os.path.isfile(os.path.join(a.node_dir, d, "model.onnx")))
    if a.only:
        missing = [c for c in a.only if c not in cases]
        if missing:
            print("no such case: %s" % ", ".join(missing))
            return 1
        cases = [c for c in cases if c in a.only]
    run = [c for c in cases if c not in allowed]
    n_allowed = len(cases) - len(run)

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = {ex.submit(run_case, a.tandem, os.path.join(a.node_dir, c), a.timeout): c for c in run}
        for f in concurrent.futures.as_completed(futs):
            results[futs[f]] = f.result()
    failed = [c for c in run if results[c] is not None]
    for c in failed:
        print("%s: FAILED: %s" % (c, results[c]))
    rc = 1 if failed else 0
    for c in [x for x in a.require.split(",") if x]:
        if c not in results:
            print("%s: required, but %s" % (c, "allow-listed" if c in allowed else "not run"))
            rc = 1
        elif results[c] is None:
            print("%s: passed (required)" % c)
    print("%d of %d cases allow-listed, not run" % (n_allowed, len(cases)))
    print("%d passed, %d failed" % (len(run) - len(failed), len(failed)))
    return rc


if __name__ == "__main__":
    sys.exit(main())
