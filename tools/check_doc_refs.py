#!/usr/bin/env python3
"""check_doc_refs - every repository path the docs name must exist.

Scans README.md and docs/*.md for paths into the tree (src/..., include/..., tests/..., bench/...,
tools/..., scripts/..., cmake/..., docs/..., examples/...; written in backticks or in prose) and
for backticked bare file names of C sources and headers (`kernel_i8dec_avx512.c`), and fails
listing every one that names nothing in the source tree. Globs (`src/engine/attn_decode*.c`) must
match at least one file; `build/bench/NAME` and `bench/NAME` must have their bench/NAME.c. A doc that names a file
which was moved or deleted is wrong, and a reader who follows it finds nothing.

  python3 tools/check_doc_refs.py [SOURCE_DIR]     (exit 0: all found, 1: stale references)
"""
import glob
import os
import re
import sys

TOP_DIRS = ("src", "include", "tests", "bench", "tools", "scripts", "cmake", "docs", "examples")
# A path into the tree: a top-level directory, then path characters. Placeholders such as
# src/<module> or tests/<module>/test_*.c stop at '<' and are skipped below.
PATH_RE = re.compile(r"(?<![\w./~-])((?:%s)/[A-Za-z0-9_./*+-]*)" % "|".join(TOP_DIRS))
BUILD_BENCH_RE = re.compile(r"(?<![\w./~-])build[\w-]*/bench/(bench_\w+)")
BACKTICK_RE = re.compile(r"`([^`\n]+)`")
BARE_C_RE = re.compile(r"^[A-Za-z0-9_-]+\.(c|h|sh|py|cmake)$")
SKIP_DIRS = {".git", "build", "node_modules"}


def source_basenames(root):
    names = set()
    for d, subdirs, files in os.walk(root):
        subdirs[:] = [s for s in subdirs if s not in SKIP_DIRS and not s.startswith("build")]
        names.update(files)
    return names


def exists(root, path):
    path = path.rstrip(".,;:)")  # sentence punctuation after a path
    if not path or path.endswith("/") and os.path.isdir(os.path.join(root, path)):
        return True
    if any(c in path for c in "*?["):
        return bool(glob.glob(os.path.join(root, path)))
    # bench/bench_matvec: the program built from bench/bench_matvec.c
    return os.path.exists(os.path.join(root, path)) or os.path.exists(os.path.join(root, path + ".c"))


def placeholder(text, end):
    """True when the path match is followed by a placeholder (src/<module>, tests/NAME...)."""
    return end < len(text) and text[end] in "<{"


def check_file(root, rel, basenames):
    bad = []
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        for m in PATH_RE.finditer(line):
            p = m.group(1)
            if placeholder(line, m.end()) or p.rstrip(".,;:)") in TOP_DIRS:
                continue
            if not exists(root, p):
                bad.append((n, p.rstrip(".,;:)")))
        for m in BUILD_BENCH_RE.finditer(line):
            if not os.path.exists(os.path.join(root, "bench", m.group(1) + ".c")):
                bad.append((n, m.group(0)))
        for m in BACKTICK_RE.finditer(line):
            for word in m.group(1).split():
                # a generated header counts through its template (cmake/version.h.in)
                if BARE_C_RE.match(word) and word not in basenames and word + ".in" not in basenames:
                    bad.append((n, word))
    return [(rel, n, p) for n, p in bad]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    docs = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    basenames = source_basenames(root)
    bad = []
    for rel in docs:
        bad += check_file(root, rel, basenames)
    for rel, n, p in bad:
        print(f"{rel}:{n}: {p}: no such file in the source tree")
    if bad:
        print(f"check_doc_refs: {len(bad)} stale reference(s) in {len(docs)} docs")
        return 1
    print(f"check_doc_refs: {len(docs)} docs, every named path exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
