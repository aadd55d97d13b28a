/* attn_decode_avx512.c - decode attention units with AVX-512 (attn_decode.h): the shared body
 * of attn_decode_simd.h at 16 lanes: a key tile row is one vector; the value slices (64
 * outputs for groups up to 4, 32 up to 8) run to hd with masked loads; the first key tile and,
 * with the last, the values pass's first rows are fetched ahead. */
#include <immintrin.h>
#include <math.h>

#include "engine/attn_decode.h"
#include "engine/attn_math_avx512.h"

#define VW 16 /* floats per vector: a key tile row */
/* Value rows fetched ahead (cq_kv_prefetch_row): decode reads this layer's cache from L3 or
 * DRAM (the weights stream evicts it). Measured for key and value rows alike before the key
 * tiles: on the Zen 5 guest 48 beat 16 (SmolLM2 at 512-640 positions: +1 to +2 % decode for
 * q8, +0.6 to +5 % for q4tp); on the Intel guest 24 took 7 to 8 % less time per attention job
 * than 48 for SmolLM2 and Qwen2.5-0.5B-shape, 2 to 4 % for Gemma 3 (no prefetch: +40 %). */
#define PF_ROWS 24
#define AI      static inline __attribute__((always_inline))

typedef __m512 vec;
typedef __mmask16 lmask;
#define ALL_LANES               ((__mmask16)0xFFFF)
#define V_ZERO()                _mm512_setzero_ps()
#define V_SET1(x)               _mm512_set1_ps(x)
#define V_BCAST(p)              _mm512_set1_ps(*(p))
#define V_LOADU(p)              _mm512_loadu_ps(p)
#define V_LOADU_MASKED(mk, p)   _mm512_maskz_loadu_ps(mk, p)
#define V_STOREU(p, v)          _mm512_storeu_ps(p, v)
#define V_MUL(x, y)             _mm512_mul_ps(x, y)
#define V_DIV(x, y)             _mm512_div_ps(x, y)
#define V_FMADD(x, y, z)        _mm512_fmadd_ps(x, y, z)
#define V_TANH(x)               tanh16(x)
#define V_ADD(x, y)             _mm512_add_ps(x, y)
#define LD(ld, p, i, mk)        ld(p, i, mk)
#define V_STORE_LANES(p, mk, v) _mm512_mask_storeu_ps(p, mk, v)
/* key tiles: at least 8 accumulators (FMA latency x ports) up to 8 heads, 32 zmm registers */
#define TILE_MAX_NS           8
#define TILE_NS(G)            ((G) == 1 ? 8 : (G) <= 3 ? 4 : (G) == 4 ? 2 : 1)
#define VALUES_MAX_G          8
#define VALUES_NV(G)          ((G) <= 4 ? 4 : 2)
#define VALUES_W_FIRST(G, NV) 0
#define MASKED_TAIL           1
#define PREFETCH_AHEAD        1
#define TIER_FN               cq_attn_decode_unit_avx512
#define TIER_OPS              (&cq_attn_ops_avx512)

static inline __mmask16 first_lanes(uint32_t n) {
    return n >= VW ? ALL_LANES : (__mmask16)((1u << n) - 1);
}

/* The lanes of the vector at element i of a row of hd floats: all or none (hd % 16 == 0). */
#define lanes_upto(i, hd) ((i) < (hd) ? ALL_LANES : 0)

/* Head g's scores become e^(score - m) (times the value scale for q8, vs[j]); m and the sum
 * of the exponentials go to the partial. A NaN score does not raise m, as in the scalar
 * reference. */
AI void softmax(const cq_attn_decode_args *a, uint32_t cnt, float *s, const float *vs,
                float *part) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (uint32_t j = 0; j < cnt; j += VW)
        mx = _mm512_max_ps(_mm512_mask_loadu_ps(mx, first_lanes(cnt - j), s + j), mx);
    float m = _mm512_reduce_max_ps(mx);
    __m512 mv = _mm512_set1_ps(m), sum = _mm512_setzero_ps();
    for (uint32_t j = 0; j < cnt; j += VW) {
        __mmask16 mk = first_lanes(cnt - j);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), mv));
        sum = _mm512_mask_add_ps(sum, mk, sum, e);
        if (vs) e = _mm512_mul_ps(e, _mm512_maskz_loadu_ps(mk, vs + j));
        _mm512_mask_storeu_ps(s + j, mk, e);
    }
    part[a->kv->hd] = m, part[a->kv->hd + 1] = _mm512_reduce_add_ps(sum);
}

#include "engine/attn_decode_simd.h"
