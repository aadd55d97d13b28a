#!/usr/bin/env bash
# Route statistics, the runtime expert restriction, moe-mask and moe-defrag from the command line
# (docs/MOE.md), on the tiny qwen3_moe checkpoint at f32:
#  - `ppl --route-stats` writes CMF_MOE_STATS: a key per MoE layer, one count per expert;
#  - `moe-mask` grows a copy append-only (every byte before the old end is unchanged but the
#    envelope) and `moe-defrag` writes a smaller file; both verify;
#  - `logits --moe-mask S --moe-cover C` (and CMF_MOE_MASK / CMF_MOE_MASK_COVER) equals the
#    defragged file's logits byte for byte, and `run` answers with the same text;
#  - bad input (cover outside (0, 1], stats of another model, a layer with no recorded routing,
#    a duplicate mask name) fails with a message naming the file, the value and the rule, and
#    leaves no output file and the input unchanged.
set -uo pipefail
bin=${CORTIQ_BIN:?}
tiny=${CORTIQ_SOURCE_DIR:?}/tests/fixtures/tiny
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$bin" convert --model "$tiny/qwen3_moe" --quant f32 --output "$tmp/m.cmf" -q || { echo "convert failed"; exit 1; }
printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..8} > "$tmp/t.txt"

"$bin" ppl "$tmp/m.cmf" "$tmp/t.txt" --ctx 32 --route-stats "$tmp/s.json" >/dev/null 2>"$tmp/err" ||
  bad "ppl --route-stats: $(cat "$tmp/err")"
python3 - "$tmp/s.json" <<'PY' || bad "route stats format: $(cat "$tmp/s.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert sorted(d) == ["0", "1"], d
assert all(len(v) == 4 and all(isinstance(c, int) and c >= 0 for c in v) for v in d.values()), d
assert sum(d["0"]) == sum(d["1"]) > 0, d
PY

# moe-mask into a copy, in place: append-only
cp "$tmp/m.cmf" "$tmp/ip.cmf"
size=$(stat -c %s "$tmp/m.cmf")
"$bin" moe-mask "$tmp/ip.cmf" --stats "$tmp/s.json" --cover 0.7 --name code >"$tmp/out" 2>&1 ||
  bad "moe-mask in place: $(cat "$tmp/out")"
cmp -s <(head -c "$size" "$tmp/ip.cmf" | tail -c +129) <(tail -c +129 "$tmp/m.cmf") ||
  bad "moe-mask changed bytes before the old end of the file"
"$bin" masks "$tmp/ip.cmf" | grep -q "code" || bad "the mask is not listed"
"$bin" verify "$tmp/ip.cmf" >/dev/null 2>&1 || bad "moe-mask output does not verify"
"$bin" moe-mask "$tmp/m.cmf" --stats "$tmp/s.json" --cover 0.7 --name code -o "$tmp/mm.cmf" >/dev/null 2>&1 ||
  bad "moe-mask -o"
[ "$(stat -c %s "$tmp/m.cmf")" = "$size" ] || bad "moe-mask -o changed its input"
cmp -s "$tmp/ip.cmf" "$tmp/mm.cmf" || bad "moe-mask -o and in place differ"
cp "$tmp/ip.cmf" "$tmp/ip_before.cmf"
"$bin" moe-mask "$tmp/ip.cmf" --stats "$tmp/s.json" --cover 0.5 --name code >"$tmp/out" 2>&1; rc=$?
{ [ $rc -eq 2 ] && grep -q "ip.cmf" "$tmp/out" && grep -q "'code' exists already" "$tmp/out"; } ||
  bad "duplicate mask name: exit $rc: $(cat "$tmp/out")"
cmp -s "$tmp/ip.cmf" "$tmp/ip_before.cmf" || bad "a refused moe-mask changed the file"

# moe-defrag, and the runtime restriction it equals
"$bin" moe-defrag "$tmp/m.cmf" --stats "$tmp/s.json" --cover 0.7 -o "$tmp/cut.cmf" >"$tmp/out" 2>&1 ||
  bad "moe-defrag: $(cat "$tmp/out")"
[ "$(stat -c %s "$tmp/cut.cmf")" -lt "$size" ] || bad "the defragged file is not smaller"
"$bin" verify "$tmp/cut.cmf" >/dev/null 2>&1 || bad "moe-defrag output does not verify"
ids=5,9,13,17,21,25,29,33,37,41,45,49
"$bin" logits "$tmp/m.cmf" --ids $ids --all --exact --top 0 -o "$tmp/full.npy" >/dev/null
"$bin" logits "$tmp/m.cmf" --ids $ids --all --exact --top 0 -o "$tmp/mask.npy" \
  --moe-mask "$tmp/s.json" --moe-cover 0.7 >/dev/null || bad "logits --moe-mask"
"$bin" logits "$tmp/cut.cmf" --ids $ids --all --exact --top 0 -o "$tmp/cut.npy" >/dev/null || bad "logits on the cut file"
CMF_MOE_MASK="$tmp/s.json" CMF_MOE_MASK_COVER=0.7 "$bin" logits "$tmp/m.cmf" --ids $ids --all --exact \
  --top 0 -o "$tmp/env.npy" >/dev/null 2>"$tmp/err" || bad "CMF_MOE_MASK: $(cat "$tmp/err")"
grep -q "CMF_MOE_MASK=" "$tmp/err" || bad "CMF_MOE_MASK is applied without a notice"
cmp -s "$tmp/mask.npy" "$tmp/cut.npy" || bad "logits --moe-mask differ from the defragged file's"
cmp -s "$tmp/env.npy" "$tmp/cut.npy" || bad "CMF_MOE_MASK logits differ from the defragged file's"
cmp -s "$tmp/full.npy" "$tmp/mask.npy" && bad "the restriction changed no logit"
run_args=(--raw --greedy --max-tokens 24 --prompt "The quick brown fox")
"$bin" run "$tmp/m.cmf" "${run_args[@]}" --moe-mask "$tmp/s.json" --moe-cover 0.7 >"$tmp/a.txt" 2>/dev/null || bad "run --moe-mask"
"$bin" run "$tmp/cut.cmf" "${run_args[@]}" >"$tmp/b.txt" 2>/dev/null || bad "run on the cut file"
cmp -s "$tmp/a.txt" "$tmp/b.txt" || bad "run --moe-mask and the defragged file answer differently"
"$bin" run "$tmp/m.cmf" "${run_args[@]}" --route-stats "$tmp/r.json" >/dev/null 2>&1 && [ -s "$tmp/r.json" ] ||
  bad "run --route-stats wrote nothing"

# bad input: exit code, message, no output file
expect() { # expect CODE 'needle|needle' CMD...
  local code=$1 needles=$2; shift 2
  rm -f "$tmp/o.cmf" "$tmp/o.npy"
  "$@" >"$tmp/out" 2>&1; local rc=$?
  [ $rc -eq "$code" ] || bad "$*: exit $rc, want $code: $(cat "$tmp/out")"
  IFS='|' read -ra ns <<<"$needles"
  for n in "${ns[@]}"; do grep -qF -- "$n" "$tmp/out" || bad "$*: no '$n' in: $(cat "$tmp/out")"; done
  [ ! -e "$tmp/o.cmf" ] || bad "$*: left an output file"
}
for c in 0 1.5 -0.2 nan; do
  expect 2 "--cover '$c'" "$bin" moe-defrag "$tmp/m.cmf" --stats "$tmp/s.json" --cover $c -o "$tmp/o.cmf"
  expect 2 "--cover '$c'" "$bin" moe-mask "$tmp/m.cmf" --stats "$tmp/s.json" --cover $c --name x -o "$tmp/o.cmf"
  expect 2 "--moe-cover '$c'" "$bin" logits "$tmp/m.cmf" --ids 1,2 --moe-mask "$tmp/s.json" --moe-cover $c
done
echo '{"0":[1,2,3,4,5,6,7,8],"1":[1,2,3,4,5,6,7,8]}' >"$tmp/s8.json"
echo '{"0":[1,2,3,4]}' >"$tmp/s_missing.json"
echo '{"0":[1,2,3,4],"1":[1,2,3,4],"7":[1,2,3,4]}' >"$tmp/s_range.json"
echo '{"0":[1,2,3,4],"1":[0,0,0,0]}' >"$tmp/s_zero.json"
echo '{"0":[1,2,3,4],"1":[1,2,-3,4]}' >"$tmp/s_neg.json"
echo '[1,2,3]' >"$tmp/s_list.json"
echo '{"0":[1,2,3,4],' >"$tmp/s_junk.json"
for cmd in moe-defrag moe-mask; do
  extra=(-o "$tmp/o.cmf"); [ $cmd = moe-mask ] && extra+=(--name x)
  expect 1 "s8.json|layer 0: 8 counts|4 experts|another model" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/s8.json" "${extra[@]}"
  expect 1 "s_missing.json|no counts for layer 1" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/s_missing.json" "${extra[@]}"
  expect 1 "s_range.json|layer 7|has 2 layers" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/s_range.json" "${extra[@]}"
  expect 1 "s_zero.json|layer 1|every count is 0|keep none" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/s_zero.json" "${extra[@]}"
  expect 1 "s_neg.json|layer 1, expert 2|non-negative integer" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/s_neg.json" "${extra[@]}"
  expect 1 "s_list.json|not CMF_MOE_STATS" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/s_list.json" "${extra[@]}"
  expect 1 "s_junk.json|not JSON" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/s_junk.json" "${extra[@]}"
  expect 3 "absent.json|cannot read" "$bin" $cmd "$tmp/m.cmf" --stats "$tmp/absent.json" "${extra[@]}"
done
expect 1 "s_zero.json|every count is 0" "$bin" logits "$tmp/m.cmf" --ids 1,2 --moe-mask "$tmp/s_zero.json"
expect 1 "s8.json|4 experts" "$bin" ppl "$tmp/m.cmf" "$tmp/t.txt" --moe-mask "$tmp/s8.json"
cp "$tmp/m.cmf" "$tmp/ip2.cmf"
expect 1 "s8.json" "$bin" moe-mask "$tmp/ip2.cmf" --stats "$tmp/s8.json" --name x
cmp -s "$tmp/ip2.cmf" "$tmp/m.cmf" || bad "a refused in-place moe-mask changed the file"
# a dense layer in the stats of a model whose layer 0 is dense
"$bin" convert --model "$tiny/qwen2_moe_mixed" --quant f32 --output "$tmp/mixed.cmf" -q
echo '{"0":[1,2,3,4],"1":[1,2,3,4]}' >"$tmp/s_dense.json"
expect 1 "s_dense.json|layer 0 has counts|no router" "$bin" moe-defrag "$tmp/mixed.cmf" --stats "$tmp/s_dense.json" -o "$tmp/o.cmf"
# a dense model
"$bin" convert --model "$tiny/llama" --quant f32 --output "$tmp/dense.cmf" -q
expect 1 "dense.cmf|not a mixture-of-experts model" "$bin" moe-defrag "$tmp/dense.cmf" --stats "$tmp/s.json" -o "$tmp/o.cmf"
exit $fail
