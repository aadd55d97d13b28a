"""Write a safetensors file from numpy arrays (no torch needed): an 8-byte little-endian header
length, the JSON header (dtype, shape, byte offsets per tensor, names in sorted order), then the
raw little-endian data. Used by the tools that build checkpoints without transformers."""
import json
import struct

import numpy as np

_DT = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}


def write(path, tensors, meta=None):
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _DT[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def read(path):
    """{name: array} of a safetensors file with F32 / F16 tensors."""
    inv = {v: k for k, v in _DT.items()}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=inv[t["dtype"]]).reshape(t["shape"])
    return out
