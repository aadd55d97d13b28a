#!/usr/bin/env bash
# import-gguf of mixture-of-experts GGUFs (llama.cpp's qwen3moe and qwen2moe: experts stacked
# into one 3-D tensor per role, the shared expert and its 1-D gate): the imported file holds one
# tensor per expert and arch.moe from the expert keys, and at f16 its logits equal, bit for bit,
# those of `convert --quant f16` of the checkpoint the GGUF was written from (both round the
# same values to f16). tests/fixtures/tiny/gguf/README.md makes the GGUFs.
set -uo pipefail
bin=${CORTIQ_BIN:?}
fx=${CORTIQ_SOURCE_DIR:?}/tests/fixtures/tiny
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ids=1,5,9,22,7,3,100,41,17,250
for fam in qwen3_moe qwen2_moe; do
  "$bin" import-gguf "$fx/gguf/${fam}_f16.gguf" --quant f16 -o "$tmp/g.cmf" 2>"$tmp/err" ||
    { bad "$fam import: $(cat "$tmp/err")"; continue; }
  grep -q "6 stacked expert tensors split into one per expert" "$tmp/err" ||
    bad "$fam: no split reported: $(cat "$tmp/err")"
  "$bin" convert --model "$fx/$fam" --quant f16 -o "$tmp/h.cmf" -q || { bad "$fam convert"; continue; }
  "$bin" tensors "$tmp/g.cmf" >"$tmp/tg" 2>&1 || bad "$fam tensors"
  for e in 0 3; do
    grep -q "model.layers.1.mlp.experts.$e.down_proj.weight" "$tmp/tg" || bad "$fam: expert $e missing"
  done
  info=$("$bin" info "$tmp/g.cmf")
  grep -q "4 experts, top-2, expert ffn 32" <<<"$info" || bad "$fam arch.moe: $info"
  if [ $fam = qwen2_moe ]; then
    grep -q "shared expert" <<<"$info" || bad "$fam: no shared expert in arch.moe"
  fi
  "$bin" logits "$tmp/g.cmf" --ids $ids --all --exact -o "$tmp/g.npy" >/dev/null || bad "$fam logits (gguf)"
  "$bin" logits "$tmp/h.cmf" --ids $ids --all --exact -o "$tmp/h.npy" >/dev/null || bad "$fam logits (hf)"
  cmp -s "$tmp/g.npy" "$tmp/h.npy" || bad "$fam: imported logits differ from the converted checkpoint's"
done
[ $fail = 0 ] && echo "import-gguf MoE: ok"
exit $fail
