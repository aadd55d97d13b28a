#!/usr/bin/env python3
"""A Qwen3.5-shaped text checkpoint with random weights (bf16 safetensors, about 0.5 GB), for the
Gated DeltaNet speed figures of docs/HYBRID.md. Not a fixture: written to a cache dir outside git.

The per-layer Gated DeltaNet geometry is Qwen3.5's (16 key heads, 32 value heads, 128-dim heads,
conv width 4; full attention with an output gate, 256-dim heads, partial rotary 0.25) and so is
the schedule (three LinearAttention layers, then one FullAttention); hidden size, depth and
vocabulary are scaled down to fit the machine.

usage: python3 tools/make_synthetic_qwen35.py [OUT_DIR]   (default ~/.cache/cortiq/synthetic-qwen3.5)
"""
import os
import sys

import torch
import transformers as tf

out = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/cortiq/synthetic-qwen3.5")
if os.path.exists(os.path.join(out, "model.safetensors")):
    print("exists:", out)
    sys.exit(0)
cfg = tf.Qwen3_5TextConfig(vocab_size=32000, hidden_size=1024, intermediate_size=3072, num_hidden_layers=8,
                           num_attention_heads=8, num_key_value_heads=2, head_dim=256,
                           max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False,
                           layer_types=["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3
                           + ["full_attention"],
                           linear_conv_kernel_dim=4, linear_num_key_heads=16, linear_num_value_heads=32,
                           linear_key_head_dim=128, linear_value_head_dim=128,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                            "partial_rotary_factor": 0.25},
                           bos_token_id=1, eos_token_id=2, pad_token_id=0)
torch.manual_seed(0)
model = tf.Qwen3_5ForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
# the tokenizer of a tiny fixture stands in (the benchmark does not tokenize text)
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny", "qwen3_5_text")
for f in ("tokenizer.json", "tokenizer_config.json"):
    with open(os.path.join(src, f), "rb") as a, open(os.path.join(out, f), "wb") as b:
        b.write(a.read())
print("written", out)
