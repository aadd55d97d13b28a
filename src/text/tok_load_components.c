/* tok_load_components.c - build normalizer / pre-tokenizer / decoder / post-processor trees from
 * their tokenizer.json objects. Unknown component types are refused (CMF_E_UNSUPPORTED) rather
 * than skipped, because skipping one would silently change the ids. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "text/tok_internal.h"
#include "text/tok_json.h"

#define CTX "tokenizer.json"

static const char GPT2_REGEX[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static bool jbool(tjv o, const char *k, bool def) {
    return tj_bool(tj_get(o, k), def);
}

static cmf_status jdup(tjv o, const char *k, const char *what, char **out, size_t *len,
                       cmf_err *err) {
    size_t n;
    const char *src = tj_str(tj_get(o, k), &n);
    if (!src) return cmf_err_set(err, CMF_E_PARSE, CTX, "%s: \"%s\" must be a string", what, k);
    char *p = malloc(n + 1);
    if (!p) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    memcpy(p, src, n);
    p[n] = 0;
    *out = p;
    *len = n;
    return CMF_OK;
}

static cmf_status load_pattern(tjv o, const char *what, tok_pattern *p, cmf_err *err) {
    tjv pat = tj_get(o, "pattern");
    memset(p, 0, sizeof *p);
    if (tj_is(tj_get(pat, "String"), TJ_STR))
        return jdup(pat, "String", what, &p->lit, &p->lit_len, err);
    size_t rl;
    const char *r = tj_str(tj_get(pat, "Regex"), &rl);
    if (r) return tok_regex_new(r, rl, &p->re, err);
    return cmf_err_set(err, CMF_E_PARSE, CTX,
                       "%s: \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}", what);
}

static cmf_status load_repl_char(tjv o, const char *what, char repl[4], size_t *len, cmf_err *err) {
    size_t n;
    const char *s = tj_str(tj_get(o, "replacement"), &n);
    if (!s) {
        s = "\xE2\x96\x81";
        n = 3;
    }
    uint32_t cp;
    if (n == 0 || n > 4 || tok_utf8_decode(s, n, 0, &cp) != n)
        return cmf_err_set(err, CMF_E_PARSE, CTX, "%s: \"replacement\" must be one character",
                           what);
    memcpy(repl, s, n);
    *len = n;
    return CMF_OK;
}

static cmf_status load_prepend(tjv o, const char *what, tok_prepend *out, cmf_err *err) {
    tjv v = tj_get(o, "prepend_scheme");
    if (tj_is(v, TJ_STR)) {
        if (tj_streq(v, "always"))
            *out = TOK_PREPEND_ALWAYS;
        else if (tj_streq(v, "first"))
            *out = TOK_PREPEND_FIRST;
        else if (tj_streq(v, "never"))
            *out = TOK_PREPEND_NEVER;
        else
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "%s: prepend_scheme unknown (always, first, never)", what);
        return CMF_OK;
    }
    /* legacy files: add_prefix_space */
    *out = jbool(o, "add_prefix_space", true) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    return CMF_OK;
}

static cmf_status load_behavior(tjv o, const char *what, tok_behavior def, tok_behavior *out,
                                cmf_err *err) {
    tjv v = tj_get(o, "behavior");
    if (tj_is_null_or_none(v)) {
        *out = def;
        return CMF_OK;
    }
    static const struct {
        const char *name;
        tok_behavior b;
    } names[] = {{"Removed", TOK_SPLIT_REMOVED},
                 {"Isolated", TOK_SPLIT_ISOLATED},
                 {"MergedWithPrevious", TOK_SPLIT_MERGED_PREV},
                 {"MergedWithNext", TOK_SPLIT_MERGED_NEXT},
                 {"Contiguous", TOK_SPLIT_CONTIGUOUS}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (tj_streq(v, names[i].name)) {
            *out = names[i].b;
            return CMF_OK;
        }
    return cmf_err_set(err, CMF_E_PARSE, CTX,
                       "%s: behavior unknown (Removed, Isolated, MergedWithPrevious, "
                       "MergedWithNext, Contiguous)",
                       what);
}

/* The "type" member copied into buf (NUL-terminated, truncated); NULL if absent. */
static const char *type_of(tjv j, char buf[64]) {
    size_t n;
    const char *t = tj_str(tj_get(j, "type"), &n);
    if (!t) return NULL;
    if (n > 63) n = 63;
    memcpy(buf, t, n);
    buf[n] = 0;
    return buf;
}

/* ---------------- normalizers ---------------- */

void tok_normalizer_free(tok_normalizer *n) {
    if (!n) return;
    tok_pattern_free(&n->pat);
    free(n->content);
    for (size_t i = 0; i < n->nkids; i++)
        tok_normalizer_free(n->kids[i]);
    free(n->kids);
    free(n);
}

cmf_status tok_load_normalizer(tjv j, tok_normalizer **out, cmf_err *err) {
    *out = NULL;
    char tb[64];
    const char *t = type_of(j, tb);
    if (!t) return cmf_err_set(err, CMF_E_PARSE, CTX, "normalizer without a \"type\"");
    tok_normalizer *n = calloc(1, sizeof *n);
    if (!n) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    cmf_status st = CMF_OK;
    if (!strcmp(t, "NFC"))
        n->type = TOK_NORM_NFC;
    else if (!strcmp(t, "NFD"))
        n->type = TOK_NORM_NFD;
    else if (!strcmp(t, "NFKC"))
        n->type = TOK_NORM_NFKC;
    else if (!strcmp(t, "NFKD"))
        n->type = TOK_NORM_NFKD;
    else if (!strcmp(t, "Lowercase"))
        n->type = TOK_NORM_LOWERCASE;
    else if (!strcmp(t, "Replace")) {
        n->type = TOK_NORM_REPLACE;
        st = load_pattern(j, "normalizer Replace", &n->pat, err);
        if (!st) st = jdup(j, "content", "normalizer Replace", &n->content, &n->content_len, err);
    } else if (!strcmp(t, "Prepend")) {
        n->type = TOK_NORM_PREPEND;
        st = jdup(j, "prepend", "normalizer Prepend", &n->content, &n->content_len, err);
    } else if (!strcmp(t, "Strip")) {
        n->type = TOK_NORM_STRIP;
        n->left = jbool(j, "strip_left", true);
        n->right = jbool(j, "strip_right", true);
    } else if (!strcmp(t, "StripAccents")) {
        n->type = TOK_NORM_STRIP_ACCENTS;
    } else if (!strcmp(t, "BertNormalizer")) {
        n->type = TOK_NORM_BERT;
        n->clean_text = jbool(j, "clean_text", true);
        n->chinese_chars = jbool(j, "handle_chinese_chars", true);
        n->lowercase = jbool(j, "lowercase", true);
        n->strip_accents = jbool(j, "strip_accents", n->lowercase); /* null: follow lowercase */
    } else if (!strcmp(t, "Sequence")) {
        n->type = TOK_NORM_SEQUENCE;
        tjv a = tj_get(j, "normalizers");
        if (!tj_is(a, TJ_ARR))
            st = cmf_err_set(err, CMF_E_PARSE, CTX,
                             "normalizer Sequence: \"normalizers\" must be an array");
        size_t cnt = tj_size(a);
        if (!st && cnt && !(n->kids = calloc(cnt, sizeof *n->kids)))
            st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        for (tjv k = tj_first(a); !st && k.d; k = tj_next(k)) {
            st = tok_load_normalizer(k, &n->kids[n->nkids], err);
            if (!st) n->nkids++;
        }
    } else {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, CTX, "normalizer type \"%s\" is not supported", t);
    }
    if (st) {
        tok_normalizer_free(n);
        return st;
    }
    *out = n;
    return CMF_OK;
}

/* ---------------- pre-tokenizers ---------------- */

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    tok_pattern_free(&p->pat);
    for (size_t i = 0; i < p->nkids; i++)
        tok_pretok_free(p->kids[i]);
    free(p->kids);
    free(p);
}

static cmf_status pretok_one(tjv j, tok_pretok **out, cmf_err *err);

/* Sequence children are flattened into one level (nested sequences compose the same way). */
static cmf_status pretok_flatten(tjv j, tok_pretok *seq, size_t depth, cmf_err *err) {
    if (depth > 16)
        return cmf_err_set(err, CMF_E_LIMIT, CTX, "pre_tokenizer Sequence nested deeper than 16");
    tjv a = tj_get(j, "pretokenizers");
    if (!tj_is(a, TJ_ARR))
        return cmf_err_set(err, CMF_E_PARSE, CTX,
                           "pre_tokenizer Sequence: \"pretokenizers\" must be an array");
    for (tjv k = tj_first(a); k.d; k = tj_next(k)) {
        char tb[64];
        const char *t = type_of(k, tb);
        if (t && !strcmp(t, "Sequence")) {
            cmf_status st = pretok_flatten(k, seq, depth + 1, err);
            if (st) return st;
            continue;
        }
        tok_pretok **q = realloc(seq->kids, (seq->nkids + 1) * sizeof *q);
        if (!q) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        seq->kids = q;
        cmf_status st = pretok_one(k, &seq->kids[seq->nkids], err);
        if (st) return st;
        seq->nkids++;
    }
    return CMF_OK;
}

static cmf_status pretok_one(tjv j, tok_pretok **out, cmf_err *err) {
    *out = NULL;
    char tb[64];
    const char *t = type_of(j, tb);
    if (!t) return cmf_err_set(err, CMF_E_PARSE, CTX, "pre_tokenizer without a \"type\"");
    tok_pretok *p = calloc(1, sizeof *p);
    if (!p) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    cmf_status st = CMF_OK;
    if (!strcmp(t, "ByteLevel")) {
        p->type = TOK_PRE_BYTELEVEL;
        p->add_prefix_space = jbool(j, "add_prefix_space", true);
        p->use_regex = jbool(j, "use_regex", true);
        if (p->use_regex) st = tok_regex_new(GPT2_REGEX, sizeof GPT2_REGEX - 1, &p->pat.re, err);
    } else if (!strcmp(t, "Split")) {
        p->type = TOK_PRE_SPLIT;
        st = load_pattern(j, "pre_tokenizer Split", &p->pat, err);
        if (!st)
            st = load_behavior(j, "pre_tokenizer Split", TOK_SPLIT_ISOLATED, &p->behavior, err);
        p->invert = jbool(j, "invert", false);
    } else if (!strcmp(t, "Metaspace")) {
        p->type = TOK_PRE_METASPACE;
        st = load_repl_char(j, "pre_tokenizer Metaspace", p->repl, &p->repl_len, err);
        if (!st) st = load_prepend(j, "pre_tokenizer Metaspace", &p->prepend, err);
        p->split = jbool(j, "split", true);
    } else if (!strcmp(t, "Digits")) {
        p->type = TOK_PRE_DIGITS;
        p->individual_digits = jbool(j, "individual_digits", false);
    } else if (!strcmp(t, "Punctuation")) {
        p->type = TOK_PRE_PUNCTUATION;
        st = load_behavior(j, "pre_tokenizer Punctuation", TOK_SPLIT_ISOLATED, &p->behavior, err);
    } else if (!strcmp(t, "Whitespace")) {
        p->type = TOK_PRE_WHITESPACE;
    } else if (!strcmp(t, "WhitespaceSplit")) {
        p->type = TOK_PRE_WHITESPACE_SPLIT;
    } else if (!strcmp(t, "BertPreTokenizer")) {
        p->type = TOK_PRE_BERT;
    } else if (!strcmp(t, "Sequence")) {
        p->type = TOK_PRE_SEQUENCE;
        st = pretok_flatten(j, p, 0, err);
    } else {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, CTX, "pre_tokenizer type \"%s\" is not supported",
                         t);
    }
    if (st) {
        tok_pretok_free(p);
        return st;
    }
    *out = p;
    return CMF_OK;
}

cmf_status tok_load_pretok(tjv j, tok_pretok **out, cmf_err *err) {
    return pretok_one(j, out, err);
}

/* ---------------- decoders ---------------- */

void tok_decoder_free(tok_decoder *d) {
    if (!d) return;
    tok_pattern_free(&d->pat);
    free(d->content);
    for (size_t i = 0; i < d->nkids; i++)
        tok_decoder_free(d->kids[i]);
    free(d->kids);
    free(d);
}

cmf_status tok_load_decoder(tjv j, tok_decoder **out, cmf_err *err) {
    *out = NULL;
    char tb[64];
    const char *t = type_of(j, tb);
    if (!t) return cmf_err_set(err, CMF_E_PARSE, CTX, "decoder without a \"type\"");
    tok_decoder *d = calloc(1, sizeof *d);
    if (!d) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    cmf_status st = CMF_OK;
    if (!strcmp(t, "ByteLevel"))
        d->type = TOK_DEC_BYTELEVEL;
    else if (!strcmp(t, "ByteFallback"))
        d->type = TOK_DEC_BYTEFALLBACK;
    else if (!strcmp(t, "Fuse"))
        d->type = TOK_DEC_FUSE;
    else if (!strcmp(t, "Strip")) {
        d->type = TOK_DEC_STRIP;
        st = jdup(j, "content", "decoder Strip", &d->content, &d->content_len, err);
        int64_t a = -1, b = -1;
        tj_int(tj_get(j, "start"), &a);
        tj_int(tj_get(j, "stop"), &b);
        if (!st && (a < 0 || b < 0))
            st = cmf_err_set(err, CMF_E_PARSE, CTX,
                             "decoder Strip: start/stop must be non-negative integers");
        if (!st) {
            d->start = (size_t)a;
            d->stop = (size_t)b;
        }
    } else if (!strcmp(t, "Replace")) {
        d->type = TOK_DEC_REPLACE;
        st = load_pattern(j, "decoder Replace", &d->pat, err);
        if (!st) st = jdup(j, "content", "decoder Replace", &d->content, &d->content_len, err);
    } else if (!strcmp(t, "Metaspace")) {
        d->type = TOK_DEC_METASPACE;
        st = load_repl_char(j, "decoder Metaspace", d->repl, &d->repl_len, err);
        if (!st) st = load_prepend(j, "decoder Metaspace", &d->prepend, err);
    } else if (!strcmp(t, "BPEDecoder")) {
        d->type = TOK_DEC_BPE;
        if (tj_get(j, "suffix").d)
            st = jdup(j, "suffix", "decoder BPEDecoder", &d->content, &d->content_len, err);
        else if (!(d->content = malloc(5)))
            st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        else {
            memcpy(d->content, "</w>", 5);
            d->content_len = 4;
        }
    } else if (!strcmp(t, "WordPiece")) {
        d->type = TOK_DEC_WORDPIECE;
        d->cleanup = jbool(j, "cleanup", true);
        if (tj_get(j, "prefix").d)
            st = jdup(j, "prefix", "decoder WordPiece", &d->content, &d->content_len, err);
        else if (!(d->content = malloc(3)))
            st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        else {
            memcpy(d->content, "##", 3);
            d->content_len = 2;
        }
    } else if (!strcmp(t, "Sequence")) {
        d->type = TOK_DEC_SEQUENCE;
        tjv a = tj_get(j, "decoders");
        if (!tj_is(a, TJ_ARR))
            st = cmf_err_set(err, CMF_E_PARSE, CTX,
                             "decoder Sequence: \"decoders\" must be an array");
        size_t cnt = tj_size(a);
        if (!st && cnt && !(d->kids = calloc(cnt, sizeof *d->kids)))
            st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        for (tjv k = tj_first(a); !st && k.d; k = tj_next(k)) {
            st = tok_load_decoder(k, &d->kids[d->nkids], err);
            if (!st) d->nkids++;
        }
    } else {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, CTX, "decoder type \"%s\" is not supported", t);
    }
    if (st) {
        tok_decoder_free(d);
        return st;
    }
    *out = d;
    return CMF_OK;
}

/* ---------------- post-processors ---------------- */

static cmf_status ids_append(int32_t **v, size_t *n, const int32_t *src, size_t cnt, bool front) {
    if (cnt == 0) return CMF_OK;
    int32_t *q = realloc(*v, (*n + cnt) * sizeof *q);
    if (!q) return CMF_E_NOMEM;
    if (front) {
        memmove(q + cnt, q, *n * sizeof *q);
        memcpy(q, src, cnt * sizeof *q);
    } else {
        memcpy(q + *n, src, cnt * sizeof *q);
    }
    *v = q;
    *n += cnt;
    return CMF_OK;
}

static cmf_status pair_token(tjv j, const char *k, const cmf_tokenizer *tok, int32_t *id,
                             const char *what, cmf_err *err) {
    tjv a = tj_get(j, k);
    int64_t v = -1;
    if (tj_size(a) != 2 || !tj_int(tj_at(a, 1), &v))
        return cmf_err_set(err, CMF_E_PARSE, CTX, "%s: \"%s\" must be [token, id]", what, k);
    if (v < 0 || (size_t)v >= tok->nids)
        return cmf_err_set(err, CMF_E_PARSE, CTX, "%s: id %lld out of range", what, (long long)v);
    *id = (int32_t)v;
    return CMF_OK;
}

cmf_status tok_load_post(tjv j, const cmf_tokenizer *tok, tok_post *out, cmf_err *err) {
    char tb[64];
    const char *t = type_of(j, tb);
    if (!t) return cmf_err_set(err, CMF_E_PARSE, CTX, "post_processor without a \"type\"");
    if (!strcmp(t, "ByteLevel")) return CMF_OK;
    if (!strcmp(t, "Sequence")) {
        tjv a = tj_get(j, "processors");
        if (!tj_is(a, TJ_ARR))
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "post_processor Sequence: \"processors\" must be an array");
        for (tjv k = tj_first(a); k.d; k = tj_next(k)) {
            tok_post p = {0};
            cmf_status st = tok_load_post(k, tok, &p, err);
            /* a later processor wraps the output of the earlier ones */
            if (!st && (ids_append(&out->pre, &out->npre, p.pre, p.npre, true) ||
                        ids_append(&out->post, &out->npost, p.post, p.npost, false)))
                st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
            free(p.pre);
            free(p.post);
            if (st) return st;
        }
        return CMF_OK;
    }
    if (!strcmp(t, "RobertaProcessing") || !strcmp(t, "BertProcessing")) {
        int32_t cls, sep;
        cmf_status st = pair_token(j, "cls", tok, &cls, t, err);
        if (!st) st = pair_token(j, "sep", tok, &sep, t, err);
        if (!st && (ids_append(&out->pre, &out->npre, &cls, 1, false) ||
                    ids_append(&out->post, &out->npost, &sep, 1, false)))
            st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        return st;
    }
    if (strcmp(t, "TemplateProcessing") != 0)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, CTX,
                           "post_processor type \"%s\" is not supported", t);
    tjv single = tj_get(j, "single"), specials = tj_get(j, "special_tokens");
    if (!tj_is(single, TJ_ARR))
        return cmf_err_set(err, CMF_E_PARSE, CTX,
                           "TemplateProcessing: \"single\" must be an array");
    bool seen_a = false;
    size_t i = 0;
    for (tjv it = tj_first(single); it.d; it = tj_next(it), i++) {
        if (tj_is(tj_get(it, "Sequence"), TJ_OBJ)) {
            if (seen_a)
                return cmf_err_set(err, CMF_E_PARSE, CTX,
                                   "TemplateProcessing: two sequences in \"single\"");
            seen_a = true;
            continue;
        }
        size_t nl;
        const char *name = tj_str(tj_get(tj_get(it, "SpecialToken"), "id"), &nl);
        if (!name)
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "TemplateProcessing: item %zu is neither SpecialToken nor Sequence",
                               i);
        tjv ids = {NULL, 0};
        for (tjv e = tj_first(specials); e.d; e = tj_next(e)) {
            size_t kl;
            const char *key = tj_key(e, &kl);
            if (kl == nl && memcmp(key, name, nl) == 0) {
                ids = tj_get(e, "ids");
                break;
            }
        }
        if (!tj_is(ids, TJ_ARR))
            return cmf_err_set(
                err, CMF_E_PARSE, CTX,
                "TemplateProcessing: special token \"%.*s\" missing from special_tokens",
                (int)(nl > 64 ? 64 : nl), name);
        for (tjv v = tj_first(ids); v.d; v = tj_next(v)) {
            int64_t id = -1;
            tj_int(v, &id);
            if (id < 0 || id > INT32_MAX)
                return cmf_err_set(err, CMF_E_PARSE, CTX,
                                   "TemplateProcessing: special token \"%.*s\" has a bad id",
                                   (int)(nl > 64 ? 64 : nl), name);
            int32_t id32 = (int32_t)id;
            if (seen_a ? ids_append(&out->post, &out->npost, &id32, 1, false)
                       : ids_append(&out->pre, &out->npre, &id32, 1, false))
                return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        }
    }
    if (!seen_a)
        return cmf_err_set(err, CMF_E_PARSE, CTX, "TemplateProcessing: \"single\" has no sequence");
    return CMF_OK;
}
