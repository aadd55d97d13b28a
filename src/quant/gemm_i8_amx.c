/* gemm_i8_amx.c - the AMX-INT8 tier of cmf_matmul_qact (integer prefill GEMM).
 *
 * The AVX-512 tier's 16-row panels (gemm_i8_avx512.c) already hold each 32-column block's codes
 * as the B operand of a tile product wants them: 8 rows of 64 bytes, row k the codes of columns
 * 4k .. 4k + 3 of the 16 weight rows. A token group's activation codes (cmf_qact: 12 tokens x
 * 32 bytes per block, back to back) are the A operand as stored, so one tile product gives a
 * block's 12 x 16 int32 sums, where the VNNI tier issues 96 vpdpbusd: q8_row and the 4-bit
 * class with their codes made signed once per panel (the offset subtracted: tdpbssd, no
 * correction), vbit with its unsigned codes and the offset correction added (tdpbsud: its 8-bit
 * rows reach u - L = 128). Those are the VNNI tier's integers. The sums leave the tile per
 * block, as the activation scale changes every 32 columns, and are converted and scaled with
 * exactly the VNNI tier's operations in its order, so both tiers give the same bits (and
 * cmf_matmul_exact_min holds across them). Four C tiles rotate: the products of the next two
 * blocks run while the sums stored a block earlier are scaled (a vector load waits for the tile
 * stores before it to reach the cache). A group of fewer than 12 tokens (the batch's last)
 * takes the VNNI kernel: no tile reads entries past the batch. */
#include <immintrin.h>
#include <string.h>

#include "quant/gemm_impl.h"

#define PR 16             /* rows per panel: a C tile's 16 int32 columns */
#define G  CMF_QACT_GROUP /* tokens per group: a tile's rows */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* C in tiles 0-3 (G x 16 int32, one block each in turn), A in 4 and 6 (G tokens x 32 codes), B
 * in 5 and 7 (8 x 64 codes: the panel's block), A and B of even blocks in 4 / 5, odd in 6 / 7. */
static void tiles_configure(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        const bool b = i >= 4 && i % 2;
        cfg.rows[i] = b ? 8 : G;
        cfg.colsb[i] = i >= 4 && !b ? 32 : 64;
    }
    _tile_loadconfig(&cfg);
}

/* Block b's product into tile C from tiles A and B (all immediates); usgn: unsigned codes. */
#define BLOCK_DP(C, A, B, b)                                                                       \
    do {                                                                                           \
        _tile_zero(C);                                                                             \
        _tile_loadd(A, xg + 32 * G * (b), 32);                                                     \
        _tile_loadd(B, p->codes + 512 * (b), 64);                                                  \
        if (usgn)                                                                                  \
            _tile_dpbsud(C, A, B);                                                                 \
        else                                                                                       \
            _tile_dpbssd(C, A, B);                                                                 \
    } while (0)

/* Block b's sums (in c: G rows of 16) into the accumulators, as panel_tokens does. */
static inline __attribute__((always_inline)) __m512i sums(const int usgn, const int32_t *c,
                                                          const int32_t *cx, size_t e) {
    const __m512i v = _mm512_load_si512(c);
    return usgn ? _mm512_add_epi32(_mm512_set1_epi32(cx[e]), v) : v;
}

static inline __attribute__((always_inline)) void
block_scale(const cq_i8_panel *p, const int rowscale, const int usgn, const int32_t *c,
            const float *sx, const int32_t *cx, size_t b, __m512 *acc) {
    if (rowscale) {
#pragma GCC unroll 12
        for (int t = 0; t < G; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums(usgn, c + 16 * t, cx, G * b + t)),
                                     _mm512_set1_ps(sx[G * b + t]), acc[t]);
    } else {
        __m512 d = _mm512_load_ps(p->bs + b * PR);
#pragma GCC unroll 12
        for (int t = 0; t < G; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums(usgn, c + 16 * t, cx, G * b + t)),
                                     _mm512_mul_ps(d, _mm512_set1_ps(sx[G * b + t])), acc[t]);
    }
}

/* The packed panel's codes less the offset: signed, so that no correction is needed. */
static void codes_signed(const cq_i8_panel *p, unsigned off) {
    const __m512i o = _mm512_set1_epi8((char)off);
    for (size_t i = 0; i < PR * p->k64; i += 64)
        _mm512_store_si512(p->codes + i, _mm512_sub_epi8(_mm512_load_si512(p->codes + i), o));
}

/* The G tokens of group g over the packed panel p into Y (rows past p->nr untouched); rowscale
 * and usgn (unsigned codes: vbit) constants in each instance, so that the accumulators stay in
 * registers. */
static inline __attribute__((always_inline)) void
group_tiles(const cq_i8_panel *p, const int rowscale, const int usgn, const cmf_qact *a, size_t g,
            float *Y, size_t ldy, cq_next_block *pf, size_t per) {
    const size_t nb = a->nb, e0 = g * nb * G;
    const int8_t *xg = a->q + 32 * e0;
    const float *sx = a->scale + e0;
    const int32_t *cx = p->corr + e0;
    _Alignas(64) int32_t c[2][G * 16];
    __m512 acc[G];
#pragma GCC unroll 12
    for (int t = 0; t < G; t++)
        acc[t] = _mm512_setzero_ps();
/* Block B: the product of block B + 2 started (into C tile NXT), B's sums (C tile CUR) stored,
 * and the sums of block B - 1, stored a step earlier, scaled (vector loads wait for the tile
 * stores before them to reach the cache: no store forwarding from tiles). */
#define STEP(B, CUR, NXT, TA, TB)                                                                  \
    if ((B) >= nb) break;                                                                          \
    if ((B) + 2 < nb) BLOCK_DP(NXT, TA, TB, (B) + 2);                                              \
    cq_next_block_fetch(pf, per);                                                                  \
    _tile_stored(CUR, c[(B) % 2], 64);                                                             \
    if (B) block_scale(p, rowscale, usgn, c[((B)-1) % 2], sx, cx, (B)-1, acc)

    BLOCK_DP(0, 4, 5, 0);
    if (nb > 1) BLOCK_DP(1, 6, 7, 1);
    for (size_t b = 0;; b += 4) {
        STEP(b, 0, 2, 4, 5);
        STEP(b + 1, 1, 3, 6, 7);
        STEP(b + 2, 2, 0, 4, 5);
        STEP(b + 3, 3, 1, 6, 7);
    }
#undef STEP
    block_scale(p, rowscale, usgn, c[(nb - 1) % 2], sx, cx, nb - 1, acc);
    const __m512 r = rowscale ? _mm512_loadu_ps(p->rs) : _mm512_set1_ps(1.0f);
    const __mmask16 mask = (__mmask16)((1u << p->nr) - 1);
    float *y = Y + g * G * ldy;
#pragma GCC unroll 12
    for (int t = 0; t < G; t++)
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, mask, _mm512_mul_ps(acc[t], r));
}

typedef void (*group_fn)(const cq_i8_panel *, const cmf_qact *, size_t, float *, size_t,
                         cq_next_block *, size_t);

static void group_q8(const cq_i8_panel *p, const cmf_qact *a, size_t g, float *Y, size_t ldy,
                     cq_next_block *pf, size_t per) {
    group_tiles(p, 1, 0, a, g, Y, ldy, pf, per);
}

static void group_q4(const cq_i8_panel *p, const cmf_qact *a, size_t g, float *Y, size_t ldy,
                     cq_next_block *pf, size_t per) {
    group_tiles(p, 0, 0, a, g, Y, ldy, pf, per);
}

static void group_vbit(const cq_i8_panel *p, const cmf_qact *a, size_t g, float *Y, size_t ldy,
                       cq_next_block *pf, size_t per) {
    group_tiles(p, 0, 1, a, g, Y, ldy, pf, per);
}

void cq_gemm_amx(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                 uint64_t r1, void *scratch) {
    const size_t full = a->n / G, groups = (a->n + G - 1) / G;
    if (!full) {
        cq_gemm_avx512(m, a, Y, ldy, r0, r1, scratch);
        return;
    }
    cq_i8_panel p;
    cq_i8_panel_bind(&p, m, a, scratch);
    tiles_configure();
    const unsigned off = cq_gemm_off(m);
    const group_fn group = p.vbit ? group_vbit : p.rowscale ? group_q8 : group_q4;
    for (uint64_t r = r0; r < r1; r += PR) {
        cq_i8_panel_pack(&p, m, r, r1);
        /* the next panel's codes into L2 while this one's products run, spread over them */
        size_t per;
        cq_next_block pf = cq_i8_next_codes(m, r, r1, groups * a->nb, &per);
        if (full < groups) /* the last group's VNNI kernel reads the unsigned codes */
            cq_i8_panel_group(&p, a, full, Y + (r - r0), ldy, &pf, per);
        if (!p.vbit) codes_signed(&p, off);
        for (size_t g = 0; g < full; g++)
            group(&p, a, g, Y + (r - r0), ldy, &pf, per);
    }
    _tile_release();
}
