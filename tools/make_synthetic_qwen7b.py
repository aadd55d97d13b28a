#!/usr/bin/env python3
"""A Qwen2.5-7B-shaped checkpoint with random weights (bf16 safetensors, 15.2 GB: 28 layers, hidden
3584, MLP 18944, 28 query / 4 KV heads, 152,064-token vocabulary, untied head), for the runtime
benchmarks' scaling rows (docs/PERFORMANCE.md). Not a fixture: written to a cache dir outside git.

Written tensor by tensor with numpy (no torch; a 7B model does not fit in memory as f32 twice):
matrices N(0, 0.02) as transformers initializes them, norms 1, attention biases 0. Deterministic
for a given seed.

usage: python3 tools/make_synthetic_qwen7b.py [OUT_DIR [LAYERS]]
  (default ~/.cache/cortiq/synthetic-qwen2.5-7b, 28 layers)
"""
import json
import os
import struct
import sys

import numpy as np

# (hidden, MLP, query heads, KV heads, vocabulary) of the shapes this writer knows; the 0.5B one is
# make_synthetic_qwen.py's fallback where torch is not installed
SHAPE_7B = (3584, 18944, 28, 4, 152064)
SHAPE_0_5B = (896, 4864, 14, 2, 151936)


def tensor_list(layers, shape):
    """(name, shape, kind) in file order; kind: w (random matrix), one (norm), zero (bias)."""
    HIDDEN, INTER, HEADS, KV_HEADS, VOCAB = shape
    kv = KV_HEADS * (HIDDEN // HEADS)
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN), "w")]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (HIDDEN,), "one"),
                (p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN), "w"),
                (p + "self_attn.q_proj.bias", (HIDDEN,), "zero"),
                (p + "self_attn.k_proj.weight", (kv, HIDDEN), "w"),
                (p + "self_attn.k_proj.bias", (kv,), "zero"),
                (p + "self_attn.v_proj.weight", (kv, HIDDEN), "w"),
                (p + "self_attn.v_proj.bias", (kv,), "zero"),
                (p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN), "w"),
                (p + "post_attention_layernorm.weight", (HIDDEN,), "one"),
                (p + "mlp.gate_proj.weight", (INTER, HIDDEN), "w"),
                (p + "mlp.up_proj.weight", (INTER, HIDDEN), "w"),
                (p + "mlp.down_proj.weight", (HIDDEN, INTER), "w")]
    out += [("model.norm.weight", (HIDDEN,), "one"), ("lm_head.weight", (VOCAB, HIDDEN), "w")]
    return out


def bf16_bytes(x):
    """float32 array -> bf16 bytes, rounded to nearest even (as torch's .to(bfloat16))."""
    u = x.view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return u.astype(np.uint16).tobytes()


def write_checkpoint(out, layers, shape):
    HIDDEN, INTER, HEADS, KV_HEADS, VOCAB = shape
    path = os.path.join(out, "model.safetensors")
    if os.path.exists(path):
        print("exists:", out)
        return
    os.makedirs(out, exist_ok=True)
    tl = tensor_list(layers, shape)
    head, off = {}, 0
    for name, shape, _ in tl:
        n = 2 * int(np.prod(shape))
        head[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    head["__metadata__"] = {"format": "pt"}
    hb = json.dumps(head, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    rng = np.random.default_rng(0)
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, shape, kind in tl:
            if kind == "w":  # row blocks of <= 64 Mi values keep the memory small
                rows_per = max(1, (64 << 20) // shape[-1])
                for r in range(0, shape[0], rows_per):
                    nr = min(rows_per, shape[0] - r)
                    x = rng.standard_normal((nr,) + tuple(shape[1:]), dtype=np.float32)
                    x *= np.float32(0.02)
                    f.write(bf16_bytes(x))
            else:
                f.write(bf16_bytes(np.full(shape, 1.0 if kind == "one" else 0.0, dtype=np.float32)))
    os.replace(tmp, path)
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": VOCAB,
           "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": layers,
           "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "max_position_embeddings": 32768,
           "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
           "hidden_act": "silu", "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    # the tokenizer of the tiny qwen2 fixture stands in (the benchmark does not tokenize text)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny", "qwen2")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(src, name), "rb") as a, open(os.path.join(out, name), "wb") as b:
            b.write(a.read())
    print("written", out)


if __name__ == "__main__":
    write_checkpoint(sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/cortiq/synthetic-qwen2.5-7b"),
                     int(sys.argv[2]) if len(sys.argv) > 2 else 28, SHAPE_7B)
