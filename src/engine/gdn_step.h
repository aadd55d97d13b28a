/* gdn_step.h - one token of the gated delta rule for one value head (gdn.h), per SIMD tier:
 *   S <- decay * S;  d = beta * (v - S^T k);  S <- S + k d^T;  o = S^T q
 * with S [dk, dv] row-major. Each tier compiles the same C body (gdn_step_body.h) with its own
 * ISA flags, so the loops along S's rows vectorize to that tier's width (the SIMD tiers fuse
 * multiply-adds, so they match the scalar tier to float rounding, ~1e-6 relative). */
#ifndef CORTIQ_ENGINE_GDN_STEP_H
#define CORTIQ_ENGINE_GDN_STEP_H

#include <stdint.h>

/* mem: dv floats of scratch. */
typedef void (*cq_gdn_step_fn)(float *S, const float *q, const float *k, const float *v,
                               float decay, float beta, float *o, float *mem, uint32_t dk,
                               uint32_t dv);

/* The step of the tier in effect (src/common/cpu.h). */
cq_gdn_step_fn cq_gdn_step_get(void);

void cq_gdn_step_scalar(float *S, const float *q, const float *k, const float *v, float decay,
                        float beta, float *o, float *mem, uint32_t dk, uint32_t dv);
void cq_gdn_step_avx2(float *S, const float *q, const float *k, const float *v, float decay,
                      float beta, float *o, float *mem, uint32_t dk, uint32_t dv);
void cq_gdn_step_avx512(float *S, const float *q, const float *k, const float *v, float decay,
                        float beta, float *o, float *mem, uint32_t dk, uint32_t dv);

#endif
