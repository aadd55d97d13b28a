#!/usr/bin/env bash
# `cortiq run FILE --task NAME` with the expert mask `cortiq moe-mask` wrote is token-identical to
# the equivalent runtime restriction (`--moe-mask S --moe-cover C`), and to the file moe-defrag
# cuts at the same cover (spec §5: "verified token-identical to the equivalent runtime
# restriction"), on the tiny qwen3_moe and qwen2_moe checkpoints at f32. Needs `run --task`.
set -uo pipefail
bin=${CORTIQ_BIN:?}
tiny=${CORTIQ_SOURCE_DIR:?}/tests/fixtures/tiny
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..8} > "$tmp/t.txt"
args=(--raw --greedy --max-tokens 24 --prompt "The quick brown fox")
for fam in qwen3_moe qwen2_moe; do
  "$bin" convert --model "$tiny/$fam" --quant f32 --output "$tmp/$fam.cmf" -q || { bad "$fam: convert"; continue; }
  "$bin" ppl "$tmp/$fam.cmf" "$tmp/t.txt" --ctx 32 --route-stats "$tmp/$fam.json" >/dev/null 2>&1 || bad "$fam: ppl --route-stats"
  "$bin" moe-mask "$tmp/$fam.cmf" --stats "$tmp/$fam.json" --cover 0.7 --name code -o "$tmp/${fam}_m.cmf" >/dev/null 2>&1 ||
    bad "$fam: moe-mask"
  "$bin" moe-defrag "$tmp/$fam.cmf" --stats "$tmp/$fam.json" --cover 0.7 -o "$tmp/${fam}_cut.cmf" >/dev/null 2>&1 ||
    bad "$fam: moe-defrag"
  "$bin" run "$tmp/${fam}_m.cmf" "${args[@]}" --task code >"$tmp/task.txt" 2>"$tmp/err" || bad "$fam: run --task code: $(cat "$tmp/err")"
  "$bin" run "$tmp/$fam.cmf" "${args[@]}" --moe-mask "$tmp/$fam.json" --moe-cover 0.7 >"$tmp/rt.txt" 2>/dev/null ||
    bad "$fam: run --moe-mask"
  "$bin" run "$tmp/${fam}_cut.cmf" "${args[@]}" >"$tmp/cut.txt" 2>/dev/null || bad "$fam: run on the cut file"
  "$bin" run "$tmp/$fam.cmf" "${args[@]}" >"$tmp/full.txt" 2>/dev/null || bad "$fam: run"
  cmp -s "$tmp/task.txt" "$tmp/rt.txt" || bad "$fam: --task code and --moe-mask answer differently"
  cmp -s "$tmp/rt.txt" "$tmp/cut.txt" || bad "$fam: --moe-mask and the defragged file answer differently"
  [ -s "$tmp/rt.txt" ] || bad "$fam: empty answer"
done
exit $fail
