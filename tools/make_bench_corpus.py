#!/usr/bin/env python3
"""Write a deterministic mixed-language corpus for bench/bench_tokenizer.c (not committed).

Mix: Python standard-library sources (code), license texts and docs found on the system
(English prose), plus the multilingual lines of tools/make_tokenizer_cases.py (CJK, emoji/ZWJ,
RTL, combining marks, digits, whitespace) shuffled with a fixed seed.
Usage: python3 tools/make_bench_corpus.py OUT [--mb 12]
"""
import argparse
import glob
import os
import random
import sys
import sysconfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_cases import corpus  # noqa: E402


def read_files(patterns, limit):
    out, total = [], 0
    for pat in patterns:
        for p in sorted(glob.glob(pat, recursive=True)):
            try:
                with open(p, encoding="utf-8") as f:
                    t = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            out.append(t)
            total += len(t.encode("utf-8"))
            if total >= limit:
                return out
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=12.0)
    a = ap.parse_args()
    target = int(a.mb * 1e6)
    stdlib = sysconfig.get_paths()["stdlib"]
    code = read_files([os.path.join(stdlib, "*.py"), os.path.join(stdlib, "*/*.py")], target * 4 // 10)
    prose = read_files(["/usr/share/common-licenses/*", "/usr/share/doc/*/copyright",
                        os.path.join(stdlib, "../../share/doc/**/*.txt")], target * 3 // 10)
    rng = random.Random(1234)
    lines = corpus(["<|endoftext|>"])
    multi, size = [], 0
    while size < target * 3 // 10:
        para = " ".join(rng.choice(lines) for _ in range(8))
        multi.append(para)
        size += len(para.encode("utf-8"))
    parts = code + prose + multi
    rng.shuffle(parts)
    data = "\n\n".join(parts).encode("utf-8")[:target]
    data = data.decode("utf-8", "ignore").encode("utf-8")
    with open(a.out, "wb") as f:
        f.write(data)
    print(f"{a.out}: {len(data)} bytes ({len(code)} code files, {len(prose)} prose files, {len(multi)} mixed paragraphs)")


if __name__ == "__main__":
    main()
