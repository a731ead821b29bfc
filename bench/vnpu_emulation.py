#!/usr/bin/python3
"""How fast the virtual NPU's host emulation is: the emulation ratio per model.

usage: bench/vnpu_emulation.py [--models LIST] [--profile NAME] [--threads N]
                               [--rounds N] [--iterations N] [--warmup N]
                               [--tandem PATH[,PATH...]] [--no-fusion] [--json FILE]

For every model, `tandem profile --json` runs it on `vnpu:PROFILE,cpu` (default
server-npu, which takes nearly every node) and on `cpu` alone, with the same
inputs and thread count (default 1), alternating the two round by round
(--rounds, default 3; the median of the rounds is kept). The emulation time is
the busy time of the vnpu device per run (the host emulating it: its nodes'
measured time). The cpu time of the same nodes is the sum, in the all-cpu
session, of the node rows whose names the vnpu ran; the all-cpu session is the
one a user runs by default (fused: a node folded into the one before it is
counted in that node's row), or --no-fusion's node-by-node reference.

Printed per model (a markdown table): nodes on the vnpu, emulation ms, the
ratio emulation / cpu, cpu ms of those nodes (the median over all rounds), and
the modeled device ms (the profile's figure, not a measurement). With several
binaries (--tandem A,B) every round runs each of them in turn (the order
alternating), so that a before/after comparison shares the machine's noise;
each gets its emulation and ratio columns.

Inputs are $TANDEM_CACHE/refs/<model>/inputs.txt when present (scripts/refs.sh),
else the CLI's fixed-seed random inputs; models are $TANDEM_CACHE/models.
Needs only the standard library. Exit status 0, or 1 when a run failed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.abspath(os.environ.get("TANDEM_CACHE") or os.path.join(ROOT, ".cache"))
MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "shufflenet_v2_x1_0",
          "transformer_op13", "transformer_op17", "ppocr_det", "ppocr_rec", "ppocr_cls"]


def inputs_of(model):
    path = os.path.join(CACHE, "refs", model, "inputs.txt")
    if not os.path.isfile(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out += ["--input", line.strip()]
    return out


def profile(tandem, model, devices, a):
    cmd = [tandem, "profile", os.path.join(CACHE, "models", model + ".onnx"), "--devices", devices,
           "--threads", str(a.threads), "--warmup", str(a.warmup), "--iterations", str(a.iterations),
           "--verify", "off", "--json"] + inputs_of(model)
    if a.no_fusion and devices == "cpu":
        cmd.append("--no-fusion")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-300:]))
    return json.loads(p.stdout)


def one_round(tandem, model, a):
    dev = "vnpu:" + a.profile
    v = profile(tandem, model, dev + ",cpu", a)
    c = profile(tandem, model, "cpu", a)
    it = float(v["iterations"])
    on_vnpu = {n["node"] for n in v["nodes"] if n["device"] == dev}
    emu = sum(n["total_ms"] for n in v["nodes"] if n["device"] == dev) / it
    cpu = sum(n["total_ms"] for n in c["nodes"] if n["node"] in on_vnpu) / float(c["iterations"])
    modeled = sum(d.get("modeled_ms_per_run") or 0 for d in v["device_totals"] if d["device"] == dev)
    return {"nodes": len(on_vnpu), "emulation_ms": emu, "cpu_ms": cpu, "modeled_ms": modeled,
            "nodes_total": len({n["node"] for n in v["nodes"]})}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--profile", default="server-npu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tandem", default=os.environ.get("TANDEM_BIN") or os.path.join(ROOT, "build", "tandem"))
    ap.add_argument("--no-fusion", action="store_true", help="compare with the all-cpu session's --no-fusion")
    ap.add_argument("--json", help="write every round's figures here")
    a = ap.parse_args()
    bins = a.tandem.split(",")
    models = [m for m in a.models.split(",") if m]
    res = {b: {m: [] for m in models} for b in bins}
    failed = 0
    for r in range(a.rounds):
        for m in models:
            for b in (bins if r % 2 == 0 else bins[::-1]):
                try:
                    res[b][m].append(one_round(b, m, a))
                except (RuntimeError, ValueError, KeyError) as ex:
                    sys.stderr.write("vnpu_emulation: %s\n" % ex)
                    failed = 1
    ref = "cpu --no-fusion" if a.no_fusion else "cpu (fused, the default)"
    print("vnpu:%s emulation against %s, %d thread(s), median of %d rounds of %d runs" %
          (a.profile, ref, a.threads, a.rounds, a.iterations))
    print("ratio = emulation ms of the nodes on the vnpu / ms of the same nodes in the all-cpu session")
    print()
    tag = (lambda i: " (%d)" % i) if len(bins) > 1 else (lambda i: "")
    cols = ["model", "nodes on vnpu"]
    for i in range(len(bins)):
        cols += ["emulation ms" + tag(i), "ratio" + tag(i)]
    cols += ["cpu ms", "modeled ms"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    summary = {}
    for m in models:
        # the cpu figure: the median over every binary's all-cpu rounds (the same cpu code)
        cpus = [x["cpu_ms"] for b in bins for x in res[b][m]]
        cpu = statistics.median(cpus) if cpus else None
        first = next((res[b][m][0] for b in bins if res[b][m]), None)
        row = [m, "%d of %d" % (first["nodes"], first["nodes_total"]) if first else "failed"]
        for b in bins:
            rs = res[b][m]
            if not rs or not cpu:
                row += ["failed", ""]
                continue
            emu = statistics.median(x["emulation_ms"] for x in rs)
            row += ["%.2f" % emu, "%.2f" % (emu / cpu)]
            summary.setdefault(b, {})[m] = {"emulation_ms": emu, "cpu_ms": cpu, "ratio": emu / cpu,
                                            "modeled_ms": rs[0]["modeled_ms"], "rounds": rs}
        row += ["%.2f" % cpu if cpu else "", "%.3f" % first["modeled_ms"] if first else ""]
        print("| " + " | ".join(row) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return failed


if __name__ == "__main__":
    sys.exit(main())
