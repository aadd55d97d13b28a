#!/usr/bin/env bash
# `cortiq serve` on the tiny model, driven with curl: routes, SSE framing (data: chunks with a
# delta, one final [DONE], usage only with include_usage), greedy answers equal to `cortiq run`,
# errors in OpenAI's shape with their codes (400 naming the parameter, prompt too long with the
# numbers, 401, 404, 413), /metrics, and a clean exit on SIGTERM.
set -uo pipefail
. "${CORTIQ_SOURCE_DIR:?}/tests/server/serve_lib.sh"
m="$serve_tmp/m.cmf"
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" --quant q8 --output "$m" -q || exit 1
serve_start "$m" --ctx 256 --parallel 2 || exit 1
fail=0
check() { "$@" || { echo "FAIL: $*"; fail=1; }; }
check grep -q "2 slots of 256 positions, KV cache f16" "$server_log"
post() { curl -s -o "$serve_tmp/body" -w '%{http_code}' "$base$1" -H 'Content-Type: application/json' -d "$2"; }
json() { python3 -S -c "import json,sys; d=json.load(open('$serve_tmp/body')); print($1)"; }
# jcheck EXPR: EXPR over the last body (d) must be true
jcheck() { python3 -S -c "import json,sys; d=json.load(open('$serve_tmp/body')); sys.exit(0 if ($1) else 1)"; }

# routes
check [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ]
check [ "$(curl -s "$base/v1/models" | python3 -S -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')" = m ]
check [ "$(curl -s -o "$serve_tmp/body" -w '%{http_code}' "$base/nope")" = 404 ]
check [ "$(json 'd["error"]["type"]')" = not_found_error ]

# greedy chat equals `cortiq run --greedy` (same template, same tokens)
want=$("$bin" run "$m" --prompt "Tell me a story" --max-tokens 12 --greedy --ctx 256 2>/dev/null)
check [ "$(post /v1/chat/completions '{"model":"m","messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0}')" = 200 ]
got=$(json 'd["choices"][0]["message"]["content"]')
check [ "$got" == "$want" ]
check [ "$(json 'd["usage"]["completion_tokens"]')" = 12 ]
check [ "$(json 'd["choices"][0]["finish_reason"]')" = length ]
# the same seed and sampling as `cortiq run`
want=$("$bin" run "$m" --prompt "Tell me a story" --max-tokens 12 --temp 0.9 --seed 42 --ctx 256 2>/dev/null)
post /v1/chat/completions '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0.9,"seed":42}' >/dev/null
check [ "$(json 'd["choices"][0]["message"]["content"]')" == "$want" ]

# SSE framing: data: lines, role first, one [DONE] last, usage in the last chunk only when asked
curl -sN "$base/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$serve_tmp/sse"
python3 -S - "$serve_tmp/sse" "$want" <<'PY' || fail=1
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
events = raw.split("\n\n")
assert events[-1] == "", "the stream must end with a blank line"
events = events[:-1]
assert all(e.startswith("data: ") for e in events), "every event is one data: line"
assert events[-1] == "data: [DONE]" and sum(e == "data: [DONE]" for e in events) == 1
chunks = [json.loads(e[6:]) for e in events[:-1]]
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert all(c["usage"] is None for c in chunks[:-1]) and chunks[-1]["usage"]["completion_tokens"] == 12
assert chunks[-1]["choices"] == []
assert chunks[-2]["choices"][0]["finish_reason"] == "length"
PY
# n = 2 streamed: each choice's chunks carry its index, each ends with its finish_reason, and the
# choices' texts equal the whole answer's
curl -sN "$base/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":6,"temperature":0.9,"seed":3,"n":2,"stream":true}' >"$serve_tmp/sse_n"
post /v1/chat/completions '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":6,"temperature":0.9,"seed":3,"n":2}' >/dev/null
python3 -S - "$serve_tmp/sse_n" "$serve_tmp/body" <<'PY' || fail=1
import json, sys
chunks = [json.loads(e[6:]) for e in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if e.startswith("data: {")]
whole = json.load(open(sys.argv[2]))
for i in (0, 1):
    mine = [c["choices"][0] for c in chunks if c["choices"][0]["index"] == i]
    text = "".join(c["delta"].get("content") or "" for c in mine)
    assert mine[-1]["finish_reason"] == "length" and all(c["finish_reason"] is None for c in mine[:-1]), i
    assert text == whole["choices"][i]["message"]["content"], (i, text, whole["choices"][i])
PY
curl -sN "$base/v1/completions" -d '{"prompt":"Once upon","max_tokens":5,"temperature":0,"stream":true}' >"$serve_tmp/sse2"
check grep -q '"object":"text_completion"' "$serve_tmp/sse2"
check [ "$(grep -c '"usage"' "$serve_tmp/sse2")" = 0 ]
check python3 -S -c "import sys; assert open(sys.argv[1]).read().endswith('}\n\ndata: [DONE]\n\n')" "$serve_tmp/sse2"

# stop strings: the answer ends before the first one, finish_reason stop
full=$(post /v1/completions '{"prompt":"Once upon","max_tokens":20,"temperature":0}' >/dev/null; json 'd["choices"][0]["text"]')
stop=$(python3 -S -c "import sys; t=sys.argv[1]; print(t[3:5] if len(t)>6 else '')" "$full")
check [ -n "$stop" ]
if [ -n "$stop" ]; then
    body=$(python3 -S -c 'import json,sys; print(json.dumps({"prompt":"Once upon","max_tokens":20,"temperature":0,"stop":[sys.argv[1]]}))' "$stop")
    post /v1/completions "$body" >/dev/null
    check [ "$(json 'd["choices"][0]["finish_reason"]')" = stop ]
    check python3 -S -c "import sys; f,s,g=sys.argv[1:]; assert g==f[:f.index(s)], (f,s,g)" "$full" "$stop" "$(json 'd["choices"][0]["text"]')"
fi

# chat_template_kwargs reach the template
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":{"enable_thinking":false}}')" = 200 ]
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":[1]}')" = 400 ]

# errors
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"temperature":NaN}')" = 400 ]
check [ "$(json 'd["error"]["param"]')" = temperature ]
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"top_p":-1}')" = 400 ]
check [ "$(json 'd["error"]["param"]')" = top_p ]
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":100000000000}')" = 400 ]
check [ "$(json 'd["error"]["param"]')" = max_tokens ]
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":250}')" = 400 ]
check jcheck '"exceed the context of 256" in d["error"]["message"]'
long=$(python3 -S -c 'print("word " * 400)')
check [ "$(post /v1/completions "{\"prompt\":\"$long\"}")" = 400 ]
check jcheck '"context holds 256" in d["error"]["message"]'
check [ "$(post /v1/chat/completions '{"messages":"hi"}')" = 400 ]
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"no_such_field":{"x":1}}')" = 200 ]
head -c $((9 << 20)) /dev/zero | tr '\0' ' ' >"$serve_tmp/big"
check [ "$(curl -s -o "$serve_tmp/body" -w '%{http_code}' "$base/v1/completions" --data-binary @"$serve_tmp/big")" = 413 ]

# logprobs, n, logit_bias
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0,"logprobs":true,"top_logprobs":3,"n":2}' >/dev/null
check jcheck 'len(d["choices"]) == 2 and len(d["choices"][0]["logprobs"]["content"]) == 3 and len(d["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 3'
check jcheck 'd["choices"][0]["logprobs"]["content"][0]["logprob"] == d["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"]'
first=$(json 'd["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["bytes"]')
post /v1/completions '{"prompt":"Once upon","max_tokens":1,"temperature":0,"logprobs":2}' >/dev/null
check jcheck 'len(d["choices"][0]["logprobs"]["top_logprobs"][0]) == 2 and len(d["choices"][0]["logprobs"]["tokens"]) == 1'
check [ -n "$first" ]

# a conversation that comes back reuses its slot's cache (whole 128-token chunks of it), and the
# answer is the one a fresh evaluation gives
long=$(python3 -S -c 'import json; print(json.dumps({"messages":[{"role":"user","content":"tell me " * 22}],"max_tokens":8,"temperature":0}))')
post /v1/chat/completions "$long" >/dev/null
first=$(json 'd["choices"][0]["message"]["content"]')
check jcheck 'd["usage"]["prompt_tokens"] > 128'
post /v1/chat/completions "$long" >/dev/null
check [ "$(json 'd["choices"][0]["message"]["content"]')" == "$first" ]

# /metrics counts what was served
curl -s "$base/metrics" >"$serve_tmp/metrics"
check grep -q '^cortiq_requests_total{endpoint="chat",outcome="ok"} [1-9]' "$serve_tmp/metrics"
check grep -q '^cortiq_generated_tokens_total [1-9]' "$serve_tmp/metrics"
check grep -q '^cortiq_request_seconds_bucket{le="+Inf"} [1-9]' "$serve_tmp/metrics"
check grep -q '^cortiq_queue_depth 0' "$serve_tmp/metrics"
check grep -q '^cortiq_kv_positions_capacity 512' "$serve_tmp/metrics"
# the same conversation again finds its prefix in a slot's cache
check grep -q '^cortiq_prompt_tokens_cached_total [1-9]' "$serve_tmp/metrics"

# a second turn reuses the first turn's prompt from the slot's cache (not its decoded answer,
# and not only whole 128-token chunks: past the model's exact chunk size any prefix counts)
t1='{"messages":[{"role":"user","content":"Tell me a story about a cat"}],"max_tokens":6,"temperature":0}'
post /v1/chat/completions "$t1" >/dev/null
p1=$(json 'd["usage"]["prompt_tokens"]')
a1=$(json 'd["choices"][0]["message"]["content"]')
t2=$(python3 -S -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":"Tell me a story about a cat"},{"role":"assistant","content":sys.argv[1]},{"role":"user","content":"and then?"}],"max_tokens":8,"temperature":0}))' "$a1")
cached() { curl -s "$base/metrics" | awk '/^cortiq_prompt_tokens_cached_total/ {print $2}'; }
c0=$(cached)
post /v1/chat/completions "$t2" >/dev/null
turn2=$(json 'd["choices"][0]["message"]["content"]')
c1=$(cached)
check [ "$(json 'd["usage"]["prompt_tokens"]')" -lt 128 ]
check [ $((c1 - c0)) -gt 0 ]
check [ $((c1 - c0)) -le "$p1" ]

# embeddings: unit length, one per input
post /v1/embeddings '{"input":["hello world","other text"]}' >/dev/null
check jcheck 'len(d["data"]) == 2 and abs(sum(x*x for x in d["data"][0]["embedding"]) - 1) < 1e-3'

check serve_stop
# the second turn on a fresh server (nothing cached) answers the same
serve_start "$m" --ctx 256 --parallel 2 || exit 1
post /v1/chat/completions "$t2" >/dev/null
check [ "$(json 'd["choices"][0]["message"]["content"]')" == "$turn2" ]
check serve_stop
# the tiny model with Qwen2.5's template (which has a tools branch), behind --api-key and --cors
cp -r "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" "$serve_tmp/tq"
python3 -S - "$serve_tmp/tq/tokenizer_config.json" "$CORTIQ_SOURCE_DIR/tests/fixtures/templates/Qwen-Qwen2.5-7B-Instruct.jinja" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = open(sys.argv[2]).read()
json.dump(c, open(sys.argv[1], "w"))
PY
"$bin" convert --model "$serve_tmp/tq" --quant q8 --output "$serve_tmp/tq.cmf" -q || exit 1
serve_start "$serve_tmp/tq.cmf" --api-key sekrit --cors https://example.org || exit 1
auth=(-H 'Authorization: Bearer sekrit')
post() { curl -s -o "$serve_tmp/body" -w '%{http_code}' "${auth[@]}" "$base$1" -H 'Content-Type: application/json' -d "$2"; }
# tools reach the template's tools branch (a longer prompt); a tool-call round trip renders
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}' >/dev/null
plain=$(json 'd["usage"]["prompt_tokens"]')
tools='[{"type":"function","function":{"name":"get_weather","description":"the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]'
# (the tiny model's 256 positions are too few for Qwen's tool instructions: the 400 names the
# prompt's length, which shows the branch rendered)
check [ "$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1,\"tools\":$tools}")" = 400 ]
check jcheck "int(d['error']['message'].split()[3]) > $plain + 100 and 'get_weather' not in d['error']['message']"
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1,\"tools\":$tools,\"tool_choice\":\"none\"}" >/dev/null
check jcheck "d['usage']['prompt_tokens'] == $plain"
check [ "$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"weather in Paris?\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"}],\"max_tokens\":2}")" = 200 ]
# --api-key: 401 without it, 200 with it, /health open
check [ "$(curl -s -o "$serve_tmp/body" -w '%{http_code}' "$base/v1/models")" = 401 ]
check [ "$(json 'd["error"]["type"]')" = authentication_error ]
check [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sekrit' "$base/v1/models")" = 200 ]
check [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ]
check grep -qi '^access-control-allow-origin: https://example.org' <<<"$(curl -s -D - -o /dev/null "$base/health")"
check serve_stop

# --kv q8: every slot's cache in q8; greedy answers equal `cortiq run --kv q8`; a bad type is a
# usage error naming the value
want=$("$bin" run "$m" --prompt "Tell me a story" --max-tokens 12 --greedy --ctx 256 --kv q8 2>/dev/null)
serve_start "$m" --ctx 256 --parallel 2 --kv q8 || exit 1
check grep -q "KV cache q8" "$server_log"
post() { curl -s -o "$serve_tmp/body" -w '%{http_code}' "$base$1" -H 'Content-Type: application/json' -d "$2"; }
check [ "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0}')" = 200 ]
check [ "$(json 'd["choices"][0]["message"]["content"]')" == "$want" ]
check serve_stop
"$bin" serve "$m" --kv q4 --port 0 2>"$serve_tmp/err"
check [ $? = 2 ]
check grep -q "q4" "$serve_tmp/err"
exit $fail
