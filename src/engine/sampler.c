/* sampler.c - next-token choice: greedy, or temperature with top-k / top-p / min-p and a
 * repetition penalty, driven by an explicit xorshift RNG so a seed reproduces a run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/engine.h"

struct cortiq_sampler {
    cortiq_sampler_params p;
    uint32_t vocab;
    uint64_t rng;
    float *work;
    uint32_t *idx;
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

cmf_status cortiq_sampler_create(const cortiq_sampler_params *p, uint32_t vocab, cortiq_sampler **out, cmf_err *err) {
    *out = NULL;
    cortiq_sampler *s = calloc(1, sizeof *s);
    if (!s || !(s->work = malloc(vocab * sizeof(float))) || !(s->idx = malloc(vocab * sizeof(uint32_t)))) {
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
    free(s->idx);
    free(s);
}

int32_t cortiq_argmax(const float *l, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return (int32_t)best;
}

static double next_uniform(cortiq_sampler *s) {
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

static const float *g_sort_vals;
static int cmp_desc(const void *a, const void *b) {
    float x = g_sort_vals[*(const uint32_t *)a], y = g_sort_vals[*(const uint32_t *)b];
    if (x != y) return x < y ? 1 : -1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

int32_t cortiq_sampler_sample(cortiq_sampler *s, const float *logits, const int32_t *hist, size_t n_hist) {
    float *w = s->work;
    memcpy(w, logits, s->vocab * sizeof(float));
    if (s->p.repeat_penalty != 1.0f && hist) {
        size_t from = s->p.repeat_last_n > 0 && n_hist > (size_t)s->p.repeat_last_n ? n_hist - (size_t)s->p.repeat_last_n : 0;
        for (size_t i = from; i < n_hist; i++) {
            int32_t t = hist[i];
            if (t < 0 || (uint32_t)t >= s->vocab) continue;
            /* llama.cpp / HF convention: shrink positive logits, push negative ones down */
            if (w[t] == logits[t]) w[t] = w[t] > 0 ? w[t] / s->p.repeat_penalty : w[t] * s->p.repeat_penalty;
        }
    }
    if (s->p.temperature <= 0) return cortiq_argmax(w, s->vocab);
    /* candidates: top-k (or all), sorted by logit */
    uint32_t n = s->vocab;
    for (uint32_t i = 0; i < n; i++) s->idx[i] = i;
    uint32_t k = s->p.top_k > 0 && (uint32_t)s->p.top_k < n ? (uint32_t)s->p.top_k : n;
    if (k < n) { /* partial selection: keep the k best at the front */
        for (uint32_t i = 0; i < k; i++) {
            uint32_t best = i;
            for (uint32_t j = i + 1; j < n; j++)
                if (w[s->idx[j]] > w[s->idx[best]]) best = j;
            uint32_t t = s->idx[i];
            s->idx[i] = s->idx[best];
            s->idx[best] = t;
        }
    } else {
        g_sort_vals = w;
        qsort(s->idx, n, sizeof *s->idx, cmp_desc);
    }
    float mx = w[s->idx[0]];
    double sum = 0;
    for (uint32_t i = 0; i < k; i++) {
        float e = expf((w[s->idx[i]] - mx) / s->p.temperature);
        w[s->idx[i]] = e;
        sum += e;
    }
    /* min-p: drop candidates below min_p x the best probability */
    uint32_t keep = k;
    if (s->p.min_p > 0) {
        float floor_p = s->p.min_p * w[s->idx[0]];
        while (keep > 1 && w[s->idx[keep - 1]] < floor_p) sum -= w[s->idx[--keep]];
    }
    /* top-p: the smallest prefix whose mass reaches top_p */
    if (s->p.top_p < 1.0f) {
        double acc = 0;
        for (uint32_t i = 0; i < keep; i++) {
            acc += w[s->idx[i]];
            if (acc >= s->p.top_p * sum) {
                keep = i + 1;
                sum = acc;
                break;
            }
        }
    }
    double r = next_uniform(s) * sum, acc = 0;
    for (uint32_t i = 0; i < keep; i++) {
        acc += w[s->idx[i]];
        if (r < acc) return (int32_t)s->idx[i];
    }
    return (int32_t)s->idx[keep - 1];
}
