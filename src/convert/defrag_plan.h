/* defrag_plan.h - what a physical defrag (spec §11) keeps of each layer: the live FFN neurons
 * and the attention heads, and the header changes that record it. Shared by `cortiq defrag`
 * (a task mask of a CMF file) and `convert --defrag` (a keep-set from a skill directory). */
#ifndef CORTIQ_CONVERT_DEFRAG_PLAN_H
#define CORTIQ_CONVERT_DEFRAG_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cortiq/status.h"

typedef struct cq_defrag_layer {
    bool dense;      /* has mlp.{gate,up,down}_proj (not a MoE or FFN-less layer) */
    uint32_t ffn;    /* source FFN width */
    uint32_t *keep;  /* live neurons, ascending; NULL = all kept */
    uint32_t n_keep; /* == ffn when keep is NULL */
    /* attention heads: q_proj rows and o_proj columns to keep (o columns may carry
     * CQ_GATHER_ZERO: a dead head kept only to give every kv group the same head count) */
    uint32_t heads, heads_out;
    uint32_t *q_rows, *o_cols; /* NULL = unchanged */
    uint32_t *head_list;       /* heads_out source head indices (for per-head tensors) */
    uint32_t n_dead_padded;    /* dead heads kept with zeroed output columns */
} cq_defrag_layer;

typedef struct cq_defrag_plan {
    uint32_t n_layers, head_dim, n_kv;
    uint32_t pre_intermediate; /* arch.intermediate_size of the source */
    cq_defrag_layer *layers;
} cq_defrag_plan;

/* Layer l keeps the neurons whose flag is set (flags[ffn], any nonzero = live). A layer that
 * keeps none is refused (a tensor cannot have a zero dimension, spec §3). ctx names the input. */
cmf_status cq_defrag_set_ffn(cq_defrag_plan *p, uint32_t l, const uint8_t *flags, const char *ctx,
                             cmf_err *err);

/* Layer l keeps the query heads whose flag is set. GQA (spec §2): query head h reads kv head
 * h / (heads / n_kv), so every kv group must keep the same number of query heads c (>= 1): the
 * largest live count of any group; a group with fewer live heads keeps some dead ones with
 * their o_proj columns zeroed (they contribute exactly 0, as under the mask). */
cmf_status cq_defrag_set_heads(cq_defrag_plan *p, uint32_t l, const uint8_t *flags, const char *ctx,
                               cmf_err *err);

/* The header after the defrag: arch.intermediate_size = the largest kept width (spec §11:
 * nominal), attention_heads_per_layer when heads changed, head_dim made explicit, and
 * provenance.defrag {source_skill, pre_intermediate, post_intermediate_max, kept_per_layer,
 * pruned_ratio} (+ heads_per_layer). section_hashes is removed (the writer fills it). */
cmf_status cq_defrag_header(const cq_defrag_plan *p, json_t *header, const char *source,
                            const char *ctx, cmf_err *err);

/* Whether layer l's tensors change. */
bool cq_defrag_layer_changed(const cq_defrag_layer *y);

void cq_defrag_plan_free(cq_defrag_plan *p);

#endif
