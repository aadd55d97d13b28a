/* lanes_vbit.c - the batched-decode copy of vbit and vbit_ro (read by lanes_vbit_avx2.c and
 * lanes_vbit_avx512.c): the 4-bit class's lanes (lanes.c) for rows of mixed widths.
 *
 * A row's codes go in one of three forms, each a constant minus its value v = u - L (so that
 * every form's codes are unsigned or fit int8, and the scale is stored negated, f16 sign bit
 * flipped, which gives back the product's sign exactly):
 *  - narrow (3 and 4 bits): c = 8 - v in [0, 15] (4-bit rows: 15 - u), q4's nibbles;
 *  - five (5 bits): c = 16 - v in [0, 31], its low nibble as above and its fifth bit in a plane;
 *  - wide (6 and 8 bits): w = -v as int8, q8_row's bytes, with group scales.
 * Lanes of one vector must share a form, and a quarter of 5-bit rows put one in nearly every
 * 16 consecutive rows, so the rows of each window of 64 are sorted by form (narrow first, each
 * form in row order) and 16 sorted rows (a pair: two panels of 8, one zmm) take the widest form
 * among them: a copy about the file's size (SmolLM2-135M and Gemma 3 vbit: 2.5-5 % more code
 * bits than the file; in row order the widest form of 16 rows would add 15-17 %). The kernels
 * compute whole windows and write each sorted row's result to its row.
 *
 * The buffer: u32 per pair (its offset / 64 << 2 | its form), u8 per slot (the row within its
 * window, 0xFF past the last row), u8 per row (its slot within its window), to 64 bytes; then
 * the pairs, each G groups of codes and then G * 16 f16 scales (-d). Per group, at byte 32h +
 * 4i + j of 64-byte vectors (h the panel, i the row's lane in it, j = 0..3):
 *  - narrow: 4 vectors k, low nibble c of column 4k + j, high nibble c of column 16 + 4k + j;
 *  - five: those 4, then a plane whose byte at that place holds in bit 2k + hi the fifth bit of
 *    the code vector k's low (hi = 0) or high (hi = 1) nibble gives;
 *  - wide: 8 vectors k, w of column 4k + j.
 * A copy whose pairs end past 2 GiB is not made (the GEMM's unpack gathers by 32-bit offsets). */
#include <string.h>

#include "common/bytes.h"
#include "common/f16.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

#define WIN  CQ_LANES_VBIT_WIN
#define PAIR 16

uint64_t cq_lanes_vbit_group_bytes(unsigned form) {
    return form == CQ_VBIT_NARROW ? 256 : form == CQ_VBIT_FIVE ? 320 : 512;
}

static uint64_t pair_bytes(uint64_t G, unsigned form) {
    return (G * (cq_lanes_vbit_group_bytes(form) + 32) + 63) / 64 * 64;
}

static uint64_t pairs_of(const cmf_qmat *m) {
    return (m->rows + PAIR - 1) / PAIR; /* windows of 64 rows: 4 pairs each but the last */
}

static uint64_t header_bytes(const cmf_qmat *m) {
    const uint64_t P = pairs_of(m);
    return (4 * P + PAIR * P + m->rows + 63) / 64 * 64;
}

/* Window w's rows by form: counts n[3]; its slots' rows (slot_row, n_rows entries) if given.
 * The counts are compares of the forms (no indexed increment: vector compares once compiled),
 * since a fill finds its first window's offset by counting every window before it, thousands
 * for a chunk far into a 262,144-row table. */
static uint64_t window_sort(const cmf_qmat *m, uint64_t w, unsigned n[3], uint8_t *slot_row) {
    const uint64_t r0 = w * WIN, r1 = r0 + WIN < m->rows ? r0 + WIN : m->rows;
    unsigned narrow = 0, five = 0;
    for (uint64_t r = r0; r < r1; r++) {
        const unsigned f = cq_vbit_form(cq_vbit_bits(m, r));
        narrow += f == CQ_VBIT_NARROW;
        five += f == CQ_VBIT_FIVE;
    }
    _Static_assert(CQ_VBIT_NARROW == 0 && CQ_VBIT_FIVE == 1 && CQ_VBIT_WIDE == 2, "n's order");
    n[0] = narrow, n[1] = five, n[2] = (unsigned)(r1 - r0) - narrow - five;
    if (slot_row) {
        unsigned at[3] = {0, n[0], n[0] + n[1]};
        for (uint64_t r = r0; r < r1; r++)
            slot_row[at[cq_vbit_form(cq_vbit_bits(m, r))]++] = (uint8_t)(r - r0);
    }
    return r1 - r0;
}

/* The form of the pair holding window slots [s, s + 16) of a window sorted into n: its last
 * row's (the widest). */
static unsigned pair_form(const unsigned n[3], unsigned s, uint64_t rows) {
    uint64_t last = s + PAIR < rows ? s + PAIR - 1 : rows - 1;
    return last < n[0] ? CQ_VBIT_NARROW : last < n[0] + n[1] ? CQ_VBIT_FIVE : CQ_VBIT_WIDE;
}

/* Bytes of window w's pairs. */
static uint64_t window_bytes(const cmf_qmat *m, uint64_t w) {
    unsigned n[3];
    const uint64_t rows = window_sort(m, w, n, NULL);
    uint64_t b = 0;
    for (unsigned s = 0; s < rows; s += PAIR)
        b += pair_bytes(m->groups, pair_form(n, s, rows));
    return b;
}

uint64_t cq_lanes_vbit_bytes(const cmf_qmat *m) {
    uint64_t b = header_bytes(m);
    for (uint64_t w = 0; w * WIN < m->rows; w++)
        b += window_bytes(m, w);
    b += 64; /* the unpack's 4-byte scale reads may pass the last pair by 2 bytes */
    return b <= ((uint64_t)1 << 31) ? b : 0;
}

/* Rows [r0, r1) (whole windows: r0 % 64 == 0, r1 % 64 == 0 or the last row) into buf (zeroed). */
void cq_lanes_vbit_fill(const cmf_qmat *m, uint8_t *buf, uint64_t r0, uint64_t r1) {
    const uint64_t P = pairs_of(m), G = m->groups;
    uint32_t *ptab = (uint32_t *)(void *)buf;
    uint8_t *slot_row = buf + 4 * P, *row_slot = slot_row + PAIR * P;
    uint64_t off = header_bytes(m);
    for (uint64_t w = 0; w < r0 / WIN; w++)
        off += window_bytes(m, w);
    for (uint64_t w = r0 / WIN; w * WIN < r1 && w * WIN < m->rows; w++) {
        unsigned n[3];
        uint8_t *sr = slot_row + w * WIN;
        const uint64_t rows = window_sort(m, w, n, sr);
        for (uint64_t s = rows; s < WIN && w * WIN + s < PAIR * P; s++)
            sr[s] = 0xFF;
        for (unsigned s = 0; s < rows; s += PAIR) {
            const unsigned f = pair_form(n, s, rows);
            ptab[w * (WIN / PAIR) + s / PAIR] = (uint32_t)(off / 64 << 2 | f);
            for (unsigned l = 0; l < PAIR && s + l < rows; l++) {
                const uint64_t r = w * WIN + sr[s + l];
                row_slot[r] = (uint8_t)(s + l);
                cq_avx2_lanes_vbit_put_row(m, buf + off, f, l, r);
            }
            off += pair_bytes(G, f);
        }
    }
}

const uint8_t *cq_lanes_vbit_pair(const cmf_qmat *m, uint64_t q, unsigned *form) {
    const uint32_t e = ((const uint32_t *)m->lanes)[q];
    *form = e & 3u;
    return (const uint8_t *)m->lanes + (uint64_t)(e >> 2) * 64;
}

void cq_lanes_vbit_pairs(const cmf_qmat *m, uint64_t r0, uint64_t r1, uint64_t *q0, uint64_t *q1) {
    const uint64_t P = pairs_of(m), e = (r1 + WIN - 1) / WIN * (WIN / PAIR);
    *q0 = r0 / WIN * (WIN / PAIR);
    *q1 = e < P ? e : P;
}

cq_vbit_lane cq_lanes_vbit_lane(const cmf_qmat *m, uint64_t r) {
    const uint64_t P = pairs_of(m);
    const uint8_t *buf = m->lanes;
    const uint64_t s = r / WIN * WIN + buf[4 * P + PAIR * P + r];
    unsigned form;
    const uint8_t *p = cq_lanes_vbit_pair(m, s / PAIR, &form);
    return (cq_vbit_lane){(uint64_t)(p - buf), form, (unsigned)(s % PAIR)};
}

const uint8_t *cq_lanes_vbit_slot_rows(const cmf_qmat *m) {
    return (const uint8_t *)m->lanes + 4 * pairs_of(m);
}

void cq_lanes_vbit_decode_row(const cmf_qmat *m, uint64_t r, float *out) {
    const cq_vbit_lane ln = cq_lanes_vbit_lane(m, r);
    const uint64_t G = m->groups, gb = cq_lanes_vbit_group_bytes(ln.form);
    const uint8_t *p = (const uint8_t *)m->lanes + ln.off;
    const unsigned at = 32 * (ln.slot / 8) + 4 * (ln.slot % 8);
    for (uint64_t g = 0; g < G; g++) {
        const uint8_t *q = p + g * gb + at;
        const float d = f16_to_f32(ld_u16(p + G * gb + g * 32 + 2 * ln.slot) ^ 0x8000u);
        for (unsigned c = 0; c < 32; c++) {
            const unsigned k = c % 16 / 4, j = c % 4, hi = c / 16;
            int v;
            if (ln.form == CQ_VBIT_WIDE) {
                v = -(int)(int8_t)q[64 * (c / 4) + c % 4];
            } else {
                unsigned code = q[64 * k + j] >> (4 * hi) & 15u;
                if (ln.form == CQ_VBIT_FIVE) code |= (q[256 + j] >> (2 * k + hi) & 1u) << 4;
                v = (ln.form == CQ_VBIT_NARROW ? 8 : 16) - (int)code;
            }
            out[32 * g + c] = (float)v * d;
        }
    }
}

const uint8_t *cq_lanes_vbit_source(const cmf_qmat *m, uint64_t r0, uint64_t r1, uint64_t *n) {
    if (r1 > m->rows) r1 = m->rows;
    if (r0 >= r1) {
        *n = 0;
        return m->quants;
    }
    const uint8_t *a = cq_vbit_row(m, r0);
    const uint8_t *e =
        cq_vbit_row(m, r1 - 1) + cmf_vbit_row_bytes(cq_vbit_bits(m, r1 - 1), m->cols);
    *n = (uint64_t)(e - a);
    return a;
}
