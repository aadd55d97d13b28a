/* tok_pretok.c - the pre-tokenizers. Each one turns every piece of a list into zero or more
 * pieces, following HF's split rules: a pattern yields (range, is_match) runs that cover the
 * piece, a behavior decides what becomes a piece, and empty pieces are dropped. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

typedef struct run {
    size_t s, e;
    bool m;
} run;

typedef struct runs {
    run *v;
    size_t n, cap;
} runs;

static bool runs_push(runs *r, size_t s, size_t e, bool m) {
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        run *q = realloc(r->v, nc * sizeof *q);
        if (!q) return false;
        r->v = q;
        r->cap = nc;
    }
    r->v[r->n++] = (run){s, e, m};
    return true;
}

/* Runs of a literal/regex pattern (HF Pattern for &str / Regex). */
static bool runs_pattern(const tok_pattern *p, const char *s, size_t len, runs *r) {
    r->n = 0;
    if (len == 0) return runs_push(r, 0, 0, false);
    size_t pos = 0, last = SIZE_MAX, ms, me, prev = 0;
    while (tok_pattern_next(p, s, len, &pos, &last, &ms, &me)) {
        if (prev != ms && !runs_push(r, prev, ms, false)) return false;
        if (!runs_push(r, ms, me, true)) return false;
        prev = me;
    }
    return prev == len || runs_push(r, prev, len, false);
}

/* Runs of a character predicate: every matching char is its own run. */
static bool runs_pred(bool (*pred)(uint32_t), const char *s, size_t len, runs *r) {
    r->n = 0;
    if (len == 0) return runs_push(r, 0, 0, false);
    size_t last = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s, len, i, &cp);
        if (pred(cp)) {
            if (last < i && !runs_push(r, last, i, false)) return false;
            if (!runs_push(r, i, i + k, true)) return false;
            last = i + k;
        }
        i += k;
    }
    return last == len || runs_push(r, last, len, false);
}

/* Apply a behavior in place; afterwards every run in r is a piece (m unused). */
static void apply_behavior(runs *r, tok_behavior b, bool invert) {
    if (invert)
        for (size_t i = 0; i < r->n; i++)
            r->v[i].m = !r->v[i].m;
    size_t w = 0;
    bool prev_match = false;
    switch (b) {
    case TOK_SPLIT_ISOLATED:
        return;
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < r->n; i++)
            if (!r->v[i].m) r->v[w++] = r->v[i];
        r->n = w;
        return;
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < r->n; i++) {
            run x = r->v[i];
            if (x.m && !prev_match && w > 0)
                r->v[w - 1].e = x.e;
            else
                r->v[w++] = x;
            prev_match = x.m;
        }
        r->n = w;
        return;
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < r->n; i++) {
            run x = r->v[i];
            if (x.m == prev_match && w > 0)
                r->v[w - 1].e = x.e;
            else
                r->v[w++] = x;
            prev_match = x.m;
        }
        r->n = w;
        return;
    case TOK_SPLIT_MERGED_NEXT: {
        /* Walk backwards, merging a match into the piece that follows it; then compact. */
        size_t keep = r->n; /* pieces are collected at the top end of the array */
        for (size_t i = r->n; i-- > 0;) {
            run x = r->v[i];
            if (x.m && !prev_match && keep < r->n)
                r->v[keep].s = x.s;
            else
                r->v[--keep] = x;
            prev_match = x.m;
        }
        memmove(r->v, r->v + keep, (r->n - keep) * sizeof *r->v);
        r->n -= keep;
        return;
    }
    }
}

static bool emit_runs(const runs *r, const char *s, bool at_origin, tok_pieces *out) {
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i].e == r->v[i].s) continue;
        if (!tok_pieces_push(out, s + r->v[i].s, r->v[i].e - r->v[i].s,
                             at_origin && r->v[i].s == 0))
            return false;
    }
    return true;
}

/* GPT-2 byte-to-unicode map: printable bytes keep their code point, the rest go to 256+. */
static uint32_t byte_char(unsigned b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174)) return b;
    if (b <= 32) return 256 + b;
    if (b <= 160) return 256 + 33 + (b - 127);
    return 256 + 67; /* 173 */
}

static bool put_bytelevel(tok_buf *t, const char *s, size_t len) {
    if (!tok_buf_reserve(t, len * 2)) return false;
    for (size_t i = 0; i < len; i++) {
        uint32_t c = byte_char((unsigned char)s[i]);
        if (c < 0x80)
            t->p[t->len++] = (char)c;
        else {
            t->p[t->len++] = (char)(0xC0 | (c >> 6));
            t->p[t->len++] = (char)(0x80 | (c & 0x3F));
        }
    }
    t->p[t->len] = 0;
    return true;
}

static bool is_ws(uint32_t c) {
    return tok_is_whitespace(c);
}
static bool is_num(uint32_t c) {
    return tok_is_numeric(c);
}
static bool is_punc(uint32_t c) {
    return tok_is_punctuation(c);
}

static bool step_piece(const tok_pretok *p, const char *s, size_t len, bool origin, tok_pieces *out,
                       runs *r, tok_buf *tmp) {
    switch (p->type) {
    case TOK_PRE_SPLIT:
        if (!runs_pattern(&p->pat, s, len, r)) return false;
        apply_behavior(r, p->behavior, p->invert);
        return emit_runs(r, s, origin, out);
    case TOK_PRE_WHITESPACE:
        /* \w+|[^\w\s]+ with Rust regex classes (HF uses the regex crate here, not Oniguruma) */
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s, len, i, &cp);
            if (tok_is_whitespace(cp)) {
                i += k;
                continue;
            }
            bool word = tok_is_word_char(cp);
            size_t e = i + k;
            while (e < len) {
                size_t k2 = tok_utf8_decode(s, len, e, &cp);
                if (tok_is_whitespace(cp) || tok_is_word_char(cp) != word) break;
                e += k2;
            }
            if (!tok_pieces_push(out, s + i, e - i, origin && i == 0)) return false;
            i = e;
        }
        return true;
    case TOK_PRE_WHITESPACE_SPLIT:
        if (!runs_pred(is_ws, s, len, r)) return false;
        apply_behavior(r, TOK_SPLIT_REMOVED, false);
        return emit_runs(r, s, origin, out);
    case TOK_PRE_DIGITS:
        if (!runs_pred(is_num, s, len, r)) return false;
        apply_behavior(r, p->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS, false);
        return emit_runs(r, s, origin, out);
    case TOK_PRE_PUNCTUATION:
        if (!runs_pred(is_punc, s, len, r)) return false;
        apply_behavior(r, p->behavior, false);
        return emit_runs(r, s, origin, out);
    case TOK_PRE_BYTELEVEL: {
        tmp->len = 0;
        if (p->add_prefix_space && (len == 0 || s[0] != ' ') && !tok_buf_put(tmp, " ", 1))
            return false;
        if (!tok_buf_put(tmp, s, len)) return false;
        const char *t = tmp->p;
        size_t tl = tmp->len;
        if (p->use_regex) {
            if (!runs_pattern(&p->pat, t, tl, r)) return false;
        } else {
            r->n = 0;
            if (!runs_push(r, 0, tl, false)) return false;
        }
        for (size_t i = 0; i < r->n; i++) {
            if (r->v[i].e == r->v[i].s) continue;
            size_t off = out->text.len;
            if (!put_bytelevel(&out->text, t + r->v[i].s, r->v[i].e - r->v[i].s)) return false;
            if (!tok_pieces_push(out, "", 0, origin && r->v[i].s == 0)) return false;
            out->v[out->n - 1].off = off;
            out->v[out->n - 1].len = out->text.len - off;
        }
        return true;
    }
    case TOK_PRE_METASPACE: {
        tmp->len = 0;
        bool prepend =
            p->prepend == TOK_PREPEND_ALWAYS || (p->prepend == TOK_PREPEND_FIRST && origin);
        /* The prepend test looks at the text after spaces became the replacement. */
        bool starts = (len >= 1 && s[0] == ' ') ||
                      (len >= p->repl_len && memcmp(s, p->repl, p->repl_len) == 0);
        if (prepend && !starts && !tok_buf_put(tmp, p->repl, p->repl_len)) return false;
        for (size_t i = 0; i < len; i++) {
            bool ok =
                s[i] == ' ' ? tok_buf_put(tmp, p->repl, p->repl_len) : tok_buf_put(tmp, s + i, 1);
            if (!ok) return false;
        }
        const char *t = tmp->p;
        size_t tl = tmp->len;
        if (!p->split) return tl == 0 || tok_pieces_push(out, t, tl, origin);
        tok_pattern lit = {(char *)p->repl, p->repl_len, NULL};
        if (!runs_pattern(&lit, t, tl, r)) return false;
        apply_behavior(r, TOK_SPLIT_MERGED_NEXT, false);
        return emit_runs(r, t, origin, out);
    }
    case TOK_PRE_BERT:
        /* whitespace removed, then every punctuation char isolated */
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s, len, i, &cp);
            if (tok_is_whitespace(cp)) {
                i += k;
                continue;
            }
            size_t e = i;
            while (e < len) {
                size_t k2 = tok_utf8_decode(s, len, e, &cp);
                if (tok_is_whitespace(cp)) break;
                e += k2;
            }
            if (!runs_pred(is_punc, s + i, e - i, r)) return false;
            if (!emit_runs(r, s + i, origin && i == 0, out)) return false;
            i = e;
        }
        return true;
    case TOK_PRE_SEQUENCE:
        return false; /* flattened at load time */
    }
    return false;
}

static bool step(const tok_pretok *p, const tok_pieces *in, tok_pieces *out, runs *r,
                 tok_buf *tmp) {
    tok_pieces_reset(out);
    for (size_t i = 0; i < in->n; i++) {
        const tok_piece *pc = &in->v[i];
        if (!step_piece(p, in->text.p + pc->off, pc->len, pc->at_origin, out, r, tmp)) return false;
    }
    return true;
}

bool tok_pretokenize(const tok_pretok *p, tok_pieces *in, tok_pieces *out, tok_pieces *scratch) {
    runs r = {0};
    tok_buf tmp = {0};
    bool ok = true;
    if (p->type != TOK_PRE_SEQUENCE) {
        ok = step(p, in, out, &r, &tmp);
    } else if (p->nkids == 0) {
        tok_pieces_reset(out);
        for (size_t i = 0; ok && i < in->n; i++)
            ok = tok_pieces_push(out, in->text.p + in->v[i].off, in->v[i].len, in->v[i].at_origin);
    } else {
        tok_pieces *src = in, *dst = out;
        for (size_t k = 0; ok && k < p->nkids; k++) {
            ok = step(p->kids[k], src, dst, &r, &tmp);
            src = dst;
            dst = (dst == out) ? scratch : out;
        }
        if (ok && src != out) {
            tok_pieces t = *out;
            *out = *src;
            *src = t;
        }
    }
    free(r.v);
    tok_buf_free(&tmp);
    return ok;
}
