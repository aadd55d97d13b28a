/* attn_decode_avx2.c - decode attention units with AVX2 + FMA + F16C (attn_decode.h): the
 * shared body of attn_decode_simd.h at 8 lanes: a key tile row is two vectors; values in
 * passes of up to 4 heads, whole slices of 32 (up to 3 heads) or 16 (4) outputs, then single
 * vectors. No masked loads or stores: on AMD cores each masked store costs many cycles. */
#include <immintrin.h>
#include <math.h>

#include "engine/attn_decode.h"
#include "engine/attn_math_avx2.h"

#define VW      8  /* floats per vector: half a key tile row */
#define PF_ROWS 24 /* value rows fetched ahead (cq_kv_prefetch_row); see attn_decode_avx512.c */
#define AI      static inline __attribute__((always_inline))

typedef __m256 vec;
typedef int lmask; /* no lane masks: whole vectors, tails handled by the loops */
#define ALL_LANES               0
#define lanes_upto(i, hd)       ((void)(i), (void)(hd), 0)
#define V_ZERO()                _mm256_setzero_ps()
#define V_SET1(x)               _mm256_set1_ps(x)
#define V_BCAST(p)              _mm256_broadcast_ss(p)
#define V_LOADU(p)              _mm256_loadu_ps(p)
#define V_STOREU(p, v)          _mm256_storeu_ps(p, v)
#define V_MUL(x, y)             _mm256_mul_ps(x, y)
#define V_DIV(x, y)             _mm256_div_ps(x, y)
#define V_FMADD(x, y, z)        _mm256_fmadd_ps(x, y, z)
#define V_TANH(x)               tanh8(x)
#define V_ADD(x, y)             _mm256_add_ps(x, y)
#define LD(ld, p, i, mk)        ((void)(mk), ld(p, i))
#define V_STORE_LANES(p, mk, v) ((void)(mk), _mm256_storeu_ps(p, v))
/* key tiles, a half (8 keys) per pass: 8 or more accumulators where the 16 ymm registers
 * hold them beside the key vector and a broadcast (7 heads: 7) */
#define TILE_MAX_NS 8
#define TILE_NS(G)  ((G) == 1 ? 8 : (G) == 2 ? 4 : (G) == 3 ? 4 : (G) <= 6 ? 2 : 1)
/* weights first where the 16 registers hold the sums, the weights and one value vector: at
 * G 3 that allows slices of 4 vectors, 12 independent sums (2 FMA ports x 4 cycles of latency
 * want 8 or more); a SmolLM2-shaped unit 7 % faster on Zen 3 */
/* groups of 5-8 in two passes (7: 4 + 3): a single pass of 7 heads took 1-vector slices, and
 * 7 broadcasts per key for each of them (Qwen shape: the unit 1.13x faster in two) */
#define VALUES_MAX_G          4
#define VALUES_NV(G)          ((G) <= 3 ? 4 : (G) <= 6 ? 2 : 1)
#define VALUES_W_FIRST(G, NV) ((G) * (NV) + (G) < 16)
#define MASKED_TAIL           0
#define PREFETCH_AHEAD        0
#define TIER_FN               cq_attn_decode_unit_avx2
#define TIER_OPS              (&cq_attn_ops_avx2)

/* Integer lane mask: lanes below n set. */
static inline __m256i lanes_below(uint32_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < VW ? n : VW)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* As in attn_decode_avx512.c, with blends for the lanes past cnt. Whole vectors are loaded and
 * stored: a chunk is a multiple of 16 keys, so they stay within the head's scores and the
 * value scales (lanes past cnt come out zero, whatever the memory held). AMD's masked stores
 * take many cycles each; plain ones with a blend cost one. */
AI void softmax(const cq_attn_decode_args *a, uint32_t cnt, float *s, const float *vs,
                float *part) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 mx = ninf;
    for (uint32_t j = 0; j < cnt; j += VW) {
        __m256 in = _mm256_castsi256_ps(lanes_below(cnt - j));
        __m256 x = _mm256_blendv_ps(ninf, _mm256_loadu_ps(s + j), in);
        mx = _mm256_max_ps(x, mx); /* a NaN x leaves mx */
    }
    float m = hmax(mx);
    __m256 mv = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    for (uint32_t j = 0; j < cnt; j += VW) {
        __m256 in = _mm256_castsi256_ps(lanes_below(cnt - j));
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv)), in);
        sum = _mm256_add_ps(sum, e);
        if (vs) e = _mm256_and_ps(_mm256_mul_ps(e, _mm256_loadu_ps(vs + j)), in);
        _mm256_storeu_ps(s + j, e);
    }
    part[a->kv->hd] = m, part[a->kv->hd + 1] = hsum(sum);
}

#include "engine/attn_decode_simd.h"
