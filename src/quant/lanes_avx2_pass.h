/* lanes_avx2_pass.h - the AVX2 passes over the batched-decode copy of q8_row and the 4-bit
 * class (lanes_avx2.c has the layout and the entry points), written once for two builds:
 * lanes_avx2.c compiles them with vpmaddubsw (int16 sums, then vpmaddwd), lanes_avxvnni.c with
 * AVX-VNNI's vpdpbusd (int32 sums straight away, starting from the group's offset correction;
 * q8_row's sign step in lanes_step_avx2.h likewise). The integer sums are the same, so the
 * outputs are the same bits. For files compiled with the AVX2 flags (cmake/CortiqModule.cmake). */
#ifndef CORTIQ_QUANT_LANES_AVX2_PASS_H
#define CORTIQ_QUANT_LANES_AVX2_PASS_H

#include <immintrin.h>

#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/lanes_step_avx2.h"
#include "quant/q4tp_ladder_avx2.h"

#define AI static inline __attribute__((always_inline))
#define PR 8 /* rows per panel */

/* q4tp: how a pass takes each group's rungs (lanes_avx2.c's file comment): none (f16 scales), the
 * blend tree on the ladder parts, or a gather from the panel's whole ladders. */
enum { TP_NONE, TP_BLEND, TP_GATHER };

typedef union { /* one way per pass */
    struct {
        __m256 e[8], f[3]; /* TP_BLEND: rungs 0..7, the factors of the rest */
    };
    float lad[32][8]; /* TP_GATHER: rung c of lane k at [c][k] */
} ladders8;

/* The way this CPU's cores take q4tp's rungs best (cq_cpu_gather_fast). */
static inline int tp_pick(void) {
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

/* Step k of group g (columns 32 g + 4 k .. + 3 and their + 16) for T tokens into s: int16 sums
 * (at most 8 * 2 * 15 * 127 = 30480 a group), or with AVX-VNNI int32 ones. */
AI void lanes_q4_step(const uint8_t *w, int k, uint64_t g, __m256i m4, const int8_t *const *xq,
                      const int T, __m256i *s) {
    __m256i v = _mm256_load_si256((const __m256i *)(const void *)(w + 32 * k));
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    for (int t = 0; t < T; t++) {
        const int8_t *x = xq[t] + 32 * g + 4 * k;
#ifdef __AVXVNNI__ /* int32 sums straight away */
        s[t] = cq_avx2_dot4(s[t], lo, cq_lanes_bcast4(x));
        s[t] = cq_avx2_dot4(s[t], hi, cq_lanes_bcast4(x + 16));
#else
        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(lo, cq_lanes_bcast4(x)));
        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(hi, cq_lanes_bcast4(x + 16)));
#endif
    }
}

/* The panel at p for T tokens (their codes xq, scales dx, corrections c8 = -8 * sum of a group's
 * codes): out[t] the 8 rows' sums. tp: TP_NONE for f16 scales, else how q4tp's rungs are taken. */
AI void panel_pass(const uint8_t *p, uint64_t G, const int tp, const int8_t *const *xq,
                   const float *const *dx, const int32_t *const *c8, const int T, __m256 *out) {
    const __m256i m4 = _mm256_set1_epi8(15);
#ifndef __AVXVNNI__
    const __m256i ones = _mm256_set1_epi16(1);
#endif
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
        for (int t = 0; t < T; t++) /* AVX-VNNI: from the offset's correction */
#ifdef __AVXVNNI__
            s[t] = _mm256_set1_epi32(c8[t][g]);
#else
            s[t] = _mm256_setzero_si256();
#endif
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
#ifdef __AVXVNNI__
            __m256i i = s[t];
#else
            __m256i i =
                _mm256_add_epi32(_mm256_madd_epi16(s[t], ones), _mm256_set1_epi32(c8[t][g]));
#endif
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
/* One build's passes: f16 scales, q4tp's rungs by blends and by gathers, q8_row. */
typedef struct {
    pass_fn f16[CQ_LANES_PASS + 1], tp[CQ_LANES_PASS + 1], tg[CQ_LANES_PASS + 1],
        q8[CQ_LANES_PASS + 1];
} cq_lanes_avx2_passes;
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
/* The passes by token count (1 .. CQ_LANES_PASS), for a file's table of them. */
#define CQ_LANES_AVX2_PASSES                                                                       \
    {                                                                                              \
        {NULL, pass16_1, pass16_2, pass16_3, pass16_4},                                            \
            {NULL, passtp_1, passtp_2, passtp_3, passtp_4},                                        \
            {NULL, passtg_1, passtg_2, passtg_3, passtg_4}, {                                      \
            NULL, pass8_1, pass8_2, pass8_3, pass8_4                                               \
        }                                                                                          \
    }
_Static_assert(CQ_LANES_PASS == 4, "CQ_LANES_AVX2_PASSES names every token count");

/* The AVX-VNNI build's passes (lanes_avxvnni.c), for CPUs with it (cq_cpu_avxvnni). */
extern const cq_lanes_avx2_passes cq_lanes_avxvnni_passes;
#endif
