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
 * which reads the same panels through cq_avx2_lanes_vbit_unpack.
 *
 * The passes live in lanes_vbit_avx2_pass.h, built here with vpmaddubsw and in
 * lanes_vbit_avxvnni.c with AVX-VNNI's vpdpbusd (int32 sums from the start: no int16 limit, so a
 * group's steps run through once; the same bits), which run where the CPU has it (cq_cpu_avxvnni).
 */
#include <immintrin.h>
#include <string.h>

#include "common/bytes.h"
#include "common/cpu.h"
#include "quant/lanes_vbit_avx2_pass.h"

#define WIN CQ_LANES_VBIT_WIN

static const cq_lanes_vbit_avx2_passes passes_avx2 = CQ_LANES_VBIT_AVX2_PASSES;

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
    const cq_lanes_vbit_avx2_passes *ps =
        cq_cpu_avxvnni() ? &cq_lanes_vbit_avxvnni_passes : &passes_avx2;
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
                ps->pair[form](p, 0, G, k.xq + t, k.dx + t, k.c8 + t, v);
                put_sums(v[0], at[0], y[t]);
                put_sums(v[1], at[1], y[t]);
                continue;
            }
            for (unsigned h = 0; h < 2; h++) {
                if (!any[h]) continue;
                ps->one[form][nt](p, h, G, k.xq + t, k.dx + t, k.c8 + t, v);
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
