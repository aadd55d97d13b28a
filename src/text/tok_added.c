/* tok_added.c - added tokens: a byte trie per kind (matched on the raw text, or on the
 * normalized text for `normalized` tokens), leftmost-longest matching, and HF's rules for
 * single_word, lstrip and rstrip. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

static bool trie_node(tok_trie *t, int32_t *id) {
    if (t->nnodes == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        int32_t *q = realloc(t->term, nc * sizeof *q);
        if (!q) return false;
        t->term = q;
        t->cap = nc;
    }
    t->term[t->nnodes] = -1;
    *id = (int32_t)t->nnodes++;
    return true;
}

bool tok_trie_init(tok_trie *t) {
    memset(t, 0, sizeof *t);
    int32_t root;
    t->empty = true;
    return tok_merges_init(&t->edges, 256) && trie_node(t, &root);
}

bool tok_trie_insert(tok_trie *t, const char *s, size_t len, int32_t index) {
    if (len == 0) return true;
    t->empty = false;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t rank;
        int32_t child;
        if (!tok_merges_get(&t->edges, node, (unsigned char)s[i], &rank, &child)) {
            if (!trie_node(t, &child) ||
                !tok_merges_put(&t->edges, node, (unsigned char)s[i], 0, child))
                return false;
        }
        node = child;
    }
    /* Two tokens with the same content: the first one keeps the match (lowest index). */
    if (t->term[node] < 0) t->term[node] = index;
    t->first[(unsigned char)s[0] >> 3] |= (uint8_t)(1u << ((unsigned char)s[0] & 7));
    return true;
}

bool tok_trie_build(tok_trie *t, const cmf_tokenizer *tok, bool normalized) {
    if (!tok_trie_init(t)) return false;
    for (size_t i = 0; i < tok->nadded; i++) {
        const tok_added *a = &tok->added[i];
        if (a->normalized != normalized || a->len == 0) continue;
        const char *s = tok->added_text.p + a->off;
        size_t len = a->len;
        tok_buf nb = {0};
        if (normalized && tok->norm) {
            if (!tok_normalize(tok->norm, s, len, &nb)) {
                tok_buf_free(&nb);
                return false;
            }
            s = nb.p ? nb.p : "";
            len = nb.len;
        }
        bool ok = tok_trie_insert(t, s, len, (int32_t)i);
        tok_buf_free(&nb);
        if (!ok) return false;
    }
    return true;
}

void tok_trie_free(tok_trie *t) {
    tok_merges_free(&t->edges);
    free(t->term);
    memset(t, 0, sizeof *t);
}

int32_t tok_trie_child(const tok_trie *t, int32_t node, unsigned char byte) {
    uint32_t rank;
    int32_t child;
    return tok_merges_get(&t->edges, node, byte, &rank, &child) ? child : -1;
}

/* Longest added token starting exactly at s[i]: its index, or -1; *end set on a match. */
static int32_t trie_longest(const tok_trie *t, const char *s, size_t len, size_t i, size_t *end) {
    unsigned char c0 = (unsigned char)s[i];
    if (!(t->first[c0 >> 3] & (1u << (c0 & 7)))) return -1;
    int32_t node = 0, best = -1;
    for (size_t k = i; k < len; k++) {
        uint32_t rank;
        int32_t child;
        if (!tok_merges_get(&t->edges, node, (unsigned char)s[k], &rank, &child)) break;
        node = child;
        if (t->term[node] >= 0) {
            best = t->term[node];
            *end = k + 1;
        }
    }
    return best;
}

static bool seg_push(tok_seg **segs, size_t *n, size_t *cap, size_t off, size_t len, int32_t id) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        tok_seg *q = realloc(*segs, nc * sizeof *q);
        if (!q) return false;
        *segs = q;
        *cap = nc;
    }
    (*segs)[(*n)++] = (tok_seg){off, len, id};
    return true;
}

static uint32_t last_char(const char *s, size_t end, size_t *start) {
    size_t k = end - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    uint32_t cp;
    tok_utf8_decode(s, end, k, &cp);
    *start = k;
    return cp;
}

bool tok_added_split(const cmf_tokenizer *tok, const tok_trie *t, const char *s, size_t len,
                     tok_seg **segs, size_t *nseg, size_t *cap) {
    size_t start_off = 0;
    if (!t->empty) {
        for (size_t i = 0; i < len;) {
            size_t mend = 0;
            int32_t idx = trie_longest(t, s, len, i, &mend);
            if (idx < 0) {
                i++;
                continue;
            }
            const tok_added *a = &tok->added[idx];
            size_t ms = i, me = mend;
            i = mend; /* the matcher resumes after the match whatever happens to it */
            if (a->single_word) {
                size_t ks;
                uint32_t cp;
                bool start_space = ms == 0 || !tok_is_word_char(last_char(s, ms, &ks));
                bool stop_space =
                    me == len || (tok_utf8_decode(s, len, me, &cp), !tok_is_word_char(cp));
                if (!start_space || !stop_space) continue;
            }
            if (a->lstrip) {
                size_t ns = ms;
                while (ns > 0) {
                    size_t ks;
                    if (!tok_is_whitespace(last_char(s, ns, &ks))) break;
                    ns = ks;
                }
                ms = ns > start_off ? ns : start_off;
            }
            if (a->rstrip) {
                while (me < len) {
                    uint32_t cp;
                    size_t k = tok_utf8_decode(s, len, me, &cp);
                    if (!tok_is_whitespace(cp)) break;
                    me += k;
                }
            }
            if (start_off < ms && !seg_push(segs, nseg, cap, start_off, ms - start_off, -1))
                return false;
            if (!seg_push(segs, nseg, cap, ms, me - ms, a->id)) return false;
            start_off = me;
        }
    }
    if (start_off < len || len == 0)
        return seg_push(segs, nseg, cap, start_off, len - start_off, -1);
    return true;
}
