/* lanes_vbit_avx2_pass.h - the AVX2 passes over vbit's batched-decode copy (lanes_vbit_avx2.c
 * has the forms and the entry points), written once for two builds: lanes_vbit_avx2.c compiles
 * them with vpmaddubsw (int16 sums of a group, then vpmaddwd), lanes_vbit_avxvnni.c with
 * AVX-VNNI's vpdpbusd (int32 sums straight away, from the group's offset correction; the wide
 * form's sign step in lanes_step_avx2.h likewise). The integer sums are the same, so the
 * outputs are the same bits. For files compiled with the AVX2 flags (cmake/CortiqModule.cmake). */
#ifndef CORTIQ_QUANT_LANES_VBIT_AVX2_PASS_H
#define CORTIQ_QUANT_LANES_VBIT_AVX2_PASS_H

#include <immintrin.h>

#include "quant/gemm_vbit_codes.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/lanes_step_avx2.h"

#define AI static inline __attribute__((always_inline))

AI __m256i load32(const uint8_t *p) {
    return _mm256_load_si256((const __m256i *)(const void *)p);
}

/* Bit j of every byte of pl at bit 4, the other bits cleared. */
AI __m256i bit4(__m256i pl, const int j) {
    const __m256i s = j < 4   ? _mm256_slli_epi16(pl, 4 - j)
                      : j > 4 ? _mm256_srli_epi16(pl, j - 4)
                              : pl;
    return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}

/* Code vector k (0-7: columns 4k .. 4k + 3 of the 8 rows) of a narrow or five-bit group at w
 * (the panel's half of the pair's group), pl its plane half (five) */
AI __m256i code_vec(const uint8_t *w, __m256i pl, const int five, const int k) {
    const __m256i v = load32(w + 64 * (k % 4));
    __m256i c = _mm256_and_si256(k < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
    return five ? _mm256_or_si256(c, bit4(pl, 2 * (k % 4) + k / 4)) : c;
}

/* Steps k0 .. k0 + nk - 1 of a narrow or five-bit group g (codes at w, planes pl) for H panels
 * and T tokens into s: vpdpbusd into the int32 sums with AVX-VNNI; else int16 sums of these
 * steps (8 * 2 * 15 * 127 = 30480 for a narrow group's 4, 4 * 2 * 31 * 127 = 31496 for two of a
 * five-bit group's), widened once. */
AI void nibble_steps(const uint8_t *w, const __m256i *pl, const int five, const int k0,
                     const int nk, uint64_t g, const int H, const int8_t *const *xq, const int T,
                     __m256i *s) {
#ifndef __AVXVNNI__
    __m256i s16[2 * CQ_LANES_PASS];
    for (int i = 0; i < H * T; i++)
        s16[i] = _mm256_setzero_si256();
#endif
    for (int k = k0; k < k0 + nk; k++)
        for (int hh = 0; hh < H; hh++) {
            const uint8_t *wh = w + 32 * hh;
            const __m256i lo = code_vec(wh, pl[hh], five, k),
                          hi = code_vec(wh, pl[hh], five, k + 4);
            for (int t = 0; t < T; t++) {
                const int8_t *x = xq[t] + 32 * g + 4 * k;
#ifdef __AVXVNNI__
                s[hh * T + t] = cq_avx2_dot4(s[hh * T + t], lo, cq_lanes_bcast4(x));
                s[hh * T + t] = cq_avx2_dot4(s[hh * T + t], hi, cq_lanes_bcast4(x + 16));
#else
                __m256i *d = &s16[hh * T + t];
                *d = _mm256_add_epi16(*d, _mm256_maddubs_epi16(lo, cq_lanes_bcast4(x)));
                *d = _mm256_add_epi16(*d, _mm256_maddubs_epi16(hi, cq_lanes_bcast4(x + 16)));
#endif
            }
        }
#ifndef __AVXVNNI__
    for (int i = 0; i < H * T; i++)
        s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(s16[i], _mm256_set1_epi16(1)));
#endif
}

/* H panels from half h of the pair at p (form f, G groups: H = 1 one panel, H = 2 both, h = 0)
 * for T tokens: out[hh * T + t] panel h + hh's 8 slots' sums for token t. Both panels in one
 * pass share the group's prefetches and the token's broadcasts; each lane's arithmetic is the
 * same either way. */
AI void pass_vbit(const uint8_t *p, unsigned h, const int H, uint64_t G, const int f,
                  const int8_t *const *xq, const float *const *dx, const int32_t *const *c8,
                  const int T, __m256 *out) {
    const uint64_t gb = f == CQ_VBIT_NARROW ? 256 : f == CQ_VBIT_FIVE ? 320 : 512;
    const uint8_t *sc = p + G * gb + 16 * h;
    __m256 acc[2 * CQ_LANES_PASS];
    for (int i = 0; i < H * T; i++)
        acc[i] = _mm256_setzero_ps();
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *w = p + g * gb + 32 * h;
        for (unsigned c = 0; c < gb + 32; c += 64) /* the pair's codes and scales, linearly */
            cq_prefetch_weights(p + g * (gb + 32) + c);
        __m256i s[2 * CQ_LANES_PASS];
        for (int hh = 0; hh < H; hh++)
            for (int t = 0; t < T; t++)
                s[hh * T + t] = _mm256_set1_epi32(f == CQ_VBIT_NARROW ? c8[t][g]
                                                  : f == CQ_VBIT_FIVE ? 2 * c8[t][g]
                                                                      : 0);
        if (f == CQ_VBIT_WIDE) {
#pragma GCC unroll 1
            for (int k = 0; k < 8; k++)
                for (int hh = 0; hh < H; hh++)
                    cq_lanes_sign_step(load32(w + 32 * hh + 64 * k), xq, 32 * g + 4 * k, T,
                                       s + hh * T);
        } else {
            const int five = f == CQ_VBIT_FIVE;
            __m256i pl[2];
            for (int hh = 0; hh < H; hh++)
                pl[hh] = five ? load32(w + 32 * hh + 256) : _mm256_setzero_si256();
            if (five) { /* in halves: the int16 sums' limit */
                nibble_steps(w, pl, 1, 0, 2, g, H, xq, T, s);
                nibble_steps(w, pl, 1, 2, 2, g, H, xq, T, s);
            } else {
                nibble_steps(w, pl, 0, 0, 4, g, H, xq, T, s);
            }
        }
        for (int hh = 0; hh < H; hh++) {
            const __m256 d = _mm256_cvtph_ps(
                _mm_load_si128((const __m128i *)(const void *)(sc + 32 * g + 16 * hh)));
            for (int t = 0; t < T; t++)
                acc[hh * T + t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[hh * T + t]),
                                    _mm256_mul_ps(d, _mm256_set1_ps(dx[t][g])), acc[hh * T + t]);
        }
    }
    for (int i = 0; i < H * T; i++)
        out[i] = acc[i];
}

typedef void (*cq_vbit_pass_fn)(const uint8_t *, unsigned, uint64_t, const int8_t *const *,
                                const float *const *, const int32_t *const *, __m256 *);
/* One build's passes: by form, one panel for 1 .. CQ_LANES_PASS tokens, and both panels of a
 * pair for one token. */
typedef struct {
    cq_vbit_pass_fn one[3][CQ_LANES_PASS + 1], pair[3];
} cq_lanes_vbit_avx2_passes;
#define DEF_PASS(F, T)                                                                             \
    static __attribute__((noinline)) void pass_##F##_##T(                                          \
        const uint8_t *p, unsigned h, uint64_t G, const int8_t *const *xq, const float *const *dx, \
        const int32_t *const *c8, __m256 *out) {                                                   \
        pass_vbit(p, h, 1, G, F, xq, dx, c8, T, out);                                              \
    }
#define DEF_PAIR(F)                                                                                \
    static __attribute__((noinline)) void pair_##F##_1(                                            \
        const uint8_t *p, unsigned h, uint64_t G, const int8_t *const *xq, const float *const *dx, \
        const int32_t *const *c8, __m256 *out) {                                                   \
        pass_vbit(p, h, 2, G, F, xq, dx, c8, 1, out);                                              \
    }
#define DEF_FORM(F) DEF_PASS(F, 1) DEF_PASS(F, 2) DEF_PASS(F, 3) DEF_PASS(F, 4) DEF_PAIR(F)
DEF_FORM(0)
DEF_FORM(1)
DEF_FORM(2)
#define CQ_VBIT_PASSES_OF(F)                                                                       \
    { NULL, pass_##F##_1, pass_##F##_2, pass_##F##_3, pass_##F##_4 }
/* The passes of this build, for a file's table of them. */
#define CQ_LANES_VBIT_AVX2_PASSES                                                                  \
    {                                                                                              \
        {CQ_VBIT_PASSES_OF(0), CQ_VBIT_PASSES_OF(1), CQ_VBIT_PASSES_OF(2)}, {                      \
            pair_0_1, pair_1_1, pair_2_1                                                           \
        }                                                                                          \
    }
_Static_assert(CQ_VBIT_NARROW == 0 && CQ_VBIT_FIVE == 1 && CQ_VBIT_WIDE == 2, "form order");
_Static_assert(CQ_LANES_PASS == 4, "passes of up to 4 tokens");

/* The AVX-VNNI build's passes (lanes_vbit_avxvnni.c), for CPUs with it (cq_cpu_avxvnni). */
extern const cq_lanes_vbit_avx2_passes cq_lanes_vbit_avxvnni_passes;
#endif
