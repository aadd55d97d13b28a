/* The MLP gated activations (src/engine/act_ops*.c): every SIMD tier against the libm scalar
 * tier over [-120, 120] (dense near 0, the saturated tails, lengths that leave SIMD tails), and
 * the scalar tier against the definitions evaluated in double. The argmax of every tier against
 * the scalar scan: the maximum at each place, ties, NaNs (at 0 and elsewhere), +-0, -inf. The
 * sum of squares of every tier bit for bit against the scalar tier's, and that against the sum
 * in long double (lengths around the 8 lanes and their tails; magnitudes from 1e-20 to 1e18). */
#include <math.h>
#include <stdlib.h>

#include "common/cpu.h"
#include "engine/act_ops.h"
#include "test.h"
#include "tier.h"

static double silu_ref(double x) {
    return x / (1.0 + exp(-x));
}
static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static void check_tier(const cq_act_ops *ops, const char *name, size_t n) {
    float *x = malloc(n * sizeof *x), *u = malloc(n * sizeof *u), *a = malloc(n * sizeof *a),
          *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / (double)(n > 1 ? n - 1 : 1) * 2 - 1; /* [-1, 1] */
        x[i] = (float)(120.0 * t * t * t);                          /* dense near 0 */
        u[i] = (float)(0.5 + (double)(i % 7) * 0.25) * (i % 3 ? 1.0f : -1.0f);
    }
    for (int which = 0; which < 2; which++) {
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = x[i];
        cq_glu_fn fs = which ? cq_act_ops_scalar.gelu_tanh_mul : cq_act_ops_scalar.silu_mul;
        cq_glu_fn fv = which ? ops->gelu_tanh_mul : ops->silu_mul;
        fs(a, u, n);
        fv(b, u, n);
        for (size_t i = 0; i < n; i++) {
            double ref = (which ? gelu_ref(x[i]) : silu_ref(x[i])) * u[i];
            double tol = 4e-7 * fabs(ref) + 1e-7 * fabs(x[i] * u[i]) + 1e-30;
            CHECK_MSG(fabs(a[i] - ref) <= tol, "scalar %s(%g): %g vs %g", which ? "gelu" : "silu",
                      x[i], a[i], ref);
            CHECK_MSG(fabs(b[i] - ref) <= tol, "%s %s(%g): %g vs %g", name, which ? "gelu" : "silu",
                      x[i], b[i], ref);
        }
    }
    free(x), free(u), free(a), free(b);
}

static uint32_t scan_argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void check_argmax(const cq_act_ops *ops, const char *name) {
    static const uint32_t lens[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 4099};
    uint64_t rng = 12345;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        uint32_t n = lens[li];
        float *x = malloc(n * sizeof *x);
        for (int mode = 0; mode < 7; mode++)
            for (uint32_t at = 0; at<n; at += n> 70 ? n / 7 + 1 : 1) {
                for (uint32_t i = 0; i < n; i++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    x[i] = (float)((double)(rng >> 40) / 16777216.0 * 20 - 10);
                }
                x[at] = 11;
                if (mode == 1) x[n - 1 - at] = 11;    /* a tie */
                if (mode == 2) x[(at + 1) % n] = NAN; /* a NaN next to it */
                if (mode == 3) x[0] = NAN;            /* NaN first: index 0 */
                if (mode == 4)                        /* all -inf but one NaN */
                    for (uint32_t i = 0; i < n; i++)
                        x[i] = i == at ? NAN : -INFINITY;
                if (mode == 5) /* +0 and -0 the maximum */
                    for (uint32_t i = 0; i < n; i++)
                        x[i] = i == at ? -0.0f : i == n - 1 - at ? 0.0f : -fabsf(x[i]) - 1;
                if (mode == 6) /* NaNs everywhere but one */
                    for (uint32_t i = 1; i < n; i++)
                        x[i] = i == at ? 5.0f : NAN;
                uint32_t want = scan_argmax(x, n), got = ops->argmax(x, n);
                CHECK_MSG(got == want, "%s argmax n %u mode %d at %u: %u, the scan %u", name, n,
                          mode, at, got, want);
            }
        free(x);
    }
}

static void check_sum_squares(const cq_act_ops *ops, const char *name) {
    static const uint32_t lens[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 64, 576, 577, 896, 4099};
    uint64_t seed = 0x5EEDull;
    float *x = malloc(4099 * sizeof *x);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        uint32_t n = lens[k];
        for (int mode = 0; mode < 3; mode++) {
            float mag = mode == 0 ? 1.0f : mode == 1 ? 1e-20f : 1e18f;
            for (uint32_t i = 0; i < n; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                x[i] = mag * ((float)(seed >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
            }
            double want = cq_act_ops_scalar.sum_squares(x, n), got = ops->sum_squares(x, n);
            CHECK_MSG(got == want || (got != got && want != want),
                      "%s sum_squares n %u mode %d: %.17g, the scalar tier %.17g", name, n, mode,
                      got, want);
            long double ref = 0;
            for (uint32_t i = 0; i < n; i++)
                ref += (long double)x[i] * x[i];
            CHECK_MSG(fabsl((long double)want - ref) <= 1e-14L * ref,
                      "scalar sum_squares n %u mode %d: %.17g vs %.17Lg", n, mode, want, ref);
        }
    }
    free(x);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    const bool scalar = test_tier_on(CQ_ISA_SCALAR),
               avx2 = test_tier_on(CQ_ISA_AVX2) && cq_cpu_detect()->avx2 && cq_cpu_detect()->fma,
               avx512 = test_tier_on(CQ_ISA_AVX512) && cq_cpu_detect()->avx512f;
    if (scalar) check_argmax(&cq_act_ops_scalar, "scalar");
    if (avx2) check_argmax(&cq_act_ops_avx2, "avx2");
    if (avx512) check_argmax(&cq_act_ops_avx512, "avx512");
    if (avx2) check_sum_squares(&cq_act_ops_avx2, "avx2");
    if (avx512) check_sum_squares(&cq_act_ops_avx512, "avx512");
    if (scalar) check_sum_squares(&cq_act_ops_scalar, "scalar");
    static const size_t lens[] = {1, 7, 8, 15, 16, 17, 1000, 4099};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        if (scalar) check_tier(&cq_act_ops_scalar, "scalar", lens[k]);
        if (avx2) check_tier(&cq_act_ops_avx2, "avx2", lens[k]);
        if (avx512) check_tier(&cq_act_ops_avx512, "avx512", lens[k]);
    }
    TEST_DONE();
}
