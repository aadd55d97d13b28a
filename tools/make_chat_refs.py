#!/usr/bin/env python3
"""Reference outputs of transformers on the real models the project tests against, for the
runtime's acceptance test (tests/engine/test_real_chat.c).

transformers loads the GGUF (dequantizing it exactly like `cortiq import-gguf --quant f32`),
renders each chat prompt with the model's template (apply_chat_template, add_generation_prompt),
and records the prompt ids and the first 32 greedy tokens; it also computes the strided
perplexity of tests/fixtures/real/ppl_text.txt. Output: tests/fixtures/real/<name>.json

usage: make_chat_refs.py NAME GGUF_PATH [CHAT_TEMPLATE.jinja]   (NAME: smollm2 | gemma3)
The template file is for GGUFs that carry none (Gemma 3 270M); `import-gguf --chat-template`
gets the same file.
"""
import json
import math
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in one sentence.",
    "What is 12 times 7?",
    "Name three primary colors.",
    "Translate 'good morning' into Spanish.",
    "Give me a tip for learning to code.",
    "Who wrote Romeo and Juliet?",
    "What is the boiling point of water in Celsius?",
    "Describe a cat in five words.",
    "Write a Python function that returns the square of a number.",
    "Why is the sky blue?",
]
PPL_CTX, PPL_STRIDE = 256, 128


def main():
    name, gguf = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "..", "tests", "fixtures", "real", f"{name}.json")
    d, f = os.path.dirname(gguf), os.path.basename(gguf)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    if len(sys.argv) > 3:
        tok.chat_template = open(sys.argv[3], encoding="utf-8").read()
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    cases = []
    for p in PROMPTS:
        ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        inp = torch.tensor([ids])
        with torch.no_grad():
            gen = model.generate(inp, max_new_tokens=32, do_sample=False, pad_token_id=tok.pad_token_id
                                 if tok.pad_token_id is not None else tok.eos_token_id)
        new = gen[0, len(ids):].tolist()
        cases.append({"prompt": p, "prompt_ids": list(ids), "greedy": new, "text": tok.decode(new)})
        print(p, "->", repr(tok.decode(new)))
    text = open(os.path.join(here, "..", "tests", "fixtures", "real", "ppl_text.txt"), encoding="utf-8").read()
    ids = tok(text, return_tensors="pt").input_ids
    n, nll, scored, prev_end = ids.size(1), 0.0, 0, 0
    for begin in range(0, n, PPL_STRIDE):
        end = min(begin + PPL_CTX, n)
        trg = end - prev_end
        with torch.no_grad():
            lp = torch.log_softmax(model(ids[:, begin:end]).logits[0, :-1].float(), dim=-1)
        labels = ids[0, begin + 1:end]
        first = (end - begin) - trg
        idx = torch.arange(max(first - 1, 0), end - begin - 1)
        nll += -lp[idx, labels[idx]].double().sum().item()
        scored += len(idx)
        prev_end = end
        if end == n:
            break
    ppl = math.exp(nll / scored)
    print("ppl", ppl, "tokens", n, "scored", scored)
    with open(out, "w") as fo:
        json.dump({"model": name, "gguf": f, "ppl": {"ctx": PPL_CTX, "stride": PPL_STRIDE, "tokens": n,
                                                    "scored": scored, "value": ppl}, "cases": cases}, fo, indent=1)


if __name__ == "__main__":
    main()
