/* tok_encode.c - text -> ids: added tokens split the raw text, every other segment is
 * normalized, split again on `normalized` added tokens, pre-tokenized and run through BPE; the
 * post-processor's ids surround the result when add_special_tokens is set. Empty segments are
 * dropped at every stage, as HF does. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "text/tok_internal.h"

#define CTX "tokenizer"

typedef struct enc_ctx {
    const cmf_tokenizer *tok;
    tok_pieces a, b, c;
    tok_bpe_scratch *bpe;
    tok_seg *segs;
    size_t nseg, segcap;
    tok_buf norm, wp;
    tok_ids out;
} enc_ctx;

static bool encode_plain(enc_ctx *x, const char *s, size_t len, bool at_origin) {
    const cmf_tokenizer *tok = x->tok;
    tok_pieces_reset(&x->a);
    if (!tok_pieces_push(&x->a, s, len, at_origin)) return false;
    tok_pieces *res = &x->a;
    if (tok->pre) {
        if (!tok_pretokenize(tok->pre, &x->a, &x->b, &x->c)) return false;
        res = &x->b;
    }
    for (size_t i = 0; i < res->n; i++) {
        const char *w = res->text.p + res->v[i].off;
        if (tok->wordlevel) { /* the whole word or unk */
            int32_t id = tok_strtab_get(&tok->vocab, w, res->v[i].len);
            if (id < 0) id = tok->unk_id;
            if (id >= 0 && !tok_ids_push(&x->out, id)) return false;
            continue;
        }
        bool ok = tok->wordpiece ? tok_wordpiece_encode(tok, &x->wp, w, res->v[i].len, &x->out)
                  : tok->unigram ? tok_unigram_encode(tok, &x->wp, w, res->v[i].len, &x->out)
                                 : tok_bpe_encode(tok, x->bpe, w, res->v[i].len, &x->out);
        if (!ok) return false;
    }
    return true;
}

/* One segment of raw text that is not an added token. */
static bool encode_segment(enc_ctx *x, const char *s, size_t len, bool at_origin) {
    const cmf_tokenizer *tok = x->tok;
    if (tok->norm) {
        x->norm.len = 0;
        if (!tok_buf_reserve(&x->norm, len) || !tok_normalize(tok->norm, s, len, &x->norm))
            return false;
        s = x->norm.p;
        len = x->norm.len;
    }
    if (len == 0) return true;
    if (tok->trie_norm.empty) return encode_plain(x, s, len, at_origin);
    /* The normalized text lives in x->norm, which encode_plain does not touch. */
    size_t first = x->nseg;
    if (!tok_added_split(tok, &tok->trie_norm, s, len, &x->segs, &x->nseg, &x->segcap))
        return false;
    size_t last = x->nseg;
    bool ok = true;
    for (size_t i = first; ok && i < last; i++) {
        tok_seg g = x->segs[i];
        if (g.len == 0) continue;
        ok = g.id >= 0 ? tok_ids_push(&x->out, g.id)
                       : encode_plain(x, s + g.off, g.len, at_origin && g.off == 0);
    }
    x->nseg = first;
    return ok;
}

cmf_status cmf_tokenizer_encode(const cmf_tokenizer *tok, const char *text, size_t len,
                                bool add_special_tokens, int32_t **ids, size_t *n, cmf_err *err) {
    if (!tok || (!text && len) || !ids || !n)
        return cmf_err_set(err, CMF_E_INVALID_ARG, CTX, "encode: tok, ids and n must not be NULL");
    *ids = NULL;
    *n = 0;
    if (!text) text = "";
    enc_ctx x;
    memset(&x, 0, sizeof x);
    x.tok = tok;
    tok_buf clean = {0};
    bool ok = true, alloc_ok;
    tok_regex_fail_reset();
    if (!tok_utf8_sanitize(text, len, &clean, &alloc_ok)) {
        ok = alloc_ok;
        text = clean.p;
        len = clean.len;
    }
    ok = ok && (x.bpe = tok_bpe_scratch_new()) != NULL;
    if (ok && add_special_tokens)
        for (size_t i = 0; ok && i < tok->post.npre; i++)
            ok = tok_ids_push(&x.out, tok->post.pre[i]);
    /* raw-text added tokens; the segment list is copied because encode_segment appends to it */
    tok_seg *raw = NULL;
    size_t nraw = 0, rawcap = 0;
    ok = ok && tok_added_split(tok, &tok->trie_raw, text, len, &raw, &nraw, &rawcap);
    for (size_t i = 0; ok && i < nraw; i++) {
        if (raw[i].len == 0) continue;
        ok = raw[i].id >= 0 ? tok_ids_push(&x.out, raw[i].id)
                            : encode_segment(&x, text + raw[i].off, raw[i].len, raw[i].off == 0);
    }
    if (ok && add_special_tokens)
        for (size_t i = 0; ok && i < tok->post.npost; i++)
            ok = tok_ids_push(&x.out, tok->post.post[i]);
    ok = ok && (x.out.v || (x.out.v = malloc(sizeof(int32_t))) != NULL);
    free(raw);
    free(x.segs);
    tok_pieces_free(&x.a);
    tok_pieces_free(&x.b);
    tok_pieces_free(&x.c);
    tok_buf_free(&x.norm);
    tok_buf_free(&x.wp);
    tok_buf_free(&clean);
    tok_bpe_scratch_free(x.bpe);
    cmf_status rst = tok_regex_fail_check(err, CTX); /* a pattern ran out of its budget */
    if (rst || !ok) {
        free(x.out.v);
        return rst ? rst
                   : cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory encoding %zu bytes", len);
    }
    *ids = x.out.v;
    *n = x.out.n;
    return CMF_OK;
}
