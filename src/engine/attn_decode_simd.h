/* attn_decode_simd.h - the body of the SIMD decode attention tiers (attn_decode.h), one source
 * for attn_decode_avx2.c and attn_decode_avx512.c. Scores: the cache's key tiles
 * (kv_cache.h: element i of 16 consecutive keys side by side) give the keys in the lanes, so
 * each element of the tile is one load (or two) and one FMA per head of the group, with no
 * horizontal sums (tile_dots). Softmax over the chunk with the vectorized exp. Values: outputs
 * in slices of NV vectors, one accumulator per (head, vector), each value row widened once and
 * used by every head. The values pass walks the keys in runs of evenly spaced cache rows.
 *
 * The including file, built for its ISA, defines before including this:
 *   VW, PF_ROWS, AI             lanes per vector (CQ_KV_TILE / VW vectors per tile row),
 *                               value rows fetched ahead (cq_kv_prefetch_row), the
 *                               always-inline marker
 *   vec, lmask                  the float vector and the lane-mask types
 *   V_ZERO V_SET1 V_BCAST V_LOADU V_STOREU V_ADD V_MUL V_DIV V_FMADD V_TANH, and
 *                               V_LOADU_MASKED (masked tails only)
 *   LD(ld, p, i, mk)            VW cache values of row p at element i (mk: the lanes to read
 *                               where the ISA masks; the whole vector otherwise)
 *   ALL_LANES, lanes_upto(i, hd) every lane; the lanes of the vector at element i of a row of
 *                               hd (ALL_LANES or none; unmasked: anything, ignored)
 *   V_STORE_LANES(p, mk, v)     store the lanes of mk (masked tails) or all (unmasked)
 *   softmax(a, cnt, s, vs, part) the chunk's softmax of one head (see attn_decode_avx512.c)
 *   TILE_MAX_NS, TILE_NS(G)     accumulator sets at most, and for G heads (1-8) of a key
 *                               tile pass (a power of two dividing VW)
 *   VALUES_MAX_G                heads per values pass (<= 8): a group splits into passes
 *                               of at most this many heads, as even as they split
 *   VALUES_NV(G)                vectors per value slice for G heads (G * NV <= 16)
 *   VALUES_W_FIRST(G, NV)       1: per key, the G weights are broadcast first and each value
 *                               vector is loaded as it is used (G + G * NV + 1 registers);
 *                               0: the NV value vectors first, each weight as it is used
 *   MASKED_TAIL                 1: the value slices run over hd masked; 0: whole slices then
 *                               single vectors
 *   PREFETCH_AHEAD              1: also fetch the unit's first key tile up front and, with its
 *                               last tile, the values pass's first rows
 *   TIER_FN, TIER_OPS           the entry point's name and the ops of the generic fallback */
#include <string.h>

/* The unit's keys: positions x0 .. x0 + cnt - 1 of kv head kvh, starting at ring slot s0. */
typedef struct span {
    uint32_t kvh, cnt, s0;
} span;

/* Value rows from the slot `slot` on that lie evenly spaced in the cache: up to the end of its
 * block of CQ_KV_BLOCK slots, the ring's end, or `left` keys. */
AI uint32_t run_len(const cq_kv_layer *c, uint32_t slot, uint32_t left) {
    uint32_t n = CQ_KV_BLOCK - (slot & (CQ_KV_BLOCK - 1));
    if (n > c->slots - slot) n = c->slots - slot;
    return n < left ? n : left;
}

/* Fetch value row j + PF_ROWS of the span ahead (blk: c->vb): row j starts at p and `left`
 * rows of its run remain from it, so the row ahead is p + PF_ROWS strides when it lies in the
 * run, else it is looked up. */
AI void fetch_ahead(const cq_kv_layer *c, uint8_t *const *blk, span sp, uint32_t j,
                    const uint8_t *p, uint32_t left, size_t stride) {
    if (left > PF_ROWS)
        cq_kv_prefetch_at(c, p + PF_ROWS * stride);
    else
        cq_kv_prefetch_row(c, blk, sp.kvh, sp.s0, j + PF_ROWS);
}

/* Fetch the cache lines of bytes at p into L1. */
AI void fetch_bytes(const uint8_t *p, size_t bytes) {
    for (size_t b = 0; b < bytes; b += 64)
        __builtin_prefetch(p + b, 0, 3);
}

/* Vectors per key tile row (CQ_KV_TILE keys) and the most heads one tile pass takes. */
#define NL         ((int)(CQ_KV_TILE / VW))
#define TILE_MAX_G 8

/* Dots of heads g0 .. g0 + G - 1 (q: their query vectors, hd apart) with the VW keys in lanes
 * v * VW .. v * VW + VW - 1 of one key tile: d[g * CQ_KV_TILE + v * VW + l]. The keys sit in
 * the lanes, so element i of all of them is one load and every head adds one FMA, without
 * horizontal sums; NS sets of accumulators take the elements in turn (i % NS) so that enough
 * FMA chains run at once, and are added at the end. A tile of two vectors (AVX2) takes two
 * calls, each with the whole group in registers, rather than a tile row per head pass. */
AI void tile_dots(const float *q, const uint8_t *tile, int v, const uint8_t *next, size_t esz,
                  ld_fn ld, const uint32_t hd, const int G, const int NS, float *d) {
    const size_t step = (size_t)NS * CQ_KV_TILE * esz; /* bytes of the tile per i0 step */
    vec acc[TILE_MAX_G][TILE_MAX_NS];
    _Static_assert(TILE_MAX_G == 8, "tile passes of 1-8 heads");
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
#pragma GCC unroll 8
        for (int k = 0; k < NS; k++)
            acc[g][k] = V_ZERO();
    }
    /* the element loop stays a loop: unrolled over hd, GCC spilled the accumulators */
#pragma GCC unroll 1
    for (uint32_t i0 = 0; i0 < hd; i0 += (uint32_t)NS) {
        /* the next tile, fetched alongside this one: a whole tile at once was a burst of up to
         * 128 fetches that stalled the loads of the tile in use */
        if (next) fetch_bytes(next + i0 * CQ_KV_TILE * esz, step);
#pragma GCC unroll 8
        for (int k = 0; k < NS; k++) {
            const uint32_t i = i0 + (uint32_t)k;
            const vec x = LD(ld, tile, (size_t)i * CQ_KV_TILE + (size_t)v * VW, ALL_LANES);
#pragma GCC unroll 8
            for (int g = 0; g < G; g++)
                acc[g][k] = V_FMADD(V_BCAST(q + (size_t)g * hd + i), x, acc[g][k]);
        }
    }
    /* every loop over the array unrolled, so that it lives in registers only */
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
#pragma GCC unroll 8
        for (int k = 1; k < NS; k++)
            acc[g][0] = V_ADD(acc[g][0], acc[g][k]);
        V_STOREU(d + (size_t)g * CQ_KV_TILE + (size_t)v * VW, acc[g][0]);
    }
}

/* Final scores of the chunk, sc[g * chunk + j] for head g of the group and key j, a key tile
 * (or the part of one the chunk holds) at a time: the group's heads in passes of at most
 * TILE_MAX_G (tile_dots), then the q8 key scales, the scale, the soft-cap, and the lanes of the
 * chunk's keys copied out. The next tile is fetched while one is used (by the first pass). */
AI void scores(const cq_attn_decode_args *a, span sp, float *sc, ld_fn ld, const uint32_t hd) {
    const cq_kv_layer *c = a->kv;
    const uint32_t group = cq_attn_decode_group(a, sp.kvh);
    const float *q = a->q + (size_t)cq_attn_decode_head0(a, sp.kvh) * hd;
    const vec scale = V_SET1(a->scale), cap = V_SET1(a->softcap);
    const size_t esz = cq_kv_elem_size(c->type);
    _Alignas(64) float d[TILE_MAX_G * CQ_KV_TILE], ks[CQ_KV_TILE], out[CQ_KV_TILE];
    for (uint32_t l = 0; l < CQ_KV_TILE; l++)
        ks[l] = 1.0f;
#if PREFETCH_AHEAD /* the unit's first key tile */
    fetch_bytes(cq_kv_key_tile(c, sp.s0, sp.kvh), (size_t)hd * CQ_KV_TILE * esz);
#endif
    for (uint32_t j = 0, slot = sp.s0; j < sp.cnt;) {
        const uint32_t n = cq_kv_tile_run(c, slot, sp.cnt - j), lane = slot % CQ_KV_TILE;
        const uint32_t next = slot + n == c->slots ? 0 : slot + n;
        const uint8_t *ahead = j + n < sp.cnt ? cq_kv_key_tile(c, next, sp.kvh) : NULL;
#if PREFETCH_AHEAD
        if (!ahead) /* the last tile: on into the values pass's first rows */
            for (uint32_t r = 0; r < PF_ROWS && r < sp.cnt; r++)
                cq_kv_prefetch_row(c, c->vb, sp.kvh, sp.s0, r);
#endif
        if (c->type == CORTIQ_KV_Q8) /* the tile's other lanes are not copied out */
            for (uint32_t l = 0; l < n; l++)
                ks[lane + l] = c->ks[(size_t)(slot + l) * c->n_kv + sp.kvh];
        const uint8_t *tile = cq_kv_key_tile(c, slot, sp.kvh);
        for (uint32_t g0 = 0; g0 < group;) {
            const uint32_t gb = group - g0 < TILE_MAX_G ? group - g0 : TILE_MAX_G;
            const float *qg = q + (size_t)g0 * hd;
            for (int v = 0; v < NL; v++) {
                const uint8_t *fetch = g0 || v ? NULL : ahead; /* by the first call */
#define TILE_CASE(G)                                                                               \
    case G:                                                                                        \
        tile_dots(qg, tile, v, fetch, esz, ld, hd, G, TILE_NS(G), d);                              \
        break;
                switch (gb) {
                    TILE_CASE(1)
                    TILE_CASE(2)
                    TILE_CASE(3)
                    TILE_CASE(4)
                    TILE_CASE(5)
                    TILE_CASE(6)
                    TILE_CASE(7)
                default:
                    tile_dots(qg, tile, v, fetch, esz, ld, hd, 8, TILE_NS(8), d);
                }
#undef TILE_CASE
            }
            for (uint32_t g = 0; g < gb; g++) {
                for (int v = 0; v < NL; v++) { /* q8: scale after the dot */
                    vec x = V_MUL(V_LOADU(d + g * CQ_KV_TILE + (uint32_t)v * VW),
                                  V_MUL(V_LOADU(ks + v * VW), scale));
                    if (a->softcap > 0) x = V_MUL(V_TANH(V_DIV(x, cap)), cap);
                    V_STOREU(out + v * VW, x);
                }
                memcpy(sc + (size_t)(g0 + g) * a->chunk + j, out + lane, n * sizeof *out);
            }
            g0 += gb;
        }
        j += n, slot = next;
    }
}

/* acc of heads g0 .. g0 + G - 1, outputs i_begin .. i_end - 1 in slices of NV vectors (the
 * last one masked past hd, or whole slices only): sum over the chunk's keys of w[g][j] *
 * value j. The keys go by runs of evenly spaced rows, so the inner loop only steps a pointer. */
AI void values(const cq_attn_decode_args *a, span sp, uint32_t ch, const float *w, uint32_t g0,
               const int G, const int NV, uint32_t i_begin, uint32_t i_end, ld_fn ld,
               const uint32_t hd) {
    const cq_kv_layer *c = a->kv;
    size_t esz = cq_kv_elem_size(c->type), stride = cq_kv_stride(c);
    float *part[8];
    const float *wg[8];
    for (int g = 0; g < G; g++) {
        part[g] = cq_attn_decode_part_at(a, sp.kvh, ch, g0 + (uint32_t)g);
        wg[g] = w + (size_t)(g0 + (uint32_t)g) * a->chunk;
    }
    for (uint32_t i0 = i_begin; i0 < i_end; i0 += (uint32_t)NV * VW) {
        /* the first slice of the call fetches ahead (masked tails: always slice 0; the
         * constant gives GCC the AVX-512 code as measured) */
        const bool fetch = i0 == (MASKED_TAIL ? 0 : i_begin);
        lmask mk[4];
        for (int v = 0; v < NV; v++)
            mk[v] = lanes_upto(i0 + (uint32_t)v * VW, hd);
        vec acc[8][4];
        for (int g = 0; g < G; g++)
            for (int v = 0; v < NV; v++)
                acc[g][v] = V_ZERO();
        size_t off = i0 * esz;
        for (uint32_t j = 0, slot = sp.s0; j < sp.cnt;) {
            uint32_t n = run_len(c, slot, sp.cnt - j), jend = j + n;
            const uint8_t *row = cq_kv_row(c, c->vb, slot, sp.kvh) + off;
            for (; j < jend; j++, row += stride) {
                if (fetch && j + PF_ROWS < sp.cnt)
                    fetch_ahead(c, c->vb, sp, j, row - off, jend - j, stride);
                if (VALUES_W_FIRST(G, NV)) { /* G weights live, one value vector at a time */
                    vec wv[8];
                    for (int g = 0; g < G; g++)
                        wv[g] = V_BCAST(wg[g] + j);
                    for (int v = 0; v < NV; v++) {
                        vec x = LD(ld, row, (size_t)v * VW, mk[v]);
                        for (int g = 0; g < G; g++)
                            acc[g][v] = V_FMADD(wv[g], x, acc[g][v]);
                    }
                } else { /* NV value vectors live, one weight at a time */
                    vec x[4];
                    for (int v = 0; v < NV; v++)
                        x[v] = LD(ld, row, (size_t)v * VW, mk[v]);
                    for (int g = 0; g < G; g++) {
                        vec wv = V_BCAST(wg[g] + j);
                        for (int v = 0; v < NV; v++)
                            acc[g][v] = V_FMADD(wv, x[v], acc[g][v]);
                    }
                }
            }
            slot += n;
            if (slot == c->slots) slot = 0;
        }
        for (int g = 0; g < G; g++)
            for (int v = 0; v < NV; v++)
                V_STORE_LANES(part[g] + i0 + v * VW, mk[v], acc[g][v]);
    }
}

/* Heads g0 .. g0 + G - 1 over all hd outputs. */
AI void values_heads(const cq_attn_decode_args *a, span sp, uint32_t ch, const float *w,
                     uint32_t g0, const int G, const int NV, ld_fn ld, const uint32_t hd) {
#if MASKED_TAIL
    values(a, sp, ch, w, g0, G, NV, 0, hd, ld, hd);
#else /* whole slices of NV vectors, then single ones */
    uint32_t whole = hd / (NV * VW) * (NV * VW);
    values(a, sp, ch, w, g0, G, NV, 0, whole, ld, hd);
    if (whole < hd) values(a, sp, ch, w, g0, G, 1, whole, hd, ld, hd);
#endif
}

AI void unit_run(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *scratch, ld_fn ld,
                 const uint32_t HD) {
    const cq_kv_layer *c = a->kv;
    const uint32_t hd = HD ? HD : c->hd; /* a constant in the copies per head size */
    uint32_t group = cq_attn_decode_group(a, kvh);
    if (!group) return; /* every query head of this kv head is off (task mask) */
    uint32_t x0 = cq_attn_decode_first_key(a) + ch * a->chunk;
    uint32_t cnt = a->pos + 1 - x0 < a->chunk ? a->pos + 1 - x0 : a->chunk;
    span sp = {kvh, cnt, x0 % c->slots};
    float *sc = scratch, *vs = NULL;
    scores(a, sp, sc, ld, hd);
    if (c->type == CORTIQ_KV_Q8) { /* the value scales of the chunk, after the scores */
        vs = sc + (size_t)group * a->chunk;
        for (uint32_t j = 0, slot = sp.s0; j < cnt; j++, slot = slot + 1 == c->slots ? 0 : slot + 1)
            vs[j] = c->vs[(size_t)slot * c->n_kv + kvh];
    }
    for (uint32_t g = 0; g < group; g++)
        softmax(a, cnt, sc + (size_t)g * a->chunk, vs, cq_attn_decode_part_at(a, kvh, ch, g));
    /* batches of at most VALUES_MAX_G heads, as even as they split */
    for (uint32_t g0 = 0, left = (group + VALUES_MAX_G - 1) / VALUES_MAX_G; g0 < group; left--) {
        const uint32_t gb = (group - g0 + left - 1) / left;
        switch (gb) {
        case 1:
            values_heads(a, sp, ch, sc, g0, 1, VALUES_NV(1), ld, hd);
            break;
        case 2:
            values_heads(a, sp, ch, sc, g0, 2, VALUES_NV(2), ld, hd);
            break;
        case 3:
            values_heads(a, sp, ch, sc, g0, 3, VALUES_NV(3), ld, hd);
            break;
        case 4:
            values_heads(a, sp, ch, sc, g0, 4, VALUES_NV(4), ld, hd);
            break;
        case 5:
            values_heads(a, sp, ch, sc, g0, 5, VALUES_NV(5), ld, hd);
            break;
        case 6:
            values_heads(a, sp, ch, sc, g0, 6, VALUES_NV(6), ld, hd);
            break;
        case 7:
            values_heads(a, sp, ch, sc, g0, 7, VALUES_NV(7), ld, hd);
            break;
        default:
            values_heads(a, sp, ch, sc, g0, 8, VALUES_NV(8), ld, hd);
            break;
        }
        g0 += gb;
    }
}

/* One copy per cache type, so each ld_* inlines, and per common head size (+4 to +25 % per
 * layer at hd 64 and 256 with AVX-512, +5 to +7 % at hd 64 with AVX2). */
static void unit_f32(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_f32)
}
static void unit_f16(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_f16)
}
static void unit_q8(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_q8)
}

/* Needs hd % VW == 0; otherwise the generic tier with this ISA's ops runs. */
void TIER_FN(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *scratch) {
    if (a->kv->hd % VW) {
        cq_attn_decode_unit_generic(a, kvh, ch, scratch, TIER_OPS);
        return;
    }
    cortiq_kv_type t = a->kv->type;
    (t == CORTIQ_KV_F32 ? unit_f32 : t == CORTIQ_KV_F16 ? unit_f16 : unit_q8)(a, kvh, ch, scratch);
}
