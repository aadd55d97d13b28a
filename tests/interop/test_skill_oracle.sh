#!/usr/bin/env bash
# Skills across the two CMF implementations (shared/tools/ref-oracle): a file we grew with
# `cortiq skill add` and a standalone skill we exported pass `cmfref verify`; the oracle's
# runtime computes the same logits and greedy tokens for --skill ID and routes --skill auto to the skill we do;
# a file grown by `cortiq-ref skill add` runs here with the oracle's logits and routing; a skill
# file exported by either implementation is applied by the other to the specialist's tensors.
set -euo pipefail
bin=$CORTIQ_BIN
ref=${CORTIQ_REF_ORACLE:-$CORTIQ_SOURCE_DIR/../shared/tools/ref-oracle/bin}
[ -x "$ref/cmfeng" ] || { echo "SKIP: the reference oracle is absent ($ref); set CORTIQ_REF_ORACLE"; exit 77; }
fx="$CORTIQ_SOURCE_DIR/tests/fixtures/skills"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
export CMF_THREADS=2
"$bin" convert --model "$fx/base" --quant f16 --output "$tmp/base.cmf" -q
cp "$tmp/base.cmf" "$tmp/ours.cmf"
cp "$tmp/base.cmf" "$tmp/theirs.cmf"
for d in code numbers; do
    "$bin" skill add "$tmp/ours.cmf" --id "$d" --from "$fx/$d" --calib "$fx/${d}_calib.txt" -t 2 >/dev/null
    "$ref/cortiq-ref" skill add "$tmp/theirs.cmf" --from "$fx/$d" --id "$d" --tensors all \
        --layers 2,3 --prompts "$fx/${d}_calib.txt" --rank 4 >/dev/null 2>&1
done
"$bin" skill export "$tmp/ours.cmf" --id code --base "$tmp/base.cmf" -o "$tmp/code.skill.cmf" >/dev/null
for f in ours.cmf code.skill.cmf; do
    "$ref/cmfref" verify --deep "$tmp/$f" >/dev/null || bad "cmfref verify $f"
done
close() { python3 - "$1" "$2" <<'PY'
import struct, sys
def load(p):
    b = open(p, "rb").read(); n = b[8] | b[9] << 8; d = b[10 + n:]
    return struct.unpack("<%df" % (len(d) // 4), d)
a, b = load(sys.argv[1]), load(sys.argv[2])
d = max(abs(x - y) for x, y in zip(a, b)) / max(abs(y) for y in b)
sys.exit(0 if len(a) == len(b) and d < 1e-4 else 1)
PY
}
ids=1,40,50,60,70,80,90,100
for f in ours theirs; do
    for s in code numbers none; do
        opt=(--skill "$s") # the oracle spells the backbone as no --skill at all
        [ "$s" == none ] && opt=()
        "$ref/cmfeng" logits "$tmp/$f.cmf" --ids $ids "${opt[@]}" --out "$tmp/r.npy" >/dev/null 2>&1 ||
            { bad "cmfeng logits $f --skill $s"; continue; }
        "$bin" logits "$tmp/$f.cmf" --ids $ids --skill $s --exact -o "$tmp/o.npy" --top 0
        close "$tmp/o.npy" "$tmp/r.npy" || bad "$f --skill $s: logits differ from the oracle's"
    done
    # greedy generation with a skill: the oracle's prompt ids, then the same 12 tokens
    "$ref/cmfeng" gen "$tmp/$f.cmf" --prompt "for x in range(5):" --n 12 --skill code \
        --ignore-eos >"$tmp/gen.out" 2>"$tmp/gen.err" || bad "cmfeng gen $f"
    pids=$(sed -n 's/^prompt ids ([0-9]*): \[\([0-9, ]*\)\].*/\1/p' "$tmp/gen.err" | tr -d ' ')
    theirs=$(head -1 "$tmp/gen.out")
    mine=$("$bin" logits "$tmp/$f.cmf" --ids "$pids" --skill code --exact --greedy 12 --top 0 |
        sed -n 's/^greedy: //p')
    [ -n "$pids" ] && [ "$mine" == "$theirs" ] || bad "$f gen --skill code: oracle '$theirs', ours '$mine'"
    # routing: the oracle's choice and ours agree on held-out prompts of both domains
    for d in code numbers; do
        head -2 "$fx/${d}_heldout.txt" | while IFS= read -r p; do
            theirs=$("$ref/cmfeng" gen "$tmp/$f.cmf" --prompt "$p" --n 1 --skill auto 2>&1 |
                sed -n 's/^routed to skill: //p')
            mine=$("$bin" skill route "$tmp/$f.cmf" --prompt "$p" -t 2 | cut -f1)
            [ "$theirs" == "$mine" ] && [ "$mine" == "$d" ] || echo "route $f '$p': oracle $theirs, ours $mine"
        done >>"$tmp/route.err"
    done
done
[ -s "$tmp/route.err" ] && bad "$(cat "$tmp/route.err")"

# standalone skill files both ways: each implementation's export applied by the other gives the
# specialist's tensors (same names, dtypes, shapes, bytes; the oracle orders them by name)
"$bin" convert --model "$fx/code" --quant f16 --output "$tmp/code.cmf" -q
"$ref/cortiq-ref" skill export "$tmp/code.cmf" --base "$tmp/base.cmf" --id code \
    -o "$tmp/ref.skill.cmf" >/dev/null 2>&1 || bad "cortiq-ref skill export"
if "$bin" run "$tmp/ref.skill.cmf" --prompt hi 2>"$tmp/err"; then bad "ran the oracle's skill file"; fi
grep -q "cortiq skill apply" "$tmp/err" || bad "oracle's skill file: $(cat "$tmp/err")"
"$bin" skill apply "$tmp/base.cmf" "$tmp/ref.skill.cmf" -o "$tmp/ours_applied.cmf" >/dev/null
"$ref/cortiq-ref" skill apply "$tmp/base.cmf" "$tmp/code.skill.cmf" -o "$tmp/ref_applied.cmf" \
    >/dev/null 2>&1 || bad "cortiq-ref skill apply of our skill file"
tensor_set() { "$bin" tensors "$1" --json | python3 -c '
import json, sys
for t in sorted(json.load(sys.stdin), key=lambda t: t["name"]):
    print(t["name"], t["dtype"], t["shape"], t["nbytes"], t["hash64"])'; }
want=$(tensor_set "$tmp/code.cmf")
[ "$(tensor_set "$tmp/ours_applied.cmf")" == "$want" ] || bad "our apply of the oracle's skill file"
[ "$(tensor_set "$tmp/ref_applied.cmf")" == "$want" ] || bad "the oracle's apply of our skill file"
exit $fail
