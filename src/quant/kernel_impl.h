/* kernel_impl.h - what the kernel tiers (scalar, AVX2, AVX-512) share: the per-tier
 * function table, layout accessors of spec §3.2 and the scalar helpers the SIMD tiers
 * reuse for tails and sparse overlays. Internal to src/quant. */
#ifndef CORTIQ_QUANT_KERNEL_IMPL_H
#define CORTIQ_QUANT_KERNEL_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/bytes.h"
#include "common/err.h"
#include "common/cpu.h"
#include "common/f16.h"
#include "cortiq/quant.h"
#include "quant/kernels_engine.h"

/* Y[t*ldy + (r - r0)] = W[r] . X[t*ldx ...] for t < n, r in [r0, r1). */
typedef void (*cq_mm_fn)(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                         size_t ldy, uint64_t r0, uint64_t r1, unsigned flags);

typedef struct cq_kernel_table {
    cq_mm_fn mm[CMF_DT_COUNT]; /* NULL: use the next lower tier */
} cq_kernel_table;

extern const cq_kernel_table cq_kernels_scalar;
extern const cq_kernel_table cq_kernels_avx2;
extern const cq_kernel_table cq_kernels_avx512;

/* Software prefetch distance, in bytes ahead of the weight stream. The hardware prefetchers
 * alone leave a core's DRAM stream short of the bandwidth when there is work per byte;
 * a prefetch ~4 KiB ahead recovers most of it (bench/bench_matvec, docs/KERNELS.md). */
#ifndef CQ_PF_DIST
#define CQ_PF_DIST 4096
#endif

/* A second prefetch of the one-token kernels (f16 / bf16 / f32 / q8 streams and the int8
 * q8_row rows of both SIMD tiers, the AVX-512 int8 q4 paths), into L2 only and further ahead: with
 * the work per byte of short rows (576-896 columns), the L1 prefetch alone left 11-37 % of the
 * two-core DRAM bandwidth unused; adding this one measured +6 to +27 % (docs/KERNELS.md, "Two
 * prefetch distances"). */
#ifndef CQ_PF_DIST_L2
#define CQ_PF_DIST_L2 16384
#endif

/* The weight stream's two prefetches for the line at p: CQ_PF_DIST ahead into L1 and
 * CQ_PF_DIST_L2 ahead into L2 only (prefetcht0, prefetcht1). */
static inline void cq_prefetch_weights(const void *p) {
    __builtin_prefetch((const char *)p + CQ_PF_DIST, 0, 3);
    __builtin_prefetch((const char *)p + CQ_PF_DIST_L2, 0, 2);
}

/* The same two prefetches, kept where the source puts them. GCC schedules
 * __builtin_prefetch freely and may gather a block's prefetches into one burst ahead of its
 * loads (it did in the q4tp int8 kernel: 32 in a row). A volatile asm statement is not moved
 * past the code around it, so the prefetches stay spread among the loads. The q4tp and vbit
 * int8 rows use it (q4tp 76-88 -> 83-103 % of the two-core DRAM bandwidth, vbit +2-5 points,
 * Intel Xeon guest); f16, q8_row and q4_tiled measured a loss with it (docs/KERNELS.md,
 * "Prefetches kept in place"). */
static inline void cq_prefetch_weights_pinned(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht0 %0" ::"m"(*((const char *)p + CQ_PF_DIST)));
    __asm__ volatile("prefetcht1 %0" ::"m"(*((const char *)p + CQ_PF_DIST_L2)));
#else
    cq_prefetch_weights(p);
#endif
}

/* Kernels that step N adjacent rows together read one contiguous span of N rows, N lines at
 * a time. They prefetch that span linearly: after `done` of each row's bytes, the lines from
 * span + N * done on (cq_prefetch_weights of each), so every line is fetched once, the
 * distance stays fixed across row ends, and the next rows' heads are already on the way.
 * Prefetching each row at its own position instead (N streams, each running into the next
 * row at its end) left 16-29 % of a Zen 5 guest's two-core DRAM bandwidth unused on f16 and
 * q8_row (docs/KERNELS.md, "Linear prefetch"). */
static inline void cq_prefetch_span(const uint8_t *span, uint64_t N, uint64_t done,
                                    unsigned lines) {
    for (unsigned j = 0; j < lines; j++)
        cq_prefetch_weights(span + N * done + 64 * (uint64_t)j);
}

/* Per-thread scratch for one kernel call (kernel_scratch.c): a 64-byte aligned block of at
 * least `bytes`, owned by the calling thread and reused by its next call with the same slot,
 * so decode makes no allocation per token. Not to be freed. NULL when out of memory (the
 * kernels then take their allocation-free fallback paths). A call that needs two blocks at once
 * takes two slots; a kernel must not hand its slot's block to a callee that takes the same slot. */
typedef enum { CQ_SCRATCH_ACT, CQ_SCRATCH_AUX, CQ_SCRATCH_SLOTS } cq_scratch_slot;
void *cq_kernel_scratch(cq_scratch_slot slot, size_t bytes);

/* True when nt tokens' activations of `bytes_per_token` bytes fit in L1 with room to spare
 * (32 KiB). Prefill kernels share one decoded weight group among up to 4 tokens only while
 * those tokens' activations stay in L1; beyond that re-reading them from L2 costs more than
 * decoding the weights again, so they take fewer tokens per pass. */
static inline bool cq_fits_l1(unsigned nt, uint64_t bytes_per_token) {
    return nt * bytes_per_token <= 32768;
}

/* The AVX-512 tier is in effect (not lowered by CORTIQ_CPU) and the CPU has VNNI: the integer
 * paths built on vpdpbusd (prepared tokens, the integer prefill GEMM) run. */
static inline bool cq_vnni_tier(void) {
    return cq_cpu_isa() >= CQ_ISA_AVX512 && cq_cpu_detect()->avx512vnni;
}

/* Byte sizes of the fixed tiles. */
#define CQ_Q4T_TILE 18 /* q4_tiled: f16 scale + 16 B nibbles */
#define CQ_Q1_TILE  6  /* q1 / q1s: f16 scale + 4 B sign bits */
#define CQ_Q1T_TILE 9  /* q1t: f16 scale + 7 B base-3 codes */

/* ---- layout accessors (valid after cmf_qmat_init) ---- */

/* vbit / vbit_ro: bit width of a row and the first byte of its packed bits. */
static inline unsigned cq_vbit_bits(const cmf_qmat *m, uint64_t r) {
    return m->extra[r];
}
static inline const uint8_t *cq_vbit_row(const cmf_qmat *m, uint64_t r) {
    return m->quants + (m->row_off ? m->row_off[r] : ld_u32(m->row_off32 + 4 * r));
}
/* f16 scale of group g of row r (vbit, vbit_ro). */
static inline float cq_vbit_scale(const cmf_qmat *m, uint64_t r, uint64_t g) {
    return f16_to_f32(ld_u16(m->scales + 2 * (r * m->groups + g)));
}
/* The SIMD tiers decode a vbit group (4b bytes at b bits) with 16-byte lane loads reaching up
 * to p + 3b + 16: for the last groups of the payload they read a zero-padded copy instead. */
static inline const uint8_t *cq_vbit_group_src(const uint8_t *p, unsigned b, const uint8_t *end,
                                               uint8_t bounce[48]) {
    if (p + 3 * b + 16 <= end) return p;
    memset(bounce, 0, 48);
    memcpy(bounce, p, 4 * b);
    return bounce;
}

/* Defines `static const TAB *NAME(void)`: the tiers' decode tables, indexed by width, built once
 * per process (INIT(&tabs[b], b) for every vbit width b). Built on every call, as they were,
 * they took 3 % of a vbit decode on the AVX2 tier (a call per 64-row piece). */
#define CQ_DEFINE_VBIT_TABS(NAME, TAB, INIT)                                                       \
    static TAB NAME##_tabs[9];                                                                     \
    static pthread_once_t NAME##_once = PTHREAD_ONCE_INIT;                                         \
    static void NAME##_build(void) {                                                               \
        static const unsigned widths[CMF_VBIT_NLEVELS] = CMF_VBIT_LEVELS;                          \
        for (int i = 0; i < CMF_VBIT_NLEVELS; i++)                                                 \
            INIT(&NAME##_tabs[widths[i]], widths[i]);                                              \
    }                                                                                              \
    __attribute__((unused)) static const TAB *NAME(void) {                                         \
        pthread_once(&NAME##_once, NAME##_build);                                                  \
        return NAME##_tabs;                                                                        \
    }

/* The 16 nibble bytes of group g of a row of the q4 family (q4_tiled: after the tile's f16
 * scale). */
static inline const uint8_t *cq_q4_nibbles(const cmf_qmat *m, uint64_t row, uint64_t g) {
    return m->dtype == CMF_DT_Q4_TILED ? m->quants + (row * m->groups + g) * CQ_Q4T_TILE + 2
                                       : m->quants + (row * m->groups + g) * 16;
}

/* q4tp: 5-bit code of group g of row r (LSB-first bit stream, row-aligned). */
static inline unsigned cq_q4tp_code(const cmf_qmat *m, uint64_t r, uint64_t g) {
    const uint8_t *c = m->extra + r * m->code_bytes;
    uint64_t bit = g * 5;
    unsigned v = c[bit >> 3];
    if ((bit & 7) > 3) v |= (unsigned)c[(bit >> 3) + 1] << 8; /* spans two bytes */
    return (v >> (bit & 7)) & 31u;
}

/* q4tp: codes of groups g .. g+7 (g % 8 == 0) as one integer, code g + i in bits 5i..5i+4;
 * reads at most the 5 bytes that hold them, never past the row's codes. */
static inline uint64_t cq_q4tp_codes8(const cmf_qmat *m, uint64_t r, uint64_t g) {
    const uint8_t *p = m->extra + r * m->code_bytes + 5 * (g / 8);
    uint64_t avail = m->code_bytes - 5 * (g / 8);
    if (avail >= 5) return ld_u32(p) | (uint64_t)p[4] << 32;
    uint64_t v = 0;
    for (uint64_t i = 0; i < avail; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- scalar reference pieces shared by every tier ---- */

/* Decode columns [32g, min(32g + 32, cols)) of row r into out; returns how many.
 * This is the executable definition of each layout (overlays excluded). */
unsigned cq_ref_decode_group(const cmf_qmat *m, uint64_t r, uint64_t g, float *out);

/* Sparse overlay (q1s, q1t) of row r: [*first, *first + *count) entries of
 * *stride bytes each, sorted by column, one per column. Column / value accessors below. */
void cq_ovl_row(const cmf_qmat *m, uint64_t r, const uint8_t **first, uint64_t *count,
                unsigned *stride);
static inline uint64_t cq_ovl_col(const cmf_qmat *m, uint64_t r, const uint8_t *e) {
    return m->dtype == CMF_DT_Q1S ? ld_u32(e) - r * m->cols : ld_u16(e);
}
static inline float cq_ovl_val(const cmf_qmat *m, const uint8_t *e) {
    return f16_to_f32(ld_u16(e + (m->dtype == CMF_DT_Q1S ? 4 : 2)));
}

/* Base-3 digit k (0..4, least significant first) of a q1t code byte, division-free
 * (the multipliers are exact for every byte value). */
static inline unsigned cq_trit(unsigned byte, unsigned k) {
    static const uint32_t mul[5] = {65536, 21846, 7282, 2428, 810};
    unsigned q = (byte * mul[k]) >> 16;
    return q - 3 * ((q * 171) >> 9);
}

/* Index of the first q1s overlay entry at or after row r (binary search; 0 for q1t). Kernels
 * call it once per call and then walk rows in order with cq_ovl_next. */
uint64_t cq_ovl_seek(const cmf_qmat *m, uint64_t r);

/* The overlay entries of row r (rows visited in ascending order from the cq_ovl_seek row):
 * *e, *cnt; advances the cursor *k past them. */
static inline void cq_ovl_next(const cmf_qmat *m, uint64_t r, uint64_t *k, const uint8_t **e,
                               uint64_t *cnt) {
    if (m->dtype == CMF_DT_Q1T) {
        uint64_t a = ld_u32(m->ovl_ptr + 4 * r);
        *e = m->ovl + 4 * a;
        *cnt = ld_u32(m->ovl_ptr + 4 * (r + 1)) - a;
        return;
    }
    uint64_t end = (r + 1) * m->cols, j = *k;
    while (j < m->ovl_count && ld_u32(m->ovl + 6 * j) < end)
        j++;
    *e = m->ovl + 6 * *k;
    *cnt = j - *k;
    *k = j;
}

/* Defines `static inline void NAME(m, r, e, cnt, X, n, ldx, acc)` adding the correction
 * sum (v - base(col)) * x[col] of overlay entries [e, e + cnt) of row r to acc[t], t < n,
 * with H16(p) converting the f16 at p (so SIMD tiers can use F16C). */
#define CQ_DEFINE_OVL_APPLY(NAME, H16)                                                             \
    static inline void NAME(const cmf_qmat *m, uint64_t r, const uint8_t *e, uint64_t cnt,         \
                            const float *X, size_t n, size_t ldx, float *acc) {                    \
        const uint64_t G = m->groups;                                                              \
        if (m->dtype == CMF_DT_Q1T) {                                                              \
            const uint8_t *tiles = m->quants + r * G * CQ_Q1T_TILE;                                \
            for (uint64_t k = 0; k < cnt; k++, e += 4) {                                           \
                unsigned col = ld_u16(e), i = col & 31;                                            \
                const uint8_t *t = tiles + (col >> 5) * CQ_Q1T_TILE;                               \
                unsigned d = cq_trit(t[2 + i / 5], i % 5);                                         \
                float s = H16(t),                                                                  \
                      base = d == 0   ? 0.0f                                                       \
                             : d == 1 ? s                                                          \
                                      : -s,                                                        \
                      diff = H16(e + 2) - base;                                                    \
                for (size_t j = 0; j < n; j++)                                                     \
                    acc[j] += diff * X[j * ldx + col];                                             \
            }                                                                                      \
        } else {                                                                                   \
            const uint8_t *tiles = m->quants + r * G * CQ_Q1_TILE;                                 \
            const uint64_t row0 = r * m->cols;                                                     \
            for (uint64_t k = 0; k < cnt; k++, e += 6) {                                           \
                uint64_t col = ld_u32(e) - row0;                                                   \
                unsigned i = (unsigned)(col & 31);                                                 \
                const uint8_t *t = tiles + (col >> 5) * CQ_Q1_TILE;                                \
                float s = H16(t), base = ((t[2 + i / 8] >> (i % 8)) & 1) ? s : -s,                 \
                      diff = H16(e + 4) - base;                                                    \
                for (size_t j = 0; j < n; j++)                                                     \
                    acc[j] += diff * X[j * ldx + col];                                             \
            }                                                                                      \
        }                                                                                          \
    }

/* Scalar matmul of any dtype (the reference tier), also the SIMD tiers' fallback. */
void cq_ref_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t r0, uint64_t r1, unsigned flags);

/* q4tp ladder of row r stored as floats (AVX-512; q4tp_ladder_avx512.h, a few ulp of exp2f). */
void cq_avx512_q4tp_ladder(const cmf_qmat *m, uint64_t r, float ladder[32]);
/* lo, step and qq of that ladder (q4tp_ladder_avx512.h, cq_q4tp_params_avx512) */
void cq_avx512_q4tp_params(const cmf_qmat *m, uint64_t r, float p[3]);

/* CMF_KF_INT8_ACT paths of the AVX-512 tier (need AVX512_VNNI; cols % 32 == 0; q4_tiled,
 * q4_block, q4tp, q8_row). Return false, writing nothing, when they cannot run. */
bool cq_avx512_i8_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                         size_t ldy, uint64_t r0, uint64_t r1);

/* q8_row's one-token int8 path in two steps (cmf_tok8_*, kernel.c): bytes of a prepared token
 * of `cols` columns (a multiple of 64, so what follows it in a buffer stays aligned; 0 unless
 * cols % 32 == 0), quantizing x into buf (64-byte aligned), and
 * rows [r0, r1) on it: the same bits as cq_avx512_i8_matmul with n = 1 over those rows.
 * Where cq_avx512_q8_amd(), all three (and cq_avx512_i8_matmul's one q8_row token) are the AVX2
 * tier's rows with vpdpbusd (kernel_q8dec_amd_avx512.c, on a token that fits the same bytes):
 * the AVX2 tier's bits, which equal the VNNI rows' up to the f32 rounding; on Zen 4 they read a
 * thread's weights from DRAM 10-25 % faster (docs/KERNELS.md, "Rows on AMD"). */
bool cq_avx512_q8_amd(void);
size_t cq_avx512_q8_tok_bytes(uint64_t cols);
void cq_avx512_q8_tok_prepare(void *buf, const float *x, uint64_t cols);
void cq_avx512_q8_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                             uint64_t r1);
/* n (<= CMF_TOK8_MULTI_MAX) prepared tokens over rows [r0, r1): y[t] gets the bits
 * cq_avx512_q8_tok_matvec gives buf[t] alone, each weight vector loaded once for the tokens. */
void cq_avx512_q8_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                   float *const *y, uint64_t r0, uint64_t r1);
/* One-token products of T (<= CQ_MATVEC_MULTI_MAX) tokens over rows [r0, r1) of f32, f16 or
 * bf16 weights (f32 activations): Y[t][r - r0] gets the bits the one-token kernel gives token t
 * alone, each weight decoded once for the T tokens. False, writing nothing, for another
 * dtype. */
#define CQ_MATVEC_MULTI_MAX 4
bool cq_avx512_matvec_multi(const cmf_qmat *m, const float *const *X, size_t T, float *const *Y,
                            uint64_t r0, uint64_t r1);
/* The same on the AVX2 tier, for f32, f16, bf16 and q8_row (one-token f32 kernels of
 * kernel_avx2.c). */
bool cq_avx2_matvec_multi(const cmf_qmat *m, const float *const *X, size_t T, float *const *Y,
                          uint64_t r0, uint64_t r1);
/* q4tp ladder of row r with AVX2 (as cq_avx512_q4tp_ladder). */
void cq_avx2_q4tp_ladder(const cmf_qmat *m, uint64_t r, float ladder[32]);
/* The same for rows r .. r + n - 1 (n <= 8), transposed: lad[c][k] is rung c of row r + k. */
void cq_avx2_q4tp_ladders8(const cmf_qmat *m, uint64_t r, unsigned n, float lad[32][8]);
bool cq_avx2_i8_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                       size_t ldy, uint64_t r0, uint64_t r1);

#endif
