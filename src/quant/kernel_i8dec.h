/* kernel_i8dec.h - one-token (decode) matrix-vector kernels with int8 activations
 * (CMF_KF_INT8_ACT) for the 4-bit class and vbit, built on AVX-512 VNNI + VBMI
 * (kernel_i8dec_avx512.c), and the AVX2 tier's (kernel_i8dec_avx2.c; the rows in
 * kernel_i8dec_avx2_rows.h and kernel_i8dec_vbit_avx2_rows.h). Internal to src/quant. */
#ifndef CORTIQ_QUANT_KERNEL_I8DEC_H
#define CORTIQ_QUANT_KERNEL_I8DEC_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/kernels_engine.h"

/* y[r - r0] = W[r]·x for r in [r0, r1) with x quantized to int8 per 32-group (the error
 * bound of CMF_KF_INT8_ACT). Handles q4_tiled, q4_block, q4tp, vbit and vbit_ro with
 * cols % 32 == 0 when the CPU has AVX-512 VNNI and VBMI. Returns false, writing nothing,
 * when it cannot run (other dtype or shape, CPU without those features, no scratch
 * memory); the caller then uses another path. */
bool cq_avx512_i8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1);

/* Whether cq_avx512_i8dec_matvec takes m on this CPU. */
bool cq_avx512_i8dec_supports(const cmf_qmat *m);

/* The same product in two steps, so that one quantized token serves many row ranges
 * (cmf_tok8_* in quant/kernels_engine.h): bytes of a prepared token of `cols` columns (0 when this
 * CPU lacks the features or cols % 32 != 0), quantizing x into buf (that many bytes, 64-byte
 * aligned), and rows [r0, r1) of a supported m with m->cols == cols, the same result as
 * cq_avx512_i8dec_matvec over the same rows. */
size_t cq_avx512_i8dec_tok_bytes(uint64_t cols);
void cq_avx512_i8dec_tok_prepare(void *buf, const float *x, uint64_t cols);
void cq_avx512_i8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                                uint64_t r1);
/* n (<= CMF_TOK8_MULTI_MAX) prepared tokens over rows [r0, r1): y[t] gets the bits
 * cq_avx512_i8dec_tok_matvec gives buf[t] alone, each weight step loaded and decoded once for
 * up to 4 tokens. */
void cq_avx512_i8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                      float *const *y, uint64_t r0, uint64_t r1);

/* The AVX2 tier's one-token kernels for q4_tiled, q4_block and q4tp (kernel_i8dec_avx2.c) and
 * vbit / vbit_ro (kernel_i8dec_vbit_avx2_rows.h),
 * the same contract: cq_avx2_i8dec_matvec quantizes x per call (false, writing nothing, for
 * other dtypes, cols % 32 != 0 or no scratch memory); the prepared token takes
 * cq_avx2_i8dec_tok_bytes(cols) bytes, 32-byte aligned, and gives the same bits. */
bool cq_avx2_i8dec_supports(const cmf_qmat *m);
bool cq_avx2_i8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1);
size_t cq_avx2_i8dec_tok_bytes(uint64_t cols);
void cq_avx2_i8dec_tok_prepare(void *buf, const float *x, uint64_t cols);
void cq_avx2_i8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                              uint64_t r1);
/* n (<= CMF_TOK8_MULTI_MAX) prepared tokens over rows [r0, r1): y[t] gets the bits
 * cq_avx2_i8dec_tok_matvec gives buf[t] alone; the 4-bit class's weights loaded and split once
 * for up to 4 tokens (vbit: unpacked once per step for up to 4). */
void cq_avx2_i8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                    float *const *y, uint64_t r0, uint64_t r1);

/* The AVX2 tier's q8_row kernels (kernel_q8dec_avx2.c), the same contract with a token of their
 * own (the groups in natural order): cq_avx2_q8dec_tok_bytes(cols) bytes, 32-byte aligned. */
bool cq_avx2_q8dec_supports(const cmf_qmat *m);
bool cq_avx2_q8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1);
size_t cq_avx2_q8dec_tok_bytes(uint64_t cols);
void cq_avx2_q8dec_tok_prepare(void *buf, const float *x, uint64_t cols);
void cq_avx2_q8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                              uint64_t r1);
void cq_avx2_q8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                    float *const *y, uint64_t r0, uint64_t r1);
/* The same rows, token and bits with AVX-VNNI's vpdpbusd (kernel_q8dec_avxvnni.c), for CPUs
 * with it (cq_cpu_avxvnni). */
void cq_avxvnni_q8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                                 uint64_t r1);
void cq_avxvnni_q8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                       float *const *y, uint64_t r0, uint64_t r1);
bool cq_avxvnni_q8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1);
/* One build's q8_row rows (the three entry points above). */
typedef struct {
    void (*tok_matvec)(const cmf_qmat *, const void *, float *, uint64_t, uint64_t);
    void (*tok_matvec_multi)(const cmf_qmat *, const void *const *, size_t, float *const *,
                             uint64_t, uint64_t);
    bool (*matvec)(const cmf_qmat *, const float *, float *, uint64_t, uint64_t);
} cq_q8dec_rows;
/* The build the AVX2 tier runs (kernel_q8dec_avx2.c): the AVX-VNNI one where the CPU has it
 * (cq_cpu_avxvnni), else the plain one. */
const cq_q8dec_rows *cq_avx2_q8dec_rows(void);
/* The same rows for AMD's AVX-512 cores (kernel_q8dec_amd_avx512.c, AVX-512 VNNI + VL): the AVX2
 * rows' bits with 256-bit vpdpbusd, on the AVX2 token with its codes moved to x + 128 (what
 * cq_amd_q8dec_tok_prepare writes; the same bytes). */
void cq_amd_q8dec_tok_prepare(void *buf, const float *x, uint64_t cols);
void cq_amd_q8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                             uint64_t r1);
void cq_amd_q8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                   float *const *y, uint64_t r0, uint64_t r1);
bool cq_amd_q8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1);
/* That token's parts: the codes (cols bytes) at its start, then each 32-group's scale dx, then
 * -8 times the sum of each group's codes. */
static inline const float *cq_avx2_q8dec_tok_dx(const void *tok, uint64_t cols) {
    return (const float *)(const void *)((const int8_t *)tok + cols);
}
static inline const int32_t *cq_avx2_q8dec_tok_c8(const void *tok, uint64_t cols) {
    return (const int32_t *)(const void *)(cq_avx2_q8dec_tok_dx(tok, cols) + cols / 32);
}

/* The batched-decode copy of q8_row and the 4-bit class (lanes.c; the AVX2 and AVX-512 VNNI
 * tiers read it: lanes_avx2.c, lanes_avx512.c): panels of 8 rows, one int32 lane per row,
 * cq_lanes_panel_bytes(m) each; on the AVX-512 tier pairs of panels interleaved,
 * cq_lanes_pair_bytes(m) each. _supports: q8_row, q4_tiled, q4_block, q4tp or vbit (lanes_vbit.c)
 * with cols % 32 == 0.
 * _build: makes m->lanes (false when unsupported or out of memory; true when it exists); q4tp's
 * scales are the ladder of the tier in effect (AVX2 or AVX-512), as its GEMM computes them.
 * _matvec_multi: rows [r0, r1) for n (<= CMF_TOK8_MULTI_MAX) tokens prepared in the q8_row
 * layout above, from m->lanes; y[t] has the same bits whichever tokens share the call (the
 * tokens run in passes of up to CQ_LANES_PASS). */
#define CQ_LANES_PASS 4
bool cq_lanes_supports(const cmf_qmat *m);
bool cq_lanes_build(cmf_qmat *m);
/* The copy in parts (cmf_qmat_lanes_bytes / _fill / _source): its bytes (0: unsupported); rows
 * [r0, r1) (r0 % 8 == 0; vbit whole windows) into buf (zeroed, cq_lanes_bytes long); the file
 * bytes those rows come from, part by part (*n bytes from the result; part 0 the codes, 1 the
 * scales stored apart from them, 2 q4tp's 5-bit codes; NULL and 0 past the dtype's parts). */
uint64_t cq_lanes_bytes(const cmf_qmat *m);
/* Rows whose results m's kernels compute together (cmf_qmat_lanes_block). */
uint64_t cq_lanes_block(const cmf_qmat *m);
void cq_lanes_fill(const cmf_qmat *m, uint8_t *buf, uint64_t r0, uint64_t r1);
const uint8_t *cq_lanes_source(const cmf_qmat *m, uint64_t r0, uint64_t r1, unsigned part,
                               uint64_t *n);
void cq_avx2_lanes_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                float *const *y, uint64_t r0, uint64_t r1);
/* Rows [r, r + 8) (r % 8 == 0) from m->lanes in the AVX2 integer GEMM's panel form
 * (gemm_i8_avx2.c; the 4-bit class: block b's 8 code vectors at panel + (8b + k) * 32, its
 * scales at bs[8b ..]; q8_row: the |w| and w vectors at panel + (16b + k) * 32 and
 * (16b + 8 + k) * 32, the row scales at bs[0 .. 8)), nb blocks, those past the columns zero. */
void cq_avx2_lanes_unpack(const cmf_qmat *m, uint64_t r, size_t nb, uint8_t *panel, float *bs);
/* Row r of a q8_row, q4_tiled or q4_block matrix (cmf_qmat_lanes_rows) decoded from m->lanes,
 * without the outlier overlay: the floats cq_ref_decode_group gives from the file, so a table
 * read by rows (a tied embedding) can give its file pages back too. */
void cq_lanes_decode_row(const cmf_qmat *m, uint64_t r, float *out);
uint64_t cq_lanes_panel_bytes(const cmf_qmat *m);
/* A q4tp copy's panel (lanes.c): after the nibbles cq_lanes_q4tp_nums() bytes of the 8 rows'
 * ladder numbers (f32, 8 each: lo, step, and on the AVX-512 tier qq), then per group the 8 rows'
 * codes. */
#define CQ_LANES_Q4TP_NUMS_AVX2   64
#define CQ_LANES_Q4TP_NUMS_AVX512 96
unsigned cq_lanes_q4tp_nums(void);
/* The AVX-512 tier's copy: pairs of panels interleaved as its passes read them (lanes.c), this
 * many bytes each (a multiple of 64): q4tp's ladder numbers first (CQ_LANES_PAIR_HEAD_Q4TP
 * bytes), then per group (CQ_LANES_PAIR_GROUP_* bytes) vector k of both panels at 64k and the
 * 16 rows' scales (q4tp: codes) at 256; q8_row's 16 row scales after the last group. */
#define CQ_LANES_PAIR_HEAD_Q4TP  (2 * CQ_LANES_Q4TP_NUMS_AVX512)
#define CQ_LANES_PAIR_GROUP_Q4   (256 + 32) /* q4_tiled, q4_block: 16 f16 scales */
#define CQ_LANES_PAIR_GROUP_Q4TP (256 + 16) /* 16 five-bit codes as bytes */
#define CQ_LANES_PAIR_GROUP_Q8   512
/* A pair's bytes per group and before the first group, for q8_row or q4tp (else q4_tiled /
 * q4_block): inline so that the readers' constant flags fold. */
static inline uint64_t cq_lanes_pair_group(int q8, int q4tp) {
    return q8 ? CQ_LANES_PAIR_GROUP_Q8 : q4tp ? CQ_LANES_PAIR_GROUP_Q4TP : CQ_LANES_PAIR_GROUP_Q4;
}
static inline uint64_t cq_lanes_pair_head(int q4tp) {
    return q4tp ? CQ_LANES_PAIR_HEAD_Q4TP : 0;
}
uint64_t cq_lanes_pair_bytes(const cmf_qmat *m);
/* q4tp row r's 32 ladder values as the copy holds them: the tier in effect's (AVX2 or AVX-512),
 * the values its integer GEMM computes. */
void cq_lanes_q4tp_ladder(const cmf_qmat *m, uint64_t r, float ladder[32]);

/* vbit's and vbit_ro's copy (lanes_vbit.c; read by lanes_vbit_avx2.c and lanes_vbit_avx512.c):
 * rows sorted by form within windows of CQ_LANES_VBIT_WIN, 16 sorted rows per pair of panels in
 * the widest form among them. _bytes: 0 past 2 GiB (no copy). _fill: whole windows.
 * _lane: where row r lies (its pair's byte offset and form, its slot 0-15 in the pair);
 * _slot_rows: per slot of the matrix (window-major, 16 per pair) its row within its window,
 * 0xFF past the last row. _source: the packed bytes of rows [r0, r1). */
#define CQ_LANES_VBIT_WIN 64
enum { CQ_VBIT_NARROW, CQ_VBIT_FIVE, CQ_VBIT_WIDE };
/* A row's form by its width: narrow 3-4 bits, five 5, wide 6-8 (the AVX2 GEMM's classes too) */
static inline unsigned cq_vbit_form(unsigned bits) {
    return bits <= 4 ? CQ_VBIT_NARROW : bits == 5 ? CQ_VBIT_FIVE : CQ_VBIT_WIDE;
}
typedef struct {
    uint64_t off;
    unsigned form, slot;
} cq_vbit_lane;
uint64_t cq_lanes_vbit_bytes(const cmf_qmat *m);
uint64_t cq_lanes_vbit_group_bytes(unsigned form);
void cq_lanes_vbit_fill(const cmf_qmat *m, uint8_t *buf, uint64_t r0, uint64_t r1);
cq_vbit_lane cq_lanes_vbit_lane(const cmf_qmat *m, uint64_t r);
/* _pair: pair q's bytes and form; _pairs: the pairs [*q0, *q1) of the windows rows [r0, r1)
 * touch. */
const uint8_t *cq_lanes_vbit_pair(const cmf_qmat *m, uint64_t q, unsigned *form);
void cq_lanes_vbit_pairs(const cmf_qmat *m, uint64_t r0, uint64_t r1, uint64_t *q0, uint64_t *q1);
const uint8_t *cq_lanes_vbit_slot_rows(const cmf_qmat *m);
void cq_lanes_vbit_decode_row(const cmf_qmat *m, uint64_t r, float *out);
const uint8_t *cq_lanes_vbit_source(const cmf_qmat *m, uint64_t r0, uint64_t r1, uint64_t *n);
/* The AVX2 tier (lanes_vbit_avx2.c): _matvec_multi as cq_avx2_lanes_matvec_multi; _unpack:
 * half h (8 slots) of pair q in the AVX2 integer GEMM's vbit forms, returning the pair's form
 * (narrow: the unsigned codes v + 8; five: v + 16; wide: |v| and v), nb blocks, those past the
 * columns zero. */
void cq_avx2_lanes_vbit_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                     float *const *y, uint64_t r0, uint64_t r1);
unsigned cq_avx2_lanes_vbit_unpack(const cmf_qmat *m, uint64_t q, unsigned h, size_t nb,
                                   uint8_t *panel, float *bs);
/* Row r into slot l of the pair at p in form f (lanes_vbit.c's fill, on either tier: both
 * have AVX2). */
void cq_avx2_lanes_vbit_put_row(const cmf_qmat *m, uint8_t *p, unsigned f, unsigned l, uint64_t r);
void cq_avx512_lanes_vbit_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                       float *const *y, uint64_t r0, uint64_t r1);
void cq_avx512_lanes_vbit_unpack(const cmf_qmat *m, uint64_t r, size_t nb, uint8_t *panel,
                                 float *bs);

/* n tokens prepared for the copy (the AVX2 q8_row layout), as both tiers' lane kernels take
 * them: their codes, scales and corrections per group, and passes of at most `max` tokens as
 * even as they split (first[q], count[q]); returns the number of passes. */
typedef struct {
    const int8_t *xq[CMF_TOK8_MULTI_MAX];
    const float *dx[CMF_TOK8_MULTI_MAX];
    const int32_t *c8[CMF_TOK8_MULTI_MAX];
    size_t first[CMF_TOK8_MULTI_MAX], count[CMF_TOK8_MULTI_MAX];
} cq_lanes_toks;
static inline size_t cq_lanes_toks_init(cq_lanes_toks *k, const void *const *tok, size_t n,
                                        uint64_t cols, size_t max) {
    for (size_t t = 0; t < n; t++) {
        k->xq[t] = tok[t];
        k->dx[t] = cq_avx2_q8dec_tok_dx(tok[t], cols);
        k->c8[t] = cq_avx2_q8dec_tok_c8(tok[t], cols);
    }
    size_t passes = 0;
    for (size_t t = 0, left = (n + max - 1) / max; t < n; left--) {
        k->count[passes] = (n - t + left - 1) / left;
        k->first[passes++] = t;
        t += k->count[passes - 1];
    }
    return passes;
}
/* The part of a token prepared by cmf_tok8_prepare that a matrix with the copy reads (the
 * CMF_TOK8_Q8 layout on the AVX2 tier, CMF_TOK8_LANES on AVX-512): the AVX2 q8_row layout. */
const void *cq_tok8_lanes_part(const void *tok, uint64_t cols);

/* The copy on the AVX-512 VNNI tier (lanes_avx512.c): two panels per 16-lane vector.
 * _matvec_multi: as cq_avx2_lanes_matvec_multi (tokens in the same layout), each token the bits
 * of the AVX-512 integer GEMM. _unpack: rows [r, r + 16) (r % 16 == 0) in that GEMM's panel
 * form (gemm_i8_avx512.c: block b's 8 code vectors at panel + 512b + 64k, the 4-bit class's
 * scales at bs[16b ..], q8_row's weights as w + 128 and its row scales at rs[0 .. 16)), nb
 * blocks, those past the columns zero. */
void cq_avx512_lanes_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                  float *const *y, uint64_t r0, uint64_t r1);
void cq_avx512_lanes_unpack(const cmf_qmat *m, uint64_t r, size_t nb, uint8_t *panel, float *bs,
                            float *rs);

#endif
