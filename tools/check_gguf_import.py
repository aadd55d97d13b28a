#!/usr/bin/env python3
"""Functional check of `cortiq import-gguf`: an independent numpy forward pass (HF semantics)
over the tensors, header and tokenizer of the imported .cmf, reporting the mean next-token
loss on a fixed English paragraph, once as imported and once with a fix-up undone on purpose
(llama: the GGUF Q/K row order kept; Gemma: the norm shift not undone). A correct import gives
a loss of a few nats; the broken variant must be clearly worse.

    cortiq import-gguf model.gguf --quant f32 -o /tmp/m.cmf
    python3 tools/check_gguf_import.py /tmp/m.cmf [path/to/cortiq]

Needs numpy and tokenizers (pip). Handles the llama/qwen families (RMSNorm x*w, optional
q/k norms) and Gemma 3 (x*(1+w), sandwich norms, per-layer rope base and sliding window).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from tokenizers import Tokenizer

TEXT = ("Photosynthesis is the process by which green plants and some other organisms use sunlight to "
        "synthesize foods from carbon dioxide and water. Photosynthesis in plants generally involves the "
        "green pigment chlorophyll and generates oxygen as a byproduct.")


def load(cmf, cortiq, tmp):
    info = json.loads(subprocess.check_output([cortiq, "info", cmf, "--json"]))
    off, length = info["sections"]["vocab"]
    with open(cmf, "rb") as f:
        f.seek(off)
        tok = Tokenizer.from_str(f.read(length).decode())
    subprocess.check_call([cortiq, "dequant", cmf, "--all", tmp], stdout=subprocess.DEVNULL)
    names = {f[:-4] for f in os.listdir(tmp) if f.endswith(".npy")}
    return info["header"]["arch"], tok, lambda n: np.load(os.path.join(tmp, n + ".npy")).astype(np.float32), names


def permute(w, n_head):
    """llama.cpp's Q/K row order, to break the import on purpose."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def loss(arch, tok, W, names, broken):
    gemma = arch["norm_style"] == "gemma"
    L, H, KV, hd = arch["num_layers"], arch["num_attention_heads"], arch["num_kv_heads"], arch["head_dim"]
    eps = arch["rms_norm_eps"]
    shift = (2.0 if broken else 1.0) if gemma else 0.0
    ids = tok.encode(TEXT).ids
    T, pos = len(ids), np.arange(len(ids))

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (shift + w)

    def rope(x, base):
        f = np.outer(pos, 1.0 / (base ** (np.arange(0, hd, 2) / hd)))
        c, s = np.cos(np.concatenate([f, f], -1)), np.sin(np.concatenate([f, f], -1))
        return x * c[:, None] + np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1) * s[:, None]

    E = W("model.embed_tokens.weight")
    head = E if arch.get("tie_word_embeddings") else W("lm_head.weight")
    x = E[ids] * (np.float32(np.sqrt(arch["hidden_size"])) if gemma else 1.0)
    layer_types = arch.get("layer_types") or ["FullAttention"] * L
    for layer in range(L):
        p = f"model.layers.{layer}."
        sliding = layer_types[layer] == "SlidingAttention"
        h = rms(x, W(p + "input_layernorm.weight"))
        wq, wk = W(p + "self_attn.q_proj.weight"), W(p + "self_attn.k_proj.weight")
        if broken and not gemma:
            wq, wk = permute(wq, H), permute(wk, KV)
        q, k = (h @ wq.T).reshape(T, H, hd), (h @ wk.T).reshape(T, KV, hd)
        v = (h @ W(p + "self_attn.v_proj.weight").T).reshape(T, KV, hd)
        if (p + "self_attn.q_norm.weight") in names:
            q, k = rms(q, W(p + "self_attn.q_norm.weight")), rms(k, W(p + "self_attn.k_norm.weight"))
        base = arch["rope_local_base_freq"] if sliding else arch["rope_theta"]
        q, k = rope(q, base), rope(k, base)
        k, v = np.repeat(k, H // KV, 1), np.repeat(v, H // KV, 1)
        a = np.einsum("thd,shd->hts", q, k) * arch.get("query_pre_attn_scalar", hd) ** -0.5
        mask = np.triu(np.ones((T, T), bool), 1)
        if sliding:
            mask |= np.tril(np.ones((T, T), bool), -arch["sliding_window"])
        a = np.where(mask[None], -1e30, a)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", a, v).reshape(T, -1) @ W(p + "self_attn.o_proj.weight").T
        if gemma:
            x = x + rms(o, W(p + "post_attention_layernorm.weight"))
            h = rms(x, W(p + "pre_feedforward_layernorm.weight"))
        else:
            x = x + o
            h = rms(x, W(p + "post_attention_layernorm.weight"))
        g = h @ W(p + "mlp.gate_proj.weight").T
        g = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3))) if gemma else g / (1 + np.exp(-g))
        m = (g * (h @ W(p + "mlp.up_proj.weight").T)) @ W(p + "mlp.down_proj.weight").T
        x = x + (rms(m, W(p + "post_feedforward_layernorm.weight")) if gemma else m)
    lg = rms(x[:-1], W("model.norm.weight")) @ head.T
    lg = lg - lg.max(-1, keepdims=True)
    lp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
    return float(-lp[np.arange(T - 1), ids[1:]].mean()), T


if __name__ == "__main__":
    cmf = sys.argv[1]
    cortiq = sys.argv[2] if len(sys.argv) > 2 else "cortiq"
    with tempfile.TemporaryDirectory() as tmp:
        arch, tok, W, names = load(cmf, cortiq, tmp)
        good, n = loss(arch, tok, W, names, False)
        bad, _ = loss(arch, tok, W, names, True)
    what = "norm shift not undone" if arch["norm_style"] == "gemma" else "GGUF Q/K row order kept"
    print(f"{cmf}: {n} tokens, loss {good:.3f} nats/token as imported, {bad:.3f} with the {what}")
    sys.exit(0 if good + 0.5 < bad and good < 4.0 else 1)
