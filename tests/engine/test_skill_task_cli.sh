#!/usr/bin/env bash
# A skill's input_mask_task (spec §9 registry): `skill add --task NAME` records it; with the
# skill active (--skill ID or routed by --skill auto) and no --task, that task runs before the
# file's default_task; an explicit --task wins; no skill: the default_task. On the skills
# fixture's backbone with two derived masks (the default one and the skill's).
set -euo pipefail
bin=$CORTIQ_BIN
fx="$CORTIQ_SOURCE_DIR/tests/fixtures/skills"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
f="$tmp/m.cmf"
"$bin" convert --model "$fx/base" --quant f32 --output "$f" -q
"$bin" mask derive "$f" --calib "$fx/code_calib.txt" --heldout "$fx/code_heldout.txt" \
    --keep 0.5 --name half --ctx 64 >/dev/null
"$bin" mask derive "$f" --calib "$fx/prose_calib.txt" --heldout "$fx/prose_heldout.txt" \
    --keep 0.25 --name quarter --default --ctx 64 >/dev/null

if "$bin" skill add "$f" --id code --from "$fx/code" --task nope 2>"$tmp/err"; then
    bad "--task naming no mask accepted"; fi
grep -q "no such task mask" "$tmp/err" || bad "refusal: $(cat "$tmp/err")"
"$bin" skill add "$f" --id code --from "$fx/code" --task half --calib "$fx/code_calib.txt" \
    --heldout "$fx/code_heldout.txt" -t 2 >/dev/null
"$bin" skill add "$f" --id prose --from "$fx/prose" --calib "$fx/prose_calib.txt" -t 2 >/dev/null
"$bin" skill list "$f" --json >"$tmp/list.json"
python3 - "$tmp/list.json" <<'PY' || bad "skill list: $(cat "$tmp/list.json")"
import json, sys
s = {r["id"]: r for r in json.load(open(sys.argv[1]))["skills"]}
sys.exit(0 if s["code"]["input_mask_task"] == "half" and s["prose"]["input_mask_task"] is None
         and s["code"]["quality"]["metric"] == "ppl" else 1)
PY

ids=$(python3 -c "print(','.join(str(5 + 7 * i % 200) for i in range(12)))")
lg() { "$bin" logits "$f" --ids "$ids" --exact -t 2 --top 5 "$@" 2>"$tmp/lg.err"; }
task_of() { sed -n "s/^cortiq logits: task '\([^']*\)'.*/\1/p" "$tmp/lg.err"; }
lg --skill code >"$tmp/skill"
[ "$(task_of)" == half ] || bad "--skill code ran task '$(task_of)', not its own 'half'"
lg --skill code --task half >"$tmp/skill_half"
cmp -s "$tmp/skill" "$tmp/skill_half" || bad "--skill code differs from --skill code --task half"
lg --skill code --task quarter >"$tmp/skill_quarter"
[ "$(task_of)" == quarter ] || bad "explicit --task lost to the skill's"
cmp -s "$tmp/skill" "$tmp/skill_quarter" && bad "the skill's task made no difference"
lg --skill code --task none >/dev/null
[ -z "$(task_of)" ] || bad "--task none ran '$(task_of)'"
lg --skill prose >/dev/null
[ "$(task_of)" == quarter ] || bad "a skill without a task: '$(task_of)', not the default"
lg >/dev/null
[ "$(task_of)" == quarter ] || bad "no skill: '$(task_of)', not the default"
lg --skill-blend 0.1 >/dev/null
[ "$(task_of)" == quarter ] || bad "a blend: '$(task_of)', not the default"
# routed: code ids go to the code skill, which brings its task
code_ids=$("$bin" tokenize "$f" "$(head -1 "$fx/code_heldout.txt")" --json --no-special |
    python3 -c "import json, sys; print(','.join(map(str, json.load(sys.stdin)['ids'])))")
if [ -n "$code_ids" ]; then
    "$bin" logits "$f" --ids "$code_ids" --exact -t 2 --top 1 --skill auto >/dev/null 2>"$tmp/lg.err"
    if grep -q "routed to skill 'code'" "$tmp/lg.err"; then
        [ "$(task_of)" == half ] || bad "routed to code, ran '$(task_of)'"
    else bad "code prompt not routed to code: $(cat "$tmp/lg.err")"; fi
else bad "tokenize --ids gave nothing"; fi
# a skill whose task was removed since fails loudly
"$bin" mask rm "$f" half >/dev/null
if lg --skill code >/dev/null; then bad "a removed skill task ran"; fi
exit $fail
