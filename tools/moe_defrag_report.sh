#!/usr/bin/env bash
# Sizes and held-out perplexity of a MoE file and its moe-defrag cut (docs/MOE.md):
# route statistics from `cortiq ppl --route-stats` over a calibration text, the cut at each
# cover, then the perplexity of a held-out text on the full file, the full file with the
# equivalent runtime restriction (--moe-mask), and the cut file.
# usage: tools/moe_defrag_report.sh MODEL.cmf CALIB.txt HELDOUT.txt [COVER...]   (default 0.95)
set -euo pipefail
bin=${CORTIQ_BIN:-build/src/cortiq}
model=$1 calib=$2 held=$3
shift 3
covers=("${@:-0.95}")
[ ${#covers[@]} -gt 0 ] || covers=(0.95)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ppl() { "$bin" ppl "$@" --ctx 256 2>/dev/null | awk '/^PPL/ {print $3}'; }
"$bin" ppl "$model" "$calib" --ctx 256 --route-stats "$tmp/stats.json" >/dev/null 2>&1
full_ppl=$(ppl "$model" "$held")
printf '%-8s %12s %10s %12s %12s %12s\n' cover bytes experts ppl_full ppl_restrict ppl_cut
printf '%-8s %12s %10s %12s\n' full "$(stat -c %s "$model")" - "$full_ppl"
for c in "${covers[@]}"; do
  "$bin" moe-defrag "$model" --stats "$tmp/stats.json" --cover "$c" -o "$tmp/cut.cmf" >"$tmp/out"
  kept=$(sed -n 's/^moe-defrag: \([0-9]* of [0-9]*\) experts kept.*/\1/p' "$tmp/out" | tr -d ' ')
  printf '%-8s %12s %10s %12s %12s %12s\n' "$c" "$(stat -c %s "$tmp/cut.cmf")" "$kept" "$full_ppl" \
    "$(ppl "$model" "$held" --moe-mask "$tmp/stats.json" --moe-cover "$c")" "$(ppl "$tmp/cut.cmf" "$held")"
done
