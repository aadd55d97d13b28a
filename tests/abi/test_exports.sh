#!/usr/bin/env bash
# The ABI of libcortiq.so: the dynamic symbols it defines are exactly those in exports.txt, each
# cmf_* or cortiq_* and declared in a public header (include/cortiq/). A new export fails here:
# either a public function was added (review, then regenerate the list) or CORTIQ_API leaked
# onto an internal one. Names starting with '_' belong to the toolchain (_init, _fini, ...).
# Regenerate after a reviewed change, from the repository root:
#   nm -D --defined-only build/src/libcortiq.so | awk '$3 !~ /^_/ {print $3}' | LC_ALL=C sort > tests/abi/exports.txt
set -euo pipefail
lib=$1
list=$2
shift 2 # the rest: public include directories
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '$3 !~ /^_/ {print $3}' | LC_ALL=C sort >"$tmp/exported"
fail=0
if ! diff -u "$list" "$tmp/exported" >"$tmp/diff"; then
    echo "FAIL: $lib exports differ from $list (-: listed but not exported, +: exported, not listed):"
    cat "$tmp/diff"
    fail=1
fi
if grep -vE '^(cmf|cortiq)_' "$tmp/exported" >"$tmp/prefix"; then
    echo "FAIL: exported names outside the cmf_/cortiq_ prefixes:"
    cat "$tmp/prefix"
    fail=1
fi
# every identifier that a public header declares as a function
find "$@" -name '*.h' -path '*/cortiq/*' -exec cat {} + |
    grep -oE '\b(cmf|cortiq)_[A-Za-z0-9_]+[[:space:]]*\(' | tr -d '( \t' | LC_ALL=C sort -u >"$tmp/declared"
if LC_ALL=C comm -23 "$tmp/exported" "$tmp/declared" | grep . >"$tmp/undeclared"; then
    echo "FAIL: exported but declared in no public header:"
    cat "$tmp/undeclared"
    fail=1
fi
[ $fail = 0 ] && echo "exports: $(wc -l <"$tmp/exported") symbols, as listed in $list"
exit $fail
