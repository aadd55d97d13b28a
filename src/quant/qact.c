/* qact.c - activations quantized for the integer prefill GEMM, the dispatch of
 * cmf_matmul_qact, and its scalar reference tier (exact integer block sums, f32 scaling). */
#include <math.h>
#include <string.h>

#include "common/bytes.h"
#include "common/cpu.h"
#include "common/f16.h"
#include "quant/dtype_ops.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"
#include "quant/q4tp_rung.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

/* entries, padded to whole token groups */
static size_t qact_entries(size_t n, size_t nb) {
    return (n + CMF_QACT_GROUP - 1) / CMF_QACT_GROUP * CMF_QACT_GROUP * nb;
}

size_t cmf_qact_bytes(size_t n, size_t cols) {
    size_t nb = (cols + 31) / 32, e = qact_entries(n, nb);
    return ALIGN64(32 * e) + 4 * ALIGN64(4 * e);
}

void cmf_qact_bind(cmf_qact *a, void *mem, size_t n, size_t cols) {
    size_t nb = (cols + 31) / 32, e = qact_entries(n, nb);
    uint8_t *p = mem;
    a->n = n;
    a->cols = cols;
    a->kpad = 32 * nb;
    a->nb = nb;
    a->q = (int8_t *)p;
    p += ALIGN64(32 * e);
    a->scale = (float *)(void *)p;
    p += ALIGN64(4 * e);
    a->c128 = (int32_t *)(void *)p;
    p += ALIGN64(4 * e);
    a->c8 = (int32_t *)(void *)p;
    p += ALIGN64(4 * e);
    a->c127 = (int32_t *)(void *)p;
}

/* The tier that runs: AMX-INT8 where the AMX tier is in effect (its products on the AVX-512
 * tier's panels and quantizer), AVX-512 VNNI where that is, else AVX2 on any CPU tier from AVX2
 * up (an AVX-512 CPU without VNNI too), else scalar. */
typedef enum { QACT_SCALAR, QACT_AVX2, QACT_VNNI, QACT_AMX } qact_tier_t;

static qact_tier_t qact_tier(void) {
    if (!cq_vnni_tier()) return cq_cpu_isa() >= CQ_ISA_AVX2 ? QACT_AVX2 : QACT_SCALAR;
    return cq_cpu_isa() >= CQ_ISA_AMX && cq_cpu_detect()->amx_int8 ? QACT_AMX : QACT_VNNI;
}

void cmf_qact_quantize(cmf_qact *a, const float *X, size_t ldx) {
    cmf_qact_quantize_rows(a, X, ldx, 0, a->n);
}

void cmf_qact_quantize_rows(cmf_qact *a, const float *X, size_t ldx, size_t t_begin, size_t t_end) {
    if (t_end > a->n) t_end = a->n;
    switch (qact_tier()) {
    case QACT_AMX:
    case QACT_VNNI:
        cq_qact_quantize_avx512(a, X, ldx, t_begin, t_end);
        return;
    case QACT_AVX2:
        cq_qact_quantize_avx2(a, X, ldx, t_begin, t_end);
        return;
    case QACT_SCALAR:
        break;
    }
    for (size_t t = t_begin; t < t_end; t++) {
        const float *x = X + t * ldx;
        for (size_t b = 0; b < a->nb; b++) {
            size_t e = cmf_qact_index(a, t, b), c0 = 32 * b,
                   len = a->cols - c0 < 32 ? a->cols - c0 : 32;
            int8_t *q = a->q + 32 * e;
            float amax = 0;
            for (size_t i = 0; i < len; i++) {
                float v = fabsf(x[c0 + i]);
                if (v > amax) amax = v; /* NaN compares false: skipped */
            }
            if (!(amax <= 3.0e38f)) amax = 3.0e38f; /* inf: keep the scale finite */
            float inv = amax > 0 ? 127.0f / amax : 0.0f;
            int32_t sum = 0;
            for (size_t i = 0; i < 32; i++) {
                int v = 0;
                if (i < len) {
                    float f = nearbyintf(x[c0 + i] * inv); /* ties to even, as cvtps2dq */
                    v = f > 127.0f ? 127 : f < -127.0f ? -127 : f == f ? (int)f : 0;
                }
                q[i] = (int8_t)v;
                sum += v;
            }
            a->scale[e] = amax / 127.0f;
            a->c128[e] = -128 * sum;
            a->c8[e] = -8 * sum;
            a->c127[e] = -127 * sum;
        }
    }
}

size_t cmf_qact_cut(const cmf_qact *a, size_t t) {
    if (t >= a->n) return a->n;
    t = (t + CMF_QACT_GROUP / 2) / CMF_QACT_GROUP * CMF_QACT_GROUP;
    return t < a->n ? t : a->n;
}

int cmf_qact_supports(const cmf_qmat *m) {
    const cq_dtype_ops *o = cq_dtype_ops_get(m->dtype);
    return o && (o->qact == CQ_COLS_ANY || (o->qact == CQ_COLS_32 && m->cols % 32 == 0));
}

int cmf_qact_fast(void) {
    return qact_tier() >= QACT_VNNI;
}

int cmf_qact_simd(void) {
    return qact_tier() != QACT_SCALAR;
}

/* AVX-512: 16-row panels, even 4 tokens repay the packing. AVX2: at 4 tokens the 8-row
 * panels lose ~15 % to the int8-activation kernels on the q4 family, at 6 they win 10-40 %. */
size_t cmf_qact_min_tokens(void) {
    return qact_tier() == QACT_AVX2 ? 6 : 4;
}

/* Panel codes (16 rows, cols rounded up to 64) + block scales + row scales; the AVX2 tier
 * (8 rows, q8_row's and vbit's |w| and sign) and the scalar tier (one row of codes and its block
 * scales) use less. */
size_t cmf_qact_scratch_bytes(uint64_t cols) {
    size_t kpad = (size_t)(cols + 63) / 64 * 64, nb = kpad / 32;
    return 16 * kpad + ALIGN64(16 * nb * 4) + 64;
}

/* Codes of row r into codes[0 .. kpad) (columns past cols: 0) and the scale of each 32-column
 * block into bscale[0 .. kpad/32) (q8_row: the row scale in every entry); q4tp scales from
 * its ladder (q4tp_rung.h). The scalar tier's definition of each layout's code form. */
static void row_codes(const cmf_qmat *m, uint64_t r, size_t kpad, uint8_t *codes, float *bscale) {
    const uint64_t C = m->cols, G = m->groups;
    memset(codes, 0, kpad);
    if (m->dtype == CMF_DT_Q8_ROW) {
        const uint8_t *q = m->quants + r * C;
        for (uint64_t i = 0; i < C; i++)
            codes[i] = q[i] ^ 0x80u;
        float s = f16_to_f32(ld_u16(m->scales + 2 * r));
        for (size_t b = 0; b < kpad / 32; b++)
            bscale[b] = s;
        return;
    }
    if (cq_gemm_vbit(m)) { /* u - L + 127, MSB-first b-bit codes */
        const unsigned b = cq_vbit_bits(m, r);
        const uint8_t *p = cq_vbit_row(m, r);
        for (uint64_t i = 0; i < C; i++) {
            unsigned u = 0;
            for (uint64_t k = i * b; k < (i + 1) * b; k++)
                u = u << 1 | (p[k / 8] >> (7 - k % 8) & 1u);
            codes[i] = (uint8_t)(u + 128 - (1u << (b - 1)));
        }
        for (size_t g = 0; g < kpad / 32; g++)
            bscale[g] = g < G ? cq_vbit_scale(m, r, g) : 0.0f;
        return;
    }
    float lo = 0, step = 0;
    if (m->dtype == CMF_DT_Q4TP) {
        lo = f16_to_f32(ld_u16(m->scales + 4 * r));
        step = f16_to_f32(ld_u16(m->scales + 4 * r + 2));
    }
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *nib;
        float s;
        if (m->dtype == CMF_DT_Q4_TILED) {
            const uint8_t *t = m->quants + (r * G + g) * CQ_Q4T_TILE;
            s = f16_to_f32(ld_u16(t));
            nib = t + 2;
        } else if (m->dtype == CMF_DT_Q4TP) {
            nib = m->quants + (r * G + g) * 16;
            s = cq_q4tp_rung(lo, step, cq_q4tp_code(m, r, g));
        } else { /* q4_block, cols % 32 == 0: group r*G + g is row r's group g */
            nib = m->quants + (r * G + g) * 16;
            s = f16_to_f32(ld_u16(m->scales + 2 * (r * G + g)));
        }
        for (unsigned k = 0; k < 16; k++) {
            codes[32 * g + 2 * k] = nib[k] & 15u;
            codes[32 * g + 2 * k + 1] = nib[k] >> 4;
        }
        bscale[g] = s;
    }
    for (size_t b = G; b < kpad / 32; b++)
        bscale[b] = 0;
}

static void gemm_scalar(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                        uint64_t r1, void *scratch) {
    size_t kpad = a->kpad, nb = a->nb;
    uint8_t *codes = scratch;
    float *bs = (float *)(void *)((uint8_t *)scratch + ALIGN64(kpad));
    const int32_t *corr = cq_gemm_corr(m, a);
    const int rowscale = cq_gemm_kind_of(m) == CQ_GEMM_ROWSCALE;
    for (uint64_t r = r0; r < r1; r++) {
        row_codes(m, r, kpad, codes, bs);
        for (size_t t = 0; t < a->n; t++) {
            float acc = 0;
            for (size_t b = 0; b < nb; b++) {
                size_t e = cmf_qact_index(a, t, b);
                const int8_t *x = a->q + 32 * e;
                int32_t s = corr[e];
                for (unsigned i = 0; i < 32; i++)
                    s += (int32_t)codes[32 * b + i] * x[i];
                if (rowscale)
                    acc += (float)s * a->scale[e];
                else
                    acc += (float)s * (bs[b] * a->scale[e]);
            }
            Y[t * ldy + (r - r0)] = rowscale ? acc * bs[0] : acc;
        }
    }
}

void cmf_matmul_qact(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t row_begin,
                     uint64_t row_end, void *scratch) {
    if (a->n == 0 || row_begin >= row_end) return;
    switch (qact_tier()) {
    case QACT_AMX:
        cq_gemm_amx(m, a, Y, ldy, row_begin, row_end, scratch);
        break;
    case QACT_VNNI:
        cq_gemm_avx512(m, a, Y, ldy, row_begin, row_end, scratch);
        break;
    case QACT_AVX2:
        cq_gemm_avx2(m, a, Y, ldy, row_begin, row_end, scratch);
        break;
    case QACT_SCALAR:
        gemm_scalar(m, a, Y, ldy, row_begin, row_end, scratch);
        break;
    }
}
