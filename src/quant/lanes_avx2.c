/* lanes_avx2.c - the batched-decode copy of q8_row and the 4-bit class (q4_tiled, q4_block,
 * q4tp; its layout: lanes.c) read on the AVX2 tier: one int32 lane per row.
 *
 * The row-major kernels (kernel_i8dec_avx2.c) finish each 32-column group of a row inside one
 * vector, so every token pays a correction load, a conversion, a scale multiply and an FMA per
 * 64 weights; on two Zen 3 cores that binds batched decode at ~3.9 cycles per 64 weights and token.
 * Here a panel of 8 rows holds, per group, 4 vectors of 32 bytes: byte 4i + j of vector k holds
 * row i's codes of columns 4k + j (low nibble) and 16 + 4k + j (high nibble). One and, and one
 * shift + and, give two vectors of 8 rows x 4 consecutive codes, which every token multiplies by
 * its 4 matching activations broadcast (vpmaddubsw, the prefill GEMM's form, gemm_i8_avx2.c):
 * per 256 weights and token 8 vpmaddubsw and 8 int16 adds, then one vpmaddwd, the offset
 * correction, one conversion and one FMA for all 8 rows. A block's int16 sum stays within
 * 8 * 2 * 15 * 127 = 30480.
 *
 * Each row's sum runs group after group in its own lane, the same instructions for one token
 * as for several, so a token's result does not depend on which tokens share the pass. The
 * scales follow the nibbles of each panel: f16 as stored (q4_tiled, q4_block), or q4tp's 8
 * rows' lo and step and their 5-bit codes per group (f32 rungs would make the copy a fifth
 * larger than the file). A pass computes the panel's rungs 0..7 and the factors of the rest
 * once (2 exp2 polynomials and 12 products for 8 rows, the integer GEMM's ladder and so its
 * bits, q4tp_ladder_avx2.h); each group then takes its rungs one of two ways, the same bits either
 * way. On AMD's cores a tree of 10 blends on the codes' bits and one product (an exp2 per group
 * and 8 rows took 2.1x as long there, a gather from the panel's ladders 1.6x; one token, in
 * cache, Zen 4). On Intel's, where vblendvps is three operations (Golden Cove), the tree took
 * ~15 cycles a group, half the one-token pass; there the pass writes the panel's 32 rungs
 * (1 KiB, from the same parts) and one gather a group reads them (~5 cycles), unless the
 * Downfall mitigation slows gathers (cq_cpu_gather_fast).
 *
 * q8_row takes the same panels with its int8 weights as they are: per group 8 vectors, byte
 * 4i + j of vector k row i's weight of column 4k + j, and the panel's 8 row scales (f32) after
 * the groups. Per group and token: 8 times vpsignb (the weight's sign onto the 4 broadcast
 * codes), vpmaddubsw by |w| (a pair at most 2 * 128 * 127 = 32512) and vpmaddwd, then one
 * conversion and one FMA by the token's dx; the row scale multiplies the sum at the end. Against
 * the row-major q8 kernel (kernel_q8dec_avx2.c): 17 multiply-pipe operations per 256 weights and
 * token instead of 24.
 *
 * The copy is made on request (cmf_qmat_build_lanes) and then serves the
 * matrix's prepared-token products on this tier (kernel.c). */
#include <immintrin.h>
#include <string.h>

#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/lanes_step_avx2.h"
#include "quant/q4tp_ladder_avx2.h"

#define AI static inline __attribute__((always_inline))
#define PR 8 /* rows per panel */

/* q8_row in the GEMM's sign form: block b's |w| vectors at panel + (16b + k) * 32, w's at
 * panel + (16b + 8 + k) * 32, the row scales at rs[0 .. 8). */
static void unpack_q8(const cmf_qmat *m, const uint8_t *p, size_t nb, uint8_t *panel, float *rs) {
    const uint64_t G = m->groups;
    for (uint64_t g = 0; g < nb; g++) {
        __m256i *o = (__m256i *)(void *)(panel + g * 16 * 32);
        for (int k = 0; k < 8; k++) {
            __m256i w =
                g < G ? _mm256_load_si256((const __m256i *)(const void *)(p + g * 256 + 32 * k))
                      : _mm256_setzero_si256();
            _mm256_store_si256(o + k, _mm256_abs_epi8(w));
            _mm256_store_si256(o + 8 + k, w);
        }
    }
    _mm256_storeu_ps(rs, _mm256_load_ps((const float *)(const void *)(p + G * 256)));
}

/* q4tp: how a pass takes each group's rungs (the file comment): none (f16 scales), the blend
 * tree on the ladder parts, or a gather from the panel's whole ladders. */
enum { TP_NONE, TP_BLEND, TP_GATHER };

typedef union { /* one way per pass */
    struct {
        __m256 e[8], f[3]; /* TP_BLEND: rungs 0..7, the factors of the rest */
    };
    float lad[32][8]; /* TP_GATHER: rung c of lane k at [c][k] */
} ladders8;

/* The way this CPU's cores take q4tp's rungs best (cq_cpu_gather_fast). */
static int tp_pick(void) {
    return cq_cpu_gather_fast() ? TP_GATHER : TP_BLEND;
}

/* A panel's ladders (q4tp_ladder_avx2.h) from its 8 rows' lo and step, once per pass. */
AI void panel_ladders(const uint8_t *sc, const int tp, ladders8 *l) {
    const __m256 lo = _mm256_load_ps((const float *)(const void *)sc),
                 st = _mm256_load_ps((const float *)(const void *)(sc + 32));
    if (tp == TP_GATHER)
        cq_avx2_q4tp_ladders_lanes(lo, st, l->lad);
    else
        cq_avx2_q4tp_parts(lo, st, l->e, l->f);
}

/* Group g's 8 scales: f16 as stored, or q4tp's rungs picked by the group's codes. */
AI __m256 group_scales(const uint8_t *sc, uint64_t g, const int tp, const ladders8 *l) {
    if (tp == TP_NONE)
        return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(sc + g * 16)));
    const __m256i c = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64((const __m128i *)(const void *)(sc + CQ_LANES_Q4TP_NUMS_AVX2 + g * PR)));
    if (tp == TP_BLEND) return cq_avx2_q4tp_pick(c, l->e, l->f);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_i32gather_ps(&l->lad[0][0], _mm256_add_epi32(_mm256_slli_epi32(c, 3), lane), 4);
}

void cq_avx2_lanes_unpack(const cmf_qmat *m, uint64_t r, size_t nb, uint8_t *panel, float *bs) {
    const uint64_t G = m->groups;
    if (m->dtype == CMF_DT_Q8_ROW) {
        unpack_q8(m, (const uint8_t *)m->lanes + (r / PR) * cq_lanes_panel_bytes(m), nb, panel, bs);
        return;
    }
    const uint8_t *p = (const uint8_t *)m->lanes + (r / PR) * cq_lanes_panel_bytes(m),
                  *sc = p + G * 128;
    const __m256i m4 = _mm256_set1_epi8(15);
    const int tp = m->dtype == CMF_DT_Q4TP ? tp_pick() : TP_NONE;
    ladders8 lad;
    if (tp != TP_NONE) panel_ladders(sc, tp, &lad);
    for (uint64_t g = 0; g < nb; g++) {
        __m256i *o = (__m256i *)(void *)(panel + g * 8 * 32);
        if (g >= G) { /* blocks past the columns: zero codes and scales */
            for (int k = 0; k < 8; k++)
                _mm256_store_si256(o + k, _mm256_setzero_si256());
            _mm256_storeu_ps(bs + g * PR, _mm256_setzero_ps());
            continue;
        }
        cq_prefetch_weights(p + g * 128);
        cq_prefetch_weights(p + g * 128 + 64);
        for (int k = 0; k < 4; k++) {
            __m256i v = _mm256_load_si256((const __m256i *)(const void *)(p + g * 128 + 32 * k));
            _mm256_store_si256(o + k, _mm256_and_si256(v, m4));
            _mm256_store_si256(o + 4 + k, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
        _mm256_storeu_ps(bs + g * PR, group_scales(sc, g, tp, &lad));
    }
}

/* Step k of group g (columns 32 g + 4 k .. + 3 and their + 16) for T tokens into s. */
AI void lanes_q4_step(const uint8_t *w, int k, uint64_t g, __m256i m4, const int8_t *const *xq,
                      const int T, __m256i *s) {
    __m256i v = _mm256_load_si256((const __m256i *)(const void *)(w + 32 * k));
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    for (int t = 0; t < T; t++) {
        const int8_t *x = xq[t] + 32 * g + 4 * k;
        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(lo, cq_lanes_bcast4(x)));
        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(hi, cq_lanes_bcast4(x + 16)));
    }
}

/* The panel at p for T tokens (their codes xq, scales dx, corrections c8 = -8 * sum of a group's
 * codes): out[t] the 8 rows' sums. tp: TP_NONE for f16 scales, else how q4tp's rungs are taken. */
AI void panel_pass(const uint8_t *p, uint64_t G, const int tp, const int8_t *const *xq,
                   const float *const *dx, const int32_t *const *c8, const int T, __m256 *out) {
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const uint8_t *sc = p + G * 128;
    ladders8 lad;
    if (tp != TP_NONE) panel_ladders(sc, tp, &lad);
    __m256 acc[CQ_LANES_PASS];
    for (int t = 0; t < T; t++)
        acc[t] = _mm256_setzero_ps();
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *w = p + g * 128;
        cq_prefetch_weights(w);
        cq_prefetch_weights(w + 64);
        __m256i s[CQ_LANES_PASS];
        for (int t = 0; t < T; t++)
            s[t] = _mm256_setzero_si256();
        /* one token: the 4 steps unrolled, with no loop counter or register copy between them
         * (docs/KERNELS.md, "Batched decode lanes"); with more tokens the unrolled steps spill */
        if (T == 1) {
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                lanes_q4_step(w, k, g, m4, xq, T, s);
        } else {
#pragma GCC unroll 1
            for (int k = 0; k < 4; k++)
                lanes_q4_step(w, k, g, m4, xq, T, s);
        }
        const __m256 d = group_scales(sc, g, tp, &lad);
        for (int t = 0; t < T; t++) {
            __m256i i =
                _mm256_add_epi32(_mm256_madd_epi16(s[t], ones), _mm256_set1_epi32(c8[t][g]));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i),
                                     _mm256_mul_ps(d, _mm256_set1_ps(dx[t][g])), acc[t]);
        }
    }
    for (int t = 0; t < T; t++)
        out[t] = acc[t];
}

/* q8_row's panel at p for T tokens: out[t] the 8 rows' sums times their row scales. */
AI void panel_pass_q8(const uint8_t *p, uint64_t G, const int8_t *const *xq, const float *const *dx,
                      const int T, __m256 *out) {
    __m256 acc[CQ_LANES_PASS];
    for (int t = 0; t < T; t++)
        acc[t] = _mm256_setzero_ps();
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *w = p + g * 256;
        for (int c = 0; c < 256; c += 64)
            cq_prefetch_weights(w + c);
        __m256i s[CQ_LANES_PASS];
        for (int t = 0; t < T; t++)
            s[t] = _mm256_setzero_si256();
        if (T == 1) { /* unrolled for one token only, as the q4 steps are */
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                cq_lanes_sign_step(_mm256_load_si256((const __m256i *)(const void *)(w + 32 * k)),
                                   xq, 32 * g + 4 * k, T, s);
        } else {
#pragma GCC unroll 1
            for (int k = 0; k < 8; k++)
                cq_lanes_sign_step(_mm256_load_si256((const __m256i *)(const void *)(w + 32 * k)),
                                   xq, 32 * g + 4 * k, T, s);
        }
        for (int t = 0; t < T; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_set1_ps(dx[t][g]), acc[t]);
    }
    const __m256 rs = _mm256_load_ps((const float *)(const void *)(p + G * 256));
    for (int t = 0; t < T; t++)
        out[t] = _mm256_mul_ps(acc[t], rs);
}

typedef void (*pass_fn)(const uint8_t *, uint64_t, const int8_t *const *, const float *const *,
                        const int32_t *const *, __m256 *);
#define DEF_PASS(T)                                                                                \
    static __attribute__((noinline)) void pass16_##T(                                              \
        const uint8_t *p, uint64_t G, const int8_t *const *xq, const float *const *dx,             \
        const int32_t *const *c8, __m256 *out) {                                                   \
        panel_pass(p, G, TP_NONE, xq, dx, c8, T, out);                                             \
    }                                                                                              \
    static __attribute__((noinline)) void passtp_##T(                                              \
        const uint8_t *p, uint64_t G, const int8_t *const *xq, const float *const *dx,             \
        const int32_t *const *c8, __m256 *out) {                                                   \
        panel_pass(p, G, TP_BLEND, xq, dx, c8, T, out);                                            \
    }                                                                                              \
    static __attribute__((noinline)) void passtg_##T(                                              \
        const uint8_t *p, uint64_t G, const int8_t *const *xq, const float *const *dx,             \
        const int32_t *const *c8, __m256 *out) {                                                   \
        panel_pass(p, G, TP_GATHER, xq, dx, c8, T, out);                                           \
    }                                                                                              \
    static __attribute__((noinline)) void pass8_##T(                                               \
        const uint8_t *p, uint64_t G, const int8_t *const *xq, const float *const *dx,             \
        const int32_t *const *c8, __m256 *out) {                                                   \
        (void)c8;                                                                                  \
        panel_pass_q8(p, G, xq, dx, T, out);                                                       \
    }
DEF_PASS(1)
DEF_PASS(2)
DEF_PASS(3)
DEF_PASS(4)
static const pass_fn pass16[CQ_LANES_PASS + 1] = {NULL, pass16_1, pass16_2, pass16_3, pass16_4};
static const pass_fn passtp[CQ_LANES_PASS + 1] = {NULL, passtp_1, passtp_2, passtp_3, passtp_4};
static const pass_fn passtg[CQ_LANES_PASS + 1] = {NULL, passtg_1, passtg_2, passtg_3, passtg_4};
static const pass_fn pass8[CQ_LANES_PASS + 1] = {NULL, pass8_1, pass8_2, pass8_3, pass8_4};

void cq_avx2_lanes_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                float *const *y, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups, pb = cq_lanes_panel_bytes(m);
    const pass_fn *fns = m->dtype == CMF_DT_Q8_ROW ? pass8
                         : m->dtype == CMF_DT_Q4TP ? (tp_pick() == TP_BLEND ? passtp : passtg)
                                                   : pass16;
    cq_lanes_toks k;
    const size_t passes = cq_lanes_toks_init(&k, tok, n, m->cols, CQ_LANES_PASS);
    for (uint64_t r = r0 - r0 % PR; r < r1; r += PR) {
        const uint8_t *p = (const uint8_t *)m->lanes + (r / PR) * pb;
        const uint64_t lo = r < r0 ? r0 : r, hi = r + PR < r1 ? r + PR : r1;
        for (size_t q = 0; q < passes; q++) {
            const size_t t = k.first[q], nt = k.count[q];
            __m256 v[CQ_LANES_PASS];
            fns[nt](p, G, k.xq + t, k.dx + t, k.c8 + t, v);
            for (size_t j = 0; j < nt; j++) {
                float *o = y[t + j] + (lo - r0);
                if (lo == r && hi == r + PR) {
                    _mm256_storeu_ps(o, v[j]);
                } else {
                    float f[PR];
                    _mm256_storeu_ps(f, v[j]);
                    memcpy(o, f + (lo - r), (size_t)(hi - lo) * sizeof *f);
                }
            }
        }
    }
}
