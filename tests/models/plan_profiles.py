#!/usr/bin/python3
"""`tandem info` and `tandem plan` on a model, on every shipped vnpu profile.

usage: /usr/bin/python3 tests/models/plan_profiles.py TANDEM CACHE_DIR MODEL PROFILES_DIR [--static]

Checks, for CACHE_DIR/models/MODEL.onnx:
  - `tandem info MODEL --json` exits 0 and counts the model's nodes;
  - for every PROFILES_DIR/*.json, `tandem plan MODEL --devices
    vnpu:PROFILE.json,cpu --json` exits 0 and lists every node left after
    constant folding once (as many as its summary counts), each with
    a device and a reason code, and every node not on the vnpu with a
    sentence (detail) saying why; the text form of the same plan exits 0 too.
    A model with symbolic input dimensions is planned twice: as it is (nodes
    may fall back for their dynamic shapes, with that reason) and with
    --shape NAME=DxD for each input, the shapes of the realistic case's
    inputs (CACHE_DIR/refs/MODEL/inputs.txt); with --static, no node may
    then fall back for a dynamic shape (not for models whose shapes depend
    on data or on a branch taken, as silero_vad's If).
Prints one line per plan (nodes on the vnpu, fallback reasons and their
counts) and exits 1 when a check fails.
"""
import collections
import glob
import json
import os
import subprocess
import sys

import numpy as np


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def ref_shapes(cache, model):
    """--shape arguments from the realistic case's input files."""
    args = []
    with open(os.path.join(cache, "refs", model, "inputs.txt")) as f:
        for line in f:
            name, _, path = line.strip().partition("=")
            if name:
                shape = np.load(path, mmap_mode="r").shape
                args += ["--shape", "%s=%s" % (name, "x".join(str(d) for d in shape))]
    return args


def check_plan(tandem, model_path, profile, extra, n_nodes, static):
    label = "%s%s" % (os.path.basename(profile), " (shapes fixed)" if extra else "")
    devices = "vnpu:%s,cpu" % profile
    rc, out, err = run([tandem, "plan", model_path, "--devices", devices, "--json"] + extra)
    if rc != 0:
        return ["%s: plan --json exited %d: %s" % (label, rc, err.strip())]
    try:
        ledger = json.loads(out)
    except ValueError as e:
        return ["%s: plan --json printed no JSON document (%s)" % (label, e)]
    problems = []
    nodes = ledger.get("nodes", [])
    # Constant folding removes nodes (Constant, shape arithmetic) before
    # placement: the plan holds at most the model's nodes, and its summary
    # counts what it lists.
    summary = ledger.get("summary", {})
    if not 0 < len(nodes) <= n_nodes or summary.get("nodes") != len(nodes) or \
            sum(summary.get("nodes_by_device", {}).values()) != len(nodes):
        problems.append("%s: the plan lists %d nodes, its summary %r, the model has %d" % (
            label, len(nodes), summary.get("nodes"), n_nodes))
    names = collections.Counter(n.get("name") for n in nodes)
    twice = [k for k, v in names.items() if v > 1]
    if twice:
        problems.append("%s: node %s is listed %d times" % (label, twice[0], names[twice[0]]))
    reasons = collections.Counter()
    on_vnpu = 0
    for n in nodes:
        dev, reason, detail = n.get("device"), n.get("reason"), n.get("detail", "")
        if not dev or not reason:
            problems.append("%s: node '%s' has no device or no reason" % (label, n.get("name")))
            continue
        if dev.startswith("vnpu:"):
            on_vnpu += 1
        elif not detail.strip():
            problems.append("%s: node '%s' falls back to %s (%s) without a sentence" % (
                label, n.get("name"), dev, reason))
        if not dev.startswith("vnpu:"):
            reasons[reason] += 1
        if static and "static shapes" in detail:
            problems.append("%s: node '%s' still falls back for a dynamic shape: %s" % (label, n.get("name"), detail))
    rc, out, err = run([tandem, "plan", model_path, "--devices", devices] + extra)
    if rc != 0 or "placement:" not in out or "estimated:" not in out:
        problems.append("%s: plan (text) exited %d: %s" % (label, rc, err.strip()))
    print("%s: %s %d of %d planned nodes on the vnpu; fallback %s" % (
        label, "FAIL" if problems else "ok", on_vnpu, len(nodes),
        ", ".join("%s %d" % kv for kv in sorted(reasons.items())) or "none"))
    return problems


def main(argv):
    if len(argv) not in (5, 6) or (len(argv) == 6 and argv[5] != "--static"):
        sys.stderr.write("usage: plan_profiles.py TANDEM CACHE_DIR MODEL PROFILES_DIR [--static]\n")
        return 2
    tandem, cache, model, profiles_dir = argv[1:5]
    static = len(argv) == 6
    model_path = os.path.join(cache, "models", model + ".onnx")
    if not os.path.isfile(model_path):
        sys.stderr.write("plan_profiles: %s is missing: run 'make data' (scripts/models.sh) first\n" % model_path)
        return 1
    rc, out, err = run([tandem, "info", model_path, "--json"])
    if rc != 0:
        print("FAIL: tandem info exited %d: %s" % (rc, err.strip()))
        return 1
    info = json.loads(out)
    n_nodes = info.get("nodes")
    if not isinstance(n_nodes, int) or n_nodes <= 0:
        print("FAIL: tandem info counts no nodes (%r)" % (n_nodes,))
        return 1
    rc, _, err = run([tandem, "info", model_path])
    if rc != 0:
        print("FAIL: tandem info (text) exited %d: %s" % (rc, err.strip()))
        return 1
    dynamic = any(not isinstance(d, int) for i in info.get("inputs", []) for d in i.get("shape", []))
    print("info: ok %d nodes, opsets %s, %s inputs" % (
        n_nodes, ", ".join("%s %s" % (o["domain"], o["version"]) for o in info.get("opsets", [])),
        "dynamic" if dynamic else "static"))
    profiles = sorted(glob.glob(os.path.join(profiles_dir, "*.json")))
    if not profiles:
        print("FAIL: no profiles in %s" % profiles_dir)
        return 1
    problems = []
    for prof in profiles:
        problems += check_plan(tandem, model_path, prof, [], n_nodes, False)
        if dynamic:
            problems += check_plan(tandem, model_path, prof, ref_shapes(cache, model), n_nodes, static)
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
