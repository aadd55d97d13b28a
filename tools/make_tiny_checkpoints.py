#!/usr/bin/env python3
"""Make tiny random Hugging Face checkpoints of every architecture cortiq converts, plus the
reference outputs `transformers` computes on them, as committed test fixtures.

For each family: tests/fixtures/tiny/<family>/ holds config.json, model.safetensors (f32 for the
dense families, whose logits are the runtime's parity oracle; bf16 for the MoE/hybrid ones, whose
reference outputs tools/make_moe_references.py writes), tokenizer.json (a small byte-level BPE trained here),
tokenizer_config.json (ChatML template), generation_config.json, and for dense families
reference.npz-like .npy files: tokens.npy (64 ids), logits.npy ([64, vocab] f32, one forward
pass over the 64 tokens) and greedy.npy (32 greedy tokens continuing the first 8).

usage: python3 tools/make_tiny_checkpoints.py [OUT_DIR]   (needs torch, transformers, tokenizers)
"""
import json
import os
import sys

import numpy as np
import torch
import transformers as tf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tiny")
VOCAB = 320
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
            rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)

FAMILIES = {
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, dict(rope_theta=10000.0), torch.float32),
    # rope scaling variants (the 64-token sequence runs past original_max_position_embeddings)
    "llama_yarn": (tf.LlamaConfig, tf.LlamaForCausalLM,
                   dict(rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32,
                                      "rope_theta": 10000.0}), torch.float32),
    "llama_rope3": (tf.LlamaConfig, tf.LlamaForCausalLM,
                    dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 32,
                                       "rope_theta": 10000.0}), torch.float32),
    "mistral": (tf.MistralConfig, tf.MistralForCausalLM, dict(rope_theta=10000.0, sliding_window=16),
                torch.float32),
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, dict(rope_theta=1000000.0), torch.float32),
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(rope_theta=1000000.0), torch.float32),
    "gemma3_text": (tf.Gemma3TextConfig, tf.Gemma3ForCausalLM,
                    dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"],
                         query_pre_attn_scalar=16, tie_word_embeddings=True, rope_theta=1000000.0,
                         hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
                         attn_logit_softcapping=None), torch.float32),
    "qwen2_moe": (tf.Qwen2MoeConfig, tf.Qwen2MoeForCausalLM,
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=64, decoder_sparse_step=1, mlp_only_layers=[],
                       norm_topk_prob=False), torch.bfloat16),
    "qwen3_moe": (tf.Qwen3MoeConfig, tf.Qwen3MoeForCausalLM,
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
                       mlp_only_layers=[], norm_topk_prob=True), torch.bfloat16),
    "qwen3_next": (tf.Qwen3NextConfig, tf.Qwen3NextForCausalLM,
                   dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                        shared_expert_intermediate_size=32, layer_types=["linear_attention", "full_attention"],
                        linear_conv_kernel_dim=4, linear_num_key_heads=2, linear_num_value_heads=4,
                        linear_key_head_dim=16, linear_value_head_dim=16, partial_rotary_factor=0.25,
                        decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True), torch.bfloat16),
}

CORPUS = ["The quick brown fox jumps over the lazy dog. " * 4,
          "def add(a, b):\n    return a + b\n" * 4,
          "Hello, world! How are you today? I am fine, thank you.",
          "Numbers: 12345 67890, and some more text for merges."]


def make_tokenizer(path):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|pad|>", "<|bos|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 8, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(path)
    return tok


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    for fam, (cfg_cls, model_cls, extra, dtype) in FAMILIES.items():
        d = os.path.join(OUT, fam)
        os.makedirs(d, exist_ok=True)
        kw = dict(BASE)
        kw.update(extra)
        cfg = cfg_cls(**kw)
        torch.manual_seed(1234)
        model = model_cls(cfg).eval()
        with torch.no_grad():  # larger-than-default init so logits are not all near zero
            for name, p in model.named_parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.08)
                elif "norm" in name:
                    p.normal_(0.0 if fam.startswith("gemma") else 1.0, 0.1)
                else:
                    p.normal_(0.0, 0.1)
            for name, p in model.named_parameters():  # CMF stores 1-D tensors as f16 (spec 3.2):
                if p.dim() < 2 or p.numel() < 32:       # make them f16-exact so f32 parity is exact
                    p.copy_(p.half().float())
        model = model.to(dtype)
        model.save_pretrained(d, safe_serialization=True)
        tok = make_tokenizer(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": CHATML, "bos_token": "<|bos|>", "eos_token": "<|endoftext|>",
                       "pad_token": "<|pad|>", "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=1)
        if dtype != torch.float32:
            print(fam, "written (converter fixture)")
            continue
        g = torch.Generator().manual_seed(7)
        tokens = torch.randint(5, VOCAB, (1, 64), generator=g)
        with torch.no_grad():
            logits = model(tokens).logits[0].float().numpy()
            out = model.generate(tokens[:, :8], max_new_tokens=32, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)
        np.save(os.path.join(d, "tokens.npy"), tokens[0].numpy().astype(np.int32))
        np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))
        np.save(os.path.join(d, "greedy.npy"), out[0, 8:].numpy().astype(np.int32))
        # the same model with its matrices rounded as a f16 / bf16 CMF stores them, run in f32:
        # the reference for the runtime at those dtypes ("the same dequantized weights")
        saved = {k: v.clone() for k, v in model.state_dict().items()}
        for tag, rdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if p.dim() >= 2:
                        p.copy_(p.to(rdt).float())
                logits_r = model(tokens).logits[0].float().numpy()
                out_r = model.generate(tokens[:, :8], max_new_tokens=32, do_sample=False, eos_token_id=None,
                                       pad_token_id=0)
            np.save(os.path.join(d, f"logits_{tag}.npy"), logits_r.astype(np.float32))
            np.save(os.path.join(d, f"greedy_{tag}.npy"), out_r[0, 8:].numpy().astype(np.int32))
            model.load_state_dict(saved)
        print(fam, "written with reference logits", logits.shape)


if __name__ == "__main__":
    main()
