/* ggml_dequant.c - scalar reference dequantization of ggml block types to f32.
 *
 * Each function defines its type's block layout; the arithmetic is written as separate
 * f32 statements in the same order as the `gguf` Python package (numpy float32), so
 * results are bit-identical to it (tests/convert/test_gguf_dequant.c checks that).
 * Products are stored before the following add/sub so no compiler contracts them into FMA.
 */
#include <string.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "common/err.h"
#include "common/f16.h"
#include "cortiq/gguf.h"

#define QK_K 256

static float ld_f16(const uint8_t *p) {
    return f16_to_f32(ld_u16(p));
}

/* Q4_0: [f16 d][16 B nibbles]; element j = low nibble of qs[j], j+16 = high nibble. */
static void deq_q4_0(const uint8_t *b, float *y) {
    float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((int)(qs[j] & 0x0F) - 8);
        y[j + 16] = d * (float)((int)(qs[j] >> 4) - 8);
    }
}

/* Q4_1: [f16 d][f16 m][16 B nibbles]; w = d*q + m. */
static void deq_q4_1(const uint8_t *b, float *y) {
    float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        float a0 = d * (float)(qs[j] & 0x0F);
        float a1 = d * (float)(qs[j] >> 4);
        y[j] = a0 + m;
        y[j + 16] = a1 + m;
    }
}

/* Q5_0: [f16 d][u32 qh][16 B nibbles]; 5th bit of element j is bit j of qh. */
static void deq_q5_0(const uint8_t *b, float *y) {
    float d = ld_f16(b);
    uint32_t qh = ld_u32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int q0 = (qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
        int q1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * (float)(q0 - 16);
        y[j + 16] = d * (float)(q1 - 16);
    }
}

/* Q5_1: [f16 d][f16 m][u32 qh][16 B nibbles]; w = d*q + m. */
static void deq_q5_1(const uint8_t *b, float *y) {
    float d = ld_f16(b), m = ld_f16(b + 2);
    uint32_t qh = ld_u32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int q0 = (qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
        int q1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        float a0 = d * (float)q0;
        float a1 = d * (float)q1;
        y[j] = a0 + m;
        y[j + 16] = a1 + m;
    }
}

/* Q8_0: [f16 d][32 x i8]. */
static void deq_q8_0(const uint8_t *b, float *y) {
    float d = ld_f16(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

/* Q2_K (256): [16 B scales: low nibble scale, high nibble min][64 B 2-bit quants][f16 d][f16 dmin].
 * Element h*128 + s*32 + l (h<2, s<4, l<32) = bits 2s..2s+1 of qs[h*32 + l]; group = element/16. */
static void deq_q2_k(const uint8_t *b, float *y) {
    const uint8_t *sc = b, *qs = b + 16;
    float d = ld_f16(b + 80), dmin = ld_f16(b + 82);
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, s = (e / 32) % 4, l = e % 32, g = e / 16;
        float dl = d * (float)(sc[g] & 0x0F);
        float ml = dmin * (float)(sc[g] >> 4);
        float q = (float)((qs[h * 32 + l] >> (2 * s)) & 3);
        float a = dl * q;
        y[e] = a - ml;
    }
}

/* Q3_K (256): [32 B hmask][64 B 2-bit low quants][12 B 6-bit scales][f16 d].
 * Low bits as Q2_K; high bit of element e = bit e/32 of hmask[e%32], and a CLEAR bit
 * subtracts 4. Scale j (16 of them, 6 bits, offset 32): low 4 bits = nibble j/8 of
 * scales[j%8], high 2 bits = bits 2*(j/4).. of scales[8 + j%4]. */
static void deq_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    float d = ld_f16(b + 108);
    float dl[16];
    for (int j = 0; j < 16; j++) {
        int lo = (sc[j % 8] >> (4 * (j / 8))) & 0x0F;
        int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 0x03;
        dl[j] = d * (float)((lo | (hi << 4)) - 32);
    }
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, s = (e / 32) % 4, l = e % 32;
        int ql = (qs[h * 32 + l] >> (2 * s)) & 3;
        int hb = (hm[l] >> (e / 32)) & 1;
        y[e] = dl[e / 16] * (float)(ql - (hb ? 0 : 4));
    }
}

/* The 8 (scale, min) pairs of Q4_K/Q5_K, 6 bits each, packed in 12 bytes: for j < 4 the low
 * 6 bits of bytes j and j+4; for j >= 4 the nibbles of byte j+4 plus the top 2 bits of
 * bytes j-4 (scale) and j (min). */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
    }
}

/* Q4_K (256): [f16 d][f16 dmin][12 B scales][128 B nibbles]. Element c*64 + t*32 + l
 * (c<4, t<2, l<32) = nibble t of qs[c*32 + l]; sub-block = element/32; w = d*sc*q - dmin*m. */
static void deq_q4_k(const uint8_t *b, float *y) {
    float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *sc = b + 4, *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        int s, m;
        k4_scale_min(sc, j, &s, &m);
        float dd = d * (float)s, dm = dmin * (float)m;
        int c = j / 2, t = j % 2;
        for (int l = 0; l < 32; l++) {
            float a = dd * (float)((qs[c * 32 + l] >> (4 * t)) & 0x0F);
            y[j * 32 + l] = a - dm;
        }
    }
}

/* Q5_K (256): [f16 d][f16 dmin][12 B scales][32 B qh][128 B nibbles]; low 4 bits as Q4_K,
 * 5th bit of element e = bit e/32 of qh[e%32]. */
static void deq_q5_k(const uint8_t *b, float *y) {
    float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < 8; j++) {
        int s, m;
        k4_scale_min(sc, j, &s, &m);
        float dd = d * (float)s, dm = dmin * (float)m;
        int c = j / 2, t = j % 2;
        for (int l = 0; l < 32; l++) {
            int q = ((qs[c * 32 + l] >> (4 * t)) & 0x0F) | (((qh[l] >> j) & 1) << 4);
            float a = dd * (float)q;
            y[j * 32 + l] = a - dm;
        }
    }
}

/* Q6_K (256): [128 B ql][64 B qh][16 x i8 scales][f16 d]. Element h*128 + r (h<2, r<128):
 * low 4 bits = nibble r/64 of ql[h*64 + r%64]; high 2 bits = bits 2*(r/32).. of
 * qh[h*32 + r%32]; w = d*scale[e/16]*(q - 32). */
static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = ld_f16(b + 208);
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, r = e % 128;
        int lo = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
        int hi = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
        float dd = d * (float)sc[e / 16];
        y[e] = dd * (float)((lo | (hi << 4)) - 32);
    }
}

typedef void (*block_fn)(const uint8_t *b, float *y);

static block_fn block_function(uint32_t type) {
    switch (type) {
    case CMF_GGML_Q4_0:
        return deq_q4_0;
    case CMF_GGML_Q4_1:
        return deq_q4_1;
    case CMF_GGML_Q5_0:
        return deq_q5_0;
    case CMF_GGML_Q5_1:
        return deq_q5_1;
    case CMF_GGML_Q8_0:
        return deq_q8_0;
    case CMF_GGML_Q2_K:
        return deq_q2_k;
    case CMF_GGML_Q3_K:
        return deq_q3_k;
    case CMF_GGML_Q4_K:
        return deq_q4_k;
    case CMF_GGML_Q5_K:
        return deq_q5_k;
    case CMF_GGML_Q6_K:
        return deq_q6_k;
    default:
        return NULL;
    }
}

cmf_status cmf_ggml_dequantize(uint32_t type, const uint8_t *src, size_t src_len, uint64_t n,
                               float *dst, cmf_err *err) {
    uint32_t be, bb;
    const char *name = cmf_ggml_type_name(type);
    if (!cmf_ggml_type_can_dequantize(type) || !cmf_ggml_type_size(type, &be, &bb))
        return cmf_err_set(err, CMF_E_UNSUPPORTED, NULL, "cannot dequantize ggml type %s (id %u)",
                           name ? name : "unknown", type);
    if (n % be != 0)
        return cmf_err_set(err, CMF_E_INVALID_ARG, NULL,
                           "%s: %llu elements is not a multiple of the block size %u", name,
                           (unsigned long long)n, be);
    uint64_t need;
    if (!ck_mul_u64(n / be, bb, &need) || need > src_len)
        return cmf_err_set(err, CMF_E_INVALID_ARG, NULL,
                           "%s: %llu elements need more than the %zu source bytes", name,
                           (unsigned long long)n, src_len);
    switch (type) {
    case CMF_GGML_F32:
        memcpy(dst, src, (size_t)n * 4);
        return CMF_OK;
    case CMF_GGML_F16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = f16_to_f32(ld_u16(src + 2 * i));
        return CMF_OK;
    case CMF_GGML_BF16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = bf16_to_f32(ld_u16(src + 2 * i));
        return CMF_OK;
    default:
        break;
    }
    block_fn fn = block_function(type);
    uint64_t nb = n / be;
    for (uint64_t i = 0; i < nb; i++)
        fn(src + i * bb, dst + i * be);
    return CMF_OK;
}
