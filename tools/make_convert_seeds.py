#!/usr/bin/env python3
"""Write the small seed corpora of tests/fuzz/fuzz_gguf.c and fuzz_safetensors.c.

    pip install gguf numpy
    python3 tools/make_convert_seeds.py tests/fuzz/corpus
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T


def gguf_seed(path, arch, model):
    w = gguf.GGUFWriter(path, arch=arch)
    w.add_block_count(2)
    w.add_embedding_length(32)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_feed_forward_length(64)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model(model)
    w.add_token_list(["<unk>", "<s>", "a", "b", "ab"] if model == "llama" else ["a", "b", "ab", "<|end|>"])
    w.add_token_types([2, 3, 1, 1, 1] if model == "llama" else [1, 1, 1, 3])
    if model == "gpt2":
        w.add_tokenizer_pre("smollm")
        w.add_token_merges(["a b"])
    else:
        w.add_token_scores([0.0, 0.0, -1.0, -2.0, -3.0])
    w.add_bos_token_id(1)
    w.add_chat_template("{{ messages }}")
    rng = np.random.default_rng(1)
    w.add_tensor("token_embd.weight", rng.standard_normal((5, 32)).astype(np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(32, dtype=np.float32))
    q = rng.integers(0, 256, (4, 34), dtype=np.uint8)
    q[:, 0:2] = np.array([0.01], dtype=np.float16).view(np.uint8)
    w.add_tensor("blk.0.attn_q.weight", q.reshape(4, 34), raw_dtype=T.Q8_0)
    k = rng.integers(0, 256, (2, 144), dtype=np.uint8)
    k[:, 0:4] = np.frombuffer(np.array([0.01, 0.001], dtype=np.float16).tobytes(), dtype=np.uint8)
    w.add_tensor("blk.0.ffn_up.weight", k.reshape(1, 288), raw_dtype=T.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def st_seed(path, entries, meta=None):
    header, blob = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus"
    os.makedirs(f"{root}/gguf", exist_ok=True)
    os.makedirs(f"{root}/safetensors", exist_ok=True)
    gguf_seed(f"{root}/gguf/llama_spm.gguf", "llama", "llama")
    gguf_seed(f"{root}/gguf/gemma3_gpt2.gguf", "gemma3", "gpt2")
    with open(f"{root}/gguf/llama_spm.gguf", "rb") as f:
        data = f.read()
    with open(f"{root}/gguf/truncated.gguf", "wb") as f:
        f.write(data[: len(data) // 3])
    f32 = np.arange(6, dtype=np.float32).tobytes()
    st_seed(f"{root}/safetensors/three_dtypes.safetensors",
            [("a", "F32", [2, 3], f32), ("b", "F16", [3], np.ones(3, np.float16).tobytes()),
             ("c", "BF16", [2], b"\x80\x3f\x40\xc0"), ("d", "I64", [1], b"\x07" * 8)], {"format": "pt"})
    # malformed on purpose: two tensors sharing bytes
    h = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F16", "shape": [2], "data_offsets": [4, 8]}}).encode()
    with open(f"{root}/safetensors/overlap.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + f32[:8])
    st_seed(f"{root}/safetensors/scalar_empty.safetensors",
            [("s", "F32", [], f32[:4]), ("e", "F16", [0, 4], b"")])


if __name__ == "__main__":
    main()
