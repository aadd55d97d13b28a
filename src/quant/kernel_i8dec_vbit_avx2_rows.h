/* kernel_i8dec_vbit_avx2_rows.h - one-token matrix-vector products with int8 activations for
 * vbit and vbit_ro on the AVX2 tier (CMF_KF_INT8_ACT, cols % 32 == 0), on the prepared token of
 * the 4-bit class (pair8, kernel_i8dec_avx2.h). Built twice: with vpmaddubsw / vpmaddwd
 * (kernel_i8dec_vbit_avx2.c) and with AVX-VNNI (kernel_i8dec_vbit_avxvnni.c, -mavxvnni), where
 * vpdpbusd makes the same exact int32 sums for the codes held as bytes, so the same bits. The
 * includer names the two entry points (CQ_VBIT_ROWS, CQ_VBIT_ROWS_MULTI). Internal to src/quant.
 *
 * A row of width b holds codes u in [0, 2^b - 1], MSB-first, w = (u - L) * scale[group] with
 * L = 2^(b-1) - 1. The integer sum of u * x per group comes off by L * sum(x) (from the token's
 * corr = 8 * sum), is converted once and scaled by scale * dx, as the 4-bit class does.
 *  - b = 4: a group is 16 bytes as in q4_block, but the high nibble holds the even element, so
 *    the nibble halves meet xe and xo the other way round (vpmaddubsw; 15 * 127 * 2 fits int16).
 *  - b = 3, 5, 6, 8: each 128-bit lane loads the 16 bytes that hold 8 even and 8 odd codes
 *    (values 0-15 from the group's start, 16-31 from byte 2b), a byte shuffle forms each code's
 *    big-endian byte pair and a multiply-high by 2^(16 - shift) and a mask isolate it (AVX2 has
 *    no 16-bit variable shift), giving int16 codes in xe / xo's order. They multiply the token
 *    widened to int16 with vpmaddwd, where an 8-bit code times 127 cannot saturate as it would
 *    in vpmaddubsw.
 * Rows of mixed widths run one at a time and are reduced 8 at a time. */
#ifndef CQ_VBIT_ROWS
#error "define CQ_VBIT_ROWS and CQ_VBIT_ROWS_MULTI, the two entry points' names, first"
#endif

#include <immintrin.h>

#include "quant/hsum_avx2.h"
#include "quant/kernel_i8dec_avx2.h"
#include "quant/kernel_impl.h"

#define AI static inline __attribute__((always_inline))

/* Two f16 scales at p in one load. */
AI uint64_t scale_pair(const uint8_t *p) {
    return cq_avx2_scale_bits(p, 4);
}

/* Shuffle and shift of the 8 even (e) and 8 odd (o) codes of a lane, both lanes alike. */
typedef struct {
    __m256i shuf_e, shuf_o, mul_e, mul_o, mask, L;
    unsigned b;
} vb_tab;

static void vb_tab_init(vb_tab *t, unsigned b) {
    uint8_t shuf[2][32];
    uint16_t mul[2][16];
    for (unsigned odd = 0; odd < 2; odd++)
        for (unsigned k = 0; k < 16; k++) {
            unsigned bit = (2 * (k % 8) + odd) * b, byte = bit >> 3;
            shuf[odd][2 * k] = (uint8_t)(byte + 1); /* low byte of the word: the next one */
            shuf[odd][2 * k + 1] = (uint8_t)byte;
            mul[odd][k] = (uint16_t)(1u << ((bit & 7) + b)); /* (word * 2^(16-sr)) >> 16 */
        }
    t->shuf_e = _mm256_loadu_si256((const __m256i *)shuf[0]);
    t->shuf_o = _mm256_loadu_si256((const __m256i *)shuf[1]);
    t->mul_e = _mm256_loadu_si256((const __m256i *)mul[0]);
    t->mul_o = _mm256_loadu_si256((const __m256i *)mul[1]);
    t->mask = _mm256_set1_epi16((short)((1 << b) - 1));
    t->L = _mm256_set1_epi32((1 << (b - 1)) - 1);
    t->b = b;
}

CQ_DEFINE_VBIT_TABS(vb_tabs, vb_tab, vb_tab_init)

/* The 16 even (e) and 16 odd (o) codes of the group at p as int16, in xe / xo's order. */
AI void group_codes(const uint8_t *p, const vb_tab *t, __m256i *e, __m256i *o) {
    __m256i v = _mm256_loadu2_m128i((const __m128i *)(p + 2 * t->b), (const __m128i *)p);
    *e = _mm256_and_si256(_mm256_mulhi_epu16(_mm256_shuffle_epi8(v, t->shuf_e), t->mul_e), t->mask);
    *o = _mm256_and_si256(_mm256_mulhi_epu16(_mm256_shuffle_epi8(v, t->shuf_o), t->mul_o), t->mask);
}

/* Codes e, o against the 16 even and 16 odd token codes at xe, xo: 8 int32 partial sums. */
AI __m256i codes_dot(__m256i e, __m256i o, const int8_t *xe, const int8_t *xo) {
    __m256i xe16 = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(const void *)xe));
    __m256i xo16 = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(const void *)xo));
    /* (AVX-VNNI's vpdpwssd for the second vpmaddwd and the add ran level in L2) */
    return _mm256_add_epi32(_mm256_madd_epi16(e, xe16), _mm256_madd_epi16(o, xo16));
}

/* The pair's two groups' sums (b: zeros for a lone last group) folded into their 128-bit
 * halves, the offset L * sum taken off, as floats. */
AI __m256 pair_fold(const pair8 *x, __m256i a, __m256i b, const vb_tab *t) {
    __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                                 _mm256_permute2x128_si256(a, b, 0x31));
    __m256i off = _mm256_mullo_epi32(
        _mm256_srai_epi32(_mm256_load_si256((const __m256i *)(const void *)x->corr), 3), t->L);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(s, off));
}

/* Two f16 scales to [s0 x4 | s1 x4]. */
AI __m256 scales2(uint64_t h) {
    return cq_avx2_scales_lo(cq_avx2_scales_f32(h));
}

/* Four f16 scales at p as floats (lanes 0-3): one conversion for two pairs, whose lanes
 * cq_avx2_scales_lo / _hi take from it. */
AI __m256 scales4(const uint8_t *p) {
    return cq_avx2_scales_f32(cq_avx2_scale_bits(p, 8));
}

/* Widths 3, 5 and 6: the pair's codes as bytes in the token's order (xe: group a's 16 even
 * codes, then group b's; xo the odd ones), so that they meet the token's bytes in
 * vpmaddubsw as the 4-bit class's nibbles do: 4 products per int16 lane stay below 2^15
 * (4 * 63 * 127 = 32004), and the int32 lanes then cover 8 consecutive elements, the lanes
 * of the token's corr. Per pair two packs and two qword permutes replace four token
 * widenings, two vpmaddwd more and the fold of the two groups' halves (width 8, whose
 * codes reach 255, keeps the int16 path). */
AI __m256i pair_bytes(__m256i a, __m256i b) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), _MM_SHUFFLE(3, 1, 2, 0));
}

/* The pair's int32 sums over 4 elements a lane: codes eu against the token's even elements,
 * ou against its odd ones (bytes, each below 64). */
AI __m256i bytes_dot(__m256i eu, __m256i ou, const pair8 *x) {
    const __m256i xe = _mm256_load_si256((const __m256i *)(const void *)x->xe),
                  xo = _mm256_load_si256((const __m256i *)(const void *)x->xo);
#ifdef __AVXVNNI__ /* two vpdpbusd: int32 sums straight away */
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), eu, xe), ou, xo);
#else
    return _mm256_madd_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(eu, xe), _mm256_maddubs_epi16(ou, xo)),
        _mm256_set1_epi16(1));
#endif
}

AI __m256 pair_dot_bytes(const pair8 *x, __m256i e, __m256i o, const vb_tab *t) {
    __m256i s = bytes_dot(e, o, x);
    __m256i off = _mm256_mullo_epi32(
        _mm256_srai_epi32(_mm256_load_si256((const __m256i *)(const void *)x->corr), 3), t->L);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(s, off));
}

/* Row of width b != 4 for one token (below). */
static __m256 row_generic(const cmf_qmat *m, const pair8 *tok, uint64_t r, const vb_tab *tabs,
                          unsigned b);

/* A pair of 4-bit groups (32 bytes) against the token: the high nibbles are the even codes.
 * sum(u * x) - 7 * sum(x) = dot - corr + corr / 8. */
AI __m256 pair_dot4_split(const pair8 *x, __m256i lo, __m256i hi) {
    __m256i s = bytes_dot(hi, lo, x);
    __m256i c = _mm256_load_si256((const __m256i *)(const void *)x->corr);
    s = _mm256_add_epi32(_mm256_sub_epi32(s, c), _mm256_srai_epi32(c, 3));
    return _mm256_cvtepi32_ps(s);
}

/* The low (lo) and high (hi) nibbles of 32 bytes. */
AI void split4(__m256i v, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(15);
    *lo = _mm256_and_si256(v, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

AI __m256 pair_dot4(const pair8 *x, __m256i v) {
    __m256i lo, hi;
    split4(v, &lo, &hi);
    return pair_dot4_split(x, lo, hi);
}

/* Row of width 4, 4 groups per step in two accumulators; a last lone group in the low lane. */
static __m256 row4(const cmf_qmat *m, const pair8 *tok, uint64_t r) {
    const uint64_t G = m->groups;
    const uint8_t *q = cq_vbit_row(m, r), *sc = m->scales + 2 * r * G;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    uint64_t g = 0;
    for (; g + 4 <= G; g += 4) {
        const pair8 *x = tok + g / 2;
        cq_prefetch_weights(q + 16 * g);
        __m256i va = _mm256_loadu_si256((const __m256i *)(q + 16 * g));
        __m256i vb = _mm256_loadu_si256((const __m256i *)(q + 16 * g + 32));
        const __m256 s4 = scales4(sc + 2 * g);
        acc0 = _mm256_fmadd_ps(pair_dot4(&x[0], va),
                               _mm256_mul_ps(cq_avx2_scales_lo(s4), _mm256_load_ps(x[0].dx)), acc0);
        acc1 = _mm256_fmadd_ps(pair_dot4(&x[1], vb),
                               _mm256_mul_ps(cq_avx2_scales_hi(s4), _mm256_load_ps(x[1].dx)), acc1);
    }
    for (; g < G; g += 2) {
        const bool two = g + 1 < G;
        __m256i v = two ? _mm256_loadu_si256((const __m256i *)(q + 16 * g))
                        : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(q + 16 * g)));
        const pair8 *x = tok + g / 2;
        __m256 sv = scales2(two ? scale_pair(sc + 2 * g) : ld_u16(sc + 2 * g));
        acc0 = _mm256_fmadd_ps(pair_dot4(x, v), _mm256_mul_ps(sv, _mm256_load_ps(x->dx)), acc0);
    }
    return _mm256_add_ps(acc0, acc1);
}

AI __m256 row_sum(const cmf_qmat *m, const pair8 *tok, uint64_t r, const vb_tab *tabs) {
    const unsigned b = cq_vbit_bits(m, r);
    return b == 4 ? row4(m, tok, r) : row_generic(m, tok, r, tabs, b);
}

void CQ_VBIT_ROWS(const cmf_qmat *m, const pair8 *tok, float *y, uint64_t r0, uint64_t r1) {
    const vb_tab *tabs = vb_tabs();
    __m256 v[8];
    uint64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        for (int k = 0; k < 8; k++)
            v[k] = row_sum(m, tok, r + (uint64_t)k, tabs);
        _mm256_storeu_ps(y + (r - r0), cq_hsum8x8_avx2(v));
    }
    for (int k = 1; k < 8; k++)
        v[k] = _mm256_setzero_ps();
    for (; r < r1; r++) {
        v[0] = row_sum(m, tok, r, tabs);
        y[r - r0] = _mm256_cvtss_f32(cq_hsum8x8_avx2(v));
    }
}

/* ---- several prepared tokens over the same rows (cmf_matvec_tok8_multi) ----
 * Each step's weights are loaded and unpacked once for up to VB_MULTI tokens; each token then
 * takes the one-token row's steps in its order (row4's two accumulators and tail, the wider
 * rows' one), so every token gets the bits it gets alone. */
#define VB_MULTI 4

/* Row r of width 4 for tokens tok[0 .. nt). */
AI void row4_multi(const cmf_qmat *m, const pair8 *const *tok, int nt, uint64_t r, __m256 *out) {
    const uint64_t G = m->groups;
    const uint8_t *q = cq_vbit_row(m, r), *sc = m->scales + 2 * r * G;
    __m256 acc0[VB_MULTI], acc1[VB_MULTI];
    for (int k = 0; k < nt; k++)
        acc0[k] = acc1[k] = _mm256_setzero_ps();
    uint64_t g = 0;
    for (; g + 4 <= G; g += 4) {
        cq_prefetch_weights(q + 16 * g);
        __m256i la, ha, lb, hb;
        split4(_mm256_loadu_si256((const __m256i *)(q + 16 * g)), &la, &ha);
        split4(_mm256_loadu_si256((const __m256i *)(q + 16 * g + 32)), &lb, &hb);
        const __m256 s4 = scales4(sc + 2 * g), sa = cq_avx2_scales_lo(s4),
                     sb = cq_avx2_scales_hi(s4);
        for (int k = 0; k < nt; k++) {
            const pair8 *x = tok[k] + g / 2;
            acc0[k] = _mm256_fmadd_ps(pair_dot4_split(&x[0], la, ha),
                                      _mm256_mul_ps(sa, _mm256_load_ps(x[0].dx)), acc0[k]);
            acc1[k] = _mm256_fmadd_ps(pair_dot4_split(&x[1], lb, hb),
                                      _mm256_mul_ps(sb, _mm256_load_ps(x[1].dx)), acc1[k]);
        }
    }
    for (; g < G; g += 2) {
        const bool two = g + 1 < G;
        __m256i lo, hi;
        split4(two ? _mm256_loadu_si256((const __m256i *)(q + 16 * g))
                   : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(q + 16 * g))),
               &lo, &hi);
        __m256 sv = scales2(two ? scale_pair(sc + 2 * g) : ld_u16(sc + 2 * g));
        for (int k = 0; k < nt; k++) {
            const pair8 *x = tok[k] + g / 2;
            acc0[k] = _mm256_fmadd_ps(pair_dot4_split(x, lo, hi),
                                      _mm256_mul_ps(sv, _mm256_load_ps(x->dx)), acc0[k]);
        }
    }
    for (int k = 0; k < nt; k++)
        out[k] = _mm256_add_ps(acc0[k], acc1[k]);
}

/* One pair step of widths 3, 5, 6: the pair's codes as bytes (e, o) against each token. */
AI void pair_step_bytes(const pair8 *const *tok, int nt, uint64_t g, __m256i e, __m256i o,
                        __m256 sv, const vb_tab *t, __m256 *out) {
    for (int k = 0; k < nt; k++) {
        const pair8 *x = tok[k] + g / 2;
        out[k] = _mm256_fmadd_ps(pair_dot_bytes(x, e, o, t),
                                 _mm256_mul_ps(sv, _mm256_load_ps(x->dx)), out[k]);
    }
}

/* Row r of width 3, 5, 6 or 8 for tokens tok[0 .. nt), pairs from group g0 on added to out: a
 * pair's codes (a zero-padded copy for groups near the end of the payload, whose 16-byte lanes
 * reach past the group), then widths 3, 5, 6 as bytes (pair_dot_bytes), width 8 in int16 with the
 * two groups' sums folded into their 128-bit halves (pair_fold). */
AI void row_generic_from(const cmf_qmat *m, const pair8 *const *tok, int nt, uint64_t r,
                         const vb_tab *t, uint64_t g0, __m256 *out) {
    const uint64_t G = m->groups;
    const unsigned gb = 4 * t->b;
    const uint8_t *row = cq_vbit_row(m, r), *sc = m->scales + 2 * r * G, *end = m->data + m->nbytes;
    uint8_t bounce[2][48];
    for (uint64_t g = g0; g < G; g += 2) {
        const uint8_t *pa = row + gb * g;
        cq_prefetch_weights(pa);
        __m256i ea, oa, eb = _mm256_setzero_si256(), ob = eb;
        group_codes(cq_vbit_group_src(pa, t->b, end, bounce[0]), t, &ea, &oa);
        const bool two = g + 1 < G;
        uint64_t h = ld_u16(sc + 2 * g);
        if (two) {
            group_codes(cq_vbit_group_src(pa + gb, t->b, end, bounce[1]), t, &eb, &ob);
            h = scale_pair(sc + 2 * g);
        }
        __m256 sv = scales2(h);
        if (t->b < 8) {
            pair_step_bytes(tok, nt, g, pair_bytes(ea, eb), pair_bytes(oa, ob), sv, t, out);
            continue;
        }
        for (int k = 0; k < nt; k++) {
            const pair8 *x = tok[k] + g / 2;
            __m256i a = codes_dot(ea, oa, x->xe, x->xo);
            __m256i b = two ? codes_dot(eb, ob, x->xe + 16, x->xo + 16) : _mm256_setzero_si256();
            out[k] = _mm256_fmadd_ps(pair_fold(x, a, b, t),
                                     _mm256_mul_ps(sv, _mm256_load_ps(x->dx)), out[k]);
        }
    }
}

/* The pair of groups at pa, pa + 4B (both inside the payload with their 16-byte lanes): each
 * load's lanes read the same half of both groups (values 0-15 of a | of b, then 16-31), so the
 * packed bytes of the two halves are already group a's 16 codes and group b's, the token's
 * order, with no lane permute. */
AI void pair_bytes_step(const pair8 *const *tok, int nt, uint64_t g, const uint8_t *pa,
                        const unsigned B, __m256i se, __m256i so, __m256i me, __m256i mo,
                        __m256i mask, __m256 sv, const vb_tab *t, __m256 *out) {
    const uint8_t *pb = pa + 4 * B;
    cq_prefetch_weights(pa);
    __m256i v0 = _mm256_loadu2_m128i((const __m128i *)pb, (const __m128i *)pa);
    __m256i v1 = _mm256_loadu2_m128i((const __m128i *)(pb + 2 * B), (const __m128i *)(pa + 2 * B));
    __m256i e0 = _mm256_and_si256(_mm256_mulhi_epu16(_mm256_shuffle_epi8(v0, se), me), mask);
    __m256i o0 = _mm256_and_si256(_mm256_mulhi_epu16(_mm256_shuffle_epi8(v0, so), mo), mask);
    __m256i e1 = _mm256_and_si256(_mm256_mulhi_epu16(_mm256_shuffle_epi8(v1, se), me), mask);
    __m256i o1 = _mm256_and_si256(_mm256_mulhi_epu16(_mm256_shuffle_epi8(v1, so), mo), mask);
    pair_step_bytes(tok, nt, g, _mm256_packus_epi16(e0, e1), _mm256_packus_epi16(o0, o1), sv, t,
                    out);
}

/* Row r of width B = 3, 5 or 6 (a constant, so that the shifts and the table stay in
 * registers) for tokens tok[0 .. nt). The pairs whose loads stay inside the payload take
 * pair_bytes_step without the end checks; the pairs near the payload's end (and a lone last
 * group) take row_generic_from. Same integer sums and float steps, so the same bits. */
AI void row_bytes_multi(const cmf_qmat *m, const pair8 *const *tok, int nt, uint64_t r,
                        const vb_tab *t, const unsigned B, __m256 *out) {
    const uint64_t G = m->groups;
    const unsigned gb = 4 * B;
    const uint8_t *row = cq_vbit_row(m, r), *sc = m->scales + 2 * r * G;
    const uint64_t room = (uint64_t)(m->data + m->nbytes - row);
    /* pair g is safe while its second group's lanes end inside: gb (g + 1) + 3B + 16 <= room */
    const uint64_t lim = room >= 3 * B + 16 ? (room - 3 * B - 16) / gb : 0;
    const __m256i se = t->shuf_e, so = t->shuf_o, me = t->mul_e, mo = t->mul_o, mask = t->mask;
    for (int k = 0; k < nt; k++)
        out[k] = _mm256_setzero_ps();
    uint64_t g = 0;
    for (; g + 4 <= G && g + 3 <= lim; g += 4) { /* two pairs, their four scales at once */
        const __m256 s4 = scales4(sc + 2 * g);
        pair_bytes_step(tok, nt, g, row + gb * g, B, se, so, me, mo, mask, cq_avx2_scales_lo(s4), t,
                        out);
        pair_bytes_step(tok, nt, g + 2, row + gb * (g + 2), B, se, so, me, mo, mask,
                        cq_avx2_scales_hi(s4), t, out);
    }
    if (g + 2 <= G && g + 1 <= lim) {
        pair_bytes_step(tok, nt, g, row + gb * g, B, se, so, me, mo, mask,
                        scales2(scale_pair(sc + 2 * g)), t, out);
        g += 2;
    }
    row_generic_from(m, tok, nt, r, t, g, out);
}

/* Row r of width b != 4 for tokens tok[0 .. nt). */
AI void row_wide_multi(const cmf_qmat *m, const pair8 *const *tok, int nt, uint64_t r,
                       const vb_tab *tabs, unsigned b, __m256 *out) {
    switch (b) {
    case 3:
        row_bytes_multi(m, tok, nt, r, &tabs[3], 3, out);
        break;
    case 5:
        row_bytes_multi(m, tok, nt, r, &tabs[5], 5, out);
        break;
    case 6:
        row_bytes_multi(m, tok, nt, r, &tabs[6], 6, out);
        break;
    default:
        for (int k = 0; k < nt; k++)
            out[k] = _mm256_setzero_ps();
        row_generic_from(m, tok, nt, r, &tabs[b], 0, out);
    }
}

/* Row of width b != 4: the several-token row for one token, so both give the same bits by
 * construction. */
static __m256 row_generic(const cmf_qmat *m, const pair8 *tok, uint64_t r, const vb_tab *tabs,
                          unsigned b) {
    __m256 out;
    row_wide_multi(m, &tok, 1, r, tabs, b, &out);
    return out;
}

AI void row_multi(const cmf_qmat *m, const pair8 *const *tok, int nt, uint64_t r,
                  const vb_tab *tabs, __m256 *out) {
    const unsigned b = cq_vbit_bits(m, r);
    if (b == 4)
        row4_multi(m, tok, nt, r, out);
    else
        row_wide_multi(m, tok, nt, r, tabs, b, out);
}

/* Rows b .. b + n - 1 (n <= 8) for nt tokens, y[j] at token j's row b. */
AI void block_multi_nt(const cmf_qmat *m, const pair8 *const *tok, int nt, float *const *y,
                       uint64_t b, unsigned n, const vb_tab *tabs) {
    __m256 v[VB_MULTI][8], o[VB_MULTI];
    for (unsigned k = 0; k < n; k++) {
        row_multi(m, tok, nt, b + k, tabs, o);
        for (int j = 0; j < nt; j++)
            v[j][k] = o[j];
    }
    for (int j = 0; j < nt; j++)
        cq_rows_store_avx2(v[j], n, y[j]);
}

/* n tokens over rows [r0, r1) as cq_avx2_i8dec_vbit_rows gives each: 8 rows at a time, the
 * tokens in groups of up to VB_MULTI. */
void CQ_VBIT_ROWS_MULTI(const cmf_qmat *m, const pair8 *const *tok, size_t n, float *const *y,
                        uint64_t r0, uint64_t r1) {
    const vb_tab *tabs = vb_tabs();
    for (uint64_t b = r0; b < r1;) {
        const unsigned rows = r1 - b < 8 ? (unsigned)(r1 - b) : 8;
        float *yb[VB_MULTI];
        for (size_t j = 0; j < n; j += VB_MULTI) {
            size_t nt = n - j < VB_MULTI ? n - j : VB_MULTI;
            for (size_t k = 0; k < nt; k++)
                yb[k] = y[j + k] + (b - r0);
            if (nt == 4)
                block_multi_nt(m, tok + j, 4, yb, b, rows, tabs);
            else if (nt == 3)
                block_multi_nt(m, tok + j, 3, yb, b, rows, tabs);
            else if (nt == 2)
                block_multi_nt(m, tok + j, 2, yb, b, rows, tabs);
            else
                block_multi_nt(m, tok + j, 1, yb, b, rows, tabs);
        }
        b += rows;
    }
}
