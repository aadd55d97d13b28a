/* cortiq/skill.h - skills over one backbone (spec §9, §9.1): the registry's selection
 * subspace, recon-argmin routing and the skill tools' building blocks.
 *
 * Selection block (header "skills"[i].selection), as the reference implementation writes it:
 *   {"metric": "mse" | "mse_unit", "phi_layer": L, "rank": K,
 *    "mean": base64(f16 LE [hidden]), "basis": base64(f16 LE [K][hidden], row-major)}
 * The basis rows are orthonormal principal directions of the calibration prompts' phi.
 * phi(prompt) = the mean over the prompt's positions of the residual stream after layer L
 * (0-based, before the final norm), computed with the BACKBONE weights; "mse_unit" first scales
 * phi to unit length. r = phi - mean; E = |r - B^T B r|^2 / |phi|^2; the skill of least E wins.
 */
#ifndef CORTIQ_SKILL_H
#define CORTIQ_SKILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/engine.h"
#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmf_skill_selection {
    int unit;           /* metric "mse_unit": phi scaled to unit length first */
    uint32_t phi_layer; /* 0-based layer whose output is phi */
    uint32_t rank;      /* basis rows */
    uint64_t hidden;
    float *mean;  /* [hidden] */
    float *basis; /* [rank][hidden] */
} cmf_skill_selection;

/* Decode a selection block (raw JSON text, cmf_skill.selection_json) for a model of `hidden`
 * dimensions. CMF_E_PARSE names the field when the metric is unknown, a payload is not base64
 * or its length is not hidden (mean) or rank x hidden (basis) f16 values. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_skill_selection_decode(const char *json, uint64_t hidden,
                                                                  const char *ctx,
                                                                  cmf_skill_selection *out,
                                                                  cmf_err *err);
CORTIQ_API void cmf_skill_selection_free(cmf_skill_selection *s); /* the arrays; NULL allowed */
/* The JSON text of a selection block (malloc'd; NULL when out of memory). */
CORTIQ_API char *cmf_skill_selection_encode(const cmf_skill_selection *s);
/* Raw |r - B^T B r|^2 and |phi|^2 for one phi of s->hidden values (after "mse_unit" scaling). */
CORTIQ_API void cmf_skill_selection_error(const cmf_skill_selection *s, const float *phi,
                                          double *raw, double *phi_sq);

/* Base64 (RFC 4648, standard alphabet, padded). decode: *out malloc'd; false on bad input. */
CORTIQ_API char *cmf_base64_encode(const void *data, size_t len);
CORTIQ_API bool cmf_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len);

/* ---- routing (engine) ---- */
typedef struct cortiq_skill_score {
    const char *id; /* the registry's string (lives as long as the model's file) */
    double error;   /* E = |r - B^T B r|^2 / |phi|^2 */
    double raw;     /* |r - B^T B r|^2 */
} cortiq_skill_score;

/* Mean residual stream after `layer` (0-based) over the n tokens, run from position 0 in a
 * scratch session of n positions: out[hidden]. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_model_probe_phi(cortiq_model *m, const int32_t *ids,
                                                              size_t n, uint32_t layer, float *out,
                                                              cmf_err *err);
/* Score every skill of the model's file that carries a selection block, best (least E) first,
 * into scores[cap]; *n_scores = how many. m should be loaded without an overlay (phi is defined
 * on the backbone). CMF_E_NOT_FOUND when no skill is routable; CMF_E_PARSE for a bad block. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_skill_route(cortiq_model *m, const int32_t *ids,
                                                          size_t n, cortiq_skill_score *scores,
                                                          size_t cap, size_t *n_scores,
                                                          cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
