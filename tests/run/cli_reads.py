#!/usr/bin/env python3
"""The CLI reads the model file once (issue 14 item 3): with dynamic shapes
fixed by --shape, `run`, `plan`, `profile` and `info` map the model file
exactly once and never read() it a second time (before, a session re-read
and re-parsed the file to specialise its shapes: up to three parses).
Counted with strace (-y names each file descriptor's file).

usage: cli_reads.py TANDEM MODEL WORKDIR
"""
import os
import re
import shutil
import subprocess
import sys

tandem, model, work = sys.argv[1:4]
if not shutil.which("strace"):
    print("cli_reads: strace is not installed (scripts/install-deps.sh test installs it)")
    sys.exit(77)
os.makedirs(work, exist_ok=True)
name = os.path.basename(model)
size = os.path.getsize(model)
cases = {
    "run": ["run", model, "--shape", "x=1x3x64x96", "--random", "--devices", "vnpu:rk3588,cpu"],
    "plan": ["plan", model, "--shape", "x=1x3x64x96", "--devices", "vnpu:rk3588,cpu"],
    "profile": ["profile", model, "--shape", "x=1x3x64x96", "--random", "--iterations", "1"],
    "info": ["info", model],
}
failed = 0
for case, args in cases.items():
    log = os.path.join(work, case + ".strace")
    r = subprocess.run(["strace", "-f", "-y", "-o", log, "-e", "trace=openat,read,pread64,mmap", tandem] + args,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        print(f"cli_reads: {case} exited {r.returncode}: {r.stderr.strip()}")
        failed += 1
        continue
    maps = reads = 0
    for line in open(log):
        if not re.search(re.escape(name) + r">", line):
            continue
        m = re.search(r"= (-?\d+|0x[0-9a-f]+)\s*$", line)
        if " mmap(" in line and m and not m.group(1).startswith("-"):
            maps += 1
        elif re.search(r"\b(read|pread64)\(", line) and m and not m.group(1).startswith("-"):
            reads += int(m.group(1), 0)
    # one mapping of the whole file; a sniff may read a few header bytes
    ok = maps == 1 and reads < 4096
    print(f"cli_reads: {case}: {maps} mapping(s), {reads} bytes read of {size}: {'ok' if ok else 'FAIL'}")
    failed += not ok
sys.exit(1 if failed else 0)
