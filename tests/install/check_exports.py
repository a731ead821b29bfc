#!/usr/bin/env python3
"""libtandem.so exports exactly the public API: every defined dynamic symbol
(nm -D --defined-only) starts with tdm_, every function declared in the
public headers is marked TDM_API and is exported, and the SONAME carries
the major version of tandem.h.

usage: check_exports.py LIBTANDEM_SO INCLUDE_DIR
"""
import os
import re
import subprocess
import sys


def main():
    lib, inc = sys.argv[1], sys.argv[2]
    failures = []
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    exported = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            exported.add(parts[2])
    if not exported:
        failures.append("nm -D found no defined symbols in %s" % lib)
    for sym in sorted(exported):
        if not sym.startswith("tdm_"):
            failures.append("exported symbol without the tdm_ prefix: %s" % sym)

    declared = set()
    decl = re.compile(r"^(?!typedef\b|#)(TDM_API\s+)?[A-Za-z_][\w \*]*?\b(tdm_\w+)\(")
    for name in ("tandem.h", "device.h"):
        with open(os.path.join(inc, "tandem", name)) as f:
            for no, line in enumerate(f, 1):
                m = decl.match(line)
                if not m:
                    continue
                declared.add(m.group(2))
                if not m.group(1):
                    failures.append("%s:%d: %s is declared without TDM_API" % (name, no, m.group(2)))
    for sym in sorted(declared - exported):
        failures.append("declared in the public headers but not exported: %s" % sym)

    with open(os.path.join(inc, "tandem", "tandem.h")) as f:
        major = re.search(r"#define TDM_VERSION_MAJOR (\d+)", f.read()).group(1)
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    m = re.search(r"Library soname: \[([^\]]+)\]", dyn)
    if not m or m.group(1) != "libtandem.so.%s" % major:
        failures.append("SONAME is %s, expected libtandem.so.%s" % (m.group(1) if m else "absent", major))

    for f in failures:
        print("FAIL", f)
    print("%d symbols exported, %d functions declared, %d failures" % (len(exported), len(declared), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
