/* quant_matrix.h - deterministic test matrices for the codec error tests and bench_quant_error:
 * Gaussian, and heavy-tailed (Student-t, 4 degrees of freedom) with outlier input channels. */
#ifndef CORTIQ_TEST_QUANT_MATRIX_H
#define CORTIQ_TEST_QUANT_MATRIX_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t s;
} qm_rng;

static inline uint64_t qm_next(qm_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double qm_unif(qm_rng *r) {
    return ((double)(qm_next(r) >> 11) + 0.5) / 9007199254740992.0;
}
static inline double qm_gauss(qm_rng *r) {
    return sqrt(-2.0 * log(qm_unif(r))) * cos(6.283185307179586 * qm_unif(r));
}

/* rows x in N(0, 0.02^2) weights, row amplitudes varying x0.5..x2 (so vbit allocation matters). */
static inline void qm_gaussian(float *w, uint64_t rows, uint64_t in, uint64_t seed) {
    qm_rng r = {seed};
    for (uint64_t i = 0; i < rows; i++) {
        double amp = 0.02 * exp2(2.0 * qm_unif(&r) - 1.0);
        for (uint64_t j = 0; j < in; j++)
            w[i * in + j] = (float)(amp * qm_gauss(&r));
    }
}

/* Student-t(4) weights scaled to 0.02, and every 64th input channel x10 (outlier channels). */
static inline void qm_heavy(float *w, uint64_t rows, uint64_t in, uint64_t seed) {
    qm_rng r = {seed};
    for (uint64_t i = 0; i < rows; i++) {
        double amp = 0.02 * exp2(2.0 * qm_unif(&r) - 1.0);
        for (uint64_t j = 0; j < in; j++) {
            double chi = 0.0;
            for (int k = 0; k < 4; k++) {
                double g = qm_gauss(&r);
                chi += g * g;
            }
            double t = qm_gauss(&r) / sqrt(chi / 4.0) / sqrt(2.0); /* t4 has variance 2 */
            w[i * in + j] = (float)(amp * t * (j % 64 == 7 ? 10.0 : 1.0));
        }
    }
}

static inline double qm_rel_rmse(const float *a, const float *b, uint64_t n) {
    double num = 0.0, den = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)a[i] * (double)a[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

#endif
