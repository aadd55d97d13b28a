# smollm2.sh - sourced by the shell tests that need the real SmolLM2 GGUF: sets $gguf to it,
# fetching it into the model cache first when absent (make test fetches what its tests need);
# exits 77 (skipped, as CTest counts it) only when that fails.
gguf=${CORTIQ_MODEL_CACHE:-$HOME/.cache/cortiq/models}/smollm2-135m-instruct-q4_1.gguf
[ -f "$gguf" ] || bash "${CORTIQ_SOURCE_DIR:?}/scripts/fetch-models" smollm2 >&2
[ -f "$gguf" ] || { echo "SKIP: $gguf is absent and scripts/fetch-models could not fetch it"; exit 77; }
