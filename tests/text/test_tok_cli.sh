#!/usr/bin/env bash
# test_tok_cli.sh - `cortiq tokenize` / `cortiq detokenize` on a committed fixture tokenizer:
# plain and --json output, stdin input, --no-special, --skip-special, exit codes.
set -u
: "${CORTIQ_BIN:?}" "${CORTIQ_SOURCE_DIR:?}"
fail=0
check() { # name expected actual
    if [ "$2" != "$3" ]; then
        echo "FAIL $1: expected [$2] got [$3]"
        fail=1
    fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
xz -dc "$CORTIQ_SOURCE_DIR/tests/fixtures/tokenizer/synth_sentencepiece.tokenizer.json.xz" > "$tmp/tok.json" || exit 1
cases="$CORTIQ_SOURCE_DIR/tests/fixtures/tokenizer/synth_sentencepiece.cases.jsonl.gz"
# reference ids for the first corpus line, from the parity fixture
want_ids=$(gzip -dc "$cases" | head -1 | python3 -c 'import json,sys; print(" ".join(map(str, json.loads(sys.stdin.read())["ids"])))' 2>/dev/null)
text="The quick brown fox jumps over the lazy dog."

out=$("$CORTIQ_BIN" tokenize "$tmp/tok.json" "$text")
check "exit" 0 $?
if [ -n "$want_ids" ]; then check "ids" "$want_ids" "$(echo "$out" | head -1)"; fi
ntok=$(echo "$out" | head -1 | wc -w)
check "one line per token" "$ntok" "$(echo "$out" | tail -n +2 | wc -l)"
check "BOS first" "1" "$(echo "$out" | head -1 | cut -d' ' -f1)"

json=$("$CORTIQ_BIN" tokenize --json --no-special "$tmp/tok.json" "$text")
case "$json" in
    '{"ids": ['*'], "pieces": ["'*'"]}') ;;
    *) echo "FAIL json shape: $json"; fail=1 ;;
esac
stdin_out=$(printf '%s' "$text" | "$CORTIQ_BIN" tokenize "$tmp/tok.json" - | head -1)
check "stdin" "$(echo "$out" | head -1)" "$stdin_out"
# the tokenizer itself from a pipe (SRC = /dev/stdin): nothing of the stream may be lost
pipe_out=$("$CORTIQ_BIN" tokenize /dev/stdin "$text" <"$tmp/tok.json" | head -1)
check "tokenizer from a pipe" "$(echo "$out" | head -1)" "$pipe_out"
pipe_out=$(cat "$tmp/tok.json" | "$CORTIQ_BIN" tokenize /dev/stdin "$text" | head -1)
check "tokenizer from a pipe (cat)" "$(echo "$out" | head -1)" "$pipe_out"

ids=$(echo "$out" | head -1)
dec=$("$CORTIQ_BIN" detokenize --skip-special "$tmp/tok.json" $ids)
check "round trip" "$text" "$dec"
dec2=$(echo "$ids" | tr ' ' ',' | "$CORTIQ_BIN" detokenize --skip-special --json "$tmp/tok.json" -)
check "detokenize json stdin" "{\"text\": \"$text\"}" "$dec2"

"$CORTIQ_BIN" tokenize "$tmp/tok.json" > /dev/null 2>&1
check "missing text is a usage error" 2 $?
"$CORTIQ_BIN" detokenize "$tmp/tok.json" 12x > /dev/null 2>&1
check "bad id is a usage error" 2 $?
"$CORTIQ_BIN" tokenize "$tmp/missing.json" x > /dev/null 2>&1
check "missing file is a system error" 3 $?
echo '{"model":{"type":"Hypothetical","vocab":{}}}' > "$tmp/uni.json"
"$CORTIQ_BIN" tokenize "$tmp/uni.json" x > /dev/null 2>&1
check "unsupported model is invalid input" 1 $?
"$CORTIQ_BIN" tokenize --help | grep -q "usage: cortiq tokenize" || { echo "FAIL help"; fail=1; }
"$CORTIQ_BIN" detokenize --help | grep -q "usage: cortiq detokenize" || { echo "FAIL help"; fail=1; }
[ $fail = 0 ] && echo "test_tok_cli: ok"
exit $fail
