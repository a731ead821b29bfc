#!/usr/bin/env python3
"""Regret of --granularity auto on a real device (README "Regret on a real
device", issue 20 item 6): per model, `tandem calibrate --devices DEV`, then
the plans cpu-only, graph, subgraph, greedy and auto --calibration on
DEV,cpu, each estimated (`tandem plan --json`) and measured (`tandem bench
--paced`: all plans warmed up in their own process, then ROUNDS rounds that
run the plans one after the other, ITERATIONS runs each, so that a noisy
machine hits every plan alike); the median of all samples per plan. The
cpu-only plan is every op type pinned to cpu in a DEV,cpu session (the
executor the others use); graph, subgraph and greedy are measured once when
their placements are the same.
regret = measured(auto) / the best measured; the modeled regret is the same
ratio of estimates. One markdown row per model.

usage: regret_table.py TANDEM MODELS_DIR WORK_DIR [--device opencl]
                       [--rounds 5] [--iterations 10] [--models a,b,...]
                       [--keep-calibration 1] [--mixed OP,OP,...]
--keep-calibration 1 reuses WORK/MODEL.DEV.json when it is there (the same
measured figures for two builds' estimates). --mixed also measures, in the
same rounds, a mixed plan: --granularity op with those op types pinned to
cpu (those the model has), and prints a second table of its estimate against its measurement
beside the cpu-only plan's (the cpu partitions of a mixed plan run fused
and are priced so: the two ratios should agree)."""
import json, os, statistics, subprocess, sys

SHAPES = {"ppocr_det": ["x=1x3x640x640"], "ppocr_rec": ["x=1x3x48x320"], "ppocr_cls": ["x=1x3x48x192"]}
LABEL = {"ppocr_det": "ppocr_det 640²", "ppocr_rec": "ppocr_rec 48×320", "ppocr_cls": "ppocr_cls 48×192"}
MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "shufflenet_v2_x1_0",
          "transformer_op17", "ppocr_cls", "ppocr_rec"]
PLANS = ["cpu-only", "graph", "subgraph", "greedy", "auto"]


def plan_args(dev, plan, cal, ops):
    if plan == "cpu-only":  # in the same session kind as the others: every op type pinned to cpu
        return ["--devices", f"{dev},cpu", "--calibration", cal] + [x for op in ops for x in ("--pin", f"{op}=cpu")]
    return ["--devices", f"{dev},cpu", "--granularity", plan, "--calibration", cal]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[:300]}")
    return r.stdout


def plan_json(tandem, path, shapes, args):
    return json.loads(run([tandem, "plan", path, "--json", *shapes, *args]))


def estimate(d):
    s = d["summary"]
    on_dev = sum(1 for n in d["nodes"] if n["device"] != "cpu")
    return s["estimated_ms"]["total"], s["estimated_ms"]["copies"], s["partitions"], on_dev, d.get("auto", {}).get("method", "")


def measure(tandem, path, shapes, plans, rounds, iterations):
    """{plan: median ms} from paced bench processes run in alternation;
    iterations: {plan: timed runs per round}."""
    procs = {}
    samples = {p: [] for p in plans}
    try:
        for p, args in plans.items():
            cmd = [tandem, "bench", path, *shapes, *args, "--paced", "--warmup", "2", "--iterations",
                   str(iterations[p]), "--rounds", str(rounds)]
            procs[p] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, bufsize=1)
        for p, pr in procs.items():  # every warm-up done before the first round
            line = pr.stdout.readline()
            if '"ready"' not in line:
                raise RuntimeError(f"bench {p}: no ready line ({line.strip()[:100]})")
        for r in range(rounds):
            order = list(procs) if r % 2 == 0 else list(reversed(list(procs)))
            for p in order:
                procs[p].stdin.write("go\n")
                procs[p].stdin.flush()
                ev = json.loads(procs[p].stdout.readline())
                samples[p] += ev["samples_ms"]
    finally:
        for pr in procs.values():
            try:
                pr.stdin.close()
            except OSError:
                pass
            pr.wait(timeout=120)
    return {p: statistics.median(v) for p, v in samples.items()}


def main():
    a = sys.argv[1:]
    if len(a) < 3:
        sys.exit(__doc__)
    tandem, models_dir, work = a[0], a[1], a[2]
    opt = {"--device": "opencl", "--rounds": "5", "--iterations": "10", "--models": ",".join(MODELS),
           "--keep-calibration": "0", "--mixed": ""}
    for k in range(3, len(a) - 1, 2):
        opt[a[k]] = a[k + 1]
    dev, rounds, iters = opt["--device"], int(opt["--rounds"]), int(opt["--iterations"])
    os.makedirs(work, exist_ok=True)
    print("| model | estimated ms: cpu-only | graph | subgraph | greedy | auto | measured ms: cpu-only | graph | "
          "subgraph | greedy | auto | auto's plan | modeled regret | regret |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    worst = 0
    mixed_rows = []
    mixed_ops = [op for op in opt["--mixed"].split(",") if op]
    for m in opt["--models"].split(","):
        path = f"{models_dir}/{m}.onnx"
        shapes = [x for s in SHAPES.get(m, []) for x in ("--shape", s)]
        cal = f"{work}/{m}.{dev}.json"
        if opt["--keep-calibration"] == "0" or not os.path.exists(cal):
            run([tandem, "calibrate", path, "--devices", dev, "--random", "--out", cal, *shapes])
        ops = sorted({n["op"] for n in plan_json(tandem, path, shapes, ["--devices", "cpu"])["nodes"]})
        plans = {p: plan_args(dev, p, cal, ops) for p in PLANS}
        js = {p: plan_json(tandem, path, shapes, plans[p]) for p in PLANS}
        est = {p: estimate(js[p]) for p in PLANS}
        # one measurement per distinct placement; plans estimated past 3x the
        # best run fewer times per round
        place = {p: tuple(n["device"] for n in js[p]["nodes"]) for p in PLANS}
        uniq = {}
        for p in PLANS:  # cpu-only and auto always run themselves
            uniq.setdefault(place[p] if p not in ("cpu-only", "auto") else p, p)
        e_best = min(v[0] for v in est.values())
        todo = {q: plans[q] for q in uniq.values()}
        its = {q: iters if est[q][0] <= 3 * e_best else max(1, iters // 4) for q in todo}
        mixed_pins = [x for op in mixed_ops if op in ops for x in ("--pin", f"{op}=cpu")]  # those the model has
        if mixed_pins:
            todo["mixed"] = ["--devices", f"{dev},cpu", "--granularity", "op", "--calibration", cal, *mixed_pins]
            mj = plan_json(tandem, path, shapes, todo["mixed"])
            its["mixed"] = iters
        got = measure(tandem, path, shapes, todo, rounds, its)
        if mixed_pins:
            me, mm = mj["summary"]["estimated_ms"]["total"], got["mixed"]
            ncpu = sum(1 for n in mj["nodes"] if n["device"] == "cpu")
            nf = sum(1 for n in mj["nodes"] if n.get("fused"))
            mixed_rows.append(f"| {LABEL.get(m, m)} | {mj['summary']['partitions']} | {ncpu} ({nf}) | {me:.3f} | "
                              f"{mm:.3f} | {me / mm:.2f} | {est['cpu-only'][0]:.3f} | {got['cpu-only']:.3f} | "
                              f"{est['cpu-only'][0] / got['cpu-only']:.2f} |")
        meas = {p: got[uniq[place[p] if p not in ("cpu-only", "auto") else p]] for p in PLANS}
        m_best = min(meas.values())
        reg, mreg = meas["auto"] / m_best, est["auto"][0] / e_best
        worst = max(worst, reg)
        _, cp, parts, on_dev, _ = est["auto"]
        what = "all cpu" if on_dev == 0 else f"{on_dev} nodes on {dev}, {parts} partitions, copies {cp:.3f} ms"
        print(f"| {LABEL.get(m, m)} | " + " | ".join(f"{est[p][0]:.3f}" for p in PLANS) + " | " +
              " | ".join(f"{meas[p]:.3f}" for p in PLANS) + f" | {what} | {mreg:.3f} | {reg:.3f} |", flush=True)
    print(f"\nworst regret {worst:.3f}", flush=True)
    if mixed_rows:
        print(f"\nmixed plan: --granularity op, {opt['--mixed']} pinned to cpu\n")
        print("| model | partitions | cpu nodes (fused away) | estimated ms | measured ms | ratio | cpu-only estimated "
              "| measured | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in mixed_rows:
            print(r, flush=True)


main()
