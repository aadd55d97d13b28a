/* fuzz_open: any bytes as a CMF file image -> cmf_open_memory + cmf_verify + walk everything
 * the API hands out. Must never crash, hang or leak. The first input byte picks open flags so
 * the fuzzer also reaches the structural checks behind the metadata hashes. */
#include <stdint.h>
#include <string.h>

#include "cortiq/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned flags = (data[0] & 1) ? CMF_OPEN_SKIP_META_HASH : 0;
    cmf_file *f = NULL;
    cmf_err err;
    if (cmf_open_memory(data + 1, size - 1, "fuzz.cmf", flags, &f, &err) != CMF_OK) return 0;
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        sink += t->nbytes ? t->data[t->nbytes - 1] : 0; /* the last byte must be in bounds */
        sink += cmf_file_find(f, t->name) == t;
    }
    size_t first, count;
    cmf_file_prefix(f, "model.", &first, &count);
    const cmf_masks *m = cmf_file_masks(f);
    for (size_t i = 0; m && i < m->n_masks; i++)
        for (uint32_t l = 0; l < m->n_layers && l < 64; l++)
            sink += cmf_mask_ffn_active(m, &m->masks[i], l) +
                    cmf_mask_heads_active(m, &m->masks[i], l) +
                    cmf_mask_experts_active(m, &m->masks[i], l);
    const cmf_sparse_index *ix = cmf_file_sparse_index(f);
    for (size_t i = 0; ix && i < ix->n_entries; i++)
        sink += ix->entries[i].n_heads ? ix->entries[i].heads[ix->entries[i].n_heads - 1] : 0;
    sink += cmf_verify(f, 1, NULL, NULL, NULL);
    (void)sink;
    cmf_close(f);
    return 0;
}
