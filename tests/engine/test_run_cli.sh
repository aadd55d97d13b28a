#!/usr/bin/env bash
# `cortiq run`, `ppl` and `bench` as a user drives them, on a tiny converted model: same seed ->
# same text, the stats line, interactive chat with history (the second turn reuses the cache),
# ppl's last line, bench --json keys, --kv on run / ppl / bench, and errors.
set -euo pipefail
bin=$CORTIQ_BIN
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" --quant q8 --output "$tmp/m.cmf" -q
fail=0
a=$("$bin" run "$tmp/m.cmf" --prompt "Tell me a story" --max-tokens 16 --temp 0.9 --seed 42 2>"$tmp/err1")
b=$("$bin" run "$tmp/m.cmf" --prompt "Tell me a story" --max-tokens 16 --temp 0.9 --seed 42 2>/dev/null)
[ "$a" == "$b" ] || { echo "same seed gave different text"; fail=1; }
grep -qE '^\[prompt [0-9]+ tokens \(0 cached\), prefill [0-9.]+ tok/s \| generated [0-9]+ tokens, decode [0-9.]+ tok/s \| finish (eos|length)\]$' "$tmp/err1" \
  || { echo "no stats line:"; cat "$tmp/err1"; fail=1; }
g1=$("$bin" run "$tmp/m.cmf" --prompt "Tell me a story" --max-tokens 16 --greedy 2>/dev/null)
g2=$("$bin" run "$tmp/m.cmf" --prompt "Tell me a story" --max-tokens 16 --greedy --seed 7 2>/dev/null)
[ "$g1" == "$g2" ] || { echo "greedy depends on the seed"; fail=1; }
printf 'hello there\nsecond turn\n/exit\n' | "$bin" run "$tmp/m.cmf" --max-tokens 4 --greedy --system "Be brief." >"$tmp/chat_out" 2>"$tmp/chat_err"
[ "$(grep -c '^\[prompt' "$tmp/chat_err")" -eq 2 ] || { echo "expected two turns:"; cat "$tmp/chat_err"; fail=1; }
grep -qE '^\[prompt [0-9]+ tokens \([1-9][0-9]* cached\)' "$tmp/chat_err" || { echo "second turn did not reuse the KV cache"; cat "$tmp/chat_err"; fail=1; }
"$bin" run "$tmp/m.cmf" --raw --prompt "plain text" --max-tokens 4 --greedy >/dev/null 2>&1 || { echo "--raw failed"; fail=1; }
printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..20} > "$tmp/text.txt"
"$bin" ppl "$tmp/m.cmf" "$tmp/text.txt" --ctx 64 --stride 32 | tail -n 1 | grep -qE '^PPL = [0-9]+\.[0-9]+$' || { echo "ppl last line"; fail=1; }
"$bin" bench "$tmp/m.cmf" -p 16 -n 4 -r 2 --json | grep -q '"prefill_tok_s": .*"decode_tok_s": .*"peak_rss_mb": ' || { echo "bench --json keys"; fail=1; }
for kv in f32 q8; do
  "$bin" run "$tmp/m.cmf" --prompt "Tell me a story" --max-tokens 4 --greedy --kv $kv >/dev/null 2>&1 || { echo "run --kv $kv failed"; fail=1; }
  "$bin" ppl "$tmp/m.cmf" "$tmp/text.txt" --ctx 64 --stride 32 --kv $kv | tail -n 1 | grep -qE '^PPL = [0-9]+\.[0-9]+$' || { echo "ppl --kv $kv"; fail=1; }
done
"$bin" bench "$tmp/m.cmf" -p 16 -n 4 -r 1 --kv q8 --json | grep -q '"kv": "q8", "kv_bytes": [1-9]' || { echo "bench --kv q8 --json"; fail=1; }
"$bin" bench "$tmp/m.cmf" -p 16 -n 4 -r 1 --json | grep -q '"kv": "f16"' || { echo "bench default KV type must be f16"; fail=1; }
set +e
"$bin" run "$tmp/m.cmf" --prompt hi --kv q4 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--kv q4 must be a usage error"; fail=1; }
"$bin" run "$tmp/m.cmf" --prompt hi --top-p 0 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--top-p 0 must be a usage error"; fail=1; }
"$bin" run "$tmp/missing.cmf" --prompt hi >/dev/null 2>&1; [ $? -eq 3 ] || { echo "missing model must exit 3"; fail=1; }
"$bin" ppl "$tmp/m.cmf" >/dev/null 2>&1; [ $? -eq 2 ] || { echo "ppl without text must exit 2"; fail=1; }
exit $fail
