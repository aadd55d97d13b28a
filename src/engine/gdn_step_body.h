/* gdn_step_body.h - the body of a gdn_step.h tier: define GDN_STEP_NAME, then include. Two
 * passes over S: decay it while gathering S^T k, then add k d^T while gathering S^T q. */
#include <string.h>

#include "engine/gdn_step.h"

void GDN_STEP_NAME(float *restrict S, const float *restrict q, const float *restrict k,
                   const float *restrict v, float decay, float beta, float *restrict o,
                   float *restrict mem, uint32_t dk, uint32_t dv) {
    memset(mem, 0, dv * sizeof(float));
    for (uint32_t i = 0; i < dk; i++) {
        float *restrict s = S + (size_t)i * dv;
        const float ki = k[i];
        for (uint32_t j = 0; j < dv; j++) {
            s[j] *= decay;
            mem[j] += s[j] * ki;
        }
    }
    for (uint32_t j = 0; j < dv; j++)
        mem[j] = (v[j] - mem[j]) * beta;
    memset(o, 0, dv * sizeof(float));
    for (uint32_t i = 0; i < dk; i++) {
        float *restrict s = S + (size_t)i * dv;
        const float ki = k[i], qi = q[i];
        for (uint32_t j = 0; j < dv; j++) {
            s[j] += ki * mem[j];
            o[j] += s[j] * qi;
        }
    }
}
