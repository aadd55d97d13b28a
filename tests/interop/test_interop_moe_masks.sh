#!/usr/bin/env bash
# moe-mask and moe-defrag files across the two implementations (shared/tools/ref-oracle), on the
# tiny qwen3_moe checkpoint at f32 with route statistics from `cortiq ppl --route-stats`:
#  - ours open in `cmfref verify`; `cmfeng gen --task code` on our masked file, `cmfeng gen` on our
#    defragged file and our `--moe-mask` restriction produce the same greedy tokens; cmfeng's
#    logits of our defragged file are within 1e-4 of ours;
#  - the other implementation's `cortiq-ref moe-defrag` of the same stats gives, here, the logits
#    of our defragged file byte for byte, and its `cortiq-ref moe-mask` file opens here with the
#    same routable experts per layer as ours; and it reads our stats file.
# Skips (77) without the oracle.
set -uo pipefail
bin=${CORTIQ_BIN:?}
src=${CORTIQ_SOURCE_DIR:?}
ref=${CORTIQ_REF_ORACLE:-$src/../shared/tools/ref-oracle/bin}
[ -x "$ref/cmfref" ] || { echo "SKIP: the reference oracle is absent ($ref); set CORTIQ_REF_ORACLE"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$bin" convert --model "$src/tests/fixtures/tiny/qwen3_moe" --quant f32 --output "$tmp/m.cmf" -q || exit 1
printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..8} > "$tmp/t.txt"
"$bin" ppl "$tmp/m.cmf" "$tmp/t.txt" --ctx 32 --route-stats "$tmp/s.json" >/dev/null 2>&1 || bad "ppl --route-stats"
"$bin" moe-mask "$tmp/m.cmf" --stats "$tmp/s.json" --cover 0.7 --name code -o "$tmp/mm.cmf" >/dev/null || bad "moe-mask"
"$bin" moe-defrag "$tmp/m.cmf" --stats "$tmp/s.json" --cover 0.7 -o "$tmp/cut.cmf" >/dev/null || bad "moe-defrag"
for f in mm cut; do
  out=$("$ref/cmfref" verify --deep "$tmp/$f.cmf" 2>&1) || bad "cmfref verify $f.cmf: $out"
done

# greedy tokens: cmfeng gen prints the prompt's ids, then the generated ones
"$ref/cmfeng" gen "$tmp/mm.cmf" --prompt "The quick" --n 12 --task code >"$tmp/g1" 2>"$tmp/g1e" || bad "cmfeng gen --task: $(cat "$tmp/g1e")"
"$ref/cmfeng" gen "$tmp/cut.cmf" --prompt "The quick" --n 12 >"$tmp/g2" 2>"$tmp/g2e" || bad "cmfeng gen cut"
prompt=$(grep -o 'prompt ids ([0-9]*): \[[0-9, ]*\]' "$tmp/g1e" | sed 's/.*\[//; s/\]//; s/ //g')
[ -n "$prompt" ] || bad "no prompt ids from cmfeng: $(cat "$tmp/g1e")"
ref_mask=$(head -1 "$tmp/g1"); ref_cut=$(head -1 "$tmp/g2")
ours=$("$bin" logits "$tmp/m.cmf" --ids "$prompt" --greedy 12 --exact --top 0 --moe-mask "$tmp/s.json" --moe-cover 0.7 | sed 's/^greedy: //')
[ "$ref_mask" = "$ours" ] || bad "cmfeng gen --task code: '$ref_mask', ours --moe-mask: '$ours'"
[ "$ref_cut" = "$ours" ] || bad "cmfeng gen on our cut file: '$ref_cut', ours: '$ours'"
full=$("$bin" logits "$tmp/m.cmf" --ids "$prompt" --greedy 12 --exact --top 0 | sed 's/^greedy: //')
echo "greedy: restricted '$ours', full '$full'"

ids=5,9,13,17,21,25,29,33
"$bin" logits "$tmp/cut.cmf" --ids $ids --exact --top 0 -o "$tmp/ours_cut.npy" >/dev/null || bad "logits cut"
"$ref/cmfeng" logits "$tmp/cut.cmf" --ids $ids --out "$tmp/ref_cut.npy" >/dev/null 2>&1 || bad "cmfeng logits cut"
python3 - "$tmp/ours_cut.npy" "$tmp/ref_cut.npy" <<'PY' || bad "cmfeng logits of our cut file differ"
import struct, sys
def load(p):  # float32 .npy, little-endian
    b = open(p, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0]
    return struct.unpack("<%df" % ((len(b) - 10 - hl) // 4), b[10 + hl:])
a, b = load(sys.argv[1]), load(sys.argv[2])
m = max(abs(x) for x in b)
d = max(abs(x - y) for x, y in zip(a, b)) / m
print("cmfeng vs ours on the defragged file: max rel diff %.3g" % d)
sys.exit(0 if len(a) == len(b) and d <= 1e-4 else 1)
PY

# the other implementation's outputs, here
"$ref/cortiq-ref" moe-defrag "$tmp/m.cmf" --stats "$tmp/s.json" --cover 0.7 --output "$tmp/rcut.cmf" >/dev/null 2>&1 ||
  bad "cortiq-ref moe-defrag (reading our stats)"
"$ref/cortiq-ref" moe-mask "$tmp/m.cmf" --stats "$tmp/s.json" --cover 0.7 --name code --output "$tmp/rmm.cmf" >/dev/null 2>&1 ||
  bad "cortiq-ref moe-mask (reading our stats)"
"$bin" verify "$tmp/rcut.cmf" >/dev/null 2>&1 || bad "cortiq-ref's defragged file does not verify here"
"$bin" logits "$tmp/rcut.cmf" --ids $ids --exact --top 0 -o "$tmp/ours_rcut.npy" >/dev/null || bad "logits on cortiq-ref's cut"
cmp -s "$tmp/ours_rcut.npy" "$tmp/ours_cut.npy" || bad "cortiq-ref's defragged file computes other logits than ours"
table() { "$bin" masks "$1" | awk '/experts_routable/ {on = 1; next} on && NF == 5 {print $1, $5}'; }
t_ref=$(table "$tmp/rmm.cmf"); t_ours=$(table "$tmp/mm.cmf")
[ -n "$t_ours" ] && [ "$t_ref" = "$t_ours" ] || bad "routable experts: cortiq-ref's mask '$t_ref', ours '$t_ours'"
exit $fail
