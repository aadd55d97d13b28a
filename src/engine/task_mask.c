/* task_mask.c - build a session's task from a task mask (task_mask.h). */
#include "engine/task_mask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/moe.h"
#include "quant/qmat_gather.h"

/* Indices of the set (want = 1) or clear (want = 0) bits among the first n of bits. */
static uint32_t *bit_list(const uint8_t *bits, uint32_t n, int want, uint32_t *count) {
    uint32_t *v = malloc((n ? n : 1) * sizeof *v), k = 0;
    if (!v) return NULL;
    for (uint32_t i = 0; i < n; i++)
        if ((int)cmf_bit(bits, i) == want) v[k++] = i;
    *count = k;
    return v;
}

/* The neurons the gathered FFN computes: the active ones; with unit 32 every aligned group
 * holding one; with unit 1 padded with inactive neurons up to a multiple of 32 (where there
 * are enough). Writes them ascending to kept (ffn entries), marks in zero[] those inactive. */
static uint32_t kept_neurons(const uint8_t *row, uint32_t ffn, unsigned unit, uint32_t *kept,
                             uint8_t *pad) {
    uint32_t n = 0, active = cmf_popcount(row, ffn);
    uint32_t want = unit == 32 ? 0 : (active + 31) / 32 * 32;
    if (want > ffn) want = ffn;
    uint32_t extra = want > active ? want - active : 0;
    for (uint32_t g = 0; g < ffn; g += 32) {
        uint32_t end = g + 32 < ffn ? g + 32 : ffn;
        bool any = false;
        for (uint32_t i = g; i < end; i++)
            any |= cmf_bit(row, i);
        for (uint32_t i = g; i < end; i++) {
            bool on = cmf_bit(row, i);
            bool take = unit == 32 ? any : (on || (extra && (extra--, true)));
            if (!take) continue;
            pad[n] = !on;
            kept[n++] = i;
        }
    }
    return n;
}

static cmf_status build_ffn(const cortiq_model *m, uint32_t l, const uint8_t *row, bool no_gather,
                            cq_layer_task *lt, cortiq_task_stats *st, cmf_err *err) {
    const cq_layer *y = &m->layers[l];
    uint32_t ffn = y->ffn, active = cmf_popcount(row, ffn);
    st->ffn_neurons += ffn;
    st->ffn_active += active;
    lt->ffn_kept = ffn;
    if (active == ffn) {
        st->ffn_computed += ffn;
        return CMF_OK;
    }
    lt->ffn_masked = true;
    unsigned ug = cq_qmat_gather_unit(&y->wg), uu = cq_qmat_gather_unit(&y->wu);
    unsigned ud = cq_qmat_gather_unit(&y->wd);
    bool gather = !no_gather && active && ug && uu && ud;
    if (gather) {
        uint32_t *kept = malloc(ffn * sizeof *kept);
        uint8_t *pad = malloc(ffn);
        cmf_status s = kept && pad ? CMF_OK : cmf_err_set(err, CMF_E_NOMEM, "task", "layer %u", l);
        uint32_t n = s == CMF_OK ? kept_neurons(row, ffn, ud, kept, pad) : 0;
        if (s == CMF_OK) s = cq_qmat_gather_rows(&y->wg, kept, n, &lt->wg, "gate_proj", err);
        if (s == CMF_OK) s = cq_qmat_gather_rows(&y->wu, kept, n, &lt->wu, "up_proj", err);
        if (s == CMF_OK) s = cq_qmat_gather_cols(&y->wd, kept, n, &lt->wd, "down_proj", err);
        if (s == CMF_OK) {
            lt->ffn_zero = malloc((n ? n : 1) * sizeof *lt->ffn_zero);
            if (!lt->ffn_zero) s = cmf_err_set(err, CMF_E_NOMEM, "task", "layer %u", l);
            for (uint32_t i = 0; s == CMF_OK && i < n; i++)
                if (pad[i]) lt->ffn_zero[lt->n_ffn_zero++] = i;
        }
        free(kept), free(pad);
        if (s != CMF_OK) return s;
        lt->ffn_packed = true;
        lt->ffn_kept = n;
        st->ffn_computed += n;
        st->gathered_bytes += lt->wg.nbytes + lt->wu.nbytes + lt->wd.nbytes;
        return CMF_OK;
    }
    /* dense with the inactive activations zeroed */
    lt->ffn_zero = bit_list(row, ffn, 0, &lt->n_ffn_zero);
    if (!lt->ffn_zero) return cmf_err_set(err, CMF_E_NOMEM, "task", "layer %u", l);
    st->ffn_computed += ffn;
    if (active) st->dense_layers++;
    return CMF_OK;
}

/* The q side of packed heads: wq's rows (and bq's entries) of the active heads' dimensions
 * rows[0..n), and the packed heads of each kv head. */
static cmf_status build_q(const cortiq_model *m, const cq_layer *y, const uint32_t *rows, size_t n,
                          cq_layer_task *lt, cmf_err *err) {
    cmf_status s = cq_qmat_gather_rows(&y->wq, rows, n, &lt->wq, "q_proj", err);
    if (s != CMF_OK) return s;
    lt->kv_first = calloc(m->n_kv + 1, sizeof *lt->kv_first);
    if (y->bq) lt->bq = malloc(n * sizeof *lt->bq);
    if (!lt->kv_first || (y->bq && !lt->bq)) return cmf_err_set(err, CMF_E_NOMEM, "task", "heads");
    for (size_t i = 0; lt->bq && i < n; i++)
        lt->bq[i] = y->bq[rows[i]];
    uint32_t group = y->n_heads / m->n_kv;
    for (uint32_t j = 0; j < lt->n_heads_on; j++) /* counts, then running sums */
        lt->kv_first[lt->head_on[j] / group + 1]++;
    for (uint32_t k = 0; k < m->n_kv; k++)
        lt->kv_first[k + 1] += lt->kv_first[k];
    lt->q_packed = true;
    return CMF_OK;
}

static cmf_status build_heads(const cortiq_model *m, uint32_t l, const uint8_t *row, bool no_gather,
                              cq_layer_task *lt, cortiq_task_stats *st, cmf_err *err) {
    const cq_layer *y = &m->layers[l];
    uint32_t nh = y->n_heads, hd = m->head_dim;
    lt->head_on = bit_list(row, nh, 1, &lt->n_heads_on);
    lt->head_off = bit_list(row, nh, 0, &lt->n_heads_off);
    if (!lt->head_on || !lt->head_off) return cmf_err_set(err, CMF_E_NOMEM, "task", "heads");
    st->heads += nh;
    st->heads_active += lt->n_heads_on;
    if (lt->n_heads_on == nh) return CMF_OK;
    lt->heads_masked = true;
    unsigned u = cq_qmat_gather_unit(&y->wo);
    if (no_gather || !lt->n_heads_on || !u || hd % u) {
        if (lt->n_heads_on) st->dense_layers++;
        return CMF_OK;
    }
    size_t nc = (size_t)lt->n_heads_on * hd;
    uint32_t *cols = malloc(nc * sizeof *cols);
    if (!cols) return cmf_err_set(err, CMF_E_NOMEM, "task", "heads");
    for (uint32_t j = 0; j < lt->n_heads_on; j++)
        for (uint32_t d = 0; d < hd; d++)
            cols[(size_t)j * hd + d] = lt->head_on[j] * hd + d;
    cmf_status s = cq_qmat_gather_cols(&y->wo, cols, nc, &lt->wo, "o_proj", err);
    /* q rows per head as laid out here: a q_proj of another shape (a gated layer's [query;
     * gate] per head) keeps every head's q and packs the outputs only */
    if (s == CMF_OK && y->wq.rows == (uint64_t)nh * hd && cq_qmat_gather_unit(&y->wq))
        s = build_q(m, y, cols, nc, lt, err);
    free(cols);
    if (s != CMF_OK) return s;
    lt->wo_packed = true;
    st->gathered_bytes += lt->wo.nbytes + lt->wq.nbytes;
    return CMF_OK;
}

/* expert_allow rows: the mask's own bits, NULL for a row with every expert routable. */
static cmf_status build_experts(const cortiq_model *m, const cmf_masks *ms, const cmf_mask *k,
                                cq_task *t, cmf_err *err) {
    if (!k->has_expert_fields || !k->experts) return CMF_OK;
    t->expert_allow = calloc(m->n_layers, sizeof *t->expert_allow);
    if (!t->expert_allow) return cmf_err_set(err, CMF_E_NOMEM, "task", "expert rows");
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const uint8_t *row = k->experts + (size_t)l * ms->expert_bytes;
        if (cmf_popcount(row, ms->n_experts) < ms->n_experts) t->expert_allow[l] = row;
    }
    /* a MoE layer left with no routable expert has nothing to compute: refuse the mask */
    return cq_moe_check_allow(m, (const uint8_t *const *)t->expert_allow, err);
}

static cmf_status check_dims(const cortiq_model *m, const cmf_masks *ms, const cmf_mask *k,
                             cmf_err *err) {
    if (ms->n_layers != m->n_layers)
        return cmf_err_set(err, CMF_E_PARSE, "task",
                           "mask '%s' has %u layer rows, the model %u layers", k->name,
                           ms->n_layers, m->n_layers);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        if (!y->moe && y->ffn != ms->intermediate)
            return cmf_err_set(err, CMF_E_PARSE, "task",
                               "mask '%s': layer %u has %u FFN neurons, the mask rows %u "
                               "(a defragged file carries no masks, spec §11)",
                               k->name, l, y->ffn, ms->intermediate);
        if (y->n_heads != ms->n_heads)
            return cmf_err_set(err, CMF_E_PARSE, "task",
                               "mask '%s': layer %u has %u heads, the mask rows %u", k->name, l,
                               y->n_heads, ms->n_heads);
    }
    return CMF_OK;
}

cmf_status cq_task_build(const cortiq_model *m, const cmf_masks *ms, const cmf_mask *k,
                         bool no_gather, cq_task **out, cmf_err *err) {
    *out = NULL;
    cmf_status s = check_dims(m, ms, k, err);
    if (s != CMF_OK) return s;
    cq_task *t = calloc(1, sizeof *t);
    if (t) t->layers = calloc(m->n_layers, sizeof *t->layers);
    if (!t || !t->layers) {
        free(t);
        return cmf_err_set(err, CMF_E_NOMEM, "task", "mask '%s'", k->name);
    }
    t->masks = ms;
    t->mask = k;
    t->stats.layers = m->n_layers;
    for (uint32_t l = 0; s == CMF_OK && l < m->n_layers; l++) {
        cq_layer_task *lt = &t->layers[l];
        lt->off = !cmf_bit(k->gates, l);
        if (lt->off) continue;
        t->stats.layers_on++;
        if (!m->layers[l].moe)
            s = build_ffn(m, l, k->ffn + (size_t)l * ms->ffn_bytes, no_gather, lt, &t->stats, err);
        const uint8_t *heads = k->heads + (size_t)l * ms->head_bytes;
        if (s == CMF_OK && m->layers[l].gdn) { /* no attention heads to switch off */
            if (cmf_popcount(heads, m->layers[l].n_heads) < m->layers[l].n_heads)
                s = cmf_err_set(err, CMF_E_UNSUPPORTED, "task",
                                "mask '%s' switches heads of layer %u off, a linear-attention "
                                "layer: only full-attention heads can be masked",
                                k->name, l);
            continue;
        }
        if (s == CMF_OK) s = build_heads(m, l, heads, no_gather, lt, &t->stats, err);
    }
    if (s == CMF_OK) s = build_experts(m, ms, k, t, err);
    if (s != CMF_OK) {
        cq_task_free(t, m->n_layers);
        return s;
    }
    *out = t;
    return CMF_OK;
}

void cq_task_free(cq_task *t, uint32_t n_layers) {
    if (!t) return;
    for (uint32_t l = 0; t->layers && l < n_layers; l++) {
        cq_layer_task *lt = &t->layers[l];
        cq_qmat_gather_free(&lt->wg);
        cq_qmat_gather_free(&lt->wu);
        cq_qmat_gather_free(&lt->wd);
        cq_qmat_gather_free(&lt->wo);
        cq_qmat_gather_free(&lt->wq);
        free(lt->ffn_zero), free(lt->head_on), free(lt->head_off);
        free(lt->bq), free(lt->kv_first);
    }
    free(t->layers);
    free(t->expert_allow);
    free(t);
}
