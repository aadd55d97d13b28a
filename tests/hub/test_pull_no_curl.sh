#!/usr/bin/env bash
# libcurl is loaded at the first download, not linked: the binaries do not need it, and without
# it `cortiq pull` fails with a message naming the package (no crash), while the rest works.
# "Without it" is an LD_PRELOAD shim (dlopen_no_curl.c, built here) whose dlopen refuses
# libcurl: the system's copy cannot be hidden otherwise.
set -uo pipefail
bin=${CORTIQ_BIN:?}
src=${CORTIQ_SOURCE_DIR:?}
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "SKIP: no C compiler ($cc) to build the shim"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

# --- the binaries do not link libcurl ---------------------------------------------------------
if command -v readelf >/dev/null; then
  for f in "$bin" "$(dirname "$bin")"/libcortiq.so; do
    [ -e "$f" ] || continue
    check "$(basename "$f") does not need libcurl" \
      bash -c "! readelf -d '$f' | grep NEEDED | grep -q libcurl"
  done
else
  echo "note: no readelf, the NEEDED check is skipped"
fi

# --- pull without libcurl ---------------------------------------------------------------------
"$cc" -shared -fPIC -o "$work/no_curl.so" "$src/tests/hub/dlopen_no_curl.c" ||
  { echo "FAIL: the shim did not build"; exit 1; }
# nothing listens on the endpoint: a request made anyway would fail differently
export HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_CACHE=$work/cache HOME=$work/home
unset HF_TOKEN HF_HOME HF_HUB_OFFLINE http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
# a gcc sanitizer build wants its runtime first in the preload list; the shim does not care
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
LD_PRELOAD=$work/no_curl.so "$bin" --version >/dev/null 2>"$work/err0"; rc=$?
check "without libcurl: --version works" [ $rc -eq 0 ]
LD_PRELOAD=$work/no_curl.so "$bin" pull test/tiny-llama >"$work/out1" 2>"$work/err1"; rc=$?
cat "$work/err1"
check "without libcurl: pull exits 3 (no crash)" [ $rc -eq 3 ]
check "without libcurl: the library and the package are named" \
  grep -q "libcurl.so.4 not found: install libcurl4 (apt install libcurl4)" "$work/err1"
check "without libcurl: nothing on stdout" [ ! -s "$work/out1" ]
check "without libcurl: nothing downloaded" [ ! -e "$work/cache/models--test--tiny-llama" ]
# an offline pull reads the cache alone, so it never asks for libcurl
LD_PRELOAD=$work/no_curl.so HF_HUB_OFFLINE=1 "$bin" pull test/tiny-llama >/dev/null 2>"$work/err3"
cat "$work/err3"
check "without libcurl, offline: the cache is consulted, not libcurl" \
  sh -c "! grep -q libcurl '$work/err3'"
# with the library, the same command gets as far as the network
"$bin" pull test/tiny-llama >/dev/null 2>"$work/err2"
check "with libcurl: pull reaches the network" grep -q "could not be reached" "$work/err2"
exit $fail
