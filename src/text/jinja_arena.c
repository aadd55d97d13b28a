/* jinja_arena.c - the arena, error unwinding and byte buffers of the template interpreter. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "text/jinja_internal.h"

struct jx_chunk {
    jx_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define JX_CHUNK_MIN (64u * 1024u)

void jx_ctx_init(jx_ctx *c, size_t mem_limit) {
    memset(c, 0, sizeof *c);
    c->mem_limit = mem_limit;
}

void jx_ctx_release(jx_ctx *c) {
    jx_chunk *k = c->chunks;
    while (k) {
        jx_chunk *n = k->next;
        free(k);
        k = n;
    }
    c->chunks = NULL;
    c->mem_used = 0;
}

_Noreturn void jx_fail(jx_ctx *c, cmf_status st, int line, const char *fmt, ...) {
    c->status = st;
    c->line = line ? line : c->cur_line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    longjmp(c->jb, 1);
}

void *jx_alloc(jx_ctx *c, size_t n) {
    n = (n + 15u) & ~(size_t)15u;
    if (n == 0) n = 16;
    jx_chunk *k = c->chunks;
    if (!k || k->cap - k->used < n) {
        size_t cap = n > JX_CHUNK_MIN ? n : JX_CHUNK_MIN;
        size_t total;
        if (!ck_add_size(cap, sizeof(jx_chunk), &total) ||
            !ck_add_size(c->mem_used, total, &c->mem_used) || c->mem_used > c->mem_limit)
            jx_fail(c, CMF_E_LIMIT, 0, "template working memory exceeds %zu bytes", c->mem_limit);
        jx_chunk *nk = malloc(total);
        if (!nk) jx_fail(c, CMF_E_NOMEM, 0, "out of memory (%zu bytes)", total);
        nk->used = 0;
        nk->cap = cap;
        if (k && k->cap - k->used >= JX_CHUNK_MIN / 4 && cap > JX_CHUNK_MIN) {
            /* big one-off block: keep the current chunk in front for small allocations */
            nk->next = k->next;
            k->next = nk;
            nk->used = n;
            memset(nk->data, 0, n);
            return nk->data;
        }
        nk->next = k;
        c->chunks = nk;
        k = nk;
    }
    void *p = k->data + k->used;
    k->used += n;
    memset(p, 0, n);
    return p;
}

static void jb_reserve(jx_ctx *c, jbuf *b, size_t extra) {
    size_t need;
    if (!ck_add_size(b->n, extra, &need) || !ck_add_size(need, 1, &need))
        jx_fail(c, CMF_E_LIMIT, 0, "string size overflow");
    if (b->limit && need - 1 > b->limit)
        jx_fail(c, CMF_E_LIMIT, 0, "rendered output exceeds %zu bytes", b->limit);
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (!ck_mul_size(cap, 2, &cap)) jx_fail(c, CMF_E_LIMIT, 0, "string size overflow");
    }
    char *p = jx_alloc(c, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
}

void jb_put(jx_ctx *c, jbuf *b, const char *s, size_t n) {
    if (!n) return;
    jb_reserve(c, b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jb_puts(jx_ctx *c, jbuf *b, const char *s) {
    jb_put(c, b, s, strlen(s));
}

void jb_putc(jx_ctx *c, jbuf *b, char ch) {
    jb_put(c, b, &ch, 1);
}

void jb_printf(jx_ctx *c, jbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        jb_put(c, b, tmp, (size_t)n);
        return;
    }
    char *big = jx_alloc(c, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    jb_put(c, b, big, (size_t)n);
}

void jb_put_cp(jx_ctx *c, jbuf *b, uint32_t cp) {
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    jb_put(c, b, t, n);
}
