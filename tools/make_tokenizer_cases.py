#!/usr/bin/env python3
"""Build the tokenizer parity fixtures in tests/fixtures/tokenizer/ with the HF `tokenizers` package.

For every tokenizer (the real ones in ../shared/tokenizers plus small synthetic ones trained here to
exercise the components the real ones do not use) it writes
  <name>.tokenizer.json.xz   the tokenizer itself (so the repository is self-contained)
  <name>.cases.jsonl.gz      one JSON object per corpus line:
      {"text", "ids" (add_special_tokens=True), "ids_plain" (False),
       "decoded" (decode(ids, skip_special_tokens=False)), "decoded_skip" (skip=True)}
Usage: pip install tokenizers && python3 tools/make_tokenizer_cases.py [--shared DIR] [--out DIR]
"""
import argparse
import gzip
import json
import lzma
import os
import sys

from tokenizers import Tokenizer, models, trainers, pre_tokenizers, normalizers, decoders, processors
from tokenizers import AddedToken, Regex


def corpus(special):
    """Corpus lines; `special` is a list of added-token strings of the tokenizer to place inline."""
    prose = [
        "The quick brown fox jumps over the lazy dog.",
        "Hello, world! How are you doing today? I'm fine, thanks; we'll see.",
        "It's a truth universally acknowledged, that a single man in possession of a good fortune, "
        "must be in want of a wife.",
        "  Leading spaces and trailing spaces   ",
        "Don't, won't, can't, shouldn't've, y'all'd, I'M SHOUTING, THEY'LL, 'S 'T 'RE",
        "e-mail: someone@example.com, URL: https://example.org/path?q=1&r=2#frag",
        "Prices: $1,234.56 or €99,99 — 50% off!!! (limited) [offer] {now}",
    ]
    code = [
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
        "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
        "for (size_t i = 0; i < n; ++i) { a[i] += b[i] * 3.14159f; } // loop",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
        "const x = () => { return [1, 2, 3].map(v => v ** 2); };\r\n",
        "    \t  mixed\tindent\n\t\t\tdeep",
    ]
    cjk = [
        "你好，世界！今天天气很好。我们去公园散步吧。",
        "日本語のテキスト：ひらがな、カタカナ、漢字。東京は大きい都市です。",
        "한국어 문장입니다. 안녕하세요!",
        "中文English混合mixed文本123数字",
    ]
    emoji = [
        "I love 🍕 and 🍣! 😀😃😄",
        "Family: 👨‍👩‍👧‍👦 and flags 🇫🇷🇯🇵 and skin tones 👍🏽👍🏿",
        "ZWJ: 🏳️‍🌈 🧑‍💻 👩‍❤️‍💋‍👨 keycap 1️⃣ #️⃣",
        "Math: ∑ᵢ xᵢ² ≤ ∞, ∀ε>0 ∃δ; α β γ Ω",
    ]
    rtl = [
        "مرحبا بالعالم! هذه جملة باللغة العربية.",
        "שלום עולם, זה טקסט בעברית.",
        "Mixed: English العربية עברית 123",
    ]
    combining = [
        "Cafe\u0301 vs Café; e\u0308 vs ë; A\u030a vs Å vs \u212b",
        "Zalgo: Z\u0351\u036b\u0343a\u0352l\u0350g\u0344o\u0313",
        "ﬁ ﬂ ﬃ ① ² ½ ｆｕｌｌｗｉｄｔｈ Ｈｅｌｌｏ ㍿",
        "İstanbul ΣΊΣΥΦΟΣ Straße ǅ ΑΒΓ",
        "Vietnamese: Tiếng Việt có dấu. Thai: ภาษาไทย Hindi: हिन्दी",
    ]
    whitespace = [
        "", " ", "  ", "          ", "\n", "\n\n\n", "\t", "\t\t \t", " \n \n ", "\r\n\r\n",
        "a" + " " * 37 + "b", "x\n\n\n\n\n\n\n\n\ny", "end with spaces    ", "\u00a0nbsp\u00a0\u2003em\u3000ideo",
    ]
    digits = [
        "1234567890", "3.14159265358979323846264338327950288419716939937510",
        "Year 2024, 1,000,000 and 0.001; phone +1-555-0100", "٠١٢٣٤٥٦٧٨٩ and ０１２３",
        "0" * 41, "12 345 6789 00000000001", "0" * 27 + "\n12 345 6789",
    ]
    misc = [
        "a", "A", "!", "'", "'s", "hello", "HELLO", "<", ">", "<>", "<|", "|>",
        "\u0000null\u0001ctl\u007f", "\ufeffBOM", "\ufffd replacement", "Long" * 40,
        "supercalifragilisticexpialidocious antidisestablishmentarianism",
        "snake_case_identifier camelCaseIdentifier SCREAMING_CASE kebab-case",
        "\u2581already\u2581metaspace\u2581", "ĠĠbyteĠlevelĊchars",
    ]
    lines = prose + code + cjk + emoji + rtl + combining + whitespace + digits + misc
    for i, sp in enumerate(special[:12]):
        lines.append(f"{sp}Hello{sp} world {sp}")
        lines.append(f"pre {sp}\n{sp}{sp}post")
    if special:
        lines.append("".join(special[:20]))
        lines.append(" " + special[0] + " x " + special[-1] + " ")
    # Longer mixed paragraphs exercise the cache and long words.
    lines.append(" ".join(prose + cjk + rtl))
    lines.append("\n".join(code + emoji + digits))
    return lines


def write_cases(tok, name, out, special, with_json=True):
    lines = corpus(special)
    path = os.path.join(out, f"{name}.cases.jsonl.gz")
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        for t in lines:
            ids = tok.encode(t, add_special_tokens=True).ids
            plain = tok.encode(t, add_special_tokens=False).ids
            rec = {"text": t, "ids": ids, "ids_plain": plain,
                   "decoded": tok.decode(ids, skip_special_tokens=False),
                   "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
            f.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
    if with_json:
        js = tok.to_str().encode("utf-8")
        with open(os.path.join(out, f"{name}.tokenizer.json.xz"), "wb") as f:
            f.write(lzma.compress(js, preset=9 | lzma.PRESET_EXTREME))
    print(f"{name}: {len(lines)} cases", file=sys.stderr)


def train_text():
    base = corpus([])
    return base * 3


def train_bpe(tok, vocab_size, alphabet=None, special=(), **kw):
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                             special_tokens=list(special), initial_alphabet=alphabet or [], **kw)
    tok.train_from_iterator(train_text(), trainer=tr)
    return tok


def synth_gpt2():
    """GPT-2 / SmolLM2 style: ByteLevel pre-tokenizer with its regex and add_prefix_space."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    train_bpe(tok, 600, pre_tokenizers.ByteLevel.alphabet(), ["<|endoftext|>", "<|im_start|>"])
    tok.add_tokens([AddedToken("<tool>", normalized=False, special=False)])
    return tok


def synth_sentencepiece():
    """Llama-2 style: Metaspace prepend_scheme=first, byte_fallback, SP decoders, BOS/EOS template."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    alphabet = [f"<0x{b:02X}>" for b in range(256)]
    train_bpe(tok, 700, None, ["<unk>", "<s>", "</s>"] + alphabet)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="\u2581", prepend_scheme="first"),
                                     decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B:1 </s>:1",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok


def synth_components():
    """Normalizers and pre-tokenizers the real tokenizers do not use, plus subword prefix/suffix."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFD(), normalizers.Lowercase(), normalizers.Replace(Regex(r"\d{4,}"), "<num>"),
        normalizers.Replace("\t", "    "), normalizers.Strip(), normalizers.Prepend("^")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True)])
    train_bpe(tok, 800, None, ["[UNK]", "[CLS]", "[SEP]"],
              continuing_subword_prefix="##", end_of_word_suffix="</w>")
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tok.add_tokens([AddedToken("<L>", lstrip=True, normalized=False),
                    AddedToken("<R>", rstrip=True, normalized=False),
                    AddedToken("word", single_word=True, normalized=True),
                    AddedToken("ＮＯＲＭ", normalized=True)])
    tok.add_special_tokens([AddedToken("<eot>", lstrip=True, rstrip=True)])
    return tok


def synth_split(behavior, invert, extra_pre=None):
    """Split pre-tokenizer with one behavior; ByteLevel without regex turns pieces into byte chars."""
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.normalizer = normalizers.NFKC()
    pre = [pre_tokenizers.Split(Regex(r"(?i:'s|'t|'re)|\p{L}+(?=\s)|\p{N}{1,2}|\s+"), behavior=behavior,
                                invert=invert)]
    if extra_pre is not None:
        pre.append(extra_pre)
    pre.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    tok.decoder = decoders.ByteLevel()
    train_bpe(tok, 500, pre_tokenizers.ByteLevel.alphabet(), ["<|s|>"])
    tok.post_processor = processors.TemplateProcessing(single="<|s|> $A <|s|>",
                                                       special_tokens=[("<|s|>", 0)])
    return tok


def synth_whitespace():
    """Whitespace pre-tokenizer, NFKD, Metaspace never/no-split, and Replace+Strip decoders."""
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.NFKD()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                 pre_tokenizers.Metaspace(prepend_scheme="always", split=False)])
    alphabet = [f"<0x{b:02X}>" for b in range(256)]
    train_bpe(tok, 600, None, alphabet)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    return tok


def synth_nfc_metaspace_never():
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never", split=True)
    alphabet = [f"<0x{b:02X}>" for b in range(256)]
    train_bpe(tok, 600, None, alphabet)
    tok.decoder = decoders.Metaspace(prepend_scheme="never")
    return tok


def synth_wordpiece():
    """BERT style: BertNormalizer, BertPreTokenizer, WordPiece model and decoder, BertProcessing."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tr = trainers.WordPieceTrainer(vocab_size=900, min_frequency=1, show_progress=False,
                                   special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(train_text(), trainer=tr)
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def synth_wordpiece_cased():
    """WordPiece with accents kept, StripAccents after NFD, WhitespaceSplit, no cleanup."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="@@", max_input_chars_per_word=12))
    tok.normalizer = normalizers.Sequence([
        normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                   lowercase=False),
        normalizers.NFD(), normalizers.StripAccents()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tr = trainers.WordPieceTrainer(vocab_size=700, min_frequency=1, show_progress=False,
                                   special_tokens=["[UNK]"], continuing_subword_prefix="@@")
    tok.train_from_iterator(train_text(), trainer=tr)
    tok.decoder = decoders.WordPiece(prefix="@@", cleanup=False)
    return tok


def synth_unigram():
    """SentencePiece unigram: NFKC, Metaspace, Viterbi over scores, unk fusing, Metaspace decoder."""
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    tr = trainers.UnigramTrainer(vocab_size=600, show_progress=False, special_tokens=["<unk>", "<s>", "</s>"],
                                 unk_token="<unk>")
    tok.train_from_iterator(train_text(), trainer=tr)
    tok.decoder = decoders.Metaspace(prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>",
                                                       special_tokens=[("<s>", 1), ("</s>", 2)])
    return tok


def synth_unigram_bytes():
    """Unigram with byte_fallback (byte pieces appended to a trained vocabulary), no pre-split."""
    base = synth_unigram()
    d = json.loads(base.to_str())
    vocab = d["model"]["vocab"]
    have = {p for p, _ in vocab}
    vocab += [[f"<0x{b:02X}>", -20.0] for b in range(256) if f"<0x{b:02X}>" not in have]
    d["model"]["byte_fallback"] = True
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return Tokenizer.from_str(json.dumps(d))


def synth_wordlevel():
    """WordLevel: whole words from the vocabulary or [UNK]; Whitespace, Lowercase, Strip."""
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tr = trainers.WordLevelTrainer(vocab_size=300, min_frequency=1, show_progress=False, special_tokens=["[UNK]"])
    tok.train_from_iterator(train_text(), trainer=tr)
    return tok


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared", "tokenizers"))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "tokenizer"))
    ap.add_argument("--no-json", action="store_true", help="write only the case files")
    ap.add_argument("--only", help="make only this tokenizer's files")
    ap.add_argument("--real", action="append", default=[], metavar="NAME=PATH",
                    help="a real model's tokenizer.json, e.g. smollm2=/tmp/hf_smollm2/tokenizer.json "
                         "(the one transformers makes from the SmolLM2 GGUF: tools/gguf_to_hf.py)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    real = {name: os.path.join(a.shared, name, "tokenizer.json") for name in ("qwen3", "llama3_1", "gemma3")}
    for spec in a.real:
        name, path = spec.split("=", 1)
        real[name] = path
    for name, p in real.items():
        if a.only and a.only != name:
            continue
        if not os.path.exists(p):
            print(f"{name}: {p} absent, skipped", file=sys.stderr)
            continue
        tok = Tokenizer.from_file(p)
        d = json.load(open(p, encoding="utf-8"))
        special = [t["content"] for t in d["added_tokens"]]
        special = special[:4] + special[-4:] if len(special) > 8 else special
        write_cases(tok, name, a.out, special, with_json=False)
        if not a.no_json:
            with open(p, "rb") as f:
                raw = f.read()
            with open(os.path.join(a.out, f"{name}.tokenizer.json.xz"), "wb") as f:
                f.write(lzma.compress(raw, preset=9))
    synth = {
        "synth_gpt2": synth_gpt2,
        "synth_sentencepiece": synth_sentencepiece,
        "synth_components": synth_components,
        "synth_whitespace": synth_whitespace,
        "synth_nfc_metaspace_never": synth_nfc_metaspace_never,
        "synth_split_removed": lambda: synth_split("removed", False),
        "synth_split_isolated_inv": lambda: synth_split("isolated", True),
        "synth_split_prev": lambda: synth_split("merged_with_previous", False),
        "synth_split_next": lambda: synth_split("merged_with_next", False, pre_tokenizers.Digits(False)),
        "synth_split_contig": lambda: synth_split("contiguous", True),
        "synth_wordpiece": synth_wordpiece,
        "synth_wordpiece_cased": synth_wordpiece_cased,
        "synth_unigram": synth_unigram,
        "synth_unigram_bytes": synth_unigram_bytes,
        "synth_wordlevel": synth_wordlevel,
    }
    for name, fn in synth.items():
        if a.only and a.only != name:
            continue
        tok = fn()
        special = [t.content for t in tok.get_added_tokens_decoder().values()]
        write_cases(tok, name, a.out, special, with_json=not a.no_json)


if __name__ == "__main__":
    main()
