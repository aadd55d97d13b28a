"""Reading CMF files: cortiq.open() -> File."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import errors
from ._ffi import (DT_BF16, DT_F16, DT_F32, OPEN_NO_SHARDS, OPEN_VERIFY_TENSORS, c_str, ffi,
                   lib, new_err)

try:  # a real bfloat16 numpy dtype, when the user has it
    import ml_dtypes as _ml_dtypes

    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _BF16 = None


def check(status: int, err) -> None:
    """Raise the exception of a failed C call."""
    if status:
        msg = ffi.string(err.msg).decode("utf-8", "replace") if err != ffi.NULL else ""
        raise errors.from_status(status, msg or c_str(lib.cmf_status_name(status)) or "")


def dtype_name(dt: int) -> str:
    return c_str(lib.cmf_dtype_name(dt))


@dataclass(frozen=True)
class TensorInfo:
    """One directory record (spec §3): `offset` is relative to the data section of its shard."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    offset: int
    nbytes: int
    hash: int
    shard: int


@dataclass(frozen=True)
class Mask:
    """One task mask of the masks section (spec §5), its bitfields unpacked to bool arrays."""

    task_id: int
    name: str
    description: Optional[str]
    sparsity: Optional[float]
    quality: Any  # parsed JSON, None when not measured
    parent: Optional[str]
    priority: Optional[str]
    ffn: np.ndarray  # [n_layers, intermediate] bool, True = neuron kept
    heads: np.ndarray  # [n_layers, n_heads]
    gates: np.ndarray  # [n_layers]
    experts: Optional[np.ndarray]  # [n_layers, n_experts] or None (no expert area)


class _Handle:
    """Owns one cmf_file*. Arrays viewing the mapping hold a reference to it, so the mapping
    lives as long as the last of them, whatever happens to the File."""

    __slots__ = ("ptr", "__weakref__")

    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self):
        if self.ptr is not None and self.ptr != ffi.NULL:
            lib.cmf_close(self.ptr)
            self.ptr = None


class _View:
    """Exposes `nbytes` bytes of the mapping at `address` to numpy (read-only), keeping the
    handle alive for as long as an array based on it exists."""

    __slots__ = ("__array_interface__", "_handle")

    def __init__(self, handle, address: int, shape, typestr: str):
        self._handle = handle
        self.__array_interface__ = {"version": 3, "shape": tuple(shape), "typestr": typestr,
                                    "data": (address, True)}


def _bits(raw, rows: int, nbits: int, row_bytes: int) -> np.ndarray:
    """rows rows of row_bytes LSB-first bitfield bytes -> bool [rows, nbits]."""
    a = np.frombuffer(ffi.buffer(raw, rows * row_bytes), np.uint8).reshape(rows, row_bytes)
    return np.unpackbits(a, axis=1, bitorder="little")[:, :nbits].astype(bool)


class File:
    """An open CMF v2 file (or shard set). Opening validates the whole structure (spec §1-§10);
    tensor hashes are checked by verify(), or at open with verify=True.

    f16 and f32 tensors come back as read-only numpy views onto the mapping (no copy); bf16 too
    when `ml_dtypes` is installed (else widened to float32, which is exact); every quantized dtype
    is decoded to float32 by the library's codecs. The mapping stays valid as long as any such
    view exists, even after close().
    """

    def __init__(self, path, verify: bool = False, shards: bool = True):
        self.path = str(path)
        err = new_err()
        out = ffi.new("cmf_file **")
        flags = (OPEN_VERIFY_TENSORS if verify else 0) | (0 if shards else OPEN_NO_SHARDS)
        check(lib.cmf_open_model(self.path.encode(), flags, out, err), err)
        self._h = _Handle(out[0])
        self._tensors: Optional[Dict[str, TensorInfo]] = None
        self._header: Optional[dict] = None

    # -- lifetime --
    def close(self) -> None:
        """Release the file. Arrays already handed out stay valid (they hold the mapping)."""
        self._h = None

    @property
    def closed(self) -> bool:
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _ptr(self):
        if self._h is None:
            raise errors.InvalidArgument(f"{self.path}: the file is closed")
        return self._h.ptr

    # -- metadata --
    @property
    def header(self) -> dict:
        """The header JSON object (spec §2) of the file (shard 1 of a set)."""
        if self._header is None:
            h = ffi.cast("const cmf_header_head *", lib.cmf_file_header(self._ptr()))
            self._header = json.loads(ffi.unpack(h.json, h.json_len).decode("utf-8"))
        return self._header

    @property
    def arch(self) -> dict:
        """header["arch"] ({} when absent)."""
        return self.header.get("arch") or {}

    @property
    def skills(self) -> List[dict]:
        """The skill records of header["skills"] (spec §9.1); [] when there are none."""
        return list(self.header.get("skills") or [])

    @property
    def shards(self) -> List[str]:
        p = self._ptr()
        return [c_str(lib.cmf_file_shard_path(p, i)) for i in range(lib.cmf_file_shard_count(p))]

    @property
    def vocab(self) -> Optional[bytes]:
        """The tokenizer section (tokenizer.json bytes, spec §6), None when absent."""
        n = ffi.new("size_t *")
        v = lib.cmf_file_vocab(self._ptr(), n)
        return None if v == ffi.NULL else bytes(ffi.buffer(v, n[0]))

    @property
    def tensors(self) -> Dict[str, TensorInfo]:
        """name -> TensorInfo, in directory order (shard by shard)."""
        if self._tensors is None:
            p = self._ptr()
            out = {}
            for i in range(lib.cmf_file_tensor_count(p)):
                t = lib.cmf_file_tensor_at(p, i)
                info = self._info(t)
                out[info.name] = info
            self._tensors = out
        return self._tensors

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self):
        return iter(self.tensors)

    @staticmethod
    def _info(t) -> TensorInfo:
        return TensorInfo(name=ffi.unpack(t.name, t.name_len).decode("utf-8"),
                          dtype=dtype_name(t.dtype), shape=tuple(t.shape[0:t.ndim]),
                          offset=t.off, nbytes=t.nbytes, hash=t.hash, shard=t.shard)

    def _find(self, name: str):
        t = lib.cmf_file_find(self._ptr(), name.encode("utf-8"))
        if t == ffi.NULL:
            raise errors.NotFound(f"{self.path}: NotFound: no tensor named '{name}'")
        return t

    # -- payloads --
    def raw(self, name: str) -> np.ndarray:
        """The tensor's stored payload bytes, a read-only uint8 view (no copy)."""
        t = self._find(name)
        return np.asarray(_View(self._h, int(ffi.cast("uintptr_t", t.data)), (t.nbytes,), "|u1"))

    def resolve(self, name: str, skill: Optional[str] = None) -> str:
        """The directory name read for `name` with skill `skill` active (spec §9): its
        replacement `skill.{skill}.{name}` when the skill has one, else `name` itself. A skill
        the header's registry does not list raises NotFound."""
        if skill is None:
            return name
        if not any(s.get("id") == skill for s in self.skills):
            raise errors.NotFound(f"{self.path}: NotFound: no skill '{skill}' in header.skills")
        over = f"skill.{skill}.{name}"
        return over if over in self.tensors else name

    def tensor(self, name: str, dtype=None, skill: Optional[str] = None) -> np.ndarray:
        """The tensor as a numpy array of its shape.

        f32 -> float32 view, f16 -> float16 view, bf16 -> bfloat16 view (ml_dtypes) or exact
        float32; quantized dtypes -> float32 decoded by the C codec (the payload is fully
        validated first). dtype=np.float32 asks for float32 whatever is stored (a copy unless
        the tensor is f32). skill= reads the skill's replacement where it has one (resolve())."""
        name = self.resolve(name, skill)
        t = self._find(name)
        shape = tuple(t.shape[0:t.ndim])
        addr = int(ffi.cast("uintptr_t", t.data))
        want = None if dtype is None else np.dtype(dtype)
        if want is not None and want != np.float32:
            raise errors.DtypeError(f"{self.path}: tensor '{name}': dtype={want} asked; "
                                    "tensor() returns the stored float type or float32")
        if t.dtype == DT_F32:
            return np.asarray(_View(self._h, addr, shape, "<f4"))
        if t.dtype == DT_F16:
            a = np.asarray(_View(self._h, addr, shape, "<f2"))
            return a if want is None else a.astype(np.float32)
        if t.dtype == DT_BF16:
            bits = np.asarray(_View(self._h, addr, shape, "<u2"))
            if _BF16 is not None and want is None:
                return bits.view(_BF16)
            return (bits.astype(np.uint32) << 16).view(np.float32)
        return self._dequant(t, name, shape)

    def _dequant(self, t, name: str, shape) -> np.ndarray:
        numel = int(np.prod(shape, dtype=np.uint64)) if shape else 1
        out = np.empty(numel, np.float32)
        cshape = ffi.new("uint64_t[6]", list(shape))
        err = new_err()
        check(lib.cmf_quant_dequant(t.dtype, t.ndim, cshape, t.data, t.nbytes,
                                    ffi.cast("float *", out.ctypes.data), err), err)
        return out.reshape(shape)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensor(name)

    # -- masks (spec §5) --
    @property
    def default_task(self) -> Optional[str]:
        m = lib.cmf_file_masks(self._ptr())
        return None if m == ffi.NULL else c_str(m.default_task)

    @property
    def masks(self) -> Dict[str, Mask]:
        """name -> Mask of the masks section; {} when the file has none."""
        m = lib.cmf_file_masks(self._ptr())
        if m == ffi.NULL:
            return {}
        out = {}
        for i in range(m.n_masks):
            k = m.masks[i]
            q = c_str(k.quality_json)
            experts = None
            if k.experts != ffi.NULL and m.n_experts:
                experts = _bits(k.experts, m.n_layers, m.n_experts, m.expert_bytes)
            name = c_str(k.name)
            out[name] = Mask(
                task_id=k.task_id, name=name, description=c_str(k.description),
                sparsity=k.sparsity if k.has_sparsity else None,
                quality=None if q is None else json.loads(q), parent=c_str(k.parent),
                priority=c_str(k.priority),
                ffn=_bits(k.ffn, m.n_layers, m.intermediate, m.ffn_bytes),
                heads=_bits(k.heads, m.n_layers, m.n_heads, m.head_bytes),
                gates=_bits(k.gates, 1, m.n_layers, m.gates_bytes)[0], experts=experts)
        return out

    # -- integrity (spec §8) --
    def verify(self, threads: int = 0, raise_on_error: bool = True) -> List[str]:
        """Check every hash of the file (header, directory, sections, every tensor) and the zero
        padding. Returns the list of problems ([] = intact); with raise_on_error (the default)
        the first problem raises instead (HashMismatch, ...), its message listing them all."""
        problems: List[Tuple[int, str]] = []

        @ffi.callback("void(void *, const char *, cmf_status, const char *)")
        def on_problem(_user, shard_path, code, msg):
            problems.append((code, c_str(msg) or ""))

        stats = ffi.new("cmf_verify_stats *")
        st = lib.cmf_verify(self._ptr(), threads, on_problem, ffi.NULL, stats)
        if st and raise_on_error:
            text = "; ".join(m for _, m in problems) or c_str(lib.cmf_status_name(st))
            raise errors.from_status(st, text)
        return [m for _, m in problems]

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.tensors)} tensors"
        return f"<cortiq.File {self.path!r} {state}>"


def open(path, verify: bool = False, shards: bool = True) -> File:  # noqa: A001 - the API name
    """Open and validate a CMF v2 file. A shard name (`model-00001-of-00003.cmf`) opens the whole
    set (spec §10) unless shards=False. verify=True also checks every tensor hash now."""
    return File(path, verify=verify, shards=shards)
