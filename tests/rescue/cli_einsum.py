#!/usr/bin/env python3
"""Einsum rescues against onnxruntime 1.31.1 (ctest rescue.einsum_ort; issue 18).

  cli_einsum.py TANDEM NPU_PROFILE MODELS WORKDIR

For each Einsum form of gen_models.py's EINSUM_MORE that the rule takes
(a label summed in one operand, one operand, three and four operands,
diagonals) and each element type (float32, float16, float64): the model
runs with `tandem run --devices vnpu:NPU,cpu --rescue safe` on inputs
cycling through the edge values (0, -0, ±1e-4, ±1, ±8, ±40, ±300; float16
up to ±8, where a product of three stays finite) and its output must equal
onnxruntime's on the same inputs: max |diff| <= tol x max(1, max |ort|),
tol 2e-5 (float32, float64) or 8e-3 (float16). The plan's "einsum" attempt
is kept (except einsum_chain4 in float16, refused by verification:
intermediate products overflow float16 on the edge values) and every node
it became runs on the device; the ops it became are printed.
"""
import json
import os
import sys
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
from clitest import Cli, outputs

TANDEM, NPU, MODELS, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
cli = Cli(TANDEM)
check, tandem = cli.check, cli.tandem
NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64}
TOL = {"f32": 2e-5, "f16": 8e-3, "f64": 2e-5}
EDGE = [0.0, -0.0, 1e-4, -1e-4, 1.0, -1.0, 8.0, -8.0, 40.0, -40.0, 300.0, -300.0]
FORMS = ["einsum_diag", "einsum_sum", "einsum_sum12", "einsum_sum_both", "einsum_t", "einsum_r", "einsum_bt",
         "einsum_all", "einsum_same", "einsum_chain3", "einsum_outer3", "einsum_cycle3", "einsum_skip3",
         "einsum_chain4", "einsum_diag1", "einsum_bdiag", "einsum_trace", "einsum_diag_mid"]
REFUSED = {("einsum_chain4", "f16")}
rng = np.random.default_rng(18)

for form in FORMS:
    for t, nt in NP.items():
        name = "%s_%s" % (form, t)
        path = os.path.join(MODELS, name + ".onnx")
        m = onnx.load(path)
        eq = onnx.helper.get_attribute_value(m.graph.node[0].attribute[0]).decode()
        edge = [v for v in EDGE if t != "f16" or abs(v) <= 8]
        feeds, args = {}, []
        for k, inp in enumerate(m.graph.input):
            shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
            n = int(np.prod(shape))
            vals = np.array([edge[(j * (k + 3) + k) % len(edge)] for j in range(n)], np.float64)
            vals = np.where(rng.random(n) < 0.3, rng.uniform(-2, 2, n), vals)
            feeds[inp.name] = vals.reshape(shape).astype(nt)
            f = os.path.join(WORK, "%s_%s.npy" % (name, inp.name))
            np.save(f, feeds[inp.name])
            args += ["--input", "%s=%s" % (inp.name, f)]
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0].astype(np.float64)
        d = os.path.join(WORK, name)
        tandem(["run", path, "--devices", "vnpu:%s,cpu" % NPU, "--rescue", "safe", "--output-dir", d, "--overwrite"]
               + args)
        got = outputs(d).get("y") if os.path.isdir(d) else None
        ok = got is not None and got.shape == want.shape
        diff = float(np.abs(got.astype(np.float64) - want).max()) if ok and want.size else 0.0 if ok else -1.0
        scale = max(1.0, float(np.abs(want).max()) if want.size else 0.0)
        check(ok and diff <= TOL[t] * scale, "%s '%s' against onnxruntime: max |diff| %.3g (max |ort| %.3g)"
              % (name, eq, diff, scale))
        led = json.loads(tandem(["plan", path, "--devices", "vnpu:%s,cpu" % NPU, "--rescue", "safe", "--json"]).stdout
                         or "{}")
        att = [a for a in led.get("rescue", {}).get("attempts", []) if a["rule"] == "einsum"]
        kept = bool(att) and att[0]["kept"]
        became = att[0].get("became", []) if kept else []
        ops = Counter(b["op"] for b in became)
        if (form, t) in REFUSED:
            check(att and not kept and "NaN" in json.dumps(att[0]), "%s: refused by verification (%s)" % (
                name, (att[0].get("why") or "").strip() if att else "no attempt"))
            continue
        check(kept and became and all(b["device"] != "cpu" and b["reason"] == "RESCUED" for b in became),
              "%s: kept, became %s on the device" % (name, ", ".join("%s %d" % kv for kv in sorted(ops.items()))))
        check("Einsum" not in ops, "%s: no Einsum in what it became" % name)
cli.finish()
