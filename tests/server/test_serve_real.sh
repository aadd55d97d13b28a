#!/usr/bin/env bash
# `cortiq serve` on SmolLM2-135M-Instruct (fetched into the model cache when absent): the real
# `openai` client's checks (openai_check.py; greedy answers equal to `cortiq run --greedy`) on
# the file's layout, then, with the batched-decode copies, 16 requests from 4 concurrent clients
# with disconnects, each completed answer equal to the same request served alone.
set -uo pipefail
python3 -c "import openai" 2>/dev/null || { echo "SKIP: the openai Python package is not installed"; exit 77; }
. "${CORTIQ_SOURCE_DIR:?}/tests/common/smollm2.sh"
. "$CORTIQ_SOURCE_DIR/tests/server/serve_lib.sh"
m="$serve_tmp/smollm2.cmf"
"$bin" import-gguf "$gguf" --quant q8 -o "$m" -q || exit 1
"$bin" run "$m" --prompt "Tell me a story" --max-tokens 16 --greedy --ctx 1024 2>/dev/null >"$serve_tmp/want"
fail=0
# the file's layout, as `cortiq run` reads it: the same kernels, so the same greedy answer on
# every tier (with the batched-decode copies, AVX-512 sums each row in another order)
serve_start "$m" --ctx 1024 --parallel 2 --no-batch-lanes || exit 1
python3 "$CORTIQ_SOURCE_DIR/tests/server/openai_check.py" "$base" smollm2 "$serve_tmp/want" || fail=1
serve_stop || { echo "FAIL: the server did not exit cleanly"; fail=1; }
# the copies (the default with --parallel > 1): every answer as the same request served alone
serve_start "$m" --ctx 1024 --parallel 2 || exit 1
python3 -S "$CORTIQ_SOURCE_DIR/tests/server/load_check.py" "$base" 16 4 || fail=1
serve_stop || { echo "FAIL: the server did not exit cleanly"; fail=1; }
exit $fail
