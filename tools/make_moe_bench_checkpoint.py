#!/usr/bin/env python3
"""A random Qwen3-MoE checkpoint for MoE speed measurements (docs/MOE.md "Speed"): 4 layers,
hidden 768, 64 experts of width 384, top-8, bf16 (467 MB), with the tiny fixtures' tokenizer.

usage: python3 tools/make_moe_bench_checkpoint.py OUT_DIR   (needs torch, transformers)
then:  cortiq convert --model OUT_DIR --quant q8 -o moe_bench.cmf
       cortiq bench moe_bench.cmf -p 128 -n 32 -t 2
"""
import os
import shutil
import sys

import torch
import transformers as tf

TINY = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tiny", "qwen3_moe")


def main():
    out = sys.argv[1]
    cfg = tf.Qwen3MoeConfig(vocab_size=320, hidden_size=768, intermediate_size=1536, num_hidden_layers=4,
                            num_attention_heads=12, num_key_value_heads=4, head_dim=64,
                            max_position_embeddings=4096, num_experts=64, num_experts_per_tok=8,
                            moe_intermediate_size=384, decoder_sparse_step=1, mlp_only_layers=[],
                            norm_topk_prob=True, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
                            pad_token_id=0)
    torch.manual_seed(0)
    model = tf.Qwen3MoeForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.04)
    model.save_pretrained(out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TINY, f), os.path.join(out, f))


if __name__ == "__main__":
    main()
