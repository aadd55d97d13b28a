/* Decode attention (src/engine/attn_decode*.c): the scalar reference tier (the generic tier with
 * the scalar cq_attn_ops) against a naive double-precision attention that decodes the cache
 * element by element, and every other tier the CPU has (the generic tier with the AVX2 and
 * AVX-512 ops, the AVX2 and AVX-512 tiers, the dispatcher) against the scalar reference. Shapes:
 * SmolLM2 (9 heads / 3 kv, hd 64), Gemma 3 (4 / 1, hd 256), Qwen2.5 (14 / 2, hd 64), and hd 128,
 * hd 80, hd 20, group 1, n_kv 1; contexts of 1, 2, 17 and 300 keys, sliding-window rings that wrap
 * inside a chunk; f32 / f16 / q8 caches; soft-cap on and off; the chunk sizes cq_attn_decode_chunks
 * picks for 1 and 2 threads and the smallest (16 keys: many chunks to merge). Units run in reverse
 * order, as threads may finish them in any order.
 *
 * Bound: scores carry float rounding of about hd * 2^-24 * sum |q_i k_i| (~1e-5 at hd 256 with
 * |q| <= 3), the soft cap and exp a few 1e-7; the output is a convex combination of values in
 * [-1, 1], so its error is below TOL = 2e-5 (measured: about 1e-6), while a wrong key, slot,
 * chunk boundary, scale or rescaling moves it by O(0.01) or more. */
#include <math.h>
#include <stdlib.h>

#include "common/cpu.h"
#include "common/f16.h"
#include "engine/attn_decode.h"
#include "kv_fixture.h"
#include "test.h"
#include "attn_packed.h"
#include "tier.h"

#define TOL 2e-5

static double worst_ref, worst_tier; /* printed */

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

/* Textbook attention of every head in double. */
static void naive(const cq_attn_decode_args *a, double *out) {
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, group = a->n_heads / c->n_kv, lo = cq_attn_decode_first_key(a);
    double *sc = malloc(sizeof(double) * (a->pos + 1));
    for (uint32_t h = 0; h < a->n_heads; h++) {
        const float *q = a->q + (size_t)h * hd;
        double mx = -INFINITY, sum = 0;
        for (uint32_t x = lo; x <= a->pos; x++) {
            double d = 0;
            for (uint32_t i = 0; i < hd; i++)
                d += q[i] * cached(c, 0, x % c->slots, h / group, i);
            d *= a->scale;
            if (a->softcap > 0) d = tanh(d / a->softcap) * a->softcap;
            sc[x] = d;
            if (d > mx) mx = d;
        }
        for (uint32_t x = lo; x <= a->pos; x++)
            sum += sc[x] = exp(sc[x] - mx);
        double *o = out + (size_t)h * hd;
        for (uint32_t i = 0; i < hd; i++)
            o[i] = 0;
        for (uint32_t x = lo; x <= a->pos; x++)
            for (uint32_t i = 0; i < hd; i++)
                o[i] += sc[x] / sum * cached(c, 1, x % c->slots, h / group, i);
    }
    free(sc);
}

typedef enum {
    T_SCALAR,
    T_GENERIC_AVX2,
    T_GENERIC_AVX512,
    T_AVX2,
    T_AVX512,
    T_DISPATCH,
    T_COUNT
} tier;
static const char *tier_names[] = {"scalar", "generic+avx2", "generic+avx512",
                                   "avx2",   "avx512",       "dispatch"};

/* Present on this CPU and selected by the run's tier (the scalar reference always runs: the
 * other tiers are compared with it; the dispatcher belongs to the scalar run). */
static int tier_present(tier t) {
    const cq_cpu_features *f = cq_cpu_detect();
    int avx512 = f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
    switch (t) {
    case T_GENERIC_AVX2:
    case T_AVX2:
        return test_tier_on(CQ_ISA_AVX2) && f->avx2 && f->fma && f->f16c;
    case T_GENERIC_AVX512:
    case T_AVX512:
        return test_tier_on(CQ_ISA_AVX512) && avx512;
    case T_DISPATCH:
        return test_tier_on(CQ_ISA_SCALAR);
    default:
        return 1;
    }
}

/* All units of the call, last first, then the combine of every kv head. */
static void run_tier(tier t, const cq_attn_decode_args *a, float *scratch) {
    uint32_t nc = cq_attn_decode_chunks(a);
    for (uint32_t u = a->kv->n_kv * nc; u-- > 0;) {
        uint32_t kvh = u / nc, ch = u % nc;
        switch (t) {
        case T_SCALAR:
            cq_attn_decode_unit_generic(a, kvh, ch, scratch, &cq_attn_ops_scalar);
            break;
        case T_GENERIC_AVX2:
            cq_attn_decode_unit_generic(a, kvh, ch, scratch, &cq_attn_ops_avx2);
            break;
        case T_GENERIC_AVX512:
            cq_attn_decode_unit_generic(a, kvh, ch, scratch, &cq_attn_ops_avx512);
            break;
        case T_AVX2:
            cq_attn_decode_unit_avx2(a, kvh, ch, scratch);
            break;
        case T_AVX512:
            cq_attn_decode_unit_avx512(a, kvh, ch, scratch);
            break;
        default:
            cq_attn_decode_unit(a, kvh, ch, scratch);
            break;
        }
    }
    for (uint32_t h = 0; h < a->kv->n_kv; h++)
        cq_attn_decode_combine(a, h);
}

typedef struct shape {
    uint32_t n_heads, n_kv, hd;
} shape;

/* keys = pos + 1 positions stored in order into a ring of `slots`; window 0 = causal */
static void run_case(const shape *sh, cortiq_kv_type type, uint32_t pos, uint32_t window,
                     uint32_t slots, float cap) {
    uint32_t hd = sh->hd, group = sh->n_heads / sh->n_kv;
    kv_fixture fx;
    cq_kv_layer *c = kv_fixture_init(&fx, type, slots, sh->n_kv, hd);
    CHECK(c);
    size_t kvd = (size_t)sh->n_kv * hd, qd = (size_t)sh->n_heads * hd;
    float *k = malloc(sizeof(float) * kvd), *v = malloc(sizeof(float) * kvd);
    for (uint32_t p = 0; p <= pos; p++) {
        for (size_t i = 0; i < kvd; i++)
            k[i] = frand(), v[i] = frand();
        cq_kv_store(c, p % slots, k, v);
    }
    float *q = malloc(sizeof(float) * qd), *out = malloc(sizeof(float) * qd);
    float *scalar = malloc(sizeof(float) * qd);
    double *ref = malloc(sizeof(double) * qd);
    for (size_t i = 0; i < qd; i++)
        q[i] = 3.0f * frand();
    float *part = malloc(sizeof(float) * cq_attn_decode_part_floats(sh->n_heads, hd));
    float *scratch = aligned_alloc(64, (cq_attn_decode_scratch_floats(group, slots) + 15) / 16 *
                                           16 * sizeof(float));
    cq_attn_decode_args a = {
        c, q, out, part, sh->n_heads, pos, window, 0, 1.0f / sqrtf((float)hd), cap, NULL};
    naive(&a, ref);
    uint32_t keys = pos + 1 - cq_attn_decode_first_key(&a);
    uint32_t chunks[3] = {cq_attn_decode_chunk(keys, sh->n_kv, 1),
                          cq_attn_decode_chunk(keys, sh->n_kv, 2), 16};
    for (int ci = 0; ci < 3; ci++) {
        a.chunk = chunks[ci];
        CHECK(a.chunk % 16 == 0 && cq_attn_decode_chunks(&a) <= CQ_ATTN_DECODE_MAX_CHUNKS);
        for (int t = 0; t < T_COUNT; t++) {
            if (!tier_present((tier)t)) continue;
            for (size_t i = 0; i < qd; i++)
                out[i] = NAN;
            run_tier((tier)t, &a, scratch);
            double e = 0;
            for (size_t i = 0; i < qd; i++) {
                double d = t == T_SCALAR ? fabs(out[i] - ref[i]) : fabs(out[i] - scalar[i]);
                if (!(d <= e)) e = d; /* NaN sticks */
            }
            CHECK_MSG(e <= TOL,
                      "%s kv %s heads %u/%u hd %u pos %u window %u slots %u cap %g chunk %u: max "
                      "error %g against the %s",
                      tier_names[t], cortiq_kv_type_name(type), sh->n_heads, sh->n_kv, hd, pos,
                      window, slots, (double)cap, a.chunk, e,
                      t == T_SCALAR ? "double reference" : "scalar tier");
            double *w = t == T_SCALAR ? &worst_ref : &worst_tier;
            if (!(e <= *w)) *w = e;
            if (t == T_SCALAR) memcpy(scalar, out, sizeof(float) * qd);
            /* a task mask's packed heads: the same rows of the active heads alone */
            attn_packed pk;
            attn_packed_init(&pk, q, 1, sh->n_heads, sh->n_kv, hd);
            cq_attn_decode_args ap = a;
            ap.q = pk.q, ap.out = pk.out, ap.n_heads = pk.n_on, ap.kv_first = pk.kv_first;
            run_tier((tier)t, &ap, scratch);
            double pe = attn_packed_error(&pk, ref, 1, sh->n_heads, hd);
            CHECK_MSG(pe <= TOL,
                      "%s packed heads kv %s heads %u/%u hd %u pos %u chunk %u: max error %g",
                      tier_names[t], cortiq_kv_type_name(type), sh->n_heads, sh->n_kv, hd, pos,
                      a.chunk, pe);
            attn_packed_free(&pk);
        }
    }
    free(scratch), free(part), free(ref), free(scalar), free(out), free(q), free(k), free(v);
    kv_fixture_free(&fx);
}

/* The chunk rule keeps within the scratch and partials sized for a context. */
static void chunk_rule(void) {
    int ok = 1;
    for (uint32_t keys = 1; keys <= 200000; keys = keys * 3 / 2 + 1)
        for (uint32_t n_kv = 1; n_kv <= 8; n_kv *= 2)
            for (unsigned th = 1; th <= 64; th *= 4) {
                uint32_t ch = cq_attn_decode_chunk(keys, n_kv, th);
                size_t room = cq_attn_decode_scratch_floats(1, keys);
                ok &= ch % 16 == 0 && (keys + ch - 1) / ch <= CQ_ATTN_DECODE_MAX_CHUNKS &&
                      2 * (size_t)ch <= room;
            }
    CHECK_MSG(ok, "chunk rule outside its bounds");
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    static const shape shapes[] = {
        {9, 3, 64},  /* SmolLM2-135M */
        {4, 1, 256}, /* Gemma 3 270M */
        {14, 2, 64}, /* Qwen2.5-0.5B */
        {8, 2, 128}, /* hd 128: the tiers' third unrolled head size */
        {2, 2, 80},  /* hd 80, group 1 */
        {1, 1, 64},  /* one head */
        {6, 2, 20},  /* hd 20: the AVX2 / AVX-512 tiers hand it to the generic tier */
        {24, 3, 40}, /* group 8; hd 40: the AVX-512 tier hands it to the generic tier */
        {20, 2, 48}, /* group 10: head batches of 8 and 2; hd 48: a partial AVX-512 value
                        slice, single-vector AVX2 slices after the whole ones */
    };
    static const cortiq_kv_type types[] = {CORTIQ_KV_F32, CORTIQ_KV_F16, CORTIQ_KV_Q8};
    static const uint32_t ctxs[] = {1, 2, 17, 300};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t ty = 0; ty < 3; ty++)
            for (int cap = 0; cap < 2; cap++) {
                float cp = cap ? 1.5f : 0.0f;
                for (size_t ci = 0; ci < 4; ci++) /* causal, ring of exactly ctx or more */
                    run_case(&shapes[s], types[ty], ctxs[ci] - 1, 0, ctxs[ci] + (ci & 1) * 7, cp);
                /* sliding window 40 in a ring of 56 slots: no wrap, then wrapped many times */
                run_case(&shapes[s], types[ty], 16, 40, 56, cp);
                run_case(&shapes[s], types[ty], 299, 40, 56, cp);
                /* a window wider than a chunk, wrapping (Gemma-like: window + 64 slots) */
                run_case(&shapes[s], types[ty], 700, 512, 576, cp);
            }
    chunk_rule();
    printf("max error: scalar tier vs double %.3g, other tiers vs scalar %.3g\n", worst_ref,
           worst_tier);
    TEST_DONE();
}
