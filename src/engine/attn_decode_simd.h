/* attn_decode_simd.h - the body of the SIMD decode attention tiers (attn_decode.h), one source
 * for attn_decode_avx2.c and attn_decode_avx512.c. Scores: blocks of VW keys are widened once
 * to f32 (f16 / q8; f32 rows are copied, so that one pointer walks the block), then for each
 * head of the group VW accumulators (one per key) run over hd and one transpose-add turns them
 * into a vector of VW dots. Softmax over the chunk with the vectorized exp. Values: outputs in
 * slices of NV vectors, one accumulator per (head, vector), each value row widened once and
 * used by every head. Both passes walk the keys in runs of evenly spaced cache rows.
 *
 * The including file, built for its ISA, defines before including this:
 *   VW, PF_ROWS, AI             lanes per vector (keys per score block), cache rows fetched
 *                               ahead (cq_kv_prefetch_row), the always-inline marker
 *   vec, lmask                  the float vector and the lane-mask types
 *   V_ZERO V_SET1 V_BCAST V_LOADU V_STOREU V_MUL V_DIV V_FMADD V_TANH, and V_LOADU_MASKED
 *                               (masked tails only)
 *   LD(ld, p, i, mk)            VW cache values of row p at element i (mk: the lanes to read
 *                               where the ISA masks; the whole vector otherwise)
 *   ALL_LANES, lanes_upto(i, hd) every lane; the lanes of the vector at element i of a row of
 *                               hd (ALL_LANES or none; unmasked: anything, ignored)
 *   V_STORE_FIRST(p, n, v)      store the first n lanes of v (or all: a head's scores have
 *                               room for whole vectors up to the chunk, a multiple of 16)
 *   V_STORE_LANES(p, mk, v)     store the lanes of mk (masked tails) or all (unmasked)
 *   transpose_add(v)            lane k = the sum of the lanes of v[k] (v may be clobbered)
 *   softmax(a, cnt, s, vs, part) the chunk's softmax of one head (see attn_decode_avx512.c)
 *   VALUES_MAX_G                heads per values pass (<= 8): a group splits into passes
 *                               of at most this many heads, as even as they split
 *   VALUES_NV(G)                vectors per value slice for G heads (G * NV <= 16)
 *   VALUES_W_FIRST(G, NV)       1: per key, the G weights are broadcast first and each value
 *                               vector is loaded as it is used (G + G * NV + 1 registers);
 *                               0: the NV value vectors first, each weight as it is used
 *   MASKED_TAIL                 1: the hd loops step 4 vectors with masked loads past hd, and
 *                               the value slices run over hd masked; 0: whole steps of 32
 *                               floats then single vectors, whole slices then single vectors
 *   PREFETCH_AHEAD              1: also fetch the unit's first key rows up front and, past the
 *                               last key, the values pass's first rows
 *   OPAQUE_KBUF, UNROLL         1: hide the key block's address from each head (an empty asm);
 *                               the pragma that unrolls the VW accumulators (or nothing)
 *   TIER_FN, TIER_OPS           the entry point's name and the ops of the generic fallback
 * The tiers' outputs are unchanged by the sharing: each runs the operations it ran before. */

/* The unit's keys: positions x0 .. x0 + cnt - 1 of kv head kvh, starting at ring slot s0. */
typedef struct span {
    uint32_t kvh, cnt, s0;
} span;

/* Keys from the slot `slot` on that lie evenly spaced in the cache: up to the end of its block
 * of CQ_KV_BLOCK slots, the ring's end, or `left` keys. */
AI uint32_t run_len(const cq_kv_layer *c, uint32_t slot, uint32_t left) {
    uint32_t n = CQ_KV_BLOCK - (slot & (CQ_KV_BLOCK - 1));
    if (n > c->slots - slot) n = c->slots - slot;
    return n < left ? n : left;
}

/* Fetch row j + PF_ROWS of the span ahead (blk: c->kb or c->vb): row j starts at p and `left`
 * rows of its run remain from it, so the row ahead is p + PF_ROWS strides when it lies in the
 * run, else it is looked up. */
AI void fetch_ahead(const cq_kv_layer *c, uint8_t *const *blk, span sp, uint32_t j,
                    const uint8_t *p, uint32_t left, size_t stride) {
    if (left > PF_ROWS)
        cq_kv_prefetch_at(c, p + PF_ROWS * stride);
    else
        cq_kv_prefetch_row(c, blk, sp.kvh, sp.s0, j + PF_ROWS);
}

/* Final scores of the chunk, sc[g * chunk + j] for head g of the group and key j. Each block
 * of VW keys is widened into kbuf[VW][hd]; per head, 4 vectors of query values stay in
 * registers while the VW accumulators run down the block's rows. */
AI void scores(const cq_attn_decode_args *a, span sp, float *sc, float *kbuf, ld_fn ld,
               const uint32_t hd) {
    const cq_kv_layer *c = a->kv;
    uint32_t group = cq_attn_decode_group(a, sp.kvh), h0 = cq_attn_decode_head0(a, sp.kvh);
    uint32_t slot = sp.s0;
#if !MASKED_TAIL
    uint32_t hd32 = hd / 32 * 32;
#endif
    const vec scale = V_SET1(a->scale), cap = V_SET1(a->softcap);
#if PREFETCH_AHEAD
    /* the unit's first rows (the loop below fetches PF_ROWS ahead from there on) */
    for (uint32_t j = 0; j < PF_ROWS && j < sp.cnt; j++)
        cq_kv_prefetch_row(c, c->kb, sp.kvh, sp.s0, j);
#endif
    size_t stride = cq_kv_stride(c);
    const uint8_t *row = NULL;
    uint32_t run = 0; /* rows left in the current evenly spaced run (run_len) */
    for (uint32_t j0 = 0; j0 < sp.cnt; j0 += VW) {
        uint32_t kc = sp.cnt - j0 < VW ? sp.cnt - j0 : VW;
        float ks[VW];
        for (uint32_t k = 0; k < VW; k++) {
            float *dst = kbuf + (size_t)k * hd;
            if (k >= kc) { /* past the chunk: zeros; the store or the softmax drops them */
                for (uint32_t i = 0; i < hd; i += VW)
                    V_STOREU(dst + i, V_ZERO());
                ks[k] = 1.0f;
                continue;
            }
            ks[k] = c->type == CORTIQ_KV_Q8 ? c->ks[(size_t)slot * c->n_kv + sp.kvh] : 1.0f;
            if (!run) {
                run = run_len(c, slot, sp.cnt - j0 - k);
                row = cq_kv_row(c, c->kb, slot, sp.kvh);
            }
            if (j0 + k + PF_ROWS < sp.cnt) fetch_ahead(c, c->kb, sp, j0 + k, row, run, stride);
#if PREFETCH_AHEAD
            else if (j0 + k + PF_ROWS - sp.cnt < sp.cnt) /* one stream: on into the values */
                cq_kv_prefetch_row(c, c->vb, sp.kvh, sp.s0, j0 + k + PF_ROWS - sp.cnt);
#endif
            for (uint32_t i = 0; i < hd; i += VW)
                V_STOREU(dst + i, LD(ld, row, i, ALL_LANES));
            row += stride, run--;
            if (++slot == c->slots) slot = 0;
        }
        vec kscale = V_MUL(V_LOADU(ks), scale); /* q8: scale after the dot */
        for (uint32_t g = 0; g < group; g++) {
            const float *q = a->q + (size_t)(h0 + g) * hd;
            const float *kb = kbuf;
#if OPAQUE_KBUF
            /* an empty asm makes the block's address opaque to each head: otherwise GCC hoists
             * the 64 row addresses out of this loop, spills them and reloads one per FMA at
             * hd 64; with it, +7 to +12 % per layer there (AVX-512) */
            __asm__("" : "+r"(kb));
#endif
            /* unrolled (UNROLL) so that the accumulators stay in registers: as a loop GCC kept
             * the 16 of AVX-512 in a stack array (every FMA through memory); +4 to +14 % */
            vec acc[VW];
            UNROLL
            for (int k = 0; k < VW; k++)
                acc[k] = V_ZERO();
#if MASKED_TAIL
            for (uint32_t i0 = 0; i0 < hd; i0 += 4 * VW) {
                lmask m1 = lanes_upto(i0 + VW, hd), m2 = lanes_upto(i0 + 2 * VW, hd),
                      m3 = lanes_upto(i0 + 3 * VW, hd);
                vec q0 = V_LOADU(q + i0), q1 = V_LOADU_MASKED(m1, q + i0 + VW),
                    q2 = V_LOADU_MASKED(m2, q + i0 + 2 * VW),
                    q3 = V_LOADU_MASKED(m3, q + i0 + 3 * VW);
                const float *kr = kb + i0;
                UNROLL
                for (int k = 0; k < VW; k++, kr += hd) {
                    vec t = V_FMADD(q0, V_LOADU(kr), acc[k]);
                    t = V_FMADD(q1, V_LOADU_MASKED(m1, kr + VW), t);
                    t = V_FMADD(q2, V_LOADU_MASKED(m2, kr + 2 * VW), t);
                    acc[k] = V_FMADD(q3, V_LOADU_MASKED(m3, kr + 3 * VW), t);
                }
            }
#else
            uint32_t i0 = 0;
            for (; i0 < hd32; i0 += 4 * VW) {
                vec q0 = V_LOADU(q + i0), q1 = V_LOADU(q + i0 + VW), q2 = V_LOADU(q + i0 + 2 * VW),
                    q3 = V_LOADU(q + i0 + 3 * VW);
                const float *kr = kb + i0;
                for (int k = 0; k < VW; k++, kr += hd) {
                    vec t = V_FMADD(q0, V_LOADU(kr), acc[k]);
                    t = V_FMADD(q1, V_LOADU(kr + VW), t);
                    t = V_FMADD(q2, V_LOADU(kr + 2 * VW), t);
                    acc[k] = V_FMADD(q3, V_LOADU(kr + 3 * VW), t);
                }
            }
            for (; i0 < hd; i0 += VW) {
                vec q0 = V_LOADU(q + i0);
                const float *kr = kb + i0;
                for (int k = 0; k < VW; k++, kr += hd)
                    acc[k] = V_FMADD(q0, V_LOADU(kr), acc[k]);
            }
#endif
            vec s = V_MUL(transpose_add(acc), kscale);
            if (a->softcap > 0) s = V_MUL(V_TANH(V_DIV(s, cap)), cap);
            V_STORE_FIRST(sc + (size_t)g * a->chunk + j0, kc, s);
        }
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
    float *sc = scratch, *kbuf = sc + (size_t)group * a->chunk, *vs = NULL;
    scores(a, sp, sc, kbuf, ld, hd);
    if (c->type == CORTIQ_KV_Q8) { /* the value scales of the chunk, after 16 key rows */
        vs = kbuf + (size_t)16 * hd;
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
