"""Errors come out as cortiq.Error subclasses carrying the C status and the library's message:
a wrong path, corrupt files (magic, envelope, header hash, truncation, payload bytes), bad numpy
dtypes, bad quant names, unknown tensors, a closed file."""
import numpy as np
import pytest

import cortiq
from cortiq import errors
from cortiq._ffi import ffi, lib


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.cmf"
    rng = np.random.default_rng(0)
    cortiq.write(path, {"w": rng.standard_normal((32, 64)).astype(np.float32),
                        "b": rng.standard_normal(64).astype(np.float32)}, quant="q8")
    return path


def corrupt(src, dst, offset, data):
    b = bytearray(src.read_bytes())
    b[offset:offset + len(data)] = data
    dst.write_bytes(bytes(b))
    return dst


def test_status_classes_match_the_library():
    for code in range(1, 15):
        cls = type(errors.from_status(code, "m"))
        assert cls.code == code
        assert cls.status == ffi.string(lib.cmf_status_name(code)).decode()


def test_wrong_path(tmp_path):
    with pytest.raises(cortiq.IOFailure) as e:
        cortiq.open(tmp_path / "missing.cmf")
    assert isinstance(e.value, OSError) and e.value.code == 7
    assert "missing.cmf" in str(e.value)
    with pytest.raises(cortiq.IOFailure):
        cortiq.open(tmp_path)  # a directory


def test_bad_magic(good, tmp_path):
    with pytest.raises(cortiq.InvalidMagic) as e:
        cortiq.open(corrupt(good, tmp_path / "magic.cmf", 0, b"GGUF"))
    assert e.value.code == 1 and isinstance(e.value, cortiq.FormatError)


def test_bad_version(good, tmp_path):
    with pytest.raises(cortiq.UnsupportedVersion):
        cortiq.open(corrupt(good, tmp_path / "v.cmf", 4, (3).to_bytes(4, "little")))


def test_truncated(good, tmp_path):
    p = tmp_path / "short.cmf"
    p.write_bytes(good.read_bytes()[:-1000])
    with pytest.raises(cortiq.FormatError) as e:
        cortiq.open(p)
    assert e.value.code in (4, 5)  # Bounds (or Parse)


def test_header_byte_flipped(good, tmp_path):
    data = good.read_bytes()
    header_off = int.from_bytes(data[16:24], "little")
    pos = data.index(b'"', header_off)
    p = corrupt(good, tmp_path / "hdr.cmf", pos + 1, bytes([data[pos + 1] ^ 0x01]))
    with pytest.raises(cortiq.FormatError) as e:
        cortiq.open(p)
    assert e.value.code in (5, 6)  # Hash (spec §8.1), or Parse when the JSON breaks first


def test_payload_byte_flipped(good, tmp_path):
    with cortiq.open(good) as f:
        info = f.tensors["w"]
    data = good.read_bytes()
    data_off = int.from_bytes(data[48:56], "little")
    at = data_off + info.offset + 5
    p = corrupt(good, tmp_path / "pay.cmf", at, bytes([data[at] ^ 0x10]))
    with cortiq.open(p) as f:  # tensor hashes are on demand (spec §1.2)
        problems = f.verify(raise_on_error=False)
        assert len(problems) == 1 and "'w'" in problems[0]
        with pytest.raises(cortiq.HashMismatch) as e:
            f.verify()
        assert e.value.code == 6
    with pytest.raises(cortiq.HashMismatch):
        cortiq.open(p, verify=True)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.complex64, np.bool_, object])
def test_bad_numpy_dtype(tmp_path, dtype):
    a = np.zeros((4, 32), dtype=dtype)
    with pytest.raises(cortiq.DtypeError) as e:
        cortiq.write(tmp_path / "x.cmf", {"x": a}, quant="f32")
    assert isinstance(e.value, TypeError) and e.value.code == 11
    assert not (tmp_path / "x.cmf").exists()


def test_bad_quant_and_shapes(tmp_path):
    a = np.ones((4, 64), np.float32)
    with pytest.raises(cortiq.InvalidArgument):
        cortiq.write(tmp_path / "q.cmf", {"a": a}, quant="q3_k")
    with pytest.raises(cortiq.InvalidArgument):
        cortiq.write(tmp_path / "q.cmf", {"a": a}, quant=5)  # reserved id (mix8_4)
    with pytest.raises(cortiq.InvalidArgument):
        cortiq.write(tmp_path / "q.cmf", {"a": np.ones((0, 4), np.float32)}, quant="f32")
    with pytest.raises(cortiq.InvalidArgument):
        cortiq.write(tmp_path / "q.cmf", {"a": np.ones((1,) * 7, np.float32)}, quant="f32")
    with pytest.raises(cortiq.Unsupported):  # quantized dtypes refuse NaN weights
        cortiq.write(tmp_path / "q.cmf", {"a": np.full((4, 64), np.nan, np.float32)}, quant="q8")
    assert not (tmp_path / "q.cmf").exists()


def test_cli_quant_names(tmp_path):
    a = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    names = {"q8": "q8_row", "q4": "q4_block", "q4t": "q4_tiled", "vbit": "vbit_ro",
             "q8_row": "q8_row", 8: "vbit"}
    cortiq.write(tmp_path / "n.cmf", {str(k): a for k in names},
                 quant={str(k): k for k in names})
    with cortiq.open(tmp_path / "n.cmf") as f:
        assert {k: f.tensors[str(k)].dtype for k in names} == names


def test_unknown_tensor_and_closed_file(good):
    f = cortiq.open(good)
    with pytest.raises(cortiq.NotFound) as e:
        f.tensor("nope")
    assert isinstance(e.value, LookupError) and "nope" in str(e.value)
    with pytest.raises(cortiq.DtypeError):
        f.tensor("w", dtype=np.int8)
    f.close()
    assert f.closed
    with pytest.raises(cortiq.Error):
        _ = f.tensors


def test_convert_errors(tmp_path):
    with pytest.raises(cortiq.Error):
        cortiq.convert(tmp_path / "no_such_checkpoint", tmp_path / "o.cmf")
    with pytest.raises(cortiq.InvalidArgument):
        cortiq.convert(tmp_path, tmp_path / "o.cmf", quant="q9")
    assert not (tmp_path / "o.cmf").exists()
