#!/usr/bin/env bash
# Task masks against the other implementation (shared/tools/ref-oracle `cmfeng gen --task`): on
# the tiny llama fixture at f32, masks derived by `cortiq mask derive` (FFN only; FFN and heads)
# give the same greedy tokens in both engines, and the dense run too. Skipped (77) without the
# oracle. Not compared: head masks on models with q/k/v biases (qwen2) - cmfeng's head-masked
# attention drops the biases (docs/MASKS_SKILLS.md).
set -euo pipefail
bin=$CORTIQ_BIN
oracle=${CORTIQ_REF_ORACLE:-$CORTIQ_SOURCE_DIR/../shared/tools/ref-oracle/bin}
[ -x "$oracle/cmfeng" ] || { echo "SKIP: no cmfeng in $oracle (set CORTIQ_REF_ORACLE)"; exit 77; }
fx="$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/llama"
text="$CORTIQ_SOURCE_DIR/tests/fixtures/real/ppl_text.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" convert --model "$fx" --quant f32 --output "$tmp/m.cmf" -q
head -c 1000 "$text" >"$tmp/calib.txt"
tail -c +1001 "$text" >"$tmp/held.txt"
derive() { "$bin" mask derive "$tmp/m.cmf" --calib "$tmp/calib.txt" --heldout "$tmp/held.txt" \
    --ctx 64 "$@" >/dev/null; }
derive --keep 0.25 --name ffn --default # cmfeng needs a default_task in the meta
derive --keep 0.5 --heads 0.5 --name ffn_heads
for prompt in "Hello world" "The quick brown fox"; do
    "$bin" tokenize "$tmp/m.cmf" "$prompt" >"$tmp/tok"
    ids=$(head -1 "$tmp/tok" | tr ' ' ',')
    for task in ffn ffn_heads none; do
        ours=$("$bin" logits "$tmp/m.cmf" --ids "$ids" --greedy 12 --exact --top 0 --task "$task" \
            2>/dev/null | sed -n 's/^greedy: //p')
        targ=()
        [ "$task" == none ] || targ=(--task "$task")
        # (to a file: cmfeng panics on a closed pipe)
        "$oracle/cmfeng" gen "$tmp/m.cmf" --prompt "$prompt" --n 12 "${targ[@]}" >"$tmp/gen" 2>/dev/null
        theirs=$(head -1 "$tmp/gen")
        if [ "$ours" != "$theirs" ]; then
            echo "FAIL: '$prompt' --task $task: cortiq [$ours] cmfeng [$theirs]"
            fail=1
        fi
    done
done
exit $fail
