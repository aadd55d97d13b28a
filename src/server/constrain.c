/* constrain.c - token texts and the grammar's logits mask (see constrain.h). */
#include "server/constrain.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/ctx.h"

static pthread_mutex_t g_table_mu = PTHREAD_MUTEX_INITIALIZER;

static bool whole_utf8(const char *s, size_t n) {
    /* the decoder writes U+FFFD for a partial byte sequence */
    for (size_t i = 0; i + 3 <= n; i++)
        if ((uint8_t)s[i] == 0xEF && (uint8_t)s[i + 1] == 0xBF && (uint8_t)s[i + 2] == 0xBD)
            return false;
    return true;
}

/* A token's text inside a text: decode(ref, id) less decode(ref), so that a decoder that drops
 * the leading space of a text's first token does not hide the space. */
static char *token_bytes(const cmf_tokenizer *tok, int32_t ref, const char *ref_text,
                         size_t ref_len, int32_t id, size_t *len) {
    char *s = NULL;
    cmf_err err;
    *len = 0;
    if (cmf_tokenizer_is_special(tok, id)) return NULL;
    int32_t ids[2] = {ref, id};
    if (ref >= 0) {
        if (cmf_tokenizer_decode(tok, ids, 2, true, &s, len, &err)) return NULL;
        if (*len < ref_len || memcmp(s, ref_text, ref_len)) {
            free(s);
            *len = 0;
            return NULL;
        }
        memmove(s, s + ref_len, *len - ref_len + 1);
        *len -= ref_len;
    } else if (cmf_tokenizer_decode(tok, &id, 1, true, &s, len, &err))
        return NULL;
    if (!whole_utf8(s, *len)) *len = 0;
    return s;
}

static srv_tok_table *build(const cmf_tokenizer *tok, uint32_t vocab) {
    srv_tok_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n = vocab;
    t->off = calloc(vocab, sizeof *t->off);
    t->len = calloc(vocab, sizeof *t->len);
    size_t cap = (size_t)vocab * 8 + 64, used = 0;
    t->blob = malloc(cap);
    if (!t->off || !t->len || !t->blob) goto fail;
    int32_t ref = cmf_tokenizer_token_to_id(tok, "a", 1);
    if (ref < 0)
        ref = cmf_tokenizer_token_to_id(tok,
                                        "\xe2\x96\x81"
                                        "a",
                                        4);
    char *ref_text = NULL;
    size_t ref_len = 0;
    cmf_err err;
    if (ref >= 0 && cmf_tokenizer_decode(tok, &ref, 1, true, &ref_text, &ref_len, &err)) ref = -1;
    for (uint32_t i = 0; i < vocab; i++) {
        size_t n;
        char *s = token_bytes(tok, ref, ref_text, ref_len, (int32_t)i, &n);
        if (n) {
            if (used + n > cap) {
                size_t nc = (used + n) * 2;
                char *b = realloc(t->blob, nc);
                if (!b) {
                    free(s);
                    free(ref_text);
                    goto fail;
                }
                t->blob = b;
                cap = nc;
            }
            memcpy(t->blob + used, s, n);
            t->off[i] = (uint32_t)used;
            t->len[i] = (uint32_t)n;
            used += n;
        }
        free(s);
    }
    free(ref_text);
    return t;
fail:
    srv_tok_table_free(t);
    return NULL;
}

const srv_tok_table *srv_tok_table_get(srv_ctx *c) {
    pthread_mutex_lock(&g_table_mu);
    if (!c->tok_table) c->tok_table = build(c->tok, c->vocab);
    const srv_tok_table *t = c->tok_table;
    pthread_mutex_unlock(&g_table_mu);
    return t;
}

void srv_tok_table_free(srv_tok_table *t) {
    if (!t) return;
    free(t->blob);
    free(t->off);
    free(t->len);
    free(t);
}

static bool allowed(const srv_tok_table *tt, const jg_grammar *g, const jg_state *st,
                    const int32_t *eos, size_t n_eos, bool can_end, uint32_t t) {
    for (size_t i = 0; i < n_eos; i++)
        if ((uint32_t)eos[i] == t) return can_end;
    return tt->len[t] && jg_accepts(st, g, tt->blob + tt->off[t], tt->len[t]);
}

/* a before b in sampler order: higher logit, then lower id */
static bool better(const float *l, uint32_t a, uint32_t b) {
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void sift_down(const float *l, uint32_t *h, uint32_t n, uint32_t i) {
    for (;;) {
        uint32_t w = i, a = 2 * i + 1, b = a + 1;
        if (a < n && better(l, h[w], h[a])) w = a;
        if (b < n && better(l, h[w], h[b])) w = b;
        if (w == i) return;
        uint32_t x = h[i];
        h[i] = h[w];
        h[w] = x;
        i = w;
    }
}

/* The m best ids, best first, into top[0..m) (a heap whose root is the worst kept). */
static void best_m(const float *l, uint32_t vocab, uint32_t *top, uint32_t m) {
    for (uint32_t i = 0; i < m; i++)
        top[i] = i;
    for (uint32_t i = m / 2; i-- > 0;)
        sift_down(l, top, m, i);
    for (uint32_t t = m; t < vocab; t++)
        if (better(l, t, top[0])) {
            top[0] = t;
            sift_down(l, top, m, 0);
        }
    for (uint32_t n = m; n > 1; n--) { /* heap sort: the worst goes last */
        uint32_t x = top[0];
        top[0] = top[n - 1];
        top[n - 1] = x;
        sift_down(l, top, n - 1, 0);
    }
}

uint32_t srv_constrain_mask(const srv_tok_table *tt, const jg_grammar *g, const jg_state *st,
                            const int32_t *eos, size_t n_eos, const srv_mask_params *p,
                            const float *logits, uint32_t vocab, float *out, float *scratch) {
    bool can_end = jg_can_end(st, g);
    uint32_t want = p->temperature <= 0 ? 1 : p->top_k > 0 ? (uint32_t)p->top_k : 0;
    if (want && !p->penalised && want * 4 < vocab) {
        uint32_t *idx = (uint32_t *)scratch;
        uint32_t m = want * 4 > 256 ? want * 4 : 256;
        if (m > vocab) m = vocab;
        best_m(logits, vocab, idx, m);
        uint32_t found = 0;
        for (uint32_t i = 0; i < m && found < want; i++)
            if (allowed(tt, g, st, eos, n_eos, can_end, idx[i])) idx[found++] = idx[i];
        if (found == want) {
            for (uint32_t i = 0; i < vocab; i++)
                out[i] = -INFINITY;
            for (uint32_t i = 0; i < found; i++)
                out[idx[i]] = logits[idx[i]];
            return found;
        }
    }
    uint32_t n = 0;
    for (uint32_t t = 0; t < vocab; t++) {
        bool ok = allowed(tt, g, st, eos, n_eos, can_end, t);
        out[t] = ok ? logits[t] : -INFINITY;
        n += ok;
    }
    return n;
}
