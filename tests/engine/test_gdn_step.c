/* The gated delta rule's step per SIMD tier (src/engine/gdn_step*.c) against the definition
 * evaluated in double: S <- decay S; d = beta (v - S^T k); S <- S + k d^T; o = S^T q, for head
 * shapes with and without SIMD tails, over several steps from a random state. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "engine/gdn_step.h"
#include "tier.h"

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static void reference(double *S, const float *q, const float *k, const float *v, double decay,
                      double beta, double *o, uint32_t dk, uint32_t dv) {
    for (uint32_t j = 0; j < dv; j++) {
        double m = 0;
        for (uint32_t i = 0; i < dk; i++)
            m += (S[i * dv + j] *= decay) * k[i];
        double d = beta * (v[j] - m);
        o[j] = 0;
        for (uint32_t i = 0; i < dk; i++)
            o[j] += (S[i * dv + j] += k[i] * d) * q[i];
    }
}

static void check(cq_gdn_step_fn step, const char *name, uint32_t dk, uint32_t dv) {
    size_t n = (size_t)dk * dv;
    float *S = malloc(n * sizeof *S), *o = malloc(dv * sizeof *o), *mem = malloc(dv * sizeof *mem);
    float *q = malloc(dk * sizeof *q), *k = malloc(dk * sizeof *k), *v = malloc(dv * sizeof *v);
    double *R = malloc(n * sizeof *R), *ro = malloc(dv * sizeof *ro);
    CHECK(S && o && mem && q && k && v && R && ro);
    if (!S || !o || !mem || !q || !k || !v || !R || !ro) return;
    for (size_t i = 0; i < n; i++)
        R[i] = S[i] = frand();
    double worst = 0;
    for (int t = 0; t < 8; t++) {
        for (uint32_t i = 0; i < dk; i++)
            q[i] = frand(), k[i] = frand() / sqrtf((float)dk);
        for (uint32_t j = 0; j < dv; j++)
            v[j] = frand();
        float decay = 0.5f + 0.5f * (frand() + 1.0f) / 2.0f, beta = (frand() + 1.0f) / 2.0f;
        step(S, q, k, v, decay, beta, o, mem, dk, dv);
        reference(R, q, k, v, decay, beta, ro, dk, dv);
        double mo = 0, d = 0;
        for (uint32_t j = 0; j < dv; j++)
            mo = fmax(mo, fabs(ro[j])), d = fmax(d, fabs(o[j] - ro[j]));
        for (size_t i = 0; i < n; i++)
            d = fmax(d, fabs(S[i] - R[i]));
        if (d / fmax(mo, 1.0) > worst) worst = d / fmax(mo, 1.0);
    }
    CHECK_MSG(worst <= 1e-5, "%s dk=%u dv=%u: %.3g from the double reference", name, dk, dv, worst);
    free(S), free(o), free(mem), free(q), free(k), free(v), free(R), free(ro);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    static const struct {
        cq_isa isa;
        cq_gdn_step_fn fn;
        const char *name;
    } tiers[] = {{CQ_ISA_SCALAR, cq_gdn_step_scalar, "scalar"},
                 {CQ_ISA_AVX2, cq_gdn_step_avx2, "avx2"},
                 {CQ_ISA_AVX512, cq_gdn_step_avx512, "avx512"}};
    static const uint32_t dims[][2] = {{16, 8}, {16, 16}, {128, 128}, {13, 37}, {64, 128}};
    for (size_t t = 0; t < 3; t++) {
        if (!test_tier_on(tiers[t].isa) || cq_cpu_isa() < tiers[t].isa) continue;
        srand(1);
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            check(tiers[t].fn, tiers[t].name, dims[d][0], dims[d][1]);
    }
    TEST_DONE();
}
