#!/usr/bin/env bash
# Ctrl-C in `cortiq run`'s chat, on SmolLM2 (fetched into the model cache when absent): it stops
# the reply being generated and the session goes on (the next message is answered with the
# history); at the prompt, a first Ctrl-C says how to quit and a second one quits, exit 0.
set -uo pipefail
bin=${CORTIQ_BIN:?}
. "${CORTIQ_SOURCE_DIR:?}/tests/common/smollm2.sh"
tmp=$(mktemp -d)
"$bin" import-gguf "$gguf" --quant q8 -o "$tmp/m.cmf" -q || exit 1
mkfifo "$tmp/in"
"$bin" run "$tmp/m.cmf" --ctx 2048 --max-tokens 1500 <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
exec 3>"$tmp/in"
echo "Write a very long story about a dragon who learns to fly, with many chapters." >&3
# during the reply: once its first words are out (a loaded machine may take seconds to get there)
for _ in $(seq 240); do [ -s "$tmp/out" ] && break; sleep 0.25; done
sleep 0.5; kill -INT $pid
sleep 1; echo "Say hi" >&3        # the session goes on
answered() { [ "$(grep -c '^\[prompt' "$tmp/err")" -ge 2 ]; }
for _ in $(seq 120); do answered && break; sleep 0.5; done
# a sampled reply may run long (up to --max-tokens) on a loaded machine: stop it, so that the
# two Ctrl-C below reach the prompt (the history check is what this part is for)
if ! answered; then
  kill -INT $pid
  for _ in $(seq 60); do answered && break; sleep 0.5; done
fi
sleep 0.5                                   # past the reply's end: back at the prompt
kill -INT $pid; sleep 0.5; kill -INT $pid   # twice at the prompt: quit
exec 3>&-
wait $pid; rc=$?
fail=0
[ $rc -eq 0 ] || { echo "FAIL: exit $rc after two Ctrl-C at the prompt"; fail=1; }
grep -q "finish interrupted\]" "$tmp/err" || { echo "FAIL: the first reply was not interrupted"; fail=1; }
[ "$(grep -c '^\[prompt' "$tmp/err")" -eq 2 ] || { echo "FAIL: the second message was not answered"; fail=1; }
grep -qE '^\[prompt [0-9]+ tokens \([1-9][0-9]* cached\)' "$tmp/err" || { echo "FAIL: the second turn did not keep the history"; fail=1; }
grep -q "Ctrl-C again to quit" "$tmp/err" || { echo "FAIL: no notice after the first Ctrl-C at the prompt"; fail=1; }
[ $fail -eq 0 ] || cat "$tmp/err"
exit $fail
