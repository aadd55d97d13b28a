"""Shared set-up of the Python package tests: import the package from python/src against the
in-tree libcortiq (CORTIQ_LIB, set by CTest; else build/src/libcortiq.so), no pip install."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("CORTIQ_SOURCE_DIR") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(ROOT / "python" / "src"))
if not os.environ.get("CORTIQ_LIB"):
    for cand in (ROOT / "build" / "src" / "libcortiq.so",):
        if cand.exists():
            os.environ["CORTIQ_LIB"] = str(cand)

TINY = ROOT / "tests" / "fixtures" / "tiny"
REF_CORPUS = ROOT / "tests" / "fixtures" / "interop" / "ref_py"


def cortiq_bin():
    """The CLI built beside the library ($CORTIQ_BIN from CTest), or None."""
    b = os.environ.get("CORTIQ_BIN")
    if b and os.access(b, os.X_OK):
        return b
    cand = ROOT / "build" / "src" / "cortiq"
    return str(cand) if os.access(cand, os.X_OK) else None


def ref_oracle_dir():
    """bin/ of the other CMF implementation (shared/tools/ref-oracle), or None."""
    d = os.environ.get("CORTIQ_REF_ORACLE") or str(ROOT.parent / "shared" / "tools" /
                                                   "ref-oracle" / "bin")
    return d if os.access(os.path.join(d, "cmfref"), os.X_OK) else None


@pytest.fixture(scope="session")
def tiny_f32(tmp_path_factory):
    """The tiny llama checkpoint converted at f32 by cortiq.convert (tests/fixtures/tiny)."""
    import cortiq
    out = tmp_path_factory.mktemp("tiny") / "llama.f32.cmf"
    cortiq.convert(TINY / "llama", out, quant="f32", threads=1)
    return out
