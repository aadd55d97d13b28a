#!/usr/bin/env python3
"""A tiny Laguna-like checkpoint and its reference outputs: the parity oracle of
tests/engine/test_laguna_parity.c (docs/HYBRID.md, "Laguna attention").

transformers' Laguna (models/laguna/modeling_laguna.py) is a llama decoder with:
  - layer_types "sliding_attention" / "full_attention" in any order, the sliding layers with
    their own RoPE (rope_parameters.sliding_attention: rope_theta, partial_rotary_factor), the
    full layers with theirs (rope_parameters.full_attention, possibly YaRN);
  - num_attention_heads_per_layer: the query heads of each layer (k/v heads stay global);
  - q_norm / k_norm (RMSNorm over head_dim);
  - g_proj: gate = softplus(g_proj(x)), x being the layer's input after input_layernorm (the
    input of q_proj), multiplying the attention output just before o_proj: [heads, hidden]
    gives one gate per head, [heads * head_dim, hidden] one per channel.
transformers chooses the gate's kind once per model (config.gating); CMF chooses it per layer
by g_proj's shape (spec §2), and this checkpoint mixes both, plus layers without a gate, so
the installed transformers cannot run it (nor has every version a Laguna): the reference is
computed here with numpy, in float64, from those definitions. The same numpy forward first
reproduces transformers' own logits of the tiny llama and llama_yarn checkpoints
(tests/fixtures/tiny/{llama,llama_yarn}/logits.npy, written by make_tiny_checkpoints.py), and the
script stops when it does not.

The checkpoint (config.json as transformers' LagunaConfig writes it, model_type "laguna"):
6 layers [S, S, F, S, F, F] with sliding_window 8, query heads [4, 2, 4, 4, 2, 4] over 2 kv
heads of 16 dims, sliding RoPE theta 1000 rotating half of each head, full RoPE theta 500000
rotating 0.75 of it with YaRN (factor 4 over 64 positions), g_proj per head in layers 0, 3, 4,
per channel in layer 2, none in layers 1 and 5. Weights are stored f16 (f16-exact values), so
a CMF converted at f32 or f16 holds exactly the weights the reference computes with.

Outputs in tests/fixtures/tiny/laguna: tokens.npy (64 ids), logits.npy ([64, vocab] f32, one
forward pass), greedy.npy (32 greedy tokens continuing the first 8).

usage: python3 tools/make_laguna_reference.py [TINY_DIR]   (needs numpy only)
"""
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

TINY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tiny")
OUT = os.path.join(TINY, "laguna")

S, F = "sliding_attention", "full_attention"
CONFIG = {
    "architectures": ["LagunaForCausalLM"],
    "model_type": "laguna",
    "vocab_size": 320,
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_attention_heads_per_layer": [4, 2, 4, 4, 2, 4],
    "layer_types": [S, S, F, S, F, F],
    "mlp_layer_types": ["dense"] * 6,
    "sliding_window": 8,
    "rope_parameters": {
        F: {"rope_type": "yarn", "rope_theta": 500000.0, "partial_rotary_factor": 0.75, "factor": 4.0,
            "original_max_position_embeddings": 64},
        S: {"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.5},
    },
    "gating": "per-head",
    "attention_bias": False,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
GATES = ["head", None, "channel", "head", "head", None]  # g_proj per layer


# ---- safetensors (the format is a length, a JSON index and the raw little-endian data) ----

DT = {"F32": np.float32, "F16": np.float16, "BF16": None}


def st_load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        index = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in index.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[b:end]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, DT[e["dtype"]])
        out[name] = a.reshape(e["shape"]).astype(np.float64)
    return out


def st_save(path, tensors):
    index, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name].astype(np.float16))
        index[name] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    head = json.dumps(index, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


# ---- the forward pass, from transformers' llama / laguna definitions ----

def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def softplus(x):  # torch.nn.functional.softplus: beta 1, threshold 20
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def rope_inv_freq(p, head_dim):
    """inv_freq and the cos/sin factor of one rope_parameters entry (default or YaRN), as
    transformers' modeling_rope_utils computes them."""
    dim = int(head_dim * p.get("partial_rotary_factor", 1.0))
    base = p["rope_theta"]
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if p.get("rope_type", "default") == "default":
        return 1.0 / pos_freqs, 1.0
    assert p["rope_type"] == "yarn"
    factor, orig = p["factor"], p["original_max_position_embeddings"]
    att = p.get("attention_factor") or (1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0)
    beta_fast, beta_slow = p.get("beta_fast") or 32.0, p.get("beta_slow") or 1.0

    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(corr(beta_fast)), 0), min(math.ceil(corr(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extra = 1.0 - ramp
    inv = (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra
    return inv, att


def apply_rope(x, inv, att, pos):
    """x [T, heads, head_dim]: the first 2 * len(inv) dims rotated (rotate_half), the rest kept."""
    rot = 2 * len(inv)
    f = pos[:, None] * inv[None, :]
    cos = (np.concatenate([np.cos(f), np.cos(f)], -1) * att)[:, None, :]
    sin = (np.concatenate([np.sin(f), np.sin(f)], -1) * att)[:, None, :]
    xr, xp = x[..., :rot], x[..., rot:]
    half = rot // 2
    rotated = np.concatenate([-xr[..., half:], xr[..., :half]], -1)
    return np.concatenate([xr * cos + rotated * sin, xp], -1)


def layer_rope(cfg, l):
    """rope parameters of layer l: per layer type (laguna, gemma3 in transformers 5), else the
    model's own (llama)."""
    rp = cfg.get("rope_parameters") or {"rope_type": "default", "rope_theta": cfg.get("rope_theta", 10000.0)}
    types = cfg.get("layer_types")
    if types and types[l] in rp:
        return rp[types[l]]
    return rp


def forward(cfg, w, ids):
    """logits [T, vocab] of token ids at positions 0 .. T-1."""
    hd, eps = cfg["head_dim"], cfg["rms_norm_eps"]
    nkv, T = cfg["num_key_value_heads"], len(ids)
    heads = cfg.get("num_attention_heads_per_layer") or [cfg["num_attention_heads"]] * cfg["num_hidden_layers"]
    types = cfg.get("layer_types") or [F] * cfg["num_hidden_layers"]
    pos = np.arange(T, dtype=np.float64)
    h = w["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        nh = heads[l]
        x = rmsnorm(h, w[p + "input_layernorm.weight"], eps)
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(T, nh, hd)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd)
        if p + "self_attn.q_norm.weight" in w:
            q = rmsnorm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, w[p + "self_attn.k_norm.weight"], eps)
        inv, att = rope_inv_freq(layer_rope(cfg, l), hd)
        q, k = apply_rope(q, inv, att, pos), apply_rope(k, inv, att, pos)
        group = nh // nkv
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * hd ** -0.5
        qi, ki = np.arange(T)[:, None], np.arange(T)[None, :]
        allowed = ki <= qi
        if types[l] == S:  # transformers' sliding_window_overlay: kv_idx > q_idx - window
            allowed &= ki > qi - cfg["sliding_window"]
        scores = np.where(allowed[None], scores, -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", scores, v)
        if p + "self_attn.g_proj.weight" in w:
            g = softplus(x @ w[p + "self_attn.g_proj.weight"].T)
            o = o * (g[:, :, None] if g.shape[1] == nh else g.reshape(T, nh, hd))
        h = h + o.reshape(T, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        x = rmsnorm(h, w[p + "post_attention_layernorm.weight"], eps)
        gate = x @ w[p + "mlp.gate_proj.weight"].T
        up = x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    return rmsnorm(h, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def greedy(cfg, w, prompt, n):
    ids, margins = list(prompt), []
    for _ in range(n):
        last = forward(cfg, w, ids)[-1]
        top = np.sort(last)[-2:]
        margins.append(top[1] - top[0])
        ids.append(int(np.argmax(last)))
    return ids[len(prompt):], min(margins)


def max_rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def check_oracle():
    """The numpy forward against transformers' logits of the tiny llama checkpoints."""
    for fam in ("llama", "llama_yarn"):
        d = os.path.join(TINY, fam)
        cfg = json.load(open(os.path.join(d, "config.json")))
        w = st_load(os.path.join(d, "model.safetensors"))
        ids = np.load(os.path.join(d, "tokens.npy"))
        ref = np.load(os.path.join(d, "logits.npy"))
        rel = max_rel(forward(cfg, w, ids), ref)
        print("oracle vs transformers on %-10s max rel diff %.3g" % (fam, rel))
        if rel > 1e-5:
            sys.exit("the numpy forward does not reproduce transformers on %s" % fam)


def make_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    H, I, V, hd, nkv = (cfg[k] for k in ("hidden_size", "intermediate_size", "vocab_size", "head_dim",
                                          "num_key_value_heads"))

    def mat(r, c, std=0.08):
        return rng.normal(0.0, std, (r, c))

    def norm(n):
        return rng.normal(1.0, 0.1, n)

    w = {"model.embed_tokens.weight": mat(V, H, 1.0), "lm_head.weight": mat(V, H), "model.norm.weight": norm(H)}
    for l, nh in enumerate(cfg["num_attention_heads_per_layer"]):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = mat(nh * hd, H)
        w[p + "self_attn.k_proj.weight"] = mat(nkv * hd, H)
        w[p + "self_attn.v_proj.weight"] = mat(nkv * hd, H)
        w[p + "self_attn.o_proj.weight"] = mat(H, nh * hd)
        w[p + "self_attn.q_norm.weight"] = norm(hd)
        w[p + "self_attn.k_norm.weight"] = norm(hd)
        if GATES[l]:
            w[p + "self_attn.g_proj.weight"] = mat(nh if GATES[l] == "head" else nh * hd, H, 0.15)
        w[p + "mlp.gate_proj.weight"] = mat(I, H)
        w[p + "mlp.up_proj.weight"] = mat(I, H)
        w[p + "mlp.down_proj.weight"] = mat(H, I)
    # f16-exact: the stored f16 values are the ones the reference computes with
    return {k: v.astype(np.float16).astype(np.float64) for k, v in w.items()}


def main():
    check_oracle()
    os.makedirs(OUT, exist_ok=True)
    cfg = dict(CONFIG)
    w = make_weights(cfg, 2027)
    st_save(os.path.join(OUT, "model.safetensors"), w)
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TINY, "llama", name), os.path.join(OUT, name))
    tokens = np.random.default_rng(7).integers(5, cfg["vocab_size"], 64).astype(np.int32)
    logits = forward(cfg, w, tokens)
    cont, margin = greedy(cfg, w, tokens[:8], 32)
    np.save(os.path.join(OUT, "tokens.npy"), tokens)
    np.save(os.path.join(OUT, "logits.npy"), logits.astype(np.float32))
    np.save(os.path.join(OUT, "greedy.npy"), np.array(cont, np.int32))
    print("laguna: logits %s, max |logit| %.3g, greedy %s (smallest top-2 margin %.3g)" %
          (logits.shape, np.abs(logits).max(), cont[:8], margin))


if __name__ == "__main__":
    main()
