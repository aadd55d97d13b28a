"""Writing CMF files: cortiq.write() from numpy arrays, cortiq.convert() from a Hugging Face
checkpoint. Both go through the C writer (temp file, validation, fsync, rename: the target name
never holds a half-written file)."""
from __future__ import annotations

import json
import os
from typing import Callable, Dict, Mapping, Optional, Union

import numpy as np

from . import errors
from ._ffi import DT_BF16, DT_F16, DT_F32, ffi, lib, libc, new_err
from ._file import _BF16, check

_FLOAT_DTYPES = (DT_F32, DT_F16, DT_BF16)


def quant_id(name) -> int:
    """A --quant name of the CLI (f32 f16 bf16 q8 q8_2f q4 q4t q4tp vbit q1s q1t q1; "vbit" is
    vbit_ro there) or a spec dtype name ("q8_row", "q4_tiled", ...), or a dtype id of spec §3.1
    (an int: 8 is the row-offset-less vbit) -> its dtype id."""
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
        if lib.cmf_dtype_from_name(lib.cmf_dtype_name(int(name)), ffi.new("cmf_dtype *")):
            return int(name)
        raise errors.InvalidArgument(f"quant {name}: not a live dtype id (spec §3.1)")
    out = ffi.new("cmf_dtype *")
    b = str(name).encode()
    if lib.cmf_convert_quant_from_name(b, out) or lib.cmf_dtype_from_name(b, out):
        return out[0]
    raise errors.InvalidArgument(f"quant '{name}': not a dtype (want f32 f16 bf16 q8 q8_2f q4 "
                                 "q4t q4tp vbit q1s q1t q1, or a spec dtype name)")


def _as_source(name: str, a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    ok = a.dtype in (np.float32, np.float16) or (_BF16 is not None and a.dtype == _BF16)
    if not ok:
        raise errors.DtypeError(f"tensor '{name}': numpy dtype {a.dtype} cannot be stored; "
                                "CMF tensors are float (float32, float64, float16, bfloat16)")
    if a.ndim > 6:
        raise errors.InvalidArgument(f"tensor '{name}': {a.ndim} dimensions, CMF holds at most 6")
    if a.size == 0:
        raise errors.InvalidArgument(f"tensor '{name}': shape {a.shape} has a zero dimension")
    return np.ascontiguousarray(a)


def _target(name: str, a: np.ndarray, quant, shape) -> int:
    """The dtype a tensor is stored as: what `quant` asks for it (a name, or a per-tensor
    mapping; a tensor the mapping leaves out keeps its own float type). A quantized dtype goes
    through the library's policy (spec §3.2: 1-D and < 32-element tensors, and shapes the dtype
    cannot hold, are f16); float types are kept as asked."""
    if isinstance(quant, Mapping):
        want_name = quant.get(name)
        if want_name is None:
            return DT_F16 if a.dtype == np.float16 else (
                DT_BF16 if _BF16 is not None and a.dtype == _BF16 else DT_F32)
    else:
        want_name = quant
    want = quant_id(want_name)
    if want in _FLOAT_DTYPES:
        return want
    return lib.cmf_quant_policy_dtype(want, a.ndim, shape)


def _masks_section(header: dict, masks: Mapping, default_task: Optional[str]):
    arch = header.get("arch") or {}
    try:
        n_layers, inter, heads = (int(arch["num_layers"]), int(arch["intermediate_size"]),
                                  int(arch["num_attention_heads"]))
    except KeyError as e:
        raise errors.InvalidArgument(f"masks need header arch.{e.args[0]} (spec §5 dimensions)")
    n_exp = int(((arch.get("moe") or {}).get("num_experts")) or 0)
    err = new_err()
    b = ffi.new("cmf_masks_builder **")
    check(lib.cmf_masks_builder_create(n_layers, inter, heads, n_exp, b, err), err)
    builder = ffi.gc(b[0], lib.cmf_masks_builder_free)

    def pack(bits, rows, n, what, task):
        a = np.asarray(bits, dtype=bool)
        if a.shape != ((rows, n) if rows else (n,)):
            raise errors.InvalidArgument(
                f"mask '{task}': {what} has shape {a.shape}, want {(rows, n) if rows else (n,)}")
        return np.packbits(a.reshape(rows or 1, n), axis=1, bitorder="little").tobytes()

    for task, m in masks.items():
        ffn = pack(m["ffn"], n_layers, inter, "ffn", task)
        hd = pack(m["heads"], n_layers, heads, "heads", task)
        gates = pack(m["gates"], 0, n_layers, "gates", task)
        ex = m.get("experts")
        ex = ffi.NULL if ex is None else pack(ex, n_layers, n_exp, "experts", task)
        desc = m.get("description")
        q = m.get("quality")
        check(lib.cmf_masks_builder_add(
            builder, task.encode(), ffi.NULL if desc is None else desc.encode(), ffn, hd, gates,
            ex, ffi.NULL if q is None else json.dumps(q).encode(), err), err)
    if default_task is not None:
        check(lib.cmf_masks_builder_set_default(builder, default_task.encode(), err), err)
    out = ffi.new("uint8_t **")
    n = ffi.new("size_t *")
    check(lib.cmf_masks_builder_build(builder, out, n, err), err)
    try:
        return bytes(ffi.buffer(out[0], n[0]))
    finally:
        libc.free(out[0])


def write(path, tensors: Mapping[str, "np.ndarray"], header: Optional[dict] = None,
          quant: Union[str, Mapping[str, str]] = "q4tp", *, vocab: Optional[bytes] = None,
          masks: Optional[Mapping[str, Mapping]] = None, default_task: Optional[str] = None,
          vbit_mean_bits: Optional[float] = None, shard_max_bytes: int = 0) -> None:
    """Write a CMF v2 file from numpy arrays (in the mapping's order).

    quant: the dtype every tensor is stored as (default q4tp; "f32", "f16", "bf16" store floats
    bit-exactly), or a mapping name -> quant (tensors it leaves out keep their float type).
    Quantized dtypes are encoded by the library's codecs; 1-D tensors, tensors under 32
    elements and shapes a dtype cannot hold are stored f16 (spec §3.2). float16 input stored as
    f16 is written as is; otherwise the values are taken as float32.
    header: the header JSON object (spec §2); the writer adds section_hashes (and shard).
    vocab: tokenizer.json bytes for the tokenizer section (spec §6).
    masks: task name -> {"ffn": bool [layers, intermediate], "heads": bool [layers, heads],
    "gates": bool [layers], optional "experts", "description", "quality"}; dimensions come from
    header["arch"] (spec §5). shard_max_bytes > 0 splits into shards (spec §10).
    """
    header = dict(header or {})
    err = new_err()
    opts = ffi.new("cmf_writer_opts *")
    opts.shard_max_bytes = shard_max_bytes
    w = ffi.new("cmf_writer **")
    check(lib.cmf_writer_create(os.fspath(path).encode(), opts, w, err), err)
    writer = w[0]
    keep = []  # buffers the writer borrows until finish
    encoded = []  # malloc'd encodings, freed after finish
    try:
        hj = json.dumps(header).encode()
        check(lib.cmf_writer_set_header(writer, hj, len(hj), err), err)
        qopts = ffi.new("cmf_quant_opts *")
        lib.cmf_quant_opts_default(qopts)
        if vbit_mean_bits is not None:
            qopts.vbit_mean_bits = vbit_mean_bits
        for name, value in tensors.items():
            a = _as_source(name, value)
            shape = ffi.new("uint64_t[6]", list(a.shape))
            dt = _target(name, a, quant, shape)
            if dt == DT_F16 and a.dtype == np.float16 or (
                    dt == DT_BF16 and _BF16 is not None and a.dtype == _BF16):
                data, nbytes = a, a.nbytes
            elif dt == DT_F32:
                data = a.astype(np.float32, copy=False)
                nbytes = data.nbytes
            else:
                src = np.ascontiguousarray(a, dtype=np.float32)
                out = ffi.new("uint8_t **")
                n = ffi.new("size_t *")
                check(lib.cmf_quant_encode(dt, a.ndim, shape, ffi.cast("float *", src.ctypes.data),
                                           qopts, out, n, err), err)
                encoded.append(out[0])
                data, nbytes = None, n[0]
            keep.append(data)
            ptr = encoded[-1] if data is None else ffi.cast("void *", data.ctypes.data)
            check(lib.cmf_writer_add_tensor_ref(writer, name.encode("utf-8"), dt, a.ndim, shape,
                                                ptr, nbytes, err), err)
        if vocab is not None:
            vb = bytes(vocab)
            check(lib.cmf_writer_set_vocab(writer, vb, len(vb), err), err)
        if masks:
            mb = _masks_section(header, masks, default_task)
            check(lib.cmf_writer_set_masks(writer, mb, len(mb), err), err)
        check(lib.cmf_writer_finish(writer, err), err)
    finally:
        lib.cmf_writer_free(writer)
        for p in encoded:
            libc.free(p)


def convert(hf_dir, out, quant: str = "q8", *, embed_quant: Optional[str] = None,
            head_quant: Optional[str] = None, masks_dir=None, threads: int = 0,
            vbit_mean_bits: Optional[float] = None, shard_max_bytes: int = 0,
            allow_q1: bool = False,
            progress: Optional[Callable[[int, int], None]] = None) -> Dict[str, float]:
    """Convert a Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json,
    ...) into a CMF v2 file, as `cortiq convert` does. progress(done, total) is called after
    each tensor. Returns the converter's figures (tensors, fallbacks, source/output bytes,
    seconds)."""
    err = new_err()
    o = ffi.new("cmf_convert_opts *")
    lib.cmf_convert_opts_default(o)
    o.quant = quant_id(quant)
    if embed_quant is not None:
        o.embed_quant, o.has_embed_quant = quant_id(embed_quant), True
    if head_quant is not None:
        o.head_quant, o.has_head_quant = quant_id(head_quant), True
    o.allow_q1 = allow_q1
    if vbit_mean_bits is not None:
        o.vbit_mean_bits = vbit_mean_bits
    o.shard_max_bytes = shard_max_bytes
    o.threads = threads
    cb = None
    if progress is not None:
        @ffi.callback("void(void *, const cmf_convert_progress *)")
        def cb(_user, p):
            progress(p.tensors_done, p.tensors_total)
        o.on_progress = cb
    stats = ffi.new("cmf_convert_stats *")
    md = ffi.NULL if masks_dir is None else os.fspath(masks_dir).encode()
    check(lib.cmf_convert_hf(os.fspath(hf_dir).encode(), os.fspath(out).encode(), md, o, stats,
                             err), err)
    return {"tensors": stats.tensors, "fallbacks": stats.fallbacks,
            "source_bytes": stats.source_bytes, "output_bytes": stats.output_bytes,
            "seconds": stats.seconds}
