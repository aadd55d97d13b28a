/* gen.c - one choice generated token by token on a slot (see gen.h). */
#include "server/gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"

#define PREFILL_CHUNK (4 * CORTIQ_EVAL_CHUNK) /* per engine turn: other slots go on between */

char *srv_token_text(const srv_ctx *c, int32_t id, size_t *len) {
    char *s = NULL;
    cmf_err err;
    if (cmf_tokenizer_decode(c->tok, &id, 1, false, &s, len, &err)) {
        *len = 0;
        return calloc(1, 1);
    }
    return s;
}

int srv_gen_start(srv_gen *g, srv_ctx *c, srv_slot *slot, const srv_request *rq,
                  const int32_t *prompt, size_t n_prompt, uint32_t max_tokens, uint64_t seed,
                  char *why, size_t why_len) {
    memset(g, 0, sizeof *g);
    g->c = c;
    g->slot = slot;
    g->rq = rq;
    g->prompt = prompt;
    g->n_prompt = n_prompt;
    g->max_tokens = max_tokens;
    g->hold_tools = rq->has_tools;
    g->t_start = srv_now();
    cortiq_sampler_params sp = {.temperature = rq->temperature,
                                .top_k = rq->top_k,
                                .top_p = rq->top_p,
                                .min_p = rq->min_p,
                                .repeat_penalty = rq->repetition_penalty,
                                .repeat_last_n = 64,
                                .seed = seed};
    cmf_err err;
    if (cortiq_sampler_create(&sp, c->vocab, &g->smp, &err) ||
        cmf_detok_stream_create(c->tok, true, &g->ds, &err)) {
        snprintf(why, why_len, "%s", err.msg);
        return -1;
    }
    g->work = malloc((size_t)c->vocab * sizeof *g->work);
    g->counts = calloc(c->vocab, sizeof *g->counts);
    if (!g->work || !g->counts) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    if (rq->grammar) {
        jg_init(&g->js, rq->grammar);
        g->tt = srv_tok_table_get(c);
        g->masked = malloc((size_t)c->vocab * sizeof *g->masked);
        g->scratch = malloc((size_t)c->vocab * sizeof *g->scratch);
        if (!g->tt || !g->masked || !g->scratch) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
    }
    return 0;
}

void srv_gen_free(srv_gen *g) {
    if (g->has_pending) { /* cancelled mid-answer: the submitted step still runs */
        char why[CMF_ERR_MSG_MAX];
        (void)srv_slot_decode_wait(&g->c->slots, &g->dec, why, sizeof why);
    }
    if (g->decoding) srv_slots_decoders(&g->c->slots, -1);
    cortiq_sampler_free(g->smp);
    cmf_detok_stream_free(g->ds);
    free(g->work);
    free(g->counts);
    free(g->text);
    free(g->lps);
    free(g->masked);
    free(g->scratch);
    memset(g, 0, sizeof *g);
}

/* Reuse the slot's cached prefix; evaluate the rest (at least the last token, for its logits)
 * so that the answer is the one a fresh slot gives: a cached token counts only if a prompt
 * evaluation put it there (hist[0 .. n_exact)), and the rest is cut as a fresh prompt would
 * be. With the model's exact chunk size (cortiq_model_exact_chunk) any prefix qualifies as long
 * as the rest, and every piece of it, is at least that long; without one, whole engine chunks
 * from the start only (a token's result then depends on its chunk's size class). */
static int prefill(srv_gen *g, char *why, size_t why_len) {
    srv_slot *sl = g->slot;
    const size_t n = g->n_prompt;
    size_t k = 0;
    while (k < sl->n_exact && k < n && sl->hist[k] == g->prompt[k])
        k++;
    const uint32_t exact = srv_slot_exact_chunk(sl);
    if (exact) {
        if (n - k < exact) k = n > exact ? n - exact : 0;
    } else {
        k = k / CORTIQ_EVAL_CHUNK * CORTIQ_EVAL_CHUNK;
        if (k == n) k -= CORTIQ_EVAL_CHUNK;
    }
    cortiq_session_truncate(sl->sess, (uint32_t)k);
    k = cortiq_session_pos(sl->sess); /* a recurrent (hybrid) model may return further back */
    srv_slot_keep(sl, k);
    g->cached = k;
    while (k < n) {
        size_t len = n - k < PREFILL_CHUNK ? n - k : PREFILL_CHUNK;
        /* no last piece shorter than the exact size: this one leaves it that many */
        if (exact && n - k > PREFILL_CHUNK && n - k - PREFILL_CHUNK < exact) len -= exact;
        if (srv_slot_eval(&g->c->slots, sl, g->prompt + k, len, why, why_len)) return -1;
        k += len;
    }
    return 0;
}

/* logit_bias and the OpenAI presence/frequency penalties (over the generated tokens). */
static const float *adjusted_logits(srv_gen *g) {
    const float *l = cortiq_session_logits(g->slot->sess);
    const srv_request *rq = g->rq;
    bool pen = rq->presence_penalty != 0 || rq->frequency_penalty != 0;
    if (!rq->n_bias && !pen) return l;
    float *w = g->work;
    memcpy(w, l, (size_t)g->c->vocab * sizeof *w);
    for (size_t i = 0; i < rq->n_bias; i++)
        if (rq->bias_ids[i] < g->c->vocab) w[rq->bias_ids[i]] += rq->bias_vals[i];
    if (pen)
        for (uint32_t t = 0; t < g->c->vocab; t++)
            if (g->counts[t])
                w[t] -= rq->presence_penalty + rq->frequency_penalty * (float)g->counts[t];
    return w;
}

static int record_logprobs(srv_gen *g, const float *l, int32_t tok) {
    if (g->n_lps == g->cap_lps) {
        size_t cap = g->cap_lps ? g->cap_lps * 2 : 64;
        srv_tok_lp *n = realloc(g->lps, cap * sizeof *n);
        if (!n) return -1;
        g->lps = n;
        g->cap_lps = cap;
    }
    uint32_t V = g->c->vocab;
    float mx = -INFINITY;
    for (uint32_t i = 0; i < V; i++)
        if (l[i] > mx) mx = l[i];
    double sum = 0;
    for (uint32_t i = 0; i < V; i++)
        sum += exp((double)l[i] - mx);
    float lse = mx + (float)log(sum);
    srv_tok_lp *e = &g->lps[g->n_lps++];
    e->id = tok;
    e->lp = l[tok] - lse;
    e->n_top = 0;
    uint32_t k = g->rq->top_logprobs;
    for (uint32_t i = 0; i < V && k; i++) { /* insertion into the best k, best first */
        float v = l[i] - lse;
        if (e->n_top == k && !(v > e->top[k - 1].lp)) continue;
        uint32_t at = e->n_top < k ? e->n_top++ : k - 1;
        while (at > 0 && e->top[at - 1].lp < v) {
            e->top[at] = e->top[at - 1];
            at--;
        }
        e->top[at] = (srv_alt){(int32_t)i, v};
    }
    return 0;
}

static int append(srv_gen *g, const char *s, size_t n) {
    if (g->len + n + 1 > g->cap) {
        size_t cap = (g->len + n + 1) * 2;
        char *t = realloc(g->text, cap);
        if (!t) return -1;
        g->text = t;
        g->cap = cap;
    }
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = '\0';
    return 0;
}

/* The longest suffix of text that is a proper prefix of marker. */
static size_t partial_suffix(const char *text, size_t len, const char *marker) {
    size_t m = strlen(marker);
    for (size_t k = m - 1 < len ? m - 1 : len; k > 0; k--)
        if (!memcmp(text + len - k, marker, k)) return k;
    return 0;
}

static const char *const k_tool_markers[] = {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"};

/* Where the text may be handed out up to: before a possible stop string and, with tools, a
 * possible tool call (held whole; tools.c parses it at the end). */
static size_t safe_end(const srv_gen *g) {
    size_t hold = 0;
    for (size_t i = 0; i < g->rq->n_stop; i++) {
        size_t h = partial_suffix(g->text, g->len, g->rq->stop[i]);
        if (h > hold) hold = h;
    }
    size_t end = g->len - hold;
    if (g->hold_tools) {
        size_t lead = 0; /* a JSON call (Llama 3.x) is the whole answer */
        while (lead < g->len && (g->text[lead] == ' ' || g->text[lead] == '\n'))
            lead++;
        if (lead < g->len && g->text[lead] == '{') return g->emitted;
        for (size_t i = 0; i < sizeof k_tool_markers / sizeof *k_tool_markers; i++) {
            const char *at = g->len ? strstr(g->text, k_tool_markers[i]) : NULL;
            size_t h = at ? (size_t)(at - g->text)
                          : g->len - partial_suffix(g->text, g->len, k_tool_markers[i]);
            if (h < end) end = h;
        }
    }
    while (end > g->emitted && (g->text[end] & 0xC0) == 0x80) /* a whole character */
        end--;
    return end < g->emitted ? g->emitted : end;
}

/* Cut the text at the first stop string that starts at or after `from`; true if one did. */
static bool cut_at_stop(srv_gen *g, size_t from) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < g->rq->n_stop; i++) {
        const char *at = strstr(g->text + from, g->rq->stop[i]);
        if (at && (size_t)(at - g->text) < best) best = (size_t)(at - g->text);
    }
    if (best == SIZE_MAX) return false;
    g->len = best;
    g->text[best] = '\0';
    return true;
}

static bool is_eos(const srv_ctx *c, int32_t t) {
    for (size_t i = 0; i < c->n_eos; i++)
        if (c->eos[i] == t) return true;
    return false;
}

int srv_gen_step(srv_gen *g, size_t *from, size_t *to, char *why, size_t why_len) {
    *from = *to = g->emitted;
    g->lps_emitted = g->n_lps;
    if (g->done) return 0;
    if (!g->t_first && !g->has_pending) {
        if (prefill(g, why, why_len)) return -1;
    } else if (g->has_pending) {
        g->has_pending = false;
        if (srv_slot_decode_wait(&g->c->slots, &g->dec, why, why_len)) return -1;
    }
    srv_slot *sl = g->slot;
    const float *l = adjusted_logits(g);
    const float *pick = l;
    if (g->rq->grammar) { /* only tokens that continue a valid value */
        srv_mask_params mp = {.temperature = g->rq->temperature,
                              .top_k = g->rq->top_k,
                              .penalised = g->rq->repetition_penalty != 1.0f};
        if (!srv_constrain_mask(g->tt, g->rq->grammar, &g->js, g->c->eos, g->c->n_eos, &mp, l,
                                g->c->vocab, g->masked, g->scratch)) {
            snprintf(why, why_len,
                     "response_format: no token of the vocabulary continues the "
                     "JSON value here");
            return -1;
        }
        pick = g->masked;
    }
    int32_t t = cortiq_sampler_sample(g->smp, pick, sl->hist, sl->n_hist);
    if (!g->t_first) g->t_first = srv_now();
    if (is_eos(g->c, t)) {
        g->finish = "stop";
        g->done = true;
    } else {
        if (g->rq->logprobs && record_logprobs(g, l, t)) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
        g->n_gen++;
        g->counts[t]++;
        const char *piece;
        size_t plen;
        cmf_err err;
        if (cmf_detok_stream_push(g->ds, t, &piece, &plen, &err)) {
            snprintf(why, why_len, "%s", err.msg);
            return -1;
        }
        size_t longest = 0;
        for (size_t i = 0; i < g->rq->n_stop; i++)
            if (strlen(g->rq->stop[i]) > longest) longest = strlen(g->rq->stop[i]);
        size_t search = g->len > longest ? g->len - longest : 0;
        if (append(g, piece, plen)) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
        if (g->rq->grammar)
            jg_feed(&g->js, g->rq->grammar, g->tt->blob + g->tt->off[t], g->tt->len[t]);
        if (g->rq->grammar && jg_done(&g->js)) { /* the value is complete */
            g->finish = "stop";
            g->done = true;
        } else if (g->rq->n_stop && cut_at_stop(g, search < g->emitted ? g->emitted : search)) {
            g->finish = "stop";
            g->done = true;
        } else if (g->n_gen >= g->max_tokens || sl->n_hist + 1 >= cortiq_session_ctx(sl->sess)) {
            g->finish = "length";
            g->done = true;
        } else if (srv_flag(&g->c->aborting) ||
                   (g->c->cfg.max_seconds > 0 && srv_now() - g->t_start > g->c->cfg.max_seconds)) {
            g->finish = "length";
            g->done = true;
        } else {
            /* counted before it joins, so the engine gathers it with the others */
            if (!g->decoding) srv_slots_decoders(&g->c->slots, +1);
            g->decoding = true;
            srv_slot_decode_submit(&g->c->slots, sl, t, &g->dec);
            g->has_pending = true;
        }
    }
    if (g->done) g->t_end = srv_now();
    if (g->done && g->decoding) {
        srv_slots_decoders(&g->c->slots, -1);
        g->decoding = false;
    }
    size_t end = g->done ? g->len : safe_end(g);
    *from = g->emitted;
    *to = end;
    g->emitted = end;
    return 0;
}
