/* json_out.c - direct JSON text output. */
#include "convert/json_out.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(jout *o, size_t extra) {
    if (o->failed) return false;
    if (o->len + extra + 1 <= o->cap) return true;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            o->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *nb = realloc(o->buf, cap);
    if (!nb) {
        o->failed = true;
        return false;
    }
    o->buf = nb;
    o->cap = cap;
    return true;
}

void jo_rawn(jout *o, const char *s, size_t n) {
    if (!grow(o, n)) return;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = 0;
}

void jo_raw(jout *o, const char *s) {
    jo_rawn(o, s, strlen(s));
}

void jo_printf(jout *o, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        o->failed = true;
        return;
    }
    if ((size_t)n < sizeof tmp) {
        jo_rawn(o, tmp, (size_t)n);
        return;
    }
    if (!grow(o, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(o->buf + o->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->len += (size_t)n;
}

size_t utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

bool jo_str(jout *o, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq_len(u + i, n - i);
        if (!k) return false;
        i += k;
    }
    jo_rawn(o, "\"", 1);
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = u[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        jo_rawn(o, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"':
            jo_raw(o, "\\\"");
            break;
        case '\\':
            jo_raw(o, "\\\\");
            break;
        case '\n':
            jo_raw(o, "\\n");
            break;
        case '\r':
            jo_raw(o, "\\r");
            break;
        case '\t':
            jo_raw(o, "\\t");
            break;
        default:
            jo_printf(o, "\\u%04x", c);
            break;
        }
    }
    jo_rawn(o, s + run, n - run);
    jo_rawn(o, "\"", 1);
    return true;
}

char *jo_take(jout *o, size_t *len) {
    if (o->failed || !o->buf) {
        jo_free(o);
        return NULL;
    }
    char *b = o->buf;
    if (len) *len = o->len;
    o->buf = NULL;
    o->len = o->cap = 0;
    return b;
}

void jo_free(jout *o) {
    free(o->buf);
    o->buf = NULL;
    o->len = o->cap = 0;
}
