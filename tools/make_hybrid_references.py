#!/usr/bin/env python3
"""Tiny hybrid (Gated DeltaNet + gated full attention) checkpoints and the outputs transformers
computes on them: the parity oracle of tests/engine/test_hybrid_parity.c.

- qwen3_next_dense (written here, f32): Qwen3-Next with dense MLPs (num_experts=0), layers
  linear / full / linear, fused in_proj_qkvz / in_proj_ba, 2 key heads serving 4 value heads,
  key head dim 16 != value head dim 8, partial rotary 0.25, zero-centred (1+w) norms, gated
  attention (q_proj twice as wide).
- qwen3_5_text (written here, f32): the Qwen3.5 text model (separate in_proj_qkv / in_proj_z /
  in_proj_b / in_proj_a), same shapes.
- qwen3_5_moe_text (written here, f32): Qwen3.5-MoE's text model, the same shapes with MoE FFNs
  (4 experts, top-2, a gated shared expert; its router always renormalises the top k).
- qwen3_next (written by tools/make_tiny_checkpoints.py in bf16, MoE FFNs): references only,
  the bf16 weights run in f32.

Every 1-D or tiny tensor is made f16-exact (CMF stores them as f16, spec 3.2), so a CMF
converted at f32 holds exactly the weights transformers computes with. Each directory gets
tokens.npy (64 ids), logits.npy ([64, vocab] f32, one forward pass) and greedy.npy (32 greedy
tokens continuing the first 8), the same generator as make_tiny_checkpoints.py, and
logits_f16.npy / greedy_f16.npy: the same with every matrix rounded to f16 (the reference for
f16 files, e.g. the other implementation's converter output in tests/fixtures/interop).

usage: python3 tools/make_hybrid_references.py [TINY_DIR] [FAMILY ...]   (needs torch, transformers >= 5)
(with families: only those are made and referenced)
"""
import os
import shutil
import sys

import numpy as np
import torch
import transformers as tf

TINY = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("qwen") else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tiny")
VOCAB = 320

SHAPES = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
              rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
              layer_types=["linear_attention", "full_attention", "linear_attention"],
              linear_conv_kernel_dim=4, linear_num_key_heads=2, linear_num_value_heads=4,
              linear_key_head_dim=16, linear_value_head_dim=8)
ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}


def new_model(fam):
    if fam == "qwen3_next_dense":
        cfg = tf.Qwen3NextConfig(**SHAPES, num_experts=0, rope_parameters=dict(ROPE))
        return tf.Qwen3NextForCausalLM(cfg)
    if fam == "qwen3_5_moe_text":
        cfg = tf.Qwen3_5MoeTextConfig(**SHAPES, rope_parameters=dict(ROPE), num_experts=4,
                                      num_experts_per_tok=2, moe_intermediate_size=32,
                                      shared_expert_intermediate_size=48)
        return tf.Qwen3_5MoeForCausalLM(cfg)
    cfg = tf.Qwen3_5TextConfig(**SHAPES, rope_parameters=dict(ROPE))
    return tf.Qwen3_5ForCausalLM(cfg)


def make(fam, d, seed):
    torch.manual_seed(seed)
    model = new_model(fam).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.08)
            elif name.endswith("A_log"):
                p.uniform_(-1.0, 1.0)  # decay rates exp(A_log) around 1
            elif "norm" in name:
                # zero-centred norms (x * (1 + w)) near 0, the gated output norm (x * w) near 1
                p.normal_(1.0 if "linear_attn.norm" in name else 0.0, 0.1)
            else:
                p.normal_(0.0, 0.1)
            if p.dim() < 2 or p.numel() < 32:
                p.copy_(p.half().float())
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    src = os.path.join(TINY, "qwen3_next")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(d, f))


def references(d):
    model = tf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(5, VOCAB, (1, 64), generator=g)
    with torch.no_grad():
        logits = model(tokens).logits[0].float().numpy()
        out = model.generate(tokens[:, :8], max_new_tokens=32, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    np.save(os.path.join(d, "tokens.npy"), tokens[0].numpy().astype(np.int32))
    np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))
    np.save(os.path.join(d, "greedy.npy"), out[0, 8:].numpy().astype(np.int32))
    with torch.no_grad():  # the reference for f16 files (e.g. the other implementation's)
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(p.half().float())
        logits16 = model(tokens).logits[0].float().numpy()
        out16 = model.generate(tokens[:, :8], max_new_tokens=32, do_sample=False, eos_token_id=None,
                               pad_token_id=0)
    np.save(os.path.join(d, "logits_f16.npy"), logits16.astype(np.float32))
    np.save(os.path.join(d, "greedy_f16.npy"), out16[0, 8:].numpy().astype(np.int32))
    print(os.path.basename(d), type(model).__name__, "reference logits", logits.shape)


def main():
    only = [a for a in sys.argv[1:] if a.startswith("qwen")]
    for seed, fam in enumerate(("qwen3_next_dense", "qwen3_5_text", "qwen3_5_moe_text")):
        d = os.path.join(TINY, fam)
        if (not only or fam in only) and not os.path.exists(os.path.join(d, "model.safetensors")):
            make(fam, d, 2024 + seed)
    for fam in ("qwen3_next_dense", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_next"):
        if not only or fam in only:
            references(os.path.join(TINY, fam))


if __name__ == "__main__":
    main()
