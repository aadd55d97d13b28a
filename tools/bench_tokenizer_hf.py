#!/usr/bin/env python3
"""Python `tokenizers` side of bench/bench_tokenizer.c: the same load timing and the same
single-thread encode of the same chunks (documents cut at line ends, <= 16 KiB each).
Usage: RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
       python3 tools/bench_tokenizer_hf.py TOKENIZER.json CORPUS [--reps 3]
"""
import argparse
import os
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

CHUNK = 16 * 1024


def chunks(data):
    out, start = [], 0
    while start < len(data):
        end = min(start + CHUNK, len(data))
        if end < len(data):
            nl = data.rfind(b"\n", start, end)
            if nl > start:
                end = nl + 1
        out.append(data[start:end])
        start = end
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer")
    ap.add_argument("corpus")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    raw = open(a.tokenizer, "rb").read().decode("utf-8")
    best_load = best_load_cpu = 1e9
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        tok = Tokenizer.from_str(raw)
        best_load = min(best_load, time.perf_counter() - t0)
        best_load_cpu = min(best_load_cpu, time.process_time() - c0)
    data = open(a.corpus, "rb").read()
    docs = [c.decode("utf-8", "replace") for c in chunks(data)]
    best, best_cpu, ntok = 1e9, 1e9, 0
    for _ in range(a.reps):
        t0, c0 = time.perf_counter(), time.process_time()
        ntok = 0
        for d in docs:
            ntok += len(tok.encode(d, add_special_tokens=False).ids)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    mb = len(data) / 1e6
    print(f"hf-tokenizers: load {best_load * 1e3:.1f} ms (cpu {best_load_cpu * 1e3:.1f} ms); encode {mb:.2f} MB in "
          f"{best:.3f} s = {mb / best:.2f} MB/s (cpu {mb / best_cpu:.2f} MB/s), {ntok} tokens ({len(docs)} chunks)")


if __name__ == "__main__":
    main()
