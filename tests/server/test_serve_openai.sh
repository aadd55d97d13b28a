#!/usr/bin/env bash
# `cortiq serve` on the tiny model through the real `openai` Python client (skipped when the
# package is absent): chat, streaming, n, seed, logprobs, completions, stop, embeddings, errors;
# greedy answers equal to `cortiq run --greedy`.
set -uo pipefail
python3 -c "import openai" 2>/dev/null || { echo "SKIP: the openai Python package is not installed"; exit 77; }
. "${CORTIQ_SOURCE_DIR:?}/tests/server/serve_lib.sh"
m="$serve_tmp/tiny.cmf"
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" --quant q8 --output "$m" -q || exit 1
"$bin" run "$m" --prompt "Tell me a story" --max-tokens 16 --greedy --ctx 512 2>/dev/null >"$serve_tmp/want"
serve_start "$m" --ctx 512 --parallel 2 || exit 1
python3 "$CORTIQ_SOURCE_DIR/tests/server/openai_check.py" "$base" tiny "$serve_tmp/want"
rc=$?
serve_stop || { echo "FAIL: the server did not exit cleanly"; rc=1; }
exit $rc
