/* lanes_avx512.c - the batched-decode copy (lanes.c: panels of 8 rows, one int32 lane per row;
 * on this tier pairs of them interleaved) read by the AVX-512 VNNI tier.
 *
 * Two consecutive panels side by side fill a 16-lane vector: this tier's copy stores a pair
 * interleaved (lanes.c), so per group the 32 bytes of panel A's vector k and those of panel B's
 * are one 64-byte load whose lanes 0-7 are A's rows and 8-15 B's, all against the same 4
 * activation bytes (an embedded broadcast), and a pass reads its pair as one stream. vpdpbusd
 * multiplies the unsigned codes by them straight into int32 sums, so per 512 weights and token: 8
 * vpdpbusd, then one conversion, one scale multiply and one FMA for the 16 rows, against 22 vector
 * operations in the row-major kernels (kernel_i8dec_avx512.c), which finish each group inside
 * one row's vector. A group's sum starts at the token's correction (-8 * the sum of its codes;
 * q8_row's weights are stored signed and taken as w + 128, so -128 * that sum), so every
 * integer sum is exact and equals the AVX2 tier's, and the floating-point steps are the ones
 * the AVX-512 integer GEMM (gemm_i8_avx512.c) takes per 32-column block: a token gets the
 * GEMM's bits whichever tokens share its pass. The GEMM, too, builds its 16-row panels from
 * the copy (cq_avx512_lanes_unpack), so a matrix with a copy never reads its file pages again.
 * q4tp's copy holds each group's 5-bit codes and each row's ladder numbers instead of f32 scales
 * (lanes.c): per group and 16 rows five masked products make the rungs from the powers of
 * 2^step a pass computes once (q4tp_ladder_avx512.h), the ladder's bits, where 4-byte scales
 * had made the copy a fifth larger than the file.
 *
 * Tokens are prepared in the AVX2 q8_row layout (cq_avx2_q8dec_tok_prepare: codes in natural
 * order, dx and the correction per group), which cmf_tok8_prepare writes on this tier for
 * matrices with a copy (CMF_TOK8_LANES). */
#include <immintrin.h>
#include <string.h>

#include "quant/gemm_impl.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/q4tp_ladder_avx512.h"

#define AI static inline __attribute__((always_inline))
#define PR 8 /* rows per panel of the copy */

/* Tokens per pass: two accumulators each beside the step's vectors stay within 32 zmm. */
#define PASS_MAX 8

typedef int32_t i32_unaligned __attribute__((may_alias, aligned(1)));

AI __m512i bcast4(const int8_t *p) {
    return _mm512_set1_epi32(*(const i32_unaligned *)p);
}

/* Vector k of a pair's group at gp (kernel_i8dec.h, CQ_LANES_PAIR_*: both panels' vector k at
 * +64k, the 16 rows' scales or q4tp codes at +256): lanes 0-7 panel a's rows, 8-15 b's. */
AI __m512i vec16(const uint8_t *gp, int k) {
    return _mm512_loadu_si512((const void *)(gp + 64 * k));
}

/* q4tp: the 16 rows' ladder numbers (lanes.c: lo, step, qq), read once per pass, and what a
 * pass makes of them once (q4tp_ladder_avx512.h): the powers of the near lanes' products and
 * which lanes are near. */
typedef struct {
    __m512 lo, st, qq;
    cq_q4tp_pow16 p;
    __mmask16 near;
} ladder16;

AI void pair_ladder(const uint8_t *pair, ladder16 *l) {
    l->lo = _mm512_loadu_ps(pair);
    l->st = _mm512_loadu_ps(pair + 64);
    l->qq = _mm512_loadu_ps(pair + 128);
    l->p = cq_q4tp_pow_avx512(l->lo, l->st);
    l->near = cq_q4tp_near_avx512(l->lo, l->st);
}

/* How a pass takes q4tp's rungs: by the masked products per group, all 16 lanes near, or some
 * far, whose direct rungs replace theirs. A table of rungs 0..15 made once a pass and gathered
 * a group (while rungs were a polynomial each) was slower from 4864 columns down. */
enum { TP_NONE, TP_CHAIN, TP_MIXED };

/* The direct form's rungs c & 15 of the lanes' rows (c per lane), before the factor qq. */
AI __m512 direct_of(const ladder16 *l, __m512i c) {
    const __m512 i = _mm512_cvtepi32_ps(_mm512_and_si512(c, _mm512_set1_epi32(15)));
    return cq_exp2_ps_avx512(_mm512_fmadd_ps(i, l->st, l->lo));
}

/* The 16 rows' scales of the group at gp: f16 as stored (TP_NONE), or q4tp's rungs of their
 * 5-bit codes: the products (TP_CHAIN; TP_MIXED with the far lanes' direct rungs, times qq
 * where c >= 16). */
AI __m512 pair_scales(const uint8_t *gp, const int tp, const ladder16 *l) {
    if (tp == TP_NONE)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(gp + 256)));
    const __m512i c =
        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(gp + 256)));
    const __m512 v = cq_q4tp_chain_avx512(&l->p, c);
    if (tp == TP_CHAIN) return v;
    const __m512 d = direct_of(l, c);
    const __mmask16 upper = _mm512_test_epi32_mask(c, _mm512_set1_epi32(16));
    return _mm512_mask_blend_ps(l->near, _mm512_mask_mul_ps(d, upper, d, l->qq), v);
}

/* The 4-bit class: the pair at `pair` (G groups) for T tokens; out[t] the 16 rows' sums. tp: how
 * q4tp's rungs are taken, TP_NONE for f16 scales. */
AI void pass_q4(const uint8_t *pair, uint64_t G, const int tp, const ladder16 *lad,
                const int8_t *const *xq, const float *const *dx, const int32_t *const *c8,
                const int T, __m512 *out) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const int q4tp = tp != TP_NONE;
    const uint64_t gb = cq_lanes_pair_group(0, q4tp);
    const uint8_t *gp = pair + cq_lanes_pair_head(q4tp);
    __m512 acc[PASS_MAX];
    for (int t = 0; t < T; t++)
        acc[t] = _mm512_setzero_ps();
    for (uint64_t g = 0; g < G; g++, gp += gb) {
        /* one stream: the group's lines at cq_prefetch_weights' distances */
        for (unsigned c = 0; c < gb; c += 64)
            cq_prefetch_weights(gp + c);
        __m512i s[PASS_MAX];
        for (int t = 0; t < T; t++)
            s[t] = _mm512_set1_epi32(c8[t][g]);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i v = vec16(gp, k);
            __m512i lo = _mm512_and_si512(v, m4),
                    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            for (int t = 0; t < T; t++) {
                const int8_t *x = xq[t] + 32 * g + 4 * k;
                s[t] = _mm512_dpbusd_epi32(s[t], lo, bcast4(x));
                s[t] = _mm512_dpbusd_epi32(s[t], hi, bcast4(x + 16));
            }
        }
        const __m512 d = pair_scales(gp, tp, lad);
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]),
                                     _mm512_mul_ps(d, _mm512_set1_ps(dx[t][g])), acc[t]);
    }
    for (int t = 0; t < T; t++)
        out[t] = acc[t];
}

/* q8_row: per group 8 vectors of signed weights; w + 128 (xor 0x80) is the unsigned operand and
 * -128 * the group's code sum (16 * c8) the start of its sum. Times the row scales at the end. */
AI void pass_q8(const uint8_t *pair, uint64_t G, const int8_t *const *xq, const float *const *dx,
                const int32_t *const *c8, const int T, __m512 *out) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[PASS_MAX];
    for (int t = 0; t < T; t++)
        acc[t] = _mm512_setzero_ps();
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *gp = pair + g * CQ_LANES_PAIR_GROUP_Q8;
        for (unsigned c = 0; c < CQ_LANES_PAIR_GROUP_Q8; c += 64)
            cq_prefetch_weights(gp + c);
        __m512i s[PASS_MAX];
        for (int t = 0; t < T; t++)
            s[t] = _mm512_set1_epi32(16 * c8[t][g]);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m512i v = _mm512_xor_si512(vec16(gp, k), flip);
            for (int t = 0; t < T; t++)
                s[t] = _mm512_dpbusd_epi32(s[t], v, bcast4(xq[t] + 32 * g + 4 * k));
        }
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_set1_ps(dx[t][g]), acc[t]);
    }
    const __m512 rs = _mm512_loadu_ps(pair + G * CQ_LANES_PAIR_GROUP_Q8);
    for (int t = 0; t < T; t++)
        out[t] = _mm512_mul_ps(acc[t], rs);
}

typedef void (*pass_fn)(const uint8_t *, uint64_t, const int8_t *const *, const float *const *,
                        const int32_t *const *, __m512 *);
#define DEF_PASS(T)                                                                                \
    static __attribute__((noinline)) void p16_##T(const uint8_t *pair, uint64_t G,                 \
                                                  const int8_t *const *xq, const float *const *dx, \
                                                  const int32_t *const *c8, __m512 *out) {         \
        pass_q4(pair, G, TP_NONE, NULL, xq, dx, c8, T, out);                                       \
    }                                                                                              \
    static __attribute__((noinline)) void ptp_##T(const uint8_t *pair, uint64_t G,                 \
                                                  const int8_t *const *xq, const float *const *dx, \
                                                  const int32_t *const *c8, __m512 *out) {         \
        ladder16 l;                                                                                \
        pair_ladder(pair, &l);                                                                     \
        if (l.near == 0xFFFF)                                                                      \
            pass_q4(pair, G, TP_CHAIN, &l, xq, dx, c8, T, out);                                    \
        else                                                                                       \
            pass_q4(pair, G, TP_MIXED, &l, xq, dx, c8, T, out);                                    \
    }                                                                                              \
    static __attribute__((noinline)) void p8_##T(const uint8_t *pair, uint64_t G,                  \
                                                 const int8_t *const *xq, const float *const *dx,  \
                                                 const int32_t *const *c8, __m512 *out) {          \
        pass_q8(pair, G, xq, dx, c8, T, out);                                                      \
    }
DEF_PASS(1)
DEF_PASS(2)
DEF_PASS(3)
DEF_PASS(4)
DEF_PASS(5)
DEF_PASS(6)
DEF_PASS(7)
DEF_PASS(8)
#define PASSES(P)                                                                                  \
    { NULL, P##_1, P##_2, P##_3, P##_4, P##_5, P##_6, P##_7, P##_8 }
static const pass_fn p16[PASS_MAX + 1] = PASSES(p16);
static const pass_fn ptp[PASS_MAX + 1] = PASSES(ptp);
static const pass_fn p8[PASS_MAX + 1] = PASSES(p8);

void cq_avx512_lanes_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                  float *const *y, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups, pb = cq_lanes_pair_bytes(m);
    const pass_fn *fns = m->dtype == CMF_DT_Q8_ROW ? p8 : m->dtype == CMF_DT_Q4TP ? ptp : p16;
    cq_lanes_toks k;
    const size_t passes = cq_lanes_toks_init(&k, tok, n, m->cols, PASS_MAX);
    /* 16 rows (a pair) per step from the pair at or below r0; a last odd panel's partner holds
     * zero codes and scales (lanes.c) */
    const uint8_t *base = m->lanes;
    for (uint64_t r = r0 - r0 % (2 * PR); r < r1; r += 2 * PR) {
        const uint8_t *pair = base + r / (2 * PR) * pb;
        const uint64_t lo = r < r0 ? r0 : r, hi = r + 2 * PR < r1 ? r + 2 * PR : r1;
        for (size_t q = 0; q < passes; q++) {
            const size_t t = k.first[q], nt = k.count[q];
            __m512 v[PASS_MAX];
            fns[nt](pair, G, k.xq + t, k.dx + t, k.c8 + t, v);
            for (size_t j = 0; j < nt; j++) {
                float *o = y[t + j] + (lo - r0);
                if (lo == r && hi == r + 2 * PR) {
                    _mm512_storeu_ps(o, v[j]);
                } else {
                    float f[2 * PR];
                    _mm512_storeu_ps(f, v[j]);
                    memcpy(o, f + (lo - r), (size_t)(hi - lo) * sizeof *f);
                }
            }
        }
    }
}

void cq_avx512_lanes_unpack(const cmf_qmat *m, uint64_t r, size_t nb, uint8_t *panel, float *bs,
                            float *rs) {
    if (cq_gemm_vbit(m)) {
        cq_avx512_lanes_vbit_unpack(m, r, nb, panel, bs);
        return;
    }
    const uint64_t G = m->groups;
    const uint8_t *pair = (const uint8_t *)m->lanes + r / (2 * PR) * cq_lanes_pair_bytes(m);
    if (m->dtype == CMF_DT_Q8_ROW) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        for (uint64_t g = 0; g < nb; g++)
            for (int k = 0; k < 8; k++)
                _mm512_store_si512(
                    panel + g * 512 + 64 * k,
                    g < G ? _mm512_xor_si512(vec16(pair + g * CQ_LANES_PAIR_GROUP_Q8, k), flip)
                          : _mm512_setzero_si512());
        _mm512_storeu_ps(rs, _mm512_loadu_ps(pair + G * CQ_LANES_PAIR_GROUP_Q8));
        return;
    }
    const int q4tp = m->dtype == CMF_DT_Q4TP;
    ladder16 lad;
    if (q4tp) pair_ladder(pair, &lad);
    const int tp = !q4tp ? TP_NONE : lad.near == 0xFFFF ? TP_CHAIN : TP_MIXED;
    const uint64_t gb = cq_lanes_pair_group(0, q4tp);
    const __m512i m4 = _mm512_set1_epi8(15);
    for (uint64_t g = 0; g < nb; g++) {
        __m512i *o = (__m512i *)(void *)(panel + g * 512);
        if (g >= G) { /* blocks past the columns: zero codes and scales */
            for (int k = 0; k < 8; k++)
                _mm512_store_si512(o + k, _mm512_setzero_si512());
            _mm512_storeu_ps(bs + g * 16, _mm512_setzero_ps());
            continue;
        }
        const uint8_t *gp = pair + cq_lanes_pair_head(q4tp) + g * gb;
        for (unsigned c = 0; c < gb; c += 64) /* the pass's stream, as pass_q4 prefetches it */
            cq_prefetch_weights(gp + c);
        for (int k = 0; k < 4; k++) {
            __m512i v = vec16(gp, k);
            _mm512_store_si512(o + k, _mm512_and_si512(v, m4));
            _mm512_store_si512(o + 4 + k, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        _mm512_storeu_ps(bs + g * 16, pair_scales(gp, tp, &lad));
    }
}
