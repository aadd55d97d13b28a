/* task_mask.h - a session's task (spec §5): what a task mask turns off, turned into what the
 * forward pass computes. Built once when the task is selected (cortiq_session_set_task):
 *   - a gated-off layer is skipped (the residual passes through);
 *   - FFN: the gate/up rows of the kept neurons and the down columns of the same neurons are
 *     gathered into smaller matrices of the same dtype (quant/qmat_gather.h), so the products
 *     read and compute only those; kept = the active neurons, widened to whole 32-column
 *     groups where the down projection's dtype stores 32-column groups (q4 family) and padded
 *     to a multiple of 32 otherwise (the SIMD paths want whole groups). The neurons kept only
 *     for that are zeroed after act(gate) * up;
 *   - heads: the q projection's rows of the active heads (and their q bias) are gathered, so
 *     q holds the active heads only, packed; the attention runs over those heads alone (each
 *     mapped to its kv head, attn_heads.h) and its packed output is multiplied by the output
 *     projection's columns of the same heads. k and v of every kv head are still computed and
 *     cached (a kv head all of whose query heads are off is not attended). Where only the
 *     output projection gathers (or q_proj is not [heads * head_dim] rows), every head's q
 *     and attention are computed and the active heads' outputs packed;
 *   - a layer whose matrices have no exact gather (vbit, q8_2f, q1s, q1t; q4 with widths not a
 *     multiple of 32) is computed densely with the inactive activations zeroed: the same
 *     numbers, no saving (counted in cortiq_task_stats.dense_layers);
 *   - expert area: expert_allow rows for the MoE routing (NULL for an all-ones row).
 * Numerics: the masked output equals the dense output with the inactive neurons' activations
 * and the inactive heads' outputs zeroed and the gated-off layers skipped, up to float
 * summation order. Internal to src/engine. */
#ifndef CORTIQ_ENGINE_TASK_MASK_H
#define CORTIQ_ENGINE_TASK_MASK_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/model.h"

typedef struct cq_layer_task {
    bool off; /* gated off */
    /* FFN (dense layers only; a MoE layer's FFN bits are not used) */
    bool ffn_masked;     /* some neuron inactive */
    bool ffn_packed;     /* wg, wu, wd below replace the layer's */
    cmf_qmat wg, wu, wd; /* gathered: [kept, hidden], [kept, hidden], [hidden, kept] */
    uint32_t *ffn_zero;  /* positions to zero in g after the glu: packed: in the kept */
    uint32_t n_ffn_zero; /* list; dense: the inactive neurons */
    uint32_t ffn_kept;   /* neurons computed (packed width, or ffn when dense) */
    /* heads */
    bool heads_masked;
    bool wo_packed;     /* wo below replaces the layer's; att is packed to the active heads */
    cmf_qmat wo;        /* gathered [hidden, n_active * head_dim] */
    bool q_packed;      /* (with wo_packed) wq, bq below replace the layer's; q, att packed */
    cmf_qmat wq;        /* gathered [n_active * head_dim, hidden] */
    float *bq;          /* gathered q bias, NULL when the layer has none */
    uint32_t *kv_first; /* q_packed: [n_kv + 1] packed heads per kv head (attn_heads.h) */
    uint32_t *head_on;  /* active heads, ascending */
    uint32_t n_heads_on;
    uint32_t *head_off; /* inactive heads (dense fallback zeroes them) */
    uint32_t n_heads_off;
} cq_layer_task;

typedef struct cq_task {
    const cmf_masks *masks;
    const cmf_mask *mask;
    cq_layer_task *layers;        /* [n_layers] */
    const uint8_t **expert_allow; /* [n_layers] or NULL (no expert area) */
    cortiq_task_stats stats;
} cq_task;

/* Build the task of mask `mask` for model m. no_gather (tests) computes every layer densely
 * with the activations zeroed. Fails CMF_E_PARSE (a mask whose dimensions disagree with the
 * model), CMF_E_NOMEM. */
cmf_status cq_task_build(const cortiq_model *m, const cmf_masks *masks, const cmf_mask *mask,
                         bool no_gather, cq_task **out, cmf_err *err);
void cq_task_free(cq_task *t, uint32_t n_layers); /* NULL allowed */

#endif
