#!/usr/bin/env bash
# `cortiq bench` fields for cold-start measurements (bench/vs_llamacpp): first_token_s (from the
# start of the model load to the first generated token, so never below load_s) with its
# CLOCK_MONOTONIC reading, and with --text the tokenizer / chat template build times (on a worker
# thread) and how long the first token waited for them. The timed rounds follow an untimed
# warm-up ("warmup": true, the first token taken from it) unless --no-warmup.
set -euo pipefail
bin=$CORTIQ_BIN
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" --quant q8 --output "$tmp/m.cmf" -q
fail=0
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" "$2"; }
"$bin" bench "$tmp/m.cmf" -p 8 -n 2 -r 1 --json >"$tmp/plain.json"
"$bin" bench "$tmp/m.cmf" -p 8 -n 2 -r 1 --text --json >"$tmp/text.json"
for f in plain text; do
  [ "$(wc -l <"$tmp/$f.json")" -eq 1 ] || { echo "$f: JSON must be one line"; fail=1; }
  grep -qE '"first_token_s": [0-9]+\.[0-9]+, "first_token_monotonic_s": [0-9]+\.[0-9]+' "$tmp/$f.json" \
    || { echo "$f: first_token fields"; cat "$tmp/$f.json"; fail=1; }
  grep -qE '\}$' "$tmp/$f.json" || { echo "$f: JSON not closed"; fail=1; }
  awk -v a="$(field load_s "$tmp/$f.json")" -v b="$(field first_token_s "$tmp/$f.json")" 'BEGIN { exit !(b >= a && b > 0) }' \
    || { echo "$f: first_token_s must cover the load"; cat "$tmp/$f.json"; fail=1; }
done
grep -q '"tokenizer_load_s"' "$tmp/plain.json" && { echo "tokenizer_load_s without --text"; fail=1; }
grep -qE '"tokenizer_load_s": [0-9]+\.[0-9]+, "template_load_s": [0-9]+\.[0-9]+, "text_wait_s": [0-9]+\.[0-9]+\}$' "$tmp/text.json" \
  || { echo "--text: tokenizer/template fields"; cat "$tmp/text.json"; fail=1; }
grep -q '"reps": 1, "warmup": true,' "$tmp/plain.json" || { echo "warmup field"; cat "$tmp/plain.json"; fail=1; }
"$bin" bench "$tmp/m.cmf" -p 8 -n 2 -r 1 --no-warmup --json >"$tmp/cold.json"
grep -q '"reps": 1, "warmup": false,' "$tmp/cold.json" || { echo "--no-warmup"; cat "$tmp/cold.json"; fail=1; }
"$bin" bench "$tmp/m.cmf" -p 8 -n 2 -r 1 | grep -q 'load [0-9.]* s, one warm-up round$' || { echo "warm-up line"; fail=1; }
"$bin" bench "$tmp/m.cmf" -p 8 -n 2 -r 1 --text | grep -qE '^  first token [0-9.]+ s after the load started \(tokenizer [0-9.]+ ms, chat template [0-9.]+ ms on a worker; waited [0-9.]+ ms\)$' \
  || { echo "--text: text line"; fail=1; }
exit $fail
