#!/usr/bin/env python3
"""A tiny multimodal Qwen3.5 checkpoint (Qwen3_5ForConditionalGeneration's layout) built by hand
from the text-only fixture tests/fixtures/tiny/qwen3_5_text, for tests/convert/test_convert_multimodal.c:

- config.json: model_type qwen3_5 with the text model's settings under text_config (model_type
  qwen3_5_text, rope_parameters with mrope_section / mrope_interleaved as published Qwen3.5
  configs have them), a small vision_config, tie_word_embeddings at the top level;
- model.safetensors: the text model's tensors renamed model.* -> model.language_model.* (same
  values), lm_head.weight as it is, and a random vision tower under model.visual.* that convert
  must leave out;
- the tokenizer files of the text fixture.

Converting it must give the same file contents, hence the same logits, as the text fixture.
Needs numpy only (no torch / transformers).

usage: python3 tools/make_qwen35_multimodal.py [TINY_DIR]   (default tests/fixtures/tiny)
"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_write  # noqa: E402

tiny = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny")
src, dst = os.path.join(tiny, "qwen3_5_text"), os.path.join(tiny, "qwen3_5_multimodal")
os.makedirs(dst, exist_ok=True)
with open(os.path.join(src, "config.json")) as f:
    text = json.load(f)
for k in ("architectures", "transformers_version", "tie_word_embeddings", "dtype"):
    text.pop(k, None)
text["rope_parameters"] = dict(text["rope_parameters"], mrope_section=[1, 1, 0], mrope_interleaved=True)
cfg = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": text,
    "vision_config": {"model_type": "qwen3_5", "depth": 1, "hidden_size": 8, "num_heads": 2,
                      "intermediate_size": 16, "patch_size": 4, "temporal_patch_size": 2,
                      "spatial_merge_size": 2, "in_channels": 3, "out_hidden_size": text["hidden_size"]},
    "image_token_id": 5, "video_token_id": 6, "vision_start_token_id": 3, "vision_end_token_id": 4,
    "tie_word_embeddings": False,
    "dtype": "float32",
}
with open(os.path.join(dst, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
t = {}
for name, a in st_write.read(os.path.join(src, "model.safetensors")).items():
    t[name.replace("model.", "model.language_model.", 1) if name.startswith("model.") else name] = a
rng = np.random.default_rng(35)
vis = {"patch_embed.proj.weight": (8, 3, 2, 4, 4), "patch_embed.proj.bias": (8,),
       "blocks.0.norm1.weight": (8,), "blocks.0.attn.qkv.weight": (24, 8), "blocks.0.attn.proj.weight": (8, 8),
       "blocks.0.mlp.linear_fc1.weight": (16, 8), "blocks.0.mlp.linear_fc2.weight": (8, 16),
       "merger.linear_fc1.weight": (32, 32), "merger.linear_fc2.weight": (text["hidden_size"], 32)}
for name, shape in vis.items():
    t["model.visual." + name] = rng.standard_normal(shape).astype(np.float32)
st_write.write(os.path.join(dst, "model.safetensors"), t, {"format": "pt"})
for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
    shutil.copy(os.path.join(src, f), os.path.join(dst, f))
print("written", dst)
