"""numpy -> cortiq.write -> CMF -> cortiq.open -> numpy, for every live dtype of spec §3.1:
bit-exact for f32/f16/bf16, within the codec's error bound for the quantized ones: the bounds of
tests/quant/test_codec_error.c (Gaussian column) on the same matrix, rebuilt here bit for bit
from tests/quant/quant_matrix.h (splitmix64, Box-Muller, row amplitudes x0.5..x2, seed 1)."""
import gc
import json
import math

import numpy as np
import pytest

import cortiq

ROWS, IN = 64, 256

# dtype (spec name) -> relative RMSE bound on a Gaussian matrix (test_codec_error.c)
BOUNDS = {"q8_row": 0.0078, "q8_2f": 0.0074, "q4_block": 0.110, "q4_tiled": 0.110,
          "q4tp": 0.109, "vbit": 0.081, "vbit_ro": 0.081, "q1": 0.68, "q1s": 0.615,
          "q1t": 0.428}


M64 = (1 << 64) - 1


def codec_matrix(rows=ROWS, cols=IN, seed=1):
    """qm_gaussian() of tests/quant/quant_matrix.h."""
    state = seed

    def unif():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        return ((z >> 11) + 0.5) / 9007199254740992.0

    w = np.empty((rows, cols), np.float32)
    for i in range(rows):
        amp = 0.02 * 2.0 ** (2.0 * unif() - 1.0)
        for j in range(cols):
            u1 = unif()
            w[i, j] = amp * (math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * unif()))
    return w


def gaussian(seed, shape=(ROWS, IN)):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def bf16_bits(a):
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (finite values)."""
    u = a.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def rel_rmse(ref, got):
    return float(np.sqrt(np.mean((ref.astype(np.float64) - got) ** 2) /
                         np.mean(ref.astype(np.float64) ** 2)))


@pytest.mark.parametrize("quant", sorted(BOUNDS))
def test_quantized_within_codec_bound(tmp_path, quant):
    w = codec_matrix()
    norm = gaussian(2, (IN,))
    path = tmp_path / f"{quant}.cmf"
    # by spec name; "vbit" alone is the CLI's name of vbit_ro, so spec vbit goes by its id (8)
    cortiq.write(path, {"w": w, "norm": norm}, quant=8 if quant == "vbit" else quant)
    with cortiq.open(path, verify=True) as f:
        assert f.tensors["w"].dtype == quant
        assert f.tensors["w"].shape == (ROWS, IN)
        # 1-D tensors are f16 whatever was asked (spec §3.2)
        assert f.tensors["norm"].dtype == "f16"
        got = f.tensor("w")
        assert got.dtype == np.float32 and got.shape == (ROWS, IN)
        e = rel_rmse(w, got)
        assert e <= BOUNDS[quant], f"{quant}: relative RMSE {e:.4g} > {BOUNDS[quant]}"
        assert e > 0 or quant == "q8_row", f"{quant}: lossless on Gaussian data?"
        assert np.array_equal(f.tensor("norm"), norm.astype(np.float16))
        assert f.verify() == []


def test_f32_bit_exact_any_rank(tmp_path):
    arrays = {"scalar_like": np.float32([3.5]), "m": gaussian(3),
              "t3": gaussian(4, (2, 3, 64)), "t6": gaussian(5, (1, 2, 1, 2, 3, 4)),
              "special": np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38])}
    path = tmp_path / "f32.cmf"
    cortiq.write(path, arrays, quant="f32")
    with cortiq.open(path) as f:
        for name, a in arrays.items():
            got = f.tensor(name)
            assert f.tensors[name].dtype == "f32" and got.dtype == np.float32
            assert got.shape == a.shape
            assert got.tobytes() == a.tobytes(), name  # bit-exact, NaN and -0.0 included


def test_f16_bit_exact(tmp_path):
    a = gaussian(6)
    h = gaussian(7).astype(np.float16)  # written as is
    path = tmp_path / "f16.cmf"
    cortiq.write(path, {"from32": a, "from16": h}, quant="f16")
    with cortiq.open(path) as f:
        assert f.tensor("from32").tobytes() == a.astype(np.float16).tobytes()
        assert f.tensor("from16").tobytes() == h.tobytes()
        assert f.tensor("from16").dtype == np.float16
        assert f.tensor("from16", dtype=np.float32).dtype == np.float32


def test_bf16_bit_exact(tmp_path):
    a = gaussian(8)
    a[0, :4] = [1.0, -2.5, 1e30, -1e-30]
    path = tmp_path / "bf16.cmf"
    cortiq.write(path, {"w": a}, quant="bf16")
    with cortiq.open(path) as f:
        want = bf16_bits(a)
        assert np.array_equal(f.raw("w").view(np.uint16).reshape(a.shape), want)
        got = f.tensor("w", dtype=np.float32)
        assert np.array_equal(got.view(np.uint32), want.astype(np.uint32) << 16)


def test_views_are_zero_copy_and_outlive_the_file(tmp_path):
    a = gaussian(9)
    h = gaussian(10).astype(np.float16)
    path = tmp_path / "v.cmf"
    cortiq.write(path, {"a": a, "h": h}, quant={"a": "f32", "h": "f16"})
    f = cortiq.open(path)
    v, vh = f.tensor("a"), f.tensor("h")
    assert np.shares_memory(v, f.raw("a")) and np.shares_memory(vh, f.raw("h"))
    assert not v.flags.writeable and not v.flags.owndata
    with pytest.raises(ValueError):
        v[0, 0] = 1.0
    f.close()
    with pytest.raises(cortiq.Error):
        f.tensor("a")
    del f
    gc.collect()
    assert np.array_equal(v, a) and np.array_equal(vh, h)  # the views hold the mapping


def test_header_order_vocab_and_default_quant(tmp_path):
    header = {"format": "cmf", "arch": {"arch_name": "toy", "num_layers": 2},
              "provenance": {"by": "test"}}
    tensors = {"z.last": gaussian(11, (32, 64)), "a.first": gaussian(12, (32, 64))}
    vocab = b'{"model": {"type": "WordLevel"}}'
    path = tmp_path / "h.cmf"
    cortiq.write(path, tensors, header=header, vocab=vocab)  # default quant: q4tp
    with cortiq.open(path) as f:
        assert list(f.tensors) == ["z.last", "a.first"]
        assert {t.dtype for t in f.tensors.values()} == {"q4tp"}
        assert f.header["arch"] == header["arch"] and f.arch["arch_name"] == "toy"
        assert f.header["provenance"] == {"by": "test"}
        assert "section_hashes" in f.header  # filled by the writer
        assert f.vocab == vocab
        assert f.skills == [] and f.masks == {}


def test_shards_are_followed(tmp_path):
    tensors = {f"t{i}": gaussian(20 + i, (64, 64)) for i in range(4)}
    cortiq.write(tmp_path / "s.cmf", tensors, quant="f32", shard_max_bytes=40000)
    shards = sorted(p.name for p in tmp_path.glob("s-*-of-*.cmf"))
    assert len(shards) > 1, shards
    with cortiq.open(tmp_path / shards[-1]) as f:
        assert len(f.shards) == len(shards)
        assert sorted(f.tensors) == sorted(tensors)
        assert len({t.shard for t in f.tensors.values()}) == len(shards)
        for name, a in tensors.items():
            assert np.array_equal(f.tensor(name), a)
        assert f.verify() == []
    with cortiq.open(tmp_path / shards[-1], shards=False) as f:
        assert len(f.tensors) < len(tensors)


def test_masks_round_trip(tmp_path):
    layers, inter, heads = 2, 40, 4
    rng = np.random.default_rng(13)
    header = {"arch": {"num_layers": layers, "intermediate_size": inter,
                       "num_attention_heads": heads}}
    masks = {
        "code": {"ffn": rng.random((layers, inter)) < 0.5,
                 "heads": rng.random((layers, heads)) < 0.5,
                 "gates": np.array([True, False]), "description": "code tasks",
                 "quality": {"ppl": 3.5}},
        "chat": {"ffn": np.ones((layers, inter), bool), "heads": np.ones((layers, heads), bool),
                 "gates": np.ones(layers, bool)},
    }
    path = tmp_path / "m.cmf"
    cortiq.write(path, {"w": gaussian(14, (32, 64))}, header=header, quant="q8",
                 masks=masks, default_task="chat")
    with cortiq.open(path) as f:
        got = f.masks
        assert sorted(got) == ["chat", "code"] and f.default_task == "chat"
        for name, m in masks.items():
            g = got[name]
            assert np.array_equal(g.ffn, m["ffn"]) and np.array_equal(g.heads, m["heads"])
            assert np.array_equal(g.gates, m["gates"]) and g.experts is None
        assert got["code"].description == "code tasks" and got["code"].quality == {"ppl": 3.5}
        assert got["chat"].quality is None


def test_tensor_info(tmp_path):
    cortiq.write(tmp_path / "i.cmf", {"a": gaussian(15, (32, 64)), "b": gaussian(16, (8, 64))},
                 quant="q8")
    with cortiq.open(tmp_path / "i.cmf") as f:
        a, b = f.tensors["a"], f.tensors["b"]
        assert (a.dtype, a.shape, a.nbytes, a.offset) == ("q8_row", (32, 64), 32 * 64 + 32 * 2, 0)
        assert b.offset % 64 == 0 and b.offset >= a.nbytes
        assert f.raw("b").nbytes == b.nbytes
        assert "a" in f and len(f) == 2
        json.dumps({k: v.shape for k, v in f.tensors.items()})


def test_skills_registry_and_replacement_tensors(tmp_path):
    base, over = gaussian(30, (32, 64)), gaussian(31, (32, 64))
    header = {"arch": {"num_layers": 1},
              "skills": [{"id": "sql", "name": "SQL", "layers": [0]}, {"id": "ru", "layers": [0]}]}
    cortiq.write(tmp_path / "s.cmf", {"w": base, "v": base, "skill.sql.w": over},
                 header=header, quant="f32")
    with cortiq.open(tmp_path / "s.cmf") as f:
        assert [s["id"] for s in f.skills] == ["sql", "ru"] and f.skills[0]["name"] == "SQL"
        assert np.array_equal(f.tensor("w", skill="sql"), over)
        assert np.array_equal(f.tensor("w"), base)
        assert np.array_equal(f.tensor("v", skill="sql"), base)  # not replaced: the backbone
        assert np.array_equal(f.tensor("w", skill="ru"), base)
        assert f.resolve("w", "sql") == "skill.sql.w"
        with pytest.raises(cortiq.NotFound):
            f.tensor("w", skill="nope")
