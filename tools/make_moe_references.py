#!/usr/bin/env python3
"""Reference outputs of transformers for the MoE tiny checkpoints (tests/fixtures/tiny), the
parity oracle of tests/engine/test_moe_parity.c.

- qwen2_moe, qwen3_moe (written by tools/make_tiny_checkpoints.py in bf16): the same weights run
  in f32, so a CMF converted at f32 or bf16 holds exactly the weights transformers computes with.
- qwen3_moe again with a sigmoid router (DeepSeek-V3 style, a case transformers has no small
  config for on a supported attention stack): sigmoid scores, a per-layer expert_bias for
  selection only, norm_topk_prob and routed_scaling_factor 2.5, computed here by replacing the
  router of transformers' Qwen3-MoE; writes expert_bias.npy ([layers, experts], f16-exact),
  logits_sigmoid.npy and greedy_sigmoid.npy. The test adds the bias tensors and the header
  fields (router_sigmoid, routed_scaling_factor) to the converted file.
- qwen2_moe_mixed (written here, f32): a Qwen2-MoE whose layer 0 is dense (mlp_only_layers=[0])
  and layer 1 is MoE with norm_topk_prob and a shared expert gate: per-layer MoE detection.

Each gets tokens.npy (64 ids, the same generator as make_tiny_checkpoints.py), logits.npy
([64, vocab] f32, one forward pass) and greedy.npy (32 greedy tokens continuing the first 8),
and logits_f16.npy / greedy_f16.npy: the same with every matrix rounded to f16 (the reference
for f16 files, e.g. the other implementation's converter output in tests/fixtures/interop).

usage: python3 tools/make_moe_references.py [TINY_DIR]   (needs torch, transformers)
"""
import os
import shutil
import sys

import numpy as np
import torch
import transformers as tf

TINY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tiny")
VOCAB = 320


def make_mixed(d):
    """Qwen2-MoE with a dense layer 0 and a MoE layer 1, f32, f16-exact 1-D tensors."""
    src = os.path.join(TINY, "qwen2_moe")
    cfg = tf.Qwen2MoeConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                            max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
                            bos_token_id=1, eos_token_id=2, pad_token_id=0, num_experts=4,
                            num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64,
                            decoder_sparse_step=1, mlp_only_layers=[0], norm_topk_prob=True)
    torch.manual_seed(4321)
    model = tf.Qwen2MoeForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.08)
            elif "norm" in name:
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.1)
            if p.dim() < 2 or p.numel() < 32:  # CMF stores 1-D tensors as f16 (spec 3.2)
                p.copy_(p.half().float())
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
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
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(p.half().float())
        logits16 = model(tokens).logits[0].float().numpy()
        out16 = model.generate(tokens[:, :8], max_new_tokens=32, do_sample=False, eos_token_id=None,
                               pad_token_id=0)
    np.save(os.path.join(d, "logits_f16.npy"), logits16.astype(np.float32))
    np.save(os.path.join(d, "greedy_f16.npy"), out16[0, 8:].numpy().astype(np.int32))
    print(os.path.basename(d), "reference logits", logits.shape)


SIGMOID_SCALE = 2.5


def sigmoid_references(d):
    model = tf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    cfg = model.config
    g = torch.Generator().manual_seed(11)
    bias = (torch.randn(cfg.num_hidden_layers, cfg.num_experts, generator=g) * 0.2).half().float()

    def router(gate, b):
        def forward(h):
            h = h.reshape(-1, gate.weight.shape[1])
            logits = torch.nn.functional.linear(h, gate.weight)
            scores = logits.sigmoid()
            _, idx = torch.topk(scores + b, gate.top_k, dim=-1)  # the bias only selects
            w = scores.gather(1, idx)
            w = w / w.sum(dim=-1, keepdim=True)  # norm_topk_prob
            return logits, w * SIGMOID_SCALE, idx
        return forward

    for i, layer in enumerate(model.model.layers):
        layer.mlp.gate.forward = router(layer.mlp.gate, bias[i])
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(5, VOCAB, (1, 64), generator=g)
    with torch.no_grad():
        logits = model(tokens).logits[0].float().numpy()
        out = model.generate(tokens[:, :8], max_new_tokens=32, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    np.save(os.path.join(d, "expert_bias.npy"), bias.numpy().astype(np.float32))
    np.save(os.path.join(d, "logits_sigmoid.npy"), logits.astype(np.float32))
    np.save(os.path.join(d, "greedy_sigmoid.npy"), out[0, 8:].numpy().astype(np.int32))
    print(os.path.basename(d), "sigmoid-router reference logits", logits.shape)


def main():
    mixed = os.path.join(TINY, "qwen2_moe_mixed")
    if not os.path.exists(os.path.join(mixed, "model.safetensors")):
        make_mixed(mixed)
    for fam in ("qwen2_moe", "qwen3_moe", "qwen2_moe_mixed"):
        references(os.path.join(TINY, fam))
    sigmoid_references(os.path.join(TINY, "qwen3_moe"))


if __name__ == "__main__":
    main()
