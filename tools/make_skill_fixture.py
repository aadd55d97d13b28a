#!/usr/bin/env python3
"""Make the skills test fixture: a tiny llama backbone trained on a mixed corpus and three real
specialists, each the backbone with its last two layers fine-tuned on one domain (code, numbers,
prose), so that routing and the quality contract of `cortiq skill add` have something true to
find (spec §9).

Writes tests/fixtures/skills/:
  base/            the backbone (Hugging Face directory, f16 safetensors, the tiny llama tokenizer)
  <domain>/        the specialist: the same checkpoint with layers 2 and 3 fine-tuned on <domain>
  <domain>_calib.txt    one prompt per line, for the selection subspace (training text)
  <domain>_heldout.txt  one prompt per line, never trained on: routing and perplexity checks

The corpora are generated here from fixed seeds (no downloads). The weights are stored in f16
so that a CMF converted with --quant f16 holds exactly the trained values.

usage: python3 tools/make_skill_fixture.py [OUT_DIR]   (needs torch, transformers)
"""
import json
import os
import random
import shutil
import sys

import torch
import transformers as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "fixtures", "skills")
TOK_SRC = os.path.join(HERE, "..", "tests", "fixtures", "tiny", "llama")
TUNED_LAYERS = (2, 3)

CONFIG = dict(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
              rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
              pad_token_id=0, rope_theta=10000.0)

NOUNS = ["river", "garden", "teacher", "village", "morning", "letter", "window", "forest", "mother",
         "stranger", "winter", "story", "kitchen", "harbor", "friend", "road"]
VERBS = ["watched", "remembered", "followed", "painted", "carried", "opened", "described", "loved"]
ADJS = ["quiet", "old", "bright", "gentle", "distant", "small", "warm", "strange"]
FUNCS = ["add", "scale", "merge", "parse", "count", "load", "check", "split"]
VARS = ["x", "y", "items", "total", "name", "value", "data", "n"]


def prose_line(r):
    a, b = r.choice(NOUNS), r.choice(NOUNS)
    return (f"The {r.choice(ADJS)} {a} {r.choice(VERBS)} the {r.choice(ADJS)} {b}, "
            f"and the {b} {r.choice(VERBS)} the {a} again.")


def code_line(r):
    f, v, w = r.choice(FUNCS), r.choice(VARS), r.choice(VARS)
    k = r.randint(2, 9)
    forms = [f"def {f}({v}, {w}): return [{v} * {k} for {v} in {w}]",
             f"for {v} in range({k}): {w} = {f}({w}, {v})",
             f"if {v} > {k}: {w} = {f}({v}) else: {w} = None",
             f"{v} = {{'{w}': {f}({w}), 'k': {k}}}; print({v}['{w}'])"]
    return r.choice(forms)


def numbers_line(r):
    parts = []
    for _ in range(3):
        a, b = r.randint(10, 999), r.randint(10, 999)
        op = r.choice("+-*")
        c = a + b if op == "+" else a - b if op == "-" else a * b
        parts.append(f"{a} {op} {b} = {c}")
    return "; ".join(parts) + "."


DOMAINS = {"code": code_line, "numbers": numbers_line, "prose": prose_line}


def lines(fn, seed, n):
    r = random.Random(seed)
    return [fn(r) for _ in range(n)]


def batches(tok, texts, r, bs=16, seq=48):
    # one stream of newline-separated lines, the shape of the held-out files
    ids = tok.encode("\n".join(texts) + "\n", add_special_tokens=False)
    while True:
        rows = []
        for _ in range(bs):
            s = r.randint(0, len(ids) - seq - 1)
            rows.append(ids[s:s + seq])
        yield torch.tensor(rows)


def train(model, params, tok, texts, steps, lr, seed):
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    gen = batches(tok, texts, random.Random(seed))
    model.train()
    for step in range(steps):
        x = next(gen)
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return float(loss.detach())


def save(model, tok_dir, d):
    os.makedirs(d, exist_ok=True)
    model.to(torch.float16).save_pretrained(d, safe_serialization=True)
    model.to(torch.float32)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(d, f))
    for f in ("generation_config.json",):
        p = os.path.join(d, f)
        if os.path.exists(p):
            os.remove(p)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    tok = tf.PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOK_SRC, "tokenizer.json"))
    train_text = {d: lines(fn, 100 + i, 600) for i, (d, fn) in enumerate(DOMAINS.items())}
    calib = {d: lines(fn, 200 + i, 40) for i, (d, fn) in enumerate(DOMAINS.items())}
    heldout = {d: lines(fn, 300 + i, 40) for i, (d, fn) in enumerate(DOMAINS.items())}
    for d in DOMAINS:
        with open(os.path.join(OUT, f"{d}_calib.txt"), "w") as f:
            f.write("\n".join(calib[d]) + "\n")
        with open(os.path.join(OUT, f"{d}_heldout.txt"), "w") as f:
            f.write("\n".join(heldout[d]) + "\n")

    model = tf.LlamaForCausalLM(tf.LlamaConfig(**CONFIG))
    mixed = [t for i in range(150) for d in DOMAINS for t in [train_text[d][i]]]
    loss = train(model, list(model.parameters()), tok, mixed, 400, 3e-3, 1)
    # round to f16 so the specialists start from exactly the stored backbone
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    print(f"backbone: mixed loss {loss:.3f}")
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    save(model, TOK_SRC, os.path.join(OUT, "base"))

    for d in DOMAINS:
        model.load_state_dict(base_state)
        prefixes = tuple(f"model.layers.{l}." for l in TUNED_LAYERS)
        params = [p for n, p in model.named_parameters() if n.startswith(prefixes)]
        for n, p in model.named_parameters():
            p.requires_grad_(n.startswith(prefixes))
        loss = train(model, params, tok, train_text[d], 300, 3e-3, 10)
        print(f"{d}: domain loss {loss:.3f}")
        save(model, TOK_SRC, os.path.join(OUT, d))
        for p in model.parameters():
            p.requires_grad_(True)
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write("Made by tools/make_skill_fixture.py (see its docstring): a tiny llama backbone "
                "(base/) and three specialists (code/, numbers/, prose/) whose layers "
                f"{', '.join(map(str, TUNED_LAYERS))} were fine-tuned on one domain each; "
                "<domain>_calib.txt and <domain>_heldout.txt are one prompt per line.\n")
    print(json.dumps({"out": OUT}))


if __name__ == "__main__":
    main()
