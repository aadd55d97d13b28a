#!/usr/bin/env bash
# test_import_gguf.sh - `cortiq import-gguf`: a small GGUF (the fuzz seed) imported at several
# quant types gives a valid CMF with HF names, the header arch/tokenizer_config/provenance
# and a working tokenizer; bad input and usage fail with the documented exit codes; the real
# SmolLM2 GGUF (scripts/fetch-models) imports and tokenizes like its tokenizer.json (skipped
# with a message when it is not in the cache).
set -u
bin="${CORTIQ_BIN:?}"
src="${CORTIQ_SOURCE_DIR:?}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
expect_rc() { # want_rc description command...
    local want="$1" what="$2"
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" = "$want" ]; then ok; else bad "$what: rc $rc, want $want: $(cat "$tmp/err")"; fi
}
has() { # file pattern description
    if grep -q -- "$2" "$1"; then ok; else bad "$3: '$2' not in $(head -c 600 "$1")"; fi
}

seed="$src/tests/fuzz/corpus/gguf/llama_spm.gguf"
for q in f32 f16 q8 q4 q4t vbit; do
    expect_rc 0 "import --quant $q" "$bin" import-gguf "$seed" --quant "$q" -o "$tmp/m_$q.cmf"
    expect_rc 0 "verify $q" "$bin" verify "$tmp/m_$q.cmf"
done
"$bin" tensors "$tmp/m_q4.cmf" >"$tmp/tensors" 2>&1
has "$tmp/tensors" "model.layers.0.self_attn.q_proj.weight" "q_proj named"
has "$tmp/tensors" "model.layers.0.mlp.up_proj.weight" "up_proj named"
has "$tmp/tensors" "model.embed_tokens.weight" "embedding named"
has "$tmp/tensors" "model.layers.0.input_layernorm.weight" "norm named"
"$bin" info "$tmp/m_q4.cmf" --json >"$tmp/info" 2>&1
has "$tmp/info" "import-gguf" "provenance tool"
has "$tmp/info" "llama_spm.gguf" "provenance source"
has "$tmp/info" '"q4_block"' "matrices at the wanted dtype"
has "$tmp/info" '"f16"' "norms at f16"
"$bin" tokenize "$tmp/m_f32.cmf" "abab" >"$tmp/tok" 2>&1
has "$tmp/tok" "4" "tokenizer from the vocab section"
# a GGUF with a chat template imports without the ChatML note; --chat-template replaces it
expect_rc 0 "import q8 again" "$bin" import-gguf "$seed" --quant q8 -o "$tmp/m_again.cmf"
if grep -q "no tokenizer.chat_template" "$tmp/err"; then bad "ChatML note for a GGUF with a template"; else ok; fi
printf '{%% for m in messages %%}<t>{{ m.content }}</t>{%% endfor %%}' >"$tmp/tpl.jinja"
expect_rc 0 "import with --chat-template" "$bin" import-gguf "$seed" --quant q8 --chat-template "$tmp/tpl.jinja" -o "$tmp/m_tpl.cmf"
"$bin" chat-template "$tmp/m_tpl.cmf" --messages <(echo '[{"role":"user","content":"hi"}]') >"$tmp/rendered" 2>&1
has "$tmp/rendered" "<t>hi</t>" "--chat-template stored and rendered"

# usage and input errors
expect_rc 2 "unknown quant" "$bin" import-gguf "$seed" --quant q3 -o "$tmp/x.cmf"
expect_rc 2 "no output" "$bin" import-gguf "$seed" --quant q8
expect_rc 2 "no quant" "$bin" import-gguf "$seed" -o "$tmp/x.cmf"
expect_rc 2 "q1 without --allow-q1" "$bin" import-gguf "$seed" --quant q1 -o "$tmp/x.cmf"
expect_rc 0 "help" "$bin" import-gguf --help
expect_rc 3 "missing input" "$bin" import-gguf "$tmp/absent.gguf" --quant q8 -o "$tmp/x.cmf"
expect_rc 1 "truncated input" "$bin" import-gguf "$src/tests/fuzz/corpus/gguf/truncated.gguf" --quant q8 -o "$tmp/x.cmf"
if [ -e "$tmp/x.cmf" ]; then bad "a failed import left $tmp/x.cmf"; else ok; fi

cache="${CORTIQ_MODEL_CACHE:-$HOME/.cache/cortiq/models}"
real="$cache/smollm2-135m-instruct-q4_1.gguf"
# make test fetches what its tests need (once, into the cache)
[ -f "$real" ] || bash "$src/scripts/fetch-models" smollm2 >&2 || bad "fetch-models smollm2 failed"
if [ -f "$real" ]; then
    expect_rc 0 "import SmolLM2" "$bin" import-gguf "$real" --quant q8 -o "$tmp/smol.cmf"
    expect_rc 0 "verify SmolLM2" "$bin" verify "$tmp/smol.cmf"
    "$bin" tokenize "$tmp/smol.cmf" "Hello world 12345!" >"$tmp/tok" 2>&1
    # ids from the Python `tokenizers` package on the same tokenizer.json
    has "$tmp/tok" "19556" "SmolLM2 'Hello'"
    has "$tmp/tok" "905" "SmolLM2 ' world'"
    printf '[{"role":"user","content":"Hi there"}]' >"$tmp/msgs.json"
    "$bin" chat-template "$tmp/smol.cmf" --messages "$tmp/msgs.json" >"$tmp/chat" 2>&1
    has "$tmp/chat" "You are a helpful AI assistant named SmolLM" "SmolLM2 chat template carried"
    has "$tmp/chat" "<|im_start|>user" "SmolLM2 chat template renders"
else
    echo "SKIP: $real absent (run scripts/fetch-models)"
fi
# Gemma 3 270M's GGUF carries no chat template: the import says the file will chat in ChatML
gemma="$cache/gemma3-270m-q4_k_m.gguf"
if [ -f "$gemma" ]; then
    expect_rc 0 "import Gemma 3" "$bin" import-gguf "$gemma" --quant q4t -q -o "$tmp/gemma.cmf"
    has "$tmp/err" "no tokenizer.chat_template" "ChatML note for a GGUF without a template"
else
    echo "SKIP: $gemma absent (run scripts/fetch-models), ChatML note unchecked"
fi

echo "test_import_gguf: $pass passed, $fail failed"
[ "$fail" = 0 ]
