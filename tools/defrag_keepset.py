#!/usr/bin/env python3
"""Choose the FFN neurons a task keeps from activation statistics, for `cortiq defrag` and
`cortiq convert --defrag` (spec §11).

Criterion: a neuron's mean |act| over the calibration tokens, where act = silu(gate x) * (up x)
is the input of down_proj, times the L2 norm of its down_proj column (what it adds to the
residual stream per unit of activation). Each layer keeps its top `--keep` fraction.

Writes, under OUT (one set per --keep fraction K, as a percentage: OUT/keep50, ...):
  keepK/ffn_keep.npy     bool [num_layers, intermediate_size] (True = live):
                         `convert --defrag OUT/keepK`
  masks/NAME_kK.json     {"ffn": [[live indices] per layer]}: `convert --masks OUT/masks`,
                         then `cortiq defrag FILE --task NAME_kK`
  ffn_score.npy          the scores themselves

usage: defrag_keepset.py HF_DIR CALIB.txt OUT [--keep 0.5,0.75] [--name task] [--ctx 512]
"""
import argparse
import json
import os

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("calib")
    ap.add_argument("out")
    ap.add_argument("--keep", default="0.5", help="comma-separated fractions")
    ap.add_argument("--name", default="task")
    ap.add_argument("--ctx", type=int, default=512)
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.hf_dir)
    model = AutoModelForCausalLM.from_pretrained(a.hf_dir, dtype=torch.float32)
    model.eval()
    layers = model.model.layers
    sums = [None] * len(layers)
    count = [0]

    def hook(i):
        def f(mod, inp):
            x = inp[0].detach().abs().reshape(-1, inp[0].shape[-1]).double()
            sums[i] = x.sum(0) if sums[i] is None else sums[i] + x.sum(0)
            if i == 0:
                count[0] += x.shape[0]

        return f

    hooks = [l.mlp.down_proj.register_forward_pre_hook(hook(i)) for i, l in enumerate(layers)]
    ids = tok(open(a.calib, encoding="utf-8").read(), return_tensors="pt").input_ids[0]
    with torch.no_grad():
        for s in range(0, len(ids), a.ctx):
            model(ids[s : s + a.ctx].unsqueeze(0))
    for h in hooks:
        h.remove()
    scores = np.stack(
        [
            ((sums[i] / count[0]) * l.mlp.down_proj.weight.detach().double().norm(dim=0)).numpy()
            for i, l in enumerate(layers)
        ]
    )
    os.makedirs(os.path.join(a.out, "masks"), exist_ok=True)
    np.save(os.path.join(a.out, "ffn_score.npy"), scores)
    for frac in [float(x) for x in a.keep.split(",")]:
        keep = np.zeros(scores.shape, dtype=bool)
        k = max(1, int(round(frac * scores.shape[1])))
        for i in range(scores.shape[0]):
            keep[i, np.argsort(-scores[i], kind="stable")[:k]] = True
        tag = f"k{int(round(frac * 100))}"
        os.makedirs(os.path.join(a.out, "keep" + tag[1:]), exist_ok=True)
        np.save(os.path.join(a.out, "keep" + tag[1:], "ffn_keep.npy"), keep)
        mask = {"ffn": [np.nonzero(r)[0].tolist() for r in keep]}
        with open(os.path.join(a.out, "masks", f"{a.name}_{tag}.json"), "w") as fp:
            json.dump(mask, fp)
        print(f"keep {frac}: {keep.sum()} of {keep.size} neurons")
    print(f"{count[0]} calibration tokens")


if __name__ == "__main__":
    main()
