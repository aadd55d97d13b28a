#!/usr/bin/env bash
# `cortiq pull`, and convert / import-gguf / run by repo id, against a loopback stand-in for the
# Hugging Face Hub (hub_server.py): cache layout, reuse, resume, checksum, 404/401 messages,
# token scope, HF_HUB_CACHE / HF_HOME. Never touches the network.
set -uo pipefail
bin=${CORTIQ_BIN:?}
src=${CORTIQ_SOURCE_DIR:?}
command -v python3 >/dev/null || { echo "SKIP: python3 is needed for the test server"; exit 77; }
tiny=$src/tests/fixtures/tiny/llama
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

# --- the repos the server offers -------------------------------------------------------------
tiny_files=$(printf '"%s": "%s/%s",' config.json "$tiny" config.json \
  generation_config.json "$tiny" generation_config.json tokenizer.json "$tiny" tokenizer.json \
  tokenizer_config.json "$tiny" tokenizer_config.json model.safetensors "$tiny" model.safetensors)
tiny_files="{${tiny_files%,}, \"README.md\": \"$src/README.md\"}"
gguf=${CORTIQ_MODEL_CACHE:-$HOME/.cache/cortiq/models}/smollm2-135m-instruct-q4_1.gguf
head -c 1000 /dev/urandom >"$work/dummy.gguf"
gguf_repo=""
if [ -f "$gguf" ]; then
  gguf_repo=", \"test/smol-gguf\": {\"files\": {\"SmolLM2-135M-Instruct-Q4_1.gguf\": \"$gguf\",
    \"SmolLM2-135M-Instruct-F16.gguf\": \"$work/dummy.gguf\",
    \"mmproj-SmolLM2-Q8_0.gguf\": \"$work/dummy.gguf\"}, \"lfs_redirect\": true}"
fi
cat >"$work/repos.json" <<JSON
{"repos": {
  "test/tiny-llama": {"files": $tiny_files},
  "test/cut": {"files": $tiny_files, "cut_once": ["model.safetensors"]},
  "test/resume": {"files": $tiny_files},
  "test/whole": {"files": $tiny_files},
  "test/corrupt": {"files": $tiny_files, "corrupt": ["model.safetensors"]},
  "test/gated": {"files": $tiny_files, "token": "hf_secret", "lfs_redirect": true},
  "test/gated-files": {"files": $tiny_files, "token": "hf_secret", "gate_files_only": true},
  "test/paged": {"files": $tiny_files, "page_size": 2},
  "test/twins": {"files": {"config.json": "$tiny/config.json", "model.safetensors": "$tiny/model.safetensors",
                 "tokenizer.json": "$tiny/tokenizer.json", "vocab.json": "$tiny/tokenizer.json"}},
  "test/home": {"files": {"config.json": "$tiny/config.json"}}
  $gguf_repo
}}
JSON
python3 "$src/tests/hub/hub_server.py" --config "$work/repos.json" --log "$work/log.jsonl" \
  --ready "$work/ready.json" &
server_pid=$!
for _ in $(seq 100); do [ -f "$work/ready.json" ] && break; sleep 0.1; done
[ -f "$work/ready.json" ] || { echo "FAIL: the test server did not start"; exit 1; }
endpoint=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hub"])' "$work/ready.json")
export HF_ENDPOINT=$endpoint HF_HUB_CACHE=$work/cache XDG_CACHE_HOME=$work/xdg HOME=$work/home
unset HF_TOKEN HF_HOME HUGGING_FACE_HUB_TOKEN HF_TOKEN_PATH HF_HUB_OFFLINE HUGGINGFACE_HUB_CACHE
# a proxy from the environment must not carry loopback requests
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export NO_PROXY=127.0.0.1,127.0.0.2,localhost no_proxy=127.0.0.1,127.0.0.2,localhost
: >"$work/log.jsonl"

# requests in the log matching a Python condition on r (a dict); prints their count
count() { python3 - "$work/log.jsonl" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
print(sum(1 for r in recs if eval(sys.argv[2])))
PY
}
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# --- 1. a full download: layout like huggingface_hub ------------------------------------------
snap=$("$bin" pull test/tiny-llama 2>"$work/err1"); rc=$?
check "pull exits 0" [ $rc -eq 0 ]
repo_dir=$work/cache/models--test--tiny-llama
commit=$(cat "$repo_dir/refs/main" 2>/dev/null)
check "refs/main holds the 40-hex commit" [ ${#commit} -eq 40 ]
check "stdout is the snapshot dir" [ "$snap" = "$repo_dir/snapshots/$commit" ]
for f in config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors; do
  check "$f matches the fixture" cmp -s "$snap/$f" "$tiny/$f"
done
check "README.md is not fetched" [ ! -e "$snap/README.md" ]
check "model.safetensors is a blob named by its sha256" \
  [ -f "$repo_dir/blobs/$(sha256 "$tiny/model.safetensors")" ]
check "the snapshot link is relative into blobs/" \
  [ "$(readlink "$snap/model.safetensors")" = "../../blobs/$(sha256 "$tiny/model.safetensors")" ]
oid=$(python3 -c 'import hashlib,sys; d=open(sys.argv[1],"rb").read(); print(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest())' "$tiny/config.json")
check "config.json is a blob named by its git oid" [ "$(readlink "$snap/config.json")" = "../../blobs/$oid" ]
check "no .incomplete file left" [ -z "$(ls "$repo_dir/blobs" | grep incomplete)" ]

# --- 2. what is in the cache is not downloaded again ------------------------------------------
: >"$work/log.jsonl"
"$bin" pull test/tiny-llama >/dev/null 2>"$work/err2"
check "a second pull downloads nothing" [ "$(count '"/resolve/" in r["path"]')" -eq 0 ]
check "and says so" grep -q "model.safetensors (.*) already in the cache" "$work/err2"

# --- 3. convert and run by repo id ------------------------------------------------------------
"$bin" convert --model test/tiny-llama --quant q8 -o "$work/tiny.cmf" -q 2>"$work/err3"
check "convert --model OWNER/NAME writes a valid file" "$bin" verify -q "$work/tiny.cmf"
"$bin" run test/tiny-llama --prompt hi --max-tokens 4 --greedy >"$work/run1" 2>"$work/err4"
check "run OWNER/NAME converts and answers" [ $? -eq 0 ]
conv=$work/xdg/cortiq/converted/test--tiny-llama/$commit/q8.cmf
check "the conversion is cached by repo, commit and quant" [ -f "$conv" ]
check "run said it converted once" grep -q "converting test/tiny-llama" "$work/err4"
"$bin" run test/tiny-llama --prompt hi --max-tokens 4 --greedy >"$work/run2" 2>"$work/err5"
check "a second run reuses the conversion" bash -c "! grep -q converting '$work/err5'"
check "and answers the same" cmp -s "$work/run1" "$work/run2"
check "a local path wins over a repo id" bash -c \
  "cd '$work' && mkdir -p test && cp '$conv' test/x.cmf && '$bin' run test/x.cmf --prompt hi --max-tokens 2 >/dev/null 2>&1"

# --- 4. resume: a cut connection, and a partial file from an interrupted run ------------------
: >"$work/log.jsonl"
"$bin" pull test/cut >/dev/null 2>"$work/err6"; rc=$?
check "a cut transfer is resumed within the pull" [ $rc -eq 0 ]
check "the retry asked for the rest with Range" \
  [ "$(count 'r["path"].endswith("/model.safetensors") and (r["range"] or "").startswith("bytes=") and r["range"] != "bytes=0-"')" -eq 1 ]
check "the resumed file is whole" \
  cmp -s "$(ls -d "$work"/cache/models--test--cut/snapshots/*)/model.safetensors" "$tiny/model.safetensors"
rdir=$work/cache/models--test--resume/blobs
mkdir -p "$rdir"
head -c 100000 "$tiny/model.safetensors" >"$rdir/$(sha256 "$tiny/model.safetensors").incomplete"
: >"$work/log.jsonl"
"$bin" pull test/resume >/dev/null 2>"$work/err7"; rc=$?
check "a partial file of an earlier run is resumed" [ $rc -eq 0 ]
check "with Range: bytes=100000-" [ "$(count 'r["range"] == "bytes=100000-"')" -eq 1 ]
check "the progress says resuming" grep -q "model.safetensors: resuming after" "$work/err7"
check "the resumed file is whole" cmp -s "$rdir/$(sha256 "$tiny/model.safetensors")" "$tiny/model.safetensors"
wdir=$work/cache/models--test--whole/blobs
mkdir -p "$wdir"
cp "$tiny/model.safetensors" "$wdir/$(sha256 "$tiny/model.safetensors").incomplete"
"$bin" pull -q test/whole >/dev/null 2>&1; rc=$?
check "a partial file that is already whole is checked and kept (416 answered)" [ $rc -eq 0 ]
check "in blobs/" [ -f "$wdir/$(sha256 "$tiny/model.safetensors")" ]

: >"$work/log.jsonl"
"$bin" pull -q test/twins >/dev/null 2>&1; rc=$?
check "two paths with one content: pulled" [ $rc -eq 0 ]
check "with one download" [ "$(count '"/resolve/" in r["path"] and r["path"].endswith(("/tokenizer.json", "/vocab.json"))')" -eq 1 ]
check "and both linked" cmp -s "$(ls -d "$work"/cache/models--test--twins/snapshots/*)/vocab.json" "$tiny/tokenizer.json"

# --- 5. a corrupted byte ----------------------------------------------------------------------
"$bin" pull test/corrupt >/dev/null 2>"$work/err8"; rc=$?
check "a corrupt download fails (exit 1)" [ $rc -eq 1 ]
check "naming the file and the checksum" grep -q "model.safetensors: sha256 [0-9a-f]* does not match the hub's" "$work/err8"
cdir=$work/cache/models--test--corrupt/blobs
check "no blob and no partial file left for it" \
  bash -c "! ls '$cdir' | grep -q '$(sha256 "$tiny/model.safetensors")'"

# --- 6. 404 -----------------------------------------------------------------------------------
"$bin" pull test/nope 2>"$work/err9"; rc=$?
check "an unknown repo: exit 1" [ $rc -eq 1 ]
check "an unknown repo: HTTP 404, not found" grep -q "HTTP 404: repo test/nope not found" "$work/err9"
"$bin" pull test/tiny-llama --revision v9 2>"$work/err10"
check "an unknown revision: HTTP 404" grep -q "HTTP 404: repo test/tiny-llama at revision 'v9' not found" "$work/err10"
"$bin" pull test/tiny-llama:nope.gguf 2>"$work/err11"
check "an unknown file: named" grep -q "no file 'nope.gguf'" "$work/err11"

# --- 7. 401, and the token's scope ------------------------------------------------------------
"$bin" pull test/gated 2>"$work/err12"; rc=$?
check "a gated repo without a token: exit 3" [ $rc -eq 3 ]
check "says: gated or private, set HF_TOKEN" grep -q "HTTP 401: repo test/gated is gated or private.*set HF_TOKEN" "$work/err12"
HF_TOKEN=wrong "$bin" pull test/gated 2>"$work/err13"
check "a refused token is named as such" grep -q "the token in HF_TOKEN was refused" "$work/err13"
: >"$work/log.jsonl"
HF_TOKEN=hf_secret "$bin" pull test/gated >/dev/null 2>"$work/err14"; rc=$?
check "with the token: exit 0" [ $rc -eq 0 ]
check "the endpoint got the token" [ "$(count 'r["server"] == "hub" and r["auth"] == "Bearer hf_secret"')" -ge 3 ]
check "the LFS file came from the other host" [ "$(count 'r["server"] == "cdn"')" -ge 1 ]
check "which never saw the token" [ "$(count 'r["server"] == "cdn" and r["auth"] is not None')" -eq 0 ]
check "the gated file is whole" cmp -s "$(ls -d "$work"/cache/models--test--gated/snapshots/*)/model.safetensors" "$tiny/model.safetensors"
"$bin" pull test/gated-files 2>"$work/err21"; rc=$?
check "a repo whose files are gated: exit 3, the file named" \
  grep -q "HTTP 401: [a-z_.]* in test/gated-files is gated or private" "$work/err21"
mkdir -p "$work/xdg/huggingface" # HF_HOME defaults to $XDG_CACHE_HOME/huggingface
echo hf_secret >"$work/xdg/huggingface/token"
rm -rf "$work/cache/models--test--gated"
HF_TOKEN= "$bin" pull -q test/gated >/dev/null 2>&1
check "the token file of huggingface-cli login is read" [ $? -eq 0 ]
rm "$work/xdg/huggingface/token"

# --- 8. a file list in pages (Link: rel="next"), HF_HOME without HF_HUB_CACHE --------------
: >"$work/log.jsonl"
"$bin" pull -q test/paged >/dev/null 2>"$work/err22"; rc=$?
check "a paged file list is read to its end" [ $rc -eq 0 ]
check "to its last page" \
  cmp -s "$(ls -d "$work"/cache/models--test--paged/snapshots/*)/tokenizer_config.json" "$tiny/tokenizer_config.json"
check "over several requests" [ "$(count '"/tree/" in r["path"]')" -ge 3 ]
env -u HF_HUB_CACHE HF_HOME="$work/hfhome" "$bin" pull -q test/home:config.json >/dev/null 2>&1
check "HF_HOME/hub is the cache when HF_HUB_CACHE is unset" [ -d "$work/hfhome/hub/models--test--home/snapshots" ]

# --- 9. without a network: HF_HUB_OFFLINE, and an endpoint that does not answer --------------
: >"$work/log.jsonl"
HF_HUB_OFFLINE=1 "$bin" run test/tiny-llama --prompt hi --max-tokens 4 --greedy >"$work/run3" 2>"$work/err17"; rc=$?
check "HF_HUB_OFFLINE=1: run answers from the caches" [ $rc -eq 0 ]
check "the same answer" cmp -s "$work/run1" "$work/run3"
check "without a single request" [ "$(count 'True')" -eq 0 ]
check "and says it used the cached snapshot" grep -q "using the cached snapshot $commit" "$work/err17"
HF_ENDPOINT=http://127.0.0.1:9 "$bin" pull test/tiny-llama >/dev/null 2>"$work/err18"; rc=$?
check "an unreachable endpoint falls back to the cached snapshot" [ $rc -eq 0 ]
HF_ENDPOINT=http://127.0.0.1:9 "$bin" pull test/never-pulled 2>"$work/err19"; rc=$?
check "an unreachable endpoint and nothing cached: exit 3" [ $rc -eq 3 ]
check "says the endpoint could not be reached" grep -q "the endpoint could not be reached" "$work/err19"
HF_HUB_OFFLINE=1 "$bin" pull test/never-pulled 2>"$work/err20"; rc=$?
check "HF_HUB_OFFLINE=1 and nothing cached: not found, said so" grep -q "is not in the cache" "$work/err20"

# --- 10. a real GGUF: the default quant, import-gguf and run by repo id ------------------------
if [ -n "$gguf_repo" ]; then
  "$bin" import-gguf test/smol-gguf --quant q8 -o "$work/smol.cmf" -q 2>"$work/err15"; rc=$?
  check "import-gguf OWNER/NAME picks Q4_1 over F16 and mmproj, and converts" [ $rc -eq 0 ]
  check "the imported file verifies" "$bin" verify -q "$work/smol.cmf"
  out=$("$bin" run test/smol-gguf --prompt "What is 2+2?" --max-tokens 8 --greedy 2>"$work/err16"); rc=$?
  check "run OWNER/NAME on a GGUF repo answers" [ $rc -eq 0 ]
  check "something" [ -n "$out" ]
  check "the GGUF conversion is cached under its file name" \
    [ -f "$(ls -d "$work"/xdg/cortiq/converted/test--smol-gguf/*)/q8-SmolLM2-135M-Instruct-Q4_1.cmf" ]
else
  echo "skip: $gguf is absent (the real-GGUF part)"
fi

exit $fail
