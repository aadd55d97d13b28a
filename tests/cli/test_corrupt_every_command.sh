#!/usr/bin/env bash
# test_corrupt_every_command.sh - a corrupted or truncated file never crashes or hangs any command.
# A small valid model (converted from the tiny llama fixture) is truncated at the edges of every
# section and has single bytes flipped in the envelope, header, directory, tensor data, vocab
# section and tail; every command that reads a model then runs on each variant under `timeout`.
# The exit status must be a normal one (0-3): never a signal (>= 128) and never a timeout (124).
# The converters get the same treatment on corrupted GGUF / safetensors / tokenizer.json /
# config.json inputs, and `verify` on corrupted .sig files next to a good model.
set -uo pipefail
bin=$CORTIQ_BIN
src=$CORTIQ_SOURCE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
runs=0
T=60
# Under the sanitizer build a report must not hide behind exit status 1: give it its own status.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}exitcode=87"

# check NAME CMD...: run under timeout with no stdin; the status must be 0..3 (0 with $want0)
want0=0
check() {
  local name=$1; shift
  timeout -k 5 $T "$@" </dev/null >"$tmp/out" 2>&1; local rc=$?
  runs=$((runs + 1))
  if [ "$want0" -eq 1 ] && [ "$rc" -ne 0 ]; then
    fail=1
    echo "FAIL: $name on the intact file: exit $rc: $*"
    head -c 2000 "$tmp/out"
  elif [ "$rc" -gt 3 ] || grep -q "Sanitizer" "$tmp/out"; then
    fail=1
    echo "FAIL: $name: exit $rc ($([ "$rc" -eq 124 ] && echo timeout || echo signal $((rc - 128)))): $*"
    head -c 2000 "$tmp/out"
  fi
}

u64() { od -An -tu8 -j "$2" -N 8 "$1" | tr -d ' '; }
flip() { # flip FILE OFFSET: xor the byte at OFFSET with 0x5a
  local b
  b=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 0x5a)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

"$bin" convert --model "$src/tests/fixtures/tiny/llama" --quant q8 --output "$tmp/good.cmf" -q ||
  { echo "convert failed"; exit 1; }
good=$tmp/good.cmf
size=$(stat -c %s "$good")
hoff=$(u64 "$good" 16); hlen=$(u64 "$good" 24)
doff=$(u64 "$good" 32); dlen=$(u64 "$good" 40)
aoff=$(u64 "$good" 48); alen=$(u64 "$good" 56)
voff=$(u64 "$good" 80); vlen=$(u64 "$good" 88)
echo "model: $size bytes; header $hoff+$hlen dir $doff+$dlen data $aoff+$alen vocab $voff+$vlen"
printf '[{"role":"user","content":"hi"}]' >"$tmp/msgs.json"
printf 'The quick brown fox jumps over the lazy dog.\n' >"$tmp/text.txt"
"$bin" keygen "$tmp/k.key" >/dev/null || { echo "keygen failed"; exit 1; }

# Every command that reads a model file, on model file $1.
all_commands() {
  local m=$1 tag=$2
  check "$tag info" "$bin" info "$m"
  check "$tag info --json" "$bin" info "$m" --json
  check "$tag tensors" "$bin" tensors "$m"
  check "$tag masks" "$bin" masks "$m"
  check "$tag verify" "$bin" verify "$m"
  check "$tag dequant" "$bin" dequant "$m" --all "$tmp/npy"
  check "$tag compact" "$bin" compact "$m" -o "$tmp/compact.cmf"
  check "$tag tokenize" "$bin" tokenize "$m" "Hello, world!"
  check "$tag detokenize" "$bin" detokenize "$m" 1 2 3 100 200
  check "$tag chat-template" "$bin" chat-template "$m" --messages "$tmp/msgs.json"
  check "$tag run" "$bin" run "$m" --prompt hi --max-tokens 4
  check "$tag ppl" "$bin" ppl "$m" "$tmp/text.txt" --ctx 8
  check "$tag bench" "$bin" bench "$m" -p 4 -n 2 -r 1
  check "$tag sign" "$bin" sign "$m" --key "$tmp/k.key" -o "$tmp/any.sig"
  check "$tag requant" "$bin" requant "$m" --to q4 -o "$tmp/rq.cmf" -q
  rm -rf "$tmp/npy" "$tmp/compact.cmf" "$tmp/any.sig" "$tmp/rq.cmf"
}

want0=1 # the intact model works with every command, so the corrupted runs test something
all_commands "$good" good
want0=0

# truncations: at and around every section edge
cuts="0 1 8 64 127 128 $((hoff + hlen / 2)) $((hoff + hlen)) $((doff + 8)) $((doff + dlen / 2)) \
$((doff + dlen)) $((aoff + alen / 2)) $((aoff + alen)) $((voff + vlen / 2)) $((size - 1))"
for n in $cuts; do
  [ "$n" -lt "$size" ] || continue
  head -c "$n" "$good" >"$tmp/cut.cmf"
  all_commands "$tmp/cut.cmf" "truncated@$n"
done

# byte flips: envelope fields, header JSON, directory, tensor data, vocab, tail
flips="4 12 24 40 56 72 88 $((hoff + 1)) $((hoff + hlen / 2)) $((doff)) $((doff + 8)) $((doff + dlen / 2)) \
$((aoff)) $((aoff + alen / 2)) $((voff + 4)) $((voff + vlen / 2)) $((size - 1))"
for at in $flips; do
  cp "$good" "$tmp/flip.cmf"
  flip "$tmp/flip.cmf" "$at"
  all_commands "$tmp/flip.cmf" "flip@$at"
done

# a sample file with a masks section (the fuzz seed of fuzz_open, minus its flags byte)
tail -c +2 "$src/tests/fuzz/corpus/open/seed_flip_sample.cmf" >"$tmp/masks.cmf"
moff=$(u64 "$tmp/masks.cmf" 64); mlen=$(u64 "$tmp/masks.cmf" 72)
[ "$moff" -gt 0 ] || { echo "the sample has no masks section"; exit 1; }
head -c $((moff + mlen / 2)) "$tmp/masks.cmf" >"$tmp/cut.cmf"
all_commands "$tmp/cut.cmf" "masks truncated"
for at in $moff $((moff + 4)) $((moff + 40)) $((moff + mlen / 2)) $((moff + mlen - 1)); do
  cp "$tmp/masks.cmf" "$tmp/flip.cmf"
  flip "$tmp/flip.cmf" "$at"
  all_commands "$tmp/flip.cmf" "masks flip@$at"
  check "masks flip@$at defrag" "$bin" defrag "$tmp/flip.cmf" --task general -o "$tmp/d.cmf" -q
done

# signatures: a good file with a corrupted .sig beside it
"$bin" sign "$good" --key "$tmp/k.key" >/dev/null || { echo "sign failed"; exit 1; }
check "sig good" "$bin" verify "$good"
cp "$good.sig" "$tmp/sig.orig"
for at in 0 2 10 30 100 200 319 320; do
  cp "$tmp/sig.orig" "$good.sig"
  flip "$good.sig" "$at"
  check "sig flip@$at" "$bin" verify "$good"
done
for n in 0 1 100 320; do
  head -c "$n" "$tmp/sig.orig" >"$good.sig"
  check "sig truncated@$n" "$bin" verify "$good"
done
head -c 5000 /dev/zero | tr '\0' ' ' >"$good.sig"
check "sig oversized" "$bin" verify "$good"
printf '\xff\xfe{"alg": 1}' >"$good.sig"
check "sig binary" "$bin" verify "$good"
rm -f "$good.sig"

# converters on corrupted inputs: GGUF
gguf=$src/tests/fuzz/corpus/gguf/llama_spm.gguf
gsize=$(stat -c %s "$gguf")
for n in 0 4 8 16 24 100 $((gsize / 3)) $((gsize / 2)) $((gsize - 1)); do
  head -c "$n" "$gguf" >"$tmp/cut.gguf"
  check "gguf truncated@$n" "$bin" import-gguf "$tmp/cut.gguf" --quant q8 -o "$tmp/g.cmf"
done
for at in 4 8 16 24 40 64 $((gsize / 4)) $((gsize / 2)) $((gsize - 8)); do
  cp "$gguf" "$tmp/flip.gguf"
  flip "$tmp/flip.gguf" "$at"
  check "gguf flip@$at" "$bin" import-gguf "$tmp/flip.gguf" --quant q8 -o "$tmp/g.cmf"
done

# converters: a Hugging Face checkpoint with each file truncated or flipped
ck=$src/tests/fixtures/tiny/llama
for f in model.safetensors tokenizer.json config.json tokenizer_config.json; do
  fs=$(stat -c %s "$ck/$f")
  for n in 0 8 $((fs / 2)) $((fs - 1)); do
    rm -rf "$tmp/ck" && cp -r "$ck" "$tmp/ck"
    head -c "$n" "$ck/$f" >"$tmp/ck/$f"
    check "convert $f truncated@$n" "$bin" convert --model "$tmp/ck" --quant q8 --output "$tmp/c.cmf" -q
  done
  for at in 0 3 8 $((fs / 2)); do
    rm -rf "$tmp/ck" && cp -r "$ck" "$tmp/ck"
    flip "$tmp/ck/$f" "$at"
    check "convert $f flip@$at" "$bin" convert --model "$tmp/ck" --quant q8 --output "$tmp/c.cmf" -q
  done
done
check "tokenize bad tokenizer.json" "$bin" tokenize "$tmp/ck/tokenizer.json" "Hello"

echo "$runs command runs"
[ "$fail" -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
