/* fuzz_quant_decode.c - quant payload decoders on arbitrary bytes.
 * Input: [dtype id][rows selector][cols selector][payload...]. validate, dequant and every
 * dequant_row must return a status (never crash, never read outside the payload); a payload
 * that validates must also dequantize, and its rows must equal the whole-tensor decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    cmf_dtype dt = (cmf_dtype)(data[0] % CMF_DT_COUNT);
    const cmf_dtype_traits *t = cmf_dtype_get((unsigned)dt);
    uint64_t shape[2];
    shape[0] = 1 + data[1] % 8;
    shape[1] = t->needs_in_mult32 ? 32u * (1 + data[2] % 4) : 1u + data[2] % 70;
    unsigned ndim = (!t->matrix_only && (data[2] & 0x80)) ? 1 : 2;
    if (ndim == 1) shape[0] = shape[1];
    size_t n = ndim == 1 ? shape[0] : shape[0] * shape[1];
    /* an exact-size copy so any over-read past the payload is caught by ASan */
    size_t len = size - 3;
    uint8_t *p = malloc(len ? len : 1);
    float *out = malloc(n * sizeof *out);
    if (!p || !out) {
        free(p);
        free(out);
        return 0;
    }
    memcpy(p, data + 3, len);
    cmf_err err;
    cmf_status v = cmf_quant_validate(dt, ndim, shape, p, len, "fuzz", &err);
    cmf_status d = cmf_quant_dequant(dt, ndim, shape, p, len, out, &err);
    if (v == CMF_OK && d != CMF_OK) abort(); /* validated payloads always decode */
    uint64_t rows, cols;
    float *row = malloc((ndim == 1 ? shape[0] : shape[1]) * sizeof *row);
    if (row && cmf_quant_rows(ndim, shape, &rows, &cols))
        for (uint64_t r = 0; r < rows; r++) {
            cmf_status s = cmf_quant_dequant_row(dt, ndim, shape, p, len, r, row, &err);
            if (v == CMF_OK && s != CMF_OK) abort();
            /* row access and whole-tensor decode agree bit for bit */
            if (v == CMF_OK && memcmp(row, out + r * cols, cols * sizeof *row)) abort();
        }
    free(row);
    free(p);
    free(out);
    return 0;
}
