/* attn_batch_avx512.c - batched prefill attention with AVX-512: 32 (token, head) rows per block,
 * one per lane of two vectors (attn_batch.h). Scores: the queries are transposed once per block
 * to Qt[i][row]; for eight keys at a time, each key row (widened once from f16 / q8) is
 * broadcast element by element against Qt, giving two 16-row score vectors per key without
 * horizontal sums (16 accumulators; 10 loads per 16 FMAs). Softmax runs across lanes with
 * exp16 (attn_math_avx512.h). Values: 4 rows x 64 outputs (16 accumulators) per pass, each value
 * row loaded and widened once per 4 rows. */
#include <immintrin.h>
#include <math.h>

#include "engine/attn_batch_impl.h"
#include "engine/attn_math_avx512.h"

#define L  32 /* rows per block: two vectors of 16 lanes */
#define VW 16 /* floats per vector */
#define KP CQ_ATTN_KEYS_PER_PASS
_Static_assert(KP == VW, "a pass's keys are one vector per element (keys_t)");
#define AI static inline __attribute__((always_inline))

void cq_attn_exp_avx512(float *x, size_t n) {
    size_t i = 0;
    for (; i + VW <= n; i += VW)
        _mm512_storeu_ps(x + i, exp16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 mk = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, mk, exp16(_mm512_maskz_loadu_ps(mk, x + i)));
    }
}

/* The final score of one key for 16 rows (half hh of the block): scaled, soft-capped, -inf
 * outside each row's range; stored to St and folded into the running maximum. */
AI __m512 score_out(const cq_attn_batch_args *a, __m512 s, float ks, __m512i lo, __m512i hi,
                    int32_t pos, float *st, __m512 mx) {
    /* the q8 scale multiplies the dot as in cq_attn_ops (scale after the dot) */
    __m512 x = _mm512_mul_ps(_mm512_mul_ps(s, _mm512_set1_ps(ks)), _mm512_set1_ps(a->scale));
    if (a->softcap > 0) {
        __m512 cap = _mm512_set1_ps(a->softcap);
        x = _mm512_mul_ps(tanh16(_mm512_div_ps(x, cap)), cap);
    }
    __m512i pv = _mm512_set1_epi32(pos);
    __mmask16 in = _mm512_cmple_epi32_mask(lo, pv) & _mm512_cmple_epi32_mask(pv, hi);
    x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), in, x);
    _mm512_storeu_ps(st, x);
    return _mm512_max_ps(x, mx); /* a NaN score does not raise the max, as in the scalar tier */
}

#define SCORE2(K)                                                                                  \
    do {                                                                                           \
        __m512 k_ = _mm512_set1_ps(kt[(size_t)i * KP + K]);                                        \
        s##K##a = _mm512_fmadd_ps(k_, q0, s##K##a), s##K##b = _mm512_fmadd_ps(k_, q1, s##K##b);    \
    } while (0)

#define SCORE1(K) s##K##a = _mm512_fmadd_ps(_mm512_set1_ps(kt[(size_t)i * KP + K]), q0, s##K##a)

/* kt[i * KP + k] for the kc keys from `slot` on, which lie in one tile (cq_attn_pass_keys):
 * per element the tile row, permuted so that they come first when the pass does not start the
 * tile (a call's first). Lanes from kc on hold other keys of the tile (never used). */
AI void keys_t(const cq_kv_layer *c, uint32_t kvh, uint32_t slot, ld_fn ld, float *kt) {
    const uint8_t *t = cq_kv_key_tile(c, slot, kvh);
    const uint32_t lane = slot % CQ_KV_TILE;
    const __m512i idx =
        _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32((int)lane));
    for (uint32_t i = 0; i < c->hd; i++) {
        __m512 v = ld(t, (size_t)i * CQ_KV_TILE, 0xFFFF);
        _mm512_storeu_ps(kt + (size_t)i * KP, lane ? _mm512_permutexvar_ps(idx, v) : v);
    }
}

/* Scores of the block's 32 rows against keys klo .. khi into St[key][row], a key tile per pass
 * and eight keys at a time
 * (16 accumulators: each broadcast key element feeds two FMAs); mx[0..1] get the per-row max.
 * With two == 0 (a block of at most 16 rows) only the first vector of rows is computed. */
AI void scores(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, const float *Qt,
               float *kbuf, float *St, ld_fn ld, __m512 *mx, int two) {
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, n = b->khi - b->klo + 1, slot = b->klo % c->slots;
    __m512i lo0 = _mm512_loadu_si512(b->lo), hi0 = _mm512_loadu_si512(b->hi);
    __m512i lo1 = _mm512_loadu_si512(b->lo + VW), hi1 = _mm512_loadu_si512(b->hi + VW);
    __m512 mx0 = _mm512_set1_ps(-INFINITY), mx1 = mx0;
    for (uint32_t j0 = 0, kc; j0 < n; j0 += kc) {
        kc = cq_attn_pass_keys(c, slot, n - j0);
        float ks[KP];
        keys_t(c, kvh, slot, ld, kbuf);
        for (uint32_t k = 0; k < KP; k++) {
            if (k >= kc) {
                ks[k] = 0;
                continue;
            }
            ks[k] = c->type == CORTIQ_KV_Q8 ? cq_attn_scale_at(c->ks, c, slot, kvh) : 1.0f;
            if (++slot == c->slots) slot = 0;
        }
        for (uint32_t h = 0; h < kc; h += 8) { /* 8 keys (16 accumulators) at a time */
            const float *kt = kbuf + h;
            __m512 s0a = _mm512_setzero_ps(), s1a = s0a, s2a = s0a, s3a = s0a, s4a = s0a, s5a = s0a,
                   s6a = s0a, s7a = s0a, s0b = s0a, s1b = s0a, s2b = s0a, s3b = s0a, s4b = s0a,
                   s5b = s0a, s6b = s0a, s7b = s0a;
            if (two) {
                for (uint32_t i = 0; i < hd; i++) {
                    __m512 q0 = _mm512_loadu_ps(Qt + (size_t)i * L),
                           q1 = _mm512_loadu_ps(Qt + (size_t)i * L + VW);
                    SCORE2(0);
                    SCORE2(1);
                    SCORE2(2);
                    SCORE2(3);
                    SCORE2(4);
                    SCORE2(5);
                    SCORE2(6);
                    SCORE2(7);
                }
            } else {
                for (uint32_t i = 0; i < hd; i++) {
                    __m512 q0 = _mm512_loadu_ps(Qt + (size_t)i * L);
                    SCORE1(0);
                    SCORE1(1);
                    SCORE1(2);
                    SCORE1(3);
                    SCORE1(4);
                    SCORE1(5);
                    SCORE1(6);
                    SCORE1(7);
                }
            }
            __m512 sa[8] = {s0a, s1a, s2a, s3a, s4a, s5a, s6a, s7a};
            __m512 sb[8] = {s0b, s1b, s2b, s3b, s4b, s5b, s6b, s7b};
            for (uint32_t k = 0; k < 8 && h + k < kc; k++) {
                int32_t pos = (int32_t)(b->klo + j0 + h + k);
                float *st = St + (size_t)(j0 + h + k) * L;
                mx0 = score_out(a, sa[k], ks[h + k], lo0, hi0, pos, st, mx0);
                if (two) mx1 = score_out(a, sb[k], ks[h + k], lo1, hi1, pos, st + VW, mx1);
            }
        }
    }
    mx[0] = mx0, mx[1] = mx1;
}

/* St becomes e^(score - max) (times the value scale for q8); sum[0..1] get the per-row sums of
 * the exponentials (sum[1] = 1 when !two). */
AI void exps(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, float *St,
             const __m512 *mx, __m512 *sum, int two) {
    const cq_kv_layer *c = a->kv;
    uint32_t n = b->khi - b->klo + 1, slot = b->klo % c->slots;
    __m512 sum0 = _mm512_setzero_ps(), sum1 = sum0;
    for (uint32_t j = 0; j < n; j++) {
        float *st = St + (size_t)j * L;
        __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(st), mx[0])), e1 = e0;
        if (two) e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(st + VW), mx[1]));
        sum0 = _mm512_add_ps(sum0, e0), sum1 = _mm512_add_ps(sum1, e1);
        if (c->type == CORTIQ_KV_Q8) {
            __m512 vs = _mm512_set1_ps(cq_attn_scale_at(c->vs, c, slot, kvh));
            e0 = _mm512_mul_ps(e0, vs), e1 = _mm512_mul_ps(e1, vs);
            if (++slot == c->slots) slot = 0;
        }
        _mm512_storeu_ps(st, e0);
        if (two) _mm512_storeu_ps(st + VW, e1);
    }
    sum[0] = sum0, sum[1] = two ? sum1 : _mm512_set1_ps(1.0f);
}

#define FMA4(A0, A1, A2, A3, W)                                                                    \
    do {                                                                                           \
        __m512 w_ = _mm512_set1_ps(W);                                                             \
        A0 = _mm512_fmadd_ps(w_, v0, A0), A1 = _mm512_fmadd_ps(w_, v1, A1);                        \
        A2 = _mm512_fmadd_ps(w_, v2, A2), A3 = _mm512_fmadd_ps(w_, v3, A3);                        \
    } while (0)
#define STORE4(R, A0, A1, A2, A3)                                                                  \
    do {                                                                                           \
        if (r0 + (R) < b->nr) {                                                                    \
            float *o_ = b->o[r0 + (R)] + i0;                                                       \
            __m512 s_ = _mm512_set1_ps(inv[r0 + (R)]);                                             \
            _mm512_mask_storeu_ps(o_, m0, _mm512_mul_ps(A0, s_));                                  \
            _mm512_mask_storeu_ps(o_ + 16, m1, _mm512_mul_ps(A1, s_));                             \
            _mm512_mask_storeu_ps(o_ + 32, m2, _mm512_mul_ps(A2, s_));                             \
            _mm512_mask_storeu_ps(o_ + 48, m3, _mm512_mul_ps(A3, s_));                             \
        }                                                                                          \
    } while (0)

/* Rows r0 .. r0+3, outputs i0 .. i0+63 (the masks cut the last chunk to hd): the weighted sum
 * of the values over the rows' key ranges, divided by the rows' sums. A key outside a row's
 * range is skipped for that row rather than weighted by 0, as the scalar tier never reads it. */
AI void values4(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, const float *St,
                const float *inv, uint32_t r0, uint32_t i0, ld_fn ld) {
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, left = (hd - i0) / VW;
    __mmask16 m0 = 0xFFFF, m1 = left > 1 ? 0xFFFF : 0, m2 = left > 2 ? 0xFFFF : 0,
              m3 = left > 3 ? 0xFFFF : 0;
    size_t off = i0 * cq_kv_elem_size(c->type);
    int32_t ul = b->lo[r0], uh = b->hi[r0 + 3], cl = b->lo[r0 + 3], ch = b->hi[r0];
    uint32_t slot = (uint32_t)ul % c->slots;
    __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00,
           a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00,
           a32 = a00, a33 = a00;
    /* the value rows advance by one slot and wrap to slot 0 (cq_kv_next) */
    const uint8_t *row = cq_kv_row(c, c->vb, slot, kvh) + off;
    const float *w = St + (size_t)(ul - (int32_t)b->klo) * L + r0;
    for (int32_t j = ul; j <= uh; j++, w += L) {
        __m512 v0 = ld(row, 0, m0), v1 = ld(row, 16, m1), v2 = ld(row, 32, m2),
               v3 = ld(row, 48, m3);
        if (j >= cl && j <= ch) {
            FMA4(a00, a01, a02, a03, w[0]);
            FMA4(a10, a11, a12, a13, w[1]);
            FMA4(a20, a21, a22, a23, w[2]);
            FMA4(a30, a31, a32, a33, w[3]);
        } else {
            if (j >= b->lo[r0] && j <= b->hi[r0]) FMA4(a00, a01, a02, a03, w[0]);
            if (j >= b->lo[r0 + 1] && j <= b->hi[r0 + 1]) FMA4(a10, a11, a12, a13, w[1]);
            if (j >= b->lo[r0 + 2] && j <= b->hi[r0 + 2]) FMA4(a20, a21, a22, a23, w[2]);
            if (j >= b->lo[r0 + 3] && j <= b->hi[r0 + 3]) FMA4(a30, a31, a32, a33, w[3]);
        }
        row = cq_kv_next(c, c->vb, &slot, kvh, row, off);
    }
    STORE4(0, a00, a01, a02, a03);
    STORE4(1, a10, a11, a12, a13);
    STORE4(2, a20, a21, a22, a23);
    STORE4(3, a30, a31, a32, a33);
}

AI void block_run(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, float *scratch,
                  ld_fn ld) {
    uint32_t hd = a->kv->hd;
    float *Qt = scratch, *kbuf = Qt + (size_t)CQ_ATTN_BATCH_ROWS * hd, *St = kbuf + (size_t)KP * hd;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t i = 0; i < hd; i++)
            Qt[(size_t)i * L + l] = b->q[l][i];
    __m512 mx[2], sum[2];
    if (b->nr > VW) {
        scores(a, kvh, b, Qt, kbuf, St, ld, mx, 1);
        exps(a, kvh, b, St, mx, sum, 1);
    } else { /* a short block (decode, the range's tail): half the lanes */
        scores(a, kvh, b, Qt, kbuf, St, ld, mx, 0);
        exps(a, kvh, b, St, mx, sum, 0);
    }
    float inv[L];
    _mm512_storeu_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.0f), sum[0]));
    _mm512_storeu_ps(inv + VW, _mm512_div_ps(_mm512_set1_ps(1.0f), sum[1]));
    for (uint32_t r0 = 0; r0 < b->nr; r0 += 4)
        for (uint32_t i0 = 0; i0 < hd; i0 += 64)
            values4(a, kvh, b, St, inv, r0, i0, ld);
}

/* one copy of the block per cache type, so each ld_* inlines */
static void block_f32(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, float *s) {
    block_run(a, kvh, b, s, ld_f32);
}
static void block_f16(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, float *s) {
    block_run(a, kvh, b, s, ld_f16);
}
static void block_q8(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, float *s) {
    block_run(a, kvh, b, s, ld_q8);
}

void cq_attn_batch_avx512(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin,
                          uint32_t t_end, float *scratch) {
    if (a->kv->hd % VW) {
        cq_attn_batch_avx2(a, kvh, t_begin, t_end, scratch);
        return;
    }
    void (*run)(const cq_attn_batch_args *, uint32_t, const cq_attn_block *, float *) =
        a->kv->type == CORTIQ_KV_F32   ? block_f32
        : a->kv->type == CORTIQ_KV_F16 ? block_f16
                                       : block_q8;
    size_t rows =
        (size_t)(t_end - t_begin) * cq_attn_heads_of(a->kv_first, a->n_heads, a->kv->n_kv, kvh);
    cq_attn_block b;
    for (size_t r0 = 0; r0 < rows; r0 += L) {
        cq_attn_block_fill(&b, a, kvh, t_begin, r0, rows, L);
        run(a, kvh, &b, scratch);
    }
}
