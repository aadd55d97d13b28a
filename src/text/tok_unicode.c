/* tok_unicode.c - UTF-8 coding and the character classes HF tokenizers takes from Rust's char
 * methods (is_whitespace, is_numeric, ...), answered with utf8proc's category tables. */
#include <utf8proc.h>

#include "text/tok_internal.h"

size_t tok_utf8_decode(const char *str, size_t len, size_t i, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[i];
    if (c < 0x80 || i + 1 >= len) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
        return 2;
    }
    if (c < 0xF0 || i + 2 >= len) {
        if (i + 2 >= len) {
            *cp = c;
            return 1;
        }
        *cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
        return 3;
    }
    if (i + 3 >= len) {
        *cp = c;
        return 1;
    }
    *cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
          (s[i + 3] & 0x3Fu);
    return 4;
}

size_t tok_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s[i], or 0 with *bad = length of the maximal invalid
 * prefix to replace by one U+FFFD (the WHATWG / Python "replace" rule). */
static size_t utf8_valid_at(const unsigned char *s, size_t len, size_t i, size_t *bad) {
    unsigned c = s[i];
    if (c < 0x80) return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    size_t k = 1;
    for (; k <= need; k++) {
        if (i + k >= len) break;
        unsigned b = s[i + k];
        unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h) break;
    }
    if (k > need) return need + 1;
    *bad = k;
    return 0;
}

bool tok_utf8_sanitize(const char *str, size_t len, tok_buf *out, bool *ok_alloc) {
    const unsigned char *s = (const unsigned char *)str;
    *ok_alloc = true;
    size_t i = 0, bad = 0;
    while (i < len) {
        size_t n = utf8_valid_at(s, len, i, &bad);
        if (!n) break;
        i += n;
    }
    if (i == len) return true;
    out->len = 0;
    if (!tok_buf_put(out, str, i)) {
        *ok_alloc = false;
        return false;
    }
    while (i < len) {
        size_t n = utf8_valid_at(s, len, i, &bad);
        bool ok = n ? tok_buf_put(out, str + i, n) : tok_buf_put(out, "\xEF\xBF\xBD", 3);
        if (!ok) {
            *ok_alloc = false;
            return false;
        }
        i += n ? n : bad;
    }
    return false;
}

bool tok_is_whitespace(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool tok_is_numeric(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool tok_is_punctuation(uint32_t c) {
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

bool tok_is_word_char(uint32_t c) {
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    if (c == 0x200C || c == 0x200D) return true;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC;
}
