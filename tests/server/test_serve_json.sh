#!/usr/bin/env bash
# response_format through the server on the tiny model: for several schemas and seeds the answer
# (chat and completions, whole and streamed) parses and validates against its schema (a
# validator for the subset written below, not a library), finishes with "stop", and the same
# request twice gives the same text; json_object gives an object; a keyword outside the subset
# is refused with 400 naming it.
set -uo pipefail
. "${CORTIQ_SOURCE_DIR:?}/tests/server/serve_lib.sh"
m="$serve_tmp/m.cmf"
"$bin" convert --model "$CORTIQ_SOURCE_DIR/tests/fixtures/tiny/qwen3" --quant q8 --output "$m" -q || exit 1
serve_start "$m" --ctx 512 --parallel 2 || exit 1
python3 -S - "$base" <<'PY'
import json, sys, urllib.request, urllib.error

base = sys.argv[1]
fail = 0

def check(cond, what):
    global fail
    if not cond:
        print("FAIL:", what)
        fail = 1

def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def type_ok(t, v):
    return {"object": isinstance(v, dict), "array": isinstance(v, list),
            "string": isinstance(v, str), "boolean": isinstance(v, bool), "null": v is None,
            "number": isinstance(v, (int, float)) and not isinstance(v, bool),
            "integer": isinstance(v, int) and not isinstance(v, bool)}[t]

def valid(s, v):
    if s is True:
        return True
    t = s.get("type")
    if isinstance(t, str) and not type_ok(t, v):
        return False
    if isinstance(t, list) and not any(type_ok(x, v) for x in t):
        return False
    if "const" in s and not (s["const"] == v and type(s["const"]) == type(v)):
        return False
    if "enum" in s and not any(e == v and type(e) == type(v) for e in s["enum"]):
        return False
    if isinstance(v, dict):
        props = s.get("properties", {})
        if any(r not in v for r in s.get("required", [])):
            return False
        for k, x in v.items():
            if k not in props and s.get("additionalProperties") is False:
                return False
            if k in props and not valid(props[k], x):
                return False
    if isinstance(v, list) and "items" in s:
        return all(valid(s["items"], x) for x in v)
    return True

schemas = [
    {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]},
                                      "count": {"type": "integer"}, "ok": {"type": "boolean"}},
     "required": ["color", "count", "ok"], "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string"}, "score": {"type": "number"},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b", 7, None]}},
                                      "inner": {"type": "object", "properties": {"v": {"type": ["integer", "null"]}},
                                                "required": ["v"], "additionalProperties": False}},
     "required": ["name", "inner"], "additionalProperties": False},
    {"type": "array", "items": {"type": "object", "properties": {"k": {"const": "x"}, "n": {"type": "null"}},
                                "required": ["k", "n"], "additionalProperties": False}},
]
msgs = [{"role": "user", "content": "Describe a thing as JSON."}]
done = 0
for i, sc in enumerate(schemas):
    for seed in (1, 2, 3):
        body = {"messages": msgs, "seed": seed, "temperature": 0.8, "max_tokens": 200,
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "t", "schema": sc, "strict": True}}}
        st, txt = post("/v1/chat/completions", body)
        check(st == 200, f"schema {i} seed {seed}: status {st} {txt[:200]}")
        if st != 200:
            continue
        ch = json.loads(txt)["choices"][0]
        out = ch["message"]["content"]
        if ch["finish_reason"] == "length":  # a string the model never closed: cut, not wrong
            print(f"schema {i} seed {seed}: hit max_tokens")
            continue
        check(ch["finish_reason"] == "stop", f"schema {i} seed {seed}: finish {ch['finish_reason']}")
        try:
            v = json.loads(out)
        except ValueError as e:
            check(False, f"schema {i} seed {seed}: {out!r} does not parse: {e}")
            continue
        check(valid(sc, v), f"schema {i} seed {seed}: {out!r} does not validate")
        done += 1
        print(f"schema {i} seed {seed}: {out}")
        st2, txt2 = post("/v1/chat/completions", body)
        check(json.loads(txt2)["choices"][0]["message"]["content"] == out, "same request, same answer")
check(done >= 6, f"only {done} of 9 constrained answers finished")

# greedy, completions endpoint, and streamed
sc = schemas[0]
rf = {"type": "json_schema", "json_schema": {"name": "t", "schema": sc}}
st, txt = post("/v1/completions", {"prompt": "JSON:", "temperature": 0, "max_tokens": 200, "response_format": rf})
check(st == 200 and valid(sc, json.loads(json.loads(txt)["choices"][0]["text"])), f"completions: {txt[:300]}")
req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(
    {"messages": msgs, "seed": 5, "max_tokens": 200, "stream": True, "response_format": rf}).encode())
text = ""
with urllib.request.urlopen(req, timeout=120) as r:
    for line in r.read().decode().splitlines():
        if line.startswith("data: {"):
            for c in json.loads(line[6:])["choices"]:
                text += c["delta"].get("content") or ""
check(valid(sc, json.loads(text)), f"streamed: {text!r}")

# json_object: any object
st, txt = post("/v1/chat/completions", {"messages": msgs, "seed": 9, "max_tokens": 200,
                                        "response_format": {"type": "json_object"}})
ch = json.loads(txt)["choices"][0]
if ch["finish_reason"] == "stop":
    check(isinstance(json.loads(ch["message"]["content"]), dict), f"json_object: {txt[:300]}")

# refused keywords and malformed formats
for rf, want in [({"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a"}}}, "'pattern'"),
                 ({"type": "json_schema", "json_schema": {"schema": {"anyOf": []}}}, "'anyOf'"),
                 ({"type": "yaml"}, "'yaml'"),
                 ({"type": "json_schema"}, "json_schema")]:
    st, txt = post("/v1/chat/completions", {"messages": msgs, "response_format": rf})
    e = json.loads(txt).get("error", {})
    check(st == 400 and want in e.get("message", "") and e.get("param") == "response_format",
          f"{rf}: {st} {txt}")
sys.exit(fail)
PY
rc=$?
serve_stop || rc=1
exit $rc
