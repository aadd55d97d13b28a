/* gemm_i8_avx512.c - the AVX-512 VNNI tier of cmf_matmul_qact (integer prefill GEMM).
 *
 * Weights are repacked per panel of 16 rows so that one 64-byte vector holds 4 consecutive
 * codes of each of the 16 rows: vpdpbusd with the 4 matching activation bytes broadcast
 * then advances 16 row sums at once, and every loaded weight vector is reused for up to
 * 12 tokens. Per 32-column block each token keeps an int32 sum per row (started at the
 * offset correction -off * sum(x codes)), converted to f32 and scaled once per block.
 * The panel (16 x cols bytes) stays in L2 while all tokens of the batch pass over it. */
#include <immintrin.h>
#include <string.h>

#include "common/bytes.h"
#include "common/f16.h"
#include "quant/gemm_impl.h"
#include "quant/gemm_q4_codes.h"
#include "quant/gemm_vbit_codes.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/qact_stream.h"
#include "quant/transpose_avx512.h"

#define PR     16             /* rows per panel: one int32 lane each */
#define TMAX   CMF_QACT_GROUP /* tokens per pass: 2 x 12 accumulators + weights fit 32 registers */
#define A64(x) (((x) + 63) & ~(size_t)63)

/* The 32 codes u - L + 127 of group g of a width-b vbit row: the bytes themselves at 8 bits
 * (L = 127), else decoded (gemm_vbit_codes.h). */
static inline __m256i vbit_codes(const uint8_t *row, unsigned b, uint64_t g, const cq_vbit_utab *tb,
                                 const uint8_t *end) {
    if (b == 8) return _mm256_loadu_si256((const __m256i *)(row + 32 * g));
    const __m256i off = _mm256_set1_epi16(127);
    uint8_t bounce[48];
    __m256i lo, hi;
    cq_vbit_group_v16(cq_vbit_group_src(row + 4 * b * g, b, end, bounce), tb, b, &lo, &hi);
    return cq_vbit_packus(_mm256_add_epi16(lo, off), _mm256_add_epi16(hi, off));
}

/* Pack rows [r, r + nr) of a vbit / vbit_ro matrix in pack_panel's layout: codes u - L + 127
 * (offset 127 for every width, so one correction serves the panel), block scales at
 * bs[block][16]; rows past nr and the block past an odd group count: codes 0, scale 0. */
static void pack_vbit(const cmf_qmat *m, const cq_vbit_utab *tabs, uint64_t r, unsigned nr,
                      size_t k64, uint8_t *panel, float *bs) {
    const uint64_t G = m->groups;
    const size_t nb = k64 / 32;
    const uint8_t *end = m->data + m->nbytes, *rowp[PR];
    unsigned bw[PR];
    for (unsigned i = 0; i < PR; i++) {
        uint64_t row = r + (i < nr ? i : 0);
        rowp[i] = cq_vbit_row(m, row);
        bw[i] = cq_vbit_bits(m, row);
        for (size_t g = 0; g < nb; g++)
            bs[g * PR + i] = i < nr && g < G ? cq_vbit_scale(m, row, g) : 0.0f;
    }
    for (size_t c = 0; c < k64 / 64; c++) {
        uint64_t g0 = 2 * c;
        __m512i v[16];
        for (unsigned i = 0; i < PR; i++) {
            __m256i lo = _mm256_setzero_si256(), hi = lo;
            if (i < nr) {
                lo = vbit_codes(rowp[i], bw[i], g0, &tabs[bw[i]], end);
                if (g0 + 1 < G) hi = vbit_codes(rowp[i], bw[i], g0 + 1, &tabs[bw[i]], end);
            }
            v[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
        cq_transpose16_store(v, panel + 16 * c * 64);
    }
}

/* Pack rows [r, r + nr) (rows past nr are zero) straight from the payload: for every 64
 * columns c, the 16 rows' codes are built in registers, transposed, and stored as 16 vectors
 * at panel + (16c + j) * 64, vector j holding columns 64c + 4j .. +3 of every row (block
 * 2c + j/8, step j%8). Scales go to rs[16] (q8_row) or bs[block][16] (q4 family). */
static void pack_panel(const cmf_qmat *m, uint64_t r, unsigned nr, size_t k64, uint8_t *panel,
                       float *bs, float *rs) {
    const uint64_t C = m->cols, G = m->groups;
    if (m->dtype == CMF_DT_Q8_ROW) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        for (unsigned i = 0; i < PR; i++)
            rs[i] = i < nr ? f16_to_f32(ld_u16(m->scales + 2 * (r + i))) : 0.0f;
        for (size_t c = 0; c < k64 / 64; c++) {
            uint64_t c0 = 64 * c;
            __mmask64 k = C - c0 >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (C - c0)) - 1);
            __m512i v[16];
#pragma GCC unroll 16
            for (unsigned i = 0; i < PR; i++) {
                /* rows past nr: a zero mask (the address stays inside the payload) */
                __mmask64 ki = i < nr ? k : 0;
                const uint8_t *src = m->quants + (r + (i < nr ? i : 0)) * C + c0;
                v[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(ki, src),
                                        _mm512_maskz_mov_epi8(ki, flip));
            }
            cq_transpose16_store(v, panel + 16 * c * 64);
        }
        return;
    }
    const size_t nb = k64 / 32;
    for (unsigned i = 0; i < PR; i++) {
        if (i >= nr) {
            for (size_t g = 0; g < nb; g++)
                bs[g * PR + i] = 0;
            continue;
        }
        uint64_t row = r + i;
        float ladder[32];
        if (m->dtype == CMF_DT_Q4TP) cq_avx512_q4tp_ladder(m, row, ladder);
        for (uint64_t g = 0; g < G; g++) {
            float s;
            if (m->dtype == CMF_DT_Q4_TILED)
                s = f16_to_f32(ld_u16(m->quants + (row * G + g) * CQ_Q4T_TILE));
            else if (m->dtype == CMF_DT_Q4TP)
                s = ladder[cq_q4tp_code(m, row, g)];
            else
                s = f16_to_f32(ld_u16(m->scales + 2 * (row * G + g)));
            bs[g * PR + i] = s;
        }
        for (size_t g = G; g < nb; g++)
            bs[g * PR + i] = 0;
    }
    /* row pointers (rows past nr repeat row r and are zeroed by the mask) and tile stride */
    const uint64_t step = m->dtype == CMF_DT_Q4_TILED ? CQ_Q4T_TILE : 16;
    const uint8_t *rowp[PR];
    for (unsigned i = 0; i < PR; i++)
        rowp[i] = cq_q4_nibbles(m, r + (i < nr ? i : 0), 0);
    for (size_t c = 0; c < k64 / 64; c++) {
        uint64_t g0 = 2 * c;
        int pair = g0 + 1 < G;
        __m512i v[16];
#pragma GCC unroll 16
        for (unsigned i = 0; i < PR; i++) {
            const uint8_t *p = rowp[i] + g0 * step;
            __m256i a = cq_unpack_nibbles(p);
            __m256i b = pair ? cq_unpack_nibbles(p + step) : _mm256_setzero_si256();
            v[i] = _mm512_maskz_mov_epi64(i < nr ? 0xFF : 0,
                                          _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
        }
        cq_transpose16_store(v, panel + 16 * c * 64);
    }
}

typedef int32_t u32_unaligned __attribute__((may_alias, aligned(1)));

/* T tokens of token group g over one packed panel. A group's entries are interleaved per
 * block (cmf_qact_index), so every activation operand sits at a constant offset from one
 * pointer and folds into vpdpbusd as an embedded broadcast. */
static inline __attribute__((always_inline)) void
panel_tokens(const uint8_t *panel, const float *bs, const float *rs, int rowscale,
             const cmf_qact *a, const int32_t *corr, size_t g, const int T, float *Y, size_t ldy,
             __mmask16 mask, cq_next_block *pf, size_t per) {
    enum { G = CMF_QACT_GROUP };
    __m512 accf[TMAX];
    __m512i acci[TMAX];
    const size_t nb = a->nb, e0 = g * nb * G;
    const int8_t *xg = a->q + 32 * e0;
    const float *sx = a->scale + e0;
    const int32_t *cx = corr + e0;
    for (int t = 0; t < T; t++)
        accf[t] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++, xg += 32 * G, sx += G, cx += G) {
        for (int t = 0; t < T; t++)
            acci[t] = _mm512_set1_epi32(cx[t]);
        cq_next_block_fetch(pf, per);
        const uint8_t *wb = panel + b * 512;
        for (int k = 0; k < 8; k++) {
            __m512i w = _mm512_load_si512(wb + 64 * k);
            for (int t = 0; t < T; t++)
                acci[t] = _mm512_dpbusd_epi32(
                    acci[t], w, _mm512_set1_epi32(*(const u32_unaligned *)(xg + 32 * t + 4 * k)));
        }
        if (rowscale) {
            for (int t = 0; t < T; t++)
                accf[t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci[t]), _mm512_set1_ps(sx[t]), accf[t]);
        } else {
            __m512 d = _mm512_load_ps(bs + b * PR);
            for (int t = 0; t < T; t++)
                accf[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci[t]),
                                          _mm512_mul_ps(d, _mm512_set1_ps(sx[t])), accf[t]);
        }
    }
    __m512 r = rowscale ? _mm512_loadu_ps(rs) : _mm512_set1_ps(1.0f);
    float *y = Y + g * G * ldy;
    for (int t = 0; t < T; t++)
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, mask, _mm512_mul_ps(accf[t], r));
}

#define DEF_TOKENS(T)                                                                              \
    static void tokens_##T(const uint8_t *p, const float *bs, const float *rs, int rowscale,       \
                           const cmf_qact *a, const int32_t *corr, size_t g, float *Y, size_t ldy, \
                           __mmask16 mask, cq_next_block *pf, size_t per) {                        \
        if (rowscale)                                                                              \
            panel_tokens(p, bs, rs, 1, a, corr, g, T, Y, ldy, mask, pf, per);                      \
        else                                                                                       \
            panel_tokens(p, bs, rs, 0, a, corr, g, T, Y, ldy, mask, pf, per);                      \
    }
DEF_TOKENS(1)
DEF_TOKENS(2)
DEF_TOKENS(3)
DEF_TOKENS(4)
DEF_TOKENS(5)
DEF_TOKENS(6)
DEF_TOKENS(7)
DEF_TOKENS(8)
DEF_TOKENS(9)
DEF_TOKENS(10)
DEF_TOKENS(11)
DEF_TOKENS(12)

typedef void (*tokens_fn)(const uint8_t *, const float *, const float *, int, const cmf_qact *,
                          const int32_t *, size_t, float *, size_t, __mmask16, cq_next_block *,
                          size_t);
static const tokens_fn tokens_by_count[TMAX + 1] = {
    NULL,     tokens_1, tokens_2, tokens_3,  tokens_4,  tokens_5, tokens_6,
    tokens_7, tokens_8, tokens_9, tokens_10, tokens_11, tokens_12};

void cq_i8_panel_bind(cq_i8_panel *p, const cmf_qmat *m, const cmf_qact *a, void *scratch) {
    const size_t k64 = (a->kpad + 63) / 64 * 64, nb64 = k64 / 32;
    p->k64 = k64;
    p->codes = scratch;
    p->bs = (float *)(void *)(p->codes + PR * k64);
    p->rs = (float *)(void *)((uint8_t *)p->bs + A64(nb64 * PR * 4));
    p->rowscale = cq_gemm_kind_of(m) == CQ_GEMM_ROWSCALE;
    p->vbit = cq_gemm_vbit(m);
    p->corr = cq_gemm_corr(m, a);
    p->tabs = p->vbit ? cq_vbit_utabs() : NULL;
}

void cq_i8_panel_pack(cq_i8_panel *p, const cmf_qmat *m, uint64_t r, uint64_t r1) {
    unsigned nr = r1 - r < PR ? (unsigned)(r1 - r) : PR;
    if (m->lanes && r % PR == 0) /* the batched-decode copy: the same codes and scales */
        cq_avx512_lanes_unpack(m, r, p->k64 / 32, p->codes, p->bs, p->rs);
    else if (p->vbit)
        pack_vbit(m, (const cq_vbit_utab *)p->tabs, r, nr, p->k64, p->codes, p->bs);
    else
        pack_panel(m, r, nr, p->k64, p->codes, p->bs, p->rs);
    p->nr = nr;
}

cq_next_block cq_i8_next_codes(const cmf_qmat *m, uint64_t r, uint64_t r1, size_t steps,
                               size_t *per) {
    cq_next_block b = {NULL, 0, 0, 0, 0, 0};
    const unsigned nn = cq_next_panel_rows(r, r1, PR);
    *per = 0;
    if (!nn || m->lanes) return b; /* packs from the batched-decode copy read no payload */
    const uint64_t rn = r + PR;
    const uint8_t *lo, *hi;
    if (m->dtype == CMF_DT_Q8_ROW) {
        lo = m->quants + rn * m->cols;
        hi = lo + (uint64_t)nn * m->cols;
    } else if (cq_gemm_vbit(m)) {
        lo = cq_vbit_row(m, rn);
        hi = rn + nn < m->rows ? cq_vbit_row(m, rn + nn) : m->data + m->nbytes;
    } else {
        lo = cq_q4_nibbles(m, rn, 0);
        hi = lo + (uint64_t)nn * m->groups * (m->dtype == CMF_DT_Q4_TILED ? CQ_Q4T_TILE : 16);
    }
    b.base = lo;
    b.lines_per_row = (size_t)((uint64_t)(hi - lo) + 63) / 64;
    b.left = b.lines_per_row;
    /* all issued within the first three quarters of the steps: the last lines then have a
     * quarter of the panel's products to arrive */
    const size_t usable = steps - steps / 4;
    *per = usable ? (b.left + usable - 1) / usable : b.left;
    return b;
}

void cq_i8_panel_group(const cq_i8_panel *p, const cmf_qact *a, size_t g, float *Y, size_t ldy,
                       cq_next_block *pf, size_t per) {
    size_t cnt = a->n - g * TMAX < TMAX ? a->n - g * TMAX : TMAX;
    tokens_by_count[cnt](p->codes, p->bs, p->rs, p->rowscale, a, p->corr, g, Y, ldy,
                         (__mmask16)((1u << p->nr) - 1), pf, per);
}

void cq_gemm_avx512(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                    uint64_t r1, void *scratch) {
    cq_i8_panel p;
    cq_i8_panel_bind(&p, m, a, scratch);
    const size_t groups = (a->n + TMAX - 1) / TMAX;
    for (uint64_t r = r0; r < r1; r += PR) {
        cq_i8_panel_pack(&p, m, r, r1);
        size_t per;
        cq_next_block pf = cq_i8_next_codes(m, r, r1, groups * a->nb, &per);
        for (size_t g = 0; g < groups; g++)
            cq_i8_panel_group(&p, a, g, Y + (r - r0), ldy, &pf, per);
    }
}

/* One entry, with the scalar tier's codes (round to nearest, ties to even; NaN -> 0). */
static inline __attribute__((always_inline)) __m256i qact_entry(const float *x, size_t len,
                                                                float *amax_out, int32_t *sum) {
    const __m512 lim = _mm512_set1_ps(3.0e38f);
    __mmask16 k0 = (__mmask16)(len >= 16 ? 0xFFFF : (1u << len) - 1),
              k1 = (__mmask16)(len >= 32  ? 0xFFFF
                               : len > 16 ? (1u << (len - 16)) - 1
                                          : 0);
    __m512 v0 = _mm512_maskz_loadu_ps(k0, x), v1 = _mm512_maskz_loadu_ps(k1, x + 16);
    /* max of |v| with NaN lanes dropped (max_ps returns the second operand on NaN) */
    __m512 m0 = _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps());
    __m512 m1 = _mm512_max_ps(_mm512_abs_ps(v1), _mm512_setzero_ps());
    float amax = _mm512_reduce_max_ps(_mm512_min_ps(_mm512_max_ps(m0, m1), lim));
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    __m512 vi = _mm512_set1_ps(inv), hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
    __m512 f0 =
        _mm512_roundscale_ps(_mm512_mul_ps(v0, vi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f1 =
        _mm512_roundscale_ps(_mm512_mul_ps(v1, vi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* NaN -> 0 first, then clamp to [-127, 127] */
    f0 = _mm512_mask_mov_ps(f0, _mm512_cmp_ps_mask(f0, f0, _CMP_UNORD_Q), _mm512_setzero_ps());
    f1 = _mm512_mask_mov_ps(f1, _mm512_cmp_ps_mask(f1, f1, _CMP_UNORD_Q), _mm512_setzero_ps());
    f0 = _mm512_max_ps(_mm512_min_ps(f0, hi), lo);
    f1 = _mm512_max_ps(_mm512_min_ps(f1, hi), lo);
    __m512i i0 = _mm512_cvtps_epi32(f0), i1 = _mm512_cvtps_epi32(f1);
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    *amax_out = amax;
    return _mm256_set_m128i(_mm512_cvtepi32_epi8(i1), _mm512_cvtepi32_epi8(i0));
}

void cq_qact_quantize_avx512(cmf_qact *a, const float *X, size_t ldx, size_t t0, size_t t1) {
    cq_qact_quantize_range(a, X, ldx, t0, t1, qact_entry);
}
