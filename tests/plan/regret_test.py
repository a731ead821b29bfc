#!/usr/bin/env python3
"""plan.regret.* (issue 20 item 6, issue 17): --granularity auto never
estimates worse than the plans it can cheaply evaluate, and its estimate is
the plan's whole cost. No timing is asserted: the measured regret is
scripts/regret_table.py's (README "Regret on a real device").

  regret_test.py TANDEM CACHE WORK vnpu
      squeezenet1_1, mobilenet_v2, shufflenet_v2_x1_0, transformer_op17 on
      rk3588, qnn-htp, coreml-ane, intel-npu: auto's estimated total is at
      most the least of cpu-only, greedy (op), graph and subgraph (modeled
      regret 1.0, bound 1.05), and equals its nodes + copies + one
      partition_overhead_us per device partition (the profile's), the
      ledger's auto.cost_ms included.
  regret_test.py TANDEM CACHE WORK opencl
      squeezenet1_1 and shufflenet_v2_x1_0 calibrated here on opencl: the
      file has cpu's fused and threaded times and the device's round trip;
      auto --calibration estimates at most the best of the four (bound
      1.05); greedy's copies are priced from the file's per-copy and
      per-byte figures (not 0) and its partitions at round_trip_ms. Then the
      file with opencl made 1000x faster (copies at most 2 us each) and a
      0.5 ms round trip: auto moves
      nodes to opencl, its total is nodes + copies + 0.5 ms per opencl
      partition, and it is still at most the best of the four."""
import json, os, subprocess, sys

tandem, cache, work, mode = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
fails = []
env = dict(os.environ, TANDEM_PLUGINS="", TANDEM_FALLBACK="")


def check(ok, msg):
    if not ok:
        fails.append(msg)
        print("FAIL: " + msg, flush=True)


def plan(model, args):
    r = subprocess.run([tandem, "plan", f"{cache}/models/{model}.onnx", "--json", *args], capture_output=True,
                       text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: tandem plan {model} {' '.join(args)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def near(a, b, tol=2e-5):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b)) + 2e-6 * 400  # ms figures printed at 1e-6


def parts_of(d, trip):
    """(the plan's total, recomputed total, device partitions) with `trip`
    ms per non-cpu partition."""
    nodes = sum(n["estimated_ms"] for n in d["nodes"] if n.get("estimated_ms") is not None)
    s = d["summary"]["estimated_ms"]
    dev_parts = sum(1 for p in d["partitions"] if p["device"] != "cpu")
    return s["total"], nodes + s["copies"] + dev_parts * trip, dev_parts


def candidates(model, devs, extra):
    out = {"cpu-only": plan(model, ["--devices", "cpu", *extra])}
    for g in ("op", "graph", "subgraph", "auto"):
        out[g] = plan(model, ["--devices", devs, "--granularity", g, *extra])
    return out


def regret_checks(label, c):
    est = {k: v["summary"]["estimated_ms"]["total"] for k, v in c.items()}
    best = min(v for k, v in est.items() if k != "auto")
    ratio = est["auto"] / best if best > 0 else 1.0
    print(f"{label}: " + ", ".join(f"{k} {v:.4f}" for k, v in est.items()) + f"; modeled regret {ratio:.4f}",
          flush=True)
    check(ratio <= 1.05, f"{label}: auto's estimate {est['auto']:.4f} ms is {ratio:.4f} x the best other {best:.4f}")
    check(est["auto"] <= best * (1 + 1e-6) + 1e-6,
          f"{label}: auto ({est['auto']:.6f} ms) is above a plan it evaluates ({best:.6f} ms)")
    au = c["auto"].get("auto", {})
    check(near(au.get("cost_ms", -1), est["auto"]),
          f"{label}: the ledger's auto.cost_ms {au.get('cost_ms')} is not the plan's total {est['auto']}")
    return ratio


if mode == "vnpu":
    prof_trip = {}
    for p in ("rk3588", "qnn-htp", "coreml-ane", "intel-npu"):
        prof = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles",
                                           p + ".json")))
        prof_trip[p] = prof.get("partition_overhead_us", 0) / 1000.0
    worst = 0
    for m in ("squeezenet1_1", "mobilenet_v2", "shufflenet_v2_x1_0", "transformer_op17"):
        for p, trip in prof_trip.items():
            c = candidates(m, f"vnpu:{p},cpu", [])
            worst = max(worst, regret_checks(f"{m} on {p}", c))
            for g in ("auto", "op"):
                tot, re, dp = parts_of(c[g], trip)
                check(near(tot, re), f"{m} on {p} ({g}): total {tot:.6f} ms is not nodes + copies + {dp} x "
                                     f"{trip} ms of round trips ({re:.6f})")
    print(f"worst modeled regret {worst:.4f}")
elif mode == "opencl":
    worst = 0
    for m in ("squeezenet1_1", "shufflenet_v2_x1_0"):
        cal = f"{work}/{m}.opencl.json"
        r = subprocess.run([tandem, "calibrate", f"{cache}/models/{m}.onnx", "--devices", "opencl", "--random",
                            "--out", cal], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise SystemExit(f"FAIL: calibrate {m}: {r.stderr.strip()}")
        f = json.load(open(cal))
        dev = next(d for d in f["devices"] if d["name"] == "opencl")
        cpu = [e["devices"]["cpu"] for e in f["nodes"].values()]
        check(all("fused_ms" in x and "threaded_ms" in x for x in cpu), f"{m}: cpu entries without fused/threaded times")
        check("round_trip_ms" in dev and dev["round_trip_ms"] >= 0, f"{m}: no round_trip_ms for opencl: {dev}")
        check(f.get("cpu_session", {}).get("fused_run_ms", 0) > 0, f"{m}: no cpu_session figures")
        # the planner reads the copy figures clamped at 0 (plan/calib.c): a
        # per-byte slope fitted under load can come out negative
        cp = {k: max(0.0, v) if isinstance(v, (int, float)) else v for k, v in dev["copy"].items()}
        c = candidates(m, "opencl,cpu", ["--calibration", cal])
        worst = max(worst, regret_checks(f"{m} on opencl (calibrated)", c))
        # greedy's copies from the file's figures
        g = c["op"]
        want = 0.0
        for p in g["partitions"]:
            for i in p.get("inputs", []):
                if i["from"] == "host" and p["device"] == "opencl":
                    want += cp["to_device_per_copy_ms"] + cp["to_device_per_byte_ms"] * i["bytes"]
                elif i["from"] == "opencl" and p["device"] == "cpu":
                    want += cp["to_host_per_copy_ms"] + cp["to_host_per_byte_ms"] * i["bytes"]
        got = g["summary"]["estimated_ms"]["copies"]
        check(got > 0 and want > 0, f"{m}: greedy's copies are not priced ({got} ms)")
        # the graph outputs' copies to the host are not partition inputs
        outs = got - want
        check(outs >= -1e-4 and outs <= (cp["to_host_per_copy_ms"] + cp["to_host_per_byte_ms"] * 4e6) * 4,
              f"{m}: greedy's copies {got:.6f} ms against {want:.6f} ms from the file's figures")
        tot, re, dp = parts_of(g, dev["round_trip_ms"])
        check(near(tot, re), f"{m} greedy: total {tot:.6f} is not nodes + copies + {dp} round trips ({re:.6f})")
        # a fast device with a costly round trip
        fast = dict(f)
        for e in fast["nodes"].values():
            o = e["devices"].get("opencl")
            if o and "ms" in o:
                o["ms"] = o["ms"] / 1000.0
        for d in fast["devices"]:
            if d["name"] == "opencl":
                d["round_trip_ms"] = 0.5
                for k in ("to_device_per_copy_ms", "to_host_per_copy_ms"):
                    d["copy"][k] = min(d["copy"][k], 0.002)
        cal2 = f"{work}/{m}.fast.json"
        json.dump(fast, open(cal2, "w"))
        c2 = candidates(m, "opencl,cpu", ["--calibration", cal2])
        worst = max(worst, regret_checks(f"{m} on a 1000x opencl with 0.5 ms round trips", c2))
        a = c2["auto"]
        on = sum(1 for n in a["nodes"] if n["device"] == "opencl")
        check(on > 0, f"{m}: auto left a 1000x faster opencl unused")
        tot, re, dp = parts_of(a, 0.5)
        print(f"{m} fast: auto {on} nodes on opencl, {dp} opencl partitions, total {tot:.4f} ms", flush=True)
        check(dp >= 1 and near(tot, re), f"{m} fast: auto's total {tot:.6f} is not nodes + copies + {dp} x 0.5 ms ({re:.6f})")
    print(f"worst modeled regret {worst:.4f}")
else:
    raise SystemExit(f"unknown mode {mode}")
print("FAILED: %d" % len(fails) if fails else "OK")
sys.exit(1 if fails else 0)
