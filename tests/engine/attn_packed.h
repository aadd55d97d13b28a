/* attn_packed.h - the packed query heads of a task mask (engine/attn_heads.h) for the attention
 * kernel tests: kv head 0 serves none of its heads (with one kv head: every other one), every
 * later kv head every other one of its own (all of them at group 1). Include after test.h. */
#ifndef CORTIQ_TEST_ATTN_PACKED_H
#define CORTIQ_TEST_ATTN_PACKED_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct attn_packed {
    uint32_t n_on, *heads, *kv_first; /* heads: the dense index of each packed head */
    float *q, *out;                   /* [tokens][n_on * hd] */
} attn_packed;

/* Packs the queries of n tokens (rows of n_heads * hd floats). */
static inline void attn_packed_init(attn_packed *p, const float *q, size_t n, uint32_t n_heads,
                                    uint32_t n_kv, uint32_t hd) {
    uint32_t group = n_heads / n_kv;
    p->heads = calloc(n_heads, sizeof *p->heads);
    p->kv_first = calloc(n_kv + 1, sizeof *p->kv_first);
    p->n_on = 0;
    uint32_t first = n_kv > 1 ? group : 0;
    for (uint32_t h = first; h < n_heads; h++)
        if ((h - first) % 2 == 0 || group == 1) {
            p->heads[p->n_on++] = h;
            p->kv_first[h / group + 1]++;
        }
    for (uint32_t k = 0; k < n_kv; k++)
        p->kv_first[k + 1] += p->kv_first[k];
    size_t pd = (size_t)(p->n_on ? p->n_on : 1) * hd;
    p->q = malloc(sizeof(float) * pd * n);
    p->out = malloc(sizeof(float) * pd * n);
    for (size_t t = 0; t < n; t++)
        for (uint32_t j = 0; j < p->n_on; j++) {
            memcpy(p->q + (t * p->n_on + j) * hd, q + (t * n_heads + p->heads[j]) * hd,
                   hd * sizeof(float));
            for (uint32_t i = 0; i < hd; i++)
                p->out[(t * p->n_on + j) * hd + i] = NAN;
        }
}

/* The largest |packed output - ref| over the active heads (ref: the dense rows, in double). */
static inline double attn_packed_error(const attn_packed *p, const double *ref, size_t n,
                                       uint32_t n_heads, uint32_t hd) {
    double e = 0;
    for (size_t t = 0; t < n; t++)
        for (uint32_t j = 0; j < p->n_on; j++)
            for (uint32_t i = 0; i < hd; i++) {
                double d = fabs(p->out[(t * p->n_on + j) * hd + i] -
                                ref[(t * n_heads + p->heads[j]) * hd + i]);
                if (!(d <= e)) e = d; /* NaN sticks */
            }
    return e;
}

static inline void attn_packed_free(attn_packed *p) {
    free(p->heads), free(p->kv_first), free(p->q), free(p->out);
}

#endif
