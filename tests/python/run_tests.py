#!/usr/bin/env python3
"""Runs test_tandem.py without pytest (Debian's python3 has none): every
test_* function, a unittest.SkipTest counted as skipped. Prints
`N passed, N failed, N skipped` and exits 1 on any failure or when no test
ran at all."""
import os
import sys
import traceback
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tandem  # noqa: E402

passed = failed = skipped = 0
for name in sorted(n for n in dir(test_tandem) if n.startswith("test_")):
    fn = getattr(test_tandem, name)
    if not callable(fn):
        continue
    try:
        fn()
    except unittest.SkipTest as e:
        skipped += 1
        print("SKIP %s: %s" % (name, e))
    except Exception:
        failed += 1
        print("FAIL %s" % name)
        traceback.print_exc()
    else:
        passed += 1
        print("ok   %s" % name)
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed or passed == 0 else 0)
