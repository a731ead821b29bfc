#!/usr/bin/python3
"""Tests of `tandem logs` (fallback analysis over many runs) and `tandem diff`
(two ledgers of one model). The logs and ledgers are written by the built CLI
(run --fallback-log, run --ledger, plan --json, profile --json) on models
written here and, when $TANDEM_CACHE/models holds them, squeezenet1_1 and
resnet18, on several devices; every count `tandem logs` reports is checked
against counts computed here from the raw files. Usage:

    logs_test.py TANDEM WORK_DIR CASE

Exit 0 pass, 1 fail (77 when python3-onnx is missing, which ctest counts as a failure here)."""
import collections
import json
import os
import subprocess
import sys

from chain import check, counted, enter, failures, model

TANDEM, CASE = sys.argv[1], sys.argv[3]
WORK = enter(sys.argv[2], CASE)
CACHE = os.path.join(os.environ.get("TANDEM_CACHE", ""), "models")


def tandem(args, code=0):
    p = subprocess.run([TANDEM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "tandem %s: exit %d, expected %d\n  stderr: %s\n  stdout: %s"
          % (" ".join(args), p.returncode, code, se.strip()[:2000], so[:2000]))
    return so, se


EDGE, RK, QNN = "vnpu:edge-npu,cpu", "vnpu:rk3588,cpu", "vnpu:qnn-htp,cpu"


def corpus():
    """Writes logs/ (run and profile --fallback-log, run --ledger, plan
    --json, profile --json in nested folders) from several models and devices."""
    erf = model("erf", ["Relu", "Erf", "Relu", "Erf", "Relu"])
    mix = model("mix", ["Relu", "Erf", "Sigmoid", "Softplus", "Relu", "Sin", "Relu"])
    os.makedirs("logs/host-a/edge")
    os.makedirs("logs/host-b/rk")
    os.makedirs("logs/plans")
    runs = [(erf, EDGE, "host-a/edge/erf"), (mix, EDGE, "host-a/edge/mix"), (mix, RK, "host-b/rk/mix"),
            (erf, QNN, "host-b/erf-qnn")]
    big = [(os.path.join(CACHE, "squeezenet1_1.onnx"), RK, "host-b/rk/squeezenet"),
           (os.path.join(CACHE, "resnet18.onnx"), EDGE, "host-a/edge/resnet18")]
    runs += [r for r in big if os.path.exists(r[0])]
    for m, dev, stem in runs:
        tandem(["run", m, "--random", "--devices", dev, "--granularity", "op", "--fallback-log",
                "logs/%s.jsonl" % stem, "--ledger", "logs/%s.json" % stem])
    so, _ = tandem(["plan", mix, "--devices", QNN, "--json"])
    with open("logs/plans/mix-qnn.json", "w") as f:
        f.write(so)
    tandem(["profile", erf, "--devices", RK, "--iterations", "2", "--warmup", "0", "--json", "--fallback-log",
            "logs/host-b/rk/erf-profile.jsonl"])
    so, _ = tandem(["profile", erf, "--devices", RK, "--iterations", "2", "--warmup", "0", "--json"])
    with open("logs/host-b/rk/erf-profile.json", "w") as f:
        f.write(so)
    # Not read from a folder: neither *.jsonl nor *.json.
    with open("logs/notes.txt", "w") as f:
        f.write("not a log\n")
    return erf, mix


def expected(paths):
    """The records `tandem logs` should count, from the raw files."""
    recs = []
    for p in paths:
        if p.endswith(".jsonl"):
            for line in open(p):
                if not line.strip():
                    continue
                r = json.loads(line)
                if r["event"] == "fallback":
                    cost = r["total_ms"] if "total_ms" in r else r.get("modeled_ms")
                    recs.append(dict(model=os.path.basename(r["model"]), op=r["op"], reason=r["reason"],
                                     device=r["preferred"], host=r.get("host", ""), time=r.get("time"),
                                     cost=cost, fault=False, measured=r.get("total_ms"),
                                     modeled=r.get("modeled_ms")))
                elif r["event"] == "device_fault":
                    recs.append(dict(device=r["device"], fault=True))
            continue
        d = json.load(open(p))
        first = d["devices"][0]
        profile = "iterations" in d
        for n in d["nodes"]:
            if profile:
                if not n["fallback"]:
                    continue
                modeled = n["modeled_ms_per_call"] * n["calls"] if "modeled_ms_per_call" in n else None
                recs.append(dict(model=os.path.basename(d["model"]), op=n["op"], reason=n["reason"], device=first,
                                 host="", time=None, cost=n["total_ms"], fault=False, measured=n["total_ms"],
                                 modeled=modeled))
            elif n["device"] != first and n["reason"] != "USER":
                recs.append(dict(model=os.path.basename(d["model"]), op=n["op"], reason=n["reason"], device=first,
                                 host="", time=None, cost=n.get("estimated_ms"), fault=False, measured=None,
                                 modeled=n.get("estimated_ms")))
    return recs


def walk(root):
    out = []
    for d, dirs, files in os.walk(root):
        out += [os.path.join(d, f) for f in files if f.endswith(".jsonl") or f.endswith(".json")]
    return sorted(out)


def counts(recs, key):
    return collections.Counter(r[key] for r in recs if not r["fault"])


def near(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def logs_json(args, code=0):
    so, se = tandem(["logs", "--json"] + args, code)
    try:
        return json.loads(so), se
    except ValueError:
        check(False, "logs --json is not JSON: %s" % so[:500])
        return None, se


def case_counts():
    corpus()
    files = walk("logs")
    recs = expected(files)
    fb = [r for r in recs if not r["fault"]]
    check(len(fb) >= 10, "the corpus holds %d fallbacks" % len(fb))
    j, se = logs_json(["logs"])
    if not j:
        return
    check(se == "", "stderr of a clean corpus: %s" % se)
    check(j["files"]["read"] == len(files), "files read %s, expected %d" % (j["files"], len(files)))
    check(j["files"]["fallback_logs"] == sum(f.endswith(".jsonl") for f in files), "logs %s" % j["files"])
    check(j["files"]["profiles"] == 1, "profiles %s" % j["files"])
    check(j["fallbacks"] == len(fb), "fallbacks %d, expected %d" % (j["fallbacks"], len(fb)))
    for key, jkey, name in [("reason", "by_reason", "reason"), ("op", "by_op", "op"), ("model", "by_model", "model"),
                            ("device", "by_device", "device")]:
        got = {x[name]: x["count"] for x in j[jkey]}
        check(got == dict(counts(recs, key)), "%s: %s, expected %s" % (jkey, got, dict(counts(recs, key))))
        # Sorted by count, then cost.
        cs = [(x["count"], x["cost_ms"]) for x in j[jkey]]
        check(cs == sorted(cs, key=lambda c: (-c[0], -c[1])), "%s order %s" % (jkey, cs))
    hosts = {x["host"]: x["count"] for x in j["by_host"]}
    exp_hosts = collections.Counter(r["host"] or "(not recorded)" for r in fb)
    check(hosts == dict(exp_hosts), "by_host %s, expected %s" % (hosts, dict(exp_hosts)))
    meas = [r["measured"] for r in fb if r["measured"] is not None]
    mod = [r["modeled"] for r in fb if r["modeled"] is not None]
    check(j["cost_ms"]["measured_records"] == len(meas) and near(j["cost_ms"]["measured"], sum(meas)),
          "measured cost %s, expected %d records %.6f" % (j["cost_ms"], len(meas), sum(meas)))
    check(j["cost_ms"]["modeled_records"] == len(mod) and near(j["cost_ms"]["modeled"], sum(mod)),
          "modeled cost %s, expected %d records %.6f" % (j["cost_ms"], len(mod), sum(mod)))
    # The fallback ratio: the ledgers' (estimated time) and the profile's (measured).
    ledgers = [json.load(open(f)) for f in files if f.endswith(".json")]
    plans = [d for d in ledgers if "iterations" not in d]
    ratios = [d["summary"]["fallback_ratio"] for d in plans]
    fr = j["fallback_ratio"]
    check(fr["plans"] == len(plans) and near(fr["estimated_mean"], sum(ratios) / len(ratios))
          and near(fr["estimated_max"], max(ratios)), "ratio %s, expected %s" % (fr, ratios))
    check(fr["plan_nodes"] == sum(d["summary"]["nodes"] for d in plans), "plan nodes %s" % fr)
    prof = [d for d in ledgers if "iterations" in d][0]
    check(fr["measured_runs"] == 1 and near(fr["measured_mean"], prof["fallback_ratio"]), "measured ratio %s" % fr)
    # The text report says the same.
    so, _ = tandem(["logs", "logs"])
    check("%d fallbacks" % len(fb) in so.splitlines()[0], "text headline: %s" % so[:300])
    for reason, n in counts(recs, "reason").items():
        check(any(line.split()[:2] == [reason, str(n)] for line in so.splitlines()),
              "text by reason %s %d: %s" % (reason, n, so))
    # Files given one by one count the same as their folder.
    j2, _ = logs_json(files)
    check(j2 and j2["fallbacks"] == len(fb) and j2["by_reason"] == j["by_reason"], "files one by one")
    # A file given twice, or inside a folder also given, is read once.
    j3, _ = logs_json(["logs", files[0], files[0]])
    check(j3 and j3["fallbacks"] == len(fb) and j3["files"]["read"] == len(files), "files read once: %s" % (
        j3 and j3["files"]))


def case_buckets():
    erf = model("erf", ["Relu", "Erf", "Relu", "Erf", "Relu"])
    os.makedirs("b")
    tandem(["run", erf, "--random", "--devices", EDGE, "--granularity", "op", "--fallback-log", "b/run.jsonl"])
    lines = [json.loads(x) for x in open("b/run.jsonl")]
    check(len(lines) == 2 and all("time" in x and "host" in x for x in lines), "records carry time, host: %s" % lines)
    # The same run's records as if logged at several times: 10:05 (x2),
    # 10:59, 12:30 (none at 11), one on the next day past the span of hours.
    stamps = ["2026-03-01T10:05:00Z", "2026-03-01T10:59:59Z", "2026-03-01T12:30:00Z"]
    with open("b/hours.jsonl", "w") as f:
        for i, t in enumerate(stamps):
            for x in lines:
                f.write(json.dumps(dict(x, time=t, host="h%d" % i)) + "\n")
    os.remove("b/run.jsonl")
    j, _ = logs_json(["b"])
    if j:
        ot = j["over_time"]
        got = [(x["bucket"], x["count"]) for x in ot["buckets"]]
        check(ot["bucket"] == "hour" and got == [("2026-03-01T10:00Z", 4), ("2026-03-01T11:00Z", 0),
                                                 ("2026-03-01T12:00Z", 2)], "hour buckets %s" % ot)
        check(ot["first"] == "2026-03-01T10:05:00Z" and ot["last"] == "2026-03-01T12:30:00Z", "span %s" % ot)
        check(sorted((x["host"], x["count"]) for x in j["by_host"]) == [("h0", 2), ("h1", 2), ("h2", 2)],
              "hosts %s" % j["by_host"])
    j, _ = logs_json(["b", "--bucket", "day"])
    if j:
        got = [(x["bucket"], x["count"]) for x in j["over_time"]["buckets"]]
        check(got == [("2026-03-01", 6)], "--bucket day %s" % got)
    # A ledger has no time of its own: its file's modification time counts.
    tandem(["run", erf, "--random", "--devices", EDGE, "--granularity", "op", "--ledger", "b/ledger.json"])
    t = 1772640000 + 3 * 86400  # 2026-03-07T16:00:00Z (6 days after the logs)
    os.utime("b/ledger.json", (t, t))
    j, _ = logs_json(["b"])
    if j:
        got = [(x["bucket"], x["count"]) for x in j["over_time"]["buckets"]]
        check(j["over_time"]["bucket"] == "day" and len(got) == 7 and got[0] == ("2026-03-01", 6)
              and got[-1] == ("2026-03-07", 2) and all(c == 0 for _, c in got[1:-1]), "day buckets %s" % got)
    so, _ = tandem(["logs", "b", "--bucket", "month"])
    check("fallbacks per month:" in so and "2026-03" in so, "--bucket month text: %s" % so)
    tandem(["logs", "b", "--bucket", "week"], 1)
    # A span of more than 100,000 buckets is refused with a sentence.
    with open("b/far.jsonl", "w") as f:
        f.write(json.dumps(dict(lines[0], time="2000-01-01T00:00:00Z")) + "\n")
    so, se = tandem(["logs", "b", "--bucket", "hour"], 1)
    check("more than 100000 buckets" in se, "too many buckets: %s" % se)


def case_top():
    corpus()
    files = walk("logs")
    fb = [r for r in expected(files) if not r["fault"]]
    groups = collections.defaultdict(lambda: [0, 0.0])
    for r in fb:
        g = groups[(r["op"], r["reason"], r["device"])]
        g[0] += 1
        g[1] += r["cost"] if r["cost"] is not None else 0.0
    j, _ = logs_json(["logs", "--top", "0"])
    if not j:
        return
    got = [((x["op"], x["reason"], x["device"]), x["count"], x["cost_ms"]) for x in j["top"]]
    check(len(got) == len(groups), "top groups %d, expected %d" % (len(got), len(groups)))
    for key, n, cost in got:
        check(key in groups and groups[key][0] == n and near(groups[key][1], cost),
              "top %s: %d %.6f, expected %s" % (key, n, cost, groups.get(key)))
    order = [(-c, -n) for _, n, c in got]
    check(order == sorted(order), "top order by cost then count: %s" % got)
    check(all(x["hint"] for x in j["top"] if x["reason"] == "OP_UNSUPPORTED"), "hints %s" % j["top"])
    check(all(x["models"] and x["example_node"] for x in j["top"]), "models and example %s" % j["top"])
    j3, _ = logs_json(["logs", "--top", "3"])
    check(j3 and [(x["op"], x["reason"], x["device"]) for x in j3["top"]] == [k for k, _, _ in got[:3]],
          "--top 3 %s" % (j3 and j3["top"]))
    so, _ = tandem(["logs", "logs", "--top", "2"])
    first = got[0][0]
    check("  1. %s  %s  %s: %d fallbacks" % (first[0], first[1], first[2], got[0][1]) in so
          and "  3. " not in so, "text top: %s" % so)
    check("hint: " in so, "text hint: %s" % so)
    tandem(["logs", "logs", "--top", "x"], 1)


def case_errors():
    erf = model("erf", ["Relu", "Erf", "Relu", "Erf", "Relu"])
    os.makedirs("e/sub")
    tandem(["run", erf, "--random", "--devices", EDGE, "--granularity", "op", "--fallback-log", "e/good.jsonl"])
    good = open("e/good.jsonl").read()
    check(good.count("\n") == 2, "two fallbacks logged: %s" % good)
    # A device fault record and a broken line (a crashed writer's last line).
    fault = {"event": "device_fault", "model": "erf.onnx", "node": "relu_0", "device": "vnpu:edge-npu",
             "detail": "injected", "time": "2026-03-01T10:00:00Z", "host": "h"}
    with open("e/sub/mixed.jsonl", "w") as f:
        f.write(good + json.dumps(fault) + "\n" + '{"event": "fallback", "model": "erf.on\n')
    with open("e/sub/bad.json", "w") as f:
        f.write("this is not json")
    with open("e/sub/other.json", "w") as f:
        f.write('{"name": "not a ledger"}')
    j, se = logs_json(["e"], 2)
    check("e/sub/mixed.jsonl:4 is not a fallback-log record" in se, "bad line named: %s" % se)
    check("e/sub/bad.json' is not valid JSON" in se, "bad file named: %s" % se)
    check("e/sub/other.json' is JSON but neither a ledger" in se, "other JSON named: %s" % se)
    check(all(line.startswith("tandem: ") for line in se.splitlines()), "one sentence per error: %s" % se)
    if j:
        check(j["fallbacks"] == 4 and j["device_faults"] == 1, "counted the rest: %d %d" % (j["fallbacks"],
                                                                                       j["device_faults"]))
        check(j["device_faults_by_device"] == [{"device": "vnpu:edge-npu", "count": 1, "cost_ms": 0}],
              "faults %s" % j["device_faults_by_device"])
        check(j["files"]["read"] == 2, "files read %s" % j["files"])
    # A missing file: exit 5, the others still reported.
    so, se = tandem(["logs", "e/good.jsonl", "e/missing.jsonl"], 5)
    check("cannot read 'e/missing.jsonl'" in se and "2 fallbacks" in so, "missing file: %s / %s" % (se, so))
    if os.geteuid() != 0:
        os.chmod("e/good.jsonl", 0)
        so, se = tandem(["logs", "e/good.jsonl"], 5)
        check("cannot read 'e/good.jsonl'" in se, "unreadable: %s" % se)
        os.chmod("e/good.jsonl", 0o644)
    so, se = tandem(["logs", "e/sub/bad.json"], 2)
    check("no fallback log, ledger or profile was read" in se, "nothing read: %s" % se)
    os.makedirs("empty")
    tandem(["logs", "empty"], 5)
    tandem(["logs"], 1)
    tandem(["logs", "e", "--frobnicate"], 1)
    so, _ = tandem(["help", "logs"])
    check("usage: tandem logs" in so, "help logs: %s" % so)
    so, _ = tandem(["help"])
    check("  logs " in so and "  diff " in so, "help lists logs and diff: %s" % so)


def ledger(m, devices, extra, path):
    tandem(["run", m, "--random", "--devices", devices, "--ledger", path] + extra)
    return json.load(open(path))


def case_diff():
    erf = model("erf", ["Relu", "Erf", "Relu", "Erf", "Relu"])
    mix = model("mix", ["Relu", "Erf", "Sigmoid", "Softplus", "Relu", "Sin", "Relu"])
    a = ledger(mix, EDGE, ["--granularity", "op"], "a.json")
    b = ledger(mix, EDGE, ["--granularity", "op", "--pin", "sigmoid_2=cpu"], "b.json")
    c = ledger(mix, RK, ["--granularity", "op"], "c.json")
    so, se = tandem(["diff", "a.json", "b.json", "--json"])
    j = json.loads(so) if so else None
    if j:
        moved = {x["node"]: x for x in j["moved"]}
        check(list(moved) == ["sigmoid_2"], "moved %s" % j["moved"])
        s = moved.get("sigmoid_2", {})
        check(s.get("device_before") == "vnpu:edge-npu" and s.get("device_after") == "cpu"
              and s.get("reason_before") == "OK" and s.get("reason_after") == "USER"
              and "--pin" in s.get("detail_after", ""), "pinned node %s" % s)
        check(j["model"] == "mix.onnx" and j["before"]["nodes"] == 7 and j["after"]["nodes"] == 7, "sides %s" % j)
        parts = j["figures"]["partitions"]
        check(parts["before"] == a["summary"]["partitions"] and parts["after"] == b["summary"]["partitions"],
              "partitions %s" % parts)
        by_dev = {x["device"]: (x["before"], x["after"]) for x in j["nodes_by_device"]}
        check(by_dev == {"vnpu:edge-npu": (4, 3), "cpu": (3, 4)}, "nodes by device %s" % by_dev)
        # The pin is not a fallback: three OP_UNSUPPORTED before and after.
        check(j["fallbacks_by_reason"] == [{"reason": "OP_UNSUPPORTED", "before": 3, "after": 3}],
              "fallbacks by reason %s" % j["fallbacks_by_reason"])
        cos = j["figures"].get("output_cosine", {})
        check("guard" in a and near(cos.get("before", -1), a["guard"]["output_cosine_after"])
              and near(cos.get("after", -1), b["guard"]["output_cosine_after"]), "output cosine %s" % cos)
        est = j["figures"]["modeled_ms"]
        check(near(est["before"], a["summary"]["estimated_ms"]["total"])
              and near(est["after"], b["summary"]["estimated_ms"]["total"]), "modeled ms %s" % est)
    so, _ = tandem(["diff", "a.json", "b.json"])
    check("moved between devices (1):" in so and "sigmoid_2" in so and "OK -> USER" in so, "text diff: %s" % so)
    # Another device: every node moves off edge-npu onto rk3588 or stays on cpu.
    j = json.loads(tandem(["diff", "a.json", "c.json", "--json"])[0] or "null")
    if j:
        exp = sorted(n["name"] for n, m in zip(a["nodes"], c["nodes"]) if n["device"] != m["device"])
        check(sorted(x["node"] for x in j["moved"]) == exp, "moved to rk3588 %s, expected %s" % (j["moved"], exp))
        fr = {x["reason"]: (x["before"], x["after"]) for x in j["fallbacks_by_reason"]}
        check(fr == {"OP_UNSUPPORTED": (3, 2)}, "fallbacks by reason %s" % fr)
    # Identical ledgers: nothing moved.
    so, _ = tandem(["diff", "a.json", "a.json"])
    check("no node moved and no reason changed (7 nodes)" in so, "same: %s" % so)
    j = json.loads(tandem(["diff", "a.json", "a.json", "--json"])[0] or "null")
    check(j and j["moved"] == [] and j["reason_changed"] == [] and j["only_before"] == [], "same json %s" % j)
    # A profile of the same model against a ledger.
    so, _ = tandem(["profile", mix, "--devices", EDGE, "--granularity", "op", "--iterations", "1", "--warmup", "0",
                    "--json"])
    with open("p.json", "w") as f:
        f.write(so)
    j = json.loads(tandem(["diff", "a.json", "p.json", "--json"])[0] or "null")
    check(j and j["after"]["kind"] == "profile" and j["moved"] == [] and "fallback_ratio_measured" in j["figures"],
          "ledger vs profile %s" % j)
    # Different models: refused with one sentence.
    ledger(erf, EDGE, [], "erf.json")
    so, se = tandem(["diff", "a.json", "erf.json"], 2)
    check(so == "" and se.count("\n") == 1 and "of model 'mix.onnx'" in se and "of model 'erf.onnx'" in se,
          "different models: %s" % se)
    with open("junk.json", "w") as f:
        f.write("[1, 2]")
    so, se = tandem(["diff", "a.json", "junk.json"], 2)
    check("'junk.json' is neither a ledger" in se, "junk: %s" % se)
    tandem(["diff", "a.json", "missing.json"], 5)
    tandem(["diff", "a.json"], 1)
    tandem(["diff", "a.json", "b.json", "c.json"], 1)


CASES = {"counts": case_counts, "buckets": case_buckets, "top": case_top, "errors": case_errors, "diff": case_diff}
CASES[CASE]()
for f in failures:
    print("FAIL:", f)
print("%s: %d checks, %d failures" % (CASE, counted[0], len(failures)))
sys.exit(1 if failures else 0)
