/* tok_normalize.c - the normalizers: Unicode forms (utf8proc), Lowercase, Replace, Prepend,
 * Strip, Sequence. Each maps a UTF-8 string to a new one; offsets are not tracked because only
 * ids and decoded text are observable here. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/tok_internal.h"

static bool all_ascii(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

static bool unicode_form(const char *s, size_t len, int opts, tok_buf *out) {
    if (all_ascii(s, len)) return tok_buf_put(out, s, len);
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | opts));
    if (n < 0) { /* cannot happen on sanitized input; keep the text as it is */
        free(dst);
        return tok_buf_put(out, s, len);
    }
    bool ok = tok_buf_put(out, dst, (size_t)n);
    free(dst);
    return ok;
}

static bool lowercase(const char *s, size_t len, tok_buf *out) {
    if (!tok_buf_reserve(out, len)) return false;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            char lc = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            if (!tok_buf_put(out, &lc, 1)) return false;
            i++;
            continue;
        }
        uint32_t cp;
        size_t n = tok_utf8_decode(s, len, i, &cp);
        i += n;
        if (cp == 0x130) { /* the one unconditional multi-char lowercase mapping */
            if (!tok_buf_put(out, "i\xCC\x87", 3)) return false;
            continue;
        }
        char enc[4];
        size_t m = tok_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), enc);
        if (!tok_buf_put(out, enc, m)) return false;
    }
    return true;
}

size_t tok_norm_cap(size_t len) {
    return len > (SIZE_MAX - TOK_NORM_GROWTH_BASE) / TOK_NORM_GROWTH
               ? SIZE_MAX
               : TOK_NORM_GROWTH * len + TOK_NORM_GROWTH_BASE;
}

/* A step's result: done, out of memory, or its output would pass the cap. */
typedef enum { NORM_OK, NORM_NOMEM, NORM_OVER } norm_rc;

/* Replace stops as soon as what it appends would pass `room` bytes. */
static norm_rc replace(const tok_normalizer *n, const char *s, size_t len, size_t room,
                       tok_buf *out) {
    size_t pos = 0, last = SIZE_MAX, ms, me, prev = 0, base = out->len;
    while (tok_pattern_next(&n->pat, s, len, &pos, &last, &ms, &me)) {
        size_t used = out->len - base;
        if (ms - prev > room - used || n->content_len > room - used - (ms - prev)) return NORM_OVER;
        if (!tok_buf_put(out, s + prev, ms - prev) || !tok_buf_put(out, n->content, n->content_len))
            return NORM_NOMEM;
        prev = me;
    }
    if (len - prev > room - (out->len - base)) return NORM_OVER;
    return tok_buf_put(out, s + prev, len - prev) ? NORM_OK : NORM_NOMEM;
}

static bool strip(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    size_t b = 0, e = len;
    if (n->left) {
        while (b < e) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s, len, b, &cp);
            if (!tok_is_whitespace(cp)) break;
            b += k;
        }
    }
    if (n->right) {
        while (e > b) {
            size_t k = e - 1;
            while (k > b && ((unsigned char)s[k] & 0xC0) == 0x80)
                k--;
            uint32_t cp;
            tok_utf8_decode(s, len, k, &cp);
            if (!tok_is_whitespace(cp)) break;
            e = k;
        }
    }
    return tok_buf_put(out, s + b, e - b);
}

/* Drop marks: every M* category for HF StripAccents (is_combining_mark), only nonspacing Mn for
 * the second half of Bert's strip_accents (is_mark_nonspacing). */
static bool drop_marks(const char *s, size_t len, bool all_marks, tok_buf *out) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s, len, i, &cp);
        utf8proc_category_t c =
            cp < 0x300 ? UTF8PROC_CATEGORY_LU : utf8proc_category((utf8proc_int32_t)cp);
        bool mark = c == UTF8PROC_CATEGORY_MN ||
                    (all_marks && (c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME));
        if (!mark) {
            if (!tok_buf_put(out, s + i, k)) return false;
        }
        i += k;
    }
    return true;
}

static bool is_cjk_ideograph(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Control/format/private-use/surrogate, except the three whitespace controls. Unassigned (Cn)
 * code points are kept, as HF keeps them. */
static bool is_other(uint32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
           k == UTF8PROC_CATEGORY_CO;
}

/* BertNormalizer: clean_text (drop NUL, U+FFFD and controls; whitespace -> ' '), spaces around CJK
 * ideographs, strip_accents (NFD then drop Mn; defaults to `lowercase`), lowercase. */
static bool bert(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    tok_buf a = {0}, b = {0};
    bool ok = tok_buf_reserve(&a, len);
    for (size_t i = 0; ok && i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s, len, i, &cp);
        i += k;
        if (n->clean_text) {
            if (cp == 0 || cp == 0xFFFD || is_other(cp)) continue;
            if (tok_is_whitespace(cp)) cp = ' ';
        }
        char enc[4];
        size_t m = tok_utf8_encode(cp, enc);
        if (n->chinese_chars && is_cjk_ideograph(cp))
            ok = tok_buf_put(&a, " ", 1) && tok_buf_put(&a, enc, m) && tok_buf_put(&a, " ", 1);
        else
            ok = tok_buf_put(&a, enc, m);
    }
    if (ok && n->strip_accents) {
        ok = tok_buf_reserve(&b, a.len) && unicode_form(a.p, a.len, UTF8PROC_DECOMPOSE, &b);
        a.len = 0;
        ok = ok && tok_buf_reserve(&a, b.len) && drop_marks(b.p, b.len, false, &a);
    }
    if (ok)
        ok = n->lowercase ? lowercase(a.p ? a.p : "", a.len, out) : tok_buf_put(out, a.p, a.len);
    tok_buf_free(&a);
    tok_buf_free(&b);
    return ok;
}

/* The normalizers that grow text by a bounded factor at most: held to the cap after the step. */
static bool bounded_step(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    switch (n->type) {
    case TOK_NORM_NFC:
        return unicode_form(s, len, UTF8PROC_COMPOSE, out);
    case TOK_NORM_NFD:
        return unicode_form(s, len, UTF8PROC_DECOMPOSE, out);
    case TOK_NORM_NFKC:
        return unicode_form(s, len, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_NFKD:
        return unicode_form(s, len, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_LOWERCASE:
        return lowercase(s, len, out);
    case TOK_NORM_STRIP:
        return strip(n, s, len, out);
    case TOK_NORM_STRIP_ACCENTS:
        return drop_marks(s, len, true, out);
    case TOK_NORM_BERT:
        return bert(n, s, len, out);
    default:
        return false;
    }
}

/* One normalizer appending to out; `room`: the most it may append (every intermediate text of a
 * Sequence gets the same cap, so chained steps cannot multiply past it). */
static norm_rc norm_step(const tok_normalizer *n, const char *s, size_t len, size_t room,
                         tok_buf *out) {
    switch (n->type) {
    case TOK_NORM_REPLACE:
        return replace(n, s, len, room, out);
    case TOK_NORM_PREPEND:
        if (len && n->content_len > room) return NORM_OVER;
        if (len && !tok_buf_put(out, n->content, n->content_len)) return NORM_NOMEM;
        return tok_buf_put(out, s, len) ? NORM_OK : NORM_NOMEM;
    case TOK_NORM_SEQUENCE: {
        tok_buf a = {0}, b = {0};
        if (!tok_buf_put(&a, s, len)) return NORM_NOMEM;
        norm_rc rc = NORM_OK;
        for (size_t i = 0; rc == NORM_OK && i < n->nkids; i++) {
            b.len = 0;
            rc = tok_buf_reserve(&b, 0) ? norm_step(n->kids[i], a.p, a.len, room, &b) : NORM_NOMEM;
            tok_buf t = a;
            a = b;
            b = t;
        }
        if (rc == NORM_OK && !tok_buf_put(out, a.p, a.len)) rc = NORM_NOMEM;
        tok_buf_free(&a);
        tok_buf_free(&b);
        return rc;
    }
    default: {
        size_t base = out->len;
        if (!bounded_step(n, s, len, out)) return NORM_NOMEM;
        return out->len - base > room ? NORM_OVER : NORM_OK;
    }
    }
}

bool tok_normalize(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    size_t cap = tok_norm_cap(len);
    norm_rc rc = norm_step(n, s, len, cap, out);
    if (rc == NORM_OVER) tok_norm_fail_growth(len, cap);
    return rc == NORM_OK;
}
