/* kernel_tile.c - build a tall payload by repeating the rows of a small one (row r of the
 * result is row r % rows of the source), section by section of its spec §3.2 layout.
 * Benchmarks use it to time kernels on encoded weights far larger than the caches without
 * encoding gigabytes of floats. */
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/hugepages.h"
#include "bench/kernel_bench.h"
#include "quant/kernel_impl.h"

/* Copy a row-major section of `per` bytes per row from src to dst, repeating rows. */
static uint8_t *tile_section(uint8_t *dst, const uint8_t *src, uint64_t per, uint64_t rows,
                             uint64_t rows_out) {
    for (uint64_t r = 0; r < rows_out; r += rows) {
        uint64_t k = rows_out - r < rows ? rows_out - r : rows;
        memcpy(dst, src, k * per);
        dst += k * per;
    }
    return dst;
}

cmf_status cq_qmat_tile_rows(const cmf_qmat *m, uint64_t rows_out, bool huge, uint8_t **out,
                             uint64_t *out_nbytes, cmf_err *err) {
    const uint64_t R = m->rows, C = m->cols, G = m->groups;
    *out = NULL;
    /* bytes of the result: the source's per-row share times rows_out, plus what does not scale */
    uint64_t fixed = 0,
             var =
                 0; /* var: bytes of variable rows (vbit packed, overlays), for the whole result */
    const uint8_t *e;
    uint64_t cnt;
    unsigned stride;
    if (m->dtype == CMF_DT_Q8_2F) fixed = 2 * C;
    if (m->dtype == CMF_DT_Q1S) fixed = 4;
    if (m->dtype == CMF_DT_Q1T) fixed = 4;
    if (m->dtype == CMF_DT_VBIT_RO) fixed = 4;
    for (uint64_t r = 0; r < rows_out; r++) {
        uint64_t s = r % R;
        if (m->dtype == CMF_DT_VBIT || m->dtype == CMF_DT_VBIT_RO)
            var += cq_vbit_bits(m, s) * C / 8;
        if (m->dtype == CMF_DT_Q1S || m->dtype == CMF_DT_Q1T) {
            cq_ovl_row(m, s, &e, &cnt, &stride);
            var += cnt * stride;
        }
    }
    uint64_t per; /* fixed-size bytes per row */
    switch (m->dtype) {
    case CMF_DT_F32:
        per = 4 * C;
        break;
    case CMF_DT_F16:
    case CMF_DT_BF16:
        per = 2 * C;
        break;
    case CMF_DT_Q8_ROW:
    case CMF_DT_Q8_2F:
        per = C + 2;
        break;
    case CMF_DT_Q4_BLOCK:
    case CMF_DT_Q4_TILED:
        per = 18 * G;
        break;
    case CMF_DT_Q4TP:
        per = 16 * G + 4 + m->code_bytes;
        break;
    case CMF_DT_Q1:
    case CMF_DT_Q1S:
        per = CQ_Q1_TILE * G;
        break;
    case CMF_DT_Q1T:
        per = CQ_Q1T_TILE * G + 4;
        break;
    case CMF_DT_VBIT:
        per = 1 + 2 * G;
        break;
    case CMF_DT_VBIT_RO:
        per = 1 + 2 * G + 4;
        break;
    default:
        return cmf_err_set(err, CMF_E_UNSUPPORTED, NULL, "cannot tile dtype %u",
                           (unsigned)m->dtype);
    }
    if (m->dtype == CMF_DT_Q4_BLOCK && C % 32)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, NULL,
                           "cannot tile q4_block rows that share groups");
    uint64_t total;
    if (!ck_mul_u64(per, rows_out, &total) || !ck_add_u64(total, fixed + var, &total) ||
        total > SIZE_MAX)
        return cmf_err_set(err, CMF_E_LIMIT, NULL, "tiled payload size overflows");
    uint8_t *buf = cq_huge_alloc(total ? total : 1, huge), *d = buf;
    if (!buf)
        return cmf_err_set(err, CMF_E_NOMEM, NULL, "no memory for a %llu-byte payload",
                           (unsigned long long)total);
    switch (m->dtype) {
    case CMF_DT_F32:
    case CMF_DT_F16:
    case CMF_DT_BF16:
    case CMF_DT_Q4_TILED:
    case CMF_DT_Q1:
        tile_section(d, m->data, per, R, rows_out);
        break;
    case CMF_DT_Q8_ROW:
    case CMF_DT_Q8_2F:
        d = tile_section(d, m->quants, C, R, rows_out);
        d = tile_section(d, m->scales, 2, R, rows_out);
        if (m->dtype == CMF_DT_Q8_2F) memcpy(d, m->extra, 2 * C);
        break;
    case CMF_DT_Q4_BLOCK:
        d = tile_section(d, m->quants, 16 * G, R, rows_out);
        tile_section(d, m->scales, 2 * G, R, rows_out);
        break;
    case CMF_DT_Q4TP:
        d = tile_section(d, m->quants, 16 * G, R, rows_out);
        d = tile_section(d, m->scales, 4, R, rows_out);
        tile_section(d, m->extra, m->code_bytes, R, rows_out);
        break;
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO: {
        d = tile_section(d, m->extra, 1, R, rows_out);
        d = tile_section(d, m->scales, 2 * G, R, rows_out);
        uint8_t *offs = d;
        if (m->dtype == CMF_DT_VBIT_RO) d += 4 * (rows_out + 1);
        uint64_t off = 0;
        for (uint64_t r = 0; r < rows_out; r++) {
            uint64_t s = r % R, len = cq_vbit_bits(m, s) * C / 8;
            if (m->dtype == CMF_DT_VBIT_RO) {
                if (off > UINT32_MAX) {
                    cq_huge_free(buf, total);
                    return cmf_err_set(err, CMF_E_LIMIT, NULL, "vbit_ro packed area exceeds 4 GiB");
                }
                st_u32(offs + 4 * r, (uint32_t)off);
            }
            memcpy(d + off, cq_vbit_row(m, s), len);
            off += len;
        }
        if (m->dtype == CMF_DT_VBIT_RO) st_u32(offs + 4 * rows_out, (uint32_t)off);
        break;
    }
    case CMF_DT_Q1S: {
        d = tile_section(d, m->quants, per, R, rows_out);
        uint8_t *cntp = d;
        d += 4;
        uint64_t k = 0;
        for (uint64_t r = 0; r < rows_out; r++) {
            cq_ovl_row(m, r % R, &e, &cnt, &stride);
            for (uint64_t j = 0; j < cnt; j++, k++) {
                uint64_t idx = r * C + cq_ovl_col(m, r % R, e + j * stride);
                if (idx > UINT32_MAX) {
                    cq_huge_free(buf, total);
                    return cmf_err_set(err, CMF_E_LIMIT, NULL, "q1s flat index exceeds u32");
                }
                st_u32(d + 6 * k, (uint32_t)idx);
                memcpy(d + 6 * k + 4, e + j * stride + 4, 2);
            }
        }
        if (k > UINT32_MAX) {
            cq_huge_free(buf, total);
            return cmf_err_set(err, CMF_E_LIMIT, NULL, "q1s overlay count exceeds u32");
        }
        st_u32(cntp, (uint32_t)k);
        break;
    }
    case CMF_DT_Q1T: {
        d = tile_section(d, m->quants, CQ_Q1T_TILE * G, R, rows_out);
        uint8_t *rp = d;
        d += 4 * (rows_out + 1);
        uint64_t k = 0;
        st_u32(rp, 0);
        for (uint64_t r = 0; r < rows_out; r++) {
            cq_ovl_row(m, r % R, &e, &cnt, &stride);
            memcpy(d + 4 * k, e, 4 * cnt);
            k += cnt;
            if (k > UINT32_MAX) {
                cq_huge_free(buf, total);
                return cmf_err_set(err, CMF_E_LIMIT, NULL, "q1t overlay count exceeds u32");
            }
            st_u32(rp + 4 * (r + 1), (uint32_t)k);
        }
        break;
    }
    default:
        break;
    }
    *out = buf;
    *out_nbytes = total;
    return CMF_OK;
}
