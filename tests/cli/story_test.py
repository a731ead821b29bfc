#!/usr/bin/python3
"""The CLI tells the story first (issue 19 item 3):
   story_test.py TANDEM WORKDIR CASE

plan          plan opens with the summary (placement, fallbacks by reason and
              op type, partitions, boundary bytes, the estimate against all-cpu,
              hints); the per-node table only with --nodes/--verbose; every
              offender of --fallback deny listed once; --json is the ledger
plan-det      the same on PP-OCRv4 det from $TANDEM_CACHE/models (skipped, 77,
              when the cache lacks it): no --shape -> one hint naming --shape
plan-rescue   plan's "rescued:" line counts the ledger's rescue attempts
              (transformer_op17 from $TANDEM_CACHE: kept per rule on
              server-npu, refused on edge-npu; none with --rescue off)
run           run prints one placement line on stderr when a node fell back or
              was pinned, none when all ran where asked
defects       plan --shape with a non-input exits 2; a missing profile file
              exits 5; help --help; --min-cosine once in compare/report help;
              --devices help names opencl; no "1 partitions"; compare's worst
              table tells rows apart (1-cosine)"""
import json
import os
import re
import subprocess
import sys

from chain import check, counted, enter, failures, model

TANDEM, CASE = sys.argv[1], sys.argv[3]
WORK = enter(sys.argv[2], CASE)


def run(args, code):
    p = subprocess.run([TANDEM] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    so, se = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == code, "tandem %s: exit %d, expected %d\n  stderr: %s\n  stdout: %s"
          % (" ".join(args), p.returncode, code, se.strip()[:2000], so[:2000]))
    return so, se


EDGE = "vnpu:edge-npu"
# on edge-npu: Erf is OP_UNSUPPORTED; the Relu/Sigmoid islands between them
# move to cpu (GRANULARITY) under the default subgraph granularity
MIX = ["Relu", "Erf", "Sigmoid", "Erf", "Relu"]


def line(out, prefix):
    got = [l for l in out.splitlines() if l.startswith(prefix)]
    check(len(got) == 1, "one line starting %r in:\n%s" % (prefix, out))
    return got[0] if got else ""


def case_plan():
    mix = model("mix", MIX)
    so, _ = run(["plan", mix, "--devices", EDGE], 0)
    check(so.startswith("plan for mix.onnx on vnpu:edge-npu, cpu"), "title line: %r" % so[:200])
    check(line(so, "placement:") == "placement: 0 of 5 nodes on vnpu:edge-npu, 5 on cpu", so)
    check(line(so, "fallbacks:") == "fallbacks: 5 nodes off vnpu:edge-npu by reason: GRANULARITY 3, OP_UNSUPPORTED 2",
          so)
    check("by op type: Erf 2, Relu 2, Sigmoid 1" in so, "by op type: %s" % so)
    check(line(so, "partitions:").startswith("partitions: 1 (0 on vnpu:edge-npu, 1 elsewhere); boundary: 0 B"), so)
    est = line(so, "estimated:")
    check("(modeled)" in est and "all on cpu" in est, "the estimate against all-cpu, labelled modeled: %r" % est)
    check("vnpu:edge-npu has no Erf" in so and "--pin Erf=cpu" in so, "hint for Erf: %s" % so)
    check("keep a partition whole" in so, "hint for GRANULARITY: %s" % so)
    for n in ["relu_0", "erf_1", "sigmoid_2", "erf_3", "relu_4"]:
        check(n not in so, "no node %s without --nodes: %s" % (n, so))
    check(len(so.splitlines()) <= 14, "the story is short: %d lines" % len(so.splitlines()))
    # --nodes and --verbose: the story, then every fallback node once
    for flag in ("--nodes", "--verbose"):
        so2, _ = run(["plan", mix, "--devices", EDGE, flag], 0)
        check(so2.startswith(so.rstrip("\n").rsplit("\n(--nodes", 1)[0]), "%s opens with the story" % flag)
        check("fallback nodes (5):" in so2 and "boundary tensors" in so2 and "nodes per device:" in so2,
              "%s shows the report: %s" % (flag, so2))
        for n in ["relu_0", "erf_1", "sigmoid_2", "erf_3", "relu_4"]:
            check(len(re.findall(r"^\s+%s\s" % n, so2, re.M)) == 1, "%s: %s listed once" % (flag, n))
        check("\nsummary:" not in so2 and "1 partitions" not in so2, "%s: one summary only" % flag)
    # the all-cpu estimate is the plan on cpu alone
    sc, _ = run(["plan", mix, "--devices", "cpu", "--json"], 0)
    se, _ = run(["plan", mix, "--devices", EDGE, "--json"], 0)
    try:
        cpu_total = json.loads(sc)["summary"]["estimated_ms"]["total"]
        led = json.loads(se)
        check("placement" not in se and led["summary"]["fallback_nodes"] == 5, "--json is the ledger")
        shown = float(re.search(r"all on cpu ([0-9.e+-]+) ms", est).group(1))
        # (the ledger prints ms at 1e-6: the fused cpu plan of relu/erf/sigmoid is a few us)
        check(abs(shown - cpu_total) <= 1e-3 * max(cpu_total, 1e-9) + 5e-4 * (cpu_total >= 1) + 1e-6,
              "all on cpu %g against plan --devices cpu %g" % (shown, cpu_total))
    except (ValueError, KeyError, AttributeError) as e:
        check(False, "plan --json / all-cpu figure: %s" % e)
    # --fallback deny: exit 3; the story says how many; each offender once
    so, se = run(["plan", mix, "--devices", EDGE, "--fallback", "deny"], 3)
    check("policy: fallback policy 'deny' is violated" in so and "the 5 offending nodes are listed on stderr" in so,
          "the verdict in the story: %s" % so)
    for n in ["relu_0", "erf_1", "sigmoid_2", "erf_3", "relu_4"]:
        check(n not in so, "deny: %s not on stdout" % n)
        check(len(re.findall(r"^\s+%s:" % n, se, re.M)) == 1, "deny: %s once on stderr: %s" % (n, se))
    # pinned nodes are counted, not fallbacks
    so, _ = run(["plan", mix, "--devices", "vnpu:fp32-all", "--pin", "Erf=cpu", "--granularity", "op"], 0)
    check(line(so, "placement:") == "placement: 3 of 5 nodes on vnpu:fp32-all, 2 on cpu", so)
    check("pinned:    2 nodes (--pin)" in so and "fallbacks: none" in so, "pins: %s" % so)
    # a dynamic input: the hint gives --shape
    dyn = model("dyn", ["Relu", "Sigmoid"], dims=("N", 8))
    so, _ = run(["plan", dyn, "--devices", EDGE], 0)
    check("by reason: SHAPE_UNSUPPORTED 2" in so, so)
    check("dynamic input 'X' (?x8): give --shape X=1x8" in so, "the --shape hint: %s" % so)
    so, _ = run(["plan", dyn, "--devices", EDGE, "--shape", "X=1x8"], 0)
    check(line(so, "placement:") == "placement: 2 of 2 nodes on vnpu:edge-npu" and "--shape" not in so,
          "fixed by --shape: %s" % so)
    # all on cpu: no fallback talk
    so, _ = run(["plan", mix], 0)
    check(line(so, "placement:") == "placement: 5 of 5 nodes on cpu" and "fallbacks" not in so
          and "hints" not in so, "all-cpu: %s" % so)


def case_plan_det():
    det = os.path.join(os.environ.get("TANDEM_CACHE", ""), "models", "ppocr_det.onnx")
    if not os.path.isfile(det):
        print("%s is missing (make data)" % det)
        sys.exit(77)
    so, _ = run(["plan", det, "--devices", EDGE + ",cpu"], 0)
    check(len(so.splitlines()) <= 15, "det: a short story (%d lines)" % len(so.splitlines()))
    check("by reason: SHAPE_UNSUPPORTED 330" in so, so)
    check("dynamic input 'x' (?x3x?x?): give --shape x=1x3xHxW" in so, "det: the --shape hint: %s" % so)
    so, se = run(["plan", det, "--devices", EDGE + ",cpu", "--shape", "x=1x3x640x640", "--fallback", "deny"], 3)
    n = int(re.search(r"the (\d+) offending nodes are listed on stderr", so).group(1)) if "offending" in so else -1
    listed = [l for l in se.splitlines() if re.match(r"  \S+: [A-Z_]+: ", l)]
    check(n > 0 and len(listed) == n and len(set(listed)) == n, "det deny: %d offenders, %d listed" % (n, len(listed)))
    check(len(so.splitlines()) <= 15 and "p2o." not in so, "det deny: no node list on stdout")


def case_plan_rescue():
    tr = os.path.join(os.environ.get("TANDEM_CACHE", ""), "models", "transformer_op17.onnx")
    if not os.path.isfile(tr):
        print("%s is missing (make data)" % tr)
        sys.exit(77)
    for dev in ("vnpu:server-npu,cpu", "vnpu:edge-npu,cpu"):
        so, _ = run(["plan", tr, "--devices", dev], 0)
        led = json.loads(run(["plan", tr, "--devices", dev, "--json"], 0)[0])
        att = led.get("rescue", {}).get("attempts", [])
        kept = [a for a in att if a.get("kept")]
        rules = {}
        for a in kept:
            rules[a["rule"]] = rules.get(a["rule"], 0) + 1
        got = line(so, "rescued:")
        want = "rescued:  %d of %d node%s rewritten for the device (--rescue safe)" % (
            len(kept), len(att), "" if len(att) == 1 else "s")
        check(got.startswith(want), "%s: %r starts %r" % (dev, got, want))
        for r, n in rules.items():
            check("%s %d" % (r, n) in got, "%s: rule %s counted %d: %r" % (dev, r, n, got))
        if kept:
            became = sum(len(a.get("became", [])) for a in kept)
            check("; %d nodes in their place" % became in got, "%s: %d nodes in their place: %r" % (dev, became, got))
        if len(kept) < len(att):
            check("%d refused (plan --nodes says why)" % (len(att) - len(kept)) in got, "%s: refused counted: %r" % (dev, got))
        if dev.startswith("vnpu:server-npu"):
            check(kept and rules.get("layernorm", 0) >= 8, "server-npu keeps the LayerNorm rescues: %r" % got)
        else:
            check(len(kept) < len(att), "edge-npu refuses rescues (no Sqrt there): %r" % got)
    so, _ = run(["plan", tr, "--devices", "vnpu:server-npu,cpu", "--rescue", "off"], 0)
    check("rescued:" not in so, "--rescue off: no rescued line: %s" % so)


def case_run():
    mix = model("mix", MIX)
    _, se = run(["run", mix, "--random", "--devices", EDGE], 0)
    want = ("tandem: placement: 0 of 5 nodes on vnpu:edge-npu, 5 on cpu - GRANULARITY 3 (Relu 2, Sigmoid 1), "
            "OP_UNSUPPORTED 2 (Erf 2); `tandem plan` tells why")
    check([l for l in se.splitlines() if "placement:" in l] == [want], "run's placement line: %s" % se)
    _, se = run(["run", mix, "--random", "--devices", "vnpu:fp32-all", "--pin", "Erf=cpu", "--granularity", "op"], 0)
    check("tandem: placement: 3 of 5 nodes on vnpu:fp32-all, 2 on cpu - 2 pinned (--pin); `tandem plan` tells why"
          in se.splitlines(), "pinned: %s" % se)
    for dev in (["--devices", "cpu"], [], ["--devices", "vnpu:fp32-all", "--granularity", "op"]):
        _, se = run(["run", mix, "--random"] + dev, 0)
        check("placement" not in se, "no placement line when all ran where asked (%r): %s" % (dev, se))


def case_defects():
    mix = model("mix", MIX)
    dyn = model("dyn", ["Relu", "Sigmoid"], dims=("N", 8))
    _, se = run(["plan", dyn, "--shape", "q=3x8"], 2)
    check("--shape names 'q', which is not an input of the model (its inputs: 'X')" in se, se)
    _, se = run(["run", dyn, "--random", "--shape", "q=3x8"], 2)
    _, se = run(["plan", mix, "--devices", "vnpu:./no-such-profile.json"], 5)
    check("no-such-profile.json" in se, se)
    so, _ = run(["help", "--help"], 0)
    check(so.startswith("usage: tandem"), "help --help: %r" % so[:100])
    for cmd in ("compare", "report"):
        so, _ = run([cmd, "--help"], 0)
        check(len(re.findall(r"^\s+--min-cosine C", so, re.M)) == 1, "%s --help: --min-cosine once:\n%s" % (cmd, so))
        check(len(re.findall(r"^\s+--max-abs", so, re.M)) == 1, "%s --help: --max-abs once" % cmd)
    for cmd in ("plan", "run", "compare"):
        so, _ = run([cmd, "--help"], 0)
        dl = so[so.find("--devices LIST "):][:300]
        check("opencl" in dl, "%s --help: --devices names opencl: %r" % (cmd, dl))
    so, _ = run(["plan", mix, "--nodes"], 0)
    check("1 partitions" not in so and "partitions: 1;" in so, "one partition: %s" % so)
    # worst table: fp16 rows whose cosines all print 1.000000 differ in 1-cosine
    f16 = model("f16", ["Sigmoid", "Tanh", "Sigmoid", "Tanh"], dims=(1, 64))
    so, _ = run(["compare", f16, "--devices", EDGE, "--top", "4"], 0)
    check(re.search(r"cosine\s+1-cosine", so) is not None, "compare: a 1-cosine column: %s" % so)
    worst = so[so.find("worst 4:"):]
    rows = re.findall(r"^\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\d\.\d+e[+-]\d+)$", worst, re.M)
    check(len(rows) == 4 and len(set(r[1] for r in rows)) == 4, "compare: 4 rows told apart by 1-cosine: %s" % so)
    run(["report", mix, "--devices", "vnpu:fp32-all", "--html", "r.html", "--iterations", "1"], 0)
    html = open("r.html", encoding="utf-8").read() if os.path.exists("r.html") else ""
    check("<b>1</b>partition<" in html and "1 &minus; cosine" in html, "report: one partition, 1-cosine column")


CASES = {"plan": case_plan, "plan-det": case_plan_det, "plan-rescue": case_plan_rescue, "run": case_run,
         "defects": case_defects}
CASES[CASE]()
if failures:
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print("%d of %d checks failed" % (len(failures), counted[0]), file=sys.stderr)
    sys.exit(1)
print("ok: %d checks" % counted[0])
