#!/usr/bin/env python3
"""Build the chat-template parity cases (tests/fixtures/templates/cases.json.gz).

Every template under tests/fixtures/templates (*.jinja files and the chat_template of
tokenizer_config_*.json) is rendered with jinja2 set up the way Hugging Face transformers'
apply_chat_template sets it up: ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks),
the loopcontrols extension, a `generation` tag that renders its body, a tojson filter that
is json.dumps(ensure_ascii=False, indent, separators, sort_keys), the raise_exception and
strftime_now globals, and render(messages=, tools=, documents=, add_generation_prompt=,
**special_tokens, **kwargs). strftime_now reads a fixed instant (FIXED_NOW, UTC) so that
cases are reproducible; the C test passes the same instant to cmf_chat_template_set_now.

Where jinja2 raises, the case records the error and the C side must fail as well.

usage: pip install jinja2 && python3 tools/make_template_cases.py [--out FILE]
       python3 tools/make_template_cases.py --random-diff build/src/cortiq [--seed N --rounds N]
"""
import argparse
import datetime
import gzip
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "templates")
FIXED_NOW = 1767225600 + 86400 * 14 + 3600 * 9 + 60 * 30  # 2026-01-15 09:30:00 UTC

# Special tokens for the .jinja templates (their tokenizers are not in the tree).
SPECIAL = {
    "CohereForAI": {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>"},
    "NousResearch": {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"},
    "Qwen": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "deepseek": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "google": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "meetkai": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "meta": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "microsoft": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "mistralai": {"bos_token": "<s>", "eos_token": "</s>"},
    "synthetic": {"bos_token": "<s>", "eos_token": "</s>"},
}


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker when no tracking is active: {% generation %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    fixed = datetime.datetime.fromtimestamp(FIXED_NOW, tz=datetime.timezone.utc).replace(tzinfo=None)

    def strftime_now(fmt):
        return fixed.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# ---- conversations ----
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
            "days": {"type": "integer", "description": "Forecast days", "minimum": 1, "maximum": 7, "default": 1},
        }, "required": ["city"]},
        "return": {"type": "object", "description": "Weather report"},
    }},
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "filters": {"type": "array", "items": {"type": "string"}, "description": "Optional filters"},
            "limit": {"type": ["integer", "null"], "description": "Max results"},
            "ratio": {"type": "number", "description": "A float knob", "default": 0.5},
        }, "required": ["query"]},
    }},
]
CODE_TOOL = [{"type": "code_interpreter"}]
TOOLS_SIMPLE = TOOLS[:1]

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! How are you?"}
A1 = {"role": "assistant", "content": "I'm fine, thanks. How can I help?"}
U2 = {"role": "user", "content": "What's the weather in Paris?"}
TC_DICT = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call12345", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 2}}}]}
TC_DICT_CONTENT = {"role": "assistant", "content": "", "tool_calls": TC_DICT["tool_calls"]}
TC_STR = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call12345", "type": "function",
     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]}
TC_TWO = {"role": "assistant", "content": "Let me check two things.", "tool_calls": [
    {"id": "callAAAAA", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
    {"id": "callBBBBB", "type": "function", "function": {"name": "search", "arguments": {"query": "Paris events", "limit": 3}}}]}
TOOL_RESP = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
             "content": "{\"temperature\": 18.5, \"condition\": \"sunny\"}"}
TOOL_RESP_A = {"role": "tool", "tool_call_id": "callAAAAA", "content": "18 degrees"}
TOOL_RESP_B = {"role": "tool", "tool_call_id": "callBBBBB", "content": "Jazz festival tonight"}
A_FINAL = {"role": "assistant", "content": "It is 18.5 °C and sunny in Paris."}
A_REASON = {"role": "assistant", "content": "The answer is 4.", "reasoning_content": "2 + 2 = 4, simple arithmetic."}
A_THINK = {"role": "assistant", "content": "<think>\nLet me think about it.\n</think>\n\nThe answer is 4."}
U_MATH = {"role": "user", "content": "What is 2 + 2?"}
U_UNI = {"role": "user", "content": "  Ünïcödé ✓ — 日本語テキスト, emoji 😀, quotes \"double\" and 'single', "
         "backslash \\ tab\tand {{ braces }} {% not a tag %}\nsecond line  "}
A_UNI = {"role": "assistant", "content": "Réponse: «ok» <b>bold</b> & done\n"}
U_WS = {"role": "user", "content": "\n\n   padded message   \n"}

CONVERSATIONS = {
    "single_user": [U1],
    "system_user": [SYS, U1],
    "multi_turn": [SYS, U1, A1, U2],
    "multi_turn_nosys": [U1, A1, U2],
    "ends_with_assistant": [U1, A1],
    "tool_call_dict": [SYS, U2, TC_DICT, TOOL_RESP, A_FINAL],
    "tool_call_dict_pending": [U2, TC_DICT_CONTENT, TOOL_RESP],
    "tool_call_string": [U2, TC_STR, TOOL_RESP, A_FINAL],
    "two_tool_calls": [U2, TC_TWO, TOOL_RESP_A, TOOL_RESP_B, A_FINAL],
    "reasoning_content": [U_MATH, A_REASON, U2],
    "think_in_content": [SYS, U_MATH, A_THINK],
    "think_last": [U_MATH, A_THINK, U1, A_REASON],
    "unicode": [SYS, U_UNI, A_UNI, U_WS],
    "whitespace": [U_WS],
    "assistant_first": [A1, U1],
    "system_only": [SYS],
    "empty": [],
    "double_user": [U1, U2],
}

KWARG_VARIANTS = [
    ("plain", {}),
    ("thinking_off", {"enable_thinking": False}),
    ("thinking_on", {"enable_thinking": True}),
]


def template_sources():
    out = []
    for name in sorted(os.listdir(FIXTURES)):
        path = os.path.join(FIXTURES, name)
        if name.endswith(".jinja"):
            prefix = name.split("-")[0].split("_")[0]
            with open(path, encoding="utf-8") as f:
                src = f.read()
            out.append((name, src, dict(SPECIAL.get(prefix, {}))))
        elif name.startswith("tokenizer_config_") and name.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)
            special = {}
            for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
                v = cfg.get(k)
                if isinstance(v, dict):
                    v = v.get("content")
                if isinstance(v, str):
                    special[k] = v
            if isinstance(cfg.get("additional_special_tokens"), list):
                special["additional_special_tokens"] = cfg["additional_special_tokens"]
            out.append((name, cfg["chat_template"], special))
    return out


def render(env, src, messages, tools, documents, agp, kwargs):
    tpl = env.from_string(src)
    return tpl.render(messages=messages, tools=tools, documents=documents, add_generation_prompt=agp, **kwargs)


RAND_PIECES = ["a", "b", " ", "\n", "\t", "é", "日", "😀", "\"", "'", "\\", "{", "}", "%", "#", "<think>",
               "</think>", "<tool_response>", "</tool_response>", "  ", "-", ".", "?"]


def random_conversation(rng):
    def text():
        return "".join(rng.choice(RAND_PIECES) for _ in range(rng.randint(0, 12)))

    def args():
        d = {}
        for _ in range(rng.randint(0, 3)):
            d[rng.choice(["city", "q", "n", "x y", "é"])] = rng.choice(
                [text(), rng.randint(-5, 100), rng.random() * 100, True, None, [1, "a"], {"k": text()}])
        return json.dumps(d) if rng.random() < 0.4 else d

    conv = []
    for _ in range(rng.randint(0, 6)):
        role = rng.choice(["user", "assistant", "system", "tool", "user", "assistant"])
        r = rng.random()
        msg = {"role": role, "content": text() if r < 0.85 else (None if r < 0.95 else [{"type": "text", "text": text()}])}
        if role == "assistant" and rng.random() < 0.4:
            msg["tool_calls"] = [{"id": rng.choice(["abcdefghi", "call_1", "123456789"]), "type": "function",
                                  "function": {"name": rng.choice(["get_weather", "search"]), "arguments": args()}}
                                 for _ in range(rng.randint(1, 2))]
        if role == "assistant" and rng.random() < 0.3:
            msg["reasoning_content"] = text()
        if role == "tool":
            msg["tool_call_id"] = rng.choice(["abcdefghi", "call_1"])
        conv.append(msg)
    if conv and rng.random() < 0.5:
        conv[0] = {"role": "system", "content": text()}
    return conv


def random_diff(env, binary, seed, rounds):
    """Compare `cortiq chat-template` with jinja2 on random conversations (nothing is written)."""
    import random
    import subprocess
    import tempfile

    rng = random.Random(seed)
    total = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = {k: os.path.join(tmp, k) for k in ("m.json", "t.json", "tpl.jinja")}
        for _ in range(rounds):
            conv = random_conversation(rng)
            tools = rng.choice([None, TOOLS, TOOLS_SIMPLE])
            agp = rng.random() < 0.5
            extra = rng.choice([{}, {"enable_thinking": False}, {"enable_thinking": True}])
            with open(paths["m.json"], "w", encoding="utf-8") as f:
                json.dump(conv, f)
            with open(paths["t.json"], "w", encoding="utf-8") as f:
                json.dump(tools, f)
            for name, src, special in template_sources():
                kw = dict(special, **extra)
                total += 1
                try:
                    want, werr = render(env, src, conv, tools, None, agp, kw), None
                except Exception as e:
                    want, werr = None, f"{type(e).__name__}: {e}"
                with open(paths["tpl.jinja"], "w", encoding="utf-8") as f:
                    f.write(src)
                cmd = [binary, "chat-template", paths["tpl.jinja"], "--messages", paths["m.json"],
                       "--kwargs", json.dumps(kw), "--now", str(FIXED_NOW)]
                if tools:
                    cmd += ["--tools", paths["t.json"]]
                if agp:
                    cmd.append("--add-generation-prompt")
                r = subprocess.run(cmd, capture_output=True)
                got = r.stdout.decode("utf-8", "replace")
                if (werr and r.returncode == 0) or (not werr and (r.returncode != 0 or got != want)):
                    bad += 1
                    print(f"MISMATCH {name}: jinja2={werr or want[:200]!r} cortiq(rc={r.returncode})={got[:200]!r} "
                          f"conv={json.dumps(conv, ensure_ascii=False)[:300]}")
    print(f"random diff: {total} renders, {bad} mismatches")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(FIXTURES, "cases.json.gz"))
    ap.add_argument("--random-diff", metavar="CORTIQ_BIN",
                    help="instead of writing cases, compare this cortiq binary with jinja2 on random conversations")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    env = make_env()
    if args.random_diff:
        return random_diff(env, args.random_diff, args.seed, args.rounds)
    cases = []
    n_err = 0
    documents = [{"title": "Paris", "text": "Paris is the capital of France."},
                 {"title": "Weather", "text": "Sunny, 18 °C."}]
    for name, src, special in template_sources():
        uses_thinking = "enable_thinking" in src
        uses_docs = "documents" in src
        for conv_name, conv in CONVERSATIONS.items():
            uses_tools = any("tool" in m.get("role", "") or "tool_calls" in m for m in conv)
            tool_opts = [None, TOOLS, TOOLS_SIMPLE] if uses_tools or conv_name in ("system_user", "single_user") else [None]
            if name.startswith("meetkai") and conv_name == "single_user":
                tool_opts.append(TOOLS + CODE_TOOL)
            doc_opts = [None, documents] if uses_docs and conv_name in ("system_user", "multi_turn") else [None]
            kw_opts = KWARG_VARIANTS if uses_thinking else KWARG_VARIANTS[:1]
            for tools in tool_opts:
                for docs in doc_opts:
                    for agp in (False, True):
                        for kw_name, kw in kw_opts:
                            kwargs = dict(special)
                            kwargs.update(kw)
                            if name.startswith("meta") and kw_name == "plain" and conv_name == "single_user" and tools:
                                kwargs["tools_in_user_message"] = False
                                kwargs["date_string"] = "15 Jan 2026"
                            case = {
                                "template": name,
                                "conversation": conv_name,
                                "messages": json.dumps(conv, ensure_ascii=False),
                                "tools": json.dumps(tools, ensure_ascii=False) if tools is not None else None,
                                "documents": json.dumps(docs, ensure_ascii=False) if docs is not None else None,
                                "add_generation_prompt": agp,
                                "kwargs": json.dumps(kwargs, ensure_ascii=False),
                            }
                            try:
                                case["expected"] = render(env, src, json.loads(case["messages"]),
                                                          tools and json.loads(case["tools"]),
                                                          docs and json.loads(case["documents"]), agp,
                                                          json.loads(case["kwargs"]))
                            except Exception as e:  # jinja2 refused: the C side must refuse too
                                case["error"] = f"{type(e).__name__}: {e}"
                                n_err += 1
                            cases.append(case)
    # small templates, one construct each (snippets.txt, separated by "\n=====\n"), over one
    # conversation; the C test compiles each case's "source"
    with open(os.path.join(FIXTURES, "snippets.txt"), encoding="utf-8") as f:
        snippets = f.read().split("\n=====\n")
    conv = [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
            {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]
    for k, snip in enumerate(snippets):
        case = {"template": f"snippets.txt#{k}", "source": snip, "conversation": "snippet",
                "messages": json.dumps(conv), "tools": None, "documents": None,
                "add_generation_prompt": False, "kwargs": json.dumps({"bos_token": "<s>"})}
        try:
            case["expected"] = render(env, snip, conv, None, None, False, {"bos_token": "<s>"})
        except Exception as e:
            case["error"] = f"{type(e).__name__}: {e}"
            n_err += 1
        cases.append(case)
    doc = {"generator": "tools/make_template_cases.py", "jinja2": jinja2.__version__, "fixed_now": FIXED_NOW,
           "cases": cases}
    data = json.dumps(doc, ensure_ascii=False, indent=0).encode("utf-8")
    with gzip.GzipFile(args.out, "wb", mtime=0) as f:
        f.write(data)
    print(f"{len(cases)} cases ({n_err} expected errors) -> {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
