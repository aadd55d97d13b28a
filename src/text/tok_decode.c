/* tok_decode.c - ids -> text: the decoders (each maps a list of token strings to a new list,
 * HF's decode_chain), cmf_tokenizer_decode, and the incremental cmf_detok_stream. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "text/tok_internal.h"

#define CTX "tokenizer"

/* Inverse of the GPT-2 byte map for code points < 324; -1 where a code point is not a byte char. */
static int char_byte(uint32_t c) {
    if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)) return (int)c;
    if (c >= 256 && c <= 256 + 32) return (int)(c - 256);
    if (c >= 256 + 33 && c <= 256 + 66) return (int)(c - 256 - 33 + 127);
    if (c == 256 + 67) return 173;
    return -1;
}

static bool put_lossy(tok_buf *out, const char *s, size_t len) {
    tok_buf clean = {0};
    bool alloc_ok;
    if (tok_utf8_sanitize(s, len, &clean, &alloc_ok)) return tok_buf_put(out, s, len);
    bool ok = alloc_ok && tok_buf_put(out, clean.p, clean.len);
    tok_buf_free(&clean);
    return ok;
}

static bool dec_bytelevel(tok_pieces *in, tok_pieces *out) {
    tok_buf bytes = {0};
    bool ok = tok_buf_reserve(&bytes, in->text.len);
    for (size_t i = 0; ok && i < in->n; i++) {
        const char *t = in->text.p + in->v[i].off;
        size_t len = in->v[i].len, start = bytes.len;
        for (size_t k = 0; ok && k < len;) {
            uint32_t cp;
            size_t n = tok_utf8_decode(t, len, k, &cp);
            int b = char_byte(cp);
            if (b < 0) { /* not a byte-level token: its raw bytes */
                bytes.len = start;
                ok = tok_buf_put(&bytes, t, len);
                break;
            }
            char c = (char)b;
            ok = tok_buf_put(&bytes, &c, 1);
            k += n;
        }
    }
    tok_buf txt = {0};
    ok = ok && tok_buf_reserve(&txt, bytes.len) &&
         put_lossy(&txt, bytes.p ? bytes.p : "", bytes.len) &&
         tok_pieces_push(out, txt.p, txt.len, false);
    tok_buf_free(&bytes);
    tok_buf_free(&txt);
    return ok;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool flush_bytes(tok_buf *pend, tok_pieces *out) {
    if (pend->len == 0) return true;
    bool alloc_ok, ok;
    tok_buf clean = {0};
    if (tok_utf8_sanitize(pend->p, pend->len, &clean, &alloc_ok)) {
        ok = tok_pieces_push(out, pend->p, pend->len, false);
    } else if (!alloc_ok) {
        ok = false;
    } else { /* invalid UTF-8: one U+FFFD per byte */
        tok_buf r = {0};
        ok = true;
        for (size_t i = 0; ok && i < pend->len; i++)
            ok = tok_buf_put(&r, "\xEF\xBF\xBD", 3);
        ok = ok && tok_pieces_push(out, r.p, r.len, false);
        tok_buf_free(&r);
    }
    tok_buf_free(&clean);
    pend->len = 0;
    return ok;
}

static bool dec_bytefallback(tok_pieces *in, tok_pieces *out) {
    tok_buf pend = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < in->n; i++) {
        const char *t = in->text.p + in->v[i].off;
        size_t len = in->v[i].len;
        int h, l;
        if (len == 6 && !memcmp(t, "<0x", 3) && t[5] == '>' && (h = hexval(t[3])) >= 0 &&
            (l = hexval(t[4])) >= 0) {
            char b = (char)(h * 16 + l);
            ok = tok_buf_put(&pend, &b, 1);
            continue;
        }
        ok = flush_bytes(&pend, out) && tok_pieces_push(out, t, len, false);
    }
    ok = ok && flush_bytes(&pend, out);
    tok_buf_free(&pend);
    return ok;
}

static bool dec_fuse(tok_pieces *in, tok_pieces *out) {
    /* in->text holds the pieces back to back in order; rebuild to be safe about gaps */
    tok_buf all = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < in->n; i++)
        ok = tok_buf_put(&all, in->text.p + in->v[i].off, in->v[i].len);
    ok = ok && tok_pieces_push(out, all.p ? all.p : "", all.len, false);
    tok_buf_free(&all);
    return ok;
}

/* HF Strip: cut up to `start` leading and `stop` trailing copies of one char, then keep
 * (byte length - cuts) chars of the rest (HF mixes bytes and chars there; mirrored). */
static bool dec_strip(const tok_decoder *d, tok_pieces *in, tok_pieces *out) {
    uint32_t want = 0;
    if (d->content_len) tok_utf8_decode(d->content, d->content_len, 0, &want);
    bool ok = true;
    for (size_t i = 0; ok && i < in->n; i++) {
        const char *t = in->text.p + in->v[i].off;
        size_t len = in->v[i].len;
        size_t start_cut = 0, stop_cut = 0, b = 0;
        for (size_t k = 0; k < len && start_cut < d->start;) {
            uint32_t cp;
            size_t n = tok_utf8_decode(t, len, k, &cp);
            if (cp != want) break;
            start_cut++;
            k += n;
            b = k;
        }
        for (size_t e = len; e > 0 && stop_cut < d->stop;) {
            size_t k = e - 1;
            while (k > 0 && ((unsigned char)t[k] & 0xC0) == 0x80)
                k--;
            uint32_t cp;
            tok_utf8_decode(t, len, k, &cp);
            if (cp != want) break;
            stop_cut++;
            e = k;
        }
        size_t take = len >= start_cut + stop_cut ? len - start_cut - stop_cut : 0;
        size_t e = b;
        for (size_t c = 0; c < take && e < len; c++) {
            uint32_t cp;
            e += tok_utf8_decode(t, len, e, &cp);
        }
        ok = tok_pieces_push(out, t + b, e - b, false);
    }
    return ok;
}

static bool dec_replace(const tok_decoder *d, tok_pieces *in, tok_pieces *out) {
    tok_buf r = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < in->n; i++) {
        const char *t = in->text.p + in->v[i].off;
        size_t len = in->v[i].len, pos = 0, last = SIZE_MAX, ms, me, prev = 0;
        r.len = 0;
        while (ok && tok_pattern_next(&d->pat, t, len, &pos, &last, &ms, &me)) {
            ok =
                tok_buf_put(&r, t + prev, ms - prev) && tok_buf_put(&r, d->content, d->content_len);
            prev = me;
        }
        ok = ok && tok_buf_put(&r, t + prev, len - prev) && tok_pieces_push(out, r.p, r.len, false);
    }
    tok_buf_free(&r);
    return ok;
}

/* HF Metaspace decoder: the replacement char becomes a space, except in the first token where
 * (unless prepend_scheme is never) every replacement char is dropped. */
static bool dec_metaspace(const tok_decoder *d, tok_pieces *in, tok_pieces *out) {
    tok_buf r = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < in->n; i++) {
        const char *t = in->text.p + in->v[i].off;
        size_t len = in->v[i].len;
        r.len = 0;
        for (size_t k = 0; ok && k < len;) {
            if (len - k >= d->repl_len && !memcmp(t + k, d->repl, d->repl_len)) {
                if (!(i == 0 && d->prepend != TOK_PREPEND_NEVER)) ok = tok_buf_put(&r, " ", 1);
                k += d->repl_len;
                continue;
            }
            ok = tok_buf_put(&r, t + k, 1);
            k++;
        }
        ok = ok && tok_pieces_push(out, r.p ? r.p : "", r.len, false);
    }
    tok_buf_free(&r);
    return ok;
}

static bool dec_bpe(const tok_decoder *d, tok_pieces *in, tok_pieces *out) {
    tok_buf r = {0};
    bool ok = true;
    tok_pattern lit = {d->content, d->content_len, NULL};
    for (size_t i = 0; ok && i < in->n; i++) {
        const char *t = in->text.p + in->v[i].off;
        size_t len = in->v[i].len, pos = 0, last = SIZE_MAX, ms, me, prev = 0;
        const char *rep = i + 1 == in->n ? "" : " ";
        r.len = 0;
        while (ok && tok_pattern_next(&lit, t, len, &pos, &last, &ms, &me)) {
            ok = tok_buf_put(&r, t + prev, ms - prev) && tok_buf_put(&r, rep, strlen(rep));
            prev = me;
        }
        ok = ok && tok_buf_put(&r, t + prev, len - prev) && tok_pieces_push(out, r.p, r.len, false);
    }
    tok_buf_free(&r);
    return ok;
}

/* HF's WordPiece cleanup: undo the spaces a word split put before punctuation and contractions. */
static bool wp_cleanup(tok_buf *t, tok_buf *tmp) {
    static const char *const from[] = {" .",  " ?",      " !",  " ,",   " ' ", " n't",
                                       " 'm", " do not", " 's", " 've", " 're"};
    static const char *const to[] = {".",  "?",      "!",  ",",   "'",  "n't",
                                     "'m", " don't", "'s", "'ve", "'re"};
    for (size_t r = 0; r < sizeof from / sizeof from[0]; r++) {
        tok_pattern lit = {(char *)from[r], strlen(from[r]), NULL};
        size_t pos = 0, last = SIZE_MAX, ms, me, prev = 0;
        tmp->len = 0;
        bool ok = tok_buf_reserve(tmp, t->len);
        while (ok && tok_pattern_next(&lit, t->p, t->len, &pos, &last, &ms, &me)) {
            ok = tok_buf_put(tmp, t->p + prev, ms - prev) && tok_buf_put(tmp, to[r], strlen(to[r]));
            prev = me;
        }
        ok = ok && tok_buf_put(tmp, t->p + prev, t->len - prev);
        if (!ok) return false;
        tok_buf x = *t;
        *t = *tmp;
        *tmp = x;
    }
    return true;
}

/* HF WordPiece decoder: pieces after the first lose their prefix or gain a leading space. */
static bool dec_wordpiece(const tok_decoder *d, tok_pieces *in, tok_pieces *out) {
    tok_buf r = {0}, tmp = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < in->n; i++) {
        const char *t = in->text.p + in->v[i].off;
        size_t len = in->v[i].len;
        r.len = 0;
        ok = tok_buf_reserve(&r, len + 1);
        if (i > 0 && len >= d->content_len && memcmp(t, d->content, d->content_len) == 0) {
            t += d->content_len;
            len -= d->content_len;
        } else if (i > 0) {
            ok = ok && tok_buf_put(&r, " ", 1);
        }
        ok = ok && tok_buf_put(&r, t, len);
        if (ok && d->cleanup) ok = wp_cleanup(&r, &tmp);
        ok = ok && tok_pieces_push(out, r.p, r.len, false);
    }
    tok_buf_free(&r);
    tok_buf_free(&tmp);
    return ok;
}

static bool dec_step(const tok_decoder *d, tok_pieces *in, tok_pieces *out) {
    tok_pieces_reset(out);
    switch (d->type) {
    case TOK_DEC_BYTELEVEL:
        return dec_bytelevel(in, out);
    case TOK_DEC_BYTEFALLBACK:
        return dec_bytefallback(in, out);
    case TOK_DEC_FUSE:
        return dec_fuse(in, out);
    case TOK_DEC_STRIP:
        return dec_strip(d, in, out);
    case TOK_DEC_REPLACE:
        return dec_replace(d, in, out);
    case TOK_DEC_METASPACE:
        return dec_metaspace(d, in, out);
    case TOK_DEC_BPE:
        return dec_bpe(d, in, out);
    case TOK_DEC_WORDPIECE:
        return dec_wordpiece(d, in, out);
    case TOK_DEC_SEQUENCE: {
        tok_pieces a = {0}, b = {0};
        bool ok = true;
        for (size_t i = 0; ok && i < in->n; i++)
            ok = tok_pieces_push(&a, in->text.p + in->v[i].off, in->v[i].len, false);
        for (size_t k = 0; ok && k < d->nkids; k++) {
            ok = dec_step(d->kids[k], &a, &b);
            tok_pieces t = a;
            a = b;
            b = t;
        }
        for (size_t i = 0; ok && i < a.n; i++)
            ok = tok_pieces_push(out, a.text.p + a.v[i].off, a.v[i].len, false);
        tok_pieces_free(&a);
        tok_pieces_free(&b);
        return ok;
    }
    }
    return false;
}

bool tok_decode_tokens(const tok_decoder *d, tok_pieces *toks, tok_buf *out) {
    tok_pieces res = {0};
    tok_pieces *src = toks;
    bool ok = true;
    if (d) {
        ok = dec_step(d, toks, &res);
        src = &res;
    }
    for (size_t i = 0; ok && i < src->n; i++) {
        if (!d && i > 0) ok = tok_buf_put(out, " ", 1); /* no decoder: tokens joined by spaces */
        ok = ok && tok_buf_put(out, src->text.p + src->v[i].off, src->v[i].len);
    }
    tok_pieces_free(&res);
    return ok && tok_buf_reserve(out, 0);
}

cmf_status cmf_tokenizer_decode(const cmf_tokenizer *tok, const int32_t *ids, size_t n,
                                bool skip_special_tokens, char **text, size_t *len, cmf_err *err) {
    if (!tok || (!ids && n) || !text || !len)
        return cmf_err_set(err, CMF_E_INVALID_ARG, CTX,
                           "decode: tok, text and len must not be NULL");
    *text = NULL;
    *len = 0;
    tok_pieces toks = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        size_t tl;
        const char *t = cmf_tokenizer_id_to_token(tok, ids[i], &tl);
        if (!t || (skip_special_tokens && tok->id_special[ids[i]])) continue;
        ok = tok_pieces_push(&toks, t, tl, false);
    }
    tok_buf out = {0};
    tok_regex_fail_reset();
    ok = ok && tok_decode_tokens(tok->dec, &toks, &out);
    tok_pieces_free(&toks);
    cmf_status rst = tok_regex_fail_check(err, CTX); /* a Replace pattern ran out of its budget */
    if (rst || !ok) {
        tok_buf_free(&out);
        return rst ? rst : cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory decoding %zu ids", n);
    }
    *text = out.p;
    *len = out.len;
    return CMF_OK;
}

/* ---------------- streaming ----------------
 * The stream keeps a window of recent ids and the text the window decoded to when text was last
 * released. A new id is decoded together with the window; whatever extends the old text is
 * released, unless it ends in U+FFFD (an incomplete byte sequence: wait for more ids). The window
 * always keeps ids before the new one, so decoder rules for the first token (Metaspace dropping
 * the leading space, Strip) apply to the window start only, as in a whole decode. */

#define WINDOW_MAX  32 /* re-base the window once it is this long ... */
#define WINDOW_KEEP 4  /* ... keeping this many ids as context */

struct cmf_detok_stream {
    const cmf_tokenizer *tok;
    bool skip;
    tok_ids ids; /* the window */
    char *prev;  /* decode(window) at the last release */
    size_t prev_len;
    tok_buf out;
};

cmf_status cmf_detok_stream_create(const cmf_tokenizer *tok, bool skip_special_tokens,
                                   cmf_detok_stream **out, cmf_err *err) {
    if (!tok || !out)
        return cmf_err_set(err, CMF_E_INVALID_ARG, CTX, "stream: tok and out must not be NULL");
    cmf_detok_stream *s = calloc(1, sizeof *s);
    if (!s) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    s->tok = tok;
    s->skip = skip_special_tokens;
    *out = s;
    return CMF_OK;
}

void cmf_detok_stream_free(cmf_detok_stream *s) {
    if (!s) return;
    free(s->ids.v);
    free(s->prev);
    tok_buf_free(&s->out);
    free(s);
}

/* Can the window start at this id? Not at a <0xXX> continuation byte: ByteFallback judges a run
 * of byte tokens as a whole, so cutting inside a character would change how the run decodes. */
static bool safe_window_start(const cmf_tokenizer *tok, int32_t id) {
    size_t len;
    const char *t = cmf_tokenizer_id_to_token(tok, id, &len);
    if (!t || len != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') return true;
    int h = hexval(t[3]);
    return h < 8 || h >= 12; /* 0x00-0x7F and 0xC0-0xFF begin a character */
}

static bool ends_incomplete(const char *t, size_t len) {
    return len >= 3 && !memcmp(t + len - 3, "\xEF\xBF\xBD", 3);
}

cmf_status cmf_detok_stream_push(cmf_detok_stream *s, int32_t id, const char **text, size_t *len,
                                 cmf_err *err) {
    if (!s || !text || !len)
        return cmf_err_set(err, CMF_E_INVALID_ARG, CTX, "stream push: NULL argument");
    s->out.len = 0;
    if (!tok_buf_reserve(&s->out, 0) || !tok_ids_push(&s->ids, id))
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    *text = s->out.p;
    *len = 0;
    char *str;
    size_t sl;
    cmf_status st = cmf_tokenizer_decode(s->tok, s->ids.v, s->ids.n, s->skip, &str, &sl, err);
    if (st) return st;
    if (ends_incomplete(str, sl) || sl < s->prev_len) {
        free(str);
        return CMF_OK;
    }
    if (memcmp(str, s->prev ? s->prev : "", s->prev_len) != 0) {
        free(str);
        return cmf_err_set(
            err, CMF_E_UNSUPPORTED, CTX,
            "stream: the decoder rewrote earlier text at id %d; use cmf_tokenizer_decode", (int)id);
    }
    bool ok = tok_buf_put(&s->out, str + s->prev_len, sl - s->prev_len);
    free(s->prev);
    s->prev = str;
    s->prev_len = sl;
    if (!ok) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    size_t k = s->ids.n - WINDOW_KEEP;
    if (s->ids.n >= WINDOW_MAX)
        while (k > 0 && !safe_window_start(s->tok, s->ids.v[k]))
            k--;
    if (s->ids.n >= WINDOW_MAX && k > 0) {
        memmove(s->ids.v, s->ids.v + k, (s->ids.n - k) * sizeof *s->ids.v);
        s->ids.n -= k;
        free(s->prev);
        s->prev = NULL;
        s->prev_len = 0;
        st = cmf_tokenizer_decode(s->tok, s->ids.v, s->ids.n, s->skip, &s->prev, &s->prev_len, err);
        if (st) return st;
    }
    *text = s->out.p;
    *len = s->out.len;
    return CMF_OK;
}
