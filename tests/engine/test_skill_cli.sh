#!/usr/bin/env bash
# Skills (spec §9, §9.1) on the tiny specialists of tests/fixtures/skills (a backbone and three
# real fine-tunes of its layers 2-3 on code, numbers and prose; tools/make_skill_fixture.py):
# `skill add` appends in place without touching earlier bytes and measures an honest quality
# gain; routing picks the right skill on >= 95 % of each domain's held-out prompts; --skill ID
# computes exactly what the specialist does; export / apply round-trips to the specialist's
# bytes, keyed to the base; rm + compact; the refusals (unknown id, SKILL_FILE, wrong base).
set -euo pipefail
bin=$CORTIQ_BIN
fx="$CORTIQ_SOURCE_DIR/tests/fixtures/skills"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$bin" convert --model "$fx/base" --quant f16 --output "$tmp/base.cmf" -q
"$bin" convert --model "$fx/code" --quant f16 --output "$tmp/code.cmf" -q
cp "$tmp/base.cmf" "$tmp/multi.cmf"

# append-only: every byte after the 128-byte envelope stays as it was, skill after skill
for d in code numbers prose; do
    cp "$tmp/multi.cmf" "$tmp/before.cmf"
    "$bin" skill add "$tmp/multi.cmf" --id "$d" --from "$fx/$d" --calib "$fx/${d}_calib.txt" \
        --heldout "$fx/${d}_heldout.txt" -t 2 >"$tmp/add_$d.out"
    n=$(stat -c %s "$tmp/before.cmf")
    [ "$(stat -c %s "$tmp/multi.cmf")" -gt "$n" ] || bad "$d: the file did not grow"
    cmp -s <(tail -c +129 "$tmp/before.cmf") <(head -c "$n" "$tmp/multi.cmf" | tail -c +129) ||
        bad "$d: bytes before the append changed"
done
"$bin" verify "$tmp/multi.cmf" >/dev/null || bad "verify after the appends"
grep -q "18 tensor(s) of 39 compared differ" "$tmp/add_code.out" || bad "code: $(cat "$tmp/add_code.out")"

# a .cmf donor and --layers: only layer 3's 9 tensors, no selection (not routable)
cp "$tmp/base.cmf" "$tmp/one.cmf"
"$bin" skill add "$tmp/one.cmf" --id late --from "$tmp/code.cmf" --layers 3 >"$tmp/add_late.out"
grep -q "9 tensor(s) of 9 compared differ" "$tmp/add_late.out" || bad "late: $(cat "$tmp/add_late.out")"
[ "$("$bin" tensors "$tmp/one.cmf" --prefix skill.late.model.layers.3. | grep -c '^skill')" == 9 ] ||
    bad "late: not layer 3's tensors"
if "$bin" skill route "$tmp/one.cmf" --prompt "x = 1" 2>/dev/null; then bad "routed without selection"; fi
if "$bin" skill add "$tmp/one.cmf" --id late --from "$tmp/code.cmf" 2>/dev/null; then
    bad "a second skill 'late' accepted"; fi

# quality: the record holds the measurement, and each specialist beats the backbone on its domain
"$bin" skill list "$tmp/multi.cmf" --json >"$tmp/list.json"
python3 - "$tmp/list.json" <<'PY' || fail=1
import json, sys
skills = json.load(open(sys.argv[1]))["skills"]
ok = [s["id"] for s in skills] == ["code", "numbers", "prose"]
for s in skills:
    q = s["quality"]
    if not (s["routable"] and s["layers"] == [2, 3] and q and q["metric"] == "ppl"
            and q["overlaid"] < q["backbone"] and len(q["dataset_sha256"]) == 64):
        print("record", s); ok = False
sys.exit(0 if ok else 1)
PY

# routing: >= 95 % of each domain's held-out prompts go to that domain's skill
for d in code numbers prose; do
    "$bin" skill route "$tmp/multi.cmf" --prompts "$fx/${d}_heldout.txt" -t 2 >"$tmp/route_$d"
    total=$(grep -c . "$fx/${d}_heldout.txt")
    won=$(awk -v d="$d" '$1 == d' "$tmp/route_$d" | wc -l)
    [ $((won * 100)) -ge $((total * 95)) ] || bad "routing $d: $won of $total"
done

# --skill code reads skill.code.* in place of the backbone: the specialist's logits exactly
ids=1,40,50,60,70,80,90,100
"$bin" logits "$tmp/multi.cmf" --ids $ids --skill code --exact -o "$tmp/sk.npy" --top 0
"$bin" logits "$tmp/code.cmf" --ids $ids --exact -o "$tmp/spec.npy" --top 0
"$bin" logits "$tmp/multi.cmf" --ids $ids --skill none --exact -o "$tmp/none.npy" --top 0
"$bin" logits "$tmp/base.cmf" --ids $ids --exact -o "$tmp/base.npy" --top 0
cmp -s "$tmp/sk.npy" "$tmp/spec.npy" || bad "--skill code differs from the specialist"
cmp -s "$tmp/none.npy" "$tmp/base.npy" || bad "--skill none differs from the backbone"
cmp -s "$tmp/sk.npy" "$tmp/base.npy" && bad "--skill code computes the backbone"
# auto routes a code prompt to code
"$bin" run "$tmp/multi.cmf" --raw --prompt "for x in range(3): y = add(y, x)" --skill auto \
    --greedy --max-tokens 2 >/dev/null 2>"$tmp/auto.err" || bad "run --skill auto"
grep -q "routed to skill 'code'" "$tmp/auto.err" || bad "auto: $(cat "$tmp/auto.err")"
# a blend with a near-zero temperature is the winner alone; a hot one is none of the skills
"$bin" logits "$tmp/multi.cmf" --ids $ids --skill-blend 1e-9 --exact -o "$tmp/b0.npy" --top 0 2>/dev/null
"$bin" logits "$tmp/multi.cmf" --ids $ids --skill auto --exact -o "$tmp/a0.npy" --top 0 2>/dev/null
"$bin" logits "$tmp/multi.cmf" --ids $ids --skill-blend 100 --exact -o "$tmp/b1.npy" --top 0 2>"$tmp/b1.err"
python3 - "$tmp/b0.npy" "$tmp/a0.npy" "$tmp/b1.npy" <<'PY' || fail=1
import struct, sys
def load(p):
    b = open(p, "rb").read(); n = b[8] | b[9] << 8; d = b[10 + n:]
    return struct.unpack("<%df" % (len(d) // 4), d)
b0, a0, b1 = (load(p) for p in sys.argv[1:])
d0 = max(abs(x - y) for x, y in zip(b0, a0)); d1 = max(abs(x - y) for x, y in zip(b1, a0))
print("blend T->0 vs winner %.3g, T=100 vs winner %.3g" % (d0, d1))
sys.exit(0 if d0 < 1e-4 and d1 > 1e-3 else 1)
PY

# refusals: an unknown id names the ids
if "$bin" logits "$tmp/multi.cmf" --ids $ids --skill sql 2>"$tmp/err"; then bad "unknown id accepted"; fi
grep -q "skill 'sql' is not in this file (skills: code, numbers, prose)" "$tmp/err" || bad "$(cat "$tmp/err")"

# export / apply: a SKILL_FILE keyed to the base; applied = the specialist, tensor for tensor
"$bin" skill export "$tmp/multi.cmf" --id code --base "$tmp/base.cmf" -o "$tmp/code.skill.cmf" >/dev/null
"$bin" info "$tmp/code.skill.cmf" | grep -q "SKILL_FILE" || bad "export: no SKILL_FILE bit"
if "$bin" run "$tmp/code.skill.cmf" --prompt hi 2>"$tmp/err"; then bad "a SKILL_FILE ran"; fi
grep -q "cortiq skill apply" "$tmp/err" || bad "SKILL_FILE refusal: $(cat "$tmp/err")"
"$bin" skill apply "$tmp/base.cmf" "$tmp/code.skill.cmf" -o "$tmp/applied.cmf" >/dev/null
cmp -s <("$bin" tensors "$tmp/applied.cmf") <("$bin" tensors "$tmp/code.cmf") ||
    bad "applied tensors differ from the specialist's"
if "$bin" skill apply "$tmp/code.cmf" "$tmp/code.skill.cmf" -o "$tmp/x.cmf" 2>"$tmp/err"; then
    bad "apply accepted a base with another directory hash"; fi
grep -q "was cut against" "$tmp/err" || bad "wrong base: $(cat "$tmp/err")"
"$bin" skill apply "$tmp/code.cmf" "$tmp/code.skill.cmf" -o "$tmp/x.cmf" --force >/dev/null 2>&1 ||
    bad "--force refused"
# a specialist cut against the base directly gives the same skill file tensors
"$bin" skill export "$tmp/code.cmf" --id code --base "$tmp/base.cmf" -o "$tmp/cut.skill.cmf" >/dev/null
cmp -s <("$bin" tensors "$tmp/cut.skill.cmf") <("$bin" tensors "$tmp/code.skill.cmf") ||
    bad "export from the specialist differs from export from the skill"

# rm, then compact: prose gone, the file tight, code unchanged
"$bin" skill rm "$tmp/multi.cmf" prose >/dev/null
"$bin" skill list "$tmp/multi.cmf" | grep -q '^prose' && bad "rm: prose still listed"
"$bin" tensors "$tmp/multi.cmf" --prefix skill.prose. | grep -q 'skill\.prose\.' && bad "rm: tensors left"
"$bin" compact "$tmp/multi.cmf" -o "$tmp/tight.cmf"
[ "$(stat -c %s "$tmp/tight.cmf")" -lt "$(stat -c %s "$tmp/multi.cmf")" ] || bad "compact did not shrink"
"$bin" logits "$tmp/tight.cmf" --ids $ids --skill code --exact -o "$tmp/tight.npy" --top 0
cmp -s "$tmp/tight.npy" "$tmp/spec.npy" || bad "compacted --skill code differs"
exit $fail
