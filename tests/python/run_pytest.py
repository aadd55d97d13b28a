#!/usr/bin/env python3
"""Run one tests/python/test_*.py file under pytest for CTest (tests/CMakeLists.txt).

Exit 77 (CTest: skipped) when pytest, numpy or cffi is missing, in a sanitizer build (python3
would load an ASan-instrumented libcortiq without the ASan runtime), or when every test of the
file skipped itself; otherwise pytest's own status.
"""
import os
import shutil
import sys

SKIP = 77


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: run_pytest.py tests/python/test_X.py", file=sys.stderr)
        return 2
    if os.environ.get("CORTIQ_PY_SANITIZED", "0") not in ("", "0", "OFF", "FALSE"):
        print("SKIP: sanitizer build; the Python tests load libcortiq into python3")
        return SKIP
    missing = []
    for mod in ("pytest", "numpy", "cffi"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        print(f"SKIP: python3 lacks {', '.join(missing)} (pip install {' '.join(missing)})")
        return SKIP
    import pytest

    class Outcomes:
        passed = failed = skipped = 0

        def pytest_runtest_logreport(self, report):
            if report.when == "call" or report.outcome != "passed":
                if report.passed and report.when == "call":
                    self.passed += 1
                elif report.failed:
                    self.failed += 1
                elif report.skipped:
                    self.skipped += 1

    test = os.path.abspath(sys.argv[1])
    name = os.path.splitext(os.path.basename(test))[0]
    base = os.path.abspath(f"pytest_{name}_{os.getpid()}")
    seen = Outcomes()
    try:
        rc = pytest.main([test, "-q", "-rs", "-p", "no:cacheprovider", f"--basetemp={base}",
                          f"--rootdir={os.path.dirname(test)}"], plugins=[seen])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if rc == 0 and seen.passed == 0 and seen.skipped > 0:
        return SKIP
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
