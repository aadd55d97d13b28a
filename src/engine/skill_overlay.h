/* skill_overlay.h - tensor-source indirection for a skill overlay (spec §9): the loader asks
 * for a backbone name and gets skill.ID.<name> when the active skill replaces it, or, for a
 * soft blend, an f32 working tensor sum_i w_i T_i owned by the model. Internal to src/engine. */
#ifndef CORTIQ_ENGINE_SKILL_OVERLAY_H
#define CORTIQ_ENGINE_SKILL_OVERLAY_H

#include "engine/model.h"

/* Check opts' skill / blend against the file's registry (unknown id: CMF_E_NOT_FOUND listing
 * the ids; blend weights must be finite, >= 0 and not all 0) and record it in m. */
cmf_status cq_overlay_init(cortiq_model *m, const cortiq_load_opts *o, const char *path,
                           cmf_err *err);
/* The tensor the model reads for backbone name `name`, NULL when absent. A blended tensor that
 * cannot be built (memory, a skill tensor of another shape) also gives NULL, with its status in
 * *st (CMF_OK otherwise) and the message in *err. */
const cmf_tensor *cq_overlay_find(cortiq_model *m, const char *name, cmf_status *st, cmf_err *err);
void cq_overlay_free(cortiq_model *m);

#endif
