#!/usr/bin/env bash
# `cortiq logits`: the logits of ids fed directly, against transformers' own (the tiny llama
# fixture: every position within 1e-4 with --exact, the 32 greedy tokens identical), the .npy
# shapes, the last position agreeing with --all's last row, and every refusal with its exit code.
set -euo pipefail
bin=$CORTIQ_BIN
fx="$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/llama"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert --model "$fx" --quant f32 --output "$tmp/m.cmf" -q
fail=0
# the fixture's 64 token ids and 32 greedy continuations as comma lists (python3: stdlib only)
npy_ids() { python3 -c '
import struct, sys
b = open(sys.argv[1], "rb").read(); n = b[8] | b[9] << 8; d = b[10 + n:]
print(",".join(str(v) for v in struct.unpack("<%di" % (len(d) // 4), d)))' "$1"; }
ids=$(npy_ids "$fx/tokens.npy")
want=$(npy_ids "$fx/greedy.npy" | tr ',' ' ')
"$bin" logits "$tmp/m.cmf" --ids "$ids" --all --exact -o "$tmp/all.npy" --top 3 >"$tmp/out"
"$bin" logits "$tmp/m.cmf" --ids "$ids" --exact -o "$tmp/last.npy" --top 0
first8=$(echo "$ids" | cut -d, -f1-8) # transformers' greedy continues the first 8 ids
"$bin" logits "$tmp/m.cmf" --ids "$first8" --exact --greedy 32 --top 0 >"$tmp/greedy"
grep -qE '^position 63 top 3: [0-9]+:' "$tmp/out" || { echo "no top line:"; cat "$tmp/out"; fail=1; }
[ "$(sed -n 's/^greedy: //p' "$tmp/greedy")" == "$want" ] || { echo "greedy differs from transformers: $(cat "$tmp/greedy") vs $want"; fail=1; }
python3 - "$tmp/all.npy" "$tmp/last.npy" "$fx/logits.npy" <<'PY' || fail=1
import struct, sys
def load(p):
    b = open(p, "rb").read(); n = b[8] | b[9] << 8
    hdr = b[10:10 + n].decode(); d = b[10 + n:]
    return hdr, struct.unpack("<%df" % (len(d) // 4), d)
(ha, a), (hl, l), (_, ref) = (load(p) for p in sys.argv[1:4])
ok = True
if "'shape': (64, 320)" not in ha or "'shape': (320,)" not in hl:
    print("shapes:", ha, hl); ok = False
rel = max(abs(x - y) for x, y in zip(a, ref)) / max(abs(y) for y in ref)
if len(a) != len(ref) or rel > 1e-4:
    print("logits vs transformers: rel %.3g" % rel); ok = False
if list(a[-320:]) != list(l):
    print("last position differs from --all's last row"); ok = False
sys.exit(0 if ok else 1)
PY
set +e
expect() { # expected exit code, then the command line
  local want=$1; shift
  "$bin" logits "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  [ $rc -eq "$want" ] || { echo "logits $*: exit $rc, want $want"; cat "$tmp/err"; fail=1; }
}
expect 2 "$tmp/m.cmf"
expect 2 "$tmp/m.cmf" --ids "1,,2"
expect 2 "$tmp/m.cmf" --ids "1,2,"
expect 2 "$tmp/m.cmf" --ids "-1"
expect 2 "$tmp/m.cmf" --ids abc
expect 2 "$tmp/m.cmf" --ids 1 --greedy x
expect 2 "$tmp/m.cmf" --ids 1 --exact --kv q8
expect 2 "$tmp/m.cmf" --ids 1 --bogus
expect 2 "$tmp/m.cmf" --ids 999999        # outside the vocabulary
expect 1 "$tmp/m.cmf" --ids 1 --task general
expect 3 "$tmp/missing.cmf" --ids 1
expect 3 "$tmp/m.cmf" --ids 1 -o "$tmp/no/such/dir/x.npy"
ls "$tmp/no" >/dev/null 2>&1 && { echo "a partial output was left"; fail=1; }
"$bin" logits "$tmp/m.cmf" --ids 1 --task none --skill none --top 1 >/dev/null || { echo "--task none failed"; fail=1; }
exit $fail
