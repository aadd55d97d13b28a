/* gemm_case.h - the inputs the batched-product tests (test_gemm_float.c, test_gemm_bf16dot.c,
 * test_gemm_few.c, test_gemm_half_amx.c) call a GEMM with: float weights, n tokens of
 * activations over several octaves with a padded row stride, an output with a padded stride
 * filled with a sentinel; the check of the outputs against a double-precision reference (f32 or
 * bf16-rounded activations) and that the padding stayed. */
#ifndef CORTIQ_TEST_GEMM_CASE_H
#define CORTIQ_TEST_GEMM_CASE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/f16.h"
#include "common/test.h"
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

/* A batched product's signature (the float panels', the few-token rows'). */
typedef bool (*gemm_case_fn)(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                             size_t ldy, uint64_t r0, uint64_t r1);

/* How gemm_case_check_with judges an output: within rel of sum |w x| of a double-precision sum
 * of the dequantized rows times the activations. With bf16_x that sum takes the activations
 * rounded to bf16 (nearest even), as a kernel with CMF_KF_BF16_ACT rounds them, and the output
 * must also lie within the rounding's own bound (2^-8 + rel) of the f32 activations' sum. */
typedef struct gemm_bound {
    double rel;
    bool bf16_x;
} gemm_bound;

/* gemm over n tokens of a fresh case and rows [r0, r1) of m against the reference of bound b:
 * the outputs outside it plus those written past the range (the first five of each reported). */
static inline int gemm_case_check_with(gemm_case_fn gemm, const cmf_qmat *m, size_t n, uint64_t r0,
                                       uint64_t r1, gemm_bound b, kg_rng *rng) {
    const uint64_t cols = m->cols;
    gemm_case c = gemm_case_make(n, cols, r1 - r0, rng);
    float *w = malloc(cols * sizeof *w);
    CHECK(gemm(m, c.X, n, c.ldx, c.Y, c.ldy, r0, r1));
    const char *act = b.bf16_x ? " (bf16 activations)" : "";
    int bad = 0;
    for (uint64_t r = r0; r < r1; r++) {
        cmf_qmat_dequant_row(m, r, w);
        for (size_t t = 0; t < n; t++) {
            double s = 0, mag = 0, s32 = 0, mag32 = 0;
            for (uint64_t k = 0; k < cols; k++) {
                float x = c.X[t * c.ldx + k];
                double p = (double)w[k] * (b.bf16_x ? bf16_to_f32(f32_to_bf16(x)) : x),
                       p32 = (double)w[k] * x;
                s += p, mag += fabs(p);
                s32 += p32, mag32 += fabs(p32);
            }
            double got = c.Y[t * c.ldy + (r - r0)];
            bool ok = fabs(got - s) <= b.rel * mag + 1e-30 &&
                      (!b.bf16_x || fabs(got - s32) <= (exp2(-8) + b.rel) * mag32 + 1e-30);
            if (!ok && bad++ < 5)
                fprintf(stderr,
                        "  %s%s [%llu x %llu] n=%zu rows %llu..%llu: row %llu tok %zu got %.9g "
                        "want %.9g (f32 activations %.9g)\n",
                        cmf_dtype_name(m->dtype), act, (unsigned long long)m->rows,
                        (unsigned long long)cols, n, (unsigned long long)r0, (unsigned long long)r1,
                        (unsigned long long)r, t, got, s, s32);
        }
    }
    bad += gemm_case_padding(&c, r1 - r0, cmf_dtype_name(m->dtype));
    gemm_case_free(&c);
    free(w);
    return bad;
}

/* The tiers' common bound: 2e-5 of sum |w x| (f32 summation), f32 activations. */
static inline int gemm_case_check(gemm_case_fn gemm, const cmf_qmat *m, size_t n, uint64_t r0,
                                  uint64_t r1, kg_rng *rng) {
    return gemm_case_check_with(gemm, m, n, r0, r1, (gemm_bound){2e-5, false}, rng);
}

/* An infinite weight (row 3, col 5) and a NaN activation (token 2, col 7) in 9 tokens of each
 * float dtype through gemm: non-finite results exactly in row 3 and token 2; every other output
 * finite. */
static inline void gemm_case_nonfinite(gemm_case_fn gemm, const char *tier) {
    static const cmf_dtype dts[] = {CMF_DT_F32, CMF_DT_F16, CMF_DT_BF16};
    const uint64_t rows = 21, cols = 300;
    const size_t n = 9;
    kg_rng rng = {99};
    for (size_t d = 0; d < 3; d++) {
        uint64_t nb;
        uint8_t *p = gemm_case_weights(dts[d], rows, cols, &rng, &nb);
        if (dts[d] == CMF_DT_F32) {
            float inf = INFINITY;
            memcpy(p + 4 * (3 * cols + 5), &inf, 4);
        } else
            st_u16(p + 2 * (3 * cols + 5),
                   dts[d] == CMF_DT_F16 ? f32_to_f16(INFINITY) : f32_to_bf16(INFINITY));
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, dts[d], rows, cols, p, nb, "t", NULL) == CMF_OK);
        float *X = malloc(n * cols * sizeof *X), *Y = malloc(n * rows * sizeof *Y);
        for (size_t i = 0; i < n * cols; i++)
            X[i] = kg_unif(&rng, -1, 1);
        X[2 * cols + 7] = NAN;
        CHECK(gemm(&m, X, n, cols, Y, rows, 0, rows));
        int bad = 0;
        for (size_t t = 0; t < n; t++)
            for (uint64_t r = 0; r < rows; r++) {
                bool want_finite = t != 2 && r != 3;
                if (want_finite != (bool)isfinite(Y[t * rows + r]) && bad++ < 5)
                    fprintf(stderr, "  %s %s tok %zu row %llu: %g\n", tier, cmf_dtype_name(dts[d]),
                            t, (unsigned long long)r, Y[t * rows + r]);
            }
        CHECK_MSG(bad == 0, "%s %s: non-finite values misplaced (%d)", tier, cmf_dtype_name(dts[d]),
                  bad);
        free(X), free(Y), free(p);
        cmf_qmat_free(&m);
    }
}

#endif
