#!/usr/bin/env bash
# `cortiq mask derive|rm`, `masks` and `--task` (spec §5, §9): a mask derived on the tiny llama
# fixture is appended in place (every byte after the envelope unchanged), carries a measured
# quality (held-out PPL ratio, n_samples, the held-out file's SHA-256), `ppl --task` reproduces
# the derive's own measurements, the file's default_task is what runs without --task, unknown
# names list the file's tasks, and `mask rm` removes a mask and its default.
set -euo pipefail
bin=$CORTIQ_BIN
fx="$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/llama"
text="$CORTIQ_SOURCE_DIR/tests/fixtures/real/ppl_text.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$bin" convert --model "$fx" --quant f32 --output "$tmp/m.cmf" -q
cp "$tmp/m.cmf" "$tmp/orig.cmf"
head -c 1000 "$text" >"$tmp/calib.txt"
tail -c +1001 "$text" >"$tmp/held.txt"
"$bin" mask derive "$tmp/m.cmf" --calib "$tmp/calib.txt" --heldout "$tmp/held.txt" --keep 0.5 \
    --heads 0.5 --name half --ctx 64 --default >"$tmp/derive" 2>&1 || { cat "$tmp/derive"; exit 1; }
# append-only: the envelope (first 128 bytes) is rewritten, every older byte after it is not
old=$(stat -c %s "$tmp/orig.cmf")
cmp -s -i 128 -n $((old - 128)) "$tmp/m.cmf" "$tmp/orig.cmf" || bad "bytes before the old end changed"
[ "$(stat -c %s "$tmp/m.cmf")" -gt "$old" ] || bad "nothing appended"
"$bin" verify "$tmp/m.cmf" >/dev/null || bad "verify after the append"
dense=$(sed -n 's/.*PPL dense \([0-9.]*\), masked.*/\1/p' "$tmp/derive")
masked=$(sed -n 's/.*, masked \([0-9.]*\):.*/\1/p' "$tmp/derive")
[ -n "$dense" ] && [ -n "$masked" ] || bad "derive printed no measurement: $(cat "$tmp/derive")"
# the quality contract, measured: the ratio, the baseline, the held-out file's hash
"$bin" masks "$tmp/m.cmf" --json >"$tmp/masks.json"
sha=$(sha256sum "$tmp/held.txt" | cut -d' ' -f1)
python3 - "$tmp/masks.json" "$dense" "$masked" "$sha" <<'PY' || fail=1
import json, sys
m = json.load(open(sys.argv[1]))
dense, masked, sha = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
k = [x for x in m["masks"] if x["name"] == "half"]
ok = len(k) == 1 and m["default_task"] == "half"
q = k[0]["quality"] if ok else None
ok = ok and q["metric"] == "heldout_ppl_ratio" and q["dataset_sha256"] == sha
ok = ok and abs(q["baseline_dense"] - dense) < 1e-3 and abs(q["value"] - masked / dense) < 1e-4
ok = ok and q["n_samples"] > 100
ok = ok and all(l["ffn"] == m["intermediate"] // 2 and l["heads"] == m["n_heads"] // 2
                for l in k[0]["layers"])
if not ok:
    print("masks --json:", json.dumps(m)[:600])
sys.exit(0 if ok else 1)
PY
# ppl reproduces both measurements; without --task the default_task runs
ppl() { "$bin" ppl "$tmp/m.cmf" "$tmp/held.txt" --ctx 64 "$@" 2>/dev/null | sed -n 's/^PPL = //p'; }
[ "$(ppl --task half)" == "$masked" ] || bad "ppl --task half $(ppl --task half) != $masked"
[ "$(ppl --task none)" == "$dense" ] || bad "ppl --task none $(ppl --task none) != $dense"
[ "$(ppl)" == "$masked" ] || bad "default task: ppl $(ppl) != $masked"
"$bin" ppl "$tmp/m.cmf" "$tmp/held.txt" --ctx 64 --task half 2>&1 >/dev/null |
    grep -q "task 'half': 2/2 layers on, FFN 128/256 neurons active (128 computed), heads 4/8" ||
    bad "no task line on stderr"
# bench reports the task it ran; run answers under it
"$bin" bench "$tmp/m.cmf" -p 4 -n 2 -r 1 --json --task half 2>/dev/null | grep -q '"task": "half"' ||
    bad "bench --json does not name the task"
"$bin" bench "$tmp/m.cmf" -p 4 -n 2 -r 1 --json --task none 2>/dev/null | grep -q '"task": null' ||
    bad "bench --json --task none"
"$bin" run "$tmp/m.cmf" --raw --prompt "Hello" --max-tokens 4 --greedy --task half >/dev/null 2>&1 ||
    bad "run --task half"
# refusals: an unknown task lists the file's; a second mask of the same name
set +e
"$bin" ppl "$tmp/m.cmf" "$tmp/held.txt" --task nope >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -ne 0 ] && grep -q "no task 'nope'.*available: half; 'none' = dense" "$tmp/err" ||
    bad "unknown task: rc $rc, $(cat "$tmp/err")"
if "$bin" mask derive "$tmp/m.cmf" --calib "$tmp/calib.txt" --heldout "$tmp/held.txt" --keep 0.5 \
    --name half --ctx 64 >/dev/null 2>"$tmp/err"; then bad "a second 'half' was accepted"; fi
grep -q "a task mask 'half' exists" "$tmp/err" || bad "duplicate: $(cat "$tmp/err")"
# rm: the mask and the default it was are gone; the file runs dense again
"$bin" mask rm "$tmp/m.cmf" half | grep -q "removed task mask 'half' (it was the default_task" ||
    bad "rm message"
"$bin" masks "$tmp/m.cmf" --json | python3 -c '
import json, sys; m = json.load(sys.stdin); sys.exit(0 if m["masks"] == [] and m["default_task"] is None else 1)' ||
    bad "masks after rm"
[ "$(ppl)" == "$dense" ] || bad "after rm the default run is not dense"
if "$bin" mask rm "$tmp/m.cmf" half >/dev/null 2>&1; then bad "rm of a missing mask succeeded"; fi
exit $fail
