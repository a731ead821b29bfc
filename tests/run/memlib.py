"""What the memory tests (weights_memory.py, cnn_memory.py) share: a
child's peak RSS, the bound of issue 20 item 5 from a model's own figures,
and onnxruntime's peak for the same run. Memory figures only, never times."""
import json
import os
import subprocess

MIB = 1 << 20


def run_peak(args):
    """(exit code, peak RSS in bytes, stderr) of one run of args."""
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_maxrss * 1024, err


def model_figures(tandem, model, extra=()):
    """(weight bytes from `tandem info --json`, activation peak from `tandem
    plan --json`, number of partitions): the activation peak is the one cpu
    partition's peak_bytes less the weights."""
    extra = list(extra)
    info = json.loads(subprocess.run([tandem, "info", model, "--json"] + extra, capture_output=True,
                                     check=True).stdout)
    weights = info["params"]["bytes"]
    plan = json.loads(subprocess.run([tandem, "plan", model, "--json"] + extra, capture_output=True,
                                     check=True).stdout)
    parts = plan["partitions"]
    return weights, max(p["peak_bytes"] for p in parts) - weights, len(parts)


def bound(weights, act):
    """The goal: 1.15 x the weight bytes + the activation peak."""
    return 1.15 * weights + act


_ORT_CODE = (
    "import sys, numpy as np, onnxruntime as ort\n"
    "def hwm():\n"
    "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) * 1024\n"
    "base = hwm()\n"
    "o = ort.SessionOptions(); o.intra_op_num_threads = int(sys.argv[2])\n"
    "s = ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n"
    "shape = [int(d) for d in sys.argv[3].split('x')] if len(sys.argv) > 3 else None\n"
    "i = s.get_inputs()[0]\n"
    "s.run(None, {i.name: np.random.default_rng(0).uniform(-1, 1, shape or i.shape).astype(np.float32)})\n"
    "print(hwm() - base)\n")


def ort_peak(ort_py, model, threads, shape=None):
    """(onnxruntime's peak in bytes for one run, net of its interpreter with
    numpy and onnxruntime imported, or None; the error's tail)."""
    args = [ort_py, "-c", _ORT_CODE, model, str(threads)] + ([shape] if shape else [])
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()[-300:]
    return int(r.stdout.strip()), ""
