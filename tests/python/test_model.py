"""cortiq.Model on the tiny llama checkpoint (tests/fixtures/tiny/llama, converted at f32 by
cortiq.convert): text generation identical to the CLI's (`cortiq run`) with the same seed and
sampling, logits within 1e-4 (max |diff| / max |logit|) of transformers' reference
(logits.npy), 32 greedy tokens identical to transformers' (greedy.npy), and the final hidden
states that embed() pools are the vectors the output head turns into those logits."""
import subprocess

import numpy as np
import pytest

import cortiq
from conftest import TINY, cortiq_bin

PROMPT = "Hello world, the quick brown fox"


@pytest.fixture(scope="module")
def model(tiny_f32):
    with cortiq.Model(tiny_f32, threads=1, kv="f32", act="f32") as m:
        yield m


def cli_run(path, *args):
    exe = cortiq_bin()
    if not exe:
        pytest.skip("the cortiq CLI is not built (CORTIQ_BIN)")
    r = subprocess.run([exe, "run", str(path), "-t", "1", "--kv", "f32", "--f32-act", *args],
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode("utf-8")


def answer_line(text):
    """What `cortiq run` prints for an answer: the text, then a line end unless it has one."""
    return text if text.endswith("\n") else text + "\n"


@pytest.mark.parametrize("seed,temp", [(1, 0.8), (7, 1.3), (42, 0.0)])
def test_generate_equals_cli(tiny_f32, model, seed, temp):
    ours = "".join(model.generate(PROMPT, max_tokens=24, seed=seed, temperature=temp))
    assert model.last_stats["generated_tokens"] > 0
    cli = cli_run(tiny_f32, "--raw", "--prompt", PROMPT, "--max-tokens", "24", "--seed",
                  str(seed), "--temp", str(temp))
    assert cli == answer_line(ours)


def test_generate_equals_cli_quantized_defaults(tmp_path):
    """q4tp weights, the runtime's default KV cache (f16) and activations (int8 products) on
    both sides."""
    path = tmp_path / "llama.q4tp.cmf"
    cortiq.convert(TINY / "llama", path, quant="q4tp", threads=1)
    with cortiq.Model(path, threads=1) as m:
        ours = "".join(m.generate(PROMPT, max_tokens=24, seed=11, temperature=0.9))
    exe = cortiq_bin()
    if not exe:
        pytest.skip("the cortiq CLI is not built (CORTIQ_BIN)")
    r = subprocess.run([exe, "run", str(path), "-t", "1", "--raw", "--prompt", PROMPT,
                        "--max-tokens", "24", "--seed", "11", "--temp", "0.9"],
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode("utf-8") == answer_line(ours)


def test_chat_equals_cli(tiny_f32, model):
    ours = model.chat([{"role": "user", "content": "Say hi"}], max_tokens=16, seed=5)
    cli = cli_run(tiny_f32, "--prompt", "Say hi", "--max-tokens", "16", "--seed", "5")
    assert cli == answer_line(ours)
    # stream=True yields the same text in pieces
    pieces = list(model.chat("Say hi", max_tokens=16, seed=5, stream=True))
    assert "".join(pieces) == ours


def test_tokenize_round_trip(model):
    ids = model.tokenize(PROMPT)
    assert all(isinstance(i, int) for i in ids) and len(ids) > 3
    assert model.detokenize(ids) == PROMPT


def test_logits_match_transformers(model):
    tokens = np.load(TINY / "llama" / "tokens.npy")
    ref = np.load(TINY / "llama" / "logits.npy")
    got = model.logits(tokens)
    assert got.shape == ref.shape == (tokens.size, model.vocab_size)
    rel = np.abs(got - ref).max() / np.abs(ref).max()
    assert rel <= 1e-4, f"logits max relative difference {rel:.3g} > 1e-4"
    # a fresh context each call: the same ids give the same logits, and a prefix the logits of
    # the longer call (to rounding: a batch of 8 may take other kernels than the whole prompt)
    head = model.logits(tokens[:8])
    assert np.array_equal(head, model.logits(tokens[:8]))
    assert np.abs(head - got[:8]).max() <= 1e-5 * np.abs(got[:8]).max()


def test_greedy_ids_match_transformers(model):
    tokens = np.load(TINY / "llama" / "tokens.npy")
    greedy = np.load(TINY / "llama" / "greedy.npy")
    ids = [int(t) for t in tokens[:8]]
    for _ in range(greedy.size):  # one token at a time through logits()
        ids.append(int(np.argmax(model.logits(ids)[-1])))
    assert ids[8:] == greedy.tolist()


def test_token_macs_counts_the_layer_matrices(tiny_f32, model):
    """Every 2-D matrix of the layers (this dense checkpoint has no experts), not the embedding
    or the head."""
    with cortiq.open(tiny_f32) as f:
        want = sum(t.shape[0] * t.shape[1] for name, t in f.tensors.items()
                   if name.startswith("model.layers.") and len(t.shape) == 2)
    assert want > 0 and model.token_macs == want


def test_hidden_states_feed_the_head(tiny_f32, model):
    ids = model.tokenize(PROMPT)
    hidden = model.hidden_states(ids)
    assert hidden.shape == (len(ids), model.hidden_size)
    with cortiq.open(tiny_f32) as f:
        head = f.tensor("lm_head.weight" if "lm_head.weight" in f else
                        "model.embed_tokens.weight")
    logits = model.logits(ids)
    assert np.abs(hidden @ head.T - logits).max() <= 1e-4 * np.abs(logits).max()
    e = model.embed(PROMPT)
    assert e.shape == (model.hidden_size,)
    assert np.allclose(e, hidden.mean(axis=0), atol=1e-6)
    assert abs(np.linalg.norm(model.embed(PROMPT, normalize=True)) - 1.0) < 1e-5


def test_generate_early_stop_and_reuse(model):
    it = model.generate(PROMPT, max_tokens=64, seed=3, temperature=0.9)
    first = next(it)
    it.close()  # leaving early stops the C loop
    assert isinstance(first, str)
    assert model.last_stats["finish"] in ("stopped", "length", "eos")
    again = "".join(model.generate(PROMPT, max_tokens=8, greedy=True))
    assert again == "".join(model.generate(model.tokenize(PROMPT), max_tokens=8, greedy=True))


def test_model_errors(tiny_f32, model):
    with pytest.raises(TypeError):
        model.generate(PROMPT, max_tokens=4, temprature=0.5)
    with pytest.raises(cortiq.InvalidArgument):
        model.logits([model.vocab_size + 5])
    with pytest.raises(cortiq.InvalidArgument):
        cortiq.Model(tiny_f32, kv="f64")
    with pytest.raises(cortiq.IOFailure):
        cortiq.Model(str(tiny_f32) + ".missing")
    m = cortiq.Model(tiny_f32, threads=1)
    m.close()
    with pytest.raises(cortiq.Error):
        m.tokenize("x")
