/* attn_batch_avx2.c - batched prefill attention with AVX2 + FMA + F16C: the AVX-512 tier's
 * design (attn_batch_avx512.c) with 8 rows per block, one per lane, and 4 rows x 16 outputs
 * per value pass (16 registers). Needs hd % 8 == 0; otherwise the scalar tier runs. */
#include <immintrin.h>
#include <math.h>

#include "engine/attn_batch_impl.h"
#include "engine/attn_math_avx2.h"

#define L  8
#define KP CQ_ATTN_KEYS_PER_PASS
_Static_assert(KP == 2 * L, "a pass's keys are two vectors per element (keys_t)");
#define AI static inline __attribute__((always_inline))

void cq_attn_exp_avx2(float *x, size_t n) {
    size_t i = 0;
    for (; i + L <= n; i += L)
        _mm256_storeu_ps(x + i, exp8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float t[L] = {0};
        for (size_t k = i; k < n; k++)
            t[k - i] = x[k];
        _mm256_storeu_ps(t, exp8(_mm256_loadu_ps(t)));
        for (size_t k = i; k < n; k++)
            x[k] = t[k - i];
    }
}

/* kt[i * KP + k] for the kc keys from `slot` on, which lie in one tile (cq_attn_pass_keys):
 * per element the tile row, as it is when the pass starts the tile (every pass but a call's
 * first), else moved down through a bounce buffer. Lanes from kc on hold other keys of the
 * tile or zeros (never used). */
AI void keys_t(const cq_kv_layer *c, uint32_t kvh, uint32_t slot, ld_fn ld, float *kt) {
    const uint8_t *t = cq_kv_key_tile(c, slot, kvh);
    const uint32_t lane = slot % CQ_KV_TILE;
    if (!lane) {
        for (uint32_t i = 0; i < c->hd; i++) {
            _mm256_storeu_ps(kt + (size_t)i * KP, ld(t, (size_t)i * CQ_KV_TILE));
            _mm256_storeu_ps(kt + (size_t)i * KP + L, ld(t, (size_t)i * CQ_KV_TILE + L));
        }
        return;
    }
    _Alignas(32) float row[2 * CQ_KV_TILE];
    _mm256_store_ps(row + CQ_KV_TILE, _mm256_setzero_ps());
    _mm256_store_ps(row + CQ_KV_TILE + L, _mm256_setzero_ps());
    for (uint32_t i = 0; i < c->hd; i++) {
        _mm256_store_ps(row, ld(t, (size_t)i * CQ_KV_TILE));
        _mm256_store_ps(row + L, ld(t, (size_t)i * CQ_KV_TILE + L));
        _mm256_storeu_ps(kt + (size_t)i * KP, _mm256_loadu_ps(row + lane));
        _mm256_storeu_ps(kt + (size_t)i * KP + L, _mm256_loadu_ps(row + lane + L));
    }
}

/* see scores() in attn_batch_avx512.c */
AI __m256 scores(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, const float *Qt,
                 float *kbuf, float *St, ld_fn ld) {
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, n = b->khi - b->klo + 1, slot = b->klo % c->slots;
    __m256i lo = _mm256_loadu_si256((const __m256i *)b->lo),
            hi = _mm256_loadu_si256((const __m256i *)b->hi);
    __m256 mx = _mm256_set1_ps(-INFINITY);
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
        for (uint32_t h = 0; h < kc; h += 8) { /* 8 keys (accumulators) at a time */
            const float *kt = kbuf + h;
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0,
                   s7 = s0;
            for (uint32_t i = 0; i < hd; i++) {
                __m256 qv = _mm256_loadu_ps(Qt + (size_t)i * L);
                const float *e = kt + (size_t)i * KP;
                s0 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 0), qv, s0);
                s1 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 1), qv, s1);
                s2 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 2), qv, s2);
                s3 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 3), qv, s3);
                s4 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 4), qv, s4);
                s5 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 5), qv, s5);
                s6 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 6), qv, s6);
                s7 = _mm256_fmadd_ps(_mm256_broadcast_ss(e + 7), qv, s7);
            }
            __m256 s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
            for (uint32_t k = 0; k < 8 && h + k < kc; k++) {
                __m256 x = _mm256_mul_ps(_mm256_mul_ps(s[k], _mm256_set1_ps(ks[h + k])),
                                         _mm256_set1_ps(a->scale));
                if (a->softcap > 0) {
                    __m256 cap = _mm256_set1_ps(a->softcap);
                    x = _mm256_mul_ps(tanh8(_mm256_div_ps(x, cap)), cap);
                }
                __m256i pos = _mm256_set1_epi32((int32_t)(b->klo + j0 + h + k));
                __m256i out =
                    _mm256_or_si256(_mm256_cmpgt_epi32(lo, pos), _mm256_cmpgt_epi32(pos, hi));
                x = _mm256_blendv_ps(x, _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(out));
                _mm256_storeu_ps(St + (size_t)(j0 + h + k) * L, x);
                mx = _mm256_max_ps(x, mx); /* a NaN score does not raise the max, as the scalar
                                              tier's */
            }
        }
    }
    return mx;
}

AI __m256 exps(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, float *St,
               __m256 mx) {
    const cq_kv_layer *c = a->kv;
    uint32_t n = b->khi - b->klo + 1, slot = b->klo % c->slots;
    __m256 sum = _mm256_setzero_ps();
    for (uint32_t j = 0; j < n; j++) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(St + (size_t)j * L), mx));
        sum = _mm256_add_ps(sum, e);
        if (c->type == CORTIQ_KV_Q8) {
            e = _mm256_mul_ps(e, _mm256_set1_ps(cq_attn_scale_at(c->vs, c, slot, kvh)));
            if (++slot == c->slots) slot = 0;
        }
        _mm256_storeu_ps(St + (size_t)j * L, e);
    }
    return sum;
}

#define FMA2(A0, A1, W)                                                                            \
    do {                                                                                           \
        __m256 w_ = _mm256_broadcast_ss(W);                                                        \
        A0 = _mm256_fmadd_ps(w_, v0, A0), A1 = _mm256_fmadd_ps(w_, v1, A1);                        \
    } while (0)
#define STORE2(R, A0, A1)                                                                          \
    do {                                                                                           \
        if (r0 + (R) < b->nr) {                                                                    \
            float *o_ = b->o[r0 + (R)] + i0;                                                       \
            __m256 s_ = _mm256_set1_ps(inv[r0 + (R)]);                                             \
            _mm256_storeu_ps(o_, _mm256_mul_ps(A0, s_));                                           \
            if (two) _mm256_storeu_ps(o_ + 8, _mm256_mul_ps(A1, s_));                              \
        }                                                                                          \
    } while (0)

/* see values4() in attn_batch_avx512.c; outputs i0 .. i0+15 (i0 .. i0+7 when !two). The keys
 * every one of the four rows reads (the middle of the range) go in runs within a cache block,
 * without the per-row range tests or the ring's wrap, which cost as much as the 8 FMAs of a
 * key; the same sums in the same order as one loop over all the keys. */
AI void values4(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, const float *St,
                const float *inv, uint32_t r0, uint32_t i0, ld_fn ld) {
    const cq_kv_layer *c = a->kv;
    int two = c->hd - i0 >= 16;
    size_t off = i0 * cq_kv_elem_size(c->type), stride = cq_kv_stride(c);
    int32_t ul = b->lo[r0], uh = b->hi[r0 + 3], cl = b->lo[r0 + 3], ch = b->hi[r0];
    /* keys [f0, f1] are in all four rows' ranges (none when f0 > f1) */
    int32_t f0 = cl > ul ? cl : ul, f1 = ch < uh ? ch : uh, e1 = f0 <= f1 ? f0 : uh + 1;
    uint32_t slot = (uint32_t)ul % c->slots;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
           a30 = a00, a31 = a00;
    /* the value rows advance by one slot and wrap to slot 0 (cq_kv_next) */
    const uint8_t *row = cq_kv_row(c, c->vb, slot, kvh) + off;
    const float *w = St + (size_t)(ul - (int32_t)b->klo) * L + r0;
#define SOME_ROWS()                                                                                \
    do {                                                                                           \
        __m256 v0 = ld(row, 0), v1 = two ? ld(row, 8) : _mm256_setzero_ps();                       \
        if (j >= b->lo[r0] && j <= b->hi[r0]) FMA2(a00, a01, w);                                   \
        if (j >= b->lo[r0 + 1] && j <= b->hi[r0 + 1]) FMA2(a10, a11, w + 1);                       \
        if (j >= b->lo[r0 + 2] && j <= b->hi[r0 + 2]) FMA2(a20, a21, w + 2);                       \
        if (j >= b->lo[r0 + 3] && j <= b->hi[r0 + 3]) FMA2(a30, a31, w + 3);                       \
        row = cq_kv_next(c, c->vb, &slot, kvh, row, off);                                          \
    } while (0)
    int32_t j = ul;
    for (; j < e1; j++, w += L)
        SOME_ROWS();
    while (j <= f1) {
        uint32_t run = CQ_KV_BLOCK - (slot & (CQ_KV_BLOCK - 1));
        if (run > c->slots - slot) run = c->slots - slot;
        if ((int64_t)run > (int64_t)f1 - j + 1) run = (uint32_t)(f1 - j + 1);
        for (const uint8_t *end = row + (size_t)run * stride; row < end; row += stride, w += L) {
            __m256 v0 = ld(row, 0), v1 = two ? ld(row, 8) : _mm256_setzero_ps();
            FMA2(a00, a01, w);
            FMA2(a10, a11, w + 1);
            FMA2(a20, a21, w + 2);
            FMA2(a30, a31, w + 3);
        }
        j += (int32_t)run;
        if ((slot += run) == c->slots) slot = 0;
        if (j <= uh) row = cq_kv_row(c, c->vb, slot, kvh) + off;
    }
    for (; j <= uh; j++, w += L)
        SOME_ROWS();
#undef SOME_ROWS
    STORE2(0, a00, a01);
    STORE2(1, a10, a11);
    STORE2(2, a20, a21);
    STORE2(3, a30, a31);
}

AI void block_run(const cq_attn_batch_args *a, uint32_t kvh, const cq_attn_block *b, float *scratch,
                  ld_fn ld) {
    uint32_t hd = a->kv->hd;
    float *Qt = scratch, *kbuf = Qt + (size_t)CQ_ATTN_BATCH_ROWS * hd, *St = kbuf + (size_t)KP * hd;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t i = 0; i < hd; i++)
            Qt[(size_t)i * L + l] = b->q[l][i];
    __m256 mx = scores(a, kvh, b, Qt, kbuf, St, ld);
    __m256 sum = exps(a, kvh, b, St, mx);
    float inv[L];
    _mm256_storeu_ps(inv, _mm256_div_ps(_mm256_set1_ps(1.0f), sum));
    for (uint32_t r0 = 0; r0 < b->nr; r0 += 4)
        for (uint32_t i0 = 0; i0 < hd; i0 += 16)
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

void cq_attn_batch_avx2(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin, uint32_t t_end,
                        float *scratch) {
    if (a->kv->hd % L) {
        cq_attn_batch_scalar(a, kvh, t_begin, t_end, scratch);
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
