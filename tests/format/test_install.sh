#!/usr/bin/env bash
# Install the library into a scratch prefix, build examples/read_row.c against it with
# pkg-config (shared and static), and run it on a file the installed cortiq converts.
set -euo pipefail
build=$(cd "$(dirname "$CORTIQ_BIN")/.." && pwd)
src=$CORTIQ_SOURCE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# a sanitizer build's library needs the sanitizer runtimes at link time too
san=""
grep -q '^CORTIQ_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && san="-fsanitize=address,undefined"
grep -q '^CORTIQ_FUZZ:BOOL=ON' "$build/CMakeCache.txt" && san="-fsanitize=address,undefined,fuzzer-no-link"
cc() { command "${CC:-cc}" $san "$@"; }
pkg-config --exists cortiq
cc -std=c17 -Wall -Werror "$src/examples/read_row.c" $(pkg-config --cflags --libs cortiq) -o "$tmp/rr_shared"
cc -std=c17 -Wall -Werror "$src/examples/read_row.c" $(pkg-config --cflags cortiq) \
   "$tmp/prefix/lib/libcortiq.a" $(pkg-config --libs --static cortiq | sed 's/-lcortiq//') -o "$tmp/rr_static"
"$tmp/prefix/bin/cortiq" convert --model "$src/tests/fixtures/tiny/llama" --quant q8 --output "$tmp/m.cmf" -q
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/rr_shared" "$tmp/m.cmf" model.norm.weight 0 | grep -q 'model.norm.weight\[0\]'
"$tmp/rr_static" "$tmp/m.cmf" model.layers.1.mlp.down_proj.weight 3 | grep -q 'down_proj.weight\[3\]'
echo "install + pkg-config + example: OK"
