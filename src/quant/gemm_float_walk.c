/* gemm_float_walk.c - the walk both float panel GEMMs share (gemm_f32_avx2.c,
 * gemm_f32_avx512.c; docs/KERNELS.md, "Float prefill panels"): row tiles of panels, column
 * blocks outside a tile's panels, the token groups inside a panel, the blocks' sums meeting in
 * the tile's buffer and reaching Y once per tile, a run per token. The tier's code packs, runs
 * the micro-kernel and stores through cq_float_walk; this file holds no vector code. */
#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"

/* Panels per row tile: the tile's sums (panels x tokens x pr floats) stay within this. */
#define TILE_ACC_BYTES (128 * 1024)
#define TILE_MAX       16

bool cq_float_walk_run(const cq_float_walk *w, float *Y, size_t ldy, uint64_t r0, uint64_t r1) {
    const cmf_qmat *m = w->m;
    const cq_float_tier *k = w->tier;
    const size_t tg = k->tg, kb = k->kb, groups = (w->n + tg - 1) / tg,
                 es = m->dtype == CMF_DT_F32 ? 4 : 2;
    const unsigned pr = k->pr;
    const size_t panel_acc = groups * tg * pr; /* floats of one panel's sums */
    size_t tile = TILE_ACC_BYTES / (panel_acc * sizeof(float));
    tile = tile < 1 ? 1 : tile > TILE_MAX ? TILE_MAX : tile;
    const size_t panel_bytes = kb * pr * sizeof(float);
    uint8_t *mem =
        cq_kernel_scratch(CQ_SCRATCH_AUX, panel_bytes + tile * panel_acc * sizeof(float));
    if (!mem) return false;
    float *panel = (float *)(void *)mem, *acc = (float *)(void *)(mem + panel_bytes);
    /* Row tiles of up to `tile` panels, column blocks outside the tile's panels: a block's
     * activations (the batch's tokens x kb columns) stay in L2 while every panel of the tile
     * passes over them, where a panel walking all its blocks alone pulled the whole batch's
     * activations through L2 once per panel. */
    for (uint64_t rt = r0; rt < r1; rt += tile * pr) {
        const uint64_t rt1 = r1 - rt < tile * pr ? r1 : rt + tile * pr;
        for (size_t k0 = 0; k0 < w->kp; k0 += kb) {
            const size_t kw = w->kp - k0 < kb ? w->kp - k0 : kb;
            for (uint64_t r = rt; r < rt1; r += pr) {
                const unsigned nr = rt1 - r < pr ? (unsigned)(rt1 - r) : pr;
                cq_next_block nb =
                    cq_next_block_at(m->data, m->cols, es, r, rt, rt1, r1, k0, w->kp, pr, kb);
                const size_t per_group = (nb.left + groups - 1) / groups;
                float *pacc = acc + (r - rt) / pr * panel_acc;
                k->pack(m, r, nr, k0, kw, panel);
                for (size_t g = 0; g < groups; g++) {
                    size_t t0, cnt;
                    k->span(w->n, g, &t0, &cnt);
                    k->tokens[cnt](panel, w->xg + g * w->gs + k0 * tg, kw, pacc + g * tg * pr,
                                   k0 > 0, &nb, per_group);
                }
            }
        }
        for (size_t g = 0; g < groups; g++) {
            size_t t0, cnt;
            k->span(w->n, g, &t0, &cnt);
            for (size_t t = 0; t < cnt; t++) /* a token's row of Y across the tile in one run */
                k->store(acc + (g * tg + t) * pr, panel_acc, Y + (t0 + t) * ldy + (rt - r0),
                         rt1 - rt);
        }
    }
    return true;
}
