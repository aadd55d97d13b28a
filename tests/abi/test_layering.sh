#!/usr/bin/env bash
# Layering the build enforces (cmake/CortiqModule.cmake): every library module compiles against
# an include view holding its own src/ folder and the folders it declares as DEPS. For each module
# and each src/ folder outside its view, including one of that folder's headers must fail to
# compile, with "No such file" (a back-edge such as engine -> cli/cli.h); and a module's own
# headers and its DEPS' headers must be found.
set -uo pipefail
cc=$1
views=$2
src=$3
shift 3 # the rest: public include directories
inc=()
for d in "$@"; do inc+=(-I "$d"); done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
refused=0
# try VIEW HEADER: 0 when the header is found (it may still not compile alone: only "found" counts)
found() {
    printf '#include "%s"\n' "$2" >"$tmp/t.c"
    "$cc" -D_GNU_SOURCE -fsyntax-only -I "$views/$1" "${inc[@]}" "$tmp/t.c" >"$tmp/err" 2>&1 && return 0
    ! grep -q "$2.*No such file\|'$2' file not found" "$tmp/err"
}
for view in "$views"/cortiq_*; do
    v=$(basename "$view")
    for dir in "$src"/*/; do
        m=$(basename "$dir")
        h=$(cd "$dir" && ls *.h 2>/dev/null | head -1)
        [ -n "$h" ] || continue
        if [ -e "$view/$m" ]; then
            if ! found "$v" "$m/$h"; then
                echo "FAIL: $v declares $m but \"$m/$h\" is not found:"
                cat "$tmp/err"
                fail=1
            fi
        elif found "$v" "$m/$h"; then
            echo "FAIL: $v does not declare $m, yet \"$m/$h\" compiles"
            fail=1
        else
            refused=$((refused + 1))
        fi
    done
done
# the back-edge named in the layering rule, spelled out
if found cortiq_engine cli/cli.h; then
    echo "FAIL: the engine can include cli/cli.h"
    fail=1
else
    echo "engine -> cli/cli.h refused: $(head -1 "$tmp/err")"
fi
[ $fail = 0 ] && echo "layering: $refused undeclared module edges refused"
exit $fail
