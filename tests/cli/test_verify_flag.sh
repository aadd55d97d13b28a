#!/usr/bin/env bash
# `--verify` on run, ppl and bench: a file whose tensor bytes were changed after writing is
# refused before anything is computed, naming the tensor; without the flag only the metadata's
# hashes are checked at open (spec §1.2: tensor hashes on demand), and `cortiq verify` finds it.
set -uo pipefail
bin=${CORTIQ_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert --model "${CORTIQ_SOURCE_DIR:?}/tests/fixtures/tiny/llama" --quant q8 --output "$tmp/m.cmf" -q
fail=0
printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..8} > "$tmp/t.txt"
for cmd in "run $tmp/m.cmf --prompt hi --max-tokens 2 --greedy" "ppl $tmp/m.cmf $tmp/t.txt --ctx 32" \
           "bench $tmp/m.cmf -p 8 -n 2 -r 1"; do
  $bin $cmd --verify >/dev/null 2>"$tmp/err" || { echo "FAIL: $cmd --verify on a good file: $(cat "$tmp/err")"; fail=1; }
done
# overwrite 16 bytes inside the first tensor (model.embed_tokens.weight, at the blob's start)
data_off=$("$bin" info "$tmp/m.cmf" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["sections"]["data"][0])')
cp "$tmp/m.cmf" "$tmp/bad.cmf"
printf '\xff%.0s' {1..16} | dd of="$tmp/bad.cmf" bs=1 seek=$((data_off + 100)) conv=notrunc status=none
for cmd in "run $tmp/bad.cmf --prompt hi --max-tokens 2 --greedy" "ppl $tmp/bad.cmf $tmp/t.txt --ctx 32" \
           "bench $tmp/bad.cmf -p 8 -n 2 -r 1"; do
  $bin $cmd --verify >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -ne 1 ] || ! grep -q "Hash: tensor 'model.embed_tokens.weight' hash64 mismatch" "$tmp/err" || [ -s "$tmp/out" ]; then
    echo "FAIL: $cmd --verify: exit $rc, stdout $(wc -c <"$tmp/out") bytes, stderr: $(cat "$tmp/err")"; fail=1
  fi
done
"$bin" run "$tmp/bad.cmf" --prompt hi --max-tokens 2 --greedy >/dev/null 2>&1 || { echo "FAIL: without --verify the open checks tensor hashes (it should not: on demand)"; fail=1; }
"$bin" verify "$tmp/bad.cmf" >/dev/null 2>&1; [ $? -eq 1 ] || { echo "FAIL: cortiq verify missed the change"; fail=1; }
exit $fail
