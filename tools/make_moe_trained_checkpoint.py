#!/usr/bin/env python3
"""A small Qwen3-MoE trained for a few minutes on this repository's own text, so that its routing
is task-conditional and moe-mask / moe-defrag figures mean something (docs/MOE.md "Sizes and
held-out perplexity"): 2 layers, hidden 64, 8 experts of width 64, top-2, f32, the tiny
fixtures' near-byte-level tokenizer, trained next-token on a mixture of C sources (src/) and
prose (docs/, README.md), with the router's load-balancing loss. Deterministic for a seed, but
not across machines (CPU threads).

usage: python3 tools/make_moe_trained_checkpoint.py OUT_DIR [SECONDS]   (needs torch, transformers)
writes OUT_DIR (config, model.safetensors, tokenizer) and OUT_DIR/{code_calib,code_heldout,
prose_heldout}.txt: C files of src/engine + src/format (calibration), src/cli (held out, code),
docs/CONVERT.md + docs/KERNELS.md (held out, prose); the training text excludes all three.
"""
import glob
import os
import shutil
import sys
import time

import torch
import transformers as tf
from tokenizers import Tokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TINY = os.path.join(ROOT, "tests", "fixtures", "tiny", "qwen3_moe")


def read(paths):
    return "\n".join(open(p, encoding="utf-8", errors="replace").read() for p in sorted(paths))


def main():
    out = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 240.0
    os.makedirs(out, exist_ok=True)
    calib = glob.glob(f"{ROOT}/src/engine/*.c") + glob.glob(f"{ROOT}/src/format/*.c")
    held_code = glob.glob(f"{ROOT}/src/cli/*.c")
    held_prose = [f"{ROOT}/docs/CONVERT.md", f"{ROOT}/docs/KERNELS.md"]
    skip = set(map(os.path.abspath, calib + held_code + held_prose))
    train_code = [p for p in glob.glob(f"{ROOT}/src/*/*.[ch]") if os.path.abspath(p) not in skip]
    train_prose = [p for p in glob.glob(f"{ROOT}/docs/*.md") + [f"{ROOT}/README.md"]
                   if os.path.abspath(p) not in skip]
    for name, paths in (("code_calib", calib), ("code_heldout", held_code), ("prose_heldout", held_prose)):
        with open(os.path.join(out, name + ".txt"), "w", encoding="utf-8") as f:
            f.write(read(paths)[:60000])
    tok = Tokenizer.from_file(os.path.join(TINY, "tokenizer.json"))
    code = torch.tensor(tok.encode(read(train_code)).ids)
    prose = torch.tensor(tok.encode(read(train_prose)).ids)
    cfg = tf.Qwen3MoeConfig(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                            max_position_embeddings=1024, num_experts=8, num_experts_per_tok=2,
                            moe_intermediate_size=64, decoder_sparse_step=1, mlp_only_layers=[],
                            norm_topk_prob=True, output_router_logits=True, router_aux_loss_coef=0.01,
                            tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = tf.Qwen3MoeForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    seq, batch, step, t0 = 96, 8, 0, time.time()
    g = torch.Generator().manual_seed(1)
    while time.time() - t0 < budget:
        rows = []
        for i in range(batch):  # half code, half prose
            src = code if i % 2 == 0 else prose
            s = int(torch.randint(0, len(src) - seq - 1, (1,), generator=g))
            rows.append(src[s:s + seq])
        x = torch.stack(rows)
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f} ({time.time() - t0:.0f} s)", flush=True)
    model.config.output_router_logits = False
    model.save_pretrained(out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TINY, f), os.path.join(out, f))
    print(f"{step} steps, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
