#!/usr/bin/env python3
"""Randomized parity check of libcortiq's tokenizer against the Python `tokenizers` package.

Loads libcortiq.so through ctypes, cuts N random slices (random start, random length, on
character boundaries) out of a text file and compares ids (with and without special tokens) and
decoded text. Not part of CTest (needs the shared library and `tokenizers`); run by hand:
  python3 tools/check_tokenizer_random.py build/src/libcortiq.so TOKENIZER.json CORPUS [--n 3000]
"""
import argparse
import ctypes
import random
import sys

from tokenizers import Tokenizer


class Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("tokenizer")
    ap.add_argument("corpus")
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--max-len", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    lib = ctypes.CDLL(a.lib)
    lib.cmf_tokenizer_load.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(Err)]
    lib.cmf_tokenizer_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool,
                                         ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                                         ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(Err)]
    lib.cmf_tokenizer_decode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t,
                                         ctypes.c_bool, ctypes.POINTER(ctypes.c_char_p),
                                         ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(Err)]
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    raw = open(a.tokenizer, "rb").read()
    tok = ctypes.c_void_p()
    err = Err()
    if lib.cmf_tokenizer_load(raw, len(raw), ctypes.byref(tok), ctypes.byref(err)) != 0:
        sys.exit(f"load failed: {err.msg.decode()}")
    hf = Tokenizer.from_str(raw.decode("utf-8"))
    text = open(a.corpus, encoding="utf-8", errors="replace").read()
    rng = random.Random(a.seed)
    bad = 0
    for i in range(a.n):
        start = rng.randrange(0, max(1, len(text) - 1))
        piece = text[start:start + rng.randrange(0, a.max_len)]
        data = piece.encode("utf-8")
        for special in (True, False):
            ids_p = ctypes.POINTER(ctypes.c_int32)()
            n = ctypes.c_size_t()
            if lib.cmf_tokenizer_encode(tok, data, len(data), special, ctypes.byref(ids_p), ctypes.byref(n),
                                        ctypes.byref(err)) != 0:
                sys.exit(f"encode failed: {err.msg.decode()}")
            ours = [ids_p[k] for k in range(n.value)]
            want = hf.encode(piece, add_special_tokens=special).ids
            txt = ctypes.c_char_p()
            tl = ctypes.c_size_t()
            lib.cmf_tokenizer_decode(tok, ids_p, n.value, False, ctypes.byref(txt), ctypes.byref(tl), ctypes.byref(err))
            ours_txt = ctypes.string_at(txt, tl.value).decode("utf-8")
            libc.free(ids_p)
            libc.free(txt)
            if ours != want or ours_txt != hf.decode(want, skip_special_tokens=False):
                bad += 1
                if bad <= 5:
                    print(f"MISMATCH slice {i} special={special}: {piece[:80]!r}\n  ours {ours[:30]}\n  want {want[:30]}")
    print(f"{a.tokenizer}: {a.n} slices x 2, {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
