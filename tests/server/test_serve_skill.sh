#!/usr/bin/env bash
# Per-request skills (spec §9) through the server on the tiny specialists of
# tests/fixtures/skills, with the real `openai` client (skipped when the package is absent): a
# request's "skill" answers exactly as `cortiq run --skill` (greedy, chat and completions), auto
# picks what `cortiq skill route` picks, concurrent requests on different skills each get their own
# answer while 2 skill instances serve 3 skills (loads and unloads), clients that go away
# mid-answer leave nothing behind, unknown ids are 400s;
# --skill sets the default; a file without skills refuses every id but none.
set -uo pipefail
python3 -c "import openai" 2>/dev/null || { echo "SKIP: the openai Python package is not installed"; exit 77; }
. "${CORTIQ_SOURCE_DIR:?}/tests/server/serve_lib.sh"
fx="$CORTIQ_SOURCE_DIR/tests/fixtures/skills"
m="$serve_tmp/multi.cmf"
"$bin" convert --model "$fx/base" --quant f16 --output "$serve_tmp/base.cmf" -q || exit 1
cp "$serve_tmp/base.cmf" "$m"
for d in code numbers prose; do
    "$bin" skill add "$m" --id "$d" --from "$fx/$d" --calib "$fx/${d}_calib.txt" -t 2 >/dev/null ||
        { echo "skill add $d failed"; exit 1; }
done
fail=0
check() { "$@" || { echo "FAIL: $*"; fail=1; }; }
mt=12
prompts=("def add(a, b):" "418 - 651 = -233; 564 *" "The gentle harbor watched the")
printf '%s\n' "${prompts[@]}" >"$serve_tmp/prompts.txt"
"$bin" skill route "$m" --prompts "$serve_tmp/prompts.txt" --json >"$serve_tmp/route.jsonl" || exit 1
run() { "$bin" run "$m" --max-tokens $mt --greedy --ctx 256 "$@" 2>/dev/null; }
{ # WANT.json for skill_check.py: the answers of `cortiq run` and the router's winners
    echo "{\"max_tokens\": $mt, \"skills\": [\"code\", \"numbers\", \"prose\"], \"completions\": {"
    sep=""
    for p in "${prompts[@]}"; do
        printf '%s%s: {' "$sep" "$(python3 -S -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$p")"
        s2=""
        for s in none code numbers prose; do
            printf '%s"%s": %s' "$s2" "$s" "$(run --raw --prompt "$p" --skill "$s" | python3 -S -c 'import json,sys; print(json.dumps(sys.stdin.read()[:-1]))')"
            s2=", "
        done
        printf '}'
        sep=", "
    done
    p=${prompts[0]}
    printf '}, "chat": {"%s": {' "$p"
    printf '"none": %s, ' "$(run --prompt "$p" --skill none | python3 -S -c 'import json,sys; print(json.dumps(sys.stdin.read()[:-1]))')"
    printf '"numbers": %s}}, "route": {' "$(run --prompt "$p" --skill numbers | python3 -S -c 'import json,sys; print(json.dumps(sys.stdin.read()[:-1]))')"
    i=0
    while read -r line; do
        printf '%s%s: %s' "$([ $i -gt 0 ] && echo ', ')" \
            "$(python3 -S -c 'import json,sys; print(json.dumps(sys.argv[1]))' "${prompts[$i]}")" \
            "$(python3 -S -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])["winner"]))' "$line")"
        i=$((i + 1))
    done <"$serve_tmp/route.jsonl"
    echo "}}"
} >"$serve_tmp/want.json"
python3 -S -c 'import json,sys; json.load(open(sys.argv[1]))' "$serve_tmp/want.json" ||
    { echo "bad want.json:"; cat "$serve_tmp/want.json"; exit 1; }

serve_start "$m" --ctx 256 --parallel 4 --max-skill-models 2 -t 2 || exit 1
check python3 "$CORTIQ_SOURCE_DIR/tests/server/skill_check.py" "$base" "$serve_tmp/want.json"
# 3 skills through 2 instances: some were unloaded and loaded again, never more than 2 at once
curl -s "$base/metrics" >"$serve_tmp/metrics"
metric() { sed -n "s/^$1 //p" "$serve_tmp/metrics"; }
check [ "$(metric cortiq_skill_instances)" -le 2 ]
check [ "$(metric cortiq_skill_unloads_total)" -ge 1 ]
check [ "$(metric cortiq_skill_loads_total)" -ge 4 ]
# clients that go away mid-answer on different skills free their slots and instances (the ASan
# build's clean exit checks nothing leaks), and the next answers are still right
gone=()
for s in code numbers prose code none prose; do
    curl -s -N -m 0.05 "$base/v1/completions" -o /dev/null \
        -d "{\"prompt\":\"def add(a, b):\",\"max_tokens\":240,\"stream\":true,\"skill\":\"$s\"}" &
    gone+=($!)
done
wait "${gone[@]}"
check python3 "$CORTIQ_SOURCE_DIR/tests/server/skill_check.py" "$base" "$serve_tmp/want.json" --quick
serve_stop || { echo "FAIL: the server did not exit cleanly"; fail=1; }

# --skill: the default of a request without "skill"; "none" still reaches the backbone
p=${prompts[0]}
serve_start "$m" --ctx 256 --skill numbers -t 2 || exit 1
ask() { curl -s "$base/v1/completions" -d "{\"prompt\":\"$p\",\"max_tokens\":$mt,\"temperature\":0$1}"; }
field() { python3 -S -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
check [ "$(ask '' | field 'd["choices"][0]["text"]')" == "$(run --raw --prompt "$p" --skill numbers)" ]
check [ "$(ask '' | field 'd["cmf"]["skill"]')" == numbers ]
check [ "$(ask ',"skill":"none"' | field 'd["choices"][0]["text"]')" == "$(run --raw --prompt "$p")" ]
serve_stop || fail=1
if "$bin" serve "$m" --port 0 --skill nope 2>"$serve_tmp/err"; then check false; fi
check grep -q "nope" "$serve_tmp/err"

# a file without skills: any id but none is a 400, and --skill ID does not start
serve_start "$serve_tmp/base.cmf" --ctx 256 -t 2 || exit 1
check [ "$(ask ',"skill":"none"' | field 'd["cmf"]["skill"]')" == none ]
for s in code auto; do
    check [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/v1/completions" -d "{\"prompt\":\"x\",\"skill\":\"$s\"}")" == 400 ]
done
check [ "$(ask ',"skill":"code"' | field 'd["error"]["param"]')" == skill ]
serve_stop || fail=1
if "$bin" serve "$serve_tmp/base.cmf" --port 0 --skill code 2>/dev/null; then check false; fi
exit $fail
