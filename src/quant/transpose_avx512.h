/* transpose_avx512.h - the 16 x 16 transpose of 32-bit lanes the panel GEMMs pack with
 * (gemm_i8_avx512.c: 4-byte code groups; gemm_f32_avx512.c: floats). AVX-512 files only. */
#ifndef CORTIQ_QUANT_TRANSPOSE_AVX512_H
#define CORTIQ_QUANT_TRANSPOSE_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* One output vector of the transpose: a plain store, or a non-temporal one (nt, a constant). */
static inline __attribute__((always_inline)) void cq_transpose16_put(uint8_t *d, __m512i v,
                                                                     int nt) {
    if (nt)
        _mm512_stream_si512((__m512i *)(void *)d, v);
    else
        _mm512_store_si512(d, v);
}

/* Store the transpose of r[0..15] to dst (64-byte aligned, as is stride): vector j (at
 * dst + stride j) lane i = r[i] lane j. r is clobbered. Each output is stored as soon as it
 * exists, which keeps ~20 vectors live, so the transpose stays in registers. nt (a constant):
 * non-temporal stores (the caller fences). */
static inline __attribute__((always_inline)) void cq_transpose16_to(__m512i r[16], void *dst,
                                                                    size_t stride, int nt) {
    uint8_t *d = dst;
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) { /* r[g + e], 128-bit lane L: rows g..g+3 of column 4L + e */
        r[g + 0] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    for (int e = 0; e < 4; e++) {
        __m512i x0 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0x44),
                x1 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0xEE),
                y0 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0x44),
                y1 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0xEE);
        cq_transpose16_put(d + stride * (0 + e), _mm512_shuffle_i32x4(x0, y0, 0x88), nt);
        cq_transpose16_put(d + stride * (4 + e), _mm512_shuffle_i32x4(x0, y0, 0xDD), nt);
        cq_transpose16_put(d + stride * (8 + e), _mm512_shuffle_i32x4(x1, y1, 0x88), nt);
        cq_transpose16_put(d + stride * (12 + e), _mm512_shuffle_i32x4(x1, y1, 0xDD), nt);
    }
}

static inline __attribute__((always_inline)) void cq_transpose16_store_at(__m512i r[16], void *dst,
                                                                          size_t stride) {
    cq_transpose16_to(r, dst, stride, 0);
}

/* The same, the 16 outputs back to back. */
static inline void cq_transpose16_store(__m512i r[16], void *dst) {
    cq_transpose16_store_at(r, dst, 64);
}

#endif
