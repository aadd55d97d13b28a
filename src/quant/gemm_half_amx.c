/* gemm_half_amx.c - batched products (prefill) for f16 and bf16 weights on AMX-BF16 tiles.
 *
 * A tile product (TDPBF16PS) multiplies pairs of bf16 values and adds them into f32. bf16 keeps
 * 8 significant bits, so to be as exact as the f32 tiers both sides are split into bf16 parts:
 *   - a weight w = hi + lo exactly: hi is w cut to bf16 and lo the 3 bits f16 has beyond it;
 *     bf16 weights are exact as they are (one part);
 *   - an activation x = hi + mid + lo + e, each part rounded to nearest, |e| <= 2^-27 |x|.
 * Each output sums w_hi (x_hi + x_mid + x_lo) + w_lo (x_hi + x_mid); what is left out (w_lo x_lo
 * < 2^-24 |w x|, and e) is below f32 rounding, so batched and one-token products agree as
 * closely as two f32 summation orders do (tests/engine/test_parity_tiny.c: 1e-5 on logits).
 * Non-finite values keep their other parts 0. With CMF_KF_BF16_ACT the activations are rounded
 * to bf16 instead (x_hi alone, as the AVX-512 BF16 dot products take them): a third of the tile
 * products on bf16 weights, two fifths on f16.
 *
 * Orientation: the weights are the A operand (16 rows x 32 columns, bf16, row-major: a weight
 * row's 32 columns are a tile row as they are, no transpose), the activations the B operand
 * (16 column pairs x 16 tokens, the pair-interleaved layout TDPBF16PS takes: transposed once
 * per call), and C (f32, 16 rows x 16 tokens) is transposed once into Y at the end. A call has
 * far more weights than activations, so the transposes go where they are few.
 *
 * Tiles: C in 0..3 for 2 row blocks x 2 token blocks; A in 4 and 5; B in 6 and 7. The columns go
 * in passes whose activations fit L2 (ACT_PASS_BYTES), a pass in blocks of KB_MAX: per block and
 * 32-row pair the weights are converted into a 24 KiB buffer that stays in L1 while every
 * 32-token pair runs over it. Between blocks the C tiles wait in an accumulator in tile layout
 * (per row pair when there are several passes, else one row pair's worth). */
#include <immintrin.h>
#include <string.h>

#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"
#include "quant/load_float_avx512.h"
#include "quant/transpose_avx512.h"

#define TGT                                                                                        \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

#define KB_MAX         192 /* columns per block: a row pair's weights (24 KiB) stay in L1 */
#define ACT_PASS_BYTES (768u << 10) /* activations of one pass over the columns, kept in L2 */

/* Packed operands: per 32-column step, 1 KiB tiles side by side, so that a step's operands are
 * one contiguous run:
 *   weights, per 32-row pair:       [w_hi rows 0-15, w_hi rows 16-31, w_lo 0-15, w_lo 16-31];
 *   activations, per 32-token pair: [x_hi tokens 0-15, x_hi 16-31, x_mid 0-15, x_mid 16-31,
 *                                    x_lo 0-15, x_lo 16-31] (x_hi alone with bf16 activations).
 * TILE_U16 is one tile in uint16 units; WSTEP_U16 a step of weights, xstep_u16 of activations. */
#define TILE_U16  512u
#define WSTEP_U16 (4 * TILE_U16)

static inline size_t xstep_u16(unsigned xparts) {
    return 2 * xparts * TILE_U16;
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static inline __mmask32 mask32(uint64_t c, uint64_t cols) {
    return c >= cols        ? 0
           : cols - c >= 32 ? (__mmask32)0xFFFFFFFFu
                            : (__mmask32)((1u << (cols - c)) - 1);
}

/* 16 activations -> bf16 parts, each rounded to nearest: hi = bf16(x), mid = bf16(x - hi),
 * lo = bf16(x - hi - mid) (both differences exact in f32); mid = lo = 0 where hi is not finite
 * (inf - inf would be NaN). */
TGT static inline void split_act16(__m512 v, __m256i *hi, __m256i *mid, __m256i *lo) {
    __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
    __m512 hf = cq_bf16x16_to_f32(h);
    __mmask16 fin = (__mmask16)~_mm512_fpclass_ps_mask(hf, 0x99); /* not NaN, not +-inf */
    __m512 r = _mm512_maskz_sub_ps(fin, v, hf);
    __m256i md = (__m256i)_mm512_cvtneps_pbh(r);
    *hi = h;
    *mid = md;
    *lo = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(r, cq_bf16x16_to_f32(md)));
}

static inline __m512i join256(__m256i a, __m256i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* Activations of tokens [0, np), columns [c0, c0 + kc), into packed B tiles of xparts parts (3:
 * the split, 1: rounded to bf16; zero past n and past cols): token t = 32 q + 16 b + j, columns
 * c0 + 32 s + 2 p and the next land in pair q's step s, tile (part, b), row p, pair j. */
TGT static void convert_acts(const float *X, size_t n, size_t ldx, uint64_t cols, size_t np,
                             uint64_t c0, size_t kc, unsigned xparts, uint16_t *xp) {
    const size_t steps = kc / 32, xstep = xstep_u16(xparts);
    for (size_t t0 = 0; t0 < np; t0 += 16)
        for (size_t s = 0; s < steps; s++) {
            uint64_t c = c0 + 32 * s;
            __mmask32 km = mask32(c, cols);
            __m512i v[3][16]; /* hi, mid, lo */
            for (unsigned j = 0; j < 16; j++) {
                if (t0 + j >= n) {
                    v[0][j] = v[1][j] = v[2][j] = _mm512_setzero_si512();
                    continue;
                }
                const float *x = X + (t0 + j) * ldx + c;
                const __m512 a = _mm512_maskz_loadu_ps((__mmask16)km, x),
                             b = _mm512_maskz_loadu_ps((__mmask16)(km >> 16), x + 16);
                if (xparts == 1) {
                    v[0][j] = (__m512i)_mm512_cvtne2ps_pbh(b, a);
                    continue;
                }
                __m256i p0[3], p1[3];
                split_act16(a, &p0[0], &p0[1], &p0[2]);
                split_act16(b, &p1[0], &p1[1], &p1[2]);
                for (int k = 0; k < 3; k++)
                    v[k][j] = join256(p0[k], p1[k]);
            }
            uint16_t *d = xp + ((t0 / 32) * steps + s) * xstep + (t0 / 16 % 2) * TILE_U16;
            for (unsigned k = 0; k < xparts; k++)
                cq_transpose16_store(v[k], d + 2 * k * TILE_U16);
        }
}

/* 32 f16 weights (f32 in a, b) -> hi = cut to bf16, lo = the rest (exact: f16's 11 significant
 * bits are bf16's 8 plus at most 3). A non-finite weight keeps its own hi and lo = 0. */
TGT static inline void split_w32(__m512 a, __m512 b, __m512i *hi, __m512i *lo) {
    const __m512i top = _mm512_set1_epi32((int)0xFFFF0000u);
    __mmask16 fa = (__mmask16)~_mm512_fpclass_ps_mask(a, 0x99),
              fb = (__mmask16)~_mm512_fpclass_ps_mask(b, 0x99);
    __m512 ha = _mm512_mask_mov_ps(
               a, fa, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), top))),
           hb = _mm512_mask_mov_ps(
               b, fb, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(b), top)));
    /* both parts are exact bf16 values, so the rounding conversion keeps them as they are */
    *hi = (__m512i)_mm512_cvtne2ps_pbh(hb, ha);
    *lo = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_sub_ps(fb, b, hb),
                                       _mm512_maskz_sub_ps(fa, a, ha));
}

/* Weights of rows [r, r + 32) (rows >= r_end zero) for columns [k0, k0 + kb) into packed A tiles:
 * in step s, tile (b, hi / lo) row i = row r + 16 b + i, columns k0 + 32 s .. + 31. bf16 weights
 * leave the lo tiles unwritten (never read). The block converted next, rows from r + next_dr and
 * columns from next_k0, is prefetched: 32 rows are 32 streams, each only kb columns long per
 * visit, too short for the hardware prefetcher alone. */
TGT static void convert_weights(const cmf_qmat *m, uint64_t r, uint64_t r_end, uint64_t k0,
                                size_t kb, uint64_t next_dr, uint64_t next_k0, uint16_t *wp) {
    const uint16_t *base = (const uint16_t *)(const void *)m->data;
    const uint64_t cols = m->cols;
    const bool f16 = m->dtype == CMF_DT_F16;
    for (unsigned i = 0; i < 32; i++) {
        uint64_t row = r + i;
        uint16_t *d = wp + (i / 16) * TILE_U16 + (i % 16) * 32;
        const uint16_t *src = base + (row < r_end ? row : r) * cols;
        if (row + next_dr < r_end)
            for (size_t c = 0; c < kb; c += 32)
                _mm_prefetch((const char *)(base + (row + next_dr) * cols + next_k0 + c),
                             _MM_HINT_T0);
        for (size_t s = 0; s < kb / 32; s++, d += WSTEP_U16) {
            uint64_t c = k0 + 32 * s;
            __m512i w = _mm512_maskz_loadu_epi16(row < r_end ? mask32(c, cols) : 0, src + c);
            if (!f16) {
                _mm512_storeu_si512(d, w);
                continue;
            }
            __m512i hi, lo;
            split_w32(_mm512_cvtph_ps(_mm512_castsi512_si256(w)),
                      _mm512_cvtph_ps(_mm512_extracti64x4_epi64(w, 1)), &hi, &lo);
            _mm512_storeu_si512(d, hi);
            _mm512_storeu_si512(d + 2 * TILE_U16, lo);
        }
    }
}

/* Where results go: Y[t * ldy + (r - r0)] for tokens t < n, rows r in [r0, r1). */
typedef struct {
    float *Y;
    size_t ldy, n;
    uint64_t r0, r1;
} out_view;

/* The C tile of rows [r, r + 16) x tokens [t, t + 16), stored to buf (1 KiB), transposed and
 * written to Y: only tokens < n and rows < r1 (the rest belong to nobody or to another thread). */
TGT static void tile_out(const out_view *o, uint64_t r, size_t t, float *buf) {
    if (t >= o->n || r >= o->r1) return;
    unsigned vt = o->n - t >= 16 ? 16 : (unsigned)(o->n - t);
    unsigned vr = o->r1 - r >= 16 ? 16 : (unsigned)(o->r1 - r);
    __m512i v[16];
    for (int i = 0; i < 16; i++)
        v[i] = _mm512_load_si512(buf + 16 * i);
    cq_transpose16_store(v, buf + 256);
    __mmask16 k = (__mmask16)((1u << vr) - 1);
    for (unsigned j = 0; j < vt; j++)
        _mm512_mask_storeu_ps(o->Y + (t + j) * o->ldy + (r - o->r0), k,
                              _mm512_load_ps(buf + 256 + 16 * j));
}

/* C tile NUM of rows R, tokens T: zero on the first column block, else from acc (tile layout,
 * 1 KiB per tile, contiguous); kept in acc after every block but the last, which writes Y. */
#define C_LOAD(NUM)                                                                                \
    do {                                                                                           \
        if (first)                                                                                 \
            _tile_zero(NUM);                                                                       \
        else                                                                                       \
            _tile_loadd(NUM, acc + 256 * (NUM), 64);                                               \
    } while (0)

#define C_STORE(NUM, R, T)                                                                         \
    do {                                                                                           \
        if (!last) {                                                                               \
            _tile_stored(NUM, acc + 256 * (NUM), 64);                                              \
        } else {                                                                                   \
            _tile_stored(NUM, buf, 64);                                                            \
            tile_out(o, R, T, buf);                                                                \
        }                                                                                          \
    } while (0)

/* The four C tiles += A (4: rows 0-15, 5: rows 16-31) x B (6: tokens 0-15, 7: tokens 16-31). */
#define DP4()                                                                                      \
    do {                                                                                           \
        _tile_dpbf16ps(0, 4, 6);                                                                   \
        _tile_dpbf16ps(1, 4, 7);                                                                   \
        _tile_dpbf16ps(2, 5, 6);                                                                   \
        _tile_dpbf16ps(3, 5, 7);                                                                   \
    } while (0)

/* Part P of a step's operands into tiles: the weights' (0 hi, 1 lo) of both row blocks into 4 and
 * 5, the activations' (0 hi, 1 mid, 2 lo) of both token blocks into 6 and 7. */
#define A_PART(P)                                                                                  \
    do {                                                                                           \
        _tile_loadd(4, w + 2 * (P)*TILE_U16, 64);                                                  \
        _tile_loadd(5, w + (2 * (P) + 1) * TILE_U16, 64);                                          \
    } while (0)
#define B_PART(P)                                                                                  \
    do {                                                                                           \
        _tile_loadd(6, x + 2 * (P)*TILE_U16, 64);                                                  \
        _tile_loadd(7, x + (2 * (P) + 1) * TILE_U16, 64);                                          \
    } while (0)

/* Rows [r, r + 32) x tokens [t, t + 32) over one column block of `steps` 32-column steps: wp is
 * the row pair's packed weights for the block, xp the token pair's packed activations (xparts
 * parts) from the block's first step. */
TGT static void block_2x2(const out_view *o, uint64_t r, size_t t, bool first, bool last,
                          const uint16_t *wp, const uint16_t *xp, size_t steps, bool has_lo,
                          unsigned xparts, float *acc, float *buf) {
    const size_t xstep = xstep_u16(xparts);
    C_LOAD(0);
    C_LOAD(1);
    C_LOAD(2);
    C_LOAD(3);
    for (size_t s = 0; s < steps; s++) {
        const uint16_t *w = wp + s * WSTEP_U16, *x = xp + s * xstep;
        A_PART(0);
        if (xparts == 3 && has_lo) {
            /* w_hi meets x_hi last, so that w_lo finds x_hi in B: 12 tile loads a step instead
             * of 14 (+3-6 % on the guest's slower AMX phases, level in its fast ones) */
            B_PART(2);
            DP4(); /* w_hi x_lo */
            B_PART(1);
            DP4(); /* w_hi x_mid */
            B_PART(0);
            DP4(); /* w_hi x_hi */
            A_PART(1);
            DP4(); /* w_lo x_hi */
            B_PART(1);
            DP4(); /* w_lo x_mid */
            continue;
        }
        B_PART(0);
        DP4(); /* w_hi x_hi */
        if (xparts == 3) {
            B_PART(1);
            DP4(); /* w_hi x_mid */
            B_PART(2);
            DP4(); /* w_hi x_lo */
        } else if (has_lo) {
            A_PART(1);
            DP4(); /* w_lo x_hi */
        }
    }
    C_STORE(0, r, t);
    C_STORE(1, r, t + 16);
    C_STORE(2, r + 16, t);
    C_STORE(3, r + 16, t + 16);
}

TGT bool cq_gemm_half_amx(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                          size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {
    if (m->dtype != CMF_DT_F16 && m->dtype != CMF_DT_BF16) return false;
    const unsigned xparts = flags & CMF_KF_BF16_ACT ? 1 : 3;
    const size_t np = (n + 31) & ~(size_t)31, kp = (size_t)(m->cols + 31) & ~(size_t)31;
    const size_t ntp = np / 32, nrp = (size_t)(r1 - r0 + 31) / 32, kb = kp < KB_MAX ? kp : KB_MAX;
    /* columns per pass: the pass's activations (2 bytes per part, token and column) stay in L2 */
    size_t ks = ACT_PASS_BYTES / (np * 2 * xparts) / kb * kb;
    if (ks < kb) ks = kb;
    if (ks > kp) ks = kp;
    const size_t act_bytes = np * ks * 2 * xparts, wt_bytes = 32 * kb * 4;
    const size_t acc_bytes = (ks < kp ? nrp : 1) * ntp * 4096; /* C tiles between blocks */
    uint8_t *mem = cq_kernel_scratch(CQ_SCRATCH_ACT, act_bytes + wt_bytes + acc_bytes + 2048);
    if (!mem) return false;
    uint16_t *xp = (uint16_t *)(void *)mem, *wp = (uint16_t *)(void *)(mem + act_bytes);
    float *acc = (float *)(void *)(mem + act_bytes + wt_bytes);
    float *buf = (float *)(void *)(mem + act_bytes + wt_bytes + acc_bytes);

    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
    const bool has_lo = m->dtype == CMF_DT_F16;
    const out_view o = {Y, ldy, n, r0, r1};
    for (size_t p0 = 0; p0 < kp; p0 += ks) {
        const size_t kpass = kp - p0 < ks ? kp - p0 : ks, psteps = kpass / 32;
        convert_acts(X, n, ldx, m->cols, np, p0, kpass, xparts, xp);
        for (size_t rp = 0; rp < nrp; rp++) {
            const uint64_t r = r0 + 32 * rp;
            float *a = acc + (ks < kp ? rp * ntp * 1024 : 0);
            for (size_t k0 = p0; k0 < p0 + kpass; k0 += kb) {
                const size_t kbn = p0 + kpass - k0 < kb ? p0 + kpass - k0 : kb;
                const bool first = k0 == 0, last = k0 + kbn >= kp,
                           pass_end = k0 + kbn >= p0 + kpass;
                /* converted next: this pair's next block, else the next pair's first one */
                convert_weights(m, r, r1, k0, kbn, pass_end ? 32 : 0, pass_end ? p0 : k0 + kbn, wp);
                for (size_t tp = 0; tp < ntp; tp++)
                    block_2x2(&o, r, 32 * tp, first, last, wp,
                              xp + (tp * psteps + (k0 - p0) / 32) * xstep_u16(xparts), kbn / 32,
                              has_lo, xparts, a + tp * 1024, buf);
            }
        }
    }
    _tile_release();
    return true;
}
