/* fuzz_gguf.c - the GGUF reader on arbitrary bytes: open, then exercise everything a
 * converter touches (metadata look-ups, arch/tokenizer JSON, dequantization of every
 * tensor's first row, HF naming and fix-ups). Must never crash or leak. */
#include <stdint.h>
#include <stdlib.h>

#include "cortiq/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cmf_gguf *g = NULL;
    if (cmf_gguf_open_memory(data, size, "fuzz.gguf", &g, NULL) != CMF_OK) return 0;
    char *s = NULL;
    size_t len;
    if (cmf_gguf_arch_json(g, &s, NULL) == CMF_OK) free(s);
    if (cmf_gguf_tokenizer_config_json(g, &s, NULL) == CMF_OK) free(s);
    if (cmf_gguf_tokenizer_json(g, &s, &len, NULL) == CMF_OK) free(s);
    const char *arch = cmf_gguf_get_str(g, "general.architecture");
    for (size_t i = 0; i < cmf_gguf_tensor_count(g); i++) {
        const cmf_gguf_tensor *t = cmf_gguf_tensor_at(g, i);
        char name[256];
        cmf_gguf_hf_name(arch, t->name, name, sizeof name);
        (void)cmf_gguf_tensor_fixup(g, t->name);
        if (t->nrows == 0 || t->row_len > (1u << 16)) continue; /* keep each run small */
        float *row = malloc(t->row_len * sizeof(float));
        if (!row) continue;
        /* what dequantized is read back whole, so a value left unwritten would show */
        volatile float acc = 0;
        if (cmf_gguf_tensor_rows_f32(g, t, 0, 1, row, NULL) == CMF_OK)
            for (uint64_t k = 0; k < t->row_len; k++)
                acc += row[k];
        if (t->nelem <= (1u << 16)) {
            float *all = malloc(t->nelem * sizeof(float));
            if (all && cmf_gguf_tensor_hf_f32(g, t, all, NULL) == CMF_OK)
                for (uint64_t k = 0; k < t->nelem; k++)
                    acc += all[k];
            free(all);
        }
        (void)acc;
        free(row);
    }
    for (size_t i = 0; i < cmf_gguf_kv_count(g); i++) {
        const cmf_gguf_kv *kv = cmf_gguf_kv_at(g, i);
        int64_t iv;
        double fv;
        if (kv->type == CMF_GGUF_ARRAY && kv->arr_len) {
            cmf_gguf_arr_int(kv, kv->arr_len - 1, &iv);
            cmf_gguf_arr_float(kv, kv->arr_len - 1, &fv);
        }
    }
    cmf_gguf_close(g);
    return 0;
}
