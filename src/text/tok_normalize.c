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

static bool replace(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    size_t pos = 0, last = SIZE_MAX, ms, me, prev = 0;
    while (tok_pattern_next(&n->pat, s, len, &pos, &last, &ms, &me)) {
        if (!tok_buf_put(out, s + prev, ms - prev) || !tok_buf_put(out, n->content, n->content_len))
            return false;
        prev = me;
    }
    return tok_buf_put(out, s + prev, len - prev);
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
            while (k > b && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
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
        utf8proc_category_t c = cp < 0x300 ? UTF8PROC_CATEGORY_LU : utf8proc_category((utf8proc_int32_t)cp);
        bool mark = c == UTF8PROC_CATEGORY_MN || (all_marks && (c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME));
        if (!mark) {
            if (!tok_buf_put(out, s + i, k)) return false;
        }
        i += k;
    }
    return true;
}

static bool is_cjk_ideograph(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
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
    if (ok) ok = n->lowercase ? lowercase(a.p ? a.p : "", a.len, out) : tok_buf_put(out, a.p, a.len);
    tok_buf_free(&a);
    tok_buf_free(&b);
    return ok;
}

bool tok_normalize(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    switch (n->type) {
    case TOK_NORM_NFC: return unicode_form(s, len, UTF8PROC_COMPOSE, out);
    case TOK_NORM_NFD: return unicode_form(s, len, UTF8PROC_DECOMPOSE, out);
    case TOK_NORM_NFKC: return unicode_form(s, len, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_NFKD: return unicode_form(s, len, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_LOWERCASE: return lowercase(s, len, out);
    case TOK_NORM_REPLACE: return replace(n, s, len, out);
    case TOK_NORM_PREPEND:
        if (len && !tok_buf_put(out, n->content, n->content_len)) return false;
        return tok_buf_put(out, s, len);
    case TOK_NORM_STRIP: return strip(n, s, len, out);
    case TOK_NORM_STRIP_ACCENTS: return drop_marks(s, len, true, out);
    case TOK_NORM_BERT: return bert(n, s, len, out);
    case TOK_NORM_SEQUENCE: {
        tok_buf a = {0}, b = {0};
        if (!tok_buf_put(&a, s, len)) return false;
        bool ok = true;
        for (size_t i = 0; ok && i < n->nkids; i++) {
            b.len = 0;
            ok = tok_buf_reserve(&b, 0) && tok_normalize(n->kids[i], a.p, a.len, &b);
            tok_buf t = a;
            a = b;
            b = t;
        }
        ok = ok && tok_buf_put(out, a.p, a.len);
        tok_buf_free(&a);
        tok_buf_free(&b);
        return ok;
    }
    }
    return false;
}
