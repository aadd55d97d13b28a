/* Batched prefill attention (src/engine/attn_batch*.c) against a double-precision reference
 * that decodes the cache element by element, and against the scalar tier, for every tier the
 * CPU has (forced with cq_cpu_force): f32 / f16 / q8 caches, GQA groups 1 / 3 / 7, head sizes 64 /
 * 128 / 256 (and 40, 20, which the AVX-512 and AVX2 tiers hand to a lower tier), causal chunks at
 * pos0 > 0, sliding-window rings that wrap (windows wider and narrower than a row block), soft-cap
 * on and off, token ranges that start inside the chunk. Also: a non-finite value at a later
 * position must not reach earlier tokens, and the vectorized exp's error bound.
 *
 * Bound: scores carry float rounding of about hd * 2^-24 * sum |q_i k_i| (~1e-5 here), the soft
 * cap and exp a few 1e-7; the output is a convex combination of values in [-1, 1], so its error
 * is below 2e-5 (measured: 1e-6), while a wrong key, slot, mask or scale moves it by O(0.1). */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "common/cpu.h"
#include "common/f16.h"
#include "engine/attn_batch.h"
#include "kv_fixture.h"
#include "test.h"
#include "attn_packed.h"
#include "tier.h"

#define TOL 2e-5

static double tier_worst[3]; /* largest error against the reference, per tier (printed) */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* element i of kv head h's key (or value) at slot s, as the cache stores it */
static double cached(const cq_kv_layer *c, int value, uint32_t s, uint32_t h, uint32_t i) {
    /* values: row-major; keys: in their tile's lane (kv_cache.h) */
    const void *e = value ? cq_kv_row(c, c->vb, s, h) + (size_t)i * cq_kv_elem_size(c->type)
                          : cq_kv_key_at(c, s, h, i);
    switch (c->type) {
    case CORTIQ_KV_F32:
        return *(const float *)e;
    case CORTIQ_KV_F16:
        return f16_to_f32(*(const uint16_t *)e);
    default:
        return (double)(value ? c->vs : c->ks)[(size_t)s * c->n_kv + h] * *(const int8_t *)e;
    }
}

/* out for chunk tokens [0, n), every head, in double */
static void reference(const cq_attn_batch_args *a, uint32_t n, double *out) {
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, group = a->n_heads / c->n_kv;
    size_t qd = (size_t)a->n_heads * hd;
    double *sc = malloc(sizeof(double) * (a->pos0 + n));
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t h = 0; h < a->n_heads; h++) {
            uint32_t p = a->pos0 + t, lo = a->window && p + 1 > a->window ? p + 1 - a->window : 0;
            const float *q = a->q + t * qd + (size_t)h * hd;
            double mx = -INFINITY, sum = 0;
            for (uint32_t x = lo; x <= p; x++) {
                double d = 0;
                for (uint32_t i = 0; i < hd; i++)
                    d += q[i] * cached(c, 0, x % c->slots, h / group, i);
                d *= a->scale;
                if (a->softcap > 0) d = tanh(d / a->softcap) * a->softcap;
                sc[x - lo] = d;
                if (d > mx) mx = d;
            }
            for (uint32_t x = lo; x <= p; x++)
                sum += sc[x - lo] = exp(sc[x - lo] - mx);
            double *o = out + t * qd + (size_t)h * hd;
            for (uint32_t i = 0; i < hd; i++)
                o[i] = 0;
            for (uint32_t x = lo; x <= p; x++)
                for (uint32_t i = 0; i < hd; i++)
                    o[i] += sc[x - lo] / sum * cached(c, 1, x % c->slots, h / group, i);
        }
    free(sc);
}

typedef struct geometry {
    uint32_t pos0, n, window, slots;
} geometry;

static const geometry geoms[] = {
    {37, 21, 0, 64},     /* causal chunk after a cached prefix */
    {0, 19, 0, 19},      /* first chunk */
    {50, 21, 13, 34},    /* sliding window, ring of window + chunk that wraps */
    {61, 12, 3, 15},     /* window narrower than a row block */
    {70, 40, 0, 110},    /* more tokens than one AVX-512 row block holds at group 1 */
    {90, 45, 20, 65},    /* the same with a wrapping sliding window */
    {230, 50, 0, 300},   /* keys and tokens across the end of a KV block (CQ_KV_BLOCK) */
    {700, 40, 300, 340}, /* a wrapping window across block ends and the ring's */
};

/* Run every tier over one configuration and compare with the reference. */
static void run_case(cortiq_kv_type type, uint32_t group, uint32_t hd, const geometry *g,
                     float cap) {
    const uint32_t n_kv = 2, nh = n_kv * group;
    kv_fixture fx;
    cq_kv_layer *c = kv_fixture_init(&fx, type, g->slots, n_kv, hd);
    CHECK(c);
    size_t kvd = (size_t)n_kv * hd, qd = (size_t)nh * hd, total = g->pos0 + g->n;
    float *k = malloc(sizeof(float) * kvd), *v = malloc(sizeof(float) * kvd);
    for (uint32_t p = 0; p < total; p++) { /* in order, so the ring keeps the latest positions */
        for (size_t i = 0; i < kvd; i++)
            k[i] = frand(), v[i] = frand();
        cq_kv_store(c, p % g->slots, k, v);
    }
    float *q = malloc(sizeof(float) * qd * g->n), *out = malloc(sizeof(float) * qd * g->n);
    double *ref = malloc(sizeof(double) * qd * g->n);
    float *scalar = malloc(sizeof(float) * qd * g->n); /* the scalar tier's output */
    for (size_t i = 0; i < qd * g->n; i++)
        q[i] = 3.0f * frand();
    cq_attn_batch_args a = {c, q, out, nh, g->pos0, g->window, 1.0f / sqrtf((float)hd), cap, NULL};
    reference(&a, g->n, ref);
    for (size_t i = 0; i < qd * g->n; i++) /* until the scalar tier has run */
        scalar[i] = (float)ref[i];
    float *scratch = malloc(cq_attn_batch_scratch_bytes(hd, g->slots));
    static const char *names[] = {"scalar", "avx2", "avx512"};
    for (int tier = CQ_ISA_SCALAR; tier <= CQ_ISA_AVX512; tier++) {
        if (!test_tier_on((cq_isa)tier)) continue;
        cq_cpu_force((cq_isa)tier);
        if ((int)cq_cpu_isa() != tier) continue;
        for (size_t i = 0; i < qd * g->n; i++)
            out[i] = NAN;
        uint32_t split = g->n / 3; /* two token ranges per kv head, the second starting inside */
        for (uint32_t h = 0; h < n_kv; h++) {
            cq_attn_batch(&a, h, 0, split, scratch);
            cq_attn_batch(&a, h, split, g->n, scratch);
        }
        double worst = 0, off_scalar = 0;
        for (size_t i = 0; i < qd * g->n; i++) {
            double e = fabs(out[i] - ref[i]), d = fabs(out[i] - scalar[i]);
            if (!(e <= worst)) worst = e; /* NaN sticks */
            if (!(d <= off_scalar)) off_scalar = d;
        }
        CHECK_MSG(worst <= TOL && off_scalar <= TOL,
                  "%s kv %s group %u hd %u pos0 %u n %u window %u cap %g: max error %g, %g from "
                  "the scalar tier",
                  names[tier], cortiq_kv_type_name(type), group, hd, g->pos0, g->n, g->window,
                  (double)cap, worst, off_scalar);
        if (worst > tier_worst[tier]) tier_worst[tier] = worst;
        if (tier == CQ_ISA_SCALAR) memcpy(scalar, out, sizeof(float) * qd * g->n);
        /* a task mask's packed heads: the same rows of the active heads, none of the others */
        attn_packed pk;
        attn_packed_init(&pk, q, g->n, nh, n_kv, hd);
        cq_attn_batch_args ap = a;
        ap.q = pk.q, ap.out = pk.out, ap.n_heads = pk.n_on, ap.kv_first = pk.kv_first;
        for (uint32_t h = 0; h < n_kv; h++) {
            cq_attn_batch(&ap, h, 0, split, scratch);
            cq_attn_batch(&ap, h, split, g->n, scratch);
        }
        double pe = attn_packed_error(&pk, ref, g->n, nh, hd);
        CHECK_MSG(pe <= TOL, "%s packed heads kv %s group %u hd %u pos0 %u n %u: max error %g",
                  names[tier], cortiq_kv_type_name(type), group, hd, g->pos0, g->n, pe);
        attn_packed_free(&pk);
    }
    cq_cpu_force(CQ_ISA_AVX512);
    free(scratch), free(scalar), free(ref), free(out), free(q), free(k), free(v);
    kv_fixture_free(&fx);
}

/* An infinite value at the chunk's last position: every tier leaves earlier tokens finite (a
 * masked key is skipped, not weighted by 0), and the last token is not finite. */
static void nonfinite_case(void) {
    const uint32_t hd = 64, n_kv = 1, nh = 3, pos0 = 5, n = 20, slots = 32;
    cq_kv_layer c;
    CHECK(cq_kv_layer_init(&c, CORTIQ_KV_F32, slots, n_kv, hd));
    float k[64], v[64], *q = malloc(sizeof(float) * nh * hd * n),
                        *out = malloc(sizeof(float) * nh * hd * n);
    for (uint32_t p = 0; p < pos0 + n; p++) {
        for (uint32_t i = 0; i < hd; i++)
            k[i] = frand(), v[i] = p + 1 == pos0 + n ? INFINITY : frand();
        cq_kv_store(&c, p, k, v);
    }
    for (size_t i = 0; i < (size_t)nh * hd * n; i++)
        q[i] = frand();
    cq_attn_batch_args a = {&c, q, out, nh, pos0, 0, 0.125f, 0, NULL};
    float *scratch = malloc(cq_attn_batch_scratch_bytes(hd, slots));
    for (int tier = CQ_ISA_SCALAR; tier <= CQ_ISA_AVX512; tier++) {
        /* the scalar tier always runs: it is what the others are compared with */
        if (tier != CQ_ISA_SCALAR && !test_tier_on((cq_isa)tier)) continue;
        cq_cpu_force((cq_isa)tier);
        if ((int)cq_cpu_isa() != tier) continue;
        cq_attn_batch(&a, 0, 0, n, scratch);
        int early_finite = 1, last_finite = 1;
        for (size_t i = 0; i < (size_t)nh * hd * n; i++) {
            if (i < (size_t)nh * hd * (n - 1))
                early_finite &= isfinite(out[i]) != 0;
            else
                last_finite &= isfinite(out[i]) != 0;
        }
        CHECK_MSG(early_finite && !last_finite, "tier %d: early rows finite %d, last row finite %d",
                  tier, early_finite, last_finite);
    }
    cq_cpu_force(CQ_ISA_AVX512);
    free(scratch), free(q), free(out);
    cq_kv_layer_free(&c);
}

static void exp_case(const char *name, void (*fn)(float *, size_t)) {
    enum { N = 4099 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = -87.33f + (87.33f + 88.0f) * (float)i / (N - 1);
    for (int i = 0; i < N; i++)
        y[i] = x[i];
    fn(y, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double e = exp((double)x[i]), rel = fabs(y[i] - e) / e;
        if (!(rel <= worst)) worst = rel;
    }
    CHECK_MSG(worst <= 2 * FLT_EPSILON, "%s exp: max relative error %g (2 ulp = %g)", name, worst,
              2.0 * FLT_EPSILON);
    float s[5] = {-INFINITY, -100.0f, -87.4f, NAN, 0.0f};
    fn(s, 5);
    CHECK(s[0] == 0 && s[1] == 0 && s[2] == 0 && isnan(s[3]) && s[4] == 1.0f);
    printf("%s exp: max relative error %.3g ulp\n", name, worst / FLT_EPSILON);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    static const cortiq_kv_type types[] = {CORTIQ_KV_F32, CORTIQ_KV_F16, CORTIQ_KV_Q8};
    static const uint32_t groups[] = {1, 3, 7}, hds[] = {64, 128, 256, 40, 20};
    for (size_t ty = 0; ty < 3; ty++)
        for (size_t gi = 0; gi < 3; gi++)
            for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
                for (size_t ge = 0; ge < sizeof geoms / sizeof *geoms; ge++)
                    for (int cap = 0; cap < 2; cap++)
                        run_case(types[ty], groups[gi], hds[hi], &geoms[ge], cap ? 1.5f : 0.0f);
    nonfinite_case();
    printf("max error against the double reference: scalar %.3g, avx2 %.3g, avx512 %.3g\n",
           tier_worst[0], tier_worst[1], tier_worst[2]);
    const cq_cpu_features *f = cq_cpu_detect();
    if (test_tier_on(CQ_ISA_AVX2) && f->avx2 && f->fma && f->f16c)
        exp_case("avx2", cq_attn_exp_avx2);
    if (test_tier_on(CQ_ISA_AVX512) && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq)
        exp_case("avx512", cq_attn_exp_avx512);
    TEST_DONE();
}
