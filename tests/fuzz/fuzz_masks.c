/* fuzz_masks: any bytes as a masks section (spec §5, §5.1) -> cmf__parse_masks_bytes, then walk
 * every mask the parser accepted. The first 6 input bytes pick the arch that sizes the blobs
 * (zero values and an absent arch reach the dimension checks); the rest is the section. */
#include <stdint.h>
#include <string.h>

#include "format/file_impl.h"

#define ARCH_BYTES 6

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < ARCH_BYTES) return 0;
    cmf_arch arch;
    memset(&arch, 0, sizeof arch);
    arch.present = !(data[5] & 1);
    arch.num_layers = data[0];
    arch.intermediate_size = data[1] | (int64_t)data[2] << 8;
    arch.num_attention_heads = data[3];
    arch.moe.present = (data[4] & 0x80) != 0;
    arch.moe.num_experts = data[4] & 0x7f;
    if (data[5] & 2) arch.num_layers += (int64_t)1 << 32; /* past the u32 range */
    cmf_masks *m = NULL;
    cmf_err err;
    if (cmf__parse_masks_bytes(data + ARCH_BYTES, size - ARCH_BYTES, &arch, "fuzz.masks", &m,
                               &err) != CMF_OK)
        return 0;
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < m->n_masks; i++) {
        const cmf_mask *k = &m->masks[i];
        sink += cmf_masks_find(m, k->name) == k;
        sink += cmf_mask_layers_active(m, k);
        for (uint32_t l = 0; l < m->n_layers; l++)
            sink += cmf_mask_ffn_active(m, k, l) + cmf_mask_heads_active(m, k, l) +
                    cmf_mask_experts_active(m, k, l);
        /* the last byte of each field must lie inside the section */
        sink += k->ffn[(size_t)m->n_layers * m->ffn_bytes - 1];
        sink += k->heads[(size_t)m->n_layers * m->head_bytes - 1];
        sink += k->gates[m->gates_bytes - 1];
        if (k->experts && m->expert_bytes)
            sink += k->experts[(size_t)m->n_layers * m->expert_bytes - 1];
    }
    if (m->default_task) sink += cmf_masks_find(m, m->default_task) != NULL;
    (void)sink;
    cmf__free_masks(m);
    return 0;
}
