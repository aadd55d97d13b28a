/* qmat.c - cmf_qmat: binding a payload to its layout (spec §3.2) and validating it once. The
 * per-dtype layouts are the bind entries of quant/dtype_ops.c. */
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "common/hugepages.h"
#include "quant/dtype_ops.h"
#include "quant/kernel_impl.h"

#define ULL(x) ((unsigned long long)(x))

/* Fixed layouts: the areas after the quants (rows * cols fits: cmf_dtype_nbytes checked it). */
cmf_status cq_bind_q8_row(cmf_qmat *m, const char *ctx, cmf_err *err) {
    (void)ctx, (void)err;
    m->scales = m->data + m->rows * m->cols;
    return CMF_OK;
}

cmf_status cq_bind_q8_2f(cmf_qmat *m, const char *ctx, cmf_err *err) {
    (void)ctx, (void)err;
    m->scales = m->data + m->rows * m->cols;
    m->extra = m->scales + 2 * m->rows;
    return CMF_OK;
}

cmf_status cq_bind_q4_block(cmf_qmat *m, const char *ctx, cmf_err *err) {
    (void)ctx, (void)err;
    m->scales = m->data + (m->rows * m->cols + 31) / 32 * 16;
    return CMF_OK;
}

cmf_status cq_bind_q4tp(cmf_qmat *m, const char *ctx, cmf_err *err) {
    (void)ctx, (void)err;
    m->scales = m->data + m->rows * m->cols / 2;
    m->extra = m->scales + 4 * m->rows;
    m->code_bytes = (m->groups * 5 + 7) / 8;
    return CMF_OK;
}

static bool vbit_width_ok(unsigned b) {
    return b == 3 || b == 4 || b == 5 || b == 6 || b == 8;
}

/* vbit / vbit_ro: bits, scales, (offsets,) packed rows. */
cmf_status cq_bind_vbit(cmf_qmat *m, const char *ctx, cmf_err *err) {
    const bool ro = m->dtype == CMF_DT_VBIT_RO;
    uint64_t rows = m->rows,
             hdr = rows + 2 * rows * m->groups; /* fits: min size checked by caller */
    m->extra = m->data;
    m->scales = m->data + rows;
    uint64_t packed = 0;
    for (uint64_t r = 0; r < rows; r++) {
        unsigned b = m->data[r];
        if (!vbit_width_ok(b))
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "vbit row %llu has bit width %u, allowed 3,4,5,6,8", ULL(r), b);
        packed += (uint64_t)b * (m->cols / 8); /* cols % 32 == 0: rows end on a byte */
    }
    if (ro) hdr += 4 * (rows + 1);
    uint64_t want;
    if (!ck_add_u64(hdr, packed, &want) || want != m->nbytes)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "%s payload is %llu bytes, its bit widths need %llu",
                           ro ? "vbit_ro" : "vbit", ULL(m->nbytes), ULL(want));
    m->quants = m->data + hdr;
    if (ro) {
        m->row_off32 = m->data + rows + 2 * rows * m->groups;
        uint64_t off = 0;
        for (uint64_t r = 0; r <= rows; r++) {
            uint64_t got = ld_u32(m->row_off32 + 4 * r);
            if (got != off)
                return cmf_err_set(
                    err, CMF_E_PARSE, ctx,
                    "vbit_ro row_offsets[%llu]=%llu, the running sum of row sizes is %llu", ULL(r),
                    ULL(got), ULL(off));
            if (r < rows) off += (uint64_t)m->data[r] * (m->cols / 8);
        }
        return CMF_OK;
    }
    uint64_t *ro_tab = malloc((rows + 1) * sizeof *ro_tab);
    if (!ro_tab)
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "no memory for %llu vbit row offsets",
                           ULL(rows + 1));
    uint64_t off = 0;
    for (uint64_t r = 0; r < rows; r++) {
        ro_tab[r] = off;
        off += (uint64_t)m->data[r] * (m->cols / 8);
    }
    ro_tab[rows] = off;
    m->row_off = ro_tab;
    m->owned = ro_tab;
    return CMF_OK;
}

/* Sort key of an overlay entry: position, then file order (a later entry wins). */
typedef struct {
    uint64_t pos, order;
    uint16_t val;
} ovl_ent;

static int ovl_cmp(const void *a, const void *b) {
    const ovl_ent *x = a, *y = b;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Sort ents[0..n) and keep the last entry of each position; returns the new count. */
static uint64_t ovl_normalize(ovl_ent *ents, uint64_t n) {
    qsort(ents, n, sizeof *ents, ovl_cmp);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (i + 1 < n && ents[i + 1].pos == ents[i].pos) continue;
        ents[k++] = ents[i];
    }
    return k;
}

cmf_status cq_bind_q1s(cmf_qmat *m, const char *ctx, cmf_err *err) {
    uint64_t base = m->rows * m->groups * CQ_Q1_TILE, numel = m->rows * m->cols;
    m->quants = m->data;
    uint64_t count = ld_u32(m->data + base);
    if (m->nbytes - base - 4 != count * 6)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1s overlay count %llu needs %llu bytes, the payload has %llu",
                           ULL(count), ULL(count * 6), ULL(m->nbytes - base - 4));
    const uint8_t *e = m->data + base + 4;
    bool sorted = true;
    for (uint64_t k = 0; k < count; k++) {
        uint64_t idx = ld_u32(e + 6 * k);
        if (idx >= numel)
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "q1s overlay entry %llu has flat index %llu >= %llu elements",
                               ULL(k), ULL(idx), ULL(numel));
        if (k && idx <= ld_u32(e + 6 * (k - 1))) sorted = false;
    }
    m->ovl = e;
    m->ovl_count = count;
    if (sorted) return CMF_OK;
    ovl_ent *ents = malloc(count * sizeof *ents);
    uint8_t *copy = malloc(count * 6);
    if (!ents || !copy) {
        free(ents);
        free(copy);
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "no memory to sort %llu q1s overlay entries",
                           ULL(count));
    }
    for (uint64_t k = 0; k < count; k++)
        ents[k] = (ovl_ent){ld_u32(e + 6 * k), k, ld_u16(e + 6 * k + 4)};
    uint64_t n = ovl_normalize(ents, count);
    for (uint64_t k = 0; k < n; k++) {
        st_u32(copy + 6 * k, (uint32_t)ents[k].pos);
        st_u16(copy + 6 * k + 4, ents[k].val);
    }
    free(ents);
    m->ovl = copy;
    m->ovl_count = n;
    m->owned = copy;
    return CMF_OK;
}

cmf_status cq_bind_q1t(cmf_qmat *m, const char *ctx, cmf_err *err) {
    uint64_t rows = m->rows, base = rows * m->groups * CQ_Q1T_TILE;
    m->quants = m->data;
    for (uint64_t i = 0; i < rows * m->groups; i++) {
        const uint8_t *t = m->data + i * CQ_Q1T_TILE;
        for (unsigned j = 2; j < CQ_Q1T_TILE; j++)
            if (t[j] > 242)
                return cmf_err_set(err, CMF_E_PARSE, ctx,
                                   "q1t tile %llu code byte %u = %u > 242 (not 5 base-3 digits)",
                                   ULL(i), j - 2, t[j]);
    }
    const uint8_t *rp = m->data + base, *e = rp + 4 * (rows + 1);
    if (ld_u32(rp) != 0)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "q1t row_ptr[0]=%u, must be 0", ld_u32(rp));
    bool sorted = true;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t a = ld_u32(rp + 4 * r), b = ld_u32(rp + 4 * (r + 1));
        if (b < a)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "q1t row_ptr[%llu]=%llu < row_ptr[%llu]=%llu",
                               ULL(r + 1), ULL(b), ULL(r), ULL(a));
    }
    uint64_t count = ld_u32(rp + 4 * rows);
    if (m->nbytes - base - 4 * (rows + 1) != 4 * count)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1t row_ptr[rows]=%llu needs %llu overlay bytes, the payload has %llu",
                           ULL(count), ULL(4 * count), ULL(m->nbytes - base - 4 * (rows + 1)));
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t a = ld_u32(rp + 4 * r), b = ld_u32(rp + 4 * (r + 1));
        for (uint64_t k = a; k < b; k++) {
            uint64_t col = ld_u16(e + 4 * k);
            if (col >= m->cols)
                return cmf_err_set(err, CMF_E_PARSE, ctx,
                                   "q1t overlay entry %llu of row %llu has col %llu >= %llu",
                                   ULL(k), ULL(r), ULL(col), ULL(m->cols));
            if (k > a && col <= ld_u16(e + 4 * (k - 1))) sorted = false;
        }
    }
    m->ovl_ptr = rp;
    m->ovl = e;
    m->ovl_count = count;
    if (sorted) return CMF_OK;
    ovl_ent *ents = malloc((count ? count : 1) * sizeof *ents);
    uint8_t *copy = malloc(4 * (rows + 1) + 4 * count);
    if (!ents || !copy) {
        free(ents);
        free(copy);
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "no memory to sort %llu q1t overlay entries",
                           ULL(count));
    }
    uint8_t *nrp = copy, *ne = copy + 4 * (rows + 1);
    uint64_t out = 0;
    st_u32(nrp, 0);
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t a = ld_u32(rp + 4 * r), b = ld_u32(rp + 4 * (r + 1));
        for (uint64_t k = a; k < b; k++)
            ents[k - a] = (ovl_ent){ld_u16(e + 4 * k), k, ld_u16(e + 4 * k + 2)};
        uint64_t n = ovl_normalize(ents, b - a);
        for (uint64_t k = 0; k < n; k++, out++) {
            st_u16(ne + 4 * out, (uint16_t)ents[k].pos);
            st_u16(ne + 4 * out + 2, ents[k].val);
        }
        st_u32(nrp + 4 * (r + 1), (uint32_t)out);
    }
    free(ents);
    m->ovl_ptr = nrp;
    m->ovl = ne;
    m->ovl_count = out;
    m->owned = copy;
    return CMF_OK;
}

cmf_status cmf_qmat_init(cmf_qmat *m, cmf_dtype dt, uint64_t rows, uint64_t cols,
                         const uint8_t *data, uint64_t nbytes, const char *ctx, cmf_err *err) {
    if (!m) return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "cmf_qmat_init: NULL view");
    memset(m, 0, sizeof *m);
    if (!data || rows == 0 || cols == 0)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx,
                           "cmf_qmat_init: NULL data or zero dimension [%llu, %llu]", ULL(rows),
                           ULL(cols));
    const cmf_dtype_traits *t = cmf_dtype_get(dt);
    uint64_t shape[2] = {rows, cols}, lo, hi;
    cmf_status st = cmf_dtype_nbytes(dt, 2, shape, &lo, &hi, ctx, err);
    if (st != CMF_OK) return st;
    if (nbytes < lo || nbytes > hi) {
        if (lo == hi)
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "%s [%llu, %llu] payload is %llu bytes, must be %llu", t->name,
                               ULL(rows), ULL(cols), ULL(nbytes), ULL(lo));
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "%s [%llu, %llu] payload is %llu bytes, must be in [%llu, %llu]",
                           t->name, ULL(rows), ULL(cols), ULL(nbytes), ULL(lo), ULL(hi));
    }
    m->dtype = dt;
    m->rows = rows;
    m->cols = cols;
    m->data = data;
    m->nbytes = nbytes;
    m->groups = cols / 32;
    m->quants = data;
    const cq_dtype_ops *ops = cq_dtype_ops_get(dt);
    if (ops->bind) st = ops->bind(m, ctx, err);
    if (st != CMF_OK) {
        free(m->owned);
        memset(m, 0, sizeof *m);
    }
    return st;
}

void cmf_qmat_free(cmf_qmat *m) {
    if (!m) return;
    if (m->lanes) cq_huge_free(m->lanes, (size_t)m->lanes_bytes);
    m->lanes = NULL;
    m->lanes_bytes = 0;
    free(m->owned);
    m->owned = NULL;
    m->row_off = NULL;
}

uint64_t cmf_qmat_bytes(const cmf_qmat *m) {
    return m->nbytes;
}
