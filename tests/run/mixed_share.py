#!/usr/bin/env python3
"""The cpu share of mixed plans against the same nodes in an all-cpu session
(issue 20 item 1), for the README's Status table:

    mixed_share.py CACHE_DIR TANDEM [TANDEM_BEFORE] [--devices D] [--rounds R]
                   [--iterations N] [--threads T] [--models a,b]

For each model of bench/ (inputs from CACHE_DIR/refs/<model>/inputs.txt,
PP-OCR at the shapes of the README), in one run and alternating, per round:
`TANDEM profile --devices cpu`, then `profile --devices D` with TANDEM_BEFORE
(when given) and with TANDEM. The cpu share of a mixed profile is the sum
of its cpu nodes' mean times per run; the reference is the sum of the same
nodes' mean times in the all-cpu profile of the same round. Prints one
Markdown row per model: median times over the rounds, and the median (and
range) of the rounds' ratios. A cpu node the all-cpu session fuses away into
its head that the mixed plan (after) runs on its own, the head being on
another device, has no time of its own all-cpu (it is in the head's): such
nodes are kept apart, with their times.
"""
import json
import os
import statistics
import subprocess
import sys

MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "shufflenet_v2_x1_0",
          "transformer_op17", "ppocr_det", "ppocr_rec", "ppocr_cls", "ssdlite320"]
FUSED_AWAY_MS = 0.001  # a node the all-cpu profile reports below this ran inside its head
SHAPES = {"ppocr_det": "1x3x640x640", "ppocr_rec": "1x3x48x320", "ppocr_cls": "1x3x48x192"}


def profile(tandem, cache, model, devices, iterations, threads):
    cmd = [tandem, "profile", os.path.join(cache, "models", model + ".onnx"), "--devices", devices,
           "--warmup", "5", "--iterations", str(iterations), "--threads", str(threads), "--json"]
    with open(os.path.join(cache, "refs", model, "inputs.txt")) as f:
        for line in f:
            line = line.strip()
            if "=" in line:
                name = line.rsplit("=", 1)[0]
                cmd += ["--input", line]
                if model in SHAPES:
                    cmd += ["--shape", name + "=" + SHAPES[model]]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit("%s: %s" % (" ".join(cmd), out.stderr.strip()))
    return json.loads(out.stdout)


def cpu_nodes(prof):
    return {n["node"]: n["mean_ms"] for n in prof["nodes"] if n["device"] == "cpu"}


def main():
    args = sys.argv[1:]
    opts = {"--devices": "vnpu:edge-npu,cpu", "--rounds": "3", "--iterations": "20", "--threads": "1",
            "--models": ",".join(MODELS)}
    pos = []
    i = 0
    while i < len(args):
        if args[i] in opts:
            opts[args[i]] = args[i + 1]
            i += 2
        else:
            pos.append(args[i])
            i += 1
    cache, tandem = pos[0], pos[1]
    before = pos[2] if len(pos) > 2 else None
    rounds, iters, threads = int(opts["--rounds"]), int(opts["--iterations"]), int(opts["--threads"])
    print("| model | cpu nodes: compared + apart | same nodes in all-cpu, ms | before: cpu share ms | ratio "
          "| after: cpu share ms | ratio | apart: before / after ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for model in opts["--models"].split(","):
        ratios = {"before": [], "after": []}
        share = {"before": [], "after": []}
        apart = {"before": [], "after": []}
        refs = []
        ncpu = napart = 0
        for _ in range(rounds):
            ref = cpu_nodes(profile(tandem, cache, model, "cpu", iters, threads))
            runs = {}
            for tag, exe in (("before", before), ("after", tandem)):
                if exe:
                    runs[tag] = cpu_nodes(profile(exe, cache, model, opts["--devices"], iters, threads))
            # a node the all-cpu session fuses away into its head but the
            # mixed plan (after) runs on its own, its head being on another
            # device, has no time of its own all-cpu (it is the head's): kept apart
            after = runs["after"]
            split = {n for n in after if ref.get(n, 0.0) < FUSED_AWAY_MS <= after[n]}
            if sum(ref.get(n, 0.0) for n in after if n not in split) < FUSED_AWAY_MS * len(after):
                split = set(after)  # all of them ran inside heads off the set
            for tag, mixed in runs.items():
                comp = [n for n in mixed if n not in split]
                ncpu, napart = len(comp), len(mixed) - len(comp)
                s = sum(mixed[n] for n in comp)
                same = sum(ref[n] for n in comp)
                share[tag].append(s)
                apart[tag].append(sum(mixed.values()) - s)
                if tag == "after":
                    refs.append(same)
                if same > 0:
                    ratios[tag].append(s / same)
        if not ncpu and not napart:
            print("| %s | 0 | | | | | | |" % model, flush=True)
            continue
        cells = ["%d + %d" % (ncpu, napart), "%.2f" % statistics.median(refs)]
        for tag in ("before", "after"):
            r = ratios[tag]
            cells += ["%.2f" % statistics.median(share[tag]) if share[tag] else "",
                      "%.2f (%.2f-%.2f)" % (statistics.median(r), min(r), max(r)) if r else ""]
        cells.append("%.2f / %.2f" % (statistics.median(apart["before"]) if apart["before"] else 0,
                                      statistics.median(apart["after"])) if napart else "")
        print("| %s | %s |" % (model, " | ".join(cells)), flush=True)

if __name__ == "__main__":
    main()
