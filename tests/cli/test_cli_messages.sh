#!/usr/bin/env bash
# The CLI's option errors say what is wrong with which value (README: name the value and the
# rule), nothing is clamped or ignored in silence, and output a user pipes ends its lines.
set -uo pipefail
bin=${CORTIQ_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert --model "${CORTIQ_SOURCE_DIR:?}/tests/fixtures/tiny/llama" --quant q8 --output "$tmp/m.cmf" -q
m=$tmp/m.cmf
fail=0
# expect RC PATTERN CMD...: exit code RC and PATTERN (grep -E) in stderr
expect() {
  local rc=$1 pat=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ $got -ne "$rc" ] || ! grep -qE -- "$pat" "$tmp/err"; then
    echo "FAIL: $* -> exit $got, stderr: $(cat "$tmp/err"); want exit $rc and /$pat/"; fail=1
  fi
}
expect 2 "--temp '-1': must be in \[0, inf\)" "$bin" run "$m" --prompt hi --temp -1
expect 2 "--max-tokens 'abc': not a whole number" "$bin" run "$m" --prompt hi --max-tokens abc
expect 2 "--max-tokens '0': must be in \[1, " "$bin" run "$m" --prompt hi --max-tokens 0
expect 2 "--ctx '0': must be in \[16, " "$bin" run "$m" --prompt hi --ctx 0
expect 2 "--top-p '2': must be in \(0, 1\]" "$bin" run "$m" --prompt hi --top-p 2
expect 2 "--min-p '1': must be in \[0, 1\)" "$bin" run "$m" --prompt hi --min-p 1
expect 2 "-t '0': must be in \[1, 64\]" "$bin" run "$m" --prompt hi -t 0
expect 2 "unknown option '--bogus'" "$bin" run "$m" --prompt hi --bogus
expect 2 "--prompt needs a value" "$bin" run "$m" --prompt
expect 2 "--kv 'q4': want f16, q8 or f32" "$bin" run "$m" --prompt hi --kv q4
expect 0 "--ctx 999999 is more than the model's 256 positions; using 256" \
  "$bin" run "$m" --prompt hi --max-tokens 2 --greedy --ctx 999999
expect 2 "--ctx '1': must be in \[2, " "$bin" ppl --ctx 1 "$m"
printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..8} > "$tmp/t.txt"
expect 2 "--ctx '0': must be in" "$bin" ppl "$m" "$tmp/t.txt" --ctx 0
expect 2 "--stride '0': must be in" "$bin" ppl "$m" "$tmp/t.txt" --stride 0
expect 2 "--kv 'q4': want" "$bin" ppl "$m" "$tmp/t.txt" --kv q4
expect 2 "unexpected argument 'extra'" "$bin" ppl "$m" "$tmp/t.txt" extra
expect 3 "nonexistent.txt: IO: cannot read: No such file or directory" "$bin" ppl "$m" "$tmp/nonexistent.txt"
expect 0 "--ctx 5000 is more than the model's 256 positions; using 256" "$bin" ppl "$m" "$tmp/t.txt" --ctx 5000
expect 2 "-p '0': must be in \[1, 65536\]" "$bin" bench "$m" -p 0
expect 2 "-t '0': must be in \[1, 64\]" "$bin" bench "$m" -t 0
expect 2 "unknown option '--bogus'" "$bin" bench "$m" --bogus
expect 2 "--mean-bits '9': must be in \[3, 8\]" "$bin" convert --model x --quant vbit --output y --mean-bits 9
expect 2 "--model needs a value" "$bin" convert --model
expect 2 "unknown option or argument '--mod'" "$bin" convert --mod x
expect 2 "-t '99': must be in \[1, 64\]" "$bin" import-gguf x.gguf --quant q8 -o y -t 99
expect 2 "--quant needs a value" "$bin" import-gguf x.gguf --quant
expect 2 "unknown option '--qua'" "$bin" import-gguf x.gguf --qua q8
expect 2 "id 999999999 is outside the vocabulary \[0, 3[0-9][0-9]\)" "$bin" detokenize "$m" 999999999
expect 2 "need SRC and TEXT \(see cortiq tokenize --help\)$" "$bin" tokenize "$m"
# a missing file has no signature to report
"$bin" verify "$tmp/absent.cmf" >"$tmp/out" 2>&1
grep -q "signature" "$tmp/out" && { echo "FAIL: verify of a missing file talks about a signature"; fail=1; }
"$bin" verify --help | head -1 | grep -q -- "--single" || { echo "FAIL: verify usage lacks --single"; fail=1; }
top_help=$("$bin" 2>&1 || true)
grep -qE "^  bench +a model's prefill/decode" <<<"$top_help" || { echo "FAIL: top-level help: bench"; fail=1; }
# a one-shot answer ends its line on stdout (the stats line goes to stderr)
"$bin" run "$m" --prompt hi --max-tokens 3 --greedy 2>/dev/null >"$tmp/ans"
[ "$(tail -c 1 "$tmp/ans" | od -An -c | tr -d ' ')" == '\n' ] || { echo "FAIL: the answer does not end with a newline"; fail=1; }
# chat commands are the program's, not the model's: /help and /reset answer on stderr
printf '/help\nhello\n/reset\n/exit\n' | "$bin" run "$m" --max-tokens 2 --greedy >"$tmp/out" 2>"$tmp/err"
grep -q "/save FILE" "$tmp/err" || { echo "FAIL: /help"; fail=1; }
grep -q "conversation cleared" "$tmp/err" || { echo "FAIL: /reset says nothing"; fail=1; }
[ "$(grep -c '^\[prompt' "$tmp/err")" -eq 1 ] || { echo "FAIL: /help or /reset went to the model"; fail=1; }
# multi-line input (a trailing backslash, a """ block), /save and /load, an unknown command
printf 'first line \\\nsecond line\n"""\nblock a\nblock b\n"""\n/save %s\n/load %s\n/bogus\n/exit\n' "$tmp/c.json" "$tmp/c.json" |
  "$bin" run "$m" --max-tokens 3 --greedy --system "Be brief." >/dev/null 2>"$tmp/err"
python3 - "$tmp/c.json" <<'PY' || { echo "FAIL: saved conversation: $(cat "$tmp/c.json")"; fail=1; }
import json, sys
m = json.load(open(sys.argv[1]))
assert [x["role"] for x in m] == ["system", "user", "assistant", "user", "assistant"], m
assert m[1]["content"] == "first line \nsecond line" and m[3]["content"] == "block a\nblock b", m
PY
grep -q "loaded 5 messages" "$tmp/err" || { echo "FAIL: /load"; fail=1; }
grep -q "unknown command /bogus" "$tmp/err" || { echo "FAIL: an unknown command went to the model"; fail=1; }
echo '[{"role": "user"}]' >"$tmp/bad.json"
printf '/load %s\n/exit\n' "$tmp/bad.json" | "$bin" run "$m" --max-tokens 2 >/dev/null 2>"$tmp/err"
grep -q "is not a conversation" "$tmp/err" || { echo "FAIL: /load of a bad file"; fail=1; }
# a full context drops the oldest turns (the system message stays); a message that cannot fit
# is refused and the session goes on
printf 'hello there my friend\nsecond message here\nthird one\n%s\nfourth\n/exit\n' "$(printf 'word %.0s' {1..200})" |
  "$bin" run "$m" --max-tokens 8 --greedy --system "Be brief." --ctx 64 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: context shift: exit $rc"; cat "$tmp/err"; fail=1; }
grep -q "the context is full; dropped the [0-9]* oldest messages* (the system message stays)" "$tmp/err" || { echo "FAIL: no context shift"; cat "$tmp/err"; fail=1; }
grep -q "more than the context of 64 leaves with 8 kept for the answer; not sent" "$tmp/err" || { echo "FAIL: an oversized message"; fail=1; }
[ "$(grep -c '^\[prompt' "$tmp/err")" -eq 4 ] || { echo "FAIL: every message that fits is answered"; cat "$tmp/err"; fail=1; }
# --stop: the answer ends before the stop string, which is not printed
full=$("$bin" run "$m" --prompt hello --max-tokens 30 --greedy 2>/dev/null)
cut=$("$bin" run "$m" --prompt hello --max-tokens 30 --greedy --stop "$(printf '%s' "$full" | tail -c 4 | head -c 2)" 2>"$tmp/err")
[ ${#cut} -lt ${#full} ] && [ "${full#"$cut"}" != "$full" ] || { echo "FAIL: --stop: '$cut' vs '$full'"; fail=1; }
grep -q "finish stop string\]" "$tmp/err" || { echo "FAIL: --stop stats"; fail=1; }
printf 'hello' >"$tmp/p.txt"
[ "$("$bin" run "$m" --prompt-file "$tmp/p.txt" --max-tokens 30 --greedy 2>/dev/null)" == "$full" ] || { echo "FAIL: --prompt-file"; fail=1; }
expect 3 "absent.txt: IO: cannot read: No such file" "$bin" run "$m" --prompt-file "$tmp/absent.txt"
expect 2 "--stop '': a stop string cannot be empty" "$bin" run "$m" --prompt hi --stop ""
# ppl shows a progress bar on a terminal (script(1) gives it one), none in a pipe
"$bin" ppl "$m" "$tmp/t.txt" --ctx 32 2>"$tmp/err" >/dev/null
grep -q "ppl \[" "$tmp/err" && { echo "FAIL: a progress bar in a pipe"; fail=1; }
if command -v script >/dev/null; then
  script -qc "'$bin' ppl '$m' '$tmp/t.txt' --ctx 32" /dev/null >"$tmp/tty" 2>&1
  grep -qE "ppl \[#* *\] +[0-9]+%  [0-9]+/[0-9]+ tokens" "$tmp/tty" || { echo "FAIL: no progress bar on a terminal"; fail=1; }
  grep -q "^PPL = " <(tr '\r' '\n' <"$tmp/tty" | sed 's/\x1b\[K//') || { echo "FAIL: PPL line after the bar"; fail=1; }
fi
# convert's progress says what its percentage counts
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/llama" --quant q8 --output "$tmp/p.cmf" >/dev/null 2>"$tmp/err"
grep -qE "[0-9]+% of bytes, [0-9]+/[0-9]+ tensors" "$tmp/err" || { echo "FAIL: convert progress: $(cat "$tmp/err")"; fail=1; }
# a model without a chat template: say so once, and point at --raw
cp -r "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/llama" "$tmp/notpl"
python3 -c 'import json, sys; p = sys.argv[1]; c = json.load(open(p)); c.pop("chat_template", None); json.dump(c, open(p, "w"))' "$tmp/notpl/tokenizer_config.json"
"$bin" convert --model "$tmp/notpl" --quant q8 --output "$tmp/notpl.cmf" -q
expect 0 "has no chat template; using ChatML .*--raw" "$bin" run "$tmp/notpl.cmf" --prompt hi --max-tokens 2 --greedy
"$bin" run "$tmp/notpl.cmf" --raw --prompt hi --max-tokens 2 --greedy 2>&1 | grep -q "no chat template" && { echo "FAIL: --raw still warns"; fail=1; }
exit $fail
