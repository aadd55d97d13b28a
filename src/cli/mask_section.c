/* mask_section.c - a file's masks section with one mask added or removed (mask_section.h). */
#include "cli/mask_section.h"

#include <stdlib.h>
#include <string.h>

#include "cortiq/writer.h"

cmf_status mask_section_build(const cmf_masks *old, uint32_t n_layers, uint32_t intermediate,
                              uint32_t n_heads, const char *drop, const mask_new *add,
                              const char *set_default, uint8_t **out, size_t *len, cmf_err *err) {
    uint32_t n_experts = old ? old->n_experts : 0;
    cmf_masks_builder *b = NULL;
    cmf_status st = cmf_masks_builder_create(n_layers, intermediate, n_heads, n_experts, &b, err);
    for (size_t i = 0; !st && old && i < old->n_masks; i++) {
        const cmf_mask *k = &old->masks[i];
        if (drop && !strcmp(k->name, drop)) continue;
        st = cmf_masks_builder_add(b, k->name, k->description, k->ffn, k->heads, k->gates,
                                   k->has_expert_fields ? k->experts : NULL, k->quality_json, err);
    }
    if (!st && add)
        st = cmf_masks_builder_add(b, add->name, add->description, add->ffn, add->heads, add->gates,
                                   NULL, add->quality_json, err);
    const char *def = set_default;
    if (!def && old && old->default_task && (!drop || strcmp(old->default_task, drop)) &&
        cmf_masks_find(old, old->default_task))
        def = old->default_task;
    if (!st && def) st = cmf_masks_builder_set_default(b, def, err);
    if (!st) st = cmf_masks_builder_build(b, out, len, err);
    cmf_masks_builder_free(b);
    return st;
}

cmf_status mask_section_append(const char *path, const uint8_t *bytes, size_t len, cmf_err *err) {
    cmf_appender *a = NULL;
    cmf_status st = cmf_append_begin(path, &a, err);
    if (!st) st = cmf_append_set_masks(a, bytes, len, err);
    if (!st) st = cmf_append_commit(a, err);
    cmf_append_free(a);
    return st;
}
