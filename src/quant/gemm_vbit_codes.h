/* gemm_vbit_codes.h - reading vbit / vbit_ro codes for the integer GEMMs' panel packing
 * (gemm_i8_avx512.c, gemm_i8_avx2.c). Included only by files built with AVX2 or higher.
 *
 * A group of 32 codes is 4b bytes, MSB-first. Each 128-bit lane decodes 8 codes from its own
 * b bytes: a shuffle forms every code's big-endian byte pair and a multiply-high by
 * 2^(16 - shift) shifts it right (AVX2 has no 16-bit variable shift), as in kernel_avx2.c. The
 * width's table is built once per GEMM call; the panels decode each row once for all tokens. */
#ifndef CORTIQ_QUANT_GEMM_VBIT_CODES_H
#define CORTIQ_QUANT_GEMM_VBIT_CODES_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant/kernel_impl.h"

typedef struct {
    __m256i shuf, mul, mask;
} cq_vbit_utab;

static inline void cq_vbit_utab_init(cq_vbit_utab *tb, unsigned b) {
    uint8_t shuf[32];
    uint16_t mul[16];
    for (unsigned j = 0; j < 16; j++) { /* lanes 0 and 1: codes 0-7 at p, 8-15 at p + b */
        unsigned lane = j / 8, bit = j * b, k = bit >> 3, rel = k - lane * b;
        shuf[2 * j] = (uint8_t)(rel + 1);
        shuf[2 * j + 1] = (uint8_t)rel;
        mul[j] = (uint16_t)(1u << ((bit & 7) + b)); /* (word * 2^(16-sr)) >> 16 = word >> sr */
    }
    tb->shuf = _mm256_loadu_si256((const __m256i *)shuf);
    tb->mul = _mm256_loadu_si256((const __m256i *)mul);
    tb->mask = _mm256_set1_epi16((short)((1 << b) - 1));
}

/* The tables of every vbit width, indexed by width (CQ_DEFINE_VBIT_TABS). */
CQ_DEFINE_VBIT_TABS(cq_vbit_utabs, cq_vbit_utab, cq_vbit_utab_init)

/* 16 codes u (uint16) starting at p: codes 0-7 from p, 8-15 from p + b; reads p .. p + b + 16. */
static inline __m256i cq_vbit_u16(const uint8_t *p, const cq_vbit_utab *tb, unsigned b) {
    __m256i v = _mm256_loadu2_m128i((const __m128i *)(p + b), (const __m128i *)p);
    v = _mm256_shuffle_epi8(v, tb->shuf);
    return _mm256_and_si256(_mm256_mulhi_epu16(v, tb->mul), tb->mask);
}

/* The 32 codes of the group at p as v = u - L in int16: codes 0-15 in *lo, 16-31 in *hi.
 * Reads up to p + 3b + 16: the caller passes cq_vbit_group_src's copy near the payload end. */
static inline void cq_vbit_group_v16(const uint8_t *p, const cq_vbit_utab *tb, unsigned b,
                                     __m256i *lo, __m256i *hi) {
    const __m256i L = _mm256_set1_epi16((short)((1 << (b - 1)) - 1));
    *lo = _mm256_sub_epi16(cq_vbit_u16(p, tb, b), L);
    *hi = _mm256_sub_epi16(cq_vbit_u16(p + 2 * b, tb, b), L); /* code 16 is at byte 2b */
}

/* Bytes of lo (codes 0-15) and hi (16-31), each 16-bit value packed with saturation (packs:
 * signed, packus: unsigned) back into element order. */
static inline __m256i cq_vbit_packs(__m256i lo, __m256i hi) {
    return _mm256_permute4x64_epi64(_mm256_packs_epi16(lo, hi), 0xD8);
}
static inline __m256i cq_vbit_packus(__m256i lo, __m256i hi) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8);
}

/* Into L2: the lines that group g starts in each of the next panel's nn rows (from row r), so
 * each line once (cq_prefetch_panel_rows for rows of varying widths). */
static inline void cq_vbit_prefetch_rows(const cmf_qmat *m, uint64_t r, unsigned nn, uint64_t g) {
    for (unsigned i = 0; i < nn; i++) {
        uint64_t gb = 4 * cq_vbit_bits(m, r + i), off = gb * g;
        if (off % 64 < gb) __builtin_prefetch(cq_vbit_row(m, r + i) + off, 0, 2);
    }
}

#endif
