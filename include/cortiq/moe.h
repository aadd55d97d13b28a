/* cortiq/moe.h - mixture-of-experts files beyond execution (docs/MOE.md):
 *  - route statistics, the CMF_MOE_STATS format of spec §11.1: one JSON object, a key per MoE
 *    layer (its index as a decimal string) whose value lists one selection count per expert
 *    present: {"0":[12,0,7,3],"1":[5,9,0,8]};
 *  - the expert set a stats file selects at a cover: per MoE layer, the smallest set of experts
 *    whose counts reach `cover` of the layer's total, taken in decreasing count order (ties to
 *    the lower index);
 *  - `moe-mask`: that set appended to the file as a task mask with an expert area (spec §5,
 *    append-only growth §9), and `moe-defrag`: a new file holding only that set (spec §11.1).
 */
#ifndef CORTIQ_MOE_H
#define CORTIQ_MOE_H

#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/format.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write a stats file atomically (temp file beside it, fsync, rename): layer l is written when
 * counts[l] is non-NULL, with n_experts[l] counts. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_moe_stats_write(const char *path, uint32_t n_layers,
                                                           const uint64_t *const *counts,
                                                           const uint32_t *n_experts, cmf_err *err);

/* The experts a stats file keeps in a model file. */
typedef struct cmf_moe_keep {
    uint32_t n_layers;     /* arch.num_layers */
    uint32_t num_experts;  /* arch.moe.num_experts (nominal in a defragged file) */
    uint32_t expert_bytes; /* ceil(num_experts / 8) */
    uint32_t *present;     /* [n_layers] experts present (router rows); 0 on a dense layer */
    uint32_t *kept;        /* [n_layers] experts kept; 0 on a dense layer */
    /* [n_layers][expert_bytes] LSB-first: the kept experts of a MoE layer; a dense layer's row
     * has every bit below num_experts set (it restricts nothing) */
    uint8_t *bits;
    uint64_t **counts;   /* [n_layers] the stats' counts (present[l] of them), NULL when dense */
    double cover;        /* the cover the set was chosen at */
    uint64_t stats_hash; /* hash64 of the stats file's bytes */
} cmf_moe_keep;

/* Read the stats file at stats_path, check it against f (a key for every MoE layer of f and
 * no other, each with one count per expert present) and choose each layer's set at cover.
 * Fails CMF_E_INVALID_ARG for cover outside (0, 1]; CMF_E_PARSE (naming the stats file, the
 * layer and the rule) for stats that are not CMF_MOE_STATS, stats of another model (a layer
 * missing, dense, out of range, or with another expert count), or a layer whose counts are all
 * zero (it would keep no expert); CMF_E_UNSUPPORTED when f has no MoE layer; CMF_E_IO. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_moe_keep_from_stats(const cmf_file *f,
                                                               const char *stats_path, double cover,
                                                               cmf_moe_keep *out, cmf_err *err);
CORTIQ_API void cmf_moe_keep_free(cmf_moe_keep *k); /* NULL allowed; zeroes *k */

/* Add task mask `name` to the model file at in_path: the expert area holds k's sets, every
 * FFN, head and layer-gate bit set, quality null (not measured). Existing masks are kept
 * (re-serialized: task ids by position). With out_path NULL the file grows in place
 * (append-only, spec §9); else in_path is copied to out_path first (atomically) and that copy
 * grows. Fails CMF_E_INVALID_ARG when the file has a mask of that name already. On failure
 * no file is changed or created. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_moe_mask_add(const char *in_path, const char *out_path,
                                                        const cmf_moe_keep *k, const char *name,
                                                        cmf_err *err);

typedef struct cmf_moe_defrag_stats {
    uint64_t in_bytes, out_bytes;
    uint32_t experts_in, experts_out;   /* over all MoE layers */
    uint32_t masks_kept, masks_dropped; /* masks whose expert area kept no expert of a layer */
} cmf_moe_defrag_stats;

/* Write out_path: in_path with only k's experts (spec §11.1). Per MoE layer the kept experts
 * are renumbered 0 .. kept-1 in their order, their tensors copied byte for byte, laid out
 * role-contiguously (every gate_proj, then every up_proj, then every down_proj); the router's
 * rows and expert_bias's entries are gathered to match (f32, f16 or bf16 routers; a quantized
 * router is CMF_E_UNSUPPORTED). arch.moe.num_experts stays (nominal); the header's
 * provenance.moe_defrag records the cut. Task masks keep their FFN/head/gate bits; an expert
 * area is renumbered with the experts, and a mask that would leave a layer no expert is
 * dropped (counted in *stats). Atomic: nothing is left under out_path on failure. stats may
 * be NULL. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_moe_defrag(const char *in_path, const char *out_path,
                                                      const cmf_moe_keep *k,
                                                      cmf_moe_defrag_stats *stats, cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
