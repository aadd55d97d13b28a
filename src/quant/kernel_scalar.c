/* kernel_scalar.c - the reference tier: every matrix layout of spec §3.2 decoded
 * straight from its definition, and a plain matmul on top. The SIMD tiers are
 * tested against these functions. */
#include <math.h>
#include <string.h>

#include "quant/kernel_impl.h"
#include "quant/q4tp_rung.h"

static float ld_f32(const uint8_t *p) {
    return f32_from_bits(ld_u32(p));
}
static float ld_f16(const uint8_t *p) {
    return f16_to_f32(ld_u16(p));
}

/* vbit: value j of a row whose values are b-bit unsigned integers packed MSB-first. */
static unsigned vbit_get(const uint8_t *row, unsigned b, uint64_t j) {
    uint64_t bit = j * b;
    unsigned u = 0;
    for (unsigned t = 0; t < b; t++, bit++)
        u = (u << 1) | ((row[bit >> 3] >> (7 - (bit & 7))) & 1u);
    return u;
}

/* q1t: ternary digit k (0..4) of a base-3 byte, least significant digit first. */
static unsigned trit(unsigned byte, unsigned k) {
    static const unsigned pow3[5] = {1, 3, 9, 27, 81};
    return (byte / pow3[k]) % 3;
}

unsigned cq_ref_decode_group(const cmf_qmat *m, uint64_t r, uint64_t g, float *out) {
    uint64_t c0 = 32 * g, cols = m->cols;
    unsigned len = cols - c0 < 32 ? (unsigned)(cols - c0) : 32;
    uint64_t e0 = r * cols + c0; /* flat index of the first element */
    switch (m->dtype) {
    case CMF_DT_F32:
        for (unsigned i = 0; i < len; i++)
            out[i] = ld_f32(m->data + 4 * (e0 + i));
        break;
    case CMF_DT_F16:
        for (unsigned i = 0; i < len; i++)
            out[i] = ld_f16(m->data + 2 * (e0 + i));
        break;
    case CMF_DT_BF16:
        for (unsigned i = 0; i < len; i++)
            out[i] = bf16_to_f32(ld_u16(m->data + 2 * (e0 + i)));
        break;
    case CMF_DT_Q8_ROW: {
        float s = ld_f16(m->scales + 2 * r);
        for (unsigned i = 0; i < len; i++)
            out[i] = (float)(int8_t)m->quants[e0 + i] * s;
        break;
    }
    case CMF_DT_Q8_2F: {
        float s = ld_f16(m->scales + 2 * r);
        for (unsigned i = 0; i < len; i++)
            out[i] = (float)(int8_t)m->quants[e0 + i] * s * ld_f16(m->extra + 2 * (c0 + i));
        break;
    }
    case CMF_DT_Q4_BLOCK: /* groups run over the flattened tensor; a row may start mid-group */
        for (unsigned i = 0; i < len; i++) {
            uint64_t e = e0 + i;
            unsigned byte = m->quants[e >> 1];
            int q = (int)((e & 1) ? byte >> 4 : byte & 15);
            out[i] = (float)(q - 8) * ld_f16(m->scales + 2 * (e >> 5));
        }
        break;
    case CMF_DT_Q4_TILED: {
        const uint8_t *t = m->quants + (r * m->groups + g) * CQ_Q4T_TILE;
        float s = ld_f16(t);
        for (unsigned i = 0; i < 32; i++) {
            unsigned byte = t[2 + i / 2];
            out[i] = (float)((int)((i & 1) ? byte >> 4 : byte & 15) - 8) * s;
        }
        break;
    }
    case CMF_DT_Q4TP: {
        const uint8_t *nib = m->quants + (r * m->groups + g) * 16;
        float lo = ld_f16(m->scales + 4 * r), step = ld_f16(m->scales + 4 * r + 2);
        float s = cq_q4tp_rung(lo, step, cq_q4tp_code(m, r, g));
        for (unsigned i = 0; i < 32; i++) {
            unsigned byte = nib[i / 2];
            out[i] = (float)((int)((i & 1) ? byte >> 4 : byte & 15) - 8) * s;
        }
        break;
    }
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO: {
        unsigned b = cq_vbit_bits(m, r);
        int L = (1 << (b - 1)) - 1;
        const uint8_t *row = cq_vbit_row(m, r);
        float s = cq_vbit_scale(m, r, g);
        for (unsigned i = 0; i < 32; i++)
            out[i] = (float)((int)vbit_get(row, b, c0 + i) - L) * s;
        break;
    }
    case CMF_DT_Q1:
    case CMF_DT_Q1S: {
        const uint8_t *t = m->quants + (r * m->groups + g) * CQ_Q1_TILE;
        float s = ld_f16(t);
        for (unsigned i = 0; i < 32; i++)
            out[i] = ((t[2 + i / 8] >> (i % 8)) & 1) ? s : -s;
        break;
    }
    case CMF_DT_Q1T: {
        const uint8_t *t = m->quants + (r * m->groups + g) * CQ_Q1T_TILE;
        float s = ld_f16(t);
        for (unsigned i = 0; i < 32; i++) {
            unsigned d = trit(t[2 + i / 5], i % 5);
            out[i] = d == 0 ? 0.0f : d == 1 ? s : -s;
        }
        break;
    }
    default: /* cmf_qmat_init admits no other dtype */
        memset(out, 0, len * sizeof *out);
        break;
    }
    return len;
}

void cq_ovl_row(const cmf_qmat *m, uint64_t r, const uint8_t **first, uint64_t *count,
                unsigned *stride) {
    if (m->dtype == CMF_DT_Q1T) {
        uint64_t a = ld_u32(m->ovl_ptr + 4 * r), b = ld_u32(m->ovl_ptr + 4 * (r + 1));
        *first = m->ovl + 4 * a;
        *count = b - a;
        *stride = 4;
        return;
    }
    if (m->dtype != CMF_DT_Q1S) {
        *first = NULL;
        *count = 0;
        *stride = 0;
        return;
    }
    /* q1s entries are sorted by flat index (init guarantees it): two lower bounds. */
    uint64_t lo_key = r * m->cols, hi_key = lo_key + m->cols, bounds[2];
    for (int k = 0; k < 2; k++) {
        uint64_t key = k ? hi_key : lo_key, lo = 0, hi = m->ovl_count;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (ld_u32(m->ovl + 6 * mid) < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        bounds[k] = lo;
    }
    *first = m->ovl + 6 * bounds[0];
    *count = bounds[1] - bounds[0];
    *stride = 6;
}

uint64_t cq_ovl_seek(const cmf_qmat *m, uint64_t r) {
    if (m->dtype != CMF_DT_Q1S) return 0;
    uint64_t key = r * m->cols, lo = 0, hi = m->ovl_count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ld_u32(m->ovl + 6 * mid) < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#define REF_TOKENS 8

void cq_ref_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t r0, uint64_t r1, unsigned flags) {
    (void)flags; /* the reference always uses f32 activations */
    uint64_t ngroups = (m->cols + 31) / 32;
    float w[32];
    for (uint64_t r = r0; r < r1; r++) {
        const uint8_t *ovl;
        uint64_t ovl_n;
        unsigned stride;
        cq_ovl_row(m, r, &ovl, &ovl_n, &stride);
        for (size_t t0 = 0; t0 < n; t0 += REF_TOKENS) {
            size_t nt = n - t0 < REF_TOKENS ? n - t0 : REF_TOKENS;
            double acc[REF_TOKENS] = {0};
            const uint8_t *e = ovl;
            uint64_t k = 0;
            for (uint64_t g = 0; g < ngroups; g++) {
                unsigned len = cq_ref_decode_group(m, r, g, w);
                for (; k < ovl_n && cq_ovl_col(m, r, e) < 32 * g + len; k++, e += stride)
                    w[cq_ovl_col(m, r, e) - 32 * g] = cq_ovl_val(m, e);
                for (size_t t = 0; t < nt; t++) {
                    const float *x = X + (t0 + t) * ldx + 32 * g;
                    float s = 0.0f;
                    for (unsigned i = 0; i < len; i++)
                        s += w[i] * x[i];
                    acc[t] += s;
                }
            }
            for (size_t t = 0; t < nt; t++)
                Y[(t0 + t) * ldy + (r - r0)] = (float)acc[t];
        }
    }
}

const cq_kernel_table cq_kernels_scalar = {
    .mm =
        {
            [CMF_DT_F32] = cq_ref_matmul,
            [CMF_DT_F16] = cq_ref_matmul,
            [CMF_DT_BF16] = cq_ref_matmul,
            [CMF_DT_Q8_ROW] = cq_ref_matmul,
            [CMF_DT_Q4_BLOCK] = cq_ref_matmul,
            [CMF_DT_VBIT] = cq_ref_matmul,
            [CMF_DT_Q8_2F] = cq_ref_matmul,
            [CMF_DT_VBIT_RO] = cq_ref_matmul,
            [CMF_DT_Q4_TILED] = cq_ref_matmul,
            [CMF_DT_Q1] = cq_ref_matmul,
            [CMF_DT_Q1S] = cq_ref_matmul,
            [CMF_DT_Q1T] = cq_ref_matmul,
            [CMF_DT_Q4TP] = cq_ref_matmul,
        },
};
