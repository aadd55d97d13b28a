/* kernel_i8dec_avx512.c - one-token matrix-vector products with int8 activations for
 * q4_tiled, q4_block, q4tp, vbit and vbit_ro (AVX-512 VNNI + VBMI + GFNI).
 *
 * Decode streams every weight once per token, so what counts is the work per weight byte.
 * The activations are quantized once per call (dx = absmax/127 per 32-group, as in
 * kernel_i8_avx512.c); then per row:
 *
 * - q4 family: 4 groups (128 weights) per step. Their 64 nibble bytes sit in one vector
 *   (q4_tiled: two loads and one vpermt2b drop the scales out of the 72-byte span); an and
 *   gives the low nibbles, one vgf2p8affineqb the high ones, and two vpdpbusd multiply them
 *   into activations stored per 4 groups as [even elements | odd elements]. Lane l then holds
 *   a partial sum of group l/4 against the unsigned nibbles; the -8 offset is removed per 16
 *   groups (one FMA of s_g dx_g by the groups' code sums), not per step: starting each step
 *   from the lanes' -8*sum(xq) cost a load per step (+4-15 % in cache, Zen 5). Tails of <= 4
 *   groups still start from those lane sums (corr).
 * - vbit: 2 groups (64 codes, 8b bytes) per step. vpermb puts the b bytes of every 8 codes
 *   byte-reversed into a qword (so the MSB-first codes become bit fields of a little-endian
 *   integer), vpmultishiftqb moves each code to its byte and an and isolates it: unsigned
 *   codes u against activations in natural order. The bias L = 2^(b-1)-1 of every group is
 *   removed once per row: sum_g s_g dx_g L sum(xq_g). 4-bit rows take the q4 step.
 *
 * Scales: per 16 groups one vector of s_g * dx_g (q4_tiled: the f16 scales gathered with
 * vpermw while the nibbles are loaded; q4tp: the ladder looked up with vpermt2ps by the
 * 5-bit codes); each step's lanes get theirs with one vpermps, and one cvt + fma adds the
 * step's integer sums to the row's two accumulators. Rows are reduced 16 at a time.
 *
 * Short rows (real models: 18-64 groups) pay per-row and per-tail costs that long rows hide:
 * a tail of <= 4 groups is one step with its scales built in lane order (vbit: a tail joins the
 * row's last full block, with no scale pass of its own); q4tp ladders are
 * built 16 rows at a time without a division; q4tp rows, and q4_tiled rows of 16-18 groups,
 * run four at a time (their chains overlap; two rows' tails of 1-2 groups share one step). */
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "common/hsum16_avx512.h"
#include "quant/q4tp_ladder_avx512.h"

#define TGT     __attribute__((target("avx512vbmi,gfni")))
#define TGT_INL static inline __attribute__((always_inline, target("avx512vbmi,gfni")))

/* Activations of one token, quantized: xe (per 4 groups [even elements | odd elements],
 * for nibbles) and xn (natural order, for vbit codes), Gp*32 bytes each; corr (-8 * the sum
 * of each xe dpbusd lane's 8 values), dx and sg (sum of the group's codes) per group.
 * Padded with zeros to Gp = G rounded up to 16 groups (Gp*104 bytes, a multiple of 64). */
typedef struct {
    uint8_t *mem;
    int8_t *xe, *xn; /* [even | odd] per 4 groups; natural order */
    int32_t *corr;
    float *dx, *sg;
    uint64_t G, Gp;
} act;

/* Decode runs once per token per matrix, so the buffer comes from the caller's stack when it
 * fits (up to 624 groups, i.e. 19,968 columns); longer rows allocate. */
#define ACT_STACK_BYTES (64u << 10)

static size_t act_bytes(uint64_t G) {
    return ((G + 15) & ~(uint64_t)15) * (32 + 32 + 32 + 4 + 4);
}

/* Lays the arrays of a over mem (act_bytes(G) bytes, 64-byte aligned) and zeroes the padding. */
static void act_layout(act *a, uint64_t G, uint8_t *mem) {
    a->G = G;
    a->Gp = (G + 15) & ~(uint64_t)15;
    a->mem = mem;
    a->xe = (int8_t *)a->mem;
    a->xn = a->xe + 32 * a->Gp;
    a->corr = (int32_t *)(void *)(a->mem + 64 * a->Gp);
    a->dx = (float *)(void *)(a->mem + 96 * a->Gp);
    a->sg = a->dx + a->Gp;
    /* zeros where prep writes nothing: the padding groups G .. Gp of every array, and in xe
     * the whole last block of 4 groups when it is partial (its groups are interleaved) */
    uint64_t Gp = a->Gp, xe0 = 128 * (G / 4);
    memset(a->xe + xe0, 0, 32 * Gp - xe0);
    memset(a->xn + 32 * G, 0, 32 * (Gp - G));
    memset(a->corr + 4 * G, 0, 16 * (Gp - G));
    memset(a->dx + G, 0, 4 * (Gp - G));
    memset(a->sg + G, 0, 4 * (Gp - G));
}

static bool act_alloc(act *a, uint64_t G, uint8_t *stack_buf) {
    size_t bytes = act_bytes(G);
    uint8_t *mem = bytes <= ACT_STACK_BYTES ? stack_buf : cq_kernel_scratch(CQ_SCRATCH_ACT, bytes);
    if (!mem) return false;
    act_layout(a, G, mem);
    return true;
}

/* Each group of 32 activations to int8 (round to nearest, dx = absmax / 127), written in both
 * orders, with its code sum and the -8 * sum of each q4 lane's 8 values. Decode runs this once
 * per matrix per token on every thread, so it works on 16 groups at a time (prep16) and the
 * group-at-a-time routine (prep_tail, the same arithmetic) takes only the last G % 16. */
TGT static void prep_tail(act *a, const float *x, uint64_t g0) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
    for (uint64_t g = g0; g < a->G; g++) {
        __m512 f0 = _mm512_loadu_ps(x + 32 * g), f1 = _mm512_loadu_ps(x + 32 * g + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(f0), _mm512_abs_ps(f1)));
        __m512 inv = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        /* |x| * (127 / amax) rounds to at most 127: the codes fit int8 as they are */
        __m512i c0 = _mm512_cvtps_epi32(_mm512_mul_ps(f0, inv)),
                c1 = _mm512_cvtps_epi32(_mm512_mul_ps(f1, inv));
        a->dx[g] = amax / 127.0f;
        int8_t *q = a->xn + 32 * g;
        _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(c0));
        _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(c1));
        __m512i ev = _mm512_permutex2var_epi32(c0, ie, c1),
                od = _mm512_permutex2var_epi32(c0, io, c1);
        int8_t *c = a->xe + 128 * (g / 4) + 16 * (g % 4);
        _mm_storeu_si128((__m128i *)c, _mm512_cvtepi32_epi8(ev));
        _mm_storeu_si128((__m128i *)(c + 64), _mm512_cvtepi32_epi8(od));
        /* lane l of the group's 4 q4 lanes covers evens and odds 4l .. 4l+3 */
        _Alignas(64) int32_t v[16];
        _mm512_store_si512(v, _mm512_add_epi32(ev, od));
        int32_t *corr = a->corr + 4 * g;
        for (int l = 0; l < 4; l++)
            corr[l] = -8 * (v[4 * l] + v[4 * l + 1] + v[4 * l + 2] + v[4 * l + 3]);
        a->sg[g] = (float)_mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
    }
}

/* Groups [g0, g0 + 16): their 16 absolute maxima in one vector (cq_absmax16_avx512), so one
 * division each for dx and 1/dx; each group's int32 codes become its 64 bytes [natural | evens |
 * odds] in one vpermt2b; the lane sums behind corr and sg come from vpdpbusd against ones, 4 groups
 * (one xe block) per vector, and sg from folding those. */
TGT_INL void prep16(act *a, const float *x, uint64_t g0, const __m512i bidx) {
    _Alignas(64) float inv[16];
    __m512 amax = cq_absmax16_avx512(x + 32 * g0, inv);
    _mm512_storeu_ps(a->dx + g0, _mm512_div_ps(amax, _mm512_set1_ps(127.0f)));
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i lane[4]; /* per xe block: sum of each q4 lane's 8 codes */
    for (int b = 0; b < 4; b++) {
        __m512i E = _mm512_setzero_si512(), O = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            uint64_t g = g0 + 4 * (uint64_t)b + (uint64_t)k;
            const float *f = x + 32 * g;
            __m512 s = _mm512_set1_ps(inv[4 * b + k]);
            __m512i c0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(f), s)),
                    c1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(f + 16), s));
            __m512i P = _mm512_permutex2var_epi8(c0, bidx, c1); /* [natural | evens | odds] */
            _mm256_storeu_si256((__m256i *)(void *)(a->xn + 32 * g), _mm512_castsi512_si256(P));
            /* lane 2 (evens) to 16k of E, lane 3 (odds) to 16k of O */
            E = _mm512_mask_shuffle_i32x4(E, (__mmask16)(0xFu << (4 * k)), P, P, 0xAA);
            O = _mm512_mask_shuffle_i32x4(O, (__mmask16)(0xFu << (4 * k)), P, P, 0xFF);
        }
        int8_t *blk = a->xe + 128 * (g0 / 4 + (uint64_t)b);
        _mm512_storeu_si512(blk, E);
        _mm512_storeu_si512(blk + 64, O);
        lane[b] =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, E), ones, O);
        _mm512_storeu_si512(
            a->corr + 4 * (g0 + 4 * (uint64_t)b),
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(lane[b], 3)));
    }
    /* group k's code sum = the sum of its 4 lanes: fold 16 lanes of 4 blocks to 16 groups */
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
    __m512i p01 = _mm512_add_epi32(_mm512_permutex2var_epi32(lane[0], ie, lane[1]),
                                   _mm512_permutex2var_epi32(lane[0], io, lane[1])),
            p23 = _mm512_add_epi32(_mm512_permutex2var_epi32(lane[2], ie, lane[3]),
                                   _mm512_permutex2var_epi32(lane[2], io, lane[3]));
    __m512i sum = _mm512_add_epi32(_mm512_permutex2var_epi32(p01, ie, p23),
                                   _mm512_permutex2var_epi32(p01, io, p23));
    _mm512_storeu_ps(a->sg + g0, _mm512_cvtepi32_ps(sum));
}

TGT static void prep(act *a, const float *x) {
    uint8_t bi[64];
    for (int i = 0; i < 32; i++) /* natural: dword i of c0 || c1 */
        bi[i] = (uint8_t)(i < 16 ? 4 * i : 64 + 4 * (i - 16));
    for (int j = 0; j < 16; j++) { /* evens, then odds */
        int e = 2 * j, o = 2 * j + 1;
        bi[32 + j] = (uint8_t)(e < 16 ? 4 * e : 64 + 4 * (e - 16));
        bi[48 + j] = (uint8_t)(o < 16 ? 4 * o : 64 + 4 * (o - 16));
    }
    const __m512i bidx = _mm512_loadu_si512(bi);
    uint64_t g = 0;
    for (; g + 16 <= a->G; g += 16)
        prep16(a, x, g, bidx);
    prep_tail(a, x, g);
}

static inline __mmask64 bytes_mask(unsigned n) {
    return n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1;
}

/* The per-row data beside the weight codes' stream, of rows [r, r + 16): q4tp's 5-bit codes
 * and ladder parameters, q4_block's and vbit's f16 scales, vbit's widths and row offsets. The
 * software prefetch covers only the codes' span (cq_prefetch_span), and the hardware one
 * left these short streams late: prefetching them 16 rows ahead took q4tp from 78-85 % to
 * 91-98 % of the two-core DRAM bandwidth (Zen 5), vbit_ro and q4_block +0-5 %. Prefetches do
 * not fault, so the last chunk's may point past the arrays. dt is the caller's compile-time
 * dtype where it has one: switching on m->dtype inside q4_rows, GCC 12 dropped q4tp's case. */
TGT_INL void side_prefetch(const cmf_qmat *m, const cmf_dtype dt, uint64_t r) {
    const uint8_t *p;
    uint64_t n;
    switch (dt) {
    case CMF_DT_Q4TP:
        p = m->extra + r * m->code_bytes, n = 16 * m->code_bytes;
        _mm_prefetch((const char *)(m->scales + 4 * r), _MM_HINT_T0);
        break;
    case CMF_DT_Q4_BLOCK:
        p = m->scales + 2 * r * m->groups, n = 32 * m->groups;
        break;
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO:
        p = m->scales + 2 * r * m->groups, n = 32 * m->groups;
        _mm_prefetch((const char *)(m->extra + r), _MM_HINT_T0);
        if (m->row_off) {
            _mm_prefetch((const char *)(m->row_off + r), _MM_HINT_T0);
            _mm_prefetch((const char *)(m->row_off + r + 8), _MM_HINT_T0);
        } else if (m->row_off32) {
            _mm_prefetch((const char *)(m->row_off32 + 4 * r), _MM_HINT_T0);
        }
        break;
    default:
        return;
    }
    for (uint64_t o = 0; o < n; o += 64)
        _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* y[r - r0] for r in [r0, r1) from ROW(r), the row's unreduced 16-lane sum: 16 rows at a
 * time through hsum16 (the next 16 rows' side streams prefetched first), the rest one by
 * one. */
#define ROWS_BY_16(ROW)                                                                            \
    do {                                                                                           \
        uint64_t r_ = r0;                                                                          \
        for (; r_ + 16 <= r1; r_ += 16) {                                                          \
            side_prefetch(m, m->dtype, r_ + 16);                                                   \
            __m512 v_[16];                                                                         \
            for (int k_ = 0; k_ < 16; k_++)                                                        \
                v_[k_] = ROW(r_ + (uint64_t)k_);                                                   \
            _mm512_storeu_ps(y + (r_ - r0), cq_hsum16_avx512(v_));                                 \
        }                                                                                          \
        for (; r_ < r1; r_++)                                                                      \
            y[r_ - r0] = _mm512_reduce_add_ps(ROW(r_));                                            \
    } while (0)

/* ---- q4 family ---- */

/* One token's activations for the tail steps (set per token from its act: tok_tail_init). */
typedef struct {
    __m512 dx_t;                  /* tail step: dx of group GF + l/4 in lane l (0 past G) */
    __m512i xlo_p, xhi_p, corr_p; /* tails of two rows in one step: groups GF, GF + 1 twice */
    __m512 dx_p;
} q4_tok_tail;

typedef struct {
    __m512i tidx;    /* q4_tiled: nibble bytes of 4 tiles from (A = p[0..64), B = p[8..72)) */
    __m512i widx;    /* q4_tiled: f16 scale word of tile k (word 9k of A) at position 4c + k */
    __m512i cidx[4]; /* step c: lane l takes the scale of group 4c + l/4 */
    __m512i cperm, cshift;     /* q4tp: 16 5-bit codes to dword lanes (vpermb, vpmultishiftqb) */
    __m512i widx_t;            /* tail step, q4_tiled: scale word of tile l/4 at word l */
    __m512i cperm_t, cshift_t; /* tail step, q4tp: code l/4 to dword lane l */
    /* q4_tiled tails of 1-2 groups, two rows in one step: lanes 0..7 row r, 8..15 row r + 1 */
    __m512i tidx_p, widx_p; /* nibble bytes and scale words of tiles 0, 1 of A and of B */
    q4_tok_tail tt;         /* the token's (one-token calls) */
    __m512 lads[16][2];     /* q4tp: the ladders of the 16 rows in hand */
} q4_tab;

TGT static void q4_tab_build(q4_tab *t) {
    uint8_t ti[64];
    uint16_t wi[32];
    int32_t ci[16];
    uint8_t cp[64], cs[64];
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 16; j++) {
            int off = 18 * k + 2 + j;
            ti[16 * k + j] = (uint8_t)(k < 3 ? off : 64 + off - 8);
        }
    for (int i = 0; i < 32; i++)
        wi[i] = (uint16_t)(9 * (i % 4));
    t->tidx = _mm512_loadu_si512(ti);
    t->widx = _mm512_loadu_si512(wi);
    for (int i = 0; i < 32; i++)
        wi[i] = (uint16_t)(i < 16 ? 9 * (i / 4) : 0);
    t->widx_t = _mm512_loadu_si512(wi);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 16; l++)
            ci[l] = 4 * c + l / 4;
        t->cidx[c] = _mm512_loadu_si512(ci);
    }
    for (int q = 0; q < 8; q++) {
        int k = 10 * q / 8, bit = 10 * q - 8 * k;
        for (int j = 0; j < 8; j++) {
            cp[8 * q + j] = (uint8_t)(j == 0 ? k : j == 1 ? k + 1 : 0);
            cs[8 * q + j] = (uint8_t)(j == 0 ? bit : j == 4 ? bit + 5 : 0);
        }
    }
    t->cperm = _mm512_loadu_si512(cp);
    t->cshift = _mm512_loadu_si512(cs);
    for (int q = 0; q < 8; q++) { /* qword q = lanes 2q, 2q+1: both code q/2 */
        int k = 5 * (q / 2) / 8, bit = 5 * (q / 2) - 8 * k;
        for (int j = 0; j < 8; j++) {
            cp[8 * q + j] = (uint8_t)(j == 0 ? k : j == 1 ? k + 1 : 0);
            cs[8 * q + j] = (uint8_t)(j == 0 || j == 4 ? bit : 0);
        }
    }
    t->cperm_t = _mm512_loadu_si512(cp);
    t->cshift_t = _mm512_loadu_si512(cs);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 16; j++)
            ti[16 * k + j] = (uint8_t)(64 * (k / 2) + 18 * (k % 2) + 2 + j);
    for (int i = 0; i < 32; i++)
        wi[i] = (uint16_t)(i < 16 ? 32 * (i / 8) + 9 * (i / 4 % 2) : 0);
    t->tidx_p = _mm512_loadu_si512(ti);
    t->widx_p = _mm512_loadu_si512(wi);
}

/* The constant part of q4_tab (the fields before tt), built once per process: built per call,
 * that is per 64-row piece of a decode, it cost more than copying it. */
static q4_tab q4_consts;
static pthread_once_t q4_consts_once = PTHREAD_ONCE_INIT;

TGT static void q4_consts_build(void) {
    q4_tab_build(&q4_consts);
}

TGT_INL void q4_tab_init(q4_tab *t) {
    pthread_once(&q4_consts_once, q4_consts_build);
    memcpy(t, &q4_consts, offsetof(q4_tab, tt));
}

/* The weights of groups [g0, g0 + ng) of row r (g0 % 16 == 0, 1 <= ng <= 16), decoded for
 * the activations of any number of tokens (q4_blk_acc): per step of 4 groups the low and high
 * nibbles, and the 16 groups' scales. NG16 is true when ng == 16 (then every load is a full
 * one). */
typedef struct {
    __m512i lo[4], hi[4];
    __m512 sc;
} q4_w;

TGT_INL void q4_blk_w(const cmf_qmat *m, const q4_tab *t, uint64_t r, uint64_t g0, unsigned ng,
                      const bool NG16, const cmf_dtype dt, const __m512 *lad, const uint8_t *pfl,
                      q4_w *w) {
    const uint64_t G = m->groups;
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i sv = _mm512_setzero_si512();
    const __mmask16 kg = NG16 ? 0xFFFF : (__mmask16)((1u << ng) - 1);
    for (unsigned c = 0; c < 4; c++) {
        if (!NG16 && 4 * c >= ng) { /* no groups: q4_blk_acc reads none of these */
            w->lo[c] = w->hi[c] = _mm512_setzero_si512();
            continue;
        }
        unsigned vg = NG16 || ng - 4 * c >= 4 ? 4 : ng - 4 * c;
        uint64_t g = g0 + 4 * c;
        if (!NG16 && pfl) { /* a tail: its lines of the tails' part of the span */
            if (dt == CMF_DT_Q4TP) {
                cq_prefetch_weights_pinned(pfl + 64 * c);
            } else { /* q4_tiled: 4 tiles are 72 bytes, so its last step takes one more */
                cq_prefetch_weights(pfl + 64 * c);
                if (dt == CMF_DT_Q4_TILED && 4 * c + 4 >= ng)
                    cq_prefetch_weights(pfl + 64 * c + 64);
            }
        }
        if (NG16) { /* this block's 16 * bpg bytes of the rows' span: 4 lines, q4_tiled 4.5 */
            if (dt == CMF_DT_Q4TP)
                cq_prefetch_weights_pinned(pfl + 64 * c);
            else
                cq_prefetch_weights(pfl + 64 * c);
            if (dt == CMF_DT_Q4_TILED && c == 3) cq_prefetch_weights(pfl + 256);
        }
        __m512i nib;
        if (dt == CMF_DT_Q4_TILED) {
            const uint8_t *p = m->quants + (r * G + g) * CQ_Q4T_TILE;
            __m512i A, B;
            if (vg == 4) {
                A = _mm512_loadu_si512(p);
                B = _mm512_loadu_si512(p + 8);
            } else {
                unsigned nb = CQ_Q4T_TILE * vg;
                A = _mm512_maskz_loadu_epi8(bytes_mask(nb), p);
                B = _mm512_maskz_loadu_epi8(bytes_mask(nb > 8 ? nb - 8 : 0), p + 8);
            }
            nib = _mm512_permutex2var_epi8(A, t->tidx, B);
            sv = _mm512_mask_permutexvar_epi16(sv, (__mmask32)(0xFu << (4 * c)), t->widx, A);
        } else {
            const uint8_t *p = m->quants + (r * G + g) * 16;
            nib = vg == 4 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(bytes_mask(16 * vg), p);
        }
        /* high nibble: one GF(2) affine op (bits 4..7 -> 0..3) instead of shift + and */
        w->lo[c] = _mm512_and_si512(nib, m4);
        w->hi[c] = _mm512_gf2p8affine_epi64_epi8(nib, _mm512_set1_epi64(0x1020408000000000ll), 0);
    }
    if (dt == CMF_DT_Q4_TILED) {
        w->sc = _mm512_cvtph_ps(_mm512_castsi512_si256(sv));
    } else if (dt == CMF_DT_Q4_BLOCK) {
        w->sc = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(kg, m->scales + 2 * (r * G + g0)));
    } else { /* q4tp: ladder[code] for the 16 groups, codes from their 10 bytes */
        uint64_t off = 10 * (g0 / 16), left = m->code_bytes - off;
        __m128i cb = _mm_maskz_loadu_epi8((__mmask16)((1u << (left < 10 ? left : 10)) - 1),
                                          m->extra + r * m->code_bytes + off);
        /* qword q: the 2 bytes holding codes 2q, 2q+1 (bits 10q..10q+9); multishift moves
         * them to bytes 0 and 4, i.e. dword lanes 2q, 2q+1; vpermt2ps reads only an index's
         * low 5 bits, so the bits above the code need no masking */
        __m512i idx = _mm512_multishift_epi64_epi8(
            t->cshift, _mm512_permutexvar_epi8(t->cperm, _mm512_castsi128_si512(cb)));
        w->sc = _mm512_permutex2var_ps(lad[0], idx, lad[1]);
    }
}

/* Decoded groups [g0, g0 + ng) (q4_blk_w) against one token's activations into acc0/acc1. */
TGT_INL void q4_blk_acc(const q4_tab *t, const act *a, const q4_w *w, uint64_t g0, unsigned ng,
                        const bool NG16, __m512 *acc0, __m512 *acc1, __m512 *accL) {
    __m512i I[4];
    const __mmask16 kg = NG16 ? 0xFFFF : (__mmask16)((1u << ng) - 1);
    for (unsigned c = 0; c < 4; c++) {
        if (!NG16 && 4 * c >= ng) {
            I[c] = _mm512_setzero_si512();
            continue;
        }
        const int8_t *xc = a->xe + 32 * (g0 + 4 * c);
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w->lo[c], _mm512_loadu_si512(xc));
        I[c] = _mm512_dpbusd_epi32(s, w->hi[c], _mm512_loadu_si512(xc + 64));
    }
    __m512 sdx = _mm512_maskz_mul_ps(kg, w->sc, _mm512_loadu_ps(a->dx + g0));
    *accL = _mm512_fmadd_ps(sdx, _mm512_loadu_ps(a->sg + g0), *accL);
    *acc0 =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[0]), _mm512_permutexvar_ps(t->cidx[0], sdx), *acc0);
    *acc1 =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[1]), _mm512_permutexvar_ps(t->cidx[1], sdx), *acc1);
    if (NG16 || ng > 8) {
        *acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[2]), _mm512_permutexvar_ps(t->cidx[2], sdx),
                                *acc0);
        *acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[3]), _mm512_permutexvar_ps(t->cidx[3], sdx),
                                *acc1);
    }
}

/* Groups [g0, g0 + ng) of row r into acc0/acc1 (q4_blk_w, then q4_blk_acc). */
TGT_INL void q4_blk(const cmf_qmat *m, const q4_tab *t, const act *a, uint64_t r, uint64_t g0,
                    unsigned ng, const bool NG16, const cmf_dtype dt, const __m512 *lad,
                    const uint8_t *pfl, __m512 *acc0, __m512 *acc1, __m512 *accL) {
    q4_w w;
    q4_blk_w(m, t, r, g0, ng, NG16, dt, lad, pfl, &w);
    q4_blk_acc(t, a, &w, g0, ng, NG16, acc0, acc1, accL);
}

/* q4tp tails: the ladder index of code l/4 in dword lane l (codes 0..3, from the row's code
 * bytes at offset 10 * (g0 / 16), at most `nb` of them read); vpermt2ps reads only an index's
 * low 5 bits, so the bits above each code need no masking. */
TGT_INL __m512i tail_code_idx(const cmf_qmat *m, const q4_tab *t, uint64_t r, uint64_t g0,
                              uint64_t nb) {
    uint64_t off = 10 * (g0 / 16), left = m->code_bytes - off;
    __m128i cb = _mm_maskz_loadu_epi8((__mmask16)((1u << (left < nb ? left : nb)) - 1),
                                      m->extra + r * m->code_bytes + off);
    return _mm512_multishift_epi64_epi8(
        t->cshift_t, _mm512_permutexvar_epi8(t->cperm_t, _mm512_castsi128_si512(cb)));
}

/* The tails of two rows in one step (q4t_tail_pair, q4tp_tail_pair): lanes 0..7 of lo, hi / sc
 * are row a's groups GF, GF + 1, lanes 8..15 row b's, against the tail activations held twice
 * in tt. */
TGT_INL void tail_pair_acc(const q4_tok_tail *tt, __m512i lo, __m512i hi, __m512 sc, __m512 *acc_a,
                           __m512 *acc_b) {
    __m512i s = _mm512_dpbusd_epi32(tt->corr_p, lo, tt->xlo_p);
    s = _mm512_dpbusd_epi32(s, hi, tt->xhi_p);
    __m512 f = _mm512_cvtepi32_ps(s), sdx = _mm512_mul_ps(sc, tt->dx_p);
    *acc_a = _mm512_mask3_fmadd_ps(f, sdx, *acc_a, 0x00FF);
    *acc_b = _mm512_mask3_fmadd_ps(f, sdx, *acc_b, 0xFF00);
}

/* The tail of row r, groups [g0, g0 + ng) with g0 % 16 == 0 and ng <= 4, into acc: a
 * single step whose scales are built straight in lane order (lane l: group g0 + l/4), so
 * the tail pays no 16-group scale vector, no vpermps and no second accumulator's FMA.
 * q4_tail4_w decodes it (low nibbles in lo[0], high in hi[0], scales in sc) for any number of
 * tokens; q4_tail4_acc adds one token's product, dxt: its dx of group g0 + l/4 in lane l. */
TGT_INL void q4_tail4_w(const cmf_qmat *m, const q4_tab *t, uint64_t r, uint64_t g0, unsigned ng,
                        const cmf_dtype dt, const __m512 *lad, q4_w *w) {
    const uint64_t G = m->groups;
    __m512i nib;
    if (dt == CMF_DT_Q4_TILED) {
        const uint8_t *p = m->quants + (r * G + g0) * CQ_Q4T_TILE;
        unsigned nb = CQ_Q4T_TILE * ng;
        __m512i A = _mm512_maskz_loadu_epi8(bytes_mask(nb), p),
                B = _mm512_maskz_loadu_epi8(bytes_mask(nb > 8 ? nb - 8 : 0), p + 8);
        nib = _mm512_permutex2var_epi8(A, t->tidx, B);
        w->sc = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(t->widx_t, A)));
    } else {
        nib = _mm512_maskz_loadu_epi8(bytes_mask(16 * ng), m->quants + (r * G + g0) * 16);
        if (dt == CMF_DT_Q4_BLOCK) {
            __m512 s16 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << ng) - 1),
                                                                  m->scales + 2 * (r * G + g0)));
            w->sc = _mm512_permutexvar_ps(t->cidx[0], s16);
        } else { /* 4 codes: at most 3 bytes */
            w->sc = _mm512_permutex2var_ps(lad[0], tail_code_idx(m, t, r, g0, 3), lad[1]);
        }
    }
    w->lo[0] = _mm512_and_si512(nib, _mm512_set1_epi8(15));
    w->hi[0] = _mm512_gf2p8affine_epi64_epi8(nib, _mm512_set1_epi64(0x1020408000000000ll), 0);
}

TGT_INL void q4_tail4_acc(const act *a, const q4_w *w, uint64_t g0, __m512 dxt, __m512 *acc) {
    const int8_t *xc = a->xe + 32 * g0;
    __m512i s = _mm512_loadu_si512(a->corr + 4 * g0);
    s = _mm512_dpbusd_epi32(s, w->lo[0], _mm512_loadu_si512(xc));
    s = _mm512_dpbusd_epi32(s, w->hi[0], _mm512_loadu_si512(xc + 64));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w->sc, dxt), *acc);
}

TGT_INL void q4_tail4(const cmf_qmat *m, const q4_tab *t, const act *a, uint64_t r, uint64_t g0,
                      unsigned ng, const cmf_dtype dt, const __m512 *lad, __m512 *acc) {
    q4_w w;
    q4_tail4_w(m, t, r, g0, ng, dt, lad, &w);
    q4_tail4_acc(a, &w, g0, t->tt.dx_t, acc);
}

/* The ladders of rows r0 .. r0 + n - 1 (n <= 16), the bits of cq_q4tp_ladder_avx512 for each:
 * 2^lo and 2^step of the 16 rows in two polynomials and their powers in four products, then per
 * near row its rungs by four masked products and rungs 16..31 by one (a far row: its direct
 * form). The per-row numbers are broadcast from memory (no shuffles), and no division is left
 * but a far row's: a zmm divide per row was a large share of a row of 18-28 groups. */
TGT_INL void q4tp_ladders(const cmf_qmat *m, uint64_t r0, unsigned n, __m512 lads[16][2]) {
    __m512i p = _mm512_maskz_loadu_epi32((__mmask16)((1u << n) - 1), m->scales + 4 * r0);
    const __m512 lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(p)),
                 st = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(p, 16)));
    const cq_q4tp_pow16 pw = cq_q4tp_pow_avx512(lo, st);
    const __mmask16 near = cq_q4tp_near_avx512(lo, st);
    _Alignas(64) float num[8][16]; /* a, r, r^2, r^4, r^8, r^16, lo, step per row */
    const __m512 *parts[8] = {&pw.a, &pw.r, &pw.r2, &pw.r4, &pw.r8, &pw.r16, &lo, &st};
    for (int j = 0; j < 8; j++)
        _mm512_store_ps(num[j], *parts[j]);
    for (unsigned k = 0; k < n; k++) {
        if (near >> k & 1) {
            const cq_q4tp_pow16 pk = {_mm512_set1_ps(num[0][k]), _mm512_set1_ps(num[1][k]),
                                      _mm512_set1_ps(num[2][k]), _mm512_set1_ps(num[3][k]),
                                      _mm512_set1_ps(num[4][k]), _mm512_set1_ps(num[5][k])};
            cq_q4tp_ladder_near_avx512(&pk, &lads[k][0], &lads[k][1]);
        } else {
            cq_q4tp_ladder_far_avx512(_mm512_set1_ps(num[6][k]), _mm512_set1_ps(num[7][k]),
                                      &lads[k][0], &lads[k][1]);
        }
    }
}

/* q4_tiled: the tails of rows r and r + 1, groups [g0, g0 + ng) with ng <= 2, in one step
 * (rows of 18 groups, e.g. SmolLM2's 576 columns, otherwise spend a whole step on 2 groups):
 * lanes 0..7 go to row r's accumulator, 8..15 to row r + 1's. */
TGT_INL void q4t_tail_pair_w(const cmf_qmat *m, const q4_tab *t, uint64_t r, uint64_t g0,
                             unsigned ng, q4_w *w) {
    const uint8_t *p = m->quants + (r * m->groups + g0) * CQ_Q4T_TILE;
    __mmask64 k = bytes_mask(CQ_Q4T_TILE * ng);
    __m512i A = _mm512_maskz_loadu_epi8(k, p),
            B = _mm512_maskz_loadu_epi8(k, p + m->groups * CQ_Q4T_TILE);
    __m512i nib = _mm512_permutex2var_epi8(A, t->tidx_p, B);
    w->sc = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(A, t->widx_p, B)));
    w->lo[0] = _mm512_and_si512(nib, _mm512_set1_epi8(15));
    w->hi[0] = _mm512_gf2p8affine_epi64_epi8(nib, _mm512_set1_epi64(0x1020408000000000ll), 0);
}

TGT_INL void q4t_tail_pair(const cmf_qmat *m, const q4_tab *t, uint64_t r, uint64_t g0, unsigned ng,
                           __m512 *acc_a, __m512 *acc_b) {
    q4_w w;
    q4t_tail_pair_w(m, t, r, g0, ng, &w);
    tail_pair_acc(&t->tt, w.lo[0], w.hi[0], w.sc, acc_a, acc_b);
}

/* q4tp: the tails of rows r and r + 1, groups [g0, g0 + ng) with ng <= 2, in one step like
 * q4t_tail_pair; each half takes its scales from its own row's ladder (lad[0..1] row r,
 * lad[2..3] row r + 1). A tail step per row was a quarter of the time of rows of 18-20 groups. */
TGT_INL void q4tp_tail_pair_w(const cmf_qmat *m, const q4_tab *t, uint64_t r, uint64_t g0,
                              unsigned ng, const __m512 *lad, q4_w *w) {
    const uint64_t G = m->groups;
    const uint8_t *p = m->quants + (r * G + g0) * 16;
    __mmask32 k = ng >= 2 ? 0xFFFFFFFFu : 0xFFFFu;
    __m512i nib = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(k, p)),
                                     _mm256_maskz_loadu_epi8(k, p + G * 16), 1);
    /* codes 0, 1 (bits 0..9): 2 bytes */
    w->sc = _mm512_shuffle_f32x4(
        _mm512_permutex2var_ps(lad[0], tail_code_idx(m, t, r, g0, 2), lad[1]),
        _mm512_permutex2var_ps(lad[2], tail_code_idx(m, t, r + 1, g0, 2), lad[3]), 0x44);
    w->lo[0] = _mm512_and_si512(nib, _mm512_set1_epi8(15));
    w->hi[0] = _mm512_gf2p8affine_epi64_epi8(nib, _mm512_set1_epi64(0x1020408000000000ll), 0);
}

TGT_INL void q4tp_tail_pair(const cmf_qmat *m, const q4_tab *t, uint64_t r, uint64_t g0,
                            unsigned ng, const __m512 *lad, __m512 *acc_a, __m512 *acc_b) {
    q4_w w;
    q4tp_tail_pair_w(m, t, r, g0, ng, lad, &w);
    tail_pair_acc(&t->tt, w.lo[0], w.hi[0], w.sc, acc_a, acc_b);
}

/* Rows r .. r + N - 1 (N = 1 or 4) into y[0 .. N), unreduced, step by step together so that
 * their dependency chains overlap and the per-row loop costs are paid once per N rows; with
 * N = 4, tails of 1-2 groups go two rows per step. q4tp: lad[2k], lad[2k + 1] hold row r + k's
 * ladder. Four rows measured +11 to +19 % over two in cache on q4tp and 576-column q4_tiled
 * rows, and 0 to +3 % from memory. */
TGT_INL void q4_rows_n(const cmf_qmat *m, const act *a, const q4_tab *t, const cmf_dtype dt,
                       uint64_t r, const __m512 *lad, const int N, __m512 *y) {
    const uint64_t G = m->groups, GF = G & ~(uint64_t)15;
    const unsigned tail = (unsigned)(G - GF);
    /* the N rows' nibble bytes are one span, prefetched linearly (cq_prefetch_span) */
    const uint64_t bpg = dt == CMF_DT_Q4_TILED ? CQ_Q4T_TILE : 16;
    const uint8_t *span = m->quants + r * G * bpg;
    __m512 acc[8], accL[4];
    for (int k = 0; k < 2 * N; k++)
        acc[k] = _mm512_setzero_ps();
    for (int k = 0; k < N; k++)
        accL[k] = _mm512_setzero_ps();
    if (dt == CMF_DT_Q4TP) {
        /* unrolled so that the N rows' accumulators stay in registers (as a loop GCC kept
         * them in a stack array, every FMA through memory) */
        for (uint64_t g = 0; g < GF; g += 16)
#pragma GCC unroll 4
            for (int k = 0; k < N; k++)
                q4_blk(m, t, a, r + (uint64_t)k, g, 16, true, dt, lad + 2 * k,
                       span + (uint64_t)N * bpg * g + 16 * bpg * (uint64_t)k, &acc[2 * k],
                       &acc[2 * k + 1], &accL[k]);
    } else {
        for (uint64_t g = 0; g < GF; g += 16)
            for (int k = 0; k < N; k++)
                q4_blk(m, t, a, r + (uint64_t)k, g, 16, true, dt, lad + 2 * k,
                       span + (uint64_t)N * bpg * g + 16 * bpg * (uint64_t)k, &acc[2 * k],
                       &acc[2 * k + 1], &accL[k]);
    }
    if (tail > 0 && tail <= 4)
        cq_prefetch_span(span, (uint64_t)N, bpg * GF, (unsigned)((N * tail * bpg + 63) / 64));
    if (tail > 4) {
        /* each row's tail prefetches its share of the tails' lines among its loads (one per
         * 4 groups; q4tp pinned like its blocks): as one burst of prefetches before the tails
         * (as the short tails still do), 896-column rows read DRAM at 82-85 % of the
         * bandwidth, spread 88-91 % (q4tp and q4_tiled, Intel guest) */
        const uint8_t *pt = span + (uint64_t)N * bpg * GF;
        const uint64_t lines = (tail * bpg + 63) / 64;
        for (int k = 0; k < N; k++)
            q4_blk(m, t, a, r + (uint64_t)k, GF, tail, false, dt, lad + 2 * k,
                   pt + 64 * (uint64_t)k * lines, &acc[2 * k], &acc[2 * k + 1], &accL[k]);
    } else if (N > 1 && tail > 0 && tail <= 2 && dt != CMF_DT_Q4_BLOCK) {
        for (int k = 0; k < N; k += 2) {
            if (dt == CMF_DT_Q4_TILED)
                q4t_tail_pair(m, t, r + (uint64_t)k, GF, tail, &acc[2 * k + 1], &acc[2 * k + 3]);
            else
                q4tp_tail_pair(m, t, r + (uint64_t)k, GF, tail, lad + 2 * k, &acc[2 * k + 1],
                               &acc[2 * k + 3]);
        }
    } else if (tail > 0) {
        for (int k = 0; k < N; k++)
            q4_tail4(m, t, a, r + (uint64_t)k, GF, tail, dt, lad + 2 * k, &acc[2 * k + 1]);
    }
    for (int k = 0; k < N; k++)
        y[k] = _mm512_fnmadd_ps(_mm512_set1_ps(8.0f), accL[k],
                                _mm512_add_ps(acc[2 * k], acc[2 * k + 1]));
}

/* Row r's unreduced sum (q4_tiled and q4_block rows that gain nothing from steps of 4 rows). */
TGT_INL __m512 q4_row(const cmf_qmat *m, const act *a, const q4_tab *t, const cmf_dtype dt,
                      uint64_t r) {
    __m512 y;
    q4_rows_n(m, a, t, dt, r, t->lads[0], 1, &y);
    return y;
}

/* Whether q4tp rows of m run one at a time rather than four per step: rows of 17-31 groups
 * (576, 640, 896 columns: a 16-group block and a tail), where the 4-row steps spill their
 * accumulators to the stack (2 threads from DRAM: 576 columns 22-26 -> 27-30 GB/s, 640 16-24
 * -> 25-28, 896 24-28 -> 31-32; at 2,048 columns level, at 1,536 the 4-row steps ahead, 38-40
 * against 31-34 GB/s). A lone row's 1-2-group tail takes the 4-group tail step, not the two-row
 * tail pairs, so the batched kernel (q4_rows_multi) asks the same. */
TGT_INL bool q4tp_one_by_one(const cmf_qmat *m, const cmf_dtype dt) {
    return dt == CMF_DT_Q4TP && m->groups > 16 && m->groups < 32;
}

/* Rows [r0, r1) into y, 16 at a time (q4tp: the 16 rows' ladders first; they are
 * independent, so their exp2 chains overlap instead of each row waiting ~70 cycles on its
 * own before its scales exist: a ladder per row is a large share of the work on rows of
 * 18-28 groups), four rows per step (q4tp rows of 17-31 groups one by one: q4tp_one_by_one),
 * reduced together by hsum16. */
TGT_INL void q4_rows(const cmf_qmat *m, const act *a, q4_tab *t, const cmf_dtype dt, float *y,
                     uint64_t r0, uint64_t r1) {
    const bool quads = dt == CMF_DT_Q4TP || (m->groups < 32 && m->groups % 16 <= 2);
    if (!quads) {
#define Q4_ROW(r) q4_row(m, a, t, dt, r)
        ROWS_BY_16(Q4_ROW);
#undef Q4_ROW
        return;
    }
    const bool one_by_one = q4tp_one_by_one(m, dt);
    uint64_t c0 = r0;
    for (; c0 + 16 <= r1; c0 += 16) { /* a fixed trip count: measured faster than one loop */
        side_prefetch(m, dt, c0 + 16);
        if (dt == CMF_DT_Q4TP) q4tp_ladders(m, c0, 16, t->lads);
        __m512 v[16];
        if (one_by_one)
            for (unsigned k = 0; k < 16; k++)
                q4_rows_n(m, a, t, dt, c0 + k, &t->lads[k][0], 1, &v[k]);
        else
            for (unsigned k = 0; k < 16; k += 4)
                q4_rows_n(m, a, t, dt, c0 + k, &t->lads[k][0], 4, &v[k]);
        _mm512_storeu_ps(y + (c0 - r0), cq_hsum16_avx512(v));
    }
    if (c0 < r1) {
        if (dt == CMF_DT_Q4TP) q4tp_ladders(m, c0, (unsigned)(r1 - c0), t->lads);
        for (uint64_t r = c0; r < r1; r++) {
            __m512 v;
            q4_rows_n(m, a, t, dt, r, &t->lads[r - c0][0], 1, &v);
            y[r - r0] = _mm512_reduce_add_ps(v);
        }
    }
}

/* Token a's tail activations from group GF (the rows' last 16-group boundary). */
TGT_INL void tok_tail_init(const q4_tab *t, const act *a, uint64_t GF, q4_tok_tail *tt) {
    tt->dx_t = _mm512_permutexvar_ps(t->cidx[0], _mm512_loadu_ps(a->dx + GF));
    tt->dx_p = _mm512_shuffle_f32x4(tt->dx_t, tt->dx_t, 0x44);
    __m512i xlo = _mm512_loadu_si512(a->xe + 32 * GF),
            xhi = _mm512_loadu_si512(a->xe + 32 * GF + 64),
            corr = _mm512_loadu_si512(a->corr + 4 * GF);
    tt->xlo_p = _mm512_shuffle_i32x4(xlo, xlo, 0x44);
    tt->xhi_p = _mm512_shuffle_i32x4(xhi, xhi, 0x44);
    tt->corr_p = _mm512_shuffle_i32x4(corr, corr, 0x44);
}

/* ---- q4 family, several prepared tokens over the same rows ----
 *
 * Each token must get the bits q4_rows gives it alone, so every token keeps its own
 * accumulators and order of operations (the same 16-group blocks and tails, the same rows in
 * steps of 4 with paired tails, the same 16-row reductions); what the tokens share is each
 * step's loads, nibble decode and scales (q4tp: the rows' ladders). A row's blocks run for
 * all the tokens before the next row's, so a token holds 3 accumulators, not 3 per row of a
 * step; the step's tails then add to the stored sums. */

/* Rows r .. r + N - 1 (N = 1 or 4) for NT tokens: y[j][at + k] = row r + k's unreduced sum
 * for token j, as q4_rows_n leaves it for that token alone; tt[j]: token j's tail data. */
TGT_INL void q4_rows_n_multi(const cmf_qmat *m, const act *const *a, const q4_tok_tail *tt,
                             const int NT, const q4_tab *t, const cmf_dtype dt, uint64_t r,
                             const __m512 *lad, const int N, __m512 (*y)[16], int at) {
    const uint64_t G = m->groups, GF = G & ~(uint64_t)15;
    const unsigned tail = (unsigned)(G - GF);
    const uint64_t bpg = dt == CMF_DT_Q4_TILED ? CQ_Q4T_TILE : 16;
    const uint8_t *span = m->quants + r * G * bpg;
    const uint64_t lines = (tail * bpg + 63) / 64;
    __m512 s0[4][4], s1[4][4], sL[4][4]; /* [token][row] after the blocks */
    for (int k = 0; k < N; k++) {
        __m512 acc0[4], acc1[4], accL[4];
        for (int j = 0; j < NT; j++)
            acc0[j] = acc1[j] = accL[j] = _mm512_setzero_ps();
        for (uint64_t g = 0; g < GF; g += 16) {
            q4_w w;
            q4_blk_w(m, t, r + (uint64_t)k, g, 16, true, dt, lad + 2 * k,
                     span + (uint64_t)N * bpg * g + 16 * bpg * (uint64_t)k, &w);
            for (int j = 0; j < NT; j++)
                q4_blk_acc(t, a[j], &w, g, 16, true, &acc0[j], &acc1[j], &accL[j]);
        }
        if (tail > 4) {
            q4_w w;
            q4_blk_w(m, t, r + (uint64_t)k, GF, tail, false, dt, lad + 2 * k,
                     span + (uint64_t)N * bpg * GF + 64 * (uint64_t)k * lines, &w);
            for (int j = 0; j < NT; j++)
                q4_blk_acc(t, a[j], &w, GF, tail, false, &acc0[j], &acc1[j], &accL[j]);
        }
        for (int j = 0; j < NT; j++)
            s0[j][k] = acc0[j], s1[j][k] = acc1[j], sL[j][k] = accL[j];
    }
    if (tail > 0 && tail <= 4)
        cq_prefetch_span(span, (uint64_t)N, bpg * GF, (unsigned)((N * tail * bpg + 63) / 64));
    if (tail > 4) {
        /* done with the blocks */
    } else if (N > 1 && tail > 0 && tail <= 2 && dt != CMF_DT_Q4_BLOCK) {
        for (int k = 0; k < N; k += 2) {
            q4_w w;
            if (dt == CMF_DT_Q4_TILED)
                q4t_tail_pair_w(m, t, r + (uint64_t)k, GF, tail, &w);
            else
                q4tp_tail_pair_w(m, t, r + (uint64_t)k, GF, tail, lad + 2 * k, &w);
            for (int j = 0; j < NT; j++)
                tail_pair_acc(&tt[j], w.lo[0], w.hi[0], w.sc, &s1[j][k], &s1[j][k + 1]);
        }
    } else if (tail > 0) {
        for (int k = 0; k < N; k++) {
            q4_w w;
            q4_tail4_w(m, t, r + (uint64_t)k, GF, tail, dt, lad + 2 * k, &w);
            for (int j = 0; j < NT; j++)
                q4_tail4_acc(a[j], &w, GF, tt[j].dx_t, &s1[j][k]);
        }
    }
    for (int j = 0; j < NT; j++)
        for (int k = 0; k < N; k++)
            y[j][at + k] =
                _mm512_fnmadd_ps(_mm512_set1_ps(8.0f), sL[j][k], _mm512_add_ps(s0[j][k], s1[j][k]));
}

/* Rows [r0, r1) for NT tokens, laid out as q4_rows lays them out for one. */
TGT_INL void q4_rows_multi(const cmf_qmat *m, const act *const *a, const q4_tok_tail *tt,
                           const int NT, q4_tab *t, const cmf_dtype dt, float *const *y,
                           uint64_t r0, uint64_t r1) {
    const bool quads = dt == CMF_DT_Q4TP || (m->groups < 32 && m->groups % 16 <= 2);
    __m512 v[4][16];
    uint64_t c0 = r0;
    for (; c0 + 16 <= r1; c0 += 16) {
        side_prefetch(m, dt, c0 + 16);
        if (dt == CMF_DT_Q4TP) q4tp_ladders(m, c0, 16, t->lads);
        if (q4tp_one_by_one(m, dt))
            for (unsigned k = 0; k < 16; k++)
                q4_rows_n_multi(m, a, tt, NT, t, dt, c0 + k, &t->lads[k][0], 1, v, (int)k);
        else if (quads)
            for (unsigned k = 0; k < 16; k += 4)
                q4_rows_n_multi(m, a, tt, NT, t, dt, c0 + k, &t->lads[k][0], 4, v, (int)k);
        else
            for (unsigned k = 0; k < 16; k++)
                q4_rows_n_multi(m, a, tt, NT, t, dt, c0 + k, &t->lads[0][0], 1, v, (int)k);
        for (int j = 0; j < NT; j++)
            _mm512_storeu_ps(y[j] + (c0 - r0), cq_hsum16_avx512(v[j]));
    }
    if (c0 < r1) {
        if (dt == CMF_DT_Q4TP) q4tp_ladders(m, c0, (unsigned)(r1 - c0), t->lads);
        for (uint64_t r = c0; r < r1; r++) {
            q4_rows_n_multi(m, a, tt, NT, t, dt, r, &t->lads[quads ? r - c0 : 0][0], 1, v, 0);
            for (int j = 0; j < NT; j++)
                y[j][r - r0] = _mm512_reduce_add_ps(v[j][0]);
        }
    }
}

#define Q4_MULTI_DT(NT)                                                                            \
    do {                                                                                           \
        if (m->dtype == CMF_DT_Q4_TILED)                                                           \
            q4_rows_multi(m, at, tt, NT, &t, CMF_DT_Q4_TILED, yt, r0, r1);                         \
        else if (m->dtype == CMF_DT_Q4_BLOCK)                                                      \
            q4_rows_multi(m, at, tt, NT, &t, CMF_DT_Q4_BLOCK, yt, r0, r1);                         \
        else                                                                                       \
            q4_rows_multi(m, at, tt, NT, &t, CMF_DT_Q4TP, yt, r0, r1);                             \
    } while (0)

/* The tokens 4 at a time: 3 accumulators each, beside a step's 9 decoded vectors. */
TGT static void q4_multi(const cmf_qmat *m, const act *const *a, size_t n, float *const *y,
                         uint64_t r0, uint64_t r1) {
    q4_tab t;
    q4_tab_init(&t);
    const uint64_t GF = m->groups & ~(uint64_t)15;
    for (size_t t0 = 0; t0 < n; t0 += 4) {
        size_t nt = n - t0 < 4 ? n - t0 : 4;
        const act *const *at = a + t0;
        float *const *yt = y + t0;
        q4_tok_tail tt[4];
        for (size_t j = 0; j < nt; j++)
            tok_tail_init(&t, at[j], GF, &tt[j]);
        switch (nt) {
        case 1:
            Q4_MULTI_DT(1);
            break;
        case 2:
            Q4_MULTI_DT(2);
            break;
        case 3:
            Q4_MULTI_DT(3);
            break;
        default:
            Q4_MULTI_DT(4);
            break;
        }
    }
}
#undef Q4_MULTI_DT

/* ---- vbit / vbit_ro ---- */

typedef struct {
    __m512i perm, shift, mask; /* per width b < 8 */
} vb_tab;

TGT static void vb_tab_init(vb_tab *t, unsigned b) {
    uint8_t pi[64], sh[64];
    for (unsigned q = 0; q < 8; q++)
        for (unsigned j = 0; j < 8; j++) {
            pi[8 * q + j] = (uint8_t)(q * b + (j < b ? b - 1 - j : 0));
            sh[8 * q + j] = (uint8_t)(b * (7 - j));
        }
    t->perm = _mm512_loadu_si512(pi);
    t->shift = _mm512_loadu_si512(sh);
    t->mask = _mm512_set1_epi8((char)((1 << b) - 1));
}

/* ---- vbit / vbit_ro, for NT (1-4) prepared tokens over the same rows ----
 *
 * One token is the decode kernel (vb_rows); several keep one token's accumulators and order of
 * operations each, so every token gets the bits it gets alone, and share each step's load and
 * code extraction (vpermb, vpmultishiftqb, and; 4-bit rows: and, vgf2p8affineqb). Four tokens per
 * pass (bench_tok8_multi 1536 576, Zen 4: 4 tokens 155-165 us one after the other, 88-93 in passes
 * of two, 70-76 in one pass of four, whose few spills cost less than a second decode of the codes).
 */
#define VB_PASS 4

/* The scales of groups [g0, g0 + 16) (kg: the groups that exist) times each token's dx into
 * sdx, and each token's bias term sum_g s_g dx_g sum(xq_g) into accL (the bias L is removed
 * once per row). */
TGT_INL void vb_scales(const uint8_t *sc, const act *const *a, const int NT, uint64_t g0,
                       __mmask16 kg, __m512 *sdx, __m512 *accL) {
    const __m512 s16 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(kg, sc + 2 * g0));
    for (int j = 0; j < NT; j++) {
        sdx[j] = _mm512_maskz_mul_ps(kg, s16, _mm512_loadu_ps(a[j]->dx + g0));
        accL[j] = _mm512_fmadd_ps(sdx[j], _mm512_loadu_ps(a[j]->sg + g0), accL[j]);
    }
}

/* Step c of the 16 groups from g0 of a row of width b != 4: groups g0 + 2c and + 1, their
 * codes u as loaded, against NT tokens, the scales picked from sdx; even steps into acc0. */
TGT_INL void vb_step(const uint8_t *row, const vb_tab *t, const __m512i *cidx, const act *const *a,
                     const int NT, unsigned b, uint64_t g0, unsigned c, __m512i u,
                     const __m512 *sdx, __m512 *acc0, __m512 *acc1) {
    const uint64_t g = g0 + 2 * c;
    cq_prefetch_weights_pinned(row + 4 * b * g);
    u = _mm512_and_si512(
        _mm512_multishift_epi64_epi8(t->shift, _mm512_permutexvar_epi8(t->perm, u)), t->mask);
    for (int j = 0; j < NT; j++) {
        __m512i I =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(a[j]->xn + 32 * g));
        __m512 f = _mm512_cvtepi32_ps(I), s = _mm512_permutexvar_ps(cidx[c & 7], sdx[j]);
        if (c & 1)
            acc1[j] = _mm512_fmadd_ps(f, s, acc1[j]);
        else
            acc0[j] = _mm512_fmadd_ps(f, s, acc0[j]);
    }
}

/* Step c of the 16 groups from g0 of a 4-bit row: groups g0 + 4c .. + 3, their nibbles as
 * loaded. A 4-bit row's 16 bytes per group are nibbles like q4_block's, but MSB-first (the
 * high nibble is the even element), so the q4 kernel's products apply with the activation
 * halves swapped and the bias removed through accL. cidx4: the q4 lanes. */
TGT_INL void vb4_step(const uint8_t *row, const __m512i *cidx4, const act *const *a, const int NT,
                      uint64_t g0, unsigned c, __m512i nib, const __m512 *sdx, __m512 *acc0,
                      __m512 *acc1) {
    const uint64_t g = g0 + 4 * c;
    cq_prefetch_weights_pinned(row + 16 * g);
    __m512i lo = _mm512_and_si512(nib, _mm512_set1_epi8(15)),
            hi = _mm512_gf2p8affine_epi64_epi8(nib, _mm512_set1_epi64(0x1020408000000000ll), 0);
    for (int j = 0; j < NT; j++) {
        const int8_t *xc = a[j]->xe + 32 * g;
        __m512i I = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xc + 64));
        I = _mm512_dpbusd_epi32(I, hi, _mm512_loadu_si512(xc));
        __m512 f = _mm512_cvtepi32_ps(I), s = _mm512_permutexvar_ps(cidx4[c & 3], sdx[j]);
        if (c & 1)
            acc1[j] = _mm512_fmadd_ps(f, s, acc1[j]);
        else
            acc0[j] = _mm512_fmadd_ps(f, s, acc0[j]);
    }
}

/* Groups [g0, g0 + ng) of a row of width b (g0 % 16 == 0). FULL: ng == 16 and every 64-byte
 * load stays inside the payload; otherwise loads are masked to the groups' bytes. */
TGT_INL void vb_blk_multi(const uint8_t *row, const uint8_t *sc, const vb_tab *t,
                          const __m512i *cidx, const act *const *a, const int NT, unsigned b,
                          uint64_t g0, unsigned ng, const bool FULL, __m512 *acc0, __m512 *acc1,
                          __m512 *accL) {
    __m512 sdx[VB_PASS];
    vb_scales(sc, a, NT, g0, FULL ? 0xFFFF : (__mmask16)((1u << ng) - 1), sdx, accL);
    for (unsigned c = 0; c < 8; c++) {
        if (!FULL && 2 * c >= ng) break;
        const uint8_t *p = row + 4 * b * (g0 + 2 * c);
        __m512i u;
        if (FULL) {
            u = _mm512_loadu_si512(p);
        } else {
            unsigned vg = ng - 2 * c >= 2 ? 2 : 1;
            u = _mm512_maskz_loadu_epi8(bytes_mask(4 * b * vg), p);
        }
        vb_step(row, t, cidx, a, NT, b, g0, c, u, sdx, acc0, acc1);
    }
}

/* Groups [g0, g0 + ng) of a 4-bit row (NG16: ng == 16). */
TGT_INL void vb4_blk_multi(const uint8_t *row, const uint8_t *sc, const __m512i *cidx4,
                           const act *const *a, const int NT, uint64_t g0, unsigned ng,
                           const bool NG16, __m512 *acc0, __m512 *acc1, __m512 *accL) {
    __m512 sdx[VB_PASS];
    vb_scales(sc, a, NT, g0, NG16 ? 0xFFFF : (__mmask16)((1u << ng) - 1), sdx, accL);
    for (unsigned c = 0; c < 4; c++) {
        if (!NG16 && 4 * c >= ng) break;
        unsigned vg = NG16 || ng - 4 * c >= 4 ? 4 : ng - 4 * c;
        const uint8_t *p = row + 16 * (g0 + 4 * c);
        __m512i nib =
            vg == 4 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(bytes_mask(16 * vg), p);
        vb4_step(row, cidx4, a, NT, g0, c, nib, sdx, acc0, acc1);
    }
}

/* Groups [g0, g0 + 16 + nt) (0 < nt < 16) of a row: the full block (its loads inside the
 * payload) and then its tail of nt groups, the tail's scales converted after the block's and
 * its steps numbered on from the block's, so the same operations in the same order as the two
 * blk calls, without the tail's own pass (the short rows of small models, 18-28 groups, are
 * one such chunk). */
TGT_INL void vb_blk2_multi(const uint8_t *row, const uint8_t *sc, const vb_tab *t,
                           const __m512i *cidx, const act *const *a, const int NT, unsigned b,
                           uint64_t g0, unsigned nt, __m512 *acc0, __m512 *acc1, __m512 *accL) {
    __m512 sdx[VB_PASS], tdx[VB_PASS];
    vb_scales(sc, a, NT, g0, 0xFFFF, sdx, accL);
    vb_scales(sc, a, NT, g0 + 16, (__mmask16)((1u << nt) - 1), tdx, accL);
    for (unsigned c = 0; c < 8; c++)
        vb_step(row, t, cidx, a, NT, b, g0, c, _mm512_loadu_si512(row + 4 * b * (g0 + 2 * c)), sdx,
                acc0, acc1);
    for (unsigned c = 8; 2 * (c - 8) < nt; c++) {
        const unsigned vg = nt - 2 * (c - 8) >= 2 ? 2 : 1;
        vb_step(row, t, cidx, a, NT, b, g0, c,
                _mm512_maskz_loadu_epi8(bytes_mask(4 * b * vg), row + 4 * b * (g0 + 2 * c)), tdx,
                acc0, acc1);
    }
}

TGT_INL void vb4_blk2_multi(const uint8_t *row, const uint8_t *sc, const __m512i *cidx4,
                            const act *const *a, const int NT, uint64_t g0, unsigned nt,
                            __m512 *acc0, __m512 *acc1, __m512 *accL) {
    __m512 sdx[VB_PASS], tdx[VB_PASS];
    vb_scales(sc, a, NT, g0, 0xFFFF, sdx, accL);
    vb_scales(sc, a, NT, g0 + 16, (__mmask16)((1u << nt) - 1), tdx, accL);
    for (unsigned c = 0; c < 4; c++)
        vb4_step(row, cidx4, a, NT, g0, c, _mm512_loadu_si512(row + 16 * (g0 + 4 * c)), sdx, acc0,
                 acc1);
    for (unsigned c = 4; 4 * (c - 4) < nt; c++) {
        const unsigned left = nt - 4 * (c - 4), vg = left >= 4 ? 4 : left;
        const uint8_t *p = row + 16 * (g0 + 4 * c);
        vb4_step(row, cidx4, a, NT, g0, c,
                 vg == 4 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(bytes_mask(16 * vg), p),
                 tdx, acc0, acc1);
    }
}

/* Row r for NT tokens: out[j] token j's unreduced sum. 4 bits is the common width of real
 * allocations (mean 4.25 bits); full loads of the other widths read up to 64 - 8b bytes past
 * a step's bytes, so the blocks near the payload's end mask theirs. */
TGT_INL void vb_row_multi(const cmf_qmat *m, const act *const *a, const int NT, const vb_tab *tabs,
                          const __m512i *cidx, const __m512i *cidx4, uint64_t r, __m512 *out) {
    const unsigned b = cq_vbit_bits(m, r);
    const vb_tab *t = &tabs[b];
    const uint64_t G = m->groups, GF = G & ~(uint64_t)15;
    const uint8_t *row = cq_vbit_row(m, r), *sc = m->scales + 2 * r * G, *end = m->data + m->nbytes;
    __m512 acc0[VB_PASS], acc1[VB_PASS], accL[VB_PASS];
    for (int j = 0; j < NT; j++)
        acc0[j] = acc1[j] = accL[j] = _mm512_setzero_ps();
    __m512 L;
    /* a tail of G % 16 groups merges into the last full block (blk2) where that block's loads
     * stay inside the payload: 4-bit rows always (16 bytes per group), the others read up to
     * 64 - 8b bytes past a step's */
    const uint64_t GM = GF && GF < G ? GF - 16 : GF;
    if (b == 4) {
        for (uint64_t g = 0; g < GM; g += 16)
            vb4_blk_multi(row, sc, cidx4, a, NT, g, 16, true, acc0, acc1, accL);
        if (GM < GF)
            vb4_blk2_multi(row, sc, cidx4, a, NT, GM, (unsigned)(G - GF), acc0, acc1, accL);
        else if (GF < G)
            vb4_blk_multi(row, sc, cidx4, a, NT, GF, (unsigned)(G - GF), false, acc0, acc1, accL);
        L = _mm512_set1_ps(7.0f);
    } else {
        uint64_t g = 0;
        for (; g < GM && row + 4 * b * g + 4 * b * 14 + 64 <= end; g += 16)
            vb_blk_multi(row, sc, t, cidx, a, NT, b, g, 16, true, acc0, acc1, accL);
        if (g == GM && GM < GF && row + 4 * b * g + 4 * b * 14 + 64 <= end) {
            vb_blk2_multi(row, sc, t, cidx, a, NT, b, g, (unsigned)(G - GF), acc0, acc1, accL);
            g = G;
        }
        for (; g < G; g += 16)
            vb_blk_multi(row, sc, t, cidx, a, NT, b, g, (unsigned)(G - g < 16 ? G - g : 16), false,
                         acc0, acc1, accL);
        L = _mm512_set1_ps((float)((1 << (b - 1)) - 1));
    }
    for (int j = 0; j < NT; j++)
        out[j] = _mm512_fnmadd_ps(L, accL[j], _mm512_add_ps(acc0[j], acc1[j]));
}

/* Rows [r0, r1) for NT tokens, laid out and reduced as vb_rows does for one. */
TGT_INL void vb_rows_multi_nt(const cmf_qmat *m, const act *const *a, const int NT,
                              const vb_tab *tabs, const __m512i *cidx, const __m512i *cidx4,
                              float *const *y, uint64_t r0, uint64_t r1) {
    uint64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        side_prefetch(m, m->dtype, r + 16);
        __m512 v[VB_PASS][16];
        for (int k = 0; k < 16; k++) {
            __m512 o[VB_PASS];
            vb_row_multi(m, a, NT, tabs, cidx, cidx4, r + (uint64_t)k, o);
            for (int j = 0; j < NT; j++)
                v[j][k] = o[j];
        }
        for (int j = 0; j < NT; j++)
            _mm512_storeu_ps(y[j] + (r - r0), cq_hsum16_avx512(v[j]));
    }
    for (; r < r1; r++) {
        __m512 o[VB_PASS];
        vb_row_multi(m, a, NT, tabs, cidx, cidx4, r, o);
        for (int j = 0; j < NT; j++)
            y[j][r - r0] = _mm512_reduce_add_ps(o[j]);
    }
}

/* The tables, built once per process (built per call, that is per 64-row piece of a decode,
 * they were a few percent of a vbit decode). */
static struct {
    vb_tab tabs[9];
    __m512i cidx[8], cidx4[4];
} vb_consts;
static pthread_once_t vb_consts_once = PTHREAD_ONCE_INIT;

TGT static void vb_tables(void) {
    static const unsigned widths[5] = {3, 4, 5, 6, 8};
    for (int i = 0; i < 5; i++)
        vb_tab_init(&vb_consts.tabs[widths[i]], widths[i]);
    for (int c = 0; c < 8; c++) {
        int32_t ci[16];
        for (int l = 0; l < 16; l++)
            ci[l] = 2 * c + l / 8;
        vb_consts.cidx[c] = _mm512_loadu_si512(ci);
        for (int l = 0; l < 16 && c < 4; l++)
            ci[l] = 4 * c + l / 4;
        if (c < 4) vb_consts.cidx4[c] = _mm512_loadu_si512(ci);
    }
}

TGT static void vb_multi(const cmf_qmat *m, const act *const *a, size_t n, float *const *y,
                         uint64_t r0, uint64_t r1) {
    pthread_once(&vb_consts_once, vb_tables);
    const vb_tab *tabs = vb_consts.tabs;
    const __m512i *cidx = vb_consts.cidx, *cidx4 = vb_consts.cidx4;
    size_t t0 = 0;
    for (; t0 + 4 <= n; t0 += 4)
        vb_rows_multi_nt(m, a + t0, 4, tabs, cidx, cidx4, y + t0, r0, r1);
    if (n - t0 == 3) vb_rows_multi_nt(m, a + t0, 3, tabs, cidx, cidx4, y + t0, r0, r1);
    if (n - t0 == 2) vb_rows_multi_nt(m, a + t0, 2, tabs, cidx, cidx4, y + t0, r0, r1);
    if (n - t0 == 1) vb_rows_multi_nt(m, a + t0, 1, tabs, cidx, cidx4, y + t0, r0, r1);
}

TGT static void vb_rows(const cmf_qmat *m, const act *a, float *y, uint64_t r0, uint64_t r1) {
    vb_multi(m, &a, 1, &y, r0, r1);
}

TGT static void q4_dispatch(const cmf_qmat *m, const act *a, float *y, uint64_t r0, uint64_t r1) {
    q4_tab t;
    q4_tab_init(&t);
    const uint64_t GF = m->groups & ~(uint64_t)15;
    tok_tail_init(&t, a, GF, &t.tt);
    if (m->dtype == CMF_DT_Q4_TILED)
        q4_rows(m, a, &t, CMF_DT_Q4_TILED, y, r0, r1);
    else if (m->dtype == CMF_DT_Q4_BLOCK)
        q4_rows(m, a, &t, CMF_DT_Q4_BLOCK, y, r0, r1);
    else
        q4_rows(m, a, &t, CMF_DT_Q4TP, y, r0, r1);
}

static bool have_features(void) {
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("gfni");
}

bool cq_avx512_i8dec_supports(const cmf_qmat *m) {
    bool q4 = m->dtype == CMF_DT_Q4_TILED || m->dtype == CMF_DT_Q4_BLOCK || m->dtype == CMF_DT_Q4TP,
         vb = m->dtype == CMF_DT_VBIT || m->dtype == CMF_DT_VBIT_RO;
    return have_features() && m->cols % 32 == 0 && (q4 || vb);
}

TGT static void rows_with(const cmf_qmat *m, const act *a, float *y, uint64_t r0, uint64_t r1) {
    if (m->dtype == CMF_DT_VBIT || m->dtype == CMF_DT_VBIT_RO)
        vb_rows(m, a, y, r0, r1);
    else
        q4_dispatch(m, a, y, r0, r1);
}

bool cq_avx512_i8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1) {
    if (!cq_avx512_i8dec_supports(m)) return false;
    act a;
    _Alignas(64) uint8_t stack_buf[ACT_STACK_BYTES];
    if (!act_alloc(&a, m->groups, stack_buf)) return false;
    prep(&a, x);
    rows_with(m, &a, y, r0, r1);
    return true;
}

/* A prepared token: its act header in the first 64 bytes, the arrays after it. */
#define TOK_HEAD 64
_Static_assert(sizeof(act) <= TOK_HEAD, "act header fits its slot");

size_t cq_avx512_i8dec_tok_bytes(uint64_t cols) {
    return have_features() && cols % 32 == 0 ? TOK_HEAD + act_bytes(cols / 32) : 0;
}

void cq_avx512_i8dec_tok_prepare(void *buf, const float *x, uint64_t cols) {
    act *a = buf;
    act_layout(a, cols / 32, (uint8_t *)buf + TOK_HEAD);
    prep(a, x);
}

void cq_avx512_i8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                                uint64_t r1) {
    rows_with(m, buf, y, r0, r1);
}

void cq_avx512_i8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                      float *const *y, uint64_t r0, uint64_t r1) {
    const act *a[CMF_TOK8_MULTI_MAX];
    for (size_t j = 0; j < n; j++)
        a[j] = buf[j];
    if (m->dtype == CMF_DT_VBIT || m->dtype == CMF_DT_VBIT_RO)
        vb_multi(m, a, n, y, r0, r1);
    else
        q4_multi(m, a, n, y, r0, r1);
}
