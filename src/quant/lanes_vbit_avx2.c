/* lanes_vbit_avx2.c - vbit's batched-decode copy (lanes_vbit.c) read by the AVX2 tier: one
 * panel of 8 sorted rows (half a pair) per pass, in the forms of lanes_avx2.c.
 *
 * Per group, panel and token: narrow panels run q4's step (vpmaddubsw on nibbles, int16 sums of
 * a group within 8 * 2 * 15 * 127, from -8 * sum); five-bit panels the same on c = nibble |
 * fifth bit (a 16-bit shift of the plane brings bit 2k + hi of every byte to bit 4, an and and
 * an or merge it), widened to int32 after every two vectors k (4 * 2 * 31 * 127 = 31496 fits
 * int16), from -16 * sum; wide panels q8_row's sign step (|w| times x with w's sign) with no
 * correction. Each sum is the negated integer sum of the values and the stored scale the
 * negated scale, so fma(sum, scale * dx, acc) gives the integer GEMM's bits (gemm_i8_avx2.c),
 * which reads the same panels through cq_avx2_lanes_vbit_unpack. */
#include <immintrin.h>
#include <string.h>

#include "common/bytes.h"
#include "quant/gemm_vbit_codes.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/lanes_step_avx2.h"

#define AI  static inline __attribute__((always_inline))
#define WIN CQ_LANES_VBIT_WIN

AI __m256i load32(const uint8_t *p) {
    return _mm256_load_si256((const __m256i *)(const void *)p);
}

/* Bit j of every byte of pl at bit 4, the other bits cleared. */
AI __m256i bit4(__m256i pl, const int j) {
    const __m256i s = j < 4   ? _mm256_slli_epi16(pl, 4 - j)
                      : j > 4 ? _mm256_srli_epi16(pl, j - 4)
                              : pl;
    return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}

/* Code vector k (0-7: columns 4k .. 4k + 3 of the 8 rows) of a narrow or five-bit group at w
 * (the panel's half of the pair's group), pl its plane half (five) */
AI __m256i code_vec(const uint8_t *w, __m256i pl, const int five, const int k) {
    const __m256i v = load32(w + 64 * (k % 4));
    __m256i c = _mm256_and_si256(k < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
    return five ? _mm256_or_si256(c, bit4(pl, 2 * (k % 4) + k / 4)) : c;
}

/* H panels from half h of the pair at p (form f, G groups: H = 1 one panel, H = 2 both, h = 0)
 * for T tokens: out[hh * T + t] panel h + hh's 8 slots' sums for token t. Both panels in one
 * pass share the group's prefetches and the token's broadcasts; each lane's arithmetic is the
 * same either way. */
AI void pass_vbit(const uint8_t *p, unsigned h, const int H, uint64_t G, const int f,
                  const int8_t *const *xq, const float *const *dx, const int32_t *const *c8,
                  const int T, __m256 *out) {
    const uint64_t gb = f == CQ_VBIT_NARROW ? 256 : f == CQ_VBIT_FIVE ? 320 : 512;
    const uint8_t *sc = p + G * gb + 16 * h;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2 * CQ_LANES_PASS];
    for (int i = 0; i < H * T; i++)
        acc[i] = _mm256_setzero_ps();
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *w = p + g * gb + 32 * h;
        for (unsigned c = 0; c < gb + 32; c += 64) /* the pair's codes and scales, linearly */
            cq_prefetch_weights(p + g * (gb + 32) + c);
        __m256i s[2 * CQ_LANES_PASS];
        for (int hh = 0; hh < H; hh++)
            for (int t = 0; t < T; t++)
                s[hh * T + t] = _mm256_set1_epi32(f == CQ_VBIT_NARROW ? c8[t][g]
                                                  : f == CQ_VBIT_FIVE ? 2 * c8[t][g]
                                                                      : 0);
        if (f == CQ_VBIT_WIDE) {
#pragma GCC unroll 1
            for (int k = 0; k < 8; k++)
                for (int hh = 0; hh < H; hh++)
                    cq_lanes_sign_step(load32(w + 32 * hh + 64 * k), xq, 32 * g + 4 * k, T,
                                       s + hh * T);
        } else {
            const int five = f == CQ_VBIT_FIVE;
            __m256i pl[2];
            for (int hh = 0; hh < H; hh++)
                pl[hh] = five ? load32(w + 32 * hh + 256) : _mm256_setzero_si256();
            /* int16 sums: a narrow group's 8 vectors at once, a five-bit group's in halves */
            for (int half = 0; half < (five ? 2 : 1); half++) {
                __m256i s16[2 * CQ_LANES_PASS];
                for (int i = 0; i < H * T; i++)
                    s16[i] = _mm256_setzero_si256();
                for (int kk = 0; kk < (five ? 2 : 4); kk++) {
                    const int k = five ? 2 * half + kk : kk;
                    for (int hh = 0; hh < H; hh++) {
                        const uint8_t *wh = w + 32 * hh;
                        const __m256i lo = code_vec(wh, pl[hh], five, k),
                                      hi = code_vec(wh, pl[hh], five, k + 4);
                        for (int t = 0; t < T; t++) {
                            const int8_t *x = xq[t] + 32 * g + 4 * k;
                            __m256i *d = &s16[hh * T + t];
                            *d = _mm256_add_epi16(*d, _mm256_maddubs_epi16(lo, cq_lanes_bcast4(x)));
                            *d = _mm256_add_epi16(
                                *d, _mm256_maddubs_epi16(hi, cq_lanes_bcast4(x + 16)));
                        }
                    }
                }
                for (int i = 0; i < H * T; i++)
                    s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(s16[i], ones));
            }
        }
        for (int hh = 0; hh < H; hh++) {
            const __m256 d = _mm256_cvtph_ps(
                _mm_load_si128((const __m128i *)(const void *)(sc + 32 * g + 16 * hh)));
            for (int t = 0; t < T; t++)
                acc[hh * T + t] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[hh * T + t]),
                                    _mm256_mul_ps(d, _mm256_set1_ps(dx[t][g])), acc[hh * T + t]);
        }
    }
    for (int i = 0; i < H * T; i++)
        out[i] = acc[i];
}

typedef void (*pass_fn)(const uint8_t *, unsigned, uint64_t, const int8_t *const *,
                        const float *const *, const int32_t *const *, __m256 *);
#define DEF_PASS(F, T)                                                                             \
    static __attribute__((noinline)) void pass_##F##_##T(                                          \
        const uint8_t *p, unsigned h, uint64_t G, const int8_t *const *xq, const float *const *dx, \
        const int32_t *const *c8, __m256 *out) {                                                   \
        pass_vbit(p, h, 1, G, F, xq, dx, c8, T, out);                                              \
    }
/* both panels of a pair for one token */
#define DEF_PAIR(F)                                                                                \
    static __attribute__((noinline)) void pair_##F##_1(                                            \
        const uint8_t *p, unsigned h, uint64_t G, const int8_t *const *xq, const float *const *dx, \
        const int32_t *const *c8, __m256 *out) {                                                   \
        pass_vbit(p, h, 2, G, F, xq, dx, c8, 1, out);                                              \
    }
#define DEF_FORM(F) DEF_PASS(F, 1) DEF_PASS(F, 2) DEF_PASS(F, 3) DEF_PASS(F, 4) DEF_PAIR(F)
DEF_FORM(0)
DEF_FORM(1)
DEF_FORM(2)
#define PASSES(F)                                                                                  \
    { NULL, pass_##F##_1, pass_##F##_2, pass_##F##_3, pass_##F##_4 }
_Static_assert(CQ_VBIT_NARROW == 0 && CQ_VBIT_FIVE == 1 && CQ_VBIT_WIDE == 2, "form order");
_Static_assert(CQ_LANES_PASS == 4, "passes of up to 4 tokens");
static const pass_fn passes_of[3][CQ_LANES_PASS + 1] = {PASSES(0), PASSES(1), PASSES(2)};
static const pass_fn pairs_of[3] = {pair_0_1, pair_1_1, pair_2_1};

/* One token's sums of a panel (v) into its y at the slots' places (at; -1 for none). */
static void put_sums(__m256 v, const int64_t at[8], float *y) {
    _Alignas(32) float o[8];
    _mm256_store_ps(o, v);
    for (unsigned i = 0; i < 8; i++)
        if (at[i] >= 0) y[at[i]] = o[i];
}

void cq_avx2_lanes_vbit_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                     float *const *y, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups;
    const uint8_t *slot_row = cq_lanes_vbit_slot_rows(m);
    cq_lanes_toks k;
    const size_t passes = cq_lanes_toks_init(&k, tok, n, m->cols, CQ_LANES_PASS);
    uint64_t q0, q1;
    cq_lanes_vbit_pairs(m, r0, r1, &q0, &q1);
    for (uint64_t q = q0; q < q1; q++) {
        const uint64_t w0 = q * 16 / WIN * WIN;
        unsigned form;
        const uint8_t *p = cq_lanes_vbit_pair(m, q, &form);
        /* each panel's slots: their rows' places in y (from r0) where inside [r0, r1) */
        int64_t at[2][8];
        unsigned any[2] = {0, 0};
        for (unsigned h = 0; h < 2; h++)
            for (unsigned i = 0; i < 8; i++) {
                const unsigned sr = slot_row[16 * q + 8 * h + i];
                const uint64_t row = w0 + sr;
                at[h][i] = sr != 0xFF && row >= r0 && row < r1 ? (int64_t)(row - r0) : -1;
                any[h] |= at[h][i] >= 0;
            }
        for (size_t pq = 0; pq < passes; pq++) {
            const size_t t = k.first[pq], nt = k.count[pq];
            __m256 v[2 * CQ_LANES_PASS];
            if (nt == 1 && any[0] && any[1]) {
                pairs_of[form](p, 0, G, k.xq + t, k.dx + t, k.c8 + t, v);
                put_sums(v[0], at[0], y[t]);
                put_sums(v[1], at[1], y[t]);
                continue;
            }
            for (unsigned h = 0; h < 2; h++) {
                if (!any[h]) continue;
                passes_of[form][nt](p, h, G, k.xq + t, k.dx + t, k.c8 + t, v);
                for (size_t j = 0; j < nt; j++)
                    put_sums(v[j], at[h], y[t + j]);
            }
        }
    }
}

unsigned cq_avx2_lanes_vbit_unpack(const cmf_qmat *m, uint64_t q, unsigned h, size_t nb,
                                   uint8_t *panel, float *bs) {
    const uint64_t G = m->groups;
    unsigned f;
    const uint8_t *p = cq_lanes_vbit_pair(m, q, &f);
    const uint64_t gb = cq_lanes_vbit_group_bytes(f);
    const __m256i sixteen = _mm256_set1_epi8(16), thirty2 = _mm256_set1_epi8(32),
                  z = _mm256_setzero_si256();
    const int vecs = f == CQ_VBIT_WIDE ? 16 : 8; /* per block */
    for (uint64_t g = 0; g < nb; g++) {
        __m256i *o = (__m256i *)(void *)(panel + g * vecs * 32);
        if (g >= G) { /* blocks past the columns: zero codes and scales */
            for (int k = 0; k < vecs; k++)
                _mm256_store_si256(o + k, z);
            _mm256_storeu_ps(bs + g * 8, _mm256_setzero_ps());
            continue;
        }
        const uint8_t *w = p + g * gb + 32 * h;
        if (f == CQ_VBIT_NARROW) { /* v + 8 = 16 - c, the unsigned form */
            for (int k = 0; k < 8; k++)
                _mm256_store_si256(o + k, _mm256_sub_epi8(sixteen, code_vec(w, z, 0, k)));
        } else if (f == CQ_VBIT_FIVE) { /* v + 16 = 32 - c, the unsigned form of 5 bits */
            const __m256i pl = load32(w + 256);
            for (int k = 0; k < 8; k++)
                _mm256_store_si256(o + k, _mm256_sub_epi8(thirty2, code_vec(w, pl, 1, k)));
        } else { /* |v| and v = -w saturated (128 -> 127: the sign survives) */
            for (int k = 0; k < 8; k++) {
                const __m256i v = load32(w + 64 * k);
                _mm256_store_si256(o + k, _mm256_abs_epi8(v));
                _mm256_store_si256(o + 8 + k, _mm256_subs_epi8(z, v));
            }
        }
        const __m256 d = _mm256_cvtph_ps(
            _mm_load_si128((const __m128i *)(const void *)(p + G * gb + 32 * g + 16 * h)));
        _mm256_storeu_ps(bs + g * 8, _mm256_xor_ps(d, _mm256_set1_ps(-0.0f)));
    }
    return f;
}

/* 16 int16 values as bytes (saturated), in order */
static inline __m128i bytes16(__m256i v) {
    return _mm_packs_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

void cq_avx2_lanes_vbit_put_row(const cmf_qmat *m, uint8_t *p, unsigned f, unsigned l, uint64_t r) {
    const uint64_t G = m->groups, gb = cq_lanes_vbit_group_bytes(f);
    const unsigned b = cq_vbit_bits(m, r);
    const cq_vbit_utab *tab = &cq_vbit_utabs()[b];
    const uint8_t *src = cq_vbit_row(m, r), *end = m->data + m->nbytes;
    const __m256i K = _mm256_set1_epi16(f == CQ_VBIT_NARROW ? 8 : 16);
    const __m128i m4 = _mm_set1_epi8(15), one = _mm_set1_epi8(1);
    uint8_t *q = p + 32 * (l / 8) + 4 * (l % 8);
    for (uint64_t g = 0; g < G; g++, q += gb) {
        uint8_t bounce[48];
        __m256i lo, hi; /* v = u - L of columns 0-15 and 16-31 */
        cq_vbit_group_v16(cq_vbit_group_src(src + 4 * b * g, b, end, bounce), tab, b, &lo, &hi);
        _Alignas(16) uint32_t d[4];
        if (f == CQ_VBIT_WIDE) { /* w = -v, columns 4k .. 4k + 3 in vector k */
            const __m256i z = _mm256_setzero_si256();
            _mm_store_si128((__m128i *)(void *)d, bytes16(_mm256_sub_epi16(z, lo)));
            for (unsigned k = 0; k < 4; k++)
                memcpy(q + 64 * k, &d[k], 4);
            _mm_store_si128((__m128i *)(void *)d, bytes16(_mm256_sub_epi16(z, hi)));
            for (unsigned k = 0; k < 4; k++)
                memcpy(q + 64 * (4 + k), &d[k], 4);
        } else { /* c = K - v: low nibbles columns 0-15, high 16-31; five: the fifth bits */
            const __m128i cl = bytes16(_mm256_sub_epi16(K, lo)),
                          ch = bytes16(_mm256_sub_epi16(K, hi));
            const __m128i nib =
                _mm_or_si128(_mm_and_si128(cl, m4), _mm_slli_epi16(_mm_and_si128(ch, m4), 4));
            _mm_store_si128((__m128i *)(void *)d, nib);
            for (unsigned k = 0; k < 4; k++)
                memcpy(q + 64 * k, &d[k], 4);
            if (f == CQ_VBIT_FIVE) { /* byte 4k + j: bit 0 column 4k + j's, bit 1 16 + 4k + j's */
                const __m128i t =
                    _mm_or_si128(_mm_and_si128(_mm_srli_epi16(cl, 4), one),
                                 _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(ch, 4), one), 1));
                _mm_store_si128((__m128i *)(void *)d, t);
                const uint32_t plane = d[0] | d[1] << 2 | d[2] << 4 | d[3] << 6;
                memcpy(q + 256, &plane, 4);
            }
        }
        st_u16(p + G * gb + g * 32 + 2 * l, ld_u16(m->scales + 2 * (r * G + g)) ^ 0x8000u);
    }
}
