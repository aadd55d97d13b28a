/* kernel_i8_avx2.c - int8-activation paths (CMF_KF_INT8_ACT) for AVX2 machines: q4_tiled,
 * q4_block, q4tp and q8_row with cols % 32 == 0.
 *
 * Activations are quantized per 32-group (dx = absmax/127, xq in [-127, 127]). One group per
 * 256-bit vector: vpmaddubsw multiplies unsigned by signed bytes into 16-bit pairs (which
 * cannot saturate here: 2*15*127 and 2*127*127 fit), vpmaddwd with ones sums them to 8 int32
 * lanes. For q4 the nibble bytes give [low nibbles | high nibbles] = [even | odd] elements,
 * so the activations are stored in that order and the -8 offset is removed with a
 * precomputed 8*sum(xq) per lane. For q8 the weights' signs move to the activations
 * (|w| times sign(w)*xq). */
#include <immintrin.h>
#include <stdlib.h>

#include "quant/kernel_impl.h"

static inline float h16(const uint8_t *p) {
    return _cvtsh_ss(ld_u16(p));
}

typedef struct {
    uint8_t *mem;
    int8_t *xq;    /* n * cols */
    int32_t *corr; /* n * cols/4: 8 * (sum of the lane's 4 values), q4 order */
    float *dx;     /* n * cols/32 */
    uint64_t cols;
} act8;

static bool act8_alloc(act8 *a, size_t n, uint64_t cols) {
    a->cols = cols;
    a->mem = cq_kernel_no_scratch
                 ? NULL
                 : aligned_alloc(32, (n * (cols + cols + cols / 8) + 31) / 32 * 32);
    if (!a->mem) return false;
    a->xq = (int8_t *)a->mem;
    a->corr = (int32_t *)(void *)(a->mem + n * cols);
    a->dx = (float *)(void *)(a->mem + 2 * n * cols);
    return true;
}

static float hsum_max8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float quant32(const float *x, int8_t *q) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < 32; i += 8)
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    float amax = hsum_max8(mx);
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    __m256 vi = _mm256_set1_ps(inv);
    for (int i = 0; i < 32; i += 8) {
        __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(w, w));
    }
    return amax / 127.0f;
}

static void prep(act8 *a, const float *X, size_t n, size_t ldx, bool q4) {
    uint64_t G = a->cols / 32;
    int8_t q[32];
    for (size_t t = 0; t < n; t++)
        for (uint64_t g = 0; g < G; g++) {
            int8_t *o = a->xq + t * a->cols + 32 * g;
            a->dx[t * G + g] = quant32(X + t * ldx + 32 * g, q4 ? q : o);
            if (!q4) continue;
            for (int k = 0; k < 16; k++) {
                o[k] = q[2 * k];
                o[16 + k] = q[2 * k + 1];
            }
            for (int l = 0; l < 8; l++)
                a->corr[t * (a->cols / 4) + 8 * g + l] =
                    8 * (o[4 * l] + o[4 * l + 1] + o[4 * l + 2] + o[4 * l + 3]);
        }
}

#define MAXT          4
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Group g of row r into acc[0..NT) (nibbles nib, weight scale s). */
ALWAYS_INLINE void q4_group(const act8 *a, const uint8_t *nib, float s, uint64_t g, size_t t0,
                            const size_t NT, __m256 *acc) {
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const uint64_t C = a->cols, G = C / 32;
    _mm_prefetch((const char *)nib + CQ_PF_DIST, _MM_HINT_T0);
    __m128i b = _mm_loadu_si128((const __m128i *)nib);
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m4);
    for (size_t k = 0; k < NT; k++) {
        size_t t = t0 + k;
        __m256i xq = _mm256_loadu_si256((const __m256i *)(a->xq + t * C + 32 * g));
        __m256i is = _mm256_madd_epi16(_mm256_maddubs_epi16(v, xq), ones);
        is = _mm256_sub_epi32(is,
                              _mm256_loadu_si256((const __m256i *)(a->corr + t * (C / 4) + 8 * g)));
        acc[k] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(s * a->dx[t * G + g]), acc[k]);
    }
}

/* Nibbles and scale of group g (groups visited in order: q4tp reads 8 codes per 5 bytes). */
ALWAYS_INLINE void q4_nib(const cmf_qmat *m, uint64_t r, uint64_t g, const float *lad, uint64_t *cw,
                          const uint8_t **nib, float *s) {
    const uint64_t G = m->groups;
    if (m->dtype == CMF_DT_Q4_TILED) {
        *nib = m->quants + (r * G + g) * CQ_Q4T_TILE;
        *s = h16(*nib);
        *nib += 2;
    } else if (m->dtype == CMF_DT_Q4TP) {
        if ((g & 7) == 0) *cw = cq_q4tp_codes8(m, r, g);
        *nib = m->quants + (r * G + g) * 16;
        *s = lad[*cw & 31];
        *cw >>= 5;
    } else {
        *nib = m->quants + (r * G + g) * 16;
        *s = h16(m->scales + 2 * (r * G + g));
    }
}

ALWAYS_INLINE void q4_nt(const cmf_qmat *m, const act8 *a, size_t t0, const size_t NT, float *Y,
                         size_t ldy, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups;
    float lad[32];
    for (uint64_t r = r0; r < r1; r++) {
        if (m->dtype == CMF_DT_Q4TP) cq_avx2_q4tp_ladder(m, r, lad);
        __m256 acc0[MAXT], acc1[MAXT]; /* even / odd groups: two FMA chains per token */
        for (size_t k = 0; k < NT; k++)
            acc0[k] = acc1[k] = _mm256_setzero_ps();
        const uint8_t *nib;
        float s;
        uint64_t g = 0, cw = 0;
        for (; g + 2 <= G; g += 2) {
            q4_nib(m, r, g, lad, &cw, &nib, &s);
            q4_group(a, nib, s, g, t0, NT, acc0);
            q4_nib(m, r, g + 1, lad, &cw, &nib, &s);
            q4_group(a, nib, s, g + 1, t0, NT, acc1);
        }
        if (g < G) {
            q4_nib(m, r, g, lad, &cw, &nib, &s);
            q4_group(a, nib, s, g, t0, NT, acc0);
        }
        for (size_t k = 0; k < NT; k++)
            Y[(t0 + k) * ldy + (r - r0)] = hsum8(_mm256_add_ps(acc0[k], acc1[k]));
    }
}

ALWAYS_INLINE void q8_group(const act8 *a, const uint8_t *w, uint64_t g, size_t t0, const size_t NT,
                            __m256 *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const uint64_t C = a->cols, G = C / 32;
    _mm_prefetch((const char *)w + 32 * g + CQ_PF_DIST, _MM_HINT_T0);
    __m256i wv = _mm256_loadu_si256((const __m256i *)(w + 32 * g)), aw = _mm256_abs_epi8(wv);
    for (size_t k = 0; k < NT; k++) {
        size_t t = t0 + k;
        __m256i xq =
            _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a->xq + t * C + 32 * g)), wv);
        __m256i is = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xq), ones);
        acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(a->dx[t * G + g]), acc[k]);
    }
}

ALWAYS_INLINE void q8_nt(const cmf_qmat *m, const act8 *a, size_t t0, const size_t NT, float *Y,
                         size_t ldy, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups, C = m->cols;
    for (uint64_t r = r0; r < r1; r++) {
        const uint8_t *w = m->quants + r * C;
        __m256 acc0[MAXT], acc1[MAXT];
        for (size_t k = 0; k < NT; k++)
            acc0[k] = acc1[k] = _mm256_setzero_ps();
        uint64_t g = 0;
        for (; g + 2 <= G; g += 2) {
            q8_group(a, w, g, t0, NT, acc0);
            q8_group(a, w, g + 1, t0, NT, acc1);
        }
        if (g < G) q8_group(a, w, g, t0, NT, acc0);
        float rs = h16(m->scales + 2 * r);
        for (size_t k = 0; k < NT; k++)
            Y[(t0 + k) * ldy + (r - r0)] = hsum8(_mm256_add_ps(acc0[k], acc1[k])) * rs;
    }
}

bool cq_avx2_i8_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                       size_t ldy, uint64_t r0, uint64_t r1) {
    act8 a;
    if (m->cols % 32 || !act8_alloc(&a, n, m->cols)) return false;
    bool q8 = m->dtype == CMF_DT_Q8_ROW;
    prep(&a, X, n, ldx, !q8);
    size_t t = 0;
    for (; t + 4 <= n; t += 4)
        q8 ? q8_nt(m, &a, t, 4, Y, ldy, r0, r1) : q4_nt(m, &a, t, 4, Y, ldy, r0, r1);
    for (; t + 2 <= n; t += 2)
        q8 ? q8_nt(m, &a, t, 2, Y, ldy, r0, r1) : q4_nt(m, &a, t, 2, Y, ldy, r0, r1);
    for (; t < n; t++)
        q8 ? q8_nt(m, &a, t, 1, Y, ldy, r0, r1) : q4_nt(m, &a, t, 1, Y, ldy, r0, r1);
    free(a.mem);
    return true;
}
