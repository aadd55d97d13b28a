/* gguf_tokenizer.c - an HF tokenizer.json built from GGUF tokenizer metadata.
 *
 * "gpt2" vocabularies are byte-level BPE: vocab, merges and token types are in the file;
 * the pre-tokenizer is chosen from tokenizer.ggml.pre (the split regex llama.cpp applies
 * for that name, written the way HF's original tokenizer.json writes it).
 * "llama" vocabularies are SentencePiece BPE: the file has pieces and scores but no merges,
 * so merges are rebuilt the way HF's SentencePiece conversion does: every split of a piece
 * into two pieces of the vocabulary, ranked by the merged piece's vocabulary order (pieces
 * are score-ordered; Gemma's whitespace-run pieces rank first, longest left part first,
 * which is how Google's tokenizer.json orders them). Documented in docs/CONVERT.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/checked.h"
#include "common/err.h"
#include "convert/json_out.h"
#include "cortiq/gguf.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct tok_str {
    const char *s;
    size_t len;
} tok_str;

typedef struct vocab {
    size_t n;
    tok_str *tok;
    int *type;
    char **owned;  /* rewritten strings (freed at the end) */
    size_t cap;    /* hash slots (power of two) */
    uint64_t seed; /* per-build hash seed: crafted token sets cannot force collisions */
    int64_t *slot; /* token id or -1; the LAST id of a duplicated string wins */
} vocab;

static uint64_t fnv(uint64_t seed, const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL ^ seed;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    h ^= h >> 29; /* the slot index uses the low bits: fold the high ones in */
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

static int64_t vocab_find(const vocab *v, const char *s, size_t n) {
    for (uint64_t i = fnv(v->seed, s, n) & (v->cap - 1);; i = (i + 1) & (v->cap - 1)) {
        int64_t id = v->slot[i];
        if (id < 0) return -1;
        if (v->tok[id].len == n && memcmp(v->tok[id].s, s, n) == 0) return id;
    }
}

static bool vocab_index(vocab *v) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v->seed = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)v;
    v->cap = 16;
    while (v->cap < v->n * 2)
        v->cap *= 2;
    v->slot = malloc(v->cap * sizeof *v->slot);
    if (!v->slot) return false;
    for (size_t i = 0; i < v->cap; i++)
        v->slot[i] = -1;
    for (size_t id = 0; id < v->n; id++) {
        uint64_t i = fnv(v->seed, v->tok[id].s, v->tok[id].len) & (v->cap - 1);
        for (;; i = (i + 1) & (v->cap - 1)) {
            int64_t o = v->slot[i];
            if (o < 0 || (v->tok[o].len == v->tok[id].len &&
                          memcmp(v->tok[o].s, v->tok[id].s, v->tok[id].len) == 0))
                break;
        }
        v->slot[i] = (int64_t)id;
    }
    return true;
}

static void vocab_free(vocab *v) {
    if (v->owned)
        for (size_t i = 0; i < v->n; i++)
            free(v->owned[i]);
    free(v->owned);
    free(v->tok);
    free(v->type);
    free(v->slot);
}

static cmf_status vocab_load(const cmf_gguf *g, bool spm, vocab *v, cmf_err *err) {
    const char *ctx = cmf_gguf_name(g);
    const cmf_gguf_kv *toks = cmf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != CMF_GGUF_ARRAY || toks->arr_type != CMF_GGUF_STRING ||
        toks->arr_len == 0)
        return cmf_err_set(err, CMF_E_NOT_FOUND, ctx,
                           "tokenizer.ggml.tokens missing or not a string array");
    if (toks->arr_len > (1u << 24))
        return cmf_err_set(err, CMF_E_LIMIT, ctx, "%llu tokens exceed 2^24",
                           (unsigned long long)toks->arr_len);
    const cmf_gguf_kv *types = cmf_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (types && (types->type != CMF_GGUF_ARRAY || types->arr_len != toks->arr_len ||
                  types->arr_type == CMF_GGUF_STRING))
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "tokenizer.ggml.token_type is not a numeric array of %llu entries",
                           (unsigned long long)toks->arr_len);
    v->n = (size_t)toks->arr_len;
    v->tok = calloc(v->n, sizeof *v->tok);
    v->type = calloc(v->n, sizeof *v->type);
    v->owned = calloc(v->n, sizeof *v->owned);
    if (!v->tok || !v->type || !v->owned)
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "out of memory");
    for (size_t i = 0; i < v->n; i++) {
        int64_t t = TT_NORMAL;
        if (types) cmf_gguf_arr_int(types, i, &t);
        v->type[i] = (int)t;
        v->tok[i].s = toks->arr_str[i].ptr;
        v->tok[i].len = (size_t)toks->arr_str[i].len;
        /* llama.cpp's SentencePiece export writes the spaces of user-defined pieces as ' '
         * where the model (and HF) spell them U+2581: spell them back */
        if (spm && t == TT_USER && memchr(v->tok[i].s, ' ', v->tok[i].len)) {
            char *o = malloc(v->tok[i].len * 3 + 1);
            if (!o) return cmf_err_set(err, CMF_E_NOMEM, ctx, "out of memory");
            size_t k = 0;
            for (size_t j = 0; j < v->tok[i].len; j++) {
                if (v->tok[i].s[j] == ' ') {
                    memcpy(o + k, "\xe2\x96\x81", 3);
                    k += 3;
                } else {
                    o[k++] = v->tok[i].s[j];
                }
            }
            v->owned[i] = o;
            v->tok[i].s = o;
            v->tok[i].len = k;
        }
    }
    if (!vocab_index(v)) return cmf_err_set(err, CMF_E_NOMEM, ctx, "out of memory");
    return CMF_OK;
}

/* ---- merges for SentencePiece vocabularies ---- */
typedef struct merge {
    uint32_t merged, left, right;
    uint32_t llen, rlen; /* in code points */
    bool user;
} merge;

static size_t cp_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static int cmp_merge(const void *a, const void *b) {
    const merge *x = a, *y = b;
    if (x->user != y->user) return x->user ? -1 : 1;
    if (x->user) { /* whitespace-run pieces: longest left part, then longest right part first */
        if (x->llen != y->llen) return x->llen > y->llen ? -1 : 1;
        if (x->rlen != y->rlen) return x->rlen > y->rlen ? -1 : 1;
    }
    if (x->merged != y->merged) return x->merged < y->merged ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return x->right < y->right ? -1 : x->right > y->right;
}

/* Pieces longer than this get no merges: real vocabularies stay far below (Gemma 3: 48 bytes),
 * and the cap keeps the split search linear in the file size for hostile input. */
#define MAX_MERGED_PIECE 256

static bool piece_ok(const vocab *v, int64_t id) {
    return id >= 0 && (v->type[id] == TT_NORMAL || v->type[id] == TT_USER);
}

static cmf_status spm_merges(const vocab *v, merge **out, size_t *count, const char *ctx,
                             cmf_err *err) {
    size_t n = 0, cap = 1024;
    merge *m = malloc(cap * sizeof *m);
    if (!m) return cmf_err_set(err, CMF_E_NOMEM, ctx, "out of memory");
    for (size_t id = 0; id < v->n; id++) {
        if (!piece_ok(v, (int64_t)id) || v->tok[id].len > MAX_MERGED_PIECE ||
            vocab_find(v, v->tok[id].s, v->tok[id].len) != (int64_t)id)
            continue;
        const char *s = v->tok[id].s;
        size_t len = v->tok[id].len;
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue; /* split on code points only */
            int64_t l = vocab_find(v, s, k), r = vocab_find(v, s + k, len - k);
            if (!piece_ok(v, l) || !piece_ok(v, r)) continue;
            if (n == cap) {
                merge *nm = realloc(m, cap * 2 * sizeof *m);
                if (!nm) {
                    free(m);
                    return cmf_err_set(err, CMF_E_NOMEM, ctx, "out of memory");
                }
                m = nm;
                cap *= 2;
            }
            m[n++] = (merge){(uint32_t)id,
                             (uint32_t)l,
                             (uint32_t)r,
                             (uint32_t)cp_count(s, k),
                             (uint32_t)cp_count(s + k, len - k),
                             v->type[id] == TT_USER};
        }
    }
    qsort(m, n, sizeof *m, cmp_merge);
    *out = m;
    *count = n;
    return CMF_OK;
}

/* ---- JSON pieces ---- */
static cmf_status put_tok(jout *o, const vocab *v, size_t id, const char *ctx, cmf_err *err) {
    if (!jo_str(o, v->tok[id].s, v->tok[id].len))
        return cmf_err_set(err, CMF_E_PARSE, ctx, "token %zu is not valid UTF-8", id);
    return CMF_OK;
}

static cmf_status put_added(jout *o, const vocab *v, bool spm, const char *ctx, cmf_err *err) {
    jo_raw(o, "\"added_tokens\":[");
    bool first = true;
    for (size_t i = 0; i < v->n; i++) {
        int t = v->type[i];
        bool special = t == TT_CONTROL || (spm && t == TT_UNKNOWN);
        if (!special && t != TT_USER) continue;
        jo_printf(o, "%s{\"id\":%zu,\"content\":", first ? "" : ",", i);
        cmf_status st = put_tok(o, v, i, ctx, err);
        if (st) return st;
        jo_printf(
            o,
            ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":%s}",
            special ? "true" : "false");
        first = false;
    }
    jo_raw(o, "],");
    return CMF_OK;
}

static cmf_status put_vocab(jout *o, const vocab *v, const char *ctx, cmf_err *err) {
    jo_raw(o, "\"vocab\":{");
    bool first = true;
    for (size_t i = 0; i < v->n; i++) {
        if (vocab_find(v, v->tok[i].s, v->tok[i].len) != (int64_t)i)
            continue; /* a duplicate: the last id wins */
        if (!first) jo_raw(o, ",");
        cmf_status st = put_tok(o, v, i, ctx, err);
        if (st) return st;
        jo_printf(o, ":%zu", i);
        first = false;
    }
    jo_raw(o, "}");
    return CMF_OK;
}

/* TemplateProcessing adding BOS and/or EOS around each sequence. */
static void put_template(jout *o, const vocab *v, int64_t bos, int64_t eos) {
    const char *seq[2] = {"A", "B"};
    jo_raw(o, "{\"type\":\"TemplateProcessing\"");
    for (int pair = 0; pair < 2; pair++) {
        jo_raw(o, pair ? ",\"pair\":[" : ",\"single\":[");
        bool first = true;
        for (int s = 0; s <= pair; s++) {
            if (bos >= 0) {
                jo_raw(o, first ? "" : ",");
                jo_raw(o, "{\"SpecialToken\":{\"id\":");
                jo_str(o, v->tok[bos].s, v->tok[bos].len);
                jo_printf(o, ",\"type_id\":%d}}", s);
                first = false;
            }
            jo_printf(o, "%s{\"Sequence\":{\"id\":\"%s\",\"type_id\":%d}}", first ? "" : ",",
                      seq[s], s);
            first = false;
            if (eos >= 0) {
                jo_raw(o, ",{\"SpecialToken\":{\"id\":");
                jo_str(o, v->tok[eos].s, v->tok[eos].len);
                jo_printf(o, ",\"type_id\":%d}}", s);
            }
        }
        jo_raw(o, "]");
    }
    jo_raw(o, ",\"special_tokens\":{");
    int64_t ids[2] = {bos, eos};
    bool first = true;
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0 || (k == 1 && ids[1] == ids[0])) continue;
        const tok_str *t = &v->tok[ids[k]];
        if (!first) jo_raw(o, ",");
        jo_str(o, t->s, t->len);
        jo_raw(o, ":{\"id\":");
        jo_str(o, t->s, t->len);
        jo_printf(o, ",\"ids\":[%lld],\"tokens\":[", (long long)ids[k]);
        jo_str(o, t->s, t->len);
        jo_raw(o, "]}");
        first = false;
    }
    jo_raw(o, "}}");
}

/* BOS/EOS ids the post-processor adds (-1: none), from add_bos_token/add_eos_token. */
static void special_adds(const cmf_gguf *g, const vocab *v, bool bos_default, int64_t *bos,
                         int64_t *eos) {
    bool add_bos = bos_default, add_eos = false;
    cmf_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos);
    cmf_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &add_eos);
    *bos = *eos = -1;
    int64_t id;
    if (add_bos && cmf_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &id) && id >= 0 &&
        (uint64_t)id < v->n)
        *bos = id;
    if (add_eos && cmf_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &id) && id >= 0 &&
        (uint64_t)id < v->n)
        *eos = id;
}

/* The split regexes, as HF tokenizer.json files of those families write them. */
#define RE_LLAMA3                                                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|" \
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define RE_QWEN2                                                                                                              \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|" \
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

typedef struct bpe_pre {
    const char *names; /* space-separated tokenizer.ggml.pre values */
    const char *normalizer, *pre_tokenizer;
    bool ignore_merges;
} bpe_pre;

static const bpe_pre k_pre[] = {
    {" default gpt2 mpt olmo jais ", "null",
     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}",
     false},
    {" smollm starcoder refact command-r codeshell exaone minerva ", "null",
     "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}]}",
     false},
    {" llama-bpe llama3 ", "null",
     "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" RE_LLAMA3
     "\"},\"behavior\":\"Isolated\",\"invert\":false},"
     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}",
     true},
    {" qwen2 stablelm2 ", "{\"type\":\"NFC\"}",
     "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" RE_QWEN2
     "\"},\"behavior\":\"Isolated\",\"invert\":false},"
     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]}",
     false},
};

static const bpe_pre *find_pre(const char *name) {
    char key[128];
    snprintf(key, sizeof key, " %s ", name);
    for (size_t i = 0; i < sizeof k_pre / sizeof *k_pre; i++)
        if (strstr(k_pre[i].names, key)) return &k_pre[i];
    return NULL;
}

static cmf_status build_gpt2(const cmf_gguf *g, jout *o, cmf_err *err) {
    const char *ctx = cmf_gguf_name(g);
    const char *pre_name = cmf_gguf_get_str(g, "tokenizer.ggml.pre");
    if (!pre_name) pre_name = "default";
    const bpe_pre *pre = find_pre(pre_name);
    if (!pre)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, ctx,
                           "tokenizer.ggml.pre '%s' is not a pre-tokenizer this converter knows",
                           pre_name);
    const cmf_gguf_kv *mkv = cmf_gguf_find_kv(g, "tokenizer.ggml.merges");
    if (!mkv || mkv->type != CMF_GGUF_ARRAY || mkv->arr_type != CMF_GGUF_STRING)
        return cmf_err_set(err, CMF_E_NOT_FOUND, ctx,
                           "tokenizer.ggml.merges missing or not a string array");
    vocab v = {0};
    cmf_status st = vocab_load(g, false, &v, err);
    if (st) goto done;
    jo_raw(o, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,");
    if ((st = put_added(o, &v, false, ctx, err))) goto done;
    jo_printf(o, "\"normalizer\":%s,\"pre_tokenizer\":%s,", pre->normalizer, pre->pre_tokenizer);
    int64_t bos, eos;
    special_adds(g, &v, false, &bos, &eos);
    const char *bl =
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}";
    if (bos < 0 && eos < 0) {
        jo_printf(o, "\"post_processor\":%s,", bl);
    } else {
        jo_printf(o, "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[%s,", bl);
        put_template(o, &v, bos, eos);
        jo_raw(o, "]},");
    }
    jo_raw(
        o,
        "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},");
    jo_printf(
        o,
        "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
        "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":%s,",
        pre->ignore_merges ? "true" : "false");
    if ((st = put_vocab(o, &v, ctx, err))) goto done;
    jo_raw(o, ",\"merges\":[");
    for (uint64_t i = 0; i < mkv->arr_len; i++) {
        const cmf_gguf_str *m = &mkv->arr_str[i];
        const char *sp = memchr(m->ptr, ' ', (size_t)m->len);
        if (!sp || sp == m->ptr || sp + 1 == m->ptr + m->len) {
            st = cmf_err_set(err, CMF_E_PARSE, ctx,
                             "merge %llu is not two tokens separated by a space",
                             (unsigned long long)i);
            goto done;
        }
        jo_raw(o, i ? ",[" : "[");
        size_t ll = (size_t)(sp - m->ptr);
        if (!jo_str(o, m->ptr, ll) ||
            (jo_raw(o, ","), !jo_str(o, sp + 1, (size_t)m->len - ll - 1))) {
            st = cmf_err_set(err, CMF_E_PARSE, ctx, "merge %llu is not valid UTF-8",
                             (unsigned long long)i);
            goto done;
        }
        jo_raw(o, "]");
    }
    jo_raw(o, "]}}");
done:
    vocab_free(&v);
    return st;
}

static cmf_status build_spm(const cmf_gguf *g, jout *o, cmf_err *err) {
    const char *ctx = cmf_gguf_name(g);
    vocab v = {0};
    merge *m = NULL;
    size_t nm = 0;
    cmf_status st = vocab_load(g, true, &v, err);
    if (st || (st = spm_merges(&v, &m, &nm, ctx, err))) goto done;
    bool prefix = true;
    cmf_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &prefix);
    jo_raw(o, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,");
    if ((st = put_added(o, &v, true, ctx, err))) goto done;
    const char *repl =
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}";
    if (prefix)
        jo_printf(
            o,
            "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},%s]},",
            repl);
    else
        jo_printf(o, "\"normalizer\":%s,", repl);
    jo_raw(o, "\"pre_tokenizer\":null,");
    int64_t bos, eos;
    special_adds(g, &v, true, &bos, &eos);
    jo_raw(o, "\"post_processor\":");
    if (bos < 0 && eos < 0)
        jo_raw(o, "null");
    else
        put_template(o, &v, bos, eos);
    jo_raw(
        o,
        ",\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},"
        "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}");
    if (prefix) jo_raw(o, ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}");
    jo_raw(o, "]},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":");
    int64_t unk;
    if (cmf_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &unk) && unk >= 0 &&
        (uint64_t)unk < v.n) {
        if ((st = put_tok(o, &v, (size_t)unk, ctx, err))) goto done;
    } else {
        jo_raw(o, "null");
    }
    jo_raw(
        o,
        ",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":true,\"byte_fallback\":true,"
        "\"ignore_merges\":false,");
    if ((st = put_vocab(o, &v, ctx, err))) goto done;
    jo_raw(o, ",\"merges\":[");
    for (size_t i = 0; i < nm; i++) {
        jo_raw(o, i ? ",[" : "[");
        jo_str(o, v.tok[m[i].left].s, v.tok[m[i].left].len);
        jo_raw(o, ",");
        jo_str(o, v.tok[m[i].right].s, v.tok[m[i].right].len);
        jo_raw(o, "]");
    }
    jo_raw(o, "]}}");
done:
    free(m);
    vocab_free(&v);
    return st;
}

cmf_status cmf_gguf_tokenizer_json(const cmf_gguf *g, char **out, size_t *len, cmf_err *err) {
    *out = NULL;
    if (len) *len = 0;
    const char *model = cmf_gguf_get_str(g, "tokenizer.ggml.model");
    if (!model)
        return cmf_err_set(err, CMF_E_NOT_FOUND, cmf_gguf_name(g), "no tokenizer.ggml.model");
    jout o = {0};
    cmf_status st;
    if (strcmp(model, "gpt2") == 0)
        st = build_gpt2(g, &o, err);
    else if (strcmp(model, "llama") == 0)
        st = build_spm(g, &o, err);
    else
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, cmf_gguf_name(g),
                         "tokenizer.ggml.model '%s' is not supported (gpt2 and llama are)", model);
    if (st) {
        jo_free(&o);
        return st;
    }
    *out = jo_take(&o, len);
    if (!*out) return cmf_err_set(err, CMF_E_NOMEM, cmf_gguf_name(g), "out of memory");
    return CMF_OK;
}
