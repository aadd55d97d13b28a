/* The MLP gated activations (src/engine/act_ops*.c): every SIMD tier against the libm scalar
 * tier over [-120, 120] (dense near 0, the saturated tails, lengths that leave SIMD tails), and
 * the scalar tier against the definitions evaluated in double. */
#include <math.h>
#include <stdlib.h>

#include "common/cpu.h"
#include "engine/act_ops.h"
#include "test.h"

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

int main(void) {
    static const size_t lens[] = {1, 7, 8, 15, 16, 17, 1000, 4099};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        check_tier(&cq_act_ops_scalar, "scalar", lens[k]);
        if (cq_cpu_detect()->avx2 && cq_cpu_detect()->fma)
            check_tier(&cq_act_ops_avx2, "avx2", lens[k]);
        if (cq_cpu_detect()->avx512f) check_tier(&cq_act_ops_avx512, "avx512", lens[k]);
    }
    TEST_DONE();
}
