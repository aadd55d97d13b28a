#!/usr/bin/env bash
# Per-request CMF task masks through the server: on the tiny llama with a derived mask, a
# request's "task" answers exactly as `cortiq run --task` (greedy and seeded), no task runs the
# file's default (here dense) and "none" runs dense, switching a single slot between tasks back
# and forth changes nothing, two slots on different tasks decode together (the masked one alone,
# the dense one in the batch), and an unknown task is a 400 naming it and listing the file's.
set -uo pipefail
. "${CORTIQ_SOURCE_DIR:?}/tests/server/serve_lib.sh"
m="$serve_tmp/m.cmf"
text="$CORTIQ_SOURCE_DIR/tests/fixtures/real/ppl_text.txt"
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/llama" --quant f32 --output "$m" -q || exit 1
head -c 1000 "$text" >"$serve_tmp/calib.txt"
tail -c +1001 "$text" | head -c 2000 >"$serve_tmp/held.txt"
"$bin" mask derive "$m" --calib "$serve_tmp/calib.txt" --heldout "$serve_tmp/held.txt" --keep 0.5 \
    --heads 0.5 --name half --ctx 64 >/dev/null 2>&1 || { echo "mask derive failed"; exit 1; }
fail=0
check() { "$@" || { echo "FAIL: $*"; fail=1; }; }
run() { "$bin" run "$m" --prompt "Tell me a story" --max-tokens 12 --ctx 256 "$@" 2>/dev/null; }
ask() { # ask EXTRA_JSON -> the answer's content (or the error body)
    curl -s "$base/v1/chat/completions" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story\"}],\"max_tokens\":12$1}" |
        python3 -S -c 'import json,sys; d=json.load(sys.stdin); print(d["choices"][0]["message"]["content"] if "choices" in d else json.dumps(d))'
}
dense=$(run --greedy)
half=$(run --greedy --task half)
half_s=$(run --temp 0.9 --seed 42 --task half)
check [ "$dense" != "$half" ] # the mask changes the answer, so the comparisons below mean something

serve_start "$m" --ctx 256 --parallel 1 || exit 1
for round in 1 2; do # one slot: every request switches its task
    check [ "$(ask ',"temperature":0,"task":"half"')" == "$half" ]
    check [ "$(ask ',"temperature":0')" == "$dense" ]
    check [ "$(ask ',"temperature":0.9,"seed":42,"task":"half"')" == "$half_s" ]
    check [ "$(ask ',"temperature":0,"task":"none"')" == "$dense" ]
done
err=$(ask ',"task":"nope"')
check python3 -S -c 'import json,sys; e=json.loads(sys.argv[1])["error"]; sys.exit(0 if e["param"]=="task" and "nope" in e["message"] and "half" in e["message"] else 1)' "$err"
serve_stop || fail=1

serve_start "$m" --ctx 256 --parallel 2 || exit 1 # two slots decoding at once on different tasks
ask ',"temperature":0,"task":"half"' >"$serve_tmp/a" &
pa=$!
ask ',"temperature":0' >"$serve_tmp/b" &
pb=$!
ask ',"temperature":0,"task":"half"' >"$serve_tmp/c" &
wait $pa $! $pb # not the server's pid
check [ "$(cat "$serve_tmp/a")" == "$half" ]
check [ "$(cat "$serve_tmp/b")" == "$dense" ]
check [ "$(cat "$serve_tmp/c")" == "$half" ]
serve_stop || fail=1
exit $fail
