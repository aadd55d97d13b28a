/* i8dec_ref.h - the reference the one-token int8-activation kernel tests share
 * (test_kernel_i8dec.c, test_kernel_i8dec_avx2.c): a token quantized as the kernels do it
 * (dx = absmax/127 per 32-group, xq = round-to-nearest-even(x * 127/absmax)), and the kernels'
 * rows against the double-precision product with that token. */
#ifndef CORTIQ_TESTS_I8DEC_REF_H
#define CORTIQ_TESTS_I8DEC_REF_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cortiq/kernels.h"
#include "cortiq/quant.h"
#include "quant/kernel_gen.h"

/* x: random in [-1, 1], every 29th column 20x larger, and from 64 columns on an all-zero
 * group (dx = 0); xd: x quantized as the kernels do it, returned dequantized (xq * dx). */
static inline void i8ref_token(kg_rng *rng, uint64_t cols, float *x, double *xd) {
    for (uint64_t i = 0; i < cols; i++)
        x[i] = kg_unif(rng, -1, 1) * (i % 29 == 0 ? 20.0f : 1.0f);
    if (cols >= 64)
        for (int i = 32; i < 64; i++)
            x[i] = 0;
    for (uint64_t g = 0; g < cols / 32; g++) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[32 * g + i]));
        float inv = amax > 0 ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
        for (int i = 0; i < 32; i++) {
            float q = nearbyintf(x[32 * g + i] * inv);
            if (q > 127) q = 127;
            if (q < -127) q = -127;
            xd[32 * g + i] = (double)q * dx;
        }
    }
}

/* Rows of m whose y[r] is not within float summation error (1e-5 of sum |w x|) of the exact
 * product with xd; the first few are printed, *bad counts them. */
static inline void i8ref_check_rows(const cmf_qmat *m, const float *y, const double *xd, int *bad) {
    const uint64_t rows = m->rows, cols = m->cols;
    float *w = malloc(cols * sizeof *w);
    for (uint64_t r = 0; r < rows; r++) {
        cmf_qmat_dequant_row(m, r, w);
        double s = 0, mag = 0;
        for (uint64_t i = 0; i < cols; i++) {
            s += w[i] * xd[i];
            mag += fabs(w[i] * xd[i]);
        }
        if (!(fabs(y[r] - s) <= 1e-5 * mag + 1e-30) && (*bad)++ < 3)
            fprintf(stderr, "  %s [%llu x %llu] row %llu: got %.9g want %.9g (sum|wx| %.3g)\n",
                    cmf_dtype_name(m->dtype), (unsigned long long)rows, (unsigned long long)cols,
                    (unsigned long long)r, y[r], s, mag);
    }
    free(w);
}

#endif
