/* The sampler (src/engine/sampler.c): greedy is the argmax; with a temperature, draws follow
 * the softmax of logit / T over the candidates that top-k, min-p and top-p leave, and never fall
 * outside them; the same seed draws the same tokens; the repetition penalty moves a token's
 * logit the way llama.cpp and HF do. Frequencies are checked over many draws against the exact
 * probabilities (4.5 standard deviations, so a correct sampler fails with probability ~1e-5
 * per token checked; the RNG is seeded, so a pass is reproducible). */
#include <math.h>
#include <stdlib.h>

#include "cortiq/engine.h"
#include "test.h"

#define V 300

static cortiq_sampler *make(float temp, int top_k, float top_p, float min_p, uint64_t seed) {
    cortiq_sampler_params p;
    cortiq_sampler_defaults(&p);
    p.temperature = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
    cortiq_sampler *s = NULL;
    cmf_err err;
    CHECK(cortiq_sampler_create(&p, V, &s, &err) == CMF_OK);
    return s;
}

/* The expected probability of each token under (temp, top_k, top_p, min_p), computed the plain
 * way: sort all but the NaNs, cut, renormalize. */
static void expected(const float *l, float temp, int top_k, float top_p, float min_p, double *pr) {
    int order[V], n = 0;
    for (int i = 0; i < V; i++) /* NaN logits are never candidates */
        if (!isnan(l[i])) order[n++] = i;
    for (int i = 0; i < n; i++) /* selection sort: higher logit, then lower id */
        for (int j = i + 1; j < n; j++)
            if (l[order[j]] > l[order[i]] || (l[order[j]] == l[order[i]] && order[j] < order[i])) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    int keep = top_k > 0 && top_k < n ? top_k : n;
    double w[V], sum = 0;
    for (int i = 0; i < keep; i++)
        sum += w[i] = exp(((double)l[order[i]] - l[order[0]]) / temp);
    if (min_p > 0)
        while (keep > 1 && w[keep - 1] < min_p * w[0])
            sum -= w[--keep];
    if (top_p < 1) {
        double acc = 0;
        for (int i = 0; i < keep; i++)
            if ((acc += w[i]) >= top_p * sum) {
                keep = i + 1, sum = acc;
                break;
            }
    }
    for (int i = 0; i < V; i++)
        pr[i] = 0;
    for (int i = 0; i < keep; i++)
        pr[order[i]] = w[i] / sum;
}

static void check_freq(const float *l, float temp, int top_k, float top_p, float min_p) {
    enum { DRAWS = 40000 };
    cortiq_sampler *s = make(temp, top_k, top_p, min_p, 777);
    double pr[V];
    int cnt[V] = {0};
    expected(l, temp, top_k, top_p, min_p, pr);
    for (int d = 0; d < DRAWS; d++) {
        int32_t t = cortiq_sampler_sample(s, l, NULL, 0);
        CHECK(t >= 0 && t < V);
        if (t >= 0 && t < V) cnt[t]++;
    }
    for (int i = 0; i < V; i++) {
        double mean = DRAWS * pr[i], sd = sqrt(DRAWS * pr[i] * (1 - pr[i]));
        if (pr[i] == 0)
            CHECK_MSG(cnt[i] == 0,
                      "T %g k %d p %g min_p %g: token %d drawn %d times, outside the candidates",
                      temp, top_k, top_p, min_p, i, cnt[i]);
        else
            CHECK_MSG(fabs(cnt[i] - mean) <= 4.5 * sd + 1,
                      "T %g k %d p %g min_p %g: token %d drawn %d times, expected %.1f", temp,
                      top_k, top_p, min_p, i, cnt[i], mean);
    }
    cortiq_sampler_free(s);
}

int main(void) {
    float l[V];
    uint64_t rng = 99;
    for (int i = 0; i < V; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = (float)((double)(rng >> 40) / 16777216.0 * 6 - 3);
    }
    l[17] = l[203] = 4.0f; /* a tie at the top: the lower id first */
    l[5] = NAN;            /* never drawn */
    l[6] = -INFINITY;      /* never drawn */

    /* greedy, and the argmax */
    cortiq_sampler *g = make(0, 40, 0.95f, 0.05f, 1);
    CHECK(cortiq_sampler_sample(g, l, NULL, 0) == 17);
    CHECK(cortiq_argmax(l, V) == 17);
    cortiq_sampler_free(g);

    /* top-k 1 is greedy at any temperature */
    cortiq_sampler *k1 = make(1.5f, 1, 1, 0, 3);
    for (int d = 0; d < 100; d++)
        CHECK(cortiq_sampler_sample(k1, l, NULL, 0) == 17);
    cortiq_sampler_free(k1);

    /* frequencies under each cut, alone and together (the defaults last) */
    check_freq(l, 1.0f, 0, 1, 0);
    check_freq(l, 0.7f, 10, 1, 0);
    check_freq(l, 1.3f, 0, 0.6f, 0);
    check_freq(l, 1.0f, 0, 1, 0.2f);
    check_freq(l, 0.7f, 40, 0.95f, 0.05f);

    /* the same seed draws the same tokens; another seed other ones */
    cortiq_sampler *a = make(1.0f, 0, 1, 0, 42), *b = make(1.0f, 0, 1, 0, 42),
                   *c = make(1.0f, 0, 1, 0, 43);
    int same = 0, differ = 0;
    for (int d = 0; d < 200; d++) {
        int32_t ta = cortiq_sampler_sample(a, l, NULL, 0),
                tb = cortiq_sampler_sample(b, l, NULL, 0),
                tc = cortiq_sampler_sample(c, l, NULL, 0);
        same += ta == tb, differ += ta != tc;
    }
    CHECK(same == 200);
    CHECK(differ > 50);
    cortiq_sampler_free(a), cortiq_sampler_free(b), cortiq_sampler_free(c);

    /* repetition penalty 1e6 on the two best: greedy then takes the third */
    cortiq_sampler_params p;
    cortiq_sampler_defaults(&p);
    p.temperature = 0, p.repeat_penalty = 1e6f;
    cortiq_sampler *r = NULL;
    cmf_err err;
    CHECK(cortiq_sampler_create(&p, V, &r, &err) == CMF_OK);
    int32_t hist[2] = {17, 203};
    int third = 0;
    for (int i = 1; i < V; i++)
        if (i != 17 && i != 203 && i != 5 && l[i] > l[third]) third = i;
    CHECK(cortiq_sampler_sample(r, l, hist, 2) == third);
    cortiq_sampler_free(r);
    TEST_DONE();
}
