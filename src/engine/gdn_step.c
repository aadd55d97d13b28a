/* gdn_step.c - the scalar tier of the delta-rule step and the tier choice (gdn_step.h). */
#define GDN_STEP_NAME cq_gdn_step_scalar
#include "engine/gdn_step_body.h"

#include "common/cpu.h"

static const cq_gdn_step_fn k_tiers[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = cq_gdn_step_scalar,
    [CQ_ISA_AVX2] = cq_gdn_step_avx2,
    [CQ_ISA_AVX512] = cq_gdn_step_avx512,
};

cq_gdn_step_fn cq_gdn_step_get(void) {
    return CQ_ISA_SELECT(k_tiers);
}
