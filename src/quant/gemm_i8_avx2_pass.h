/* gemm_i8_avx2_pass.h - the AVX2 integer GEMM's pass over one packed panel for 1..6 tokens
 * (gemm_i8_avx2.c has the packing and the layout), written once for two builds: gemm_i8_avx2.c
 * compiles it with vpmaddubsw (int16 pair sums, then vpmaddwd), gemm_i8_avxvnni.c with AVX-VNNI's
 * vpdpbusd, which adds the same four u8 x s8 products straight into the int32 lane. Every form
 * keeps its products' pair sums inside int16 (the file comment of gemm_i8_avx2.c), so the two
 * builds' block sums are the same integers and their outputs the same bits: the VNNI one takes
 * one operation where the unsigned form takes two (product, int16 add) and the sign form three
 * (product, widening, add). For files compiled with the AVX2 flags (cmake/CortiqModule.cmake). */
#ifndef CORTIQ_QUANT_GEMM_I8_AVX2_PASS_H
#define CORTIQ_QUANT_GEMM_I8_AVX2_PASS_H

#include <immintrin.h>

#include "quant/kernels_engine.h"
#include "quant/lanes_step_avx2.h"

#define PR 8 /* rows per panel: one int32 lane each */
/* The panel's code form: unsigned codes with an offset of 8 (q4 family, narrow vbit panels) or
 * 16 (5-bit vbit panels), or |w| and sign(w) with a row scale (q8_row) or block scales (vbit). */
enum { FORM_U, FORM_U5, FORM_SIGN_ROW, FORM_SIGN_BLOCK };
#define TMAX 6 /* tokens per pass: half a CMF_QACT_GROUP */

/* The T tokens of token group g starting at its token t0 over one packed panel of the given
 * form. Every activation operand of a block sits at a constant offset from one pointer
 * (cmf_qact_index groups a block's tokens). */
static inline __attribute__((always_inline)) void
panel_tokens(const uint8_t *panel, const float *bs, const float *rs, const int form,
             const cmf_qact *a, const int32_t *corr, size_t g, size_t t0, const int T, float *Y,
             size_t ldy, unsigned nr, const uint32_t *idx) {
    enum { G = CMF_QACT_GROUP };
    __m256 accf[TMAX];
    __m256i acc[TMAX];
    const size_t nb = a->nb, e0 = g * nb * G + t0;
    const int8_t *xg = a->q + 32 * e0;
    const float *sx = a->scale + e0;
    const int32_t *cx = corr + e0;
#ifndef __AVXVNNI__
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    for (int t = 0; t < T; t++)
        accf[t] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++, xg += 32 * G, sx += G, cx += G) {
        if (form == FORM_SIGN_ROW || form == FORM_SIGN_BLOCK) {
            const uint8_t *wb = panel + b * 16 * 32;
            for (int t = 0; t < T; t++)
                acc[t] = _mm256_setzero_si256();
#pragma GCC unroll 1
            for (int k = 0; k < 8; k++) {
                __m256i w = _mm256_load_si256((const __m256i *)(wb + 32 * k));
                __m256i ws = _mm256_load_si256((const __m256i *)(wb + 32 * (8 + k)));
                for (int t = 0; t < T; t++) {
                    __m256i x = _mm256_sign_epi8(cq_lanes_bcast4(xg + 32 * t + 4 * k), ws);
                    acc[t] = cq_avx2_dot4(acc[t], w, x);
                }
            }
            if (form == FORM_SIGN_ROW) {
                for (int t = 0; t < T; t++)
                    accf[t] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[t]), _mm256_set1_ps(sx[t]), accf[t]);
            } else {
                __m256 d = _mm256_load_ps(bs + b * PR);
                for (int t = 0; t < T; t++)
                    accf[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[t]),
                                              _mm256_mul_ps(d, _mm256_set1_ps(sx[t])), accf[t]);
            }
        } else {
            /* unsigned codes: int16 sums of 8 steps (the q4 form's codes <= 16) or 4 (the 5-bit
             * form's <= 32) at a time, widened into int32 sums that start from the offset's
             * correction (-8 or -16 times the block's code sum) */
            const uint8_t *wb = panel + b * 8 * 32;
            __m256i s32[TMAX];
            for (int t = 0; t < T; t++)
                s32[t] = _mm256_set1_epi32((form == FORM_U5 ? 2 : 1) * cx[t]);
#ifdef __AVXVNNI__
#pragma GCC unroll 2
            for (int k = 0; k < 8; k++) {
                __m256i w = _mm256_load_si256((const __m256i *)(wb + 32 * k));
                for (int t = 0; t < T; t++)
                    s32[t] = cq_avx2_dot4(s32[t], w, cq_lanes_bcast4(xg + 32 * t + 4 * k));
            }
#else
            const int steps = form == FORM_U5 ? 4 : 8;
            for (int k0 = 0; k0 < 8; k0 += steps) {
                for (int t = 0; t < T; t++)
                    acc[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
                for (int k = k0; k < k0 + steps; k++) {
                    __m256i w = _mm256_load_si256((const __m256i *)(wb + 32 * k));
                    for (int t = 0; t < T; t++) {
                        __m256i p = _mm256_maddubs_epi16(w, cq_lanes_bcast4(xg + 32 * t + 4 * k));
                        acc[t] = _mm256_add_epi16(acc[t], p);
                    }
                }
                for (int t = 0; t < T; t++)
                    s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(acc[t], ones));
            }
#endif
            __m256 d = _mm256_load_ps(bs + b * PR);
            for (int t = 0; t < T; t++)
                accf[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[t]),
                                          _mm256_mul_ps(d, _mm256_set1_ps(sx[t])), accf[t]);
        }
    }
    const __m256 rsc = form == FORM_SIGN_ROW ? _mm256_loadu_ps(rs) : _mm256_set1_ps(1.0f);
    float *y = Y + (g * G + t0) * ldy;
    if (idx) { /* the panel's rows are Y's columns idx[0 .. nr) */
        for (int t = 0; t < T; t++) {
            _Alignas(32) float o[PR];
            _mm256_store_ps(o, _mm256_mul_ps(accf[t], rsc));
            for (unsigned i = 0; i < nr; i++)
                y[(size_t)t * ldy + idx[i]] = o[i];
        }
    } else if (nr == PR) {
        for (int t = 0; t < T; t++)
            _mm256_storeu_ps(y + (size_t)t * ldy, _mm256_mul_ps(accf[t], rsc));
    } else {
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nr),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int t = 0; t < T; t++)
            _mm256_maskstore_ps(y + (size_t)t * ldy, mask, _mm256_mul_ps(accf[t], rsc));
    }
}

#define DEF_TOKENS(T)                                                                              \
    static void tokens_##T(const uint8_t *p, const float *bs, const float *rs, int form,           \
                           const cmf_qact *a, const int32_t *corr, size_t g, size_t t0, float *Y,  \
                           size_t ldy, unsigned nr, const uint32_t *idx) {                         \
        if (form == FORM_SIGN_ROW)                                                                 \
            panel_tokens(p, bs, rs, FORM_SIGN_ROW, a, corr, g, t0, T, Y, ldy, nr, idx);            \
        else if (form == FORM_SIGN_BLOCK)                                                          \
            panel_tokens(p, bs, rs, FORM_SIGN_BLOCK, a, corr, g, t0, T, Y, ldy, nr, idx);          \
        else if (form == FORM_U5)                                                                  \
            panel_tokens(p, bs, rs, FORM_U5, a, corr, g, t0, T, Y, ldy, nr, idx);                  \
        else                                                                                       \
            panel_tokens(p, bs, rs, FORM_U, a, corr, g, t0, T, Y, ldy, nr, idx);                   \
    }
DEF_TOKENS(1)
DEF_TOKENS(2)
DEF_TOKENS(3)
DEF_TOKENS(4)
DEF_TOKENS(5)
DEF_TOKENS(6)

typedef void (*cq_gemm_avx2_tokens_fn)(const uint8_t *, const float *, const float *, int,
                                       const cmf_qact *, const int32_t *, size_t, size_t, float *,
                                       size_t, unsigned, const uint32_t *);
/* The passes by token count (1 .. TMAX), for a file's table of them. */
#define CQ_GEMM_AVX2_TOKENS                                                                        \
    { NULL, tokens_1, tokens_2, tokens_3, tokens_4, tokens_5, tokens_6 }

/* The AVX-VNNI build's passes (gemm_i8_avxvnni.c), for CPUs with it (cq_cpu_avxvnni). */
extern const cq_gemm_avx2_tokens_fn cq_gemm_avxvnni_tokens[TMAX + 1];

#endif
