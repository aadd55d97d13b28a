#!/usr/bin/env bash
# `cortiq serve --parallel 4` on the tiny model under 40 requests from 8 concurrent clients,
# some streamed, some dropped part-way by the client: no crash, every completed greedy answer
# equal to the same request served alone (continuous batching gives each slot exactly its own
# logits), decode passes shared by several slots, 429 with Retry-After past the queue, the
# server answers afterwards and exits cleanly. The model is q4t, so on the AVX2 tier the slots
# decode through the 4-bit matrices' batched-decode copies (cortiq_load_opts.batch_lanes).
set -uo pipefail
. "${CORTIQ_SOURCE_DIR:?}/tests/server/serve_lib.sh"
m="$serve_tmp/m.cmf"
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" --quant q4t --output "$m" -q || exit 1
serve_start "$m" --ctx 256 --parallel 4 -t 2 || exit 1
fail=0
python3 -S "$CORTIQ_SOURCE_DIR/tests/server/load_check.py" "$base" 40 8 || fail=1
curl -s "$base/metrics" >"$serve_tmp/metrics"
grep -q '^cortiq_requests_total{endpoint="chat",outcome="ok"} [1-9]' "$serve_tmp/metrics" || { echo "FAIL: metrics"; fail=1; }
# continuous batching happened: some decode passes carried several slots' tokens (how many
# depends on how the clients' requests overlap in time, which a loaded machine changes; the
# batched pass's exactness is engine.test_batch_decode's)
passes=$(sed -n 's/^cortiq_decode_passes_total //p' "$serve_tmp/metrics")
tokens=$(sed -n 's/^cortiq_decode_pass_tokens_total //p' "$serve_tmp/metrics")
echo "decode passes $passes, tokens $tokens"
[ -n "$passes" ] && [ "$tokens" -gt "$passes" ] || { echo "FAIL: decode steps were not batched"; fail=1; }
serve_stop || { echo "FAIL: the server did not exit cleanly"; fail=1; }

# limits: one slot and no queue: while a long request runs, another gets 429 with Retry-After;
# /metrics shows the slot busy
serve_start "$m" --ctx 256 --parallel 1 --max-queue 0 || exit 1
curl -s -o /dev/null "$base/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":200,"n":16,"temperature":0}' &
long=$!
for _ in $(seq 100); do curl -s "$base/metrics" | grep -q '^cortiq_slots_busy 1' && break; sleep 0.02; done
code=$(curl -s -D "$serve_tmp/h" -o "$serve_tmp/b" -w '%{http_code}' "$base/v1/completions" -d '{"prompt":"hi","max_tokens":2}')
[ "$code" = 429 ] || { echo "FAIL: a request past the queue got $code, want 429"; fail=1; }
grep -qi '^retry-after: 1' "$serve_tmp/h" || { echo "FAIL: no Retry-After on the 429"; fail=1; }
grep -q '"type":"rate_limit_error"' "$serve_tmp/b" || { echo "FAIL: 429 body"; cat "$serve_tmp/b"; fail=1; }
wait $long
serve_stop || { echo "FAIL: the server did not exit cleanly"; fail=1; }
exit $fail
