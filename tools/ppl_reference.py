#!/usr/bin/env python3
"""Perplexity of a text with transformers, the strided sliding-window way its documentation
describes (the oracle for `cortiq ppl`).

usage: ppl_reference.py MODEL_DIR TEXTFILE [--ctx N] [--stride S]
"""
import argparse
import math

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--stride", type=int, default=0)
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32).eval()
    ids = tok(open(a.text, encoding="utf-8").read(), return_tensors="pt").input_ids
    n = ids.size(1)
    stride = a.stride or a.ctx // 2
    nll, scored, prev_end = 0.0, 0, 0
    for begin in range(0, n, stride):
        end = min(begin + a.ctx, n)
        trg = end - prev_end
        inp = ids[:, begin:end]
        tgt = inp.clone()
        tgt[:, :-trg] = -100
        with torch.no_grad():
            logits = model(inp).logits.float()
        lp = torch.log_softmax(logits[0, :-1], dim=-1)
        labels = tgt[0, 1:]
        mask = labels != -100
        nll += -lp[mask.nonzero().squeeze(-1), labels[mask]].double().sum().item()
        scored += int(mask.sum())
        prev_end = end
        if end == n:
            break
    print(f"tokens {n}, scored {scored}")
    print(f"PPL = {math.exp(nll / scored):.4f}")


if __name__ == "__main__":
    main()
