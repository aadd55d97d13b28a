#!/usr/bin/env python3
"""Regenerate tests/fixtures/interop/ref_py/: CMF v2 files written by the *other* CMF implementation's
Python converter from our tiny Hugging Face fixtures (tests/fixtures/tiny/<family>/), for interop tests.

The converter is not part of this repository and none of its code is copied here: this script only
runs it, as a separate process, from the path given on the command line. It comes from the public
repository infosave2007/cmf, commit 1c500da1155c98212940c820e182869bfd662af8, path
converter/convert_dtgma_to_cmf.py. It is a single file that needs only numpy (it parses safetensors
itself); get it e.g. with

    git -C <clone of infosave2007/cmf> show 1c500da1155c98212940c820e182869bfd662af8:converter/convert_dtgma_to_cmf.py \
        > /tmp/refconv/convert_dtgma_to_cmf.py
    python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install numpy

and regenerate the corpus (from anywhere; paths are taken relative to the repository root) with

    python3 tools/make_ref_py_corpus.py --converter /tmp/refconv/convert_dtgma_to_cmf.py \
        --python /tmp/refvenv/bin/python --out tests/fixtures/interop/ref_py

For each (family, quant) in PLAN it runs, with the repository root as working directory,

    PYTHON CONVERTER --model tests/fixtures/tiny/<family> --quant <QUANT> --output <out>/<family>.<quant>.cmf

(<quant> is <QUANT> in lower case). The model path is passed relative to the repository root because
the converter records it in the header (provenance.source_model); the files are then byte-identical
wherever the checkout lives. A run that fails is recorded as refused, with the converter's last
error line, instead of stopping the others. MANIFEST.txt in the output folder lists every file with
its sha256, size and command line, then the refused cases. With --cmfref BIN each file is also checked
with `BIN verify --deep` and the script exits non-zero unless every check prints OK.
"""
import argparse
import hashlib
import os
import shlex
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TINY = "tests/fixtures/tiny"

SOURCE_REPO = "infosave2007/cmf"
SOURCE_COMMIT = "1c500da1155c98212940c820e182869bfd662af8"
SOURCE_PATH = "converter/convert_dtgma_to_cmf.py"

# The converter's --quant spellings; the matrix types first, f32 last (the biggest files).
SMALL_QUANTS = ["F16", "Q8_ROW", "Q4_BLOCK"]

# Which family gets which quants. Every tiny family gets the three small types; f32 only where it is
# worth its size (one per norm style / attention layout, bit-exact against the fixtures' logits), and
# the two rope-scaling variants only as f16 (they differ from llama in the header alone).
PLAN = (
    [(fam, q) for fam in ("llama", "mistral", "qwen2", "qwen3", "gemma3_text",
                          "qwen2_moe", "qwen3_moe", "qwen3_next") for q in SMALL_QUANTS]
    + [(fam, "F32") for fam in ("llama", "qwen3", "gemma3_text")]
    + [(fam, "F16") for fam in ("llama_rope3", "llama_yarn")]
)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def last_error_line(text):
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("@PROGRESS")]
    return lines[-1] if lines else "(no output)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--converter", required=True, help="path to convert_dtgma_to_cmf.py (see header)")
    ap.add_argument("--out", required=True, help="output folder (relative to the repository root, or absolute)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter that runs the converter (needs numpy); default: this one")
    ap.add_argument("--cmfref", default=None, help="optional: cmfref binary to `verify --deep` each file")
    ap.add_argument("--only", nargs="*", default=None, help="optional: restrict to these families")
    a = ap.parse_args()

    converter = os.path.abspath(a.converter)
    out_abs = a.out if os.path.isabs(a.out) else os.path.join(REPO, a.out)
    out_rel = os.path.relpath(out_abs, REPO)
    if out_rel.startswith(".."):
        out_rel = out_abs  # outside the repository: keep it absolute
    os.makedirs(out_abs, exist_ok=True)

    np_ver = subprocess.run([a.python, "-c", "import numpy; print(numpy.__version__)"],
                            capture_output=True, text=True)
    if np_ver.returncode != 0:
        sys.exit(f"{a.python} cannot import numpy, which the converter needs (use --python)")

    produced, refused, bad = [], [], []
    for fam, quant in PLAN:
        if a.only and fam not in a.only:
            continue
        name = f"{fam}.{quant.lower()}.cmf"
        out_file = os.path.join(out_rel, name)
        argv = ["--model", f"{TINY}/{fam}", "--quant", quant, "--output", out_file]
        shown = "python3 $CONVERTER " + " ".join(shlex.quote(x) for x in argv)
        target = os.path.join(out_abs, name)
        if os.path.exists(target):
            os.remove(target)
        r = subprocess.run([a.python, converter] + argv, cwd=REPO, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(target):
            msg = last_error_line(r.stderr + "\n" + r.stdout)
            refused.append((fam, quant, r.returncode, msg))
            if os.path.exists(target):
                os.remove(target)
            print(f"REFUSED {fam} {quant} (rc {r.returncode}): {msg}")
            continue
        size = os.path.getsize(target)
        produced.append((name, sha256_of(target), size, shown))
        status = ""
        if a.cmfref:
            v = subprocess.run([a.cmfref, "verify", "--deep", target], capture_output=True, text=True)
            status = (v.stdout + v.stderr).strip().splitlines()[0] if (v.stdout + v.stderr).strip() else ""
            if v.returncode != 0 or not status.startswith("OK"):
                bad.append((name, status))
            status = "  cmfref: " + status
        print(f"{name:28s} {size:8d} B{status}")

    with open(os.path.join(out_abs, "MANIFEST.txt"), "w") as m:
        m.write(f"# CMF v2 files written by the Python converter of {SOURCE_REPO} "
                f"(commit {SOURCE_COMMIT}, {SOURCE_PATH}),\n")
        m.write(f"# from {TINY}/<family>; regenerate with tools/make_ref_py_corpus.py "
                f"(converter sha256 {sha256_of(converter)}, numpy {np_ver.stdout.strip()}).\n")
        m.write("# Commands run from the repository root, $CONVERTER = that converter file.\n")
        m.write("# file  sha256  bytes  command\n")
        for name, digest, size, shown in produced:
            m.write(f"{name}  {digest}  {size}  {shown}\n")
        m.write(f"# refused: {len(refused)}\n")
        for fam, quant, rc, msg in refused:
            m.write(f"REFUSED {fam} {quant} (exit {rc}): {msg}\n")

    total = sum(p[2] for p in produced)
    print(f"{len(produced)} files, {total} bytes, {len(refused)} refused -> {out_rel}")
    if bad:
        for name, status in bad:
            print(f"cmfref verify --deep failed: {name}: {status}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
