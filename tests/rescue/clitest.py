"""Checks through the tandem CLI shared by cli_fn_inline.py and cli_loop_unroll.py."""
import os
import subprocess
import sys

import numpy as np


class Cli:
    """Runs TANDEM (plugins and fallback cleared), counts failed checks."""

    def __init__(self, tandem):
        self.tandem_path = tandem
        self.failures = []
        self.env = dict(os.environ, TANDEM_PLUGINS="", TANDEM_FALLBACK="")

    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            self.failures.append(what)

    def tandem(self, args, code=0):
        r = subprocess.run([self.tandem_path] + args, capture_output=True, text=True, env=self.env, timeout=600)
        self.check(r.returncode == code, "tandem %s: exit %d, expected %d (%s)" % (
            " ".join(args[:3]), r.returncode, code, r.stderr.strip()[-600:]))
        return r

    def finish(self):
        if self.failures:
            print("%d checks failed" % len(self.failures), file=sys.stderr)
            sys.exit(1)
        print("ok")


def outputs(d):
    """The .npy files of folder d by name (no extension)."""
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}
