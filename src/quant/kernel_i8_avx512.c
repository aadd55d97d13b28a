/* kernel_i8_avx512.c - int8-activation paths (CMF_KF_INT8_ACT) with AVX-512 VNNI for
 * q4_tiled, q4_block, q4tp and q8_row (cols % 32 == 0).
 *
 * Activations are quantized per 32-group: dx = absmax/127, xq = round(x/dx) in [-127, 127].
 * vpdpbusd then multiplies unsigned weight bytes by signed activation bytes, 4 per int32
 * lane. For q4 two groups share one 64-byte vector laid out [g0 low nibbles, g1 low,
 * g0 high, g1 high] (the nibbles straight out of the file), so the activations are stored
 * in that order; the -8 nibble offset is removed per lane with a precomputed 8*sum(xq).
 * For q8 the activations are stored +128 as unsigned bytes and the weights stay signed; the
 * 128*sum(w) this adds is removed with a second vpdpbusd. */
#include <immintrin.h>
#include <stdlib.h>

#include "common/cpu.h"
#include "common/hsum16_avx512.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

/* Per token: xq (cols bytes), corr (int32 per lane = cols/4), dxl (float per lane). */
typedef struct {
    uint8_t *mem;
    int8_t *xq;
    int32_t *corr;
    float *dxl;
    uint64_t cols, lanes;
} act8;

static bool act8_alloc(act8 *a, size_t n, uint64_t cols) {
    a->cols = cols;
    a->lanes = cols / 4;
    size_t per = cols + 8 * (cols / 4);
    a->mem = cq_kernel_scratch(CQ_SCRATCH_ACT, n * per);
    if (!a->mem) return false;
    a->xq = (int8_t *)a->mem;
    a->corr = (int32_t *)(void *)(a->mem + n * cols);
    a->dxl = (float *)(void *)(a->mem + n * cols + 4 * n * a->lanes);
    return true;
}

/* Quantize one group of 32 activations; returns dx, writes q[32] in natural order. */
static float quant32(const float *x, int8_t *q) {
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(inv)));
    __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, _mm512_set1_ps(inv)));
    _mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(qb));
    return amax / 127.0f;
}

/* q4 order: pairs [g0 even, g1 even, g0 odd, g1 odd], a lone last group [even, odd];
 * corr = 8 * (sum of the lane's 4 values); dxl = the lane's group dx. */
static void prep_q4(act8 *a, const float *X, size_t n, size_t ldx) {
    uint64_t G = a->cols / 32;
    int8_t q[64];
    for (size_t t = 0; t < n; t++) {
        int8_t *xq = a->xq + t * a->cols;
        int32_t *corr = a->corr + t * a->lanes;
        float *dxl = a->dxl + t * a->lanes;
        for (uint64_t g = 0; g < G; g += 2) {
            int pair = g + 1 < G;
            int8_t *o = xq + 32 * g;
            float d0 = quant32(X + t * ldx + 32 * g, q),
                  d1 = pair ? quant32(X + t * ldx + 32 * g + 32, q + 32) : 0;
            if (pair) {
                for (int k = 0; k < 16; k++) {
                    o[k] = q[2 * k];
                    o[16 + k] = q[32 + 2 * k];
                    o[32 + k] = q[2 * k + 1];
                    o[48 + k] = q[32 + 2 * k + 1];
                }
            } else {
                for (int k = 0; k < 16; k++) {
                    o[k] = q[2 * k];
                    o[16 + k] = q[2 * k + 1];
                }
            }
            unsigned nl = pair ? 16 : 8;
            for (unsigned l = 0; l < nl; l++) {
                corr[8 * g + l] = 8 * (o[4 * l] + o[4 * l + 1] + o[4 * l + 2] + o[4 * l + 3]);
                dxl[8 * g + l] = pair ? ((l / 4) % 2 ? d1 : d0) : d0;
            }
        }
    }
}

/* q8 order: natural, stored +128 as unsigned; dxl = the lane's group dx. One token (decode)
 * runs this per matrix on every thread, so 16 groups go at a time: their maxima in one vector
 * (hmax16: one division each for dx and 1/dx), dxl spread by vpermps; the last G % 16 groups
 * one by one through quant32 (the same arithmetic). */
static void prep_q8(act8 *a, const float *X, size_t n, size_t ldx) {
    uint64_t G = a->cols / 32;
    const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (size_t t = 0; t < n; t++) {
        const float *x = X + t * ldx;
        int8_t *xq = a->xq + t * a->cols;
        float *dxl = a->dxl + t * a->lanes;
        uint64_t g = 0;
        for (; g + 16 <= G; g += 16) {
            _Alignas(64) float inv[16];
            __m512 dx = _mm512_div_ps(cq_absmax16_avx512(x + 32 * g, inv), _mm512_set1_ps(127.0f));
            for (int k = 0; k < 16; k++) {
                const float *f = x + 32 * (g + (uint64_t)k);
                __m512 s = _mm512_set1_ps(inv[k]);
                __m128i lo = _mm512_cvtsepi32_epi8(
                            _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(f), s))),
                        hi = _mm512_cvtsepi32_epi8(
                            _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(f + 16), s)));
                __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
                _mm256_storeu_si256((__m256i *)(void *)(xq + 32 * (g + (uint64_t)k)),
                                    _mm256_xor_si256(q, bias));
            }
            for (int p = 0; p < 8; p++) /* lanes 0..7 group g + 2p, 8..15 group g + 2p + 1 */
                _mm512_storeu_ps(
                    dxl + 8 * (g + 2 * (uint64_t)p),
                    _mm512_permutexvar_ps(_mm512_add_epi32(pair, _mm512_set1_epi32(2 * p)), dx));
        }
        for (; g < G; g++) {
            float d = quant32(x + 32 * g, xq + 32 * g);
            for (int k = 0; k < 32; k++)
                xq[32 * g + k] = (int8_t)(uint8_t)(xq[32 * g + k] + 128);
            for (int l = 0; l < 8; l++)
                dxl[8 * g + l] = d;
        }
    }
}

#define MAXT             4
#define Q8_ROWS_TOGETHER 4 /* q8_rowN: 4 measured ahead of 2 and 8; divides 16 */

/* Weight scales of groups (g, g+1) spread over the 16 lanes [s0 x4, s1 x4, s0 x4, s1 x4]. */
static inline __m512 lanes2(float s0, float s1) {
    return _mm512_mask_blend_ps(0xF0F0, _mm512_set1_ps(s0), _mm512_set1_ps(s1));
}

static inline float h16(const uint8_t *p) {
    return _cvtsh_ss(ld_u16(p));
}

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Weight scales and nibbles of the pair of groups (g, g+1) of row r; for a lone last group
 * both halves are group g. */
ALWAYS_INLINE void q4_pair(const cmf_qmat *m, uint64_t r, uint64_t g, int pair, const float *lad,
                           uint64_t *cw, const uint8_t **nb0, const uint8_t **nb1, float *s0,
                           float *s1) {
    const uint64_t G = m->groups, g1 = pair ? g + 1 : g;
    if (m->dtype == CMF_DT_Q4_TILED) {
        const uint8_t *tl = m->quants + (r * G + g) * CQ_Q4T_TILE,
                      *t1 = tl + (pair ? CQ_Q4T_TILE : 0);
        *nb0 = tl + 2;
        *nb1 = t1 + 2;
        *s0 = h16(tl);
        *s1 = h16(t1);
        return;
    }
    *nb0 = m->quants + (r * G + g) * 16;
    *nb1 = *nb0 + (pair ? 16 : 0);
    if (m->dtype == CMF_DT_Q4TP) { /* pairs start at even g: 8 codes per 5 bytes, LSB-first */
        if ((g & 7) == 0) *cw = cq_q4tp_codes8(m, r, g);
        *s0 = lad[*cw & 31];
        *s1 = pair ? lad[(*cw >> 5) & 31] : *s0;
        *cw >>= 10;
    } else {
        *s0 = h16(m->scales + 2 * (r * G + g));
        *s1 = h16(m->scales + 2 * (r * G + g1));
    }
}

/* Rows [r0, r1) for tokens [t0, t0 + NT); NT is a compile-time constant at each call so the
 * accumulators stay in registers. */
ALWAYS_INLINE void q4_block_nt(const cmf_qmat *m, const act8 *a, size_t t0, const size_t NT,
                               float *Y, size_t ldy, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups, GP = G & ~(uint64_t)1;
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m256i m4y = _mm256_set1_epi8(15);
    float lad[32];
    for (uint64_t r = r0; r < r1; r++) {
        if (m->dtype == CMF_DT_Q4TP) cq_avx512_q4tp_ladder(m, r, lad);
        __m512 acc[MAXT];
        for (size_t k = 0; k < NT; k++)
            acc[k] = _mm512_setzero_ps();
        uint64_t cw = 0;
        for (uint64_t g = 0; g < GP; g += 2) {
            const uint8_t *nb0, *nb1;
            float s0, s1;
            q4_pair(m, r, g, 1, lad, &cw, &nb0, &nb1, &s0, &s1);
            _mm_prefetch((const char *)nb0 + CQ_PF_DIST, _MM_HINT_T0);
            __m256i b = _mm256_loadu2_m128i((const __m128i *)nb1, (const __m128i *)nb0);
            __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1);
            v = _mm512_and_si512(v, m4);
            __m512 sw = lanes2(s0, s1);
            for (size_t k = 0; k < NT; k++) {
                size_t t = t0 + k;
                __m512i xq = _mm512_loadu_si512(a->xq + t * a->cols + 32 * g);
                __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, xq);
                is = _mm512_sub_epi32(is, _mm512_loadu_si512(a->corr + t * a->lanes + 8 * g));
                __m512 sc = _mm512_mul_ps(sw, _mm512_loadu_ps(a->dxl + t * a->lanes + 8 * g));
                acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), sc, acc[k]);
            }
        }
        if (GP < G) { /* a lone last group: [even, odd] in one 256-bit vector */
            const uint8_t *nb0, *nb1;
            float s0, s1;
            q4_pair(m, r, GP, 0, lad, &cw, &nb0, &nb1, &s0, &s1);
            __m128i b = _mm_loadu_si128((const __m128i *)nb0);
            __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m4y);
            for (size_t k = 0; k < NT; k++) {
                size_t t = t0 + k;
                __m256i xq = _mm256_loadu_si256((const __m256i *)(a->xq + t * a->cols + 32 * GP));
                __m256i is = _mm256_dpbusd_epi32(_mm256_setzero_si256(), v, xq);
                is = _mm256_sub_epi32(
                    is, _mm256_loadu_si256((const __m256i *)(a->corr + t * a->lanes + 8 * GP)));
                __m256 sc = _mm256_mul_ps(_mm256_set1_ps(s0),
                                          _mm256_loadu_ps(a->dxl + t * a->lanes + 8 * GP));
                __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(is), sc);
                acc[k] = _mm512_add_ps(acc[k], _mm512_insertf32x8(_mm512_setzero_ps(), f, 0));
            }
        }
        for (size_t k = 0; k < NT; k++)
            Y[(t0 + k) * ldy + (r - r0)] = _mm512_reduce_add_ps(acc[k]);
    }
}

static void q4_rows(const cmf_qmat *m, const act8 *a, size_t n, float *Y, size_t ldy, uint64_t r0,
                    uint64_t r1) {
    size_t t = 0;
    for (; t + 4 <= n; t += 4)
        q4_block_nt(m, a, t, 4, Y, ldy, r0, r1);
    for (; t + 2 <= n; t += 2)
        q4_block_nt(m, a, t, 2, Y, ldy, r0, r1);
    for (; t < n; t++)
        q4_block_nt(m, a, t, 1, Y, ldy, r0, r1);
}

ALWAYS_INLINE void q8_block_nt(const cmf_qmat *m, const act8 *a, size_t t0, const size_t NT,
                               float *Y, size_t ldy, uint64_t r0, uint64_t r1) {
    const uint64_t C = m->cols, C64 = C & ~(uint64_t)63;
    const __m512i c128 = _mm512_set1_epi8((char)128);
    for (uint64_t r = r0; r < r1; r++) {
        const uint8_t *w = m->quants + r * C;
        float rs = h16(m->scales + 2 * r);
        __m512 acc[MAXT];
        for (size_t k = 0; k < NT; k++)
            acc[k] = _mm512_setzero_ps();
        for (uint64_t i = 0; i < C; i += 64) {
            __mmask64 km = i < C64 ? ~(__mmask64)0 : (((__mmask64)1 << (C - i)) - 1);
            __mmask16 kl = i < C64 ? 0xFFFF : 0x00FF; /* C % 64 is 0 or 32 */
            _mm_prefetch((const char *)w + i + CQ_PF_DIST, _MM_HINT_T0);
            __m512i wv = _mm512_maskz_loadu_epi8(km, w + i);
            __m512i ws = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c128, wv);
            for (size_t k = 0; k < NT; k++) {
                size_t t = t0 + k;
                __m512i xq = _mm512_maskz_loadu_epi8(km, a->xq + t * C + i);
                __m512i is =
                    _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xq, wv), ws);
                __m512 dx = _mm512_maskz_loadu_ps(kl, a->dxl + t * a->lanes + i / 4);
                acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), dx, acc[k]);
            }
        }
        for (size_t k = 0; k < NT; k++)
            Y[(t0 + k) * ldy + (r - r0)] = _mm512_reduce_add_ps(acc[k]) * rs;
    }
}

/* One token, rows r .. r + N - 1 step by step together; v[k] = row r + k's unreduced sum,
 * reduced 16 rows at a time by the caller. A row at a time (q8_block_nt with NT = 1), each
 * row's sums form one FMA chain and end in a full horizontal reduction: measured 1.35-1.75x
 * slower in cache at 576-4096 columns. */
ALWAYS_INLINE void q8_rowN(const cmf_qmat *m, const act8 *a, uint64_t r, const int N, __m512 *v) {
    const uint64_t C = m->cols, C64 = C & ~(uint64_t)63;
    const __m512i c128 = _mm512_set1_epi8((char)128);
    const uint8_t *w0 = m->quants + r * C;
    __m512 acc[Q8_ROWS_TOGETHER];
    for (int k = 0; k < N; k++)
        acc[k] = _mm512_setzero_ps();
    for (uint64_t i = 0; i < C; i += 64) {
        __mmask64 km = i < C64 ? ~(__mmask64)0 : (((__mmask64)1 << (C - i)) - 1);
        __mmask16 kl = i < C64 ? 0xFFFF : 0x00FF; /* C % 64 is 0 or 32 */
        __m512i xq = _mm512_maskz_loadu_epi8(km, a->xq + i);
        __m512 dx = _mm512_maskz_loadu_ps(kl, a->dxl + i / 4);
        cq_prefetch_span(w0, (uint64_t)N, i, (unsigned)N);
        for (int k = 0; k < N; k++) {
            const uint8_t *w = w0 + (uint64_t)k * C + i;
            __m512i wv = _mm512_maskz_loadu_epi8(km, w);
            __m512i is = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xq, wv),
                                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), c128, wv));
            acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), dx, acc[k]);
        }
    }
    for (int k = 0; k < N; k++)
        v[k] = _mm512_mul_ps(acc[k], _mm512_set1_ps(h16(m->scales + 2 * (r + (uint64_t)k))));
}

/* One token (decode): rows 16 at a time, Q8_ROWS_TOGETHER per step; the rest one by one. */
static void q8_rows_one_token(const cmf_qmat *m, const act8 *a, float *Y, uint64_t r0,
                              uint64_t r1) {
    uint64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        __m512 v[16];
        for (int k = 0; k < 16; k += Q8_ROWS_TOGETHER)
            q8_rowN(m, a, r + (uint64_t)k, Q8_ROWS_TOGETHER, v + k);
        _mm512_storeu_ps(Y + (r - r0), cq_hsum16_avx512(v));
    }
    if (r < r1) q8_block_nt(m, a, 0, 1, Y + (r - r0), 1, r, r1);
}

static void q8_rows(const cmf_qmat *m, const act8 *a, size_t n, float *Y, size_t ldy, uint64_t r0,
                    uint64_t r1) {
    size_t t = 0;
    for (; t + 4 <= n; t += 4)
        q8_block_nt(m, a, t, 4, Y, ldy, r0, r1);
    for (; t + 2 <= n; t += 2)
        q8_block_nt(m, a, t, 2, Y, ldy, r0, r1);
    for (; t < n; t++)
        q8_block_nt(m, a, t, 1, Y, ldy, r0, r1);
}

/* Returns false (nothing written) when the scratch cannot be allocated; callers then use
 * the f32 path. */
bool cq_avx512_i8_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                         size_t ldy, uint64_t r0, uint64_t r1) {
    if (n == 1 && m->dtype != CMF_DT_Q8_ROW && cq_avx512_i8dec_matvec(m, X, Y, r0, r1))
        return true; /* decode: the VBMI kernels */
    /* one q8_row token on AMD: the AVX2 tier's rows with vpdpbusd (cq_avx512_q8_amd) */
    if (n == 1 && m->dtype == CMF_DT_Q8_ROW && cq_avx512_q8_amd() &&
        cq_amd_q8dec_matvec(m, X, Y, r0, r1))
        return true;
    act8 a;
    if (m->cols % 32 || !act8_alloc(&a, n, m->cols)) return false;
    if (m->dtype == CMF_DT_Q8_ROW) {
        prep_q8(&a, X, n, ldx);
        if (n == 1)
            q8_rows_one_token(m, &a, Y, r0, r1);
        else
            q8_rows(m, &a, n, Y, ldy, r0, r1);
    } else {
        prep_q4(&a, X, n, ldx);
        q4_rows(m, &a, n, Y, ldy, r0, r1);
    }
    return true;
}

/* q8_row's prepared token (cmf_tok8_*): its act8 header in the first 64 bytes, then xq, corr
 * and dxl of one token (3 * cols bytes), as act8_alloc lays them out for n = 1. */
#define Q8_TOK_HEAD 64
_Static_assert(sizeof(act8) <= Q8_TOK_HEAD, "act8 header fits its slot");

size_t cq_avx512_q8_tok_bytes(uint64_t cols) {
    return cols % 32 ? 0 : Q8_TOK_HEAD + (3 * cols + 63) / 64 * 64;
}

bool cq_avx512_q8_amd(void) {
    return cq_cpu_amd();
}

void cq_avx512_q8_tok_prepare(void *buf, const float *x, uint64_t cols) {
    if (cq_avx512_q8_amd()) {
        cq_amd_q8dec_tok_prepare(buf, x, cols);
        return;
    }
    act8 *a = buf;
    uint8_t *mem = (uint8_t *)buf + Q8_TOK_HEAD;
    *a = (act8){
        mem,  (int8_t *)mem, (int32_t *)(void *)(mem + cols), (float *)(void *)(mem + 2 * cols),
        cols, cols / 4};
    prep_q8(a, x, 1, cols);
}

void cq_avx512_q8_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                             uint64_t r1) {
    if (cq_avx512_q8_amd())
        cq_amd_q8dec_tok_matvec(m, buf, y, r0, r1);
    else
        q8_rows_one_token(m, buf, y, r0, r1);
}

/* ---- several prepared tokens over the same rows (cmf_matvec_tok8_multi) ----
 *
 * Each token's result must be the bits q8_rows_one_token gives it alone, so every token keeps
 * its own accumulators in the same order of operations (the same 64-column steps, the same
 * 16-row blocks from r0 reduced by hsum16, the rest one row at a time); what the tokens share
 * is each weight vector's load and its 128 * sum(w) (exact integers either way). */

/* Rows r .. r + R - 1 for NT tokens: v[k][at + j] = row r + j's unreduced sum for token k, as
 * q8_rowN leaves it. NT * R accumulators stay in registers (NT * R <= 16). */
ALWAYS_INLINE void q8_rowN_multi(const cmf_qmat *m, const act8 *const *a, const int NT, uint64_t r,
                                 const int R, __m512 (*v)[16], int at) {
    const uint64_t C = m->cols, C64 = C & ~(uint64_t)63;
    const __m512i c128 = _mm512_set1_epi8((char)128);
    const uint8_t *w0 = m->quants + r * C;
    __m512 acc[8][4];
    for (int k = 0; k < NT; k++)
        for (int j = 0; j < R; j++)
            acc[k][j] = _mm512_setzero_ps();
    for (uint64_t i = 0; i < C; i += 64) {
        __mmask64 km = i < C64 ? ~(__mmask64)0 : (((__mmask64)1 << (C - i)) - 1);
        __mmask16 kl = i < C64 ? 0xFFFF : 0x00FF;
        cq_prefetch_span(w0, (uint64_t)R, i, (unsigned)R);
        __m512i wv[4], ws[4];
        for (int j = 0; j < R; j++) {
            wv[j] = _mm512_maskz_loadu_epi8(km, w0 + (uint64_t)j * C + i);
            ws[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c128, wv[j]);
        }
        for (int k = 0; k < NT; k++) {
            __m512i xq = _mm512_maskz_loadu_epi8(km, a[k]->xq + i);
            __m512 dx = _mm512_maskz_loadu_ps(kl, a[k]->dxl + i / 4);
            for (int j = 0; j < R; j++) {
                __m512i is =
                    _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xq, wv[j]), ws[j]);
                acc[k][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), dx, acc[k][j]);
            }
        }
    }
    for (int j = 0; j < R; j++) {
        __m512 rs = _mm512_set1_ps(h16(m->scales + 2 * (r + (uint64_t)j)));
        for (int k = 0; k < NT; k++)
            v[k][at + j] = _mm512_mul_ps(acc[k][j], rs);
    }
}

/* Row r alone (the rows past the last 16-row block), as q8_block_nt with NT = 1 gives it. */
ALWAYS_INLINE void q8_row1_multi(const cmf_qmat *m, const act8 *const *a, const int NT, uint64_t r,
                                 float *const *y, uint64_t at) {
    const uint64_t C = m->cols, C64 = C & ~(uint64_t)63;
    const __m512i c128 = _mm512_set1_epi8((char)128);
    const uint8_t *w = m->quants + r * C;
    float rs = h16(m->scales + 2 * r);
    __m512 acc[8];
    for (int k = 0; k < NT; k++)
        acc[k] = _mm512_setzero_ps();
    for (uint64_t i = 0; i < C; i += 64) {
        __mmask64 km = i < C64 ? ~(__mmask64)0 : (((__mmask64)1 << (C - i)) - 1);
        __mmask16 kl = i < C64 ? 0xFFFF : 0x00FF;
        _mm_prefetch((const char *)w + i + CQ_PF_DIST, _MM_HINT_T0);
        __m512i wv = _mm512_maskz_loadu_epi8(km, w + i);
        __m512i ws = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c128, wv);
        for (int k = 0; k < NT; k++) {
            __m512i xq = _mm512_maskz_loadu_epi8(km, a[k]->xq + i);
            __m512i is = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xq, wv), ws);
            __m512 dx = _mm512_maskz_loadu_ps(kl, a[k]->dxl + i / 4);
            acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), dx, acc[k]);
        }
    }
    for (int k = 0; k < NT; k++)
        y[k][at] = _mm512_reduce_add_ps(acc[k]) * rs;
}

/* NT tokens (a compile-time constant at each call): rows by 16-row blocks from r0, R rows per
 * step with R = 4 up to 4 tokens and 2 above (NT * R accumulators). */
ALWAYS_INLINE void q8_rows_multi_nt(const cmf_qmat *m, const act8 *const *a, const int NT,
                                    float *const *y, uint64_t r0, uint64_t r1) {
    const int R = NT <= 4 ? 4 : 2;
    uint64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        __m512 v[8][16];
        for (int k = 0; k < 16; k += R)
            q8_rowN_multi(m, a, NT, r + (uint64_t)k, R, v, k);
        for (int t = 0; t < NT; t++)
            _mm512_storeu_ps(y[t] + (r - r0), cq_hsum16_avx512(v[t]));
    }
    for (; r < r1; r++)
        q8_row1_multi(m, a, NT, r, y, r - r0);
}

void cq_avx512_q8_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                   float *const *y, uint64_t r0, uint64_t r1) {
    if (cq_avx512_q8_amd()) {
        cq_amd_q8dec_tok_matvec_multi(m, buf, n, y, r0, r1);
        return;
    }
    const act8 *a[CMF_TOK8_MULTI_MAX];
    for (size_t t = 0; t < n; t++)
        a[t] = buf[t];
    /* at most 8 tokens per pass: the weights of a pass's 16 rows are in cache for the next */
    for (size_t t = 0; t < n;) {
        size_t nt = n - t;
        const act8 *const *at = a + t;
        float *const *yt = y + t;
        switch (nt > 8 ? 8 : nt) {
        case 1:
            q8_rows_multi_nt(m, at, 1, yt, r0, r1);
            break;
        case 2:
            q8_rows_multi_nt(m, at, 2, yt, r0, r1);
            break;
        case 3:
            q8_rows_multi_nt(m, at, 3, yt, r0, r1);
            break;
        case 4:
            q8_rows_multi_nt(m, at, 4, yt, r0, r1);
            break;
        case 5:
            q8_rows_multi_nt(m, at, 5, yt, r0, r1);
            break;
        case 6:
            q8_rows_multi_nt(m, at, 6, yt, r0, r1);
            break;
        case 7:
            q8_rows_multi_nt(m, at, 7, yt, r0, r1);
            break;
        default:
            q8_rows_multi_nt(m, at, 8, yt, r0, r1);
            break;
        }
        t += nt > 8 ? 8 : nt;
    }
}
