/* tok_bpe.c - the BPE model: split a pre-token into characters (with continuing_subword_prefix,
 * end_of_word_suffix, byte_fallback and unk as HF does), then apply merges lowest rank first
 * (leftmost on ties) with a binary heap. Results of repeated words are cached per encode call. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

typedef struct sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes covered; 0 = merged away */
} sym;

typedef struct hent {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
} hent;

#define CACHE_MAX_WORD    256
#define CACHE_MAX_ENTRIES (1u << 16)

struct tok_bpe_scratch {
    sym *s;
    size_t scap;
    hent *h;
    size_t hn, hcap;
    char *tmp;
    size_t tcap;
    /* word cache: slots -> entries; words and ids in arenas */
    uint32_t *slots;
    size_t nslots;
    struct cent {
        uint64_t hash;
        size_t woff, ioff;
        uint32_t wlen, nids;
    } * ce;
    size_t cn, ccap;
    tok_buf words;
    tok_ids ids;
};

tok_bpe_scratch *tok_bpe_scratch_new(void) {
    return calloc(1, sizeof(tok_bpe_scratch));
}

void tok_bpe_scratch_free(tok_bpe_scratch *s) {
    if (!s) return;
    free(s->s);
    free(s->h);
    free(s->tmp);
    free(s->slots);
    free(s->ce);
    tok_buf_free(&s->words);
    free(s->ids.v);
    free(s);
}

static bool heap_push(tok_bpe_scratch *sc, hent e) {
    if (sc->hn == sc->hcap) {
        size_t nc = sc->hcap ? sc->hcap * 2 : 64;
        hent *q = realloc(sc->h, nc * sizeof *q);
        if (!q) return false;
        sc->h = q;
        sc->hcap = nc;
    }
    size_t i = sc->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        hent *pp = &sc->h[p];
        if (pp->rank < e.rank || (pp->rank == e.rank && pp->pos <= e.pos)) break;
        sc->h[i] = *pp;
        i = p;
    }
    sc->h[i] = e;
    return true;
}

static hent heap_pop(tok_bpe_scratch *sc) {
    hent top = sc->h[0], last = sc->h[--sc->hn];
    size_t i = 0, n = sc->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && (sc->h[c + 1].rank < sc->h[c].rank ||
                          (sc->h[c + 1].rank == sc->h[c].rank && sc->h[c + 1].pos < sc->h[c].pos)))
            c++;
        if (last.rank < sc->h[c].rank || (last.rank == sc->h[c].rank && last.pos <= sc->h[c].pos))
            break;
        sc->h[i] = sc->h[c];
        i = c;
    }
    if (n) sc->h[i] = last;
    return top;
}

static bool push_sym(tok_bpe_scratch *sc, size_t *n, int32_t id, uint32_t len) {
    if (*n == sc->scap) {
        size_t nc = sc->scap ? sc->scap * 2 : 64;
        sym *q = realloc(sc->s, nc * sizeof *q);
        if (!q) return false;
        sc->s = q;
        sc->scap = nc;
    }
    sc->s[*n] = (sym){id, (int32_t)*n - 1, (int32_t)*n + 1, len};
    (*n)++;
    return true;
}

/* Look up prefix + piece + suffix (the parts that apply) in the vocabulary. */
static const char *compose(const cmf_tokenizer *tok, tok_bpe_scratch *sc, const char *c,
                           size_t clen, bool pre, bool suf, size_t *out_len) {
    size_t need = clen + (pre ? tok->cont_prefix_len : 0) + (suf ? tok->eow_suffix_len : 0);
    if (need > sc->tcap) {
        char *q = realloc(sc->tmp, need + 16);
        if (!q) return NULL;
        sc->tmp = q;
        sc->tcap = need + 16;
    }
    size_t k = 0;
    if (pre) {
        memcpy(sc->tmp, tok->cont_prefix, tok->cont_prefix_len);
        k = tok->cont_prefix_len;
    }
    memcpy(sc->tmp + k, c, clen);
    k += clen;
    if (suf) {
        memcpy(sc->tmp + k, tok->eow_suffix, tok->eow_suffix_len);
        k += tok->eow_suffix_len;
    }
    *out_len = k;
    return sc->tmp;
}

static bool bpe_word(const cmf_tokenizer *tok, tok_bpe_scratch *sc, const char *w, size_t len,
                     tok_ids *out) {
    if (tok->ignore_merges) {
        int32_t id = tok_strtab_get(&tok->vocab, w, len);
        if (id >= 0) return tok_ids_push(out, id);
    }
    size_t n = 0;
    int32_t unk = -1;
    uint32_t unk_len = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(w, len, i, &cp);
        bool pre = i > 0 && tok->cont_prefix_len > 0, suf = i + k >= len && tok->eow_suffix_len > 0;
        int32_t id;
        const char *str = w + i;
        size_t slen = k;
        if (!pre && !suf && cp < 1024) {
            id = tok->small_cp[cp];
        } else {
            str = compose(tok, sc, w + i, k, pre, suf, &slen);
            if (!str) return false;
            id = tok_strtab_get(&tok->vocab, str, slen);
        }
        if (id >= 0) {
            if (unk >= 0) {
                if (!push_sym(sc, &n, unk, unk_len)) return false;
                unk = -1;
            }
            if (!push_sym(sc, &n, id, (uint32_t)k)) return false;
            i += k;
            continue;
        }
        if (tok->byte_fallback) {
            bool all = true;
            for (size_t b = 0; b < slen; b++)
                all = all && tok->byte_ids[(unsigned char)str[b]] >= 0;
            if (all) {
                for (size_t b = 0; b < slen; b++)
                    if (!push_sym(sc, &n, tok->byte_ids[(unsigned char)str[b]], 1)) return false;
                i += k;
                continue;
            }
        }
        if (tok->unk_id >= 0) {
            if (unk >= 0 && tok->fuse_unk)
                unk_len += (uint32_t)k;
            else {
                if (unk >= 0 && !push_sym(sc, &n, unk, unk_len)) return false;
                unk = tok->unk_id;
                unk_len = (uint32_t)k;
            }
        }
        i += k;
    }
    if (unk >= 0 && !push_sym(sc, &n, unk, unk_len)) return false;
    if (n == 0) return true;
    sc->s[n - 1].next = -1;

    sc->hn = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t rank;
        int32_t merged;
        if (tok_merges_get(&tok->merges, sc->s[i].id, sc->s[i + 1].id, &rank, &merged) &&
            !heap_push(sc, (hent){rank, (uint32_t)i, merged}))
            return false;
    }
    while (sc->hn) {
        hent top = heap_pop(sc);
        sym *cur = &sc->s[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        sym *right = &sc->s[cur->next];
        uint32_t rank;
        int32_t merged;
        if (!tok_merges_get(&tok->merges, cur->id, right->id, &rank, &merged) ||
            merged != top.merged)
            continue;
        cur->id = top.merged;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0) sc->s[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0) {
            sym *pv = &sc->s[cur->prev];
            if (tok_merges_get(&tok->merges, pv->id, cur->id, &rank, &merged) &&
                !heap_push(sc, (hent){rank, (uint32_t)cur->prev, merged}))
                return false;
        }
        if (cur->next >= 0) {
            sym *nx = &sc->s[cur->next];
            if (tok_merges_get(&tok->merges, cur->id, nx->id, &rank, &merged) &&
                !heap_push(sc, (hent){rank, top.pos, merged}))
                return false;
        }
    }
    for (int32_t i = 0; i >= 0; i = sc->s[i].next)
        if (!tok_ids_push(out, sc->s[i].id)) return false;
    return true;
}

static bool cache_grow(tok_bpe_scratch *sc) {
    size_t ns = sc->nslots ? sc->nslots * 2 : 1024;
    uint32_t *sl = calloc(ns, sizeof *sl);
    if (!sl) return false;
    for (size_t i = 0; i < sc->cn; i++) {
        size_t k = (size_t)sc->ce[i].hash & (ns - 1);
        while (sl[k])
            k = (k + 1) & (ns - 1);
        sl[k] = (uint32_t)(i + 1);
    }
    free(sc->slots);
    sc->slots = sl;
    sc->nslots = ns;
    return true;
}

bool tok_bpe_encode(const cmf_tokenizer *tok, tok_bpe_scratch *sc, const char *w, size_t len,
                    tok_ids *out) {
    if (len == 0) return true;
    if (len > CACHE_MAX_WORD) return bpe_word(tok, sc, w, len, out);
    uint64_t h = tok_hash_bytes(w, len);
    size_t k = 0;
    if (sc->nslots) {
        k = (size_t)h & (sc->nslots - 1);
        while (sc->slots[k]) {
            struct cent *e = &sc->ce[sc->slots[k] - 1];
            if (e->hash == h && e->wlen == len && memcmp(sc->words.p + e->woff, w, len) == 0) {
                for (uint32_t j = 0; j < e->nids; j++)
                    if (!tok_ids_push(out, sc->ids.v[e->ioff + j])) return false;
                return true;
            }
            k = (k + 1) & (sc->nslots - 1);
        }
    }
    size_t before = out->n;
    if (!bpe_word(tok, sc, w, len, out)) return false;
    if (sc->cn >= CACHE_MAX_ENTRIES) return true;
    /* remember the result */
    if (sc->cn == sc->ccap) {
        size_t nc = sc->ccap ? sc->ccap * 2 : 256;
        struct cent *q = realloc(sc->ce, nc * sizeof *q);
        if (!q) return false;
        sc->ce = q;
        sc->ccap = nc;
    }
    size_t woff = sc->words.len, ioff = sc->ids.n;
    if (!tok_buf_put(&sc->words, w, len)) return false;
    for (size_t j = before; j < out->n; j++)
        if (!tok_ids_push(&sc->ids, out->v[j])) return false;
    sc->ce[sc->cn++] = (struct cent){h, woff, ioff, (uint32_t)len, (uint32_t)(out->n - before)};
    if (sc->cn * 2 > sc->nslots) return cache_grow(sc);
    k = (size_t)h & (sc->nslots - 1);
    while (sc->slots[k])
        k = (k + 1) & (sc->nslots - 1);
    sc->slots[k] = (uint32_t)sc->cn;
    return true;
}
