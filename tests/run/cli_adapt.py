"""The adaptation options of the command line (ctest cost.cli.*).

cli_adapt.py TANDEM WORKDIR CASE
  breaker  a small conv model; `tandem run --repeat 1000` on
           faulty:vnpu:fp32-all with 10 % of runs hitting an injected device
           fault (per-call probability from the device's node count) and
           --breaker 2,10000000,20: exit 0, no run lost, every run's outputs
           equal to the first's and the last run's to cpu's (--output-dir),
           the adaptation JSON shows ~10 % faults, each re-executed on cpu.
  adapt    --adapt 1.5,3 on faulty:vnpu:fp32-all?slow=20 with auto: no
           re-plan after 2 runs, one adopted after 3 (the ledger of the run
           has the "replan" section with measured and estimated figures);
           `tandem profile` and `tandem bench` accept the options and write
           the JSON.
  help     run, bench and profile --help list --breaker, --adapt,
           --plan-cache, --adaptation-json; malformed values exit 1.
"""
import json
import os
import subprocess
import sys

import numpy as np

tandem, work, case = sys.argv[1:4]
os.makedirs(work, exist_ok=True)


def sh(args, ok=0):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != ok:
        print("FAIL: %s exited %d (expected %d)\n%s\n%s" % (" ".join(args), p.returncode, ok, p.stdout, p.stderr))
        sys.exit(1)
    return p


def model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    nodes, inits = [], []
    prev, ch = "x", 3
    for i in range(6):
        w = rng.standard_normal((8, ch, 3, 3)).astype(np.float32) * 0.3
        inits.append(numpy_helper.from_array(w, "w%d" % i))
        nodes.append(helper.make_node("Conv", [prev, "w%d" % i], ["c%d" % i], name="conv%d" % i, pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", ["c%d" % i], ["r%d" % i], name="relu%d" % i))
        prev, ch = "r%d" % i, 8
    nodes.append(helper.make_node("ReduceMean", [prev], ["y"], name="mean", axes=[2, 3], keepdims=0))
    g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


mpath = os.path.join(work, "convs.onnx")
model(mpath)
xin = os.path.join(work, "x.npy")
np.save(xin, np.random.default_rng(1).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32))
common = [tandem, "run", mpath, "--input", "x=" + xin, "--overwrite"]

if case == "breaker":
    sh(common + ["--devices", "cpu", "--output-dir", os.path.join(work, "ref")])
    calls = 13  # nodes on the device (every node runs on fp32-all)
    p = 1 - 0.9 ** (1.0 / calls)
    dev = "faulty:vnpu:fp32-all?fail_p=%.12g&seed=7,cpu" % p
    aj = os.path.join(work, "breaker.json")
    r = sh(common + ["--devices", dev, "--granularity", "op", "--breaker", "2,10000000,20", "--repeat", "1000",
                     "--output-dir", os.path.join(work, "out"), "--adaptation-json", aj])
    ref = np.load(os.path.join(work, "ref", "y.npy"))
    out = np.load(os.path.join(work, "out", "y.npy"))
    a = json.load(open(aj))
    line = [l for l in r.stderr.splitlines() if l.startswith("repeat:")]
    print(line[0] if line else r.stderr)
    frac = a["faults"] / max(1, a["device_runs"])
    print("breaker: %d runs, %d on the device, %d faults (%.1f %% of device runs), %d re-executed on cpu, "
          "%d on cpu while open; opened %d, probes %d, closed again %d; last run vs cpu max |diff| %g"
          % (a["runs"], a["device_runs"], a["faults"], 100 * frac, a["reexecuted_on_cpu"], a["runs_on_cpu_while_open"],
             a["opened"], a["half_open_probes"], a["closed_again"], float(np.max(np.abs(ref - out)))))
    ok = (line and "1000 runs, 0 failed, 0 with outputs different" in line[0] and np.array_equal(ref, out)
          and a["runs"] == 1000 and a["reexecuted_on_cpu"] == a["faults"] and 0.05 <= frac <= 0.15
          and a["opened"] >= 1 and a["closed_again"] >= 1)
    if not ok:
        print("FAIL: breaker figures")
        sys.exit(1)
elif case == "adapt":
    dev = "faulty:vnpu:fp32-all?slow=20,cpu"
    res = {}
    for n in (2, 3):
        aj, lj = os.path.join(work, "adapt%d.json" % n), os.path.join(work, "ledger%d.json" % n)
        sh(common + ["--devices", dev, "--granularity", "auto", "--adapt", "1.5,3", "--repeat", str(n),
                     "--adaptation-json", aj, "--ledger", lj])
        res[n] = (json.load(open(aj)), json.load(open(lj)))
    a2, a3 = res[2][0]["replanning"], res[3][0]["replanning"]
    d = res[3][0]["decisions"]
    rp = res[3][1].get("replan", {})
    print("after 2 runs: %s; after 3: %s" % (a2, a3))
    print("decision: %s" % (d[0] if d else None))
    print("ledger replan: %s" % json.dumps(rp)[:600])
    ok = (a2["replans_adopted"] == 0 and a2["replans_kept"] == 0 and not res[2][0]["decisions"]
          and "replan" not in res[2][1] and a3["replans_adopted"] == 1 and d and d[0]["decision"] == "adopted"
          and d[0]["ratio"] >= 19.9 and rp.get("measured") and all("measured_ms" in x and "estimated_ms" in x
                                                                      for x in rp["measured"]))
    pj = os.path.join(work, "profile.json")
    sh([tandem, "profile", mpath, "--devices", dev, "--granularity", "auto", "--adapt", "1.5,3", "--warmup", "0",
        "--iterations", "5", "--adaptation-json", pj])
    pa = json.load(open(pj))
    print("profile (5 runs): %s" % pa["replanning"])
    ok = ok and pa["replanning"]["replans_adopted"] == 1
    bj = os.path.join(work, "bench.json")
    sh([tandem, "bench", mpath, "--devices", dev, "--granularity", "auto", "--adapt", "1.5,3,10", "--warmup", "0",
        "--iterations", "4", "--breaker", "3,1000,100", "--adaptation-json", bj])
    ba = json.load(open(bj))
    print("bench (4 runs): breaker %s, %s" % (ba["enabled"], ba["replanning"]))
    ok = ok and ba["enabled"] and ba["replanning"]["replans_adopted"] == 1
    if not ok:
        print("FAIL: adapt figures")
        sys.exit(1)
elif case == "help":
    for cmd in ("run", "bench", "profile"):
        h = sh([tandem, cmd, "--help"]).stdout
        for opt in ("--breaker K,WINDOW_MS,COOLDOWN_MS", "--adapt RATIO,N[,M]", "--plan-cache N", "--adaptation-json FILE"):
            if opt not in h:
                print("FAIL: %s --help lacks %s" % (cmd, opt))
                sys.exit(1)
    for bad in (["--breaker", "0,1,1"], ["--breaker", "2,1"], ["--adapt", "0.5,3"], ["--adapt", "1.5"],
                ["--plan-cache", "-1"], ["--adaptation-json", ""]):
        p = sh(common + ["--devices", "cpu"] + bad, ok=1)
        print("%s -> exit 1: %s" % (" ".join(bad), p.stderr.strip().splitlines()[-1]))
else:
    print("unknown case " + case)
    sys.exit(2)
print("PASS")
