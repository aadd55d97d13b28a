#!/usr/bin/env python3
"""The Qwen3.5-shaped synthetic checkpoint of tools/make_synthetic_qwen35.py (same config: hidden
1024, 8 layers in the 3:1 linear / full schedule, Gated DeltaNet with 16 key / 32 value heads of
128, gated 256-dim attention, vocabulary 32000) built with numpy alone, for machines without
torch / transformers: random f16 weights (normal, std 0.02; norms at their zero-centred identity;
A_log = log(U[1, 16]), dt_bias = 1 as transformers initialises them). Only speed is measured on it.

usage: python3 tools/make_synthetic_qwen35_numpy.py [OUT_DIR]
       (default ~/.cache/cortiq/synthetic-qwen3.5-np)
"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_write  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/cortiq/synthetic-qwen3.5-np")
if os.path.exists(os.path.join(out, "model.safetensors")):
    print("exists:", out)
    sys.exit(0)
H, I, V, L = 1024, 3072, 32000, 8
NH, NKV, HD = 8, 2, 256
NK, NV, DK, DV, KW = 16, 32, 128, 128, 4
types = (["linear_attention"] * 3 + ["full_attention"]) * 2
rng = np.random.default_rng(0)


def rand(*shape):
    return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)


t = {"model.embed_tokens.weight": rand(V, H), "lm_head.weight": rand(V, H),
     "model.norm.weight": np.zeros(H, np.float16)}
for i, ty in enumerate(types):
    p = f"model.layers.{i}."
    t[p + "input_layernorm.weight"] = np.zeros(H, np.float16)
    t[p + "post_attention_layernorm.weight"] = np.zeros(H, np.float16)
    t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = rand(I, H), rand(I, H)
    t[p + "mlp.down_proj.weight"] = rand(H, I)
    if ty == "linear_attention":
        a = p + "linear_attn."
        conv = 2 * NK * DK + NV * DV
        t[a + "in_proj_qkv.weight"], t[a + "in_proj_z.weight"] = rand(conv, H), rand(NV * DV, H)
        t[a + "in_proj_b.weight"], t[a + "in_proj_a.weight"] = rand(NV, H), rand(NV, H)
        t[a + "conv1d.weight"] = (rng.standard_normal((conv, 1, KW), dtype=np.float32) * 0.5).astype(np.float16)
        t[a + "A_log"] = np.log(rng.uniform(1, 16, NV)).astype(np.float16)
        t[a + "dt_bias"] = np.ones(NV, np.float16)
        t[a + "norm.weight"] = np.ones(DV, np.float16)
        t[a + "out_proj.weight"] = rand(H, NV * DV)
    else:
        a = p + "self_attn."
        t[a + "q_proj.weight"], t[a + "o_proj.weight"] = rand(2 * NH * HD, H), rand(H, NH * HD)
        t[a + "k_proj.weight"], t[a + "v_proj.weight"] = rand(NKV * HD, H), rand(NKV * HD, H)
        t[a + "q_norm.weight"], t[a + "k_norm.weight"] = np.zeros(HD, np.float16), np.zeros(HD, np.float16)
os.makedirs(out, exist_ok=True)
st_write.write(os.path.join(out, "model.safetensors"), t, {"format": "pt"})
cfg = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": V,
       "hidden_size": H, "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": NH,
       "num_key_value_heads": NKV, "head_dim": HD, "hidden_act": "silu", "max_position_embeddings": 32768,
       "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False, "layer_types": types,
       "linear_conv_kernel_dim": KW, "linear_num_key_heads": NK, "linear_num_value_heads": NV,
       "linear_key_head_dim": DK, "linear_value_head_dim": DV, "bos_token_id": 1, "eos_token_id": 2,
       "pad_token_id": 0, "dtype": "float16",
       "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
# the tokenizer of a tiny fixture stands in (the benchmark does not tokenize text)
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny", "qwen3_5_text")
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(src, f), os.path.join(out, f))
print("written", out)
