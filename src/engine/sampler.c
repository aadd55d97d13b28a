/* sampler.c - next-token choice: greedy, or temperature with top-k / top-p / min-p and a
 * repetition penalty, driven by an explicit xorshift RNG so a seed reproduces a run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "cortiq/engine.h"
#include "engine/act_ops.h"

/* A candidate token: its logit (after the penalty), then its probability weight. */
typedef struct cand {
    float v;
    uint32_t i;
} cand;

struct cortiq_sampler {
    cortiq_sampler_params p;
    uint32_t vocab;
    uint64_t rng;
    float *work;
    cand *c; /* vocab entries */
};

void cortiq_sampler_defaults(cortiq_sampler_params *p) {
    p->temperature = 0.7f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0x5eed;
}

cmf_status cortiq_sampler_create(const cortiq_sampler_params *p, uint32_t vocab,
                                 cortiq_sampler **out, cmf_err *err) {
    *out = NULL;
    cortiq_sampler *s = calloc(1, sizeof *s);
    if (!s || !(s->work = malloc(vocab * sizeof(float))) ||
        !(s->c = malloc(vocab * sizeof(cand)))) {
        if (s) free(s->work);
        free(s);
        return cmf_err_set(err, CMF_E_NOMEM, "sampler", "vocab %u", vocab);
    }
    s->p = *p;
    s->vocab = vocab;
    s->rng = p->seed ? p->seed : 0x9E3779B97F4A7C15ULL;
    *out = s;
    return CMF_OK;
}

void cortiq_sampler_free(cortiq_sampler *s) {
    if (!s) return;
    free(s->work);
    free(s->c);
    free(s);
}

int32_t cortiq_argmax(const float *l, uint32_t n) {
    return n ? (int32_t)cq_act_ops_get()->argmax(l, n) : 0;
}

static double next_uniform(cortiq_sampler *s) {
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

/* Candidate order: the higher logit first, the lower token id on ties. */
static int better(cand a, cand b) {
    return a.v > b.v || (a.v == b.v && a.i < b.i);
}

/* A heap whose root is its worst candidate (the one every other is better than). */
static void sift_down(cand *h, uint32_t n, uint32_t at) {
    for (;;) {
        uint32_t l = 2 * at + 1, w = at;
        if (l < n && better(h[w], h[l])) w = l;
        if (l + 1 < n && better(h[w], h[l + 1])) w = l + 1;
        if (w == at) return;
        cand t = h[at];
        h[at] = h[w];
        h[w] = t;
        at = w;
    }
}

static void sift_up(cand *h, uint32_t at) {
    while (at && better(h[(at - 1) / 2], h[at])) {
        cand t = h[at];
        h[at] = h[(at - 1) / 2];
        h[(at - 1) / 2] = t;
        at = (at - 1) / 2;
    }
}

/* The k best tokens whose logit is >= floor (NaN never is) into c, best first; returns how
 * many. One pass with a k-heap, then its heapsort: O(n log k), where picking them one scan at
 * a time was O(n k) (40 scans of Gemma 3's 262,144 logits per token, longer than the forward
 * pass). Once the heap is full only logits >= its worst can enter, so the scan tests blocks
 * of 16 against that bar first (a loop the compiler vectorizes) and looks inside a block only
 * when one passes. */
static uint32_t best_k(const float *w, uint32_t n, uint32_t k, float floor, cand *c) {
    uint32_t m = 0;
    float bar = floor;
    for (uint32_t i0 = 0; i0 < n; i0 += 16) {
        uint32_t i1 = n - i0 < 16 ? n : i0 + 16;
        if (i1 - i0 == 16) {
            int any = 0;
            for (uint32_t i = i0; i < i1; i++)
                any |= w[i] >= bar;
            if (!any) continue;
        }
        for (uint32_t i = i0; i < i1; i++) {
            if (!(w[i] >= bar)) continue;
            cand x = {w[i], i};
            if (m < k) {
                c[m] = x;
                sift_up(c, m++);
                if (m == k) bar = c[0].v; /* >= floor, as every member is */
            } else if (better(x, c[0])) {
                c[0] = x;
                sift_down(c, m, 0);
                bar = c[0].v;
            }
        }
    }
    for (uint32_t e = m; e > 1; e--) { /* the worst to the end, e - 1 times */
        cand t = c[0];
        c[0] = c[e - 1];
        c[e - 1] = t;
        sift_down(c, e - 1, 0);
    }
    return m;
}

int32_t cortiq_sampler_sample(cortiq_sampler *s, const float *logits, const int32_t *hist,
                              size_t n_hist) {
    bool penalised = s->p.repeat_penalty != 1.0f && hist;
    /* greedy without a penalty reads the logits as they are (no copy of the vocabulary:
     * 1 MiB a token for Gemma 3) */
    if (s->p.temperature <= 0 && !penalised) return cortiq_argmax(logits, s->vocab);
    float *w = s->work;
    memcpy(w, logits, s->vocab * sizeof(float));
    if (penalised) {
        size_t from = s->p.repeat_last_n > 0 && n_hist > (size_t)s->p.repeat_last_n
                          ? n_hist - (size_t)s->p.repeat_last_n
                          : 0;
        for (size_t i = from; i < n_hist; i++) {
            int32_t t = hist[i];
            if (t < 0 || (uint32_t)t >= s->vocab) continue;
            /* llama.cpp / HF convention: shrink positive logits, push negative ones down */
            if (w[t] == logits[t])
                w[t] = w[t] > 0 ? w[t] / s->p.repeat_penalty : w[t] * s->p.repeat_penalty;
        }
    }
    uint32_t top = (uint32_t)cortiq_argmax(w, s->vocab);
    float mx = w[top];
    /* greedy; and when the best logit is not finite (NaN or inf), the weights below are not
     * defined, so the pick is the argmax too */
    if (s->p.temperature <= 0 || !isfinite(mx)) return (int32_t)top;
    /* candidates: the top-k (or all) by logit, best first. min-p would drop every token whose
     * weight e^((w - mx) / T) is below min_p, i.e. w < mx + T ln(min_p); the tokens 0.1 %
     * further below that are left out before the selection (the exact test follows) */
    uint32_t n = s->vocab;
    uint32_t k = s->p.top_k > 0 && (uint32_t)s->p.top_k < n ? (uint32_t)s->p.top_k : n;
    float floor = -INFINITY;
    if (s->p.min_p > 0 && s->p.min_p <= 1)
        floor = mx + s->p.temperature * (logf(s->p.min_p) - 1e-3f);
    cand *c = s->c;
    k = best_k(w, n, k, floor, c); /* >= 1: mx itself passes */
    double sum = 0;
    for (uint32_t i = 0; i < k; i++) {
        c[i].v = expf((c[i].v - mx) / s->p.temperature);
        sum += c[i].v;
    }
    /* min-p: drop candidates below min_p x the best probability */
    uint32_t keep = k;
    if (s->p.min_p > 0) {
        float floor_p = s->p.min_p * c[0].v;
        while (keep > 1 && c[keep - 1].v < floor_p)
            sum -= c[--keep].v;
    }
    /* top-p: the smallest prefix whose mass reaches top_p */
    if (s->p.top_p < 1.0f) {
        double acc = 0;
        for (uint32_t i = 0; i < keep; i++) {
            acc += c[i].v;
            if (acc >= s->p.top_p * sum) {
                keep = i + 1;
                sum = acc;
                break;
            }
        }
    }
    double r = next_uniform(s) * sum, acc = 0;
    for (uint32_t i = 0; i < keep; i++) {
        acc += c[i].v;
        if (r < acc) return (int32_t)c[i].i;
    }
    return (int32_t)c[keep - 1].i;
}
