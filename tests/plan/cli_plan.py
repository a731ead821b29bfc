#!/usr/bin/python3
"""CLI checks of `tandem plan`, `tandem devices` and the run options:
   cli_plan.py TANDEM MODELS_DIR PLUGIN_DIR"""
import json
import os
import subprocess
import sys
import tempfile

tandem, models, plugins = sys.argv[1:4]
failures = []


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([tandem] + args, capture_output=True, text=True, env=e)
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def model(name):
    return os.path.join(models, name + ".onnx")


# plan: the story first (counts by reason and op type), the nodes with --nodes
rc, out, err = run(["plan", model("op_unsupported"), "--devices", "vnpu:edge-npu", "--granularity", "op"])
check(rc == 0, "plan exits 0 (%d: %s)" % (rc, err))
for s in ["placement:", "by reason: OP_UNSUPPORTED 1", "by op type: LayerNormalization 1", "partitions:",
          "boundary:", "(modeled)", "all on cpu", "vnpu:edge-npu"]:
    check(s in out, "the plan's story shows %r: %s" % (s, out))
check("fallback nodes (" not in out and "boundary tensors" not in out, "no node table without --nodes: %s" % out)
rc, out, err = run(["plan", model("op_unsupported"), "--devices", "vnpu:edge-npu", "--granularity", "op", "--nodes"])
check(rc == 0, "plan --nodes exits 0 (%d: %s)" % (rc, err))
for s in ["placement:", "partitions", "nodes per device", "fallback nodes (1)", "OP_UNSUPPORTED", "boundary tensors",
          "estimated time", "modeled", "vnpu:edge-npu"]:
    check(s in out, "the plan report with --nodes shows %r" % s)

# plan --json: the ledger
rc, out, err = run(["plan", model("op_unsupported"), "--devices", "vnpu:edge-npu,cpu", "--json"])
check(rc == 0, "plan --json exits 0")
try:
    led = json.loads(out)
except ValueError:
    led = {}
    check(False, "plan --json prints one JSON document")
for k in ["model", "devices", "granularity", "nodes", "partitions", "summary"]:
    check(k in led, "ledger has %s" % k)
if led:
    check(led["devices"] == ["vnpu:edge-npu", "cpu"], "ledger devices %r" % led["devices"])
    ln = [n for n in led["nodes"] if n["name"] == "ln"]
    check(ln and ln[0]["device"] == "cpu" and ln[0]["reason"] == "OP_UNSUPPORTED" and ln[0]["rejected"][0]["device"]
          == "vnpu:edge-npu", "ledger node ln")
    for n in led["nodes"]:
        check(all(k in n for k in ["name", "op", "device", "reason"]), "node keys %r" % n)
    s = led["summary"]
    check(all(k in s for k in ["nodes_by_device", "fallback_nodes", "boundary_bytes", "partitions", "estimated_ms"]),
          "summary keys")
    check(s["estimated_ms"]["modeled"] is True, "estimates are marked modeled")

# --fallback deny: exit 3, every offender on stderr
for args, env in [(["--fallback", "deny"], None), ([], {"TANDEM_FALLBACK": "deny"}),
                  (["--fallback", "deny-compute"], None), (["--max-fallback-ratio", "0.01"], None)]:
    rc, out, err = run(["plan", model("three_ln"), "--devices", "vnpu:edge-npu", "--granularity", "op"] + args, env)
    lines = err.strip().splitlines()
    check(rc == 3, "plan %r exits 3 (%d)" % (args or env, rc))
    check(lines and lines[0].startswith("tandem: "), "first line is the sentence: %r" % lines[:1])
    for n in ["ln_a", "ln_b", "ln_c"]:
        check(sum(1 for l in lines[1:] if l.strip().startswith(n + ":")) == 1, "%s listed once (%r)" % (n, args))
    rc, out, err = run(["run", model("three_ln"), "--random", "--devices", "vnpu:edge-npu", "--granularity", "op"]
                       + args, env)
    check(rc == 3 and all(n in err for n in ["ln_a", "ln_b", "ln_c"]), "run %r exits 3 listing all: %s" % (args, err))

rc, out, err = run(["plan", model("ok"), "--devices", "vnpu:edge-npu", "--max-boundary-bytes", "100"])
check(rc == 3 and "boundary" in err, "boundary budget exits 3: %s" % err)
rc, out, err = run(["plan", model("ok"), "--devices", "vnpu:edge-npu", "--max-boundary-bytes", "100000"])
check(rc == 0, "boundary budget met")

# pins
rc, out, err = run(["plan", model("ok"), "--devices", "vnpu:edge-npu", "--pin", "relu=cpu", "--json"])
led = json.loads(out) if rc == 0 else {"nodes": []}
check([n["reason"] for n in led["nodes"] if n["name"] == "relu"] == ["USER"], "pin gives USER")
rc, out, err = run(["plan", model("ok"), "--devices", "vnpu:edge-npu", "--pin", "relu"])
check(rc == 1, "a malformed pin exits 1")

# usage and device errors
check(run(["plan", model("ok"), "--granularity", "auto-ish"])[0] == 1, "bad granularity exits 1")
# the summary counts partitions once, as a number after "partitions:"
rc, out, err = run(["plan", model("ok"), "--devices", "cpu"])
summary = [l for l in out.splitlines() if l.startswith("partitions:")]
check(rc == 0 and len(summary) == 1 and summary[0].startswith("partitions: 1;"), "all-cpu summary: %r" % summary)
rc, out, err = run(["plan", model("ok"), "--devices", "vnpu:edge-npu", "--granularity", "op", "--pin", "relu=cpu"])
summary = [l for l in out.splitlines() if l.startswith("partitions:")]
check(rc == 0 and len(summary) == 1 and summary[0].startswith("partitions: 2 ") and "1 partitions" not in out,
      "pinned summary: %r" % summary)
check("pinned:    1 node (--pin)" in out, "pinned count: %s" % out)
check(run(["plan", model("ok"), "--fallback", "never"])[0] == 1, "bad fallback exits 1")
check(run(["plan", model("ok"), "--max-fallback-ratio", "2"])[0] == 1, "bad ratio exits 1")
rc, out, err = run(["plan", model("ok"), "--devices", "vnpu:no-such-profile"])
check(rc == 4 and "no-such-profile" in err, "an unknown device exits 4: %s" % err)
rc, out, err = run(["run", model("ok"), "--random", "--devices", "vnpu:no-such-profile"])
check(rc == 4, "run: an unknown device exits 4")
rc, out, err = run(["plan", model("nodevice")])
check(rc == 2 and "conv_int8" in err, "a node no device runs exits 2 naming it: %s" % err)

# devices
rc, out, err = run(["devices"])
check(rc == 0 and "cpu" in out and "vnpu:edge-npu" in out, "devices lists cpu and the profiles")
rc, out, err = run(["devices", "--json"])
d = json.loads(out) if rc == 0 else {"devices": []}
names = [x["name"] for x in d["devices"]]
check("cpu" in names and "vnpu:server-npu" in names and "vnpu:fp32-all" in names, "devices --json: %r" % names)
for x in d["devices"]:
    check(x["available"] or x.get("why_not"), "an unavailable device says why: %r" % x)
rc, out, err = run(["devices", "--json", "--plugin", os.path.join(plugins, "libtandem-example.so")])
check(rc == 0 and "example" in out, "devices lists a plugin")

# run --ledger, heterogeneous, with a plugin
with tempfile.TemporaryDirectory() as tmp:
    led_path = os.path.join(tmp, "ledger.json")
    rc, out, err = run(["run", model("plugin"), "--random", "--devices", "example:sigmoid_limit=16",
                        "--plugin", os.path.join(plugins, "libtandem-example.so"), "--granularity", "op",
                        "--ledger", led_path])
    check(rc == 0, "run with the plugin: %s" % err)
    if rc == 0:
        led = json.load(open(led_path))
        check(led["summary"]["nodes_by_device"].get("example") == 3, "ledger: 3 nodes on the plugin")
        check("run" in led and led["run"]["copies"] == led["summary"]["copies"], "ledger run figures")
        check(any(f["node"] == "p_sigmoid" for f in led["run"]["device_fallbacks"]), "plugin fallback in the ledger")

if failures:
    print("%d failure(s)" % len(failures), file=sys.stderr)
    sys.exit(1)
print("ok")
