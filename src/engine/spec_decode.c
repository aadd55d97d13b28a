/* spec_decode.c - greedy speculative decoding with the MTP head (cortiq/engine.h, spec §2.1):
 * the head's KV cache kept in step with the session, the verify pass and its rollback.
 *
 * State: the head holds entries 0 .. hd->pos - 1; the main model's hidden states of positions
 * hd->pos .. session pos - 1 wait in `rows` (entry i needs t_{i+1}, known only once the token
 * after position i is chosen). A decode step therefore first adds the waiting entries with the
 * chosen token last, which yields the draft, then verifies. */
#include <stdlib.h>
#include <string.h>

#include "engine/mtp.h"

struct cortiq_mtp {
    cortiq_session *s;
    cq_mtp_state *hd;
    int32_t *tok;   /* [ctx] tokens evaluated through this object, by position */
    uint32_t n_tok; /* tok[0 .. n_tok) are the session's */
    float *rows;    /* [cap, hidden] hidden states of positions row0 .. row0 + n_rows - 1 */
    size_t n_rows, cap;
    uint32_t row0;
    float *logits; /* [2, vocab] of a verify pass */
    uint64_t drafts, accepted;
    /* recent acceptance (an exponential average over drafts) and the steps since the last
     * draft: while drafts are mostly rejected, only every CQ_MTP_PROBE-th step drafts */
    float recent;
    uint32_t idle;
};

/* A verify pass costs more than one decode step (two tokens through every product, the head's
 * block and lm_head): below this acceptance a draft costs more than it gains on any CPU
 * measured (docs/HYBRID.md); a probe every CQ_MTP_PROBE steps notices when drafts agree again. */
#define CQ_MTP_MIN_RATE 0.25f
#define CQ_MTP_PROBE    16

bool cortiq_model_has_mtp(const cortiq_model *m) {
    return m->mtp != NULL;
}

cmf_status cortiq_mtp_create(cortiq_session *s, cortiq_mtp **out, cmf_err *err) {
    *out = NULL;
    cortiq_mtp *d = calloc(1, sizeof *d);
    if (!d) return cmf_err_set(err, CMF_E_NOMEM, "mtp", "state");
    d->s = s;
    d->recent = 1.0f;
    cmf_status st = cq_mtp_state_create(s, &d->hd, err);
    if (st) return free(d), st;
    d->cap = 2;
    d->tok = malloc((size_t)s->ctx * sizeof *d->tok);
    d->rows = malloc(d->cap * s->m->hidden * sizeof(float));
    d->logits = malloc(2 * (size_t)s->m->vocab * sizeof(float));
    if (!d->tok || !d->rows || !d->logits) {
        cortiq_mtp_free(d);
        return cmf_err_set(err, CMF_E_NOMEM, "mtp", "buffers for ctx %u", s->ctx);
    }
    *out = d;
    return CMF_OK;
}

void cortiq_mtp_free(cortiq_mtp *d) {
    if (!d) return;
    cq_mtp_state_free(d->hd);
    free(d->tok), free(d->rows), free(d->logits), free(d);
}

static bool reserve(cortiq_mtp *d, size_t n) {
    if (n <= d->cap) return true;
    float *r = realloc(d->rows, n * d->s->m->hidden * sizeof(float));
    if (!r) return false;
    d->rows = r, d->cap = n;
    return true;
}

/* Follow a session truncated since the last call: the head drops the entries whose next token
 * may have changed, and the waiting rows drop the positions the session no longer holds. The
 * head then resumes at session pos - 1; a hidden state no longer kept (the session went back
 * below the rows) enters as zeros, which only weakens that entry's drafts. */
static uint32_t follow(cortiq_mtp *d) {
    uint32_t P = d->s->pos;
    if (d->n_tok > P) d->n_tok = P;
    cq_mtp_truncate(d->hd, P ? P - 1 : 0);
    if (d->row0 + d->n_rows > P) d->n_rows = P > d->row0 ? P - d->row0 : 0;
    return d->hd->pos;
}

static cmf_status outside(uint32_t pos, uint32_t known, cmf_err *err) {
    return cmf_err_set(err, CMF_E_INVALID_ARG, "mtp",
                       "the session holds %u positions but only %u went through this MTP state: "
                       "evaluate through cortiq_mtp_eval / cortiq_mtp_decode only",
                       pos, known);
}

/* Rows for positions first .. P - 1 into buf (zeros where not kept). */
static void gather_rows(const cortiq_mtp *d, uint32_t first, uint32_t P, float *buf) {
    size_t H = d->s->m->hidden;
    for (uint32_t p = first; p < P; p++) {
        float *dst = buf + (size_t)(p - first) * H;
        if (p >= d->row0 && p < d->row0 + d->n_rows)
            memcpy(dst, d->rows + (size_t)(p - d->row0) * H, H * sizeof(float));
        else
            memset(dst, 0, H * sizeof(float));
    }
}

/* Add the head's entries first .. P - 1 (next tokens tok[first + 1 ..], then `next` for the
 * last), with hidden rows buf; the draft of the token after next. */
static cmf_status add_entries(cortiq_mtp *d, uint32_t first, uint32_t P, const float *buf,
                              int32_t next, int32_t *draft, cmf_err *err) {
    size_t n = P - first;
    int32_t *nt = malloc(n * sizeof *nt);
    if (!nt) return cmf_err_set(err, CMF_E_NOMEM, "mtp", "entries");
    for (size_t i = 0; i + 1 < n; i++)
        nt[i] = d->tok[first + i + 1];
    nt[n - 1] = next;
    cmf_status st = cq_mtp_extend(d->hd, d->s, nt, buf, n, draft, err);
    free(nt);
    return st;
}

cmf_status cortiq_mtp_eval(cortiq_mtp *d, const int32_t *tokens, size_t n, cmf_err *err) {
    cortiq_session *s = d->s;
    size_t H = s->m->hidden;
    if (n == 0) return CMF_OK;
    uint32_t P = s->pos, first = follow(d);
    if (d->n_tok < P) return outside(P, d->n_tok, err);
    /* hidden rows of first .. P - 1 (kept or zeros), then the new tokens' */
    size_t old = P - first, total = old + n;
    float *buf = malloc(total * H * sizeof(float));
    if (!buf) return cmf_err_set(err, CMF_E_NOMEM, "mtp", "hidden states of %zu tokens", total);
    gather_rows(d, first, P, buf);
    cmf_status st = cortiq_session_eval_hidden(s, tokens, n, buf + old * H, err);
    if (!st) {
        memcpy(d->tok + P, tokens, n * sizeof *tokens);
        d->n_tok = P + (uint32_t)n;
        /* entries first .. P + n - 2: all but the last position, whose next token is unknown */
        int32_t draft;
        if (total > 1)
            st = add_entries(d, first, (uint32_t)(first + total - 1), buf, tokens[n - 1], &draft,
                             err);
    }
    if (!st) {
        if (!reserve(d, 2))
            st = cmf_err_set(err, CMF_E_NOMEM, "mtp", "rows");
        else {
            memcpy(d->rows, buf + (total - 1) * H, H * sizeof(float));
            d->row0 = (uint32_t)(first + total - 1), d->n_rows = 1;
        }
    }
    free(buf);
    return st;
}

cmf_status cortiq_mtp_draft(cortiq_mtp *d, int32_t next, int32_t *draft, cmf_err *err) {
    cortiq_session *s = d->s;
    uint32_t P = s->pos;
    if (P == 0) return cmf_err_set(err, CMF_E_INVALID_ARG, "mtp", "draft before any token");
    uint32_t first = follow(d);
    if (d->n_tok < P) return outside(P, d->n_tok, err);
    size_t n = P - first;
    float *buf = malloc(n * s->m->hidden * sizeof(float));
    if (!buf) return cmf_err_set(err, CMF_E_NOMEM, "mtp", "hidden states");
    gather_rows(d, first, P, buf);
    cmf_status st = add_entries(d, first, P, buf, next, draft, err);
    /* keep h_{P-1}: entry P - 1 is redone if the token after P - 1 turns out otherwise */
    if (!st) {
        memcpy(d->rows, buf + (n - 1) * s->m->hidden, s->m->hidden * sizeof(float));
        d->row0 = P - 1, d->n_rows = 1;
    }
    free(buf);
    return st;
}

const float *cortiq_mtp_draft_logits(const cortiq_mtp *d) {
    return d->hd->logits;
}

cmf_status cortiq_mtp_decode(cortiq_mtp *d, const int32_t *hist, size_t n_hist, cortiq_sampler *smp,
                             bool speculate, int32_t *accepted, cmf_err *err) {
    cortiq_session *s = d->s;
    size_t H = s->m->hidden, V = s->m->vocab;
    uint32_t P = s->pos;
    *accepted = -1;
    if (n_hist != (size_t)P + 1)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "mtp",
                           "history of %zu tokens: the session holds %u, want one more", n_hist, P);
    int32_t pair[2] = {hist[P], -1};
    speculate = speculate && P > 0 && (uint64_t)P + 2 <= s->ctx;
    if (speculate && d->recent < CQ_MTP_MIN_RATE && ++d->idle < CQ_MTP_PROBE) speculate = false;
    if (speculate) d->idle = 0;
    cmf_status st;
    if (speculate && (st = cortiq_mtp_draft(d, pair[0], &pair[1], err))) return st;
    size_t n = speculate ? 2 : 1;
    if (!reserve(d, 2)) return cmf_err_set(err, CMF_E_NOMEM, "mtp", "rows");
    float *rows = d->rows;
    if (d->n_rows && d->row0 + d->n_rows == P) { /* keep the waiting rows ahead of these */
        if (!reserve(d, d->n_rows + n)) return cmf_err_set(err, CMF_E_NOMEM, "mtp", "rows");
        rows = d->rows + d->n_rows * H;
    } else
        d->n_rows = 0, d->row0 = P;
    if ((st = cq_session_eval_spec(s, pair, n, d->logits, rows, err))) return st;
    d->tok[P] = pair[0];
    d->n_tok = P + 1;
    d->n_rows += n;
    if (!speculate) return CMF_OK;
    d->drafts++;
    bool hit = cortiq_sampler_sample(smp, d->logits, hist, n_hist) == pair[1];
    d->recent = 0.875f * d->recent + (hit ? 0.125f : 0.0f);
    if (hit) {
        d->accepted++;
        d->tok[P + 1] = pair[1];
        d->n_tok = P + 2;
        *accepted = pair[1];
        return CMF_OK;
    }
    /* rejected: drop the draft from the KV cache and the recurrent state (its checkpoint
     * before the last token of this two-token evaluation restores it exactly) */
    cortiq_session_truncate(s, P + 1);
    if (s->pos != P + 1)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "mtp",
                           "rollback reached position %u instead of %u", s->pos, P + 1);
    d->n_rows--;
    memcpy(s->logits, d->logits, V * sizeof(float));
    return CMF_OK;
}

void cortiq_mtp_counts(const cortiq_mtp *d, uint64_t *drafts, uint64_t *accepted) {
    *drafts = d->drafts, *accepted = d->accepted;
}
