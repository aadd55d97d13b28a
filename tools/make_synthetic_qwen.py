#!/usr/bin/env python3
"""A Qwen2.5-0.5B-shaped checkpoint with random weights (bf16 safetensors, 1.26 GB: untied head), for the
conversion and runtime benchmarks. Not a fixture: written to a cache dir outside git.

usage: python3 tools/make_synthetic_qwen.py [OUT_DIR [LAYERS VOCAB]]
  (default ~/.cache/cortiq/synthetic-qwen2.5-0.5b, 24 layers, 151936 tokens; without torch the
  weights come from numpy (make_synthetic_qwen7b.py's writer); docs/MASKS_SKILLS.md
  measures task masks on 6 layers and 8192 tokens: the layers of the full model, a small head)
"""
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/cortiq/synthetic-qwen2.5-0.5b")
if os.path.exists(os.path.join(out, "model.safetensors")):
    print("exists:", out)
    sys.exit(0)
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 24
vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 151936
try:
    import torch
    import transformers as tf
except ImportError:
    # same shape and initialization (N(0, 0.02) matrices, unit norms, zero biases) written tensor by
    # tensor with numpy; the random values differ from torch's, which no benchmark depends on
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_synthetic_qwen7b as w
    w.write_checkpoint(out, layers, w.SHAPE_0_5B[:4] + (vocab,))
    sys.exit(0)
cfg = tf.Qwen2Config(vocab_size=vocab, hidden_size=896, intermediate_size=4864, num_hidden_layers=layers,
                     num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                     rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
                     bos_token_id=151643, eos_token_id=151645)
torch.manual_seed(0)
with torch.device("cpu"):
    model = tf.Qwen2ForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
# the tokenizer of the tiny qwen2 fixture stands in (the benchmark does not tokenize text)
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny", "qwen2")
for f in ("tokenizer.json", "tokenizer_config.json"):
    with open(os.path.join(src, f), "rb") as a, open(os.path.join(out, f), "wb") as b:
        b.write(a.read())
print("written", out)
