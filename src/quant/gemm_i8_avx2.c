/* gemm_i8_avx2.c - the AVX2 tier of cmf_matmul_qact (integer prefill GEMM) and its activation
 * quantizer.
 *
 * Weights are repacked per panel of 8 rows so that one 256-bit vector holds 4 consecutive
 * codes of each of the 8 rows (one int32 lane per row): vpmaddubsw with the token's 4 matching
 * activation bytes broadcast advances the 8 rows at once, and every loaded weight vector is
 * reused for up to 6 tokens (2 x 6 accumulators + operands fit the 16 ymm registers).
 *  - q4 family (codes 0..15): a vpmaddubsw pair is at most 2 * 15 * 127 = 3810, so the 8
 *    steps of a 32-column block add up in int16 (<= 30480) before one vpmaddwd by ones
 *    widens them to int32; the offset correction -8 * sum(x) is added there.
 *  - q8_row: the code q XOR 0x80 would saturate vpmaddubsw (255 * 127 * 2), so the panel
 *    holds |w| (as u8, <= 128) and w itself: vpsignb gives x * sign(w) and vpmaddubsw
 *    |w| * (x * sign(w)) = w * x, a pair at most 2 * 128 * 127 = 32512; each step is widened
 *    by vpmaddwd at once. The signed product needs no offset correction.
 *  - vbit / vbit_ro: v = u - L lies in [-127, 128], so in general the q8_row form (|v| <= 128
 *    as u8, the sign from v saturated to int8) with block scales. A panel whose rows are all
 *    3 or 4 bits takes the q4 form instead, codes v + 8 in [1, 16] with the -8 * sum(x)
 *    correction (a block's int16 sum stays within 8 * 2 * 16 * 127 = 32512), about half the
 *    work per step; one of 5-bit rows at most codes v + 16 in [1, 32] with the -16 * sum(x)
 *    correction, widened to int32 after each 4 steps (4 * 2 * 32 * 127 = 32512), 2.25 vector
 *    operations per step and token where the sign form takes 4. So that mixed widths do not put
 *    nearly every panel in a wider form (with a quarter of 5-bit rows, 9 in 10 panels of 8
 *    consecutive rows hold one), the rows of each window of VBIT_WINDOW go into panels by
 *    width class (3-4, 5, 6-8 bits), narrow first, and each panel's outputs are scattered back
 *    to its rows; a row's sums are the same integers either way.
 * Per block the int32 sums are converted to f32 and scaled as in the scalar tier. */
#include <immintrin.h>
#include <string.h>

#include "common/bytes.h"
#include "common/cpu.h"
#include "common/f16.h"
#include "quant/gemm_i8_avx2_pass.h"
#include "quant/gemm_impl.h"
#include "quant/gemm_q4_codes.h"
#include "quant/gemm_vbit_codes.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/qact_stream.h"

/* The GEMM's form of a vbit panel whose rows take copy form f (cq_vbit_form: the widest row's) */
static int vbit_panel_form(unsigned f) {
    return f == CQ_VBIT_NARROW ? FORM_U : f == CQ_VBIT_FIVE ? FORM_U5 : FORM_SIGN_BLOCK;
}
_Static_assert(CMF_QACT_GROUP == 2 * TMAX, "a token group is two passes");

/* 8 rows of 8 dwords -> 8 vectors, vector j holding dword j of every row (lane i = row i). */
static inline void transpose8_store(const __m256i v[8], uint8_t *dst) {
    __m256i a0 = _mm256_unpacklo_epi32(v[0], v[1]), a1 = _mm256_unpackhi_epi32(v[0], v[1]);
    __m256i a2 = _mm256_unpacklo_epi32(v[2], v[3]), a3 = _mm256_unpackhi_epi32(v[2], v[3]);
    __m256i a4 = _mm256_unpacklo_epi32(v[4], v[5]), a5 = _mm256_unpackhi_epi32(v[4], v[5]);
    __m256i a6 = _mm256_unpacklo_epi32(v[6], v[7]), a7 = _mm256_unpackhi_epi32(v[6], v[7]);
    __m256i b0 = _mm256_unpacklo_epi64(a0, a2), b1 = _mm256_unpackhi_epi64(a0, a2);
    __m256i b2 = _mm256_unpacklo_epi64(a1, a3), b3 = _mm256_unpackhi_epi64(a1, a3);
    __m256i b4 = _mm256_unpacklo_epi64(a4, a6), b5 = _mm256_unpackhi_epi64(a4, a6);
    __m256i b6 = _mm256_unpacklo_epi64(a5, a7), b7 = _mm256_unpackhi_epi64(a5, a7);
    /* b0: rows 0-3 dword 0 | dword 4, b4: rows 4-7 likewise; b1/b5 dwords 1|5, b2/b6 2|6,
     * b3/b7 3|7 */
    __m256i *d = (__m256i *)(void *)dst;
    _mm256_store_si256(d + 0, _mm256_permute2x128_si256(b0, b4, 0x20));
    _mm256_store_si256(d + 1, _mm256_permute2x128_si256(b1, b5, 0x20));
    _mm256_store_si256(d + 2, _mm256_permute2x128_si256(b2, b6, 0x20));
    _mm256_store_si256(d + 3, _mm256_permute2x128_si256(b3, b7, 0x20));
    _mm256_store_si256(d + 4, _mm256_permute2x128_si256(b0, b4, 0x31));
    _mm256_store_si256(d + 5, _mm256_permute2x128_si256(b1, b5, 0x31));
    _mm256_store_si256(d + 6, _mm256_permute2x128_si256(b2, b6, 0x31));
    _mm256_store_si256(d + 7, _mm256_permute2x128_si256(b3, b7, 0x31));
}

/* Pack rows [r, r + nr) of a q4-family matrix: block b's 8 vectors at panel + (8b + k) * 32
 * (vector k: columns 32b + 4k .. +3 of every row), block scales at bs[8b + i]. Rows past nr
 * repeat row r with scale 0 (their results are never stored). */
static void pack_q4(const cmf_qmat *m, uint64_t r, unsigned nr, size_t nb, uint8_t *panel,
                    float *bs, unsigned nn) {
    const uint64_t G = m->groups, step = m->dtype == CMF_DT_Q4_TILED ? CQ_Q4T_TILE : 16;
    const uint8_t *rowp[PR], *next = nn ? cq_q4_nibbles(m, r + PR, 0) : NULL;
    for (unsigned i = 0; i < PR; i++) {
        uint64_t row = r + (i < nr ? i : 0);
        rowp[i] = cq_q4_nibbles(m, row, 0);
        float ladder[32];
        if (m->dtype == CMF_DT_Q4TP && i < nr) cq_avx2_q4tp_ladder(m, row, ladder);
        for (size_t g = 0; g < nb; g++) {
            float s;
            if (i >= nr || g >= G)
                s = 0;
            else if (m->dtype == CMF_DT_Q4_TILED)
                s = _cvtsh_ss(ld_u16(m->quants + (row * G + g) * CQ_Q4T_TILE)); /* F16C */
            else if (m->dtype == CMF_DT_Q4TP)
                s = ladder[cq_q4tp_code(m, row, g)];
            else
                s = _cvtsh_ss(ld_u16(m->scales + 2 * (row * G + g)));
            bs[g * PR + i] = s;
        }
    }
    for (size_t g = 0; g < nb; g++) {
        if ((g * step) % 64 < step) cq_prefetch_panel_rows(next, nn, G * step, g * step);
        __m256i v[PR];
        for (unsigned i = 0; i < PR; i++)
            v[i] = g < G ? cq_unpack_nibbles(rowp[i] + g * step) : _mm256_setzero_si256();
        transpose8_store(v, panel + g * 8 * 32);
    }
}

/* Pack rows [r, r + nr) of a q8_row matrix: block b's |w| vectors at panel + (16b + k) * 32
 * and w's at panel + (16b + 8 + k) * 32 (columns past cols and rows past nr: 0), row scales
 * at rs[i]. */
static void pack_q8(const cmf_qmat *m, uint64_t r, unsigned nr, size_t nb, uint8_t *panel,
                    float *rs, unsigned nn) {
    const uint64_t C = m->cols;
    const uint8_t *next = nn ? m->quants + (r + PR) * C : NULL;
    for (unsigned i = 0; i < PR; i++)
        rs[i] = i < nr ? f16_to_f32(ld_u16(m->scales + 2 * (r + i))) : 0.0f;
    for (size_t b = 0; b < nb; b++) {
        uint64_t c0 = 32 * b, len = C - c0 < 32 ? C - c0 : 32;
        if (c0 % 64 == 0) cq_prefetch_panel_rows(next, nn, C, c0);
        __m256i v[PR];
        for (unsigned i = 0; i < PR; i++) {
            if (i >= nr) {
                v[i] = _mm256_setzero_si256();
            } else if (len == 32) {
                v[i] = _mm256_loadu_si256((const __m256i *)(m->quants + (r + i) * C + c0));
            } else {
                uint8_t tmp[32] = {0};
                memcpy(tmp, m->quants + (r + i) * C + c0, len);
                v[i] = _mm256_loadu_si256((const __m256i *)tmp);
            }
        }
        uint8_t *p = panel + b * 16 * 32;
        transpose8_store(v, p + 8 * 32);
        for (unsigned k = 0; k < 8; k++)
            _mm256_store_si256(
                (__m256i *)(void *)(p + 32 * k),
                _mm256_abs_epi8(_mm256_load_si256((const __m256i *)(p + 32 * (8 + k)))));
    }
}

/* Pack rows rows[0 .. nr) of a vbit / vbit_ro matrix, returning the form: FORM_U (all rows of
 * 3 or 4 bits) or FORM_U5 (5 bits at most) in pack_q4's layout, else FORM_SIGN_BLOCK in
 * pack_q8's; block scales at bs[8b + i] (rows past nr: scale 0 and codes 0). The rows
 * next[0 .. nn) are prefetched. */
static int pack_vbit(const cmf_qmat *m, const cq_vbit_utab *tabs, const uint32_t *rows, unsigned nr,
                     size_t nb, uint8_t *panel, float *bs, const uint32_t *next, unsigned nn) {
    const uint64_t G = m->groups;
    const uint8_t *end = m->data + m->nbytes, *rowp[PR];
    unsigned bw[PR];
    unsigned widest = 0;
    for (unsigned i = 0; i < PR; i++) {
        uint64_t row = rows[i < nr ? i : 0];
        rowp[i] = cq_vbit_row(m, row);
        bw[i] = cq_vbit_bits(m, row);
        widest = bw[i] > widest ? bw[i] : widest;
        for (size_t g = 0; g < nb; g++)
            bs[g * PR + i] = i < nr && g < G ? cq_vbit_scale(m, row, g) : 0.0f;
    }
    const int form = vbit_panel_form(cq_vbit_form(widest));
    const __m256i offset = _mm256_set1_epi16(form == FORM_U ? 8 : 16);
    for (size_t g = 0; g < nb; g++) {
        for (unsigned i = 0; i < nn; i++)
            cq_vbit_prefetch_rows(m, next[i], 1, g);
        __m256i va[PR], vs[PR];
        for (unsigned i = 0; i < PR; i++) {
            va[i] = vs[i] = _mm256_setzero_si256();
            if (i >= nr || g >= G) continue;
            uint8_t bounce[48];
            const unsigned b = bw[i];
            __m256i lo, hi;
            cq_vbit_group_v16(cq_vbit_group_src(rowp[i] + 4 * b * g, b, end, bounce), &tabs[b], b,
                              &lo, &hi);
            if (form != FORM_SIGN_BLOCK) {
                va[i] = cq_vbit_packus(_mm256_add_epi16(lo, offset), _mm256_add_epi16(hi, offset));
            } else {
                va[i] = cq_vbit_packus(_mm256_abs_epi16(lo), _mm256_abs_epi16(hi));
                vs[i] = cq_vbit_packs(lo, hi); /* 128 -> 127: the sign survives */
            }
        }
        if (form != FORM_SIGN_BLOCK) {
            transpose8_store(va, panel + g * 8 * 32);
        } else {
            transpose8_store(va, panel + g * 16 * 32);
            transpose8_store(vs, panel + g * 16 * 32 + 8 * 32);
        }
    }
    return form;
}

static const cq_gemm_avx2_tokens_fn tokens_avx2[TMAX + 1] = CQ_GEMM_AVX2_TOKENS;

/* Every token of a over one packed panel (Y: the panel's first row, or with idx its rows), by
 * the AVX-VNNI passes where the CPU has them. */
static void panel_all_tokens(const uint8_t *panel, const float *bs, const float *rs, int form,
                             const cmf_qact *a, float *Y, size_t ldy, unsigned nr,
                             const uint32_t *idx) {
    const cq_gemm_avx2_tokens_fn *tokens_by_count =
        cq_cpu_avxvnni() ? cq_gemm_avxvnni_tokens : tokens_avx2;
    for (size_t t = 0; t < a->n; t += TMAX) {
        size_t cnt = a->n - t < TMAX ? a->n - t : TMAX;
        /* the unsigned forms' offsets, 8 and 16, from the -8 * sum(x) of a->c8 */
        tokens_by_count[cnt](panel, bs, rs, form, a, a->c8, t / CMF_QACT_GROUP, t % CMF_QACT_GROUP,
                             Y, ldy, nr, idx);
    }
}

/* vbit rows [r0, r1): per window of VBIT_WINDOW rows, the narrow rows (3-4 bits) in panels of
 * their own, then the 5-bit ones, then the rest. */
#define VBIT_WINDOW 256
static void vbit_rows(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                      uint64_t r1, uint8_t *panel, float *bs) {
    const cq_vbit_utab *tabs = cq_vbit_utabs();
    uint32_t rows[VBIT_WINDOW], idx[VBIT_WINDOW];
    for (uint64_t w = r0; w < r1; w += VBIT_WINDOW) {
        const uint64_t w1 = r1 - w < VBIT_WINDOW ? r1 : w + VBIT_WINDOW;
        unsigned n = 0;
        for (unsigned f = CQ_VBIT_NARROW; f <= CQ_VBIT_WIDE; f++)
            for (uint64_t r = w; r < w1; r++)
                if (cq_vbit_form(cq_vbit_bits(m, r)) == f) {
                    rows[n] = (uint32_t)r;
                    idx[n++] = (uint32_t)(r - r0);
                }
        for (unsigned i = 0; i < n; i += PR) {
            unsigned nr = n - i < PR ? n - i : PR, nn = n - i - nr < PR ? n - i - nr : PR;
            int form = pack_vbit(m, tabs, rows + i, nr, a->nb, panel, bs, rows + i + nr, nn);
            panel_all_tokens(panel, bs, bs, form, a, Y, ldy, nr, idx + i);
        }
    }
}

/* vbit rows [r0, r1) (whole windows of its batched-decode copy, lanes_vbit.c) from the copy:
 * its panels hold rows already sorted by width within each window, each form in panels of its
 * own but where a pair of panels straddles two, as vbit_rows sorts them. */
static void vbit_copy_rows(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                           uint64_t r1, uint8_t *panel, float *bs) {
    const uint8_t *slot_row = cq_lanes_vbit_slot_rows(m);
    for (uint64_t q = r0 / 16; q * 16 < r1; q++) {
        const uint64_t w0 = q * 16 / CQ_LANES_VBIT_WIN * CQ_LANES_VBIT_WIN;
        for (unsigned h = 0; h < 2; h++) {
            uint32_t idx[PR];
            unsigned nr = 0;
            for (unsigned i = 0; i < PR && slot_row[16 * q + 8 * h + i] != 0xFF; i++)
                idx[nr++] = (uint32_t)(w0 + slot_row[16 * q + 8 * h + i] - r0);
            if (!nr) continue;
            const unsigned f = cq_avx2_lanes_vbit_unpack(m, q, h, a->nb, panel, bs);
            panel_all_tokens(panel, bs, bs, vbit_panel_form(f), a, Y, ldy, nr, idx);
        }
    }
}

void cq_gemm_avx2(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                  uint64_t r1, void *scratch) {
    const size_t nb = a->nb, k64 = (a->kpad + 63) / 64 * 64;
    uint8_t *panel = scratch;
    float *bs = (float *)(void *)(panel + 16 * k64), *rs = bs;
    const int rowscale = cq_gemm_kind_of(m) == CQ_GEMM_ROWSCALE, vbit = cq_gemm_vbit(m);
    if (vbit) { /* from the copy when the range is whole windows of it, else the file */
        const uint64_t W = CQ_LANES_VBIT_WIN;
        if (m->lanes && r0 % W == 0 && (r1 % W == 0 || r1 == m->rows))
            vbit_copy_rows(m, a, Y, ldy, r0, r1, panel, bs);
        else
            vbit_rows(m, a, Y, ldy, r0, r1, panel, bs);
        return;
    }
    for (uint64_t r = r0; r < r1; r += PR) {
        unsigned nr = r1 - r < PR ? (unsigned)(r1 - r) : PR, nn = cq_next_panel_rows(r, r1, PR);
        int form = FORM_U;
        if (m->lanes && r % PR == 0) { /* the batched-decode copy: the same codes and scales */
            cq_avx2_lanes_unpack(m, r, nb, panel, bs);
            form = rowscale ? FORM_SIGN_ROW : FORM_U;
        } else if (rowscale) {
            pack_q8(m, r, nr, nb, panel, rs, nn);
            form = FORM_SIGN_ROW;
        } else {
            pack_q4(m, r, nr, nb, panel, bs, nn);
        }
        panel_all_tokens(panel, bs, rs, form, a, Y + (r - r0), ldy, nr, NULL);
    }
}

/* One entry, with the scalar tier's codes (round to nearest, ties to even; NaN -> 0). */
static inline __attribute__((always_inline)) __m256i qact_entry(const float *x, size_t len,
                                                                float *amax_out, int32_t *sum) {
    const __m256 lim = _mm256_set1_ps(3.0e38f), hi = _mm256_set1_ps(127.0f),
                 lo = _mm256_set1_ps(-127.0f),
                 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 v[4];
    if (len == 32) {
        for (int j = 0; j < 4; j++)
            v[j] = _mm256_loadu_ps(x + 8 * j);
    } else {
        float tmp[32] = {0};
        memcpy(tmp, x, len * sizeof *tmp);
        for (int j = 0; j < 4; j++)
            v[j] = _mm256_loadu_ps(tmp + 8 * j);
    }
    /* max of |v| with NaN lanes dropped (max_ps returns the second operand on NaN) */
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++)
        m = _mm256_max_ps(_mm256_and_ps(v[j], absm), m);
    m = _mm256_min_ps(m, lim);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float amax = _mm_cvtss_f32(h);
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    __m256 vi = _mm256_set1_ps(inv);
    __m256i iv[4];
    for (int j = 0; j < 4; j++) {
        __m256 f =
            _mm256_round_ps(_mm256_mul_ps(v[j], vi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q)); /* NaN -> 0 */
        iv[j] = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(f, hi), lo));
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    *sum = _mm_cvtsi128_si32(s4);
    *amax_out = amax;
    /* packs work per 128-bit lane: dwords come out in order 0-3 8-11 4-7 12-15 ...; one dword
     * permute restores element order */
    __m256i p16a = _mm256_packs_epi32(iv[0], iv[1]), p16b = _mm256_packs_epi32(iv[2], iv[3]);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void cq_qact_quantize_avx2(cmf_qact *a, const float *X, size_t ldx, size_t t0, size_t t1) {
    cq_qact_quantize_range(a, X, ldx, t0, t1, qact_entry);
}
