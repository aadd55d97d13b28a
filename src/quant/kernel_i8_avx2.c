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

#include "quant/hsum_avx2.h"
#include "quant/quant32_avx2.h"
#include "quant/kernel_i8dec.h"
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
    a->mem = cq_kernel_scratch(CQ_SCRATCH_ACT, n * (cols + cols + cols / 8));
    if (!a->mem) return false;
    a->xq = (int8_t *)a->mem;
    a->corr = (int32_t *)(void *)(a->mem + n * cols);
    a->dx = (float *)(void *)(a->mem + 2 * n * cols);
    return true;
}

/* Per group: the codes (q4: reordered [even elements | odd elements] by a byte shuffle within
 * each 16-byte half and a qword permute) and dx; q4 also corr = 8 * the sum of each lane's 4
 * codes (vpmaddubsw + vpmaddwd against ones). Decode runs this once per matrix per thread
 * per token, so it stays in registers. */
static void prep(act8 *a, const float *X, size_t n, size_t ldx, bool q4) {
    uint64_t G = a->cols / 32;
    const __m256i eo = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                        4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (size_t t = 0; t < n; t++)
        for (uint64_t g = 0; g < G; g++) {
            int8_t *o = a->xq + t * a->cols + 32 * g;
            __m256i q = cq_avx2_quant32(X + t * ldx + 32 * g, &a->dx[t * G + g]);
            if (q4) {
                q = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(q, eo), _MM_SHUFFLE(3, 1, 2, 0));
                __m256i l4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
                _mm256_storeu_si256((__m256i *)(void *)(a->corr + t * (a->cols / 4) + 8 * g),
                                    _mm256_slli_epi32(l4, 3));
            }
            _mm256_storeu_si256((__m256i *)(void *)o, q);
        }
}

#define MAXT 4
/* q8_row, one token: rows stepped through together (divide 8); level with 8 (vpmaddubsw form).
 * The q4 family's one-token kernels are kernel_i8dec_avx2.c. */
#define Q8_ROWS_TOGETHER 4
#define ALWAYS_INLINE    static inline __attribute__((always_inline))
_Static_assert(Q8_ROWS_TOGETHER % 2 == 0, "q8_rowN prefetches N / 2 lines per 32 columns");

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
ALWAYS_INLINE void q4_nib_dt(const cmf_qmat *m, const cmf_dtype dt, uint64_t r, uint64_t g,
                             const float *lad, uint64_t *cw, const uint8_t **nib, float *s) {
    const uint64_t G = m->groups;
    if (dt == CMF_DT_Q4_TILED) {
        *nib = m->quants + (r * G + g) * CQ_Q4T_TILE;
        *s = h16(*nib);
        *nib += 2;
    } else if (dt == CMF_DT_Q4TP) {
        if ((g & 7) == 0) *cw = cq_q4tp_codes8(m, r, g);
        *nib = m->quants + (r * G + g) * 16;
        *s = lad[*cw & 31];
        *cw >>= 5;
    } else {
        *nib = m->quants + (r * G + g) * 16;
        *s = h16(m->scales + 2 * (r * G + g));
    }
}

ALWAYS_INLINE void q4_nib(const cmf_qmat *m, uint64_t r, uint64_t g, const float *lad, uint64_t *cw,
                          const uint8_t **nib, float *s) {
    q4_nib_dt(m, m->dtype, r, g, lad, cw, nib, s);
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

/* q8_row, one token: as q4_rowN, the activations' group and its scale shared by N rows. The
 * weights are widened to 16 bits and multiplied by the activations widened once per call
 * (x16) with vpmaddwd: 4 multiply-port operations per 32 weights instead of 6 for
 * |w| x sign(w)·xq (vpabsb, vpsignb, vpmaddubsw, vpmaddwd), which bound this loop: +11-15 %
 * in cache over that form stepped the same way. */
ALWAYS_INLINE void q8_rowN(const cmf_qmat *m, const act8 *a, const int16_t *x16, uint64_t r,
                           const int N, __m256 *v) {
    const uint64_t G = m->groups, C = m->cols;
    const uint8_t *w0 = m->quants + r * C;
    __m256 acc[Q8_ROWS_TOGETHER];
    for (int k = 0; k < N; k++)
        acc[k] = _mm256_setzero_ps();
    for (uint64_t g = 0; g < G; g++) {
        __m256i xl = _mm256_loadu_si256((const __m256i *)(x16 + 32 * g));
        __m256i xh = _mm256_loadu_si256((const __m256i *)(x16 + 32 * g + 16));
        __m256 dx = _mm256_set1_ps(a->dx[g]);
        cq_prefetch_span(w0, (uint64_t)N, 32 * g, (unsigned)N / 2); /* N * 32 bytes */
        for (int k = 0; k < N; k++) {
            const uint8_t *w = w0 + (uint64_t)k * C + 32 * g;
            __m256i wl = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w));
            __m256i wh = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 16)));
            __m256i is = _mm256_add_epi32(_mm256_madd_epi16(wl, xl), _mm256_madd_epi16(wh, xh));
            acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), dx, acc[k]);
        }
    }
    for (int k = 0; k < N; k++)
        v[k] = _mm256_mul_ps(acc[k], _mm256_set1_ps(h16(m->scales + 2 * (r + (uint64_t)k))));
}

static void q8_rows_one_token(const cmf_qmat *m, const act8 *a, float *Y, uint64_t r0,
                              uint64_t r1) {
    uint64_t r = r0;
    int16_t *x16 =
        cq_kernel_scratch(CQ_SCRATCH_AUX, m->cols * sizeof *x16); /* else a row at a time */
    if (x16) {
        for (uint64_t i = 0; i < m->cols; i++)
            x16[i] = a->xq[i];
        for (; r + 8 <= r1; r += 8) {
            __m256 v[8];
            for (int k = 0; k < 8; k += Q8_ROWS_TOGETHER)
                q8_rowN(m, a, x16, r + (uint64_t)k, Q8_ROWS_TOGETHER, v + k);
            _mm256_storeu_ps(Y + (r - r0), cq_hsum8x8_avx2(v));
        }
    }
    if (r < r1) q8_nt(m, a, 0, 1, Y + (r - r0), 1, r, r1);
}

bool cq_avx2_i8_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                       size_t ldy, uint64_t r0, uint64_t r1) {
    /* one q4 token: the pair kernels of kernel_i8dec_avx2.c */
    if (n == 1 && cq_avx2_i8dec_matvec(m, X, Y, r0, r1)) return true;
    act8 a;
    if (m->cols % 32 || !act8_alloc(&a, n, m->cols)) return false;
    bool q8 = m->dtype == CMF_DT_Q8_ROW;
    prep(&a, X, n, ldx, !q8);
    if (n == 1 && q8) {
        q8_rows_one_token(m, &a, Y, r0, r1);
        return true;
    }
    size_t t = 0;
    for (; t + 4 <= n; t += 4)
        q8 ? q8_nt(m, &a, t, 4, Y, ldy, r0, r1) : q4_nt(m, &a, t, 4, Y, ldy, r0, r1);
    for (; t + 2 <= n; t += 2)
        q8 ? q8_nt(m, &a, t, 2, Y, ldy, r0, r1) : q4_nt(m, &a, t, 2, Y, ldy, r0, r1);
    for (; t < n; t++)
        q8 ? q8_nt(m, &a, t, 1, Y, ldy, r0, r1) : q4_nt(m, &a, t, 1, Y, ldy, r0, r1);
    return true;
}
