/* lanes_vbit_avx512.c - vbit's batched-decode copy (lanes_vbit.c) read by the AVX-512 VNNI tier:
 * the q4 class's pair kernels (lanes_avx512.c) per form, and the integer GEMM's panels gathered
 * from it.
 *
 * Per group, pair and token: narrow pairs run q4's 8 vpdpbusd on nibbles from the -8 * sum
 * correction; five-bit pairs the same on c = nibble | fifth bit (a 16-bit shift of the plane
 * brings bit 2k + hi of every byte to bit 4, and one vpternlogd merges it) from -16 * sum; wide
 * pairs q8_row's 8 on w + 128 from -128 * sum. Each sum is the negated integer sum of the
 * values, the stored scale the negated scale, so fma(sum, scale * dx, acc) gives the bits of
 * the integer GEMM (gemm_i8_avx512.c), which per 32-column block takes the same steps with
 * codes v + 127. Results go to their rows by the window's slot order (a scatter per pair).
 *
 * The GEMM's panels (16 rows in row order, codes v + 127, block scales) are gathered from the
 * rows' pairs: per block 4 gathers of the rows' nibble lanes, one of the five-bit plane and 4
 * more for wide rows when the panel holds such rows, then the same arithmetic per vector. */
#include <immintrin.h>
#include <string.h>

#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

#define AI       static inline __attribute__((always_inline))
#define PASS_MAX 8 /* tokens per pass, as lanes_avx512.c */
#define WIN      CQ_LANES_VBIT_WIN

typedef int32_t i32_unaligned __attribute__((may_alias, aligned(1)));

AI __m512i bcast4(const int8_t *p) {
    return _mm512_set1_epi32(*(const i32_unaligned *)p);
}

/* A pair's 64 bytes as two 32-byte loads: from DRAM the one 64-byte load ran slower
 * (bench_tok8_multi 262144 896, 4-bit rows: 8.0-8.8 against 7.0-7.4 ms; the Qwen shape's decode
 * +2-5 %) */
AI __m512i load64(const uint8_t *p) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(const void *)p)),
        _mm256_load_si256((const __m256i *)(const void *)(p + 32)), 1);
}

/* Bit j of every byte of pl at bit 4 (other bits: garbage the caller masks). */
AI __m512i bit_to_4(__m512i pl, const int j) {
    return j < 4   ? _mm512_slli_epi16(pl, (unsigned)(4 - j))
           : j > 4 ? _mm512_srli_epi16(pl, (unsigned)(j - 4))
                   : pl;
}

/* a | (b & 0x10 per byte) */
AI __m512i or_bit4(__m512i a, __m512i b) {
    return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(0x10), 0xF8);
}

/* The pair at p in form f (G groups) for T tokens: out[t] its 16 slots' sums. */
AI void pass_vbit(const uint8_t *p, uint64_t G, const int f, const int8_t *const *xq,
                  const float *const *dx, const int32_t *const *c8, const int T, __m512 *out) {
    const uint64_t gb = f == CQ_VBIT_NARROW ? 256 : f == CQ_VBIT_FIVE ? 320 : 512;
    const int32_t mul = f == CQ_VBIT_NARROW ? 1 : f == CQ_VBIT_FIVE ? 2 : 16;
    const uint8_t *sc = p + G * gb;
    const __m512i m4 = _mm512_set1_epi8(15), flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[PASS_MAX];
    for (int t = 0; t < T; t++)
        acc[t] = _mm512_setzero_ps();
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *w = p + g * gb;
        /* the pair's codes and then its scales, one span: prefetched linearly, a group's share
         * of the span per group (prefetching the codes alone left the scales' lines out) */
        for (unsigned c = 0; c < gb + 32; c += 64)
            cq_prefetch_weights(p + g * (gb + 32) + c);
        __m512i s[PASS_MAX];
        for (int t = 0; t < T; t++)
            s[t] = _mm512_set1_epi32(mul * c8[t][g]);
        if (f == CQ_VBIT_WIDE) {
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m512i v = _mm512_xor_si512(load64(w + 64 * k), flip);
                for (int t = 0; t < T; t++)
                    s[t] = _mm512_dpbusd_epi32(s[t], v, bcast4(xq[t] + 32 * g + 4 * k));
            }
        } else {
            const __m512i pl = f == CQ_VBIT_FIVE ? load64(w + 256) : _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i v = load64(w + 64 * k);
                __m512i lo = _mm512_and_si512(v, m4),
                        hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (f == CQ_VBIT_FIVE) {
                    lo = or_bit4(lo, bit_to_4(pl, 2 * k));
                    hi = or_bit4(hi, bit_to_4(pl, 2 * k + 1));
                }
                for (int t = 0; t < T; t++) {
                    const int8_t *x = xq[t] + 32 * g + 4 * k;
                    s[t] = _mm512_dpbusd_epi32(s[t], lo, bcast4(x));
                    s[t] = _mm512_dpbusd_epi32(s[t], hi, bcast4(x + 16));
                }
            }
        }
        const __m512 d =
            _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(const void *)(sc + 32 * g)));
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]),
                                     _mm512_mul_ps(d, _mm512_set1_ps(dx[t][g])), acc[t]);
    }
    for (int t = 0; t < T; t++)
        out[t] = acc[t];
}

typedef void (*pass_fn)(const uint8_t *, uint64_t, const int8_t *const *, const float *const *,
                        const int32_t *const *, __m512 *);
#define DEF_PASS(F, T)                                                                             \
    static __attribute__((noinline)) void pass_##F##_##T(                                          \
        const uint8_t *p, uint64_t G, const int8_t *const *xq, const float *const *dx,             \
        const int32_t *const *c8, __m512 *out) {                                                   \
        pass_vbit(p, G, F, xq, dx, c8, T, out);                                                    \
    }
#define DEF_FORM(F)                                                                                \
    DEF_PASS(F, 1)                                                                                 \
    DEF_PASS(F, 2)                                                                                 \
    DEF_PASS(F, 3) DEF_PASS(F, 4) DEF_PASS(F, 5) DEF_PASS(F, 6) DEF_PASS(F, 7) DEF_PASS(F, 8)
DEF_FORM(0)
DEF_FORM(1)
DEF_FORM(2)
#define PASSES(F)                                                                                  \
    {                                                                                              \
        NULL, pass_##F##_1, pass_##F##_2, pass_##F##_3, pass_##F##_4, pass_##F##_5, pass_##F##_6,  \
            pass_##F##_7, pass_##F##_8                                                             \
    }
_Static_assert(CQ_VBIT_NARROW == 0 && CQ_VBIT_FIVE == 1 && CQ_VBIT_WIDE == 2, "form order");
static const pass_fn passes_of[3][PASS_MAX + 1] = {PASSES(0), PASSES(1), PASSES(2)};

void cq_avx512_lanes_vbit_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                       float *const *y, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups;
    const uint8_t *slot_row = cq_lanes_vbit_slot_rows(m);
    cq_lanes_toks k;
    const size_t passes = cq_lanes_toks_init(&k, tok, n, m->cols, PASS_MAX);
    uint64_t q0, q1;
    cq_lanes_vbit_pairs(m, r0, r1, &q0, &q1);
    for (uint64_t q = q0; q < q1; q++) {
        /* the pair's slots: their rows' places in y (from r0) where inside [r0, r1) */
        const uint64_t w0 = q * 16 / WIN * WIN;
        const __m512i sr =
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(slot_row + 16 * q)));
        const __m512i row = _mm512_add_epi32(sr, _mm512_set1_epi32((int)(w0 - r0)));
        __mmask16 in = _mm512_cmpneq_epi32_mask(sr, _mm512_set1_epi32(0xFF));
        in &= _mm512_cmpge_epi32_mask(row, _mm512_setzero_si512());
        in &= _mm512_cmplt_epi32_mask(row, _mm512_set1_epi32((int)(r1 - r0)));
        if (!in) continue;
        unsigned form;
        const uint8_t *p = cq_lanes_vbit_pair(m, q, &form);
        const pass_fn *fns = passes_of[form];
        for (size_t pq = 0; pq < passes; pq++) {
            const size_t t = k.first[pq], nt = k.count[pq];
            __m512 v[PASS_MAX];
            fns[nt](p, G, k.xq + t, k.dx + t, k.c8 + t, v);
            for (size_t j = 0; j < nt; j++)
                _mm512_mask_i32scatter_ps(y[t + j], in, row, v[j], 4);
        }
    }
}

void cq_avx512_lanes_vbit_unpack(const cmf_qmat *m, uint64_t r, size_t nb, uint8_t *panel,
                                 float *bs) {
    const uint64_t G = m->groups;
    const uint8_t *base = m->lanes;
    _Alignas(64) int32_t at[16] = {0}, step[16] = {0}, sat[16] = {0}, kc[16] = {0};
    __mmask16 valid = 0, five = 0, wide = 0;
    for (unsigned i = 0; i < 16 && r + i < m->rows; i++) {
        const cq_vbit_lane ln = cq_lanes_vbit_lane(m, r + i);
        const uint64_t gb = cq_lanes_vbit_group_bytes(ln.form);
        at[i] = (int32_t)(ln.off + 32 * (ln.slot / 8) + 4 * (ln.slot % 8));
        step[i] = (int32_t)gb;
        sat[i] = (int32_t)(ln.off + G * gb + 2 * ln.slot);
        /* v + 127 = 127 + 8 - c (narrow), 127 + 16 - c (five), as bytes in every lane */
        kc[i] = (ln.form == CQ_VBIT_NARROW ? 135 : 143) * 0x01010101;
        valid |= (__mmask16)(1u << i);
        if (ln.form == CQ_VBIT_FIVE) five |= (__mmask16)(1u << i);
        if (ln.form == CQ_VBIT_WIDE) wide |= (__mmask16)(1u << i);
    }
    __m512i gi = _mm512_load_si512(at), si = _mm512_load_si512(sat);
    const __m512i gs = _mm512_load_si512(step), kcv = _mm512_load_si512(kc);
    const __m512i m4 = _mm512_set1_epi8(15), c127 = _mm512_set1_epi8(127),
                  z = _mm512_setzero_si512();
    for (uint64_t g = 0; g < nb; g++) {
        __m512i *o = (__m512i *)(void *)(panel + g * 512);
        if (g >= G) { /* blocks past the columns: zero codes and scales */
            for (int k = 0; k < 8; k++)
                _mm512_store_si512(o + k, z);
            _mm512_storeu_ps(bs + g * 16, _mm512_setzero_ps());
            continue;
        }
        __m512i d[8], pl = z;
        for (int k = 0; k < 4; k++)
            d[k] = _mm512_mask_i32gather_epi32(
                z, valid, _mm512_add_epi32(gi, _mm512_set1_epi32(64 * k)), base, 1);
        if (five)
            pl = _mm512_mask_i32gather_epi32(z, five, _mm512_add_epi32(gi, _mm512_set1_epi32(256)),
                                             base, 1);
        for (int k = 4; k < 8; k++)
            d[k] = wide ? _mm512_mask_i32gather_epi32(
                              z, wide, _mm512_add_epi32(gi, _mm512_set1_epi32(64 * k)), base, 1)
                        : z;
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const int kk = k % 4, hi = k / 4;
            __m512i c = _mm512_and_si512(hi ? _mm512_srli_epi16(d[kk], 4) : d[kk], m4);
            if (five) c = or_bit4(c, bit_to_4(pl, 2 * kk + hi));
            c = _mm512_sub_epi8(kcv, c);
            if (wide) c = _mm512_mask_mov_epi32(c, wide, _mm512_sub_epi8(c127, d[k]));
            _mm512_store_si512(o + k, c);
        }
        const __m512i sv = _mm512_mask_i32gather_epi32(z, valid, si, base, 1);
        const __m512 sc = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(sv));
        _mm512_storeu_ps(bs + g * 16, _mm512_maskz_xor_ps(valid, sc, _mm512_set1_ps(-0.0f)));
        gi = _mm512_add_epi32(gi, gs);
        si = _mm512_add_epi32(si, _mm512_set1_epi32(32));
    }
}
