#!/usr/bin/env bash
# README's command table and the commands' --help agree: every command the table names exists,
# and every --option a row mentions is in that command's --help text.
set -uo pipefail
bin=${CORTIQ_BIN:?}
readme=${CORTIQ_SOURCE_DIR:?}/README.md
fail=0
rows=0
while IFS= read -r row; do
  rows=$((rows + 1))
  # the commands a row documents: `cortiq CMD ...` and `/ `CMD ...` alternatives
  cmds=$(printf '%s\n' "$row" | grep -oE '`(cortiq )?[a-z][a-z-]+ ' | sed -E 's/^`(cortiq )?//; s/ $//' | sort -u)
  sub=$(printf '%s\n' "$row" | grep -oE '^\| `cortiq [a-z-]+ [a-z]+`' | awk '{print $4}' | tr -d '`')
  help=""
  for c in $cmds; do
    if [ "$c" = bench ] && [ "$sub" = quant ]; then c="bench quant"; fi
    out=$($bin $c --help 2>&1); rc=$?
    [ $rc -eq 0 ] || { echo "FAIL: README names 'cortiq $c', whose --help exits $rc"; fail=1; }
    help+=$out
  done
  for opt in $(printf '%s\n' "$row" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    # a here-string, not a pipe: grep -q exits at the first match and, under pipefail, a writer
    # still writing would die of SIGPIPE and fail the check at random
    grep -q -- "$opt" <<<"$help" || { echo "FAIL: README lists $opt for '$cmds', not in its --help"; fail=1; }
  done
done < <(grep -E '^\| `cortiq ' "$readme")
[ $rows -ge 15 ] || { echo "FAIL: only $rows command rows found in README"; fail=1; }
exit $fail
