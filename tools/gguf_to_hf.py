#!/usr/bin/env python3
"""Let transformers turn a GGUF into a Hugging Face checkpoint directory (the second path into
CMF: `cortiq convert --model DIR`), saving weights as f32 safetensors and the tokenizer.

usage: gguf_to_hf.py MODEL.gguf OUT_DIR [CHAT_TEMPLATE.jinja]
"""
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf, out = sys.argv[1], sys.argv[2]
d, f = os.path.dirname(os.path.abspath(gguf)), os.path.basename(gguf)
tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
if len(sys.argv) > 3:
    tok.chat_template = open(sys.argv[3], encoding="utf-8").read()
loaded = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
# a GGUF-loaded model refuses save_pretrained; copy its (dequantized) weights into a plain one
model = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.float32)
model.load_state_dict(loaded.state_dict())
model.config.quantization_config = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.save_pretrained(out, safe_serialization=True)
tok.save_pretrained(out)
print("written", out)
