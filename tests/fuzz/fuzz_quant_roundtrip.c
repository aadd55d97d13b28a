/* fuzz_quant_roundtrip.c - quant encoders on arbitrary finite weights.
 * Input: [dtype id][rows selector][cols selector][outlier budget][f32 weights...].
 * Whatever the weights (subnormal, huge, constant), an accepted encode must be deterministic,
 * validate, dequantize, and decode to finite values for every dtype whose scales are capped to
 * the f16 range (all but f16/bf16 and the q8 layouts, whose int8 x f16 x f16 products may round
 * past FLT_MAX only for inputs beyond it anyway). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    cmf_dtype dt = (cmf_dtype)(data[0] % CMF_DT_COUNT);
    uint64_t shape[2] = {1 + data[1] % 4, 32u * (1 + data[2] % 3)};
    uint64_t n = shape[0] * shape[1];
    float *w = calloc(n, sizeof *w), *d = calloc(n, sizeof *d);
    if (!w || !d) goto out;
    for (uint64_t i = 0; i < n && 4 + 4 * i + 4 <= size; i++) {
        memcpy(&w[i], data + 4 + 4 * i, 4);
        if (!isfinite(w[i])) w[i] = 0.0f;
    }
    cmf_quant_opts o;
    cmf_quant_opts_default(&o);
    o.outlier_frac = (data[3] % 10) / 20.0;
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    cmf_err err;
    if (cmf_quant_encode(dt, 2, shape, w, &o, &a, &la, &err) == CMF_OK) {
        if (cmf_quant_encode(dt, 2, shape, w, &o, &b, &lb, &err) != CMF_OK || la != lb ||
            memcmp(a, b, la))
            abort();
        if (cmf_quant_validate(dt, 2, shape, a, la, "fuzz", &err) != CMF_OK) abort();
        if (cmf_quant_dequant(dt, 2, shape, a, la, d, &err) != CMF_OK) abort();
        if (dt != CMF_DT_F16 && dt != CMF_DT_BF16 && dt != CMF_DT_Q8_ROW && dt != CMF_DT_Q8_2F)
            for (uint64_t i = 0; i < n; i++)
                if (!isfinite(d[i])) abort();
    }
    free(a);
    free(b);
out:
    free(w);
    free(d);
    return 0;
}
