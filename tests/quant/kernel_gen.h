/* kernel_gen.h - random VALID payloads of every matrix dtype (spec §3.2), written
 * byte by byte from the layout so the kernels can be tested without an encoder. */
#ifndef CORTIQ_TESTS_KERNEL_GEN_H
#define CORTIQ_TESTS_KERNEL_GEN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/f16.h"
#include "cortiq/dtype.h"

typedef struct {
    uint64_t s;
} kg_rng;

static inline uint64_t kg_next(kg_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint32_t kg_u32(kg_rng *r, uint32_t n) {
    return (uint32_t)(kg_next(r) % n);
}
/* uniform in [a, b) */
static inline float kg_unif(kg_rng *r, float a, float b) {
    return a + (b - a) * (float)((kg_next(r) >> 40) * (1.0 / 16777216.0));
}
static inline void kg_bytes(kg_rng *r, uint8_t *p, uint64_t n) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        st_u64(p + i, kg_next(r));
    for (; i < n; i++)
        p[i] = (uint8_t)kg_next(r);
}
/* a positive f16 scale in [lo, hi) */
static inline void kg_scale(kg_rng *r, uint8_t *p, float lo, float hi) {
    st_u16(p, f32_to_f16(kg_unif(r, lo, hi)));
}

#define KG_VBIT_REAL 45

/* Options that shape the variable parts. */
typedef struct {
    int ovl_unsorted;     /* q1s / q1t: shuffle the overlay and repeat some positions */
    unsigned ovl_per_row; /* mean overlay entries per row */
    unsigned vbit_width;  /* vbit / vbit_ro: every row this wide; 0: each row one of 3-8;
                           * KG_VBIT_REAL: 2 % 3-bit, 72 % 4-bit, 26 % 5-bit rows, in random
                           * order (the allocation of SmolLM2-135M at 4.25 bits) */
} kg_opts;

static inline int kg_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Build a payload of dtype dt for W[rows][cols]; returns malloc'd bytes (exactly *nbytes). */
static inline uint8_t *kg_payload(cmf_dtype dt, uint64_t rows, uint64_t cols, kg_rng *r,
                                  const kg_opts *o, uint64_t *nbytes) {
    uint64_t n = rows * cols, G = cols / 32, sz = 0;
    uint8_t *p = NULL;
    static const unsigned widths[5] = {3, 4, 5, 6, 8};
    switch (dt) {
    case CMF_DT_F32:
        sz = 4 * n;
        p = malloc(sz);
        for (uint64_t i = 0; i < n; i++)
            st_u32(p + 4 * i, f32_bits(kg_unif(r, -1, 1)));
        break;
    case CMF_DT_F16:
    case CMF_DT_BF16:
        sz = 2 * n;
        p = malloc(sz);
        for (uint64_t i = 0; i < n; i++) {
            float v = kg_unif(r, -1, 1);
            st_u16(p + 2 * i, dt == CMF_DT_F16 ? f32_to_f16(v) : f32_to_bf16(v));
        }
        break;
    case CMF_DT_Q8_ROW:
    case CMF_DT_Q8_2F:
        sz = n + 2 * rows + (dt == CMF_DT_Q8_2F ? 2 * cols : 0);
        p = malloc(sz);
        kg_bytes(r, p, n);
        for (uint64_t i = 0; i < n; i++)
            if (p[i] == 0x80) p[i] = 0x81; /* encoders emit [-127, 127] */
        for (uint64_t i = 0; i < rows; i++)
            kg_scale(r, p + n + 2 * i, 1e-3f, 2e-2f);
        if (dt == CMF_DT_Q8_2F)
            for (uint64_t i = 0; i < cols; i++)
                kg_scale(r, p + n + 2 * rows + 2 * i, 0.25f, 4.0f);
        break;
    case CMF_DT_Q4_BLOCK: {
        uint64_t nb = (n + 31) / 32;
        sz = 18 * nb;
        p = malloc(sz);
        kg_bytes(r, p, 16 * nb);
        for (uint64_t i = 0; i < nb; i++)
            kg_scale(r, p + 16 * nb + 2 * i, 1e-3f, 2e-2f);
        break;
    }
    case CMF_DT_Q4_TILED:
    case CMF_DT_Q1:
    case CMF_DT_Q1S: {
        unsigned tile = dt == CMF_DT_Q4_TILED ? 18 : 6;
        uint64_t base = rows * G * tile, cnt = 0;
        uint32_t *idx = NULL;
        if (dt == CMF_DT_Q1S) {
            cnt = rows * o->ovl_per_row;
            idx = malloc((cnt ? cnt : 1) * 4);
            for (uint64_t k = 0; k < cnt; k++)
                idx[k] = (uint32_t)(kg_next(r) % n);
            if (!o->ovl_unsorted) { /* strictly ascending, unique */
                qsort(idx, cnt, 4, kg_cmp_u32);
                uint64_t u = 0;
                for (uint64_t k = 0; k < cnt; k++)
                    if (!u || idx[k] != idx[u - 1]) idx[u++] = idx[k];
                cnt = u;
            } else if (cnt > 2) {
                idx[cnt - 1] = idx[0]; /* a repeated position: the later entry wins */
            }
            sz = base + 4 + 6 * cnt;
        } else {
            sz = base;
        }
        p = malloc(sz);
        for (uint64_t i = 0; i < rows * G; i++) {
            kg_scale(r, p + i * tile, 1e-3f, 2e-2f);
            kg_bytes(r, p + i * tile + 2, tile - 2);
        }
        if (dt == CMF_DT_Q1S) {
            st_u32(p + base, (uint32_t)cnt);
            for (uint64_t k = 0; k < cnt; k++) {
                st_u32(p + base + 4 + 6 * k, idx[k]);
                st_u16(p + base + 8 + 6 * k, f32_to_f16(kg_unif(r, -0.2f, 0.2f)));
            }
        }
        free(idx);
        break;
    }
    case CMF_DT_Q1T: {
        uint64_t base = rows * G * 9;
        uint32_t *cnt = malloc(rows * 4);
        uint64_t total = 0;
        for (uint64_t i = 0; i < rows; i++)
            total += cnt[i] = o->ovl_per_row ? kg_u32(r, 2 * o->ovl_per_row + 1) : 0;
        sz = base + 4 * (rows + 1) + 4 * total;
        p = malloc(sz);
        for (uint64_t i = 0; i < rows * G; i++) {
            kg_scale(r, p + 9 * i, 1e-3f, 2e-2f);
            for (int j = 0; j < 7; j++)
                p[9 * i + 2 + j] = (uint8_t)kg_u32(r, j == 6 ? 9 : 243);
        }
        uint8_t *rp = p + base, *e = rp + 4 * (rows + 1);
        uint64_t k = 0;
        st_u32(rp, 0);
        for (uint64_t i = 0; i < rows; i++) {
            uint32_t cols_seen[64];
            uint64_t c = cnt[i], first = k;
            for (uint64_t j = 0; j < c; j++)
                cols_seen[j] = kg_u32(r, (uint32_t)cols);
            if (!o->ovl_unsorted) {
                qsort(cols_seen, c, 4, kg_cmp_u32);
                uint64_t u = 0;
                for (uint64_t j = 0; j < c; j++)
                    if (!u || cols_seen[j] != cols_seen[u - 1]) cols_seen[u++] = cols_seen[j];
                c = u;
            } else if (c > 2) {
                cols_seen[c - 1] = cols_seen[0];
            }
            for (uint64_t j = 0; j < c; j++, k++) {
                st_u16(e + 4 * k, (uint16_t)cols_seen[j]);
                st_u16(e + 4 * k + 2, f32_to_f16(kg_unif(r, -0.2f, 0.2f)));
            }
            (void)first;
            st_u32(rp + 4 * (i + 1), (uint32_t)k);
        }
        sz = base + 4 * (rows + 1) + 4 * k; /* de-duplication may have shrunk it */
        free(cnt);
        break;
    }
    case CMF_DT_Q4TP: {
        uint64_t cb = (G * 5 + 7) / 8;
        sz = n / 2 + 4 * rows + rows * cb;
        p = malloc(sz);
        kg_bytes(r, p, n / 2);
        for (uint64_t i = 0; i < rows; i++) {
            st_u16(p + n / 2 + 4 * i, f32_to_f16(kg_unif(r, -10.0f, -5.0f)));
            st_u16(p + n / 2 + 4 * i + 2, f32_to_f16(kg_unif(r, 0.0f, 0.2f)));
        }
        kg_bytes(r, p + n / 2 + 4 * rows, rows * cb);
        break;
    }
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO: {
        int ro = dt == CMF_DT_VBIT_RO;
        uint64_t hdr = rows + 2 * rows * G + (ro ? 4 * (rows + 1) : 0), packed = 0;
        uint8_t *bits = malloc(rows);
        for (uint64_t i = 0; i < rows; i++) {
            if (o->vbit_width == KG_VBIT_REAL) {
                unsigned u = kg_u32(r, 100);
                bits[i] = (uint8_t)(u < 2 ? 3 : u < 74 ? 4 : 5);
            } else {
                bits[i] = (uint8_t)(o->vbit_width ? o->vbit_width : widths[kg_u32(r, 5)]);
            }
            packed += bits[i] * cols / 8;
        }
        sz = hdr + packed;
        p = malloc(sz);
        memcpy(p, bits, rows);
        for (uint64_t i = 0; i < rows * G; i++)
            kg_scale(r, p + rows + 2 * i, 1e-3f, 2e-2f);
        if (ro) {
            uint64_t off = 0;
            for (uint64_t i = 0; i <= rows; i++) {
                st_u32(p + rows + 2 * rows * G + 4 * i, (uint32_t)off);
                if (i < rows) off += bits[i] * cols / 8;
            }
        }
        kg_bytes(r, p + hdr, packed);
        free(bits);
        break;
    }
    default:
        break;
    }
    *nbytes = sz;
    return p;
}

#endif
