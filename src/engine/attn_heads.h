/* attn_heads.h - which query heads attend with kv head kvh (GQA), shared by the batched and
 * decode attention kernels. Dense: heads kvh * group .. (kvh + 1) * group - 1 of the query and
 * output rows, group = n_heads / n_kv. A task mask that turns heads off (task_mask.h) packs
 * the active heads' queries and outputs in ascending head order and passes kv_first
 * ([n_kv + 1] entries): kv head kvh then serves packed heads kv_first[kvh] ..
 * kv_first[kvh + 1] - 1 (possibly none), n_heads being the packed count. Internal to
 * src/engine. */
#ifndef CORTIQ_ENGINE_ATTN_HEADS_H
#define CORTIQ_ENGINE_ATTN_HEADS_H

#include <stddef.h>
#include <stdint.h>

/* The first query head (row) of kv head kvh. */
static inline uint32_t cq_attn_head0(const uint32_t *kv_first, uint32_t n_heads, uint32_t n_kv,
                                     uint32_t kvh) {
    return kv_first ? kv_first[kvh] : kvh * (n_heads / n_kv);
}

/* How many query heads kv head kvh serves. */
static inline uint32_t cq_attn_heads_of(const uint32_t *kv_first, uint32_t n_heads, uint32_t n_kv,
                                        uint32_t kvh) {
    return kv_first ? kv_first[kvh + 1] - kv_first[kvh] : n_heads / n_kv;
}

#endif
