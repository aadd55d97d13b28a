#!/usr/bin/env python3
"""Tiny checkpoints with a multi-token-prediction head (spec 2.1) and the head's drafts as a
torch implementation of the formula computes them: the oracle of tests/engine/test_mtp.c.

Heads are written into the safetensors directly (transformers drops MTP weights on load):
- qwen3_mtp, qwen3_mtp_agree: a dense Qwen3 with a DeepSeek-V3 style head
  (num_nextn_predict_layers=1; the extra layer model.layers.2.* holds enorm / hnorm / eh_proj /
  shared_head.norm, copies of the embedding and lm_head, and a standard block);
- qwen3_next_mtp, qwen3_next_mtp_agree: a Qwen3-Next hybrid (linear / full / linear, dense
  MLPs) with a Qwen3-Next head (mtp_num_hidden_layers=1; mtp.fc, mtp.pre_fc_norm_embedding,
  mtp.pre_fc_norm_hidden, mtp.norm, mtp.layers.0.* a gated full-attention block).
The plain ones are random. In the *_agree ones the blocks' outputs (o_proj, down_proj,
out_proj) are scaled by AGREE_SCALE, so that the next token depends mostly on the current one,
and the head is the model's own prediction of that: eh_proj = [I 0] (the normed embedding of
t_{p+1}), enorm a unit norm, the block a copy of the last full-attention layer, norm = the final
norm. Its drafts then agree with greedy decoding often but not always (both paths run).

Per directory: tokens.npy (48 ids), draft_pos.npy (positions p), draft_logits.npy
([len(p), vocab]: the head's logits after entry p, from h_p = the model's final normed hidden
state at p and t_{p+1}), greedy.npy (transformers' greedy continuation of tokens[:8]).

With --bench, the same four at a size where decode speed means something (hidden 1024,
8 layers, 3:1 linear / full in the hybrid; nothing else written), for docs/HYBRID.md's figures.

usage: python3 tools/make_mtp_checkpoints.py [--bench] [OUT_DIR]   (needs torch, transformers >= 5)
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers as tf
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = "--bench" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--bench"]
OUT = ARGS[0] if ARGS else os.path.join(HERE, "..", "tests", "fixtures", "mtp")
TOKENIZER = os.path.join(HERE, "..", "tests", "fixtures", "tiny", "qwen3")
VOCAB = 320
AGREE_SCALE = 0.05
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, max_position_embeddings=512, rms_norm_eps=1e-6,
              tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
LINEAR = dict(linear_conv_kernel_dim=4, linear_num_key_heads=2, linear_num_value_heads=4,
              linear_key_head_dim=8, linear_value_head_dim=8)
LAYERS = {"qwen3": 2, "qwen3_next": 3}
if BENCH:
    COMMON.update(hidden_size=1024, intermediate_size=2816, num_attention_heads=16,
                  num_key_value_heads=4, head_dim=64)
    LINEAR.update(linear_num_key_heads=8, linear_num_value_heads=16, linear_key_head_dim=64,
                  linear_value_head_dim=64)
    LAYERS = {"qwen3": 8, "qwen3_next": 8}
    AGREE_SCALE = 0.002  # eight layers drift further from the current token's prediction


def config(fam, layers):
    if fam == "qwen3":
        return tf.Qwen3Config(**COMMON, num_hidden_layers=layers,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    types = ["full_attention" if layers == 1 or i % 4 == 1 else "linear_attention"
             for i in range(layers)]
    return tf.Qwen3NextConfig(**COMMON, num_hidden_layers=layers, num_experts=0, layer_types=types,
                              **LINEAR,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                               "partial_rotary_factor": 0.5})


def model_class(fam):
    return tf.Qwen3ForCausalLM if fam == "qwen3" else tf.Qwen3NextForCausalLM


def f16_exact(t):
    return t.half().float()


def randomize(model, gemma):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:  # 0.15 at the fixtures' width 32, shrinking as 1/sqrt(width)
                p.normal_(0.0, 0.15 * (32.0 / COMMON["hidden_size"]) ** 0.5)
            elif name.endswith("A_log"):
                p.uniform_(-1.0, 1.0)
            elif "norm" in name:
                p.normal_(1.0 if (not gemma or "linear_attn.norm" in name) else 0.0, 0.1)
            else:
                p.normal_(0.0, 0.1)
            if p.dim() < 2 or p.numel() < 32:
                p.copy_(f16_exact(p))


def make(fam, agree, seed):
    torch.manual_seed(seed)
    gemma = fam != "qwen3"
    cfg0 = config(fam, LAYERS[fam])
    model = model_class(fam)(cfg0).eval()
    randomize(model, gemma)
    types = getattr(cfg0, "layer_types", None) or ["full_attention"] * LAYERS[fam]
    last_full = max(i for i, t in enumerate(types) if t == "full_attention")
    H = COMMON["hidden_size"]
    with torch.no_grad():
        if agree:
            for name, p in model.named_parameters():
                if name.endswith(("o_proj.weight", "down_proj.weight", "out_proj.weight")):
                    p.mul_(AGREE_SCALE)
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        # the head: norms, projection, block
        unit = torch.zeros(H) if gemma else torch.ones(H)
        if agree:
            enorm = unit.clone()
            hnorm = f16_exact(unit + 0.1 * torch.randn(H))
            eh = torch.cat([torch.eye(H), torch.zeros(H, H)], dim=1)
            hnorm_final = sd["model.norm.weight"].clone()
            block = {k[len(f"model.layers.{last_full}."):]: v.clone() for k, v in sd.items()
                     if k.startswith(f"model.layers.{last_full}.")}
        else:
            enorm = f16_exact(unit + 0.1 * torch.randn(H))
            hnorm = f16_exact(unit + 0.1 * torch.randn(H))
            eh = torch.randn(H, 2 * H) * 0.15
            hnorm_final = f16_exact(unit + 0.1 * torch.randn(H))
            aux = model_class(fam)(config(fam, 1)).eval()
            randomize(aux, gemma)
            block = {k[len("model.layers.0."):]: v.detach().clone() for k, v in
                     aux.state_dict().items() if k.startswith("model.layers.0.")}
    head = dict(enorm=enorm, hnorm=hnorm, eh=eh, norm=hnorm_final, block=block)
    d = os.path.join(OUT, f"{fam}_mtp" + ("_agree" if agree else ""))
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    # the head into the checkpoint, in the family's own layout
    st = load_file(os.path.join(d, "model.safetensors"))
    cfg = json.load(open(os.path.join(d, "config.json")))
    if fam == "qwen3":
        n = cfg["num_hidden_layers"]
        cfg["num_nextn_predict_layers"] = 1
        pre = f"model.layers.{n}."
        st[pre + "enorm.weight"] = enorm
        st[pre + "hnorm.weight"] = hnorm
        st[pre + "eh_proj.weight"] = eh
        st[pre + "shared_head.norm.weight"] = hnorm_final
        st[pre + "shared_head.head.weight"] = sd["lm_head.weight"].clone()
        st[pre + "embed_tokens.weight"] = sd["model.embed_tokens.weight"].clone()
        for k, v in block.items():
            st[pre + k] = v
    else:
        cfg["mtp_num_hidden_layers"] = 1
        st["mtp.pre_fc_norm_embedding.weight"] = enorm
        st["mtp.pre_fc_norm_hidden.weight"] = hnorm
        st["mtp.fc.weight"] = eh
        st["mtp.norm.weight"] = hnorm_final
        for k, v in block.items():
            st["mtp.layers.0." + k] = v
    save_file({k: v.contiguous() for k, v in st.items()}, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt"})
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, f), os.path.join(d, f))
    return d, model, head


def rmsnorm(x, w, gemma, eps=1e-6):
    x = x.double()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * ((1.0 + w.double()) if gemma else w.double())


def drafts(fam, model, head, tokens):
    """The head's logits after each entry p = 0 .. T-2, by the formula (spec 2.1)."""
    gemma = fam != "qwen3"
    with torch.no_grad():
        h = model.model(tokens).last_hidden_state[0]  # final normed hidden states h_p
        emb = model.model.embed_tokens(tokens)[0]
        e = rmsnorm(emb[1:], head["enorm"], gemma)  # embed(t_{p+1}) FIRST
        hn = rmsnorm(h[:-1], head["hnorm"], gemma)
        x = (torch.cat([e, hn], dim=-1) @ head["eh"].double().T).float()
        # block -> norm -> the shared lm_head: a one-layer model of the family fed x
        aux = model_class(fam)(config(fam, 1)).eval()
        sd = {"model.layers.0." + k: v for k, v in head["block"].items()}
        sd["model.norm.weight"] = head["norm"]
        sd["lm_head.weight"] = model.lm_head.weight
        sd["model.embed_tokens.weight"] = model.model.embed_tokens.weight
        missing = aux.load_state_dict(sd, strict=False)
        assert not [k for k in missing.missing_keys if "rotary" not in k], missing
        return aux(inputs_embeds=x[None]).logits[0].float().numpy()


def main():
    g = torch.Generator().manual_seed(11)
    for seed, (fam, agree) in enumerate([("qwen3", False), ("qwen3", True), ("qwen3_next", False),
                                         ("qwen3_next", True)]):
        d, model, head = make(fam, agree, 500 + seed)
        if BENCH:
            print(os.path.basename(d), "written")
            continue
        tokens = torch.randint(5, VOCAB, (1, 48), generator=g)
        logits = drafts(fam, model, head, tokens)
        pos = np.array([0, 5, 17, 30, 46], dtype=np.int32)
        with torch.no_grad():
            out = model.generate(tokens[:, :8], max_new_tokens=64, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
        greedy = out[0, 8:].numpy().astype(np.int32)
        # how often the head's draft is greedy's next-but-one token along greedy's own path
        seq = out[:, :72]
        path = drafts(fam, model, head, seq)
        agree_rate = float(np.mean(path[7:70].argmax(-1) == seq[0, 9:72].numpy()))
        np.save(os.path.join(d, "tokens.npy"), tokens[0].numpy().astype(np.int32))
        np.save(os.path.join(d, "draft_pos.npy"), pos)
        np.save(os.path.join(d, "draft_logits.npy"), logits[pos].astype(np.float32))
        np.save(os.path.join(d, "greedy.npy"), greedy)
        print(os.path.basename(d), "drafts agreeing with greedy along its path: %.2f" % agree_rate)


if __name__ == "__main__":
    main()
