/* tok_unigram.c - the Unigram model (SentencePiece unigram as HF runs it): the best
 * segmentation maximises the sum of piece scores. Every character start is a lattice position;
 * from it the trie of vocabulary strings gives all pieces that start there; a character no single
 * piece covers gets an unknown edge of score min_score - 10. Consecutive unknown pieces fuse into
 * one, which then maps to its byte tokens (byte_fallback) or to unk. */
#include <string.h>

#include "text/tok_internal.h"

#define UNK_PENALTY 10.0

typedef struct node {
    double score;  /* best path score ending here */
    int64_t start; /* where the last piece of that path starts; -1 unreached */
    int32_t id;
} node;

/* Map one result piece to ids: its vocabulary id, else its bytes, else unk. */
static bool emit_piece(const cmf_tokenizer *tok, const char *p, size_t len, tok_ids *out) {
    int32_t id = tok_strtab_get(&tok->vocab, p, len);
    if (id >= 0) return tok_ids_push(out, id);
    if (tok->byte_fallback) {
        bool all = true;
        for (size_t i = 0; i < len; i++)
            all = all && tok->byte_ids[(unsigned char)p[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < len; i++)
                if (!tok_ids_push(out, tok->byte_ids[(unsigned char)p[i]])) return false;
            return true;
        }
    }
    return tok->unk_id < 0 || tok_ids_push(out, tok->unk_id);
}

static void reverse(int32_t *v, size_t a, size_t b) {
    for (; a + 1 < b; a++, b--) {
        int32_t t = v[a];
        v[a] = v[b - 1];
        v[b - 1] = t;
    }
}

/* Pieces are found last first, so the output is built reversed: emit a piece's ids reversed
 * and reverse everything at the end. */
static bool emit_reversed(const cmf_tokenizer *tok, const char *p, size_t len, tok_ids *out) {
    size_t mark = out->n;
    if (!emit_piece(tok, p, len, out)) return false;
    reverse(out->v, mark, out->n);
    return true;
}

static void relax(node *n, double score, size_t start, int32_t id) {
    if (n->start < 0 || score > n->score) {
        n->score = score;
        n->start = (int64_t)start;
        n->id = id;
    }
}

bool tok_unigram_encode(const cmf_tokenizer *tok, tok_buf *scratch, const char *w, size_t len,
                        tok_ids *out) {
    if (len == 0) return true;
    scratch->len = 0;
    size_t bytes = (len + 1) * sizeof(node);
    if (bytes / sizeof(node) != len + 1 || !tok_buf_reserve(scratch, bytes + sizeof(node)))
        return false;
    /* align the lattice inside the scratch buffer */
    uintptr_t base = (uintptr_t)scratch->p,
              al = (base + _Alignof(node) - 1) & ~(uintptr_t)(_Alignof(node) - 1);
    node *lat = (node *)al;
    for (size_t i = 0; i <= len; i++)
        lat[i] = (node){0.0, -1, -1};
    lat[0].start = 0;
    double unk_score = tok->uni_min - UNK_PENALTY;
    for (size_t st = 0; st < len;) {
        uint32_t cp;
        size_t mblen = tok_utf8_decode(w, len, st, &cp);
        double here = lat[st].score;
        bool single = false;
        int32_t nd = 0;
        for (size_t k = st; k < len; k++) {
            nd = tok_trie_child(&tok->uni_trie, nd, (unsigned char)w[k]);
            if (nd < 0) break;
            int32_t id = tok->uni_trie.term[nd];
            if (id < 0) continue;
            relax(&lat[k + 1], tok->uni_score[id] + here, st, id);
            if (k + 1 - st == mblen) single = true;
        }
        if (!single) relax(&lat[st + mblen], unk_score + here, st, tok->unk_id);
        st += mblen;
    }
    /* Backtrack from the end; runs of unknown pieces fuse (HF fuse_unk). */
    size_t first = out->n, end = len, unk_end = 0;
    bool in_unk = false;
    while (end > 0) {
        const node *n = &lat[end];
        size_t start = (size_t)n->start;
        if (tok->unk_id >= 0 && n->id == tok->unk_id) {
            if (!in_unk) unk_end = end;
            in_unk = true;
        } else {
            if (in_unk && !emit_reversed(tok, w + end, unk_end - end, out)) return false;
            in_unk = false;
            if (!emit_reversed(tok, w + start, end - start, out)) return false;
        }
        end = start;
    }
    if (in_unk && !emit_reversed(tok, w, unk_end, out)) return false;
    reverse(out->v, first, out->n);
    return true;
}
