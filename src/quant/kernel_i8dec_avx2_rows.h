/* kernel_i8dec_avx2_rows.h - the AVX2 tier's one-token int8 rows of the 4-bit class (q4_tiled,
 * q4_block, q4tp) on the token kernel_i8dec_avx2.c prepares, built twice: with vpmaddubsw
 * (kernel_i8dec_avx2.c) and with AVX-VNNI's vpdpbusd (kernel_i8dec_avxvnni.c, -mavxvnni),
 * which the tier runs where the CPU has it (cq_cpu_avxvnni). Both forms make the same exact
 * int32 sums per 4 columns, so they give the same bits. Internal to src/quant. */
#ifndef CORTIQ_QUANT_KERNEL_I8DEC_AVX2_ROWS_H
#define CORTIQ_QUANT_KERNEL_I8DEC_AVX2_ROWS_H

#include <immintrin.h>

#include "quant/hsum_avx2.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_i8dec_avx2.h"
#include "quant/kernel_impl.h"

/* The rows of each dtype (index 0 q4_tiled, 1 q4_block, 2 q4tp, 3 vbit and vbit_ro:
 * kernel_i8dec_vbit_avx2_rows.h) against one prepared token, and against n <=
 * CMF_TOK8_MULTI_MAX of them (each weight step unpacked once for several). */
typedef struct {
    void (*rows[4])(const cmf_qmat *m, const pair8 *tok, float *y, uint64_t r0, uint64_t r1);
    void (*multi[4])(const cmf_qmat *m, const pair8 *const *tok, size_t n, float *const *y,
                     uint64_t r0, uint64_t r1);
} cq_i8dec_avx2_rows;

/* The AVX-VNNI build's rows (kernel_i8dec_avxvnni.c), for CPUs with it (cq_cpu_avxvnni). */
extern const cq_i8dec_avx2_rows cq_i8dec_avxvnni;

#define AI static inline __attribute__((always_inline))

/* Splits 64 nibbles into lo = low nibbles (even elements) and hi = high ones. */
AI void nibbles(__m256i v, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(15);
    *lo = _mm256_and_si256(v, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

/* The pair's integer sums against the token, minus the offset, as floats, from its nibbles
 * split (several tokens split them once). */
AI __m256 pair_dot_split(const pair8 *t, __m256i lo, __m256i hi) {
    const __m256i xe = _mm256_load_si256((const __m256i *)(const void *)t->xe),
                  xo = _mm256_load_si256((const __m256i *)(const void *)t->xo);
#ifdef __AVXVNNI__ /* two vpdpbusd: int32 sums straight away */
    __m256i s = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, xe);
    s = _mm256_dpbusd_avx_epi32(s, hi, xo);
#else
    __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
    s = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
#endif
    s = _mm256_sub_epi32(s, _mm256_load_si256((const __m256i *)(const void *)t->corr));
    return _mm256_cvtepi32_ps(s);
}

AI __m256 pair_dot(const pair8 *t, __m256i v) {
    __m256i lo, hi;
    nibbles(v, &lo, &hi);
    return pair_dot_split(t, lo, hi);
}

/* Four f16 scales (as one integer) to [s0 x4 | s1 x4] and [s2 x4 | s3 x4]. */
AI void scales4(uint64_t h, __m256 *sa, __m256 *sb) {
    const __m256 s = cq_avx2_scales_f32(h);
    *sa = cq_avx2_scales_lo(s);
    *sb = cq_avx2_scales_hi(s);
}

/* The four tile heads of a q4_tiled quad (bytes 0, 18, 36, 54) as scales4 gives them. Two
 * 32-byte loads from bytes 0 and 36 each hold a pair's heads at byte 0 of the low lane and byte
 * 2 of the high one; one shuffle repeats each across its lane. Built from four 16-bit loads and
 * shifts, the scales went through a general register and the kernel took twice the time. */
AI void tiled_scales4(const uint8_t *t, __m256 *sa, __m256 *sb) {
    const __m256i rep = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3,
                                         2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    __m256i a = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)t), rep);
    __m256i b = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(t + 36)), rep);
    *sa = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(a, 0x08)));
    *sb = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(b, 0x08)));
}

/* q4tp: the ladder's scales of the next two codes in cw, in their lanes. lad is the row's
 * column of an 8-row ladder block (cq_avx2_q4tp_ladders8): rung c at lad[8 * c]. Spreading
 * the 8 codes of a word with vector shifts and picking the rungs with vpermps from the row's
 * ladder in registers ran slower (35.5 against 32.8 us for 1536 x 576): the vector pipes are
 * the busier ones. */
AI __m256 tp_scales2(const float *lad, uint64_t *cw) {
    __m256 s = _mm256_set_m128(_mm_broadcast_ss(lad + 8 * ((*cw >> 5) & 31)),
                               _mm_broadcast_ss(lad + 8 * (*cw & 31)));
    *cw >>= 10;
    return s;
}

/* Groups g .. g + 3 of row r (a quad: pairs A and B): the nibble vectors and the scales in
 * their lanes. One prefetch per 64 bytes of the stream (q4_tiled: 72, two). */
AI void quad_load(const cmf_qmat *m, const cmf_dtype dt, uint64_t r, uint64_t g, const float *lad,
                  uint64_t *cw, __m256i *va, __m256i *vb, __m256 *sa, __m256 *sb) {
    const uint64_t G = m->groups;
    if (dt == CMF_DT_Q4_TILED) {
        const uint8_t *t = m->quants + (r * G + g) * CQ_Q4T_TILE;
        cq_prefetch_weights(t);
        cq_prefetch_weights(t + 64);
        *va = _mm256_loadu2_m128i((const __m128i *)(t + 20), (const __m128i *)(t + 2));
        *vb = _mm256_loadu2_m128i((const __m128i *)(t + 56), (const __m128i *)(t + 38));
        tiled_scales4(t, sa, sb);
        return;
    }
    const uint8_t *q = m->quants + (r * G + g) * 16;
    cq_prefetch_weights(q);
    *va = _mm256_loadu_si256((const __m256i *)q);
    *vb = _mm256_loadu_si256((const __m256i *)(q + 32));
    if (dt == CMF_DT_Q4TP) {
        if ((g & 7) == 0) *cw = cq_q4tp_codes8(m, r, g);
        *sa = tp_scales2(lad, cw);
        *sb = tp_scales2(lad, cw);
    } else {
        scales4(cq_avx2_scale_bits(m->scales + 2 * (r * G + g), 8), sa, sb);
    }
}

/* The last 1-3 groups of row r from group g (the token's pairs padded with zeros): one pair
 * at a time, a lone last group's nibbles loaded into the low lane only. */
AI __m256 tail(const cmf_qmat *m, const cmf_dtype dt, const pair8 *tok, uint64_t r, uint64_t g,
               const float *lad, uint64_t *cw, __m256 acc) {
    const uint64_t G = m->groups;
    for (; g < G; g += 2) {
        const bool two = g + 1 < G;
        __m256i v;
        __m256 sv;
        if (dt == CMF_DT_Q4_TILED) {
            const uint8_t *t = m->quants + (r * G + g) * CQ_Q4T_TILE;
            __m128i l = _mm_loadu_si128((const __m128i *)(t + 2));
            v = two ? _mm256_inserti128_si256(_mm256_castsi128_si256(l),
                                              _mm_loadu_si128((const __m128i *)(t + 20)), 1)
                    : _mm256_castsi128_si256(l);
            __m256 s1;
            scales4((uint64_t)ld_u16(t) | (two ? (uint64_t)ld_u16(t + 18) << 16 : 0), &sv, &s1);
        } else {
            const uint8_t *q = m->quants + (r * G + g) * 16;
            v = two ? _mm256_loadu_si256((const __m256i *)q)
                    : _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q));
            if (dt == CMF_DT_Q4TP) {
                if ((g & 7) == 0) *cw = cq_q4tp_codes8(m, r, g);
                sv = tp_scales2(lad, cw); /* a lone group's second lane: zeros in the token */
            } else {
                const uint8_t *h = m->scales + 2 * (r * G + g);
                __m256 s1;
                scales4(two ? ld_u32(h) : ld_u16(h), &sv, &s1);
            }
        }
        if (!two) v = _mm256_zextsi128_si256(_mm256_castsi256_si128(v));
        const pair8 *t = tok + g / 2;
        acc = _mm256_fmadd_ps(pair_dot(t, v), _mm256_mul_ps(sv, _mm256_load_ps(t->dx)), acc);
    }
    return acc;
}

/* Row r's unreduced sum, quad by quad, in one accumulator: a quad's two FMAs (8 cycles of
 * latency) take less than its other work, and the multi-token kernel, which must give the same
 * bits, keeps one register per token instead of two (with two it spilled at 4 tokens).
 * Stepping 2 or 4 rows together (shared token loads, one accumulator each) ran 0-14 % slower in
 * cache at 896 columns. */
AI __m256 row_sum(const cmf_qmat *m, const cmf_dtype dt, const pair8 *tok, uint64_t r,
                  const float *lad) {
    const uint64_t G = m->groups, Q = G / 4;
    __m256 acc = _mm256_setzero_ps();
    uint64_t cw = 0;
    for (uint64_t q = 0; q < Q; q++) {
        const pair8 *t = tok + 2 * q;
        __m256i va, vb;
        __m256 sa, sb;
        quad_load(m, dt, r, 4 * q, lad, &cw, &va, &vb, &sa, &sb);
        acc = _mm256_fmadd_ps(pair_dot(&t[0], va), _mm256_mul_ps(sa, _mm256_load_ps(t[0].dx)), acc);
        acc = _mm256_fmadd_ps(pair_dot(&t[1], vb), _mm256_mul_ps(sb, _mm256_load_ps(t[1].dx)), acc);
    }
    return 4 * Q < G ? tail(m, dt, tok, r, 4 * Q, lad, &cw, acc) : acc;
}

/* Rows [r0, r1) of dtype dt, reduced 8 at a time (q4tp: the 8 rows' ladders first); the rest
 * one by one (q4tp: their ladders in one block). */
AI void rows_dt(const cmf_qmat *m, const cmf_dtype dt, const pair8 *tok, float *y, uint64_t r0,
                uint64_t r1) {
    float lad[32][8];
    __m256 v[8];
    uint64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        if (dt == CMF_DT_Q4TP) cq_avx2_q4tp_ladders8(m, r, 8, lad);
        for (int k = 0; k < 8; k++)
            v[k] = row_sum(m, dt, tok, r + (uint64_t)k, lad[0] + k);
        _mm256_storeu_ps(y + (r - r0), cq_hsum8x8_avx2(v));
    }
    for (int k = 1; k < 8; k++)
        v[k] = _mm256_setzero_ps();
    if (dt == CMF_DT_Q4TP && r < r1) cq_avx2_q4tp_ladders8(m, r, (unsigned)(r1 - r), lad);
    for (const uint64_t rb = r; r < r1; r++) {
        v[0] = row_sum(m, dt, tok, r, lad[0] + (r - rb));
        y[r - r0] = _mm256_cvtss_f32(cq_hsum8x8_avx2(v));
    }
}

/* ---- several prepared tokens over the same rows (cmf_matvec_tok8_multi) ----
 * Each quad's weights are loaded, their scales spread and their nibbles split once for up to
 * MULTI tokens; each token then takes row_sum's steps in row_sum's order, so every token gets
 * the bits it gets alone. MULTI 8: 8 accumulators and the quad's 4 nibble and 2 scale vectors
 * hold 14 of the 16 ymm; one pass of 8 took 0.90-0.93 of two passes of 4 (bench_tok8_multi). */
#define MULTI 8

/* Row r's unreduced sums for tokens tok[0 .. nt), nt <= MULTI a constant where inlined. */
AI void row_sum_multi(const cmf_qmat *m, const cmf_dtype dt, const pair8 *const *tok, int nt,
                      uint64_t r, const float *lad, __m256 *acc) {
    const uint64_t G = m->groups, Q = G / 4;
    for (int k = 0; k < nt; k++)
        acc[k] = _mm256_setzero_ps();
    uint64_t cw = 0;
    for (uint64_t q = 0; q < Q; q++) {
        __m256i va, vb, la, ha, lb, hb;
        __m256 sa, sb;
        quad_load(m, dt, r, 4 * q, lad, &cw, &va, &vb, &sa, &sb);
        nibbles(va, &la, &ha);
        nibbles(vb, &lb, &hb);
        for (int k = 0; k < nt; k++) {
            const pair8 *t = tok[k] + 2 * q;
            acc[k] = _mm256_fmadd_ps(pair_dot_split(&t[0], la, ha),
                                     _mm256_mul_ps(sa, _mm256_load_ps(t[0].dx)), acc[k]);
            acc[k] = _mm256_fmadd_ps(pair_dot_split(&t[1], lb, hb),
                                     _mm256_mul_ps(sb, _mm256_load_ps(t[1].dx)), acc[k]);
        }
    }
    if (4 * Q < G)
        for (int k = 0; k < nt; k++) {
            uint64_t cwk = cw; /* q4tp: each token's tail reads the same codes */
            acc[k] = tail(m, dt, tok[k], r, 4 * Q, lad, &cwk, acc[k]);
        }
}

/* Rows b .. b + n - 1 (n <= 8) for nt tokens, y[j] at token j's row b; lad holds the rows'
 * q4tp ladders (cq_avx2_q4tp_ladders8). */
AI void block_multi_nt(const cmf_qmat *m, const cmf_dtype dt, const pair8 *const *tok, int nt,
                       float *const *y, uint64_t b, unsigned n, const float (*lad)[8]) {
    __m256 v[MULTI][8], o[MULTI];
    for (unsigned k = 0; k < n; k++) {
        row_sum_multi(m, dt, tok, nt, b + k, lad[0] + k, o);
        for (int j = 0; j < nt; j++)
            v[j][k] = o[j];
    }
    for (int j = 0; j < nt; j++)
        cq_rows_store_avx2(v[j], n, y[j]);
}

/* One function per dtype and token count: with all eight counts inlined into one function the
 * 8-token loop ran up to 9 % slower (code placement), and each count run as its own pass
 * keeps 5-7 tokens from taking two passes. */
typedef void (*block_fn)(const cmf_qmat *, const pair8 *const *, float *const *, uint64_t, unsigned,
                         const float (*)[8]);
#define DEF_BLOCK(NAME, DT, NT)                                                                    \
    static __attribute__((noinline)) void NAME##_##NT(const cmf_qmat *m, const pair8 *const *tok,  \
                                                      float *const *y, uint64_t b, unsigned n,     \
                                                      const float(*lad)[8]) {                      \
        block_multi_nt(m, DT, tok, NT, y, b, n, lad);                                              \
    }
#define DEF_BLOCKS(NAME, DT)                                                                       \
    DEF_BLOCK(NAME, DT, 1)                                                                         \
    DEF_BLOCK(NAME, DT, 2)                                                                         \
    DEF_BLOCK(NAME, DT, 3)                                                                         \
    DEF_BLOCK(NAME, DT, 4)                                                                         \
    DEF_BLOCK(NAME, DT, 5)                                                                         \
    DEF_BLOCK(NAME, DT, 6)                                                                         \
    DEF_BLOCK(NAME, DT, 7)                                                                         \
    DEF_BLOCK(NAME, DT, 8)                                                                         \
    static const block_fn NAME[MULTI + 1] = {NULL,     NAME##_1, NAME##_2, NAME##_3, NAME##_4,     \
                                             NAME##_5, NAME##_6, NAME##_7, NAME##_8};
DEF_BLOCKS(blocks_q4_tiled, CMF_DT_Q4_TILED)
DEF_BLOCKS(blocks_q4_block, CMF_DT_Q4_BLOCK)
DEF_BLOCKS(blocks_q4tp, CMF_DT_Q4TP)

/* n tokens over rows [r0, r1): 8 rows at a time as rows_dt takes them (their ladders made
 * once), the tokens in groups of up to MULTI. */
AI void rows_dt_multi(const cmf_qmat *m, const cmf_dtype dt, const block_fn *blocks,
                      const pair8 *const *tok, size_t n, float *const *y, uint64_t r0,
                      uint64_t r1) {
    float lad[32][8];
    for (uint64_t b = r0; b < r1;) {
        const unsigned rows = r1 - b < 8 ? (unsigned)(r1 - b) : 8;
        if (dt == CMF_DT_Q4TP) cq_avx2_q4tp_ladders8(m, b, rows, lad);
        float *yb[MULTI];
        for (size_t j = 0; j < n; j += MULTI) {
            size_t nt = n - j < MULTI ? n - j : MULTI;
            for (size_t k = 0; k < nt; k++)
                yb[k] = y[j + k] + (b - r0);
            blocks[nt](m, tok + j, yb, b, rows, (const float(*)[8])lad);
        }
        b += rows;
    }
}

/* One copy per dtype, so that quad_load's choices are made at compile time. */
static void rows_q4_tiled(const cmf_qmat *m, const pair8 *tok, float *y, uint64_t r0, uint64_t r1) {
    rows_dt(m, CMF_DT_Q4_TILED, tok, y, r0, r1);
}
static void rows_q4_block(const cmf_qmat *m, const pair8 *tok, float *y, uint64_t r0, uint64_t r1) {
    rows_dt(m, CMF_DT_Q4_BLOCK, tok, y, r0, r1);
}
static void rows_q4tp(const cmf_qmat *m, const pair8 *tok, float *y, uint64_t r0, uint64_t r1) {
    rows_dt(m, CMF_DT_Q4TP, tok, y, r0, r1);
}

static void multi_q4_tiled(const cmf_qmat *m, const pair8 *const *tok, size_t n, float *const *y,
                           uint64_t r0, uint64_t r1) {
    rows_dt_multi(m, CMF_DT_Q4_TILED, blocks_q4_tiled, tok, n, y, r0, r1);
}
static void multi_q4_block(const cmf_qmat *m, const pair8 *const *tok, size_t n, float *const *y,
                           uint64_t r0, uint64_t r1) {
    rows_dt_multi(m, CMF_DT_Q4_BLOCK, blocks_q4_block, tok, n, y, r0, r1);
}
static void multi_q4tp(const cmf_qmat *m, const pair8 *const *tok, size_t n, float *const *y,
                       uint64_t r0, uint64_t r1) {
    rows_dt_multi(m, CMF_DT_Q4TP, blocks_q4tp, tok, n, y, r0, r1);
}

/* The record of one build, its vbit rows named (VBIT, VBIT_MULTI). */
#define CQ_I8DEC_AVX2_ROWS(VBIT, VBIT_MULTI)                                                       \
    {                                                                                              \
        {rows_q4_tiled, rows_q4_block, rows_q4tp, VBIT}, {                                         \
            multi_q4_tiled, multi_q4_block, multi_q4tp, VBIT_MULTI                                 \
        }                                                                                          \
    }

#endif
