#!/usr/bin/env bash
# `cortiq keygen`, `cortiq sign` and the signature check of `cortiq verify` (spec §8.2), on a
# model converted from the tiny llama fixture, unsharded and as a shard set.
set -uo pipefail
bin=$CORTIQ_BIN
src=$CORTIQ_SOURCE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# expect RC CMD...: run, keep output in $tmp/out, compare the exit status
expect() {
  local want=$1; shift
  "$@" >"$tmp/out" 2>&1; local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$* -> $rc"; else bad "$* -> $rc, want $want"; cat "$tmp/out"; fi
}
has() { if grep -q -- "$1" "$tmp/out"; then ok "output has '$1'"; else bad "output lacks '$1'"; cat "$tmp/out"; fi; }

"$bin" convert --model "$src/tests/fixtures/tiny/llama" --quant q8 --output "$tmp/m.cmf" -q || { echo "convert failed"; exit 1; }

# keygen: 0600, the public key printed, the seed never
expect 0 "$bin" keygen "$tmp/k.key"
[ "$(stat -c %a "$tmp/k.key")" = 600 ] && ok "key mode 600" || bad "key mode $(stat -c %a "$tmp/k.key")"
seed=$(head -c 64 "$tmp/k.key")
grep -q "$seed" "$tmp/out" && bad "keygen printed the seed" || ok "seed not printed"
pub=$(sed -n 's/^pubkey //p' "$tmp/out")
[ ${#pub} -eq 64 ] && ok "pubkey printed" || bad "no pubkey in keygen output"
cp "$tmp/k.key" "$tmp/k.copy"
expect 1 "$bin" keygen "$tmp/k.key"
has "already exists"
cmp -s "$tmp/k.key" "$tmp/k.copy" && ok "existing key untouched" || bad "existing key changed"
expect 0 "$bin" keygen --force "$tmp/k2.key"
expect 0 "$bin" keygen --force "$tmp/k2.key"
cmp -s "$tmp/k2.key" "$tmp/k.key" && bad "two keys are equal" || ok "--force wrote a new key"
expect 2 "$bin" keygen
expect 2 "$bin" sign "$tmp/m.cmf"
expect 2 "$bin" sign --key "$tmp/k.key"

# unsigned: verify passes and says so
expect 0 "$bin" verify "$tmp/m.cmf"
has "signature: none"
# --pubkey requires a signature
expect 1 "$bin" verify --pubkey "$pub" "$tmp/m.cmf"
has "requires one"
expect 2 "$bin" verify --pubkey abc "$tmp/m.cmf"

# sign, verify
expect 0 "$bin" sign "$tmp/m.cmf" --key "$tmp/k.key"
[ -f "$tmp/m.cmf.sig" ] && ok "m.cmf.sig written" || bad "no .sig"
grep -q '^{"alg": "ed25519-sha256", "pubkey": "'"$pub"'", "sha256": "[0-9a-f]\{64\}", "sig": "[0-9a-f]\{128\}"}$' \
  "$tmp/m.cmf.sig" && ok ".sig bytes as specified" || { bad ".sig format"; cat "$tmp/m.cmf.sig"; }
[ "$(sha256sum "$tmp/m.cmf" | cut -c1-64)" = "$(sed 's/.*"sha256": "\([0-9a-f]*\)".*/\1/' "$tmp/m.cmf.sig")" ] &&
  ok "sha256 field = sha256sum" || bad "sha256 field differs from sha256sum"
expect 0 "$bin" verify "$tmp/m.cmf"
has "signature: OK (ed25519, pubkey ${pub:0:16}"
expect 0 "$bin" verify "$tmp/m.cmf" --pubkey "$pub"
other=$(printf '%s' "$pub" | tr '0123456789abcdef' '123456789abcdef0')
expect 1 "$bin" verify --pubkey "$other" "$tmp/m.cmf"
has "not by the required one"
expect 0 "$bin" sign "$tmp/m.cmf" --key "$tmp/k.key" -o "$tmp/elsewhere.sig"
cmp -s "$tmp/elsewhere.sig" "$tmp/m.cmf.sig" && ok "-o writes the same signature" || bad "-o differs"

# a world-readable key is refused
cp "$tmp/k.key" "$tmp/open.key"; chmod 644 "$tmp/open.key"
expect 1 "$bin" sign "$tmp/m.cmf" --key "$tmp/open.key" -o "$tmp/x.sig"
has "chmod 600"

# a tampered .sig fails verify with its own message
cp "$tmp/m.cmf.sig" "$tmp/good.sig"
sed 's/ed25519-sha256/rsa-sha256/' "$tmp/good.sig" >"$tmp/m.cmf.sig"
expect 1 "$bin" verify "$tmp/m.cmf"; has "only \"ed25519-sha256\""
sed 's/"sig": "\(.\)/"sig": "\1\1/' "$tmp/good.sig" >"$tmp/m.cmf.sig"
expect 1 "$bin" verify "$tmp/m.cmf"; has "has 129 hex digits"
sed 's/"sig": "./"sig": "Z/' "$tmp/good.sig" >"$tmp/m.cmf.sig"
expect 1 "$bin" verify "$tmp/m.cmf"; has "bad hex digit at position 0"
sig=$(sed 's/.*"sig": "\([0-9a-f]*\)".*/\1/' "$tmp/good.sig")
flipped=$(printf '%s' "${sig:0:1}" | tr '0123456789abcdef' '123456789abcdef0')${sig:1}
sed "s/$sig/$flipped/" "$tmp/good.sig" >"$tmp/m.cmf.sig"
expect 1 "$bin" verify "$tmp/m.cmf"; has "bad signature"
cp "$tmp/good.sig" "$tmp/m.cmf.sig"

# one flipped byte anywhere fails verify: the last byte (padding or payload) and a byte in the envelope reserve
size=$(stat -c %s "$tmp/m.cmf")
for off in $((size - 1)) $((size / 2)) 8 200; do
  cp "$tmp/m.cmf" "$tmp/orig.cmf"
  printf '\x5a' | dd of="$tmp/m.cmf" bs=1 seek="$off" conv=notrunc status=none
  if cmp -s "$tmp/m.cmf" "$tmp/orig.cmf"; then printf '\xa5' | dd of="$tmp/m.cmf" bs=1 seek="$off" conv=notrunc status=none; fi
  expect 1 "$bin" verify "$tmp/m.cmf"; has "digest mismatch"
  cp "$tmp/orig.cmf" "$tmp/m.cmf"
done
expect 0 "$bin" verify "$tmp/m.cmf"

# a shard set: sign every shard, each has its own .sig; one bad shard signature fails the set
"$bin" convert --model "$src/tests/fixtures/tiny/llama" --quant f32 --shard-max-gb 0.0001 --output "$tmp/s.cmf" -q ||
  { echo "sharded convert failed"; exit 1; }
shards=("$tmp"/s-*-of-*.cmf)
[ ${#shards[@]} -ge 2 ] && ok "${#shards[@]} shards" || bad "expected shards, got ${shards[*]}"
expect 0 "$bin" sign "${shards[@]}" --key "$tmp/k.key"
expect 0 "$bin" verify "${shards[0]}" --pubkey "$pub"
n=$(grep -c "signature: OK" "$tmp/out")
[ "$n" -eq ${#shards[@]} ] && ok "every shard's signature checked" || bad "$n signatures checked for ${#shards[@]} shards"
cp "${shards[0]}.sig" "${shards[1]}.sig"
expect 1 "$bin" verify "${shards[0]}"; has "digest mismatch"
rm "${shards[1]}.sig"
expect 0 "$bin" verify "${shards[0]}"; has "signature: none"
expect 1 "$bin" verify --pubkey "$pub" "${shards[0]}"
expect 2 "$bin" sign "${shards[@]}" --key "$tmp/k.key" -o "$tmp/one.sig"
exit $fail
