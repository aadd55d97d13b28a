#!/usr/bin/env bash
# Per-request skills (spec §9) through the server on the tiny specialists of
# tests/fixtures/skills, with the real `openai` client (skipped when the package is absent): a
# request's "skill" answers exactly as `cortiq run --skill` (greedy, chat and completions), auto
# picks what `cortiq skill route` picks, concurrent requests on different skills each get their own
# answer while 2 skill instances serve 3 skills (loads and unloads), clients that go away
# mid-answer leave nothing behind, unknown ids are 400s; a skill's input_mask_task runs by default;
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
# WANT.json for skill_check.py: `cortiq run`'s greedy answers and `cortiq skill route`'s winners
python3 - "$bin" "$m" "$mt" "${prompts[@]}" >"$serve_tmp/want.json" <<'PY' || exit 1
import json, subprocess, sys
bin, m, mt, prompts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
skills = ["code", "numbers", "prose"]
def run(prompt, skill, raw):
    out = subprocess.run([bin, "run", m, "--max-tokens", mt, "--greedy", "--ctx", "256", "--prompt",
                          prompt, "--skill", skill] + (["--raw"] if raw else []),
                         capture_output=True, text=True, check=True).stdout
    return out[:-1]  # the newline run ends with
def winner(prompt):
    out = subprocess.run([bin, "skill", "route", m, "--prompt", prompt, "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["winner"]
json.dump({"max_tokens": int(mt), "skills": skills,
           "completions": {p: {s: run(p, s, True) for s in ["none"] + skills} for p in prompts},
           "chat": {prompts[0]: {s: run(prompts[0], s, False) for s in ["none", "numbers"]}},
           "route": {p: winner(p) for p in prompts}}, sys.stdout)
PY

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
run() { "$bin" run "$m" --max-tokens $mt --greedy --ctx 256 "$@" 2>/dev/null; }
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

# a skill's input_mask_task runs when the request names no task, as `cortiq run --skill` does;
# the file's default_task otherwise; cmf.task says which ran (one slot: every request switches)
t="$serve_tmp/tasks.cmf"
"$bin" convert --model "$fx/base" --quant f32 --output "$t" -q || exit 1
"$bin" mask derive "$t" --calib "$fx/code_calib.txt" --heldout "$fx/code_heldout.txt" --keep 0.5 \
    --name half --ctx 64 >/dev/null || exit 1
"$bin" mask derive "$t" --calib "$fx/prose_calib.txt" --heldout "$fx/prose_heldout.txt" \
    --keep 0.25 --name quarter --default --ctx 64 >/dev/null || exit 1
"$bin" skill add "$t" --id code --from "$fx/code" --task half >/dev/null || exit 1
"$bin" skill add "$t" --id prose --from "$fx/prose" >/dev/null || exit 1
serve_start "$t" --ctx 256 --parallel 1 -t 2 || exit 1
for round in 1 2; do
    for req in "code:half:" "prose:quarter:" "none:quarter:" "code:none:none"; do
        IFS=: read -r s want_task task <<<"$req"
        extra=",\"skill\":\"$s\"" && [ -n "$task" ] && extra="$extra,\"task\":\"$task\""
        ask "$extra" >"$serve_tmp/ans"
        check [ "$(field 'd["cmf"]["task"]' <"$serve_tmp/ans")" == "$want_task" ]
        check [ "$(field 'd["choices"][0]["text"]' <"$serve_tmp/ans")" == \
            "$("$bin" run "$t" --max-tokens $mt --greedy --ctx 256 --raw --prompt "$p" --skill "$s" \
                ${task:+--task "$task"} 2>/dev/null)" ]
    done
done
serve_stop || fail=1

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
