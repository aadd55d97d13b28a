"""`cortiq serve` through the real `openai` Python client (PyPI), as applications use it.
usage: openai_check.py BASE_URL MODEL_ID EXPECTED_GREEDY_FILE
EXPECTED_GREEDY_FILE holds `cortiq run --greedy --max-tokens 16` of "Tell me a story"."""
import math
import sys

try:
    import openai
except ImportError:
    print("SKIP: the openai Python package is not installed")
    sys.exit(77)

base, model, expected_file = sys.argv[1:4]
# `cortiq run`'s stdout: the answer, then a newline of run's own only where the answer does not
# end with one; as_run gives a served answer that form
want = open(expected_file, encoding="utf-8").read()


def as_run(text):
    return text if text.endswith("\n") else text + "\n"


client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


msgs = [{"role": "user", "content": "Tell me a story"}]
models = client.models.list()
check([m.id for m in models.data] == [model], "models.list: %r" % [m.id for m in models.data])

r = client.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0)
check(as_run(r.choices[0].message.content) == want, "greedy chat %r != cortiq run %r" % (r.choices[0].message.content, want))
check(r.choices[0].message.role == "assistant", "role")
check(r.usage.completion_tokens == 16 and r.choices[0].finish_reason == "length", "usage/finish %r" % r.usage)

# max_completion_tokens, n, seed reproducibility
r1 = client.chat.completions.create(model=model, messages=msgs, max_completion_tokens=8, temperature=0.9, seed=7, n=2)
r2 = client.chat.completions.create(model=model, messages=msgs, max_completion_tokens=8, temperature=0.9, seed=7, n=2)
check(len(r1.choices) == 2 and [c.index for c in r1.choices] == [0, 1], "n=2 choices")
check([c.message.content for c in r1.choices] == [c.message.content for c in r2.choices], "same seed, same answers")

# streaming: the deltas join into the whole answer; usage only in the last chunk when asked
chunks = list(client.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0,
                                             stream=True, stream_options={"include_usage": True}))
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check(as_run(text) == want, "streamed %r != %r" % (text, want))
check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 16, "usage in the last chunk")
check(all(c.usage is None for c in chunks[:-1]), "usage only in the last chunk")
check([c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length", "stream finish_reason")
plain = list(client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, stream=True))
check(all(c.usage is None for c in plain), "no usage without include_usage")

# logprobs
r = client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
lp = r.choices[0].logprobs.content
check(len(lp) == 4 and len(lp[0].top_logprobs) == 2, "logprobs shape")
check(lp[0].logprob <= 0 and math.isclose(lp[0].logprob, lp[0].top_logprobs[0].logprob, abs_tol=1e-6),
      "greedy token is the most likely one")

# legacy completions, stop strings
c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=12, temperature=0)
check(c.choices[0].text and c.object == "text_completion", "completions")
full = c.choices[0].text
if len(full) > 6:
    stop = full[3:5]
    s = client.completions.create(model=model, prompt="Once upon a time", max_tokens=12, temperature=0, stop=[stop, "zzzz"])
    check(s.choices[0].text == full[:full.index(stop)] and s.choices[0].finish_reason == "stop", "stop string")

# embeddings
e = client.embeddings.create(model=model, input=["hello", "world"])
check(len(e.data) == 2 and abs(sum(x * x for x in e.data[0].embedding) - 1) < 1e-3, "embeddings")

# response_format json_schema: the answer parses and has the schema's shape (constrained decoding)
import json
schema = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]},
                                           "rank": {"type": "integer"}, "sunny": {"type": "boolean"}},
          "required": ["city", "rank", "sunny"], "additionalProperties": False}
r = client.chat.completions.create(model=model, messages=msgs, max_tokens=120, seed=3,
                                   response_format={"type": "json_schema", "json_schema": {
                                       "name": "place", "schema": schema, "strict": True}})
if r.choices[0].finish_reason == "stop":
    v = json.loads(r.choices[0].message.content)
    check(set(v) == {"city", "rank", "sunny"} and v["city"] in ("Paris", "Rome") and type(v["rank"]) is int
          and type(v["sunny"]) is bool, "json_schema answer %r" % v)
else:
    check(r.choices[0].finish_reason == "length", "json_schema finish %r" % r.choices[0].finish_reason)

# errors in OpenAI's shape
for kwargs, param in (({"temperature": -1}, "temperature"), ({"top_logprobs": 99, "logprobs": True}, "top_logprobs"),
                      ({"max_tokens": 10 ** 9}, "max_tokens"), ({"presence_penalty": 5}, "presence_penalty")):
    try:
        client.chat.completions.create(model=model, messages=msgs, **kwargs)
        check(False, "%r accepted" % kwargs)
    except openai.BadRequestError as ex:
        check(ex.status_code == 400 and ex.body and ex.body.get("param") == param, "%r: %r" % (kwargs, ex.body))
try:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "word " * 5000}], max_tokens=4)
    check(False, "an oversized prompt was accepted")
except openai.BadRequestError as ex:
    check("context holds" in ex.message, "prompt too long: %s" % ex.message)
try:
    client.chat.completions.create(model=model, messages=msgs, max_tokens=1, extra_body={"unknown_field": [1, 2]})
except openai.APIError as ex:
    check(False, "an unknown field was refused: %s" % ex)
sys.exit(1 if fails else 0)
