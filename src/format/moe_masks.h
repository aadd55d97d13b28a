/* moe_masks.h - carry a file's task masks into a masks builder (moe_mask.c, moe_defrag.c).
 * Internal to src/format. */
#ifndef CORTIQ_FORMAT_MOE_MASKS_H
#define CORTIQ_FORMAT_MOE_MASKS_H

#include "cortiq/moe.h"
#include "cortiq/writer.h"

/* A builder with f's arch dimensions (expert area of arch.moe.num_experts) holding f's masks
 * and default task. renumber non-NULL: each expert area is renumbered to renumber's kept
 * experts (moe-defrag), and a mask that would leave a MoE layer no expert is left out and
 * counted in *dropped. */
cmf_status cq_moe_masks_carry(const cmf_file *f, const cmf_moe_keep *renumber,
                              cmf_masks_builder **out, uint32_t *kept, uint32_t *dropped,
                              cmf_err *err);

#endif
