"""cortiq.File reads the corpus the other CMF implementation wrote (tests/fixtures/interop/ref_py:
its Python converter's files, the interop suite's corpus) exactly as that implementation does:

  - against its Python reader, python/cmf_reader.py of infosave2007/cmf at commit
    1c500da1155c98212940c820e182869bfd662af8 (the oracle's commit), when $CORTIQ_REF_PY_READER
    names a copy of that file (it is not part of this repository; get it with
    `git -C <clone> show 1c500da1155c98212940c820e182869bfd662af8:python/cmf_reader.py`);
  - against its Rust reader, `cmfref dump` (shared/tools/ref-oracle), when present.

Each check skips itself when its oracle is absent. Directory records, header and every tensor
value must be equal: the corpus holds f32, f16, q8_row and q4_block, whose decodes are exact
(a scale times a small integer), so any difference is a bug, not rounding."""
import importlib.util
import os
import subprocess

import numpy as np
import pytest

import cortiq
from conftest import REF_CORPUS, ref_oracle_dir

FILES = sorted(p.name for p in REF_CORPUS.glob("*.cmf"))


def same(a, b):
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def test_corpus_present():
    assert len(FILES) >= 20, f"{REF_CORPUS}: {len(FILES)} files"


@pytest.fixture(scope="module")
def ref_reader():
    path = os.environ.get("CORTIQ_REF_PY_READER")
    if not path or not os.path.exists(path):
        pytest.skip("the reference Python reader is absent (set CORTIQ_REF_PY_READER to "
                    "cmf_reader.py of infosave2007/cmf)")
    spec = importlib.util.spec_from_file_location("ref_cmf_reader", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", FILES)
def test_equal_to_reference_python_reader(ref_reader, name):
    ref = ref_reader.CmfReader(REF_CORPUS / name)
    try:
        with cortiq.open(REF_CORPUS / name) as f:
            assert f.header == ref.header
            assert sorted(f.tensors) == sorted(ref.tensors)
            for tname, info in f.tensors.items():
                e, _ = ref.tensors[tname]
                assert (info.dtype, info.shape, info.offset, info.nbytes, info.hash) == (
                    e["dtype"], tuple(e["shape"]), e["off"], e["nbytes"], e["hash"]), tname
                theirs = ref.tensor(tname)
                ours = f.tensor(tname)
                assert ours.dtype == (np.float16 if info.dtype == "f16" else np.float32)
                assert same(ours, theirs.astype(ours.dtype)), f"{name}: {tname} differs"
            assert f.verify() == [] and ref.verify() == []
    finally:
        ref.close()


@pytest.mark.parametrize("name", FILES)
def test_equal_to_cmfref_dump(tmp_path, name):
    oracle = ref_oracle_dir()
    if not oracle:
        pytest.skip("the reference oracle (shared/tools/ref-oracle) is absent; set "
                    "CORTIQ_REF_ORACLE")
    r = subprocess.run([os.path.join(oracle, "cmfref"), "dump", str(REF_CORPUS / name),
                        str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    with cortiq.open(REF_CORPUS / name) as f:
        assert len(list(tmp_path.glob("*.npy"))) == len(f.tensors)
        for tname in f.tensors:
            theirs = np.load(tmp_path / (tname.replace("/", "_") + ".npy"))
            ours = f.tensor(tname, dtype=np.float32)
            assert same(ours, theirs), f"{name}: {tname} differs from cmfref dump"
