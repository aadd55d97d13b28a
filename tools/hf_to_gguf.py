#!/usr/bin/env python3
"""hf_to_gguf - write an F16 GGUF that llama.cpp loads from a Hugging Face Qwen2 or Qwen3-MoE
checkpoint (safetensors, bf16/f16/f32), with the `gguf` PyPI package (also Qwen2-MoE). For benchmarks against llama.cpp at
matched bits: bench/vs_llamacpp turns this F16 file into Q8_0/Q4_0 with llama.cpp's own quantizer.

usage: python3 tools/hf_to_gguf.py CHECKPOINT_DIR OUT.gguf [--tokenizer DIR]

What llama.cpp needs besides the tensors (its names: token_embd, blk.N.attn_q, ..., output):
  - qwen2.* hyperparameters (context, embedding, block count, feed-forward, heads, kv heads,
    rope base, RMS-norm epsilon) and general.file_type = MOSTLY_F16;
  - a tokenizer whose token list has exactly one entry per embedding row: tokenizer.ggml.model
    "gpt2" (byte-level BPE), .pre "qwen2", .tokens, .token_type, .merges ("a b" strings),
    bos/eos/padding ids. A checkpoint whose tokenizer.json has fewer tokens than vocab_size
    (the synthetic Qwen shape carries a 312-token stand-in) is padded with "[PADn]" entries of
    type UNUSED, as llama.cpp's own converter does.
Qwen3-MoE (architecture "qwen3moe") adds: attn_q_norm / attn_k_norm per layer, the router as
blk.N.ffn_gate_inp [n_expert, hidden], the experts stacked into one tensor per role,
blk.N.ffn_{gate,up}_exps [n_expert, w, hidden] and blk.N.ffn_down_exps [n_expert, hidden, w]
(numpy order; ggml's ne is the reverse), from per-expert `mlp.experts.E.*_proj` tensors or the
fused `mlp.experts.gate_up_proj` [n_expert, 2w, hidden] / `mlp.experts.down_proj` layout; and the
keys qwen3moe.expert_count, .expert_used_count, .expert_feed_forward_length, .attention.key_length
and .value_length (head_dim). llama.cpp's qwen3moe always renormalises the top-k weights, so a
checkpoint without norm_topk_prob is refused. Qwen2-MoE ("qwen2moe") stacks its experts the same
way and adds the shared expert (blk.N.ffn_{gate,up,down}_shexp, its gate blk.N.ffn_gate_inp_shexp
as a 1-D [hidden] tensor) and qwen2moe.expert_shared_feed_forward_length; llama.cpp's qwen2moe
never renormalises, so a checkpoint with norm_topk_prob is refused.
1-D tensors (norms, biases) are stored F32, 2-D weights F16 (bf16 is widened exactly to f32,
then rounded to f16).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

import gguf


def read_safetensors(path):
    """{name: (dtype, shape, memmap view)} of one .safetensors file, without torch."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], raw[a:b])
    return out


def to_f32(dtype, shape, buf):
    if dtype == "BF16":
        u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32).reshape(shape)
    if dtype == "F16":
        return np.frombuffer(buf, dtype=np.float16).astype(np.float32).reshape(shape)
    if dtype == "F32":
        return np.frombuffer(buf, dtype=np.float32).reshape(shape)
    sys.exit(f"unsupported safetensors dtype {dtype}")


def checkpoint_tensors(ckpt):
    index = os.path.join(ckpt, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(read_safetensors(os.path.join(ckpt, f)))
    return tensors


def add_tokenizer(w, tok_dir, cfg, n_vocab):
    tj = json.load(open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8"))
    tc_path = os.path.join(tok_dir, "tokenizer_config.json")
    tc = json.load(open(tc_path, encoding="utf-8")) if os.path.exists(tc_path) else {}
    model = tj["model"]
    if model.get("type") != "BPE":
        sys.exit(f"{tok_dir}/tokenizer.json: model type {model.get('type')}, only byte-level BPE is handled")
    vocab = dict(model["vocab"])
    special = set()
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        if t.get("special"):
            special.add(t["id"])
    if max(vocab.values()) >= n_vocab:
        sys.exit(f"tokenizer has id {max(vocab.values())}, the embedding only {n_vocab} rows")
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [gguf.TokenType.UNUSED] * n_vocab
    for text, i in vocab.items():
        tokens[i] = text
        types[i] = gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)

    def special_id(key, fallback):
        v = tc.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str) and v in vocab:
            return vocab[v]
        return fallback if isinstance(fallback, int) and 0 <= fallback < n_vocab else None

    eos = cfg.get("eos_token_id")
    for key, setter, fb in (("bos_token", w.add_bos_token_id, cfg.get("bos_token_id")),
                            ("eos_token", w.add_eos_token_id, eos[0] if isinstance(eos, list) else eos),
                            ("pad_token", w.add_pad_token_id, cfg.get("pad_token_id"))):
        i = special_id(key, fb)
        if i is not None:
            setter(i)
    w.add_add_bos_token(False)
    if isinstance(tc.get("chat_template"), str):
        w.add_chat_template(tc["chat_template"])


def stacked_experts(tensors, n_layer, n_expert):
    """Replace each MoE layer's expert tensors by three stacked ones named
    model.layers.N.mlp.experts.{gate,up,down}_proj (f32 arrays), the names the gguf map knows."""
    out = {}
    for name, (dtype, shape, buf) in tensors.items():
        if ".mlp.experts." not in name:
            out[name] = (dtype, shape, buf)
    for i in range(n_layer):
        pre = f"model.layers.{i}.mlp.experts."
        fused = tensors.get(pre + "gate_up_proj")
        if fused is not None:
            gu = to_f32(*fused)
            w = gu.shape[1] // 2
            roles = {"gate_proj": gu[:, :w, :], "up_proj": gu[:, w:, :], "down_proj": to_f32(*tensors[pre + "down_proj"])}
        elif pre + "0.gate_proj.weight" in tensors:
            roles = {r: np.stack([to_f32(*tensors[f"{pre}{e}.{r}.weight"]) for e in range(n_expert)])
                     for r in ("gate_proj", "up_proj", "down_proj")}
        else:
            continue
        for r, x in roles.items():
            out[pre + r + ".weight"] = ("F32NP", x.shape, x)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--tokenizer", help="directory with tokenizer.json (default: the checkpoint's)")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.checkpoint, "config.json")))
    mt = cfg.get("model_type")
    if mt not in ("qwen2", "qwen3_moe", "qwen2_moe"):
        sys.exit(f"model_type {mt}: this writer handles qwen2, qwen2_moe and qwen3_moe only")
    moe = mt in ("qwen3_moe", "qwen2_moe")
    if mt == "qwen3_moe" and not cfg.get("norm_topk_prob", False):
        sys.exit("qwen3_moe without norm_topk_prob: llama.cpp's qwen3moe always renormalises the top-k weights")
    if mt == "qwen2_moe" and cfg.get("norm_topk_prob", False):
        sys.exit("qwen2_moe with norm_topk_prob: llama.cpp's qwen2moe never renormalises the top-k weights")
    if mt == "qwen2_moe" and (cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1):
        sys.exit("qwen2_moe with dense layers: llama.cpp's qwen2moe makes every layer MoE")
    tensors = checkpoint_tensors(a.checkpoint)
    n_layer = cfg["num_hidden_layers"]
    n_vocab = tensors["model.embed_tokens.weight"][1][0]
    rope = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    arch = {"qwen3_moe": gguf.MODEL_ARCH.QWEN3MOE, "qwen2_moe": gguf.MODEL_ARCH.QWEN2MOE}.get(mt, gguf.MODEL_ARCH.QWEN2)

    w = gguf.GGUFWriter(a.out + ".tmp", gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(os.path.basename(os.path.normpath(a.checkpoint)))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layer)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    if moe:
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        n_expert = cfg.get("num_experts") or cfg["num_local_experts"]  # transformers 5 renamed it
        w.add_expert_count(n_expert)
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        if cfg.get("shared_expert_intermediate_size"):
            w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
        tensors = stacked_experts(tensors, n_layer, n_expert)
    add_tokenizer(w, a.tokenizer or a.checkpoint, cfg, n_vocab)

    names = gguf.get_tensor_name_map(arch, n_layer)
    if cfg.get("tie_word_embeddings") and "lm_head.weight" in tensors:
        del tensors["lm_head.weight"]
    # tensor by tensor (infos first, then each converted as it is written): a 7B checkpoint's
    # f16 copy would not fit in memory alongside its source
    plan = []
    for name, (dtype, shape, buf) in tensors.items():
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            sys.exit(f"{name}: no GGUF name for this tensor in the {gguf.MODEL_ARCH_NAMES[arch]} map")
        flat = name.endswith("shared_expert_gate.weight")  # [1, hidden] -> llama.cpp's [hidden]
        out_shape = [int(np.prod(shape))] if flat else list(shape)
        dt = np.dtype(np.float16 if len(out_shape) >= 2 else np.float32)
        w.add_tensor_info(new, out_shape, dt, int(np.prod(out_shape)) * dt.itemsize)
        plan.append((dtype, shape, buf, out_shape, dt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for dtype, shape, buf, out_shape, dt in plan:
        x = buf if dtype == "F32NP" else to_f32(dtype, shape, buf)
        w.write_tensor_data(np.ascontiguousarray(x.reshape(out_shape).astype(dt)))
    w.close()
    os.replace(a.out + ".tmp", a.out)
    print("written", a.out)


if __name__ == "__main__":
    main()
