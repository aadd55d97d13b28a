#!/usr/bin/env python3
"""Choose the FFN neurons a task keeps from activation statistics, for `cortiq defrag` and
`cortiq convert --defrag` (spec §11).

Criterion: a neuron's mean |act| over the calibration tokens, where act = silu(gate x) * (up x)
is the input of down_proj, times the L2 norm of its down_proj column (what it adds to the
residual stream per unit of activation). Each layer keeps its top `--keep` fraction.

Writes, under OUT:
  ffn_keep.npy       bool [num_layers, intermediate_size] (True = live): `convert --defrag OUT`
  masks/NAME.json    {"ffn": [[live indices] per layer], "default": true}: `convert --masks`,
                     then `cortiq defrag FILE --task NAME`

usage: defrag_keepset.py HF_DIR CALIB.txt OUT [--keep 0.5] [--name task] [--ctx 512]
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
    ap.add_argument("--keep", type=float, default=0.5)
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
    keep = np.zeros((len(layers), sums[0].shape[0]), dtype=bool)
    for i, l in enumerate(layers):
        col = l.mlp.down_proj.weight.detach().double().norm(dim=0)
        score = (sums[i] / count[0]) * col
        k = max(1, int(round(a.keep * score.shape[0])))
        keep[i, torch.topk(score, k).indices.numpy()] = True
    os.makedirs(os.path.join(a.out, "masks"), exist_ok=True)
    np.save(os.path.join(a.out, "ffn_keep.npy"), keep)
    mask = {"ffn": [np.nonzero(r)[0].tolist() for r in keep], "default": True}
    with open(os.path.join(a.out, "masks", a.name + ".json"), "w") as fp:
        json.dump(mask, fp)
    print(f"{count[0]} calibration tokens; kept {keep.sum()} of {keep.size} neurons")


if __name__ == "__main__":
    main()
