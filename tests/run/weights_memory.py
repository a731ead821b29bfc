#!/usr/bin/env python3
"""Memory proportional to the model once (issue 20 item 5), on matmul_ext384
(24 MatMul 2048x2048 float, 384 MiB of external data; scripts/models.sh):

- `tandem run` (1 and 2 threads) peaks at most 1.15 x the weight bytes + the
  activation peak (RSS: the weights are mapped, packed once, and the pages of
  a packed original are dropped);
- `tandem info` and `tandem plan` (also for vnpu:server-npu,cpu) read none of the external data (strace
  counts read/pread64 bytes on the data file) and their peak RSS is under a
  tenth of the weight bytes (the mapping is never touched);
- so does `tandem run --devices vnpu:server-npu,cpu` (the precision guard's
  cpu fp32 reference and probe on the first run);
- with ORT_PYTHON (onnxruntime's venv python), `tandem run` peaks below
  onnxruntime's own peak for the same run (its VmHWM net of the
  interpreter's after importing numpy and onnxruntime).

Peak RSS is the child's ru_maxrss (an upper bound: it counts the forking
interpreter's pages before exec). Memory figures only, never times.

usage: weights_memory.py TANDEM MODEL [ORT_PYTHON]
"""
import os
import re
import shutil
import subprocess
import sys

from memlib import MIB, bound as goal, model_figures, ort_peak, run_peak


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: weights_memory.py TANDEM MODEL [ORT_PYTHON]")
    tandem, model = sys.argv[1:3]
    ort_py = sys.argv[3] if len(sys.argv) == 4 else ""
    if not os.path.exists(model):
        print(f"weights_memory: {model} is absent (scripts/models.sh matmul_ext384 makes it)")
        return 77
    data = os.path.splitext(model)[0] + ".data"
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(f"weights_memory: {what}: {'ok' if ok else 'FAIL'}")
        failed += not ok

    weights, act, n_parts = model_figures(tandem, model)
    # one cpu partition: its peak is the weights plus the live activations
    check(n_parts == 1 and 0 <= act < 16 * MIB,
          f"weights {weights / MIB:.1f} MiB, activation peak {act / MIB:.3f} MiB")
    bound = goal(weights, act)

    cases = {"info": ["info", model], "plan": ["plan", model],
             "plan --devices vnpu:server-npu,cpu": ["plan", model, "--devices", "vnpu:server-npu,cpu"]}
    for case, args in cases.items():
        st, rss, err = run_peak([tandem] + args)
        check(st == 0 and rss < weights / 10,
              f"{case}: exit {st}, peak RSS {rss / MIB:.1f} MiB (under {weights / 10 / MIB:.1f}){' ' + err.strip() if st else ''}")
    if shutil.which("strace"):
        work = os.environ.get("TMPDIR", "/tmp")
        for k, (case, args) in enumerate(cases.items()):
            log = os.path.join(work, f"weights_memory.{os.getpid()}.{k}.strace")
            r = subprocess.run(["strace", "-f", "-y", "-o", log, "-e", "trace=read,pread64,preadv,preadv2",
                                tandem] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            nread = 0
            name = os.path.basename(data) + ">"
            for line in open(log):
                m = re.search(r"= (\d+)\s*$", line)
                if name in line and m:
                    nread += int(m.group(1))
            os.unlink(log)
            check(r.returncode == 0 and nread == 0, f"{case}: {nread} bytes of {os.path.basename(data)} read")
    else:
        print("weights_memory: strace is not installed: bytes read not counted")

    peaks = {}
    for threads in (1, 2):
        st, rss, err = run_peak([tandem, "run", model, "--random", "--threads", str(threads)])
        peaks[threads] = rss
        check(st == 0 and rss <= bound,
              f"run --threads {threads}: exit {st}, peak RSS {rss / MIB:.1f} MiB "
              f"({rss / weights:.3f}x the weights; bound {bound / MIB:.1f}){' ' + err.strip() if st else ''}")
    # A mixed plan under the precision guard: the MatMuls on an fp16 vnpu,
    # checked against the cpu fp32 reference (which packs the weights) on
    # the first run; the probe reads every weight for its ranges, and none
    # may stay resident beside the packed forms.
    st, rss, err = run_peak([tandem, "run", model, "--random", "--devices", "vnpu:server-npu,cpu"])
    check(st == 0 and rss <= bound,
          f"run --devices vnpu:server-npu,cpu (guarded): exit {st}, peak RSS {rss / MIB:.1f} MiB "
          f"({rss / weights:.3f}x the weights; bound {bound / MIB:.1f}){' ' + err.strip() if st else ''}")

    if ort_py:
        for threads in (1, 2):
            net, err = ort_peak(ort_py, model, threads)
            if net is None:
                check(False, f"onnxruntime --threads {threads}: {err}")
                continue
            check(peaks[threads] < net, f"run --threads {threads}: {peaks[threads] / MIB:.1f} MiB against "
                  f"onnxruntime's {net / MIB:.1f} MiB (net of its interpreter)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
