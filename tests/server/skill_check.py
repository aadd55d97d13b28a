"""Per-request skills of `cortiq serve` through the real `openai` Python client (PyPI).
usage: skill_check.py BASE_URL WANT.json [--quick]
WANT.json (written by test_serve_skill.sh from `cortiq run` and `cortiq skill route`):
  {"max_tokens": N, "skills": [...], "completions": {prompt: {skill: text}},
   "chat": {prompt: {skill: text}}, "route": {prompt: winner}}"""
import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor

try:
    import openai
except ImportError:
    print("SKIP: the openai Python package is not installed")
    sys.exit(77)

base, want_file = sys.argv[1:3]
quick = "--quick" in sys.argv[3:]  # only the answers of every skill, served one by one
want = json.load(open(want_file, encoding="utf-8"))
mt = want["max_tokens"]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def cmf(r):
    return (r.model_extra or {}).get("cmf") or {}


def complete(prompt, skill):
    r = client.completions.create(model="m", prompt=prompt, max_tokens=mt, temperature=0,
                                  extra_body={"skill": skill})
    return r.choices[0].text, cmf(r).get("skill")


def chat(prompt, skill):
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}],
                                       max_tokens=mt, temperature=0, extra_body={"skill": skill})
    return r.choices[0].message.content, cmf(r).get("skill")


# /v1/models lists the skills and the default
info = client.models.list().data[0].model_extra.get("cmf", {})
check(info.get("skills") == want["skills"], "models: skills %r" % info)
check(info.get("default_skill") == "none", "models: default_skill %r" % info)

# each skill id answers as `cortiq run --skill ID`, and says which skill ran
for prompt, by_skill in want["completions"].items():
    for skill, text in by_skill.items():
        got, ran = complete(prompt, skill)
        check(got == text, "completion %r skill %s: %r != cortiq run %r" % (prompt, skill, got, text))
        check(ran == skill, "completion %r: cmf.skill %r, want %r" % (prompt, ran, skill))
if quick:
    print("%d failure(s)" % len(fails))
    sys.exit(1 if fails else 0)
for prompt, by_skill in want["chat"].items():
    for skill, text in by_skill.items():
        got, ran = chat(prompt, skill)
        check(got == text, "chat %r skill %s: %r != cortiq run %r" % (prompt, skill, got, text))
        check(ran == skill, "chat %r: cmf.skill %r" % (prompt, ran))
# the fixtures make every skill visible: each one changes some answer (so the above can fail)
for skill in want["skills"]:
    check(any(v[skill] != v["none"] for v in want["completions"].values()),
          "skill %s answers as none on every prompt: the comparison proves nothing" % skill)

# auto routes as `cortiq skill route` does, then answers as that skill
for prompt, winner in want["route"].items():
    got, ran = complete(prompt, "auto")
    check(ran == winner, "auto on %r ran %r; cortiq skill route picks %r" % (prompt, ran, winner))
    if prompt in want["completions"]:
        check(got == want["completions"][prompt][winner], "auto on %r: %r" % (prompt, got))
    # a chat routes on its last user message, as `cortiq run --prompt TEXT --skill auto` on TEXT
    r = client.chat.completions.create(model="m", max_tokens=2, temperature=0, extra_body={"skill": "auto"},
                                       messages=[{"role": "user", "content": "hello there"},
                                                 {"role": "assistant", "content": "hi"},
                                                 {"role": "user", "content": prompt}])
    check(cmf(r).get("skill") == winner, "chat auto on %r ran %r, want %r" % (prompt, cmf(r).get("skill"), winner))

# streaming: the chunks carry the skill too
chunks = list(client.completions.create(model="m", prompt=next(iter(want["completions"])),
                                        max_tokens=mt, temperature=0, stream=True,
                                        extra_body={"skill": want["skills"][0]}))
p0 = next(iter(want["completions"]))
check("".join(c.choices[0].text for c in chunks if c.choices) == want["completions"][p0][want["skills"][0]],
      "streamed skill answer")
check(all(cmf(c).get("skill") == want["skills"][0] for c in chunks), "streamed chunks' cmf.skill")

# concurrent requests on different skills: each gets its own answer (as served alone above)
jobs = [(p, s) for p, v in want["completions"].items() for s in v] * 3
random.Random(5).shuffle(jobs)
with ThreadPoolExecutor(max_workers=8) as pool:
    got = list(pool.map(lambda ps: complete(*ps), jobs))
for (p, s), (text, ran) in zip(jobs, got):
    check(text == want["completions"][p][s] and ran == s,
          "concurrent %r skill %s: %r (ran %r) != %r" % (p, s, text, ran, want["completions"][p][s]))

# refusals: an unknown id is a 400 naming it and listing the file's skills
for bad in ["bogus", "", 7]:
    try:
        complete("x = 1", bad)
        check(False, "skill %r accepted" % (bad,))
    except openai.BadRequestError as e:
        err = e.body or {}
        check(e.status_code == 400 and err.get("param") == "skill", "skill %r: %r" % (bad, err))
        if bad == "bogus":
            check("bogus" in err.get("message", "") and all(s in err["message"] for s in want["skills"]),
                  "the 400 names the id and lists the skills: %r" % err.get("message"))

print("%d failure(s)" % len(fails))
sys.exit(1 if fails else 0)
