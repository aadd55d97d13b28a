#!/usr/bin/env python3
"""Write the real-model reference values for tests/convert/test_real_models.c.

For each real GGUF model (the ones scripts/fetch-models puts in the cache), the `gguf`
package reads the file and `gguf.quants.dequantize` turns tensors into f32. The output is a
text file of one block per model:

    model <file name> <tensor count>
    count <ggml type> <number of tensors of that type>        (one line per type, sorted)
    tensor <name> <ggml type> <element count> <f64 sum>       (per chosen tensor, by name)
    row <index> <row length> <bits> <bits> ...                (first row, then last row)
    end

Chosen tensors: the first tensor of every type in name order, plus `token_embd.weight`
(the largest tensor, and the one with the most rows). The sum is the exactly rounded f64
sum (math.fsum) of every dequantized value, printed as Python's shortest repr; a row lists
each f32 value's bit pattern as 8 lower-case hex digits, so the C test compares bits, not
decimals. A tensor with a single row gets one row line. Rows are dequantized in chunks, so
memory stays bounded on the 262144-row Gemma embedding.

    pip install gguf numpy
    python3 tools/make_real_model_refs.py tests/convert/data/real_model_refs.txt.gz
    python3 tools/make_real_model_refs.py out.txt [--cache DIR] [MODEL.gguf ...]

An output name ending in .gz is gzip-compressed (header time 0, so reruns are byte-equal).
MODEL defaults to the two models the test expects, looked up in --cache (default
$CORTIQ_MODEL_CACHE, else ~/.cache/cortiq/models).
"""
import argparse
import gzip
import math
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

DEFAULT_MODELS = ["smollm2-135m-instruct-q4_1.gguf", "gemma3-270m-q4_k_m.gguf"]
ALWAYS = "token_embd.weight"
CHUNK_VALUES = 1 << 20  # about this many f32 values dequantized at a time


def tensor_rows(t):
    """(row length, row count) in ggml terms: ne[0] is the row."""
    row_len = int(t.shape[0])
    return row_len, int(t.n_elements) // row_len


def dequant_rows(t, first, count):
    """f32 array (count, row_len) of rows [first, first + count) of tensor t."""
    row_len, nrows = tensor_rows(t)
    raw = np.asarray(t.data).reshape(nrows, -1)[first:first + count]
    return dequantize(raw, t.tensor_type).reshape(count, row_len)


def tensor_sum(t):
    """Exactly rounded f64 sum of the whole dequantized tensor, chunk by chunk."""
    row_len, nrows = tensor_rows(t)
    chunk = CHUNK_VALUES // row_len + 1

    def values():
        for r in range(0, nrows, chunk):
            n = min(chunk, nrows - r)
            yield from dequant_rows(t, r, n).astype(np.float64).ravel().tolist()

    return math.fsum(values())


def row_line(t, index):
    row = dequant_rows(t, index, 1)[0].astype(np.float32, copy=False)
    bits = " ".join(f"{b:08x}" for b in row.view(np.uint32).tolist())
    return f"row {index} {row.size} {bits}"


def chosen_tensors(tensors):
    """First tensor of every type in name order, plus token_embd; sorted by name."""
    first = {}
    for t in sorted(tensors, key=lambda x: x.name):
        first.setdefault(t.tensor_type.name, t)
    picked = {t.name: t for t in first.values()}
    for t in tensors:
        if t.name == ALWAYS:
            picked[t.name] = t
    return [picked[name] for name in sorted(picked)]


def model_block(path):
    reader = gguf.GGUFReader(path)
    tensors = list(reader.tensors)
    lines = [f"model {os.path.basename(path)} {len(tensors)}"]
    counts = {}
    for t in tensors:
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    lines += [f"count {name} {counts[name]}" for name in sorted(counts)]
    for t in chosen_tensors(tensors):
        _, nrows = tensor_rows(t)
        lines.append(f"tensor {t.name} {t.tensor_type.name} {int(t.n_elements)} {tensor_sum(t)!r}")
        lines.append(row_line(t, 0))
        if nrows > 1:
            lines.append(row_line(t, nrows - 1))
        print(f"  {t.name} ({t.tensor_type.name}) done", file=sys.stderr)
    lines.append("end")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output file (.gz: gzip-compressed)")
    ap.add_argument("models", nargs="*", help="GGUF files (default: the two test models in the cache)")
    default_cache = os.environ.get("CORTIQ_MODEL_CACHE") or os.path.expanduser("~/.cache/cortiq/models")
    ap.add_argument("--cache", default=default_cache, help="model cache directory (default: %(default)s)")
    args = ap.parse_args()

    paths = args.models or [os.path.join(args.cache, m) for m in DEFAULT_MODELS]
    lines = []
    for path in paths:
        if not os.path.isfile(path):
            sys.exit(f"{path}: not found (run scripts/fetch-models to fetch it)")
        print(path, file=sys.stderr)
        lines += model_block(path)
    data = ("\n".join(lines) + "\n").encode()
    if args.out.endswith(".gz"):
        with open(args.out, "wb") as f:
            f.write(gzip.compress(data, compresslevel=9, mtime=0))
    else:
        with open(args.out, "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
