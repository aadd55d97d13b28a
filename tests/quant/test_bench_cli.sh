#!/bin/bash
# `cortiq bench quant` on tiny matrices: exit codes, one table row per (matrix, dtype), and the
# storage cost column, which is exact for fixed-size dtypes.
set -u
bin=${CORTIQ_BIN:?}
fail=0
out=$("$bin" bench quant --rows 32 --cols 256 --mb 2 --bw-mb 16 --reps 1 --dtypes q4_tiled,q8_row,q4tp \
    --model none 2>&1)
rc=$?
[ $rc -eq 0 ] || { echo "bench quant exited $rc: $out"; fail=1; }
rows=$(grep -c '^| \(Gaussian\|heavy\)' <<<"$out")
[ "$rows" -eq 6 ] || { echo "expected 6 table rows, got $rows:"; echo "$out"; fail=1; }
grep -q '^| Gaussian | q4_tiled | 4.500 |' <<<"$out" || { echo "q4_tiled must cost 4.500 bits/weight"; fail=1; }
grep -q '^| Gaussian | q8_row | 8.062 |' <<<"$out" || { echo "q8_row at 256 cols must cost 8.062 bits/weight"; fail=1; }
# every timing carries the read bandwidth probed around it: f32 / int8 timings, and for the
# 4-bit class on a SIMD tier the timing through the batched-decode copy (15 columns a row)
grep -Eq '^\| Gaussian \| q8_row \|.*\| - \| - \| [0-9.]+ / [0-9.]+ \|$' <<<"$out" || { echo "no nearby bandwidth column (q8_row: no decode copy)"; fail=1; }
if grep -q 'kernel tier scalar' <<<"$out"; then
    grep -Eq '^\| Gaussian \| q4_tiled \|.*\| - \| - \| [0-9.]+ / [0-9.]+ \|$' <<<"$out" || { echo "scalar tier: q4_tiled has no decode copy"; fail=1; }
else
    grep -Eq '^\| Gaussian \| q4_tiled \|.*\| [0-9.]+ \| [0-9]+% \| [0-9.]+ / [0-9.]+ / [0-9.]+ \|$' <<<"$out" || { echo "no decode-copy timing for q4_tiled"; fail=1; }
fi
bad=$(grep '^| \(Gaussian\|heavy\)' <<<"$out" | awk -F'|' 'NF != 17')
[ -z "$bad" ] || { echo "rows without 15 columns: $bad"; fail=1; }
grep -q 'Read bandwidth .*: [0-9.]* GB/s wall, [0-9.]* GB/s cpu' <<<"$out" || { echo "no bandwidth line"; fail=1; }
# anything but `quant` is a model file: a missing one is an I/O error (exit 3)
"$bin" bench no_such_model.cmf >/dev/null 2>&1; [ $? -eq 3 ] || { echo "a missing model file must exit 3"; fail=1; }
# --model FILE that does not exist: I/O error; a file that is no model: parse error
"$bin" bench quant --mb 1 --bw-mb 16 --model no_such_model.cmf >/dev/null 2>&1; [ $? -eq 3 ] || { echo "--model with a missing file must exit 3"; fail=1; }
junk=$(mktemp); printf 'not a model' >"$junk"
"$bin" bench quant --mb 1 --bw-mb 16 --model "$junk" >/dev/null 2>&1; rc=$?; rm -f "$junk"
[ $rc -eq 1 ] || { echo "--model with a non-model file must exit 1, got $rc"; fail=1; }
"$bin" bench >/dev/null 2>&1; [ $? -eq 2 ] || { echo "no argument must exit 2"; fail=1; }
"$bin" bench quant --cols 100 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--cols 100 must exit 2"; fail=1; }
"$bin" bench quant --dtypes q9 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "bad --dtypes must exit 2"; fail=1; }
"$bin" bench --help >/dev/null 2>&1; [ $? -eq 0 ] || { echo "--help must exit 0"; fail=1; }
exit $fail
