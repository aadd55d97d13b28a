/* The chunked gated delta rule per SIMD tier (src/engine/gdn_chunk*.c) against the recurrence
 * evaluated in double token by token (S <- decay S; d = beta (v - S^T k); S <- S + k d^T;
 * o = S^T q): outputs and final state within 1e-4 relative, from a random state, for head
 * shapes with and without SIMD tails, chunks of 1, 5, 63 and CQ_GDN_CHUNK tokens, and a
 * 150-token sequence run as consecutive chunks (64 + 64 + 22: the state carried across). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "engine/gdn_chunk.h"
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

/* Unit vector (the engine l2-normalises k, and q up to 1/sqrt(dk)). */
static void unit(float *x, uint32_t n, float scale) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    for (uint32_t i = 0; i < n; i++)
        x[i] = (float)(x[i] * scale / sqrt(ss));
}

static void check(cq_gdn_chunk_fn chunk, const char *name, uint32_t dk, uint32_t dv, size_t n,
                  uint32_t per) {
    /* token rows as the engine lays them: [q | k | v] with a stride, g and beta interleaved */
    const size_t stride = 2 * (size_t)dk + dv + 3, sn = (size_t)dk * dv;
    float *rows = malloc(n * stride * sizeof(float)), *gb = malloc(2 * n * sizeof(float));
    float *o = malloc(n * (dv + 1) * sizeof(float)), *S = malloc(sn * sizeof(float));
    float *work = malloc(cq_gdn_chunk_work(dk, dv) * sizeof(float));
    double *R = malloc(sn * sizeof(double)), *ro = malloc(dv * sizeof(double));
    CHECK(rows && gb && o && S && work && R && ro);
    if (!rows || !gb || !o || !S || !work || !R || !ro) return;
    for (size_t i = 0; i < sn; i++)
        R[i] = S[i] = frand() * 0.5f;
    for (size_t t = 0; t < n; t++) {
        float *r = rows + t * stride;
        for (size_t i = 0; i < stride; i++)
            r[i] = frand();
        unit(r, dk, 1.0f / sqrtf((float)dk)), unit(r + dk, dk, 1.0f);
        gb[2 * t] = -0.02f - 0.5f * (frand() + 1.0f); /* log decay: exp in (0.37, 0.98) */
        gb[2 * t + 1] = (frand() + 1.0f) / 2.0f;      /* beta */
    }
    for (size_t t = 0; t < n; t += per) {
        const cq_gdn_chunk_in in = {.q = rows + t * stride,
                                    .k = rows + t * stride + dk,
                                    .v = rows + t * stride + 2 * dk,
                                    .g = gb + 2 * t,
                                    .beta = gb + 2 * t + 1,
                                    .o = o + t * (dv + 1),
                                    .stride = stride,
                                    .gstride = 2,
                                    .ostride = dv + 1,
                                    .n = (uint32_t)(n - t < per ? n - t : per),
                                    .dk = dk,
                                    .dv = dv};
        chunk(S, &in, work);
    }
    double worst = 0, mo = 1e-30, ms = 1e-30;
    for (size_t t = 0; t < n; t++) {
        const float *r = rows + t * stride;
        reference(R, r, r + dk, r + 2 * dk, exp(gb[2 * t]), gb[2 * t + 1], ro, dk, dv);
        for (uint32_t j = 0; j < dv; j++)
            mo = fmax(mo, fabs(ro[j])), worst = fmax(worst, fabs(o[t * (dv + 1) + j] - ro[j]));
    }
    double ws = 0;
    for (size_t i = 0; i < sn; i++)
        ms = fmax(ms, fabs(R[i])), ws = fmax(ws, fabs(S[i] - R[i]));
    CHECK_MSG(worst / mo <= 1e-4 && ws / ms <= 1e-4,
              "%s dk=%u dv=%u n=%zu per %u: outputs %.3g, state %.3g from the reference", name, dk,
              dv, n, per, worst / mo, ws / ms);
    free(rows), free(gb), free(o), free(S), free(work), free(R), free(ro);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    static const struct {
        cq_isa isa;
        cq_gdn_chunk_fn fn;
        const char *name;
    } tiers[] = {{CQ_ISA_SCALAR, cq_gdn_chunk_scalar, "scalar"},
                 {CQ_ISA_AVX2, cq_gdn_chunk_avx2, "avx2"},
                 {CQ_ISA_AVX512, cq_gdn_chunk_avx512, "avx512"}};
    static const uint32_t dims[][2] = {{16, 8}, {16, 16}, {128, 128}, {13, 37}, {64, 128}};
    static const size_t lens[] = {1, 5, 63, CQ_GDN_CHUNK};
    for (size_t t = 0; t < 3; t++) {
        if (!test_tier_on(tiers[t].isa) || cq_cpu_isa() < tiers[t].isa) continue;
        srand(1);
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
                check(tiers[t].fn, tiers[t].name, dims[d][0], dims[d][1], lens[l], CQ_GDN_CHUNK);
            check(tiers[t].fn, tiers[t].name, dims[d][0], dims[d][1], 150, CQ_GDN_CHUNK);
        }
    }
    TEST_DONE();
}
