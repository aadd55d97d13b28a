#!/bin/bash
# `cortiq bench quant --model`: real weight matrices (layer 0 attention q/o, MLP gate/down) from a
# GGUF file and from the CMF converted from it, one table row per (matrix, dtype). Needs the
# cached SmolLM2 GGUF (fetched by scripts/fetch-models when absent).
set -u
bin=${CORTIQ_BIN:?}
. "${CORTIQ_SOURCE_DIR:?}/tests/common/smollm2.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
args=(bench quant --rows 32 --cols 256 --mb 2 --bw-mb 16 --reps 1 --dtypes q4_tiled,q8_row)
out=$("$bin" "${args[@]}" --model "$gguf" 2>&1) || { echo "bench on the GGUF failed: $out"; fail=1; }
n=$(grep -c '^| smollm2-135m-instruct-q4_1.gguf blk\.0\.\(attn_q\|attn_output\|ffn_gate\|ffn_down\)\.weight |' <<<"$out")
[ "$n" -eq 8 ] || { echo "expected 8 real-matrix rows from the GGUF, got $n:"; echo "$out"; fail=1; }
grep -q '^| smollm2[^|]*blk.0.attn_q.weight | q4_tiled | 4.500 |' <<<"$out" || { echo "q4_tiled must cost 4.500 bits/weight"; fail=1; }
# q8_row of a real matrix: relative RMSE around 1e-2, certainly below 0.03
bad=$(awk -F'|' '/blk\.0\..* q8_row / { if ($5 + 0 <= 0 || $5 + 0 > 0.03) print }' <<<"$out")
[ -z "$bad" ] || { echo "q8_row relative RMSE out of range: $bad"; fail=1; }
"$bin" import-gguf "$gguf" --quant q8 -o "$tmp/s.cmf" >/dev/null 2>&1 || { echo "import-gguf failed"; exit 1; }
out=$("$bin" "${args[@]}" --model "$tmp/s.cmf" 2>&1) || { echo "bench on the CMF failed: $out"; fail=1; }
n=$(grep -c '^| s.cmf model\.layers\.0\.\(self_attn\.q_proj\|self_attn\.o_proj\|mlp\.gate_proj\|mlp\.down_proj\)\.weight |' <<<"$out")
[ "$n" -eq 8 ] || { echo "expected 8 real-matrix rows from the CMF, got $n:"; echo "$out"; fail=1; }
exit $fail
