/* lanes.c - the batched-decode copy of q8_row and the 4-bit class (cmf_qmat_build_lanes): its
 * layout, made once at load and read by the AVX2 tier (lanes_avx2.c) and the AVX-512 VNNI tier
 * (lanes_avx512.c); vbit's, whose rows are sorted by width first, in lanes_vbit.c.
 *
 * Panels of 8 rows, one int32 lane per row. The 4-bit class: per 32-column group 4 vectors of
 * 32 bytes, byte 4i + j of vector k holding row i's codes of columns 4k + j (low nibble) and
 * 16 + 4k + j (high nibble), then the panel's G * 8 scales (f16 as stored for q4_tiled and
 * q4_block); q4tp instead the 8 rows' ladder numbers as f32 (lo and step; on the AVX-512 tier
 * also qq, q4tp_ladder_avx512.h) and then their G * 8 5-bit codes as bytes, a copy 4-5 % larger
 * than the file where f32 scales made it 20 %: each tier's reader computes every rung from them
 * as its integer GEMM's ladder does, so with the same bits. q8_row: per group 8 vectors, byte
 * 4i + j of vector k row i's weight of column 4k + j, then the 8 row scales as f32.
 *
 * The AVX-512 tier reads two panels at a time (16 lanes), so there a pair of panels is stored
 * interleaved, in the order its passes read it: per group the 4 (q8_row 8) vectors as panel
 * a's then panel b's (one 64-byte load gives the 16 lanes of vector k), then the group's
 * scales (a's 8, b's 8) or q4tp's codes (a's 8, b's 8); q4tp's ladder numbers (lo, step, qq:
 * a's 8 then b's 8 each) before the first group, q8_row's row scales after the last. A pass
 * then reads its pair as one stream; two panels read side by side, a panel apart, had read
 * rows of 2,048 columns and more slower than the file's row-major kernels did. */
#include <string.h>

#include "common/bytes.h"
#include "common/cpu.h"
#include "common/f16.h"
#include "common/hugepages.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/q4tp_rung.h"

#define PR 8 /* rows per panel */

/* The copy is read by lanes_avx512.c (else lanes_avx2.c). */
static bool avx512_reader(void) {
    return cq_cpu_isa() >= CQ_ISA_AVX512;
}

/* the dtypes with a copy (vbit's may still be too large: cq_lanes_vbit_bytes) */
bool cq_lanes_supports(const cmf_qmat *m) {
    return m->cols % 32 == 0 &&
           (m->dtype == CMF_DT_Q4_TILED || m->dtype == CMF_DT_Q4_BLOCK || m->dtype == CMF_DT_Q4TP ||
            m->dtype == CMF_DT_Q8_ROW || cq_gemm_vbit(m));
}

/* Bytes of a q4tp panel's ladder numbers: the reader's (lo, step; AVX-512 also qq) */
unsigned cq_lanes_q4tp_nums(void) {
    return avx512_reader() ? CQ_LANES_Q4TP_NUMS_AVX512 : CQ_LANES_Q4TP_NUMS_AVX2;
}

/* Bytes of one panel, rounded to 64: the 4-bit class G * 128 nibble bytes, then G * 8 scales
 * (q4tp: its ladder numbers, then G * 8 codes); q8_row G * 256 weight bytes, then 8 f32 row
 * scales. */
uint64_t cq_lanes_panel_bytes(const cmf_qmat *m) {
    const uint64_t G = m->groups;
    if (m->dtype == CMF_DT_Q8_ROW) return (G * 256 + PR * 4 + 63) / 64 * 64;
    if (m->dtype == CMF_DT_Q4TP) return (G * (128 + PR) + cq_lanes_q4tp_nums() + 63) / 64 * 64;
    return (G * (128 + PR * 2) + 63) / 64 * 64;
}

/* The AVX-512 layout's pair: q4tp's ladder numbers, the groups (codes of both panels, then
 * their scales or q4tp codes), q8_row's 16 row scales. */
uint64_t cq_lanes_pair_bytes(const cmf_qmat *m) {
    const int q8 = m->dtype == CMF_DT_Q8_ROW, q4tp = m->dtype == CMF_DT_Q4TP;
    const uint64_t tail = q8 ? 2 * PR * 4 : 0;
    return (cq_lanes_pair_head(q4tp) + m->groups * cq_lanes_pair_group(q8, q4tp) + tail + 63) / 64 *
           64;
}

/* Where row r's bytes go in the copy at `base`, in either layout: group g's vector k at
 * codes + g * g_stride + k * k_stride (lane r % 8 at + 4 (r % 8)); its scale (or q4tp code) of
 * group g at side + g * side_stride (+ 2 (r % 8), q4tp + r % 8); q4tp's ladder number n (lo,
 * step, qq) and q8_row's row scale at nums + n * nums_stride (+ 4 (r % 8)). */
typedef struct {
    uint8_t *codes, *side, *nums;
    uint64_t g_stride, side_stride;
    unsigned k_stride, nums_stride;
} lane_place;

static lane_place place_of(const cmf_qmat *m, uint8_t *base, uint64_t r) {
    const uint64_t G = m->groups;
    const bool q8 = m->dtype == CMF_DT_Q8_ROW, q4tp = m->dtype == CMF_DT_Q4TP;
    if (avx512_reader()) {
        uint8_t *pair = base + (r / (2 * PR)) * cq_lanes_pair_bytes(m);
        const unsigned h = (unsigned)(r / PR % 2), head = (unsigned)cq_lanes_pair_head(q4tp);
        const uint64_t gb = cq_lanes_pair_group(q8, q4tp);
        lane_place p = {pair + head + 32 * h, NULL, NULL, gb, gb, 64, 64};
        if (q8) {
            p.nums = pair + G * gb + 32 * h;
        } else {
            p.side = pair + head + 256 + (q4tp ? PR : 2 * PR) * h;
            p.nums = pair + 32 * h;
        }
        return p;
    }
    uint8_t *panel = base + (r / PR) * cq_lanes_panel_bytes(m);
    const uint64_t cb = q8 ? 256 : 128;
    lane_place p = {panel, NULL, panel + G * cb, cb, 0, 32, 32};
    if (!q8) {
        p.side = panel + G * 128 + (q4tp ? cq_lanes_q4tp_nums() : 0);
        p.side_stride = q4tp ? PR : 2 * PR;
    }
    return p;
}

/* q8_row: row r into its place (lane r % 8). */
static void put_q8_row(const cmf_qmat *m, const lane_place *p, uint64_t r) {
    const uint64_t G = m->groups;
    const unsigned i = (unsigned)(r % PR);
    const uint8_t *w = m->quants + r * m->cols;
    for (uint64_t g = 0; g < G; g++)
        for (unsigned k = 0; k < 8; k++)
            memcpy(p->codes + g * p->g_stride + k * p->k_stride + 4 * i, w + 32 * g + 4 * k, 4);
    float rs = f16_to_f32(ld_u16(m->scales + 2 * r));
    memcpy(p->nums + 4 * i, &rs, 4);
}

/* Row i of a panel, group g: its 16 nibble bytes (element 2j low, 2j + 1 high in byte j) into
 * the group's 4 vectors (k_stride apart; lanes i). */
static void put_group(uint8_t *dst, unsigned k_stride, unsigned i, const uint8_t *nib) {
    for (unsigned mi = 0; mi < 8; mi++) {
        const unsigned a = nib[mi], b = nib[8 + mi]; /* columns 2mi, 2mi+1 and 16 + those */
        uint8_t *o = dst + k_stride * (mi / 2) + 4 * i + 2 * (mi % 2);
        o[0] = (uint8_t)((a & 15) | (b & 15) << 4);
        o[1] = (uint8_t)((a >> 4) | (b & 0xF0));
    }
}

void cq_lanes_q4tp_ladder(const cmf_qmat *m, uint64_t r, float ladder[32]) {
    (avx512_reader() ? cq_avx512_q4tp_ladder : cq_avx2_q4tp_ladder)(m, r, ladder);
}

/* The 4-bit class: row r's nibbles and scales into its place (lane r % 8). */
static void put_q4_row(const cmf_qmat *m, const lane_place *p, uint64_t r) {
    const uint64_t G = m->groups;
    const unsigned i = (unsigned)(r % PR);
    const bool q4tp = m->dtype == CMF_DT_Q4TP;
    if (q4tp) { /* lo and step, the file's f16 as f32 (AVX-512: then qq) */
        float n[3];
        if (avx512_reader()) {
            cq_avx512_q4tp_params(m, r, n);
        } else {
            n[0] = f16_to_f32(ld_u16(m->scales + 4 * r));
            n[1] = f16_to_f32(ld_u16(m->scales + 4 * r + 2));
        }
        for (unsigned k = 0; k < cq_lanes_q4tp_nums() / 32; k++)
            memcpy(p->nums + k * p->nums_stride + 4 * i, &n[k], 4);
    }
    for (uint64_t g = 0; g < G; g++) {
        put_group(p->codes + g * p->g_stride, p->k_stride, i, cq_q4_nibbles(m, r, g));
        uint8_t *sd = p->side + g * p->side_stride;
        if (q4tp)
            sd[i] = (uint8_t)cq_q4tp_code(m, r, g);
        else if (m->dtype == CMF_DT_Q4_TILED)
            memcpy(sd + 2 * i, m->quants + (r * G + g) * CQ_Q4T_TILE, 2);
        else
            memcpy(sd + 2 * i, m->scales + 2 * (r * G + g), 2);
    }
}

uint64_t cq_lanes_bytes(const cmf_qmat *m) {
    if (!cq_lanes_supports(m)) return 0;
    if (cq_gemm_vbit(m)) return cq_lanes_vbit_bytes(m);
    return avx512_reader() ? (m->rows + 2 * PR - 1) / (2 * PR) * cq_lanes_pair_bytes(m)
                           : (m->rows + PR - 1) / PR * cq_lanes_panel_bytes(m);
}

uint64_t cq_lanes_block(const cmf_qmat *m) {
    return m->lanes && cq_gemm_vbit(m) ? CQ_LANES_VBIT_WIN : 2 * PR;
}

void cq_lanes_fill(const cmf_qmat *m, uint8_t *buf, uint64_t r0, uint64_t r1) {
    if (cq_gemm_vbit(m)) {
        cq_lanes_vbit_fill(m, buf, r0, r1);
        return;
    }
    /* rows past the last hold code (weight) 0 and scale 0 (zeroed memory): their sums are 0 */
    for (uint64_t r = r0; r < r1 && r < m->rows; r++) {
        const lane_place p = place_of(m, buf, r);
        (m->dtype == CMF_DT_Q8_ROW ? put_q8_row : put_q4_row)(m, &p, r);
    }
}

const uint8_t *cq_lanes_source(const cmf_qmat *m, uint64_t r0, uint64_t r1, unsigned part,
                               uint64_t *n) {
    if (r1 > m->rows) r1 = m->rows;
    *n = 0;
    if (r0 >= r1) return NULL;
    const uint64_t G = m->groups;
    if (part == 0) { /* the codes */
        if (cq_gemm_vbit(m)) return cq_lanes_vbit_source(m, r0, r1, n);
        const uint64_t per_row = m->dtype == CMF_DT_Q8_ROW     ? m->cols
                                 : m->dtype == CMF_DT_Q4_TILED ? G * CQ_Q4T_TILE
                                                               : G * 16;
        *n = (r1 - r0) * per_row;
        return m->quants + r0 * per_row;
    }
    if (part == 1) { /* the scales beside them: per row (q8_row, q4tp's lo and step), per group */
        const uint64_t per_row = m->dtype == CMF_DT_Q8_ROW     ? 2
                                 : m->dtype == CMF_DT_Q4TP     ? 4
                                 : m->dtype == CMF_DT_Q4_TILED ? 0
                                                               : 2 * G;
        *n = (r1 - r0) * per_row;
        return per_row ? m->scales + r0 * per_row : NULL;
    }
    if (part == 2 && m->dtype == CMF_DT_Q4TP) { /* q4tp's 5-bit codes */
        *n = (r1 - r0) * m->code_bytes;
        return m->extra + r0 * m->code_bytes;
    }
    return NULL;
}

bool cq_lanes_build(cmf_qmat *m) {
    const size_t bytes = m->lanes ? 0 : (size_t)cq_lanes_bytes(m);
    if (!bytes) return m->lanes != NULL;
    uint8_t *buf = cq_huge_alloc(bytes, bytes >= CQ_HUGE_PAGE);
    if (!buf) return false;
    cq_lanes_fill(m, buf, 0, m->rows);
    m->lanes = buf;
    m->lanes_bytes = bytes;
    return true;
}

/* every dtype with a copy (cmf_qmat_lanes_rows) */
void cq_lanes_decode_row(const cmf_qmat *m, uint64_t r, float *out) {
    if (cq_gemm_vbit(m)) {
        cq_lanes_vbit_decode_row(m, r, out);
        return;
    }
    const uint64_t G = m->groups;
    const unsigned i = (unsigned)(r % PR);
    const lane_place p = place_of(m, (uint8_t *)m->lanes, r);
    if (m->dtype == CMF_DT_Q8_ROW) {
        float s;
        memcpy(&s, p.nums + 4 * i, 4);
        for (uint64_t g = 0; g < G; g++)
            for (unsigned k = 0; k < 8; k++)
                for (unsigned j = 0; j < 4; j++)
                    out[32 * g + 4 * k + j] =
                        (float)(int8_t)p.codes[g * p.g_stride + k * p.k_stride + 4 * i + j] * s;
        return;
    }
    float ladder[32]; /* q4tp: the file's ladder from the f16 lo and step the copy keeps exactly */
    const bool codes = m->dtype == CMF_DT_Q4TP;
    if (codes) {
        float lo, st;
        memcpy(&lo, p.nums + 4 * i, 4);
        memcpy(&st, p.nums + p.nums_stride + 4 * i, 4);
        cq_q4tp_ladder_f32(lo, st, ladder);
    }
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *sd = p.side + g * p.side_stride;
        const float d = codes ? ladder[sd[i]] : f16_to_f32(ld_u16(sd + 2 * i));
        for (unsigned k = 0; k < 4; k++)
            for (unsigned j = 0; j < 4; j++) {
                const unsigned b = p.codes[g * p.g_stride + k * p.k_stride + 4 * i + j];
                out[32 * g + 4 * k + j] = (float)((int)(b & 15) - 8) * d;
                out[32 * g + 16 + 4 * k + j] = (float)((int)(b >> 4) - 8) * d;
            }
    }
}
