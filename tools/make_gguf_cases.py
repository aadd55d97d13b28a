#!/usr/bin/env python3
"""Write the GGUF dequantization fixture for tests/convert/test_gguf_dequant.c.

One GGUF v3 file holds, for every ggml type the converter dequantizes, a tensor
`case.<TYPE>` of random blocks (random bytes, with every f16 scale field replaced by a
random finite f16) and a tensor `want.<TYPE>` (F32) with what the `gguf` package's
`gguf.quants.dequantize` makes of it. It also carries metadata of every value type for the
reader's KV test. Output is gzip-compressed (the C test unpacks it with gzip -dc).

    pip install gguf numpy
    python3 tools/make_gguf_cases.py tests/convert/data/dequant_cases.gguf.gz
"""
import gzip
import os
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

# byte offsets of the f16 scale fields inside one block of each type (facts of the layouts)
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
ROWS = 3


def random_f16(rng, n, lo=-8.0, hi=8.0):
    """Random finite f16 values, a few of them subnormal or zero."""
    v = rng.uniform(lo, hi, n).astype(np.float16)
    k = max(1, n // 16)
    v[rng.integers(0, n, k)] = (rng.integers(1, 1024, k).astype(np.uint16)).view(np.float16)  # subnormals
    v[rng.integers(0, n, 1)] = np.float16(0.0)
    return v


def quant_case(rng, qtype):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    row_len = 512 if block == 256 else 96
    n_blocks = ROWS * row_len // block
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = random_f16(rng, n_blocks, -2.0, 2.0).view(np.uint8).reshape(n_blocks, 2)
    raw = raw.reshape(ROWS, row_len // block * size)
    want = dequantize(raw, qtype).astype(np.float32)
    assert want.shape == (ROWS, row_len), want.shape
    return raw, want


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/convert/data/dequant_cases.gguf.gz"
    rng = np.random.default_rng(20261130)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.gguf")
        w = gguf.GGUFWriter(path, arch="cortiqtest")
        # metadata of every value type
        w.add_uint8("test.u8", 200)
        w.add_int8("test.i8", -100)
        w.add_uint16("test.u16", 60000)
        w.add_int16("test.i16", -30000)
        w.add_uint32("test.u32", 4000000000)
        w.add_int32("test.i32", -2000000000)
        w.add_float32("test.f32", 1.5)
        w.add_bool("test.bool", True)
        w.add_string("test.str", "héllo")
        w.add_uint64("test.u64", 2**63 + 5)
        w.add_int64("test.i64", -(2**62))
        w.add_float64("test.f64", -2.25)
        w.add_array("test.arr_i32", [1, -2, 3])
        w.add_array("test.arr_str", ["a", "", "xyz"])
        w.add_array("test.arr_f32", [0.5, -1.0])

        order = []
        for qtype in F16_FIELDS:
            raw, want = quant_case(rng, qtype)
            w.add_tensor(f"case.{qtype.name}", raw, raw_dtype=qtype)
            w.add_tensor(f"want.{qtype.name}", want)
            order.append(qtype.name)
        # plain float types: F16 and BF16 from random finite bit patterns, F32 as is
        h = random_f16(rng, ROWS * 40, -60000.0, 60000.0).reshape(ROWS, 40)
        w.add_tensor("case.F16", h, raw_dtype=T.F16)
        w.add_tensor("want.F16", dequantize(h.view(np.uint8), T.F16).astype(np.float32).reshape(ROWS, 40))
        b = rng.integers(0, 2**16, ROWS * 40, dtype=np.uint32).astype(np.uint16)
        b = np.where((b & 0x7F80) == 0x7F80, b & 0xBFFF, b).astype(np.uint16).reshape(ROWS, 40)  # finite only
        w.add_tensor("case.BF16", b, raw_dtype=T.BF16)
        w.add_tensor("want.BF16", dequantize(b.view(np.uint8), T.BF16).astype(np.float32).reshape(ROWS, 40))
        f = rng.standard_normal((ROWS, 40)).astype(np.float32)
        w.add_tensor("case.F32", f)
        w.add_tensor("want.F32", f.copy())
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        data = open(path, "rb").read()
    with gzip.GzipFile(out, "wb", mtime=0, compresslevel=9) as gz:
        gz.write(data)
    print(f"{out}: {len(data)} bytes raw, types {order + ['F16', 'BF16', 'F32']}")


if __name__ == "__main__":
    main()
