"""What the tests of bench/'s Python tools share: loading a tool (an extension-less script) as a
module, and counting failed checks."""
import os
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader


def load(root, name):
    """bench/NAME under the source tree ROOT, imported as the module NAME."""
    loader = SourceFileLoader(name, os.path.join(root, "bench", name))
    module = module_from_spec(spec_from_loader(name, loader))
    loader.exec_module(module)
    return module


class Checks:
    """check(what, ok) prints what failed; finish() exits 1 if anything did."""

    def __init__(self):
        self.failed = 0

    def __call__(self, what, ok):
        if not ok:
            self.failed += 1
            print("FAIL:", what)

    def finish(self, label):
        print(f"{label}:", "FAILED" if self.failed else "ok")
        sys.exit(1 if self.failed else 0)
