/* gemm_case.h - the inputs the batched-product tests (test_gemm_float.c, test_gemm_bf16dot.c,
 * test_gemm_few.c) call a GEMM with: float weights, n tokens of activations over several
 * octaves with a padded row stride, an output with a padded stride filled with a sentinel, and
 * the check that the padding stayed. */
#ifndef CORTIQ_TEST_GEMM_CASE_H
#define CORTIQ_TEST_GEMM_CASE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/f16.h"
#include "cortiq/kernels.h"
#include "quant/kernel_gen.h"

#define GEMM_SENTINEL 12345.0f

typedef struct gemm_case {
    size_t n, ldx, ldy; /* ldx: cols + 3 for odd n; ldy: the rows asked + 5 when n & 2 */
    float *X, *Y;
} gemm_case;

static inline gemm_case gemm_case_make(size_t n, uint64_t cols, uint64_t rows, kg_rng *rng) {
    gemm_case c = {n, cols + (n & 1 ? 3 : 0), rows + (n & 2 ? 5 : 0), NULL, NULL};
    c.X = malloc(n * c.ldx * sizeof *c.X);
    c.Y = malloc(n * c.ldy * sizeof *c.Y);
    for (size_t i = 0; i < n * c.ldx; i++)
        c.X[i] = kg_unif(rng, -1, 1) * exp2f(kg_unif(rng, -4, 4));
    for (size_t i = 0; i < n * c.ldy; i++)
        c.Y[i] = GEMM_SENTINEL;
    return c;
}

/* A random f32 / f16 / bf16 weight payload of rows x cols, magnitudes over several octaves
 * (malloc'd; *nb its bytes). */
static inline uint8_t *gemm_case_weights(cmf_dtype dt, uint64_t rows, uint64_t cols, kg_rng *rng,
                                         uint64_t *nb) {
    size_t es = dt == CMF_DT_F32 ? 4 : 2;
    *nb = rows * cols * es;
    uint8_t *w = malloc(*nb);
    for (uint64_t i = 0; i < rows * cols; i++) {
        float v = kg_unif(rng, -1, 1) * exp2f(kg_unif(rng, -6, 2));
        if (dt == CMF_DT_F32)
            memcpy(w + 4 * i, &v, 4);
        else
            st_u16(w + 2 * i, dt == CMF_DT_F16 ? f32_to_f16(v) : f32_to_bf16(v));
    }
    return w;
}

/* The outputs past the `rows` asked for, in each token's padding: the count changed (the first
 * five reported under `label`). */
static inline int gemm_case_padding(const gemm_case *c, uint64_t rows, const char *label) {
    int bad = 0;
    for (size_t t = 0; t < c->n; t++)
        for (size_t i = rows; i < c->ldy; i++)
            if (c->Y[t * c->ldy + i] != GEMM_SENTINEL && bad++ < 5)
                fprintf(stderr, "  %s n=%zu: Y[%zu][%zu] written past the range\n", label, c->n, t,
                        i);
    return bad;
}

static inline void gemm_case_free(gemm_case *c) {
    free(c->X), free(c->Y);
}

#endif
