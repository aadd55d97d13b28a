#!/usr/bin/env bash
# `cortiq defrag` and `cortiq requant` from the command line: a mask given to `convert --masks`
# is baked (smaller file, per-layer shapes, no masks, verifies, runs), requant rewrites in place
# and keeps the masks, usage errors and refusals exit non-zero with a message naming the problem.
set -uo pipefail
bin=${CORTIQ_BIN:?}
src=${CORTIQ_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { "$@" || { echo "FAIL: $*"; fail=1; }; }
has() { grep -q -- "$2" <<<"$1" || { echo "FAIL: '$2' not in: $1"; fail=1; }; }

mkdir "$tmp/masks"
python3 -c "
import json
json.dump({'ffn': [list(range(0, 128, 2)), list(range(40))], 'default': True}, open('$tmp/masks/half.json', 'w'))
" || { echo "python3 missing"; exit 77; }
ok "$bin" convert --model "$src/tests/fixtures/tiny/llama" --quant q4t --masks "$tmp/masks" -o "$tmp/src.cmf" -q
out=$("$bin" defrag "$tmp/src.cmf" --task half -o "$tmp/d.cmf" 2>&1)
ok test $? -eq 0
has "$out" "FFN neurons 256 -> 104"
has "$out" "written as q8_2f" # layer 1 keeps 40: not a multiple of 32
ok "$bin" verify "$tmp/d.cmf" >/dev/null
[ "$(stat -c %s "$tmp/d.cmf")" -lt "$(stat -c %s "$tmp/src.cmf")" ] || { echo "FAIL: not smaller"; fail=1; }
has "$("$bin" tensors "$tmp/d.cmf")" "model.layers.1.mlp.down_proj.weight *q8_2f *\[64, 40\]"
has "$("$bin" masks "$tmp/d.cmf" 2>&1)" "no masks"
ok "$bin" run "$tmp/d.cmf" --prompt hi --max-tokens 2 --greedy >/dev/null 2>&1

# the baked file computes what the runtime's masked execution of the source computes (f32)
ok "$bin" convert --model "$src/tests/fixtures/tiny/llama" --quant f32 --masks "$tmp/masks" -o "$tmp/s32.cmf" -q
ok "$bin" defrag "$tmp/s32.cmf" --task half -o "$tmp/d32.cmf" -q
ids=1,7,3,9,4,2,8,5,6,11,10,12
ok "$bin" logits "$tmp/s32.cmf" --ids $ids --all --exact --top 0 --task half -o "$tmp/masked.npy"
ok "$bin" logits "$tmp/d32.cmf" --ids $ids --all --exact --top 0 -o "$tmp/baked.npy"
ok "$bin" logits "$tmp/s32.cmf" --ids $ids --all --exact --top 0 --task none -o "$tmp/dense.npy"
python3 - "$tmp" <<'PY' || { echo "FAIL: defragged file vs --task on the source"; fail=1; }
import sys
import numpy as np
d = sys.argv[1]
masked, baked, dense = (np.load(f"{d}/{n}.npy") for n in ("masked", "baked", "dense"))
gap = np.abs(masked - baked).max()
print(f"defrag vs --task: max |diff| {gap:.2e}; vs dense {np.abs(dense - baked).max():.2e}")
assert gap < 1e-5 * max(1.0, np.abs(masked).max())
assert np.abs(dense - baked).max() > 1e-3  # the mask does change the result
PY

# requant in place: masks kept, dtype changed, file verifies
ok "$bin" requant "$tmp/src.cmf" --to q8 -q
has "$("$bin" tensors "$tmp/src.cmf")" "model.layers.0.mlp.gate_proj.weight *q8_row"
has "$("$bin" masks "$tmp/src.cmf")" "half (default)"
ok "$bin" verify "$tmp/src.cmf" >/dev/null

# refusals and usage errors
err=$("$bin" requant "$tmp/d.cmf" --to q4tp -o "$tmp/x.cmf" 2>&1)
ok test $? -ne 0
has "$err" "model.layers.1.mlp.down_proj.weight"
[ ! -e "$tmp/x.cmf" ] || { echo "FAIL: refused requant left a file"; fail=1; }
err=$("$bin" defrag "$tmp/src.cmf" --task nope -o "$tmp/x.cmf" 2>&1)
ok test $? -ne 0
has "$err" "no task 'nope' (tasks: half)"
"$bin" defrag "$tmp/src.cmf" -o "$tmp/x.cmf" >/dev/null 2>&1
ok test $? -eq 2
"$bin" requant "$tmp/src.cmf" --to q9 >/dev/null 2>&1
ok test $? -eq 2
exit $fail
