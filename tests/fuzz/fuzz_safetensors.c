/* fuzz_safetensors.c - the safetensors reader on arbitrary bytes: open (8-byte header length,
 * JSON header, dtypes, shapes, offsets, overlaps), then read every tensor's first row. */
#include <stdint.h>
#include <stdlib.h>

#include "cortiq/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cmf_st *s = NULL;
    if (cmf_st_open_memory(data, size, "fuzz.safetensors", &s, NULL) != CMF_OK) return 0;
    (void)cmf_st_metadata(s, "format");
    for (size_t i = 0; i < cmf_st_tensor_count(s); i++) {
        const cmf_st_tensor *t = cmf_st_tensor_at(s, i);
        if (cmf_st_find(s, t->name) != t) abort(); /* the index must find what it lists */
        if (t->nrows == 0 || t->row_len > (1u << 16)) continue;
        float *row = malloc(t->row_len * sizeof(float));
        /* what converted is read back whole, so a value left unwritten would show */
        volatile float acc = 0;
        if (row && cmf_st_rows_f32(s, t, 0, 1, row, NULL) == CMF_OK)
            for (uint64_t k = 0; k < t->row_len; k++)
                acc += row[k];
        (void)acc;
        free(row);
    }
    cmf_st_close(s);
    return 0;
}
