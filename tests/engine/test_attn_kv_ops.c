/* The attention value loops over f32 / f16 / q8 KV caches (src/engine/attn_ops*.c): every SIMD
 * tier the CPU has against the scalar reference, at head sizes with and without vector tails,
 * row strides wider than a head, and value counts 1-40; the q8 encoder (round trip within half a
 * step, zeros, non-finite input); and the cache's store and read-back (keys through
 * cq_kv_dots, which walks the key tiles element by element).
 *
 * Bound for tier vs scalar: the tiers differ only in summation order and in fused multiply-adds,
 * so |a - b| <= 2 * gamma(hd + 1) * sum |terms| (Higham's gamma(n) ~ n * 2^-24 each way), which is
 * at most (hd + 2) * FLT_EPSILON * sum |terms|. A wrong element, stride or scale is off by O(1). */
#include <float.h>
#include <math.h>

#include "common/cpu.h"
#include "common/f16.h"
#include "engine/attn_ops.h"
#include "engine/kv_cache.h"
#include "test.h"
#include "tier.h"

#define MAXN  40
#define MAXHD 264
#define LD    300 /* row stride wider than any head */

static uint64_t rng = 88172645463325252ULL;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float V32[MAXN * LD], VS[MAXN * 3];
static uint16_t V16[MAXN * LD];
static int8_t V8[MAXN * LD];

/* decoded value of row j element i for each type (what the scalar reference must see) */
static float vval(int type, uint32_t j, uint32_t i) {
    size_t at = (size_t)j * LD + i;
    return type == 0 ? V32[at] : type == 1 ? f16_to_f32(V16[at]) : VS[j * 3] * V8[at];
}

static void run_axpys(const cq_attn_ops *o, int type, float *out, const float *w, uint32_t n,
                      uint32_t hd) {
    if (type == 0)
        o->axpys(out, w, V32, LD, n, hd);
    else if (type == 1)
        o->axpys_f16(out, w, V16, LD, n, hd);
    else
        o->axpys_q8(out, w, V8, LD, VS, 3, n, hd);
}

static void compare_tier(const char *tier, const cq_attn_ops *ops) {
    static const uint32_t hds[] = {1, 7, 8, 15, 16, 24, 32, 40, 64, 72, 80, 96, 128, 200, 256, 264};
    static const uint32_t ns[] = {1, 3, 4, 5, 8, 13, 40};
    const char *names[] = {"f32", "f16", "q8"};
    float w[MAXN], oa[MAXHD], ob[MAXHD], base[MAXHD];
    size_t checks = 0;
    for (int type = 0; type < 3; type++)
        for (size_t h = 0; h < sizeof hds / sizeof *hds; h++)
            for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                uint32_t hd = hds[h], n = ns[k];
                for (uint32_t i = 0; i < hd; i++)
                    base[i] = frand();
                for (uint32_t j = 0; j < n; j++)
                    w[j] = frand() * 0.5f + 0.5f;
                for (uint32_t i = 0; i < hd; i++)
                    oa[i] = ob[i] = base[i];
                run_axpys(&cq_attn_ops_scalar, type, oa, w, n, hd);
                run_axpys(ops, type, ob, w, n, hd);
                for (uint32_t i = 0; i < hd; i++) {
                    double mag = fabs(base[i]), exact = base[i];
                    for (uint32_t j = 0; j < n; j++)
                        mag += fabs((double)w[j] * vval(type, j, i)),
                            exact += (double)w[j] * vval(type, j, i);
                    double tol = (n + 3) * FLT_EPSILON * mag + 1e-30;
                    CHECK_MSG(fabs((double)oa[i] - ob[i]) <= tol,
                              "%s %s axpys hd %u n %u out %u: %.9g vs scalar %.9g", tier,
                              names[type], hd, n, i, ob[i], oa[i]);
                    CHECK_MSG(fabs((double)oa[i] - exact) <= tol,
                              "scalar %s axpys hd %u: %.9g vs exact %.9g", names[type], hd, oa[i],
                              exact);
                    checks++;
                }
            }
    printf("%-7s %zu values within the summation-order bound of the scalar loops\n", tier, checks);
}

static void check_q8_encoder(void) {
    float x[64];
    int8_t c[64];
    for (int i = 0; i < 64; i++)
        x[i] = frand() * 3.0f;
    x[17] = -4.0f; /* the max magnitude is negative: it must map to -127 exactly */
    float s = cq_kv_quantize_q8(x, 64, c);
    CHECK(s == 4.0f / 127.0f && c[17] == -127);
    for (int i = 0; i < 64; i++)
        CHECK_MSG(fabsf(c[i] * s - x[i]) <= 0.5f * s * (1 + 1e-5f), "q8 code %d", i);
    for (int i = 0; i < 64; i++)
        x[i] = 0;
    c[3] = 5;
    CHECK(cq_kv_quantize_q8(x, 64, c) == 0.0f && c[3] == 0);
    x[9] = NAN;
    s = cq_kv_quantize_q8(x, 64, c);
    CHECK(isnan(s) && c[9] == 0); /* NaN in, NaN out of every score that reads it */
    x[9] = INFINITY;
    CHECK(!isfinite(cq_kv_quantize_q8(x, 64, c)));
}

/* cq_kv_store converts once; what the cache reads back is the rounded input */
static void check_store(void) {
    float k[2 * 24], v[2 * 24], q[24], out[4];
    for (int t = 0; t < 3; t++) {
        cq_kv_layer c;
        CHECK(cq_kv_layer_init(&c, (cortiq_kv_type)t, 4, 2, 24));
        uint64_t per = t == CORTIQ_KV_F32 ? 4 * 48 : t == CORTIQ_KV_F16 ? 2 * 48 : 48 + 2 * 4;
        CHECK(cq_kv_layer_bytes(&c) == 2 * 4 * per);
        for (uint32_t slot = 0; slot < 4; slot++) {
            for (int i = 0; i < 48; i++)
                k[i] = frand() * (slot + 1), v[i] = frand();
            if (slot == 2) k[5] = 1e6f; /* beyond the f16 range: clamped, not inf */
            cq_kv_store(&c, slot, k, v);
        }
        /* one-hot queries read single elements of head 1 back */
        for (int i = 0; i < 24; i++) {
            for (int e = 0; e < 24; e++)
                q[e] = e == i;
            cq_kv_dots(&c, 1, q, 0, 4, out);
            for (int j = 0; j < 4; j++)
                CHECK(isfinite(out[j]));
        }
        for (int e = 0; e < 24; e++)
            q[e] = e == 5;
        cq_kv_dots(&c, 0, q, 2, 1, out);
        float want = t == CORTIQ_KV_F32 ? 1e6f : t == CORTIQ_KV_F16 ? 65504.0f : 1e6f;
        CHECK_MSG(fabsf(out[0] - want) <= want * 1e-6f, "kv %d stored big key reads %g", t, out[0]);
        cq_kv_layer_free(&c);
    }
}

/* The f16 cache write: every tier gives the scalar tier's bits (ties to even, the +-65504
 * clamp, subnormals, zeros; NaN stays a NaN), at lengths that leave SIMD tails. */
static void check_to_f16(const char *name, const cq_attn_ops *ops) {
    enum { N = 203 };
    float x[N];
    uint16_t a[N], b[N];
    for (int i = 0; i < N; i++)
        x[i] = (frand() - 0.5f) * powf(2.0f, (float)(i % 40) - 24.0f);
    x[0] = 65504.0f, x[1] = 65520.0f, x[2] = -1e9f, x[3] = INFINITY, x[4] = -INFINITY, x[5] = 0.0f;
    x[6] = -0.0f, x[7] = 1.0f + 1.0f / 2048.0f /* a tie */, x[8] = 3e-8f, x[9] = -6e-8f,
    x[10] = NAN;
    for (int n = 1; n <= N; n += 13) {
        cq_attn_ops_scalar.to_f16(x, a, (size_t)n);
        ops->to_f16(x, b, (size_t)n);
        for (int i = 0; i < n; i++) {
            if (isnan(x[i]))
                CHECK_MSG((b[i] & 0x7C00) == 0x7C00 && (b[i] & 0x3FF), "%s: NaN -> %04x", name,
                          b[i]);
            else
                CHECK_MSG(a[i] == b[i], "%s to_f16(%g): %04x vs scalar %04x", name, x[i], b[i],
                          a[i]);
        }
    }
    cq_attn_ops_scalar.to_f16(x, a, 8);
    CHECK(a[0] == 0x7BFF && a[1] == 0x7BFF && a[2] == 0xFBFF && a[3] == 0x7BFF && a[4] == 0xFBFF &&
          a[5] == 0 && a[6] == 0x8000 && a[7] == 0x3C00);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    const bool scalar = test_tier_on(CQ_ISA_SCALAR), avx2 = test_tier_on(CQ_ISA_AVX2),
               avx512 = test_tier_on(CQ_ISA_AVX512);
    if (scalar) check_to_f16("scalar", &cq_attn_ops_scalar);
    if (avx2 && cq_cpu_detect()->avx2 && cq_cpu_detect()->f16c)
        check_to_f16("avx2", &cq_attn_ops_avx2);
    if (avx512 && cq_cpu_detect()->avx512f) check_to_f16("avx512", &cq_attn_ops_avx512);
    for (size_t i = 0; i < MAXN * LD; i++) {
        V32[i] = frand(), V16[i] = f32_to_f16(V32[i]);
        V8[i] = (int8_t)(frand() * 127.0f);
    }
    for (size_t i = 0; i < MAXN * 3; i++)
        VS[i] = 0.02f + frand() * 0.005f;
    if (scalar) compare_tier("scalar", &cq_attn_ops_scalar);
    const cq_cpu_features *f = cq_cpu_detect();
    if (avx2 && f->avx2 && f->fma && f->f16c) compare_tier("avx2", &cq_attn_ops_avx2);
    if (avx512 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq)
        compare_tier("avx512", &cq_attn_ops_avx512);
    if (scalar) {
        check_q8_encoder();
        check_store();
    }
    TEST_DONE();
}
