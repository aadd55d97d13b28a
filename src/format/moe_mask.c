/* moe_mask.c - `cortiq moe-mask`: a route-statistics expert set appended to a model file as a
 * task mask with an expert area (spec §5, append-only growth §9; cortiq/moe.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/durable_io.h"
#include "common/err.h"
#include "cortiq/hash.h"
#include "format/moe_masks.h"

cmf_status cq_moe_masks_carry(const cmf_file *f, const cmf_moe_keep *renumber,
                              cmf_masks_builder **out, uint32_t *kept, uint32_t *dropped,
                              cmf_err *err) {
    *out = NULL;
    *kept = *dropped = 0;
    const cmf_arch *a = &cmf_file_header(f)->arch;
    const char *fp = cmf_file_path(f);
    if (a->num_layers < 1 || a->intermediate_size < 1 || a->num_attention_heads < 1)
        return cmf_err_set(err, CMF_E_PARSE, fp,
                           "a task mask's areas need arch.num_layers, intermediate_size and "
                           "num_attention_heads (spec §5)");
    uint32_t L = (uint32_t)a->num_layers;
    uint32_t n_exp = a->moe.present && a->moe.num_experts > 0 ? (uint32_t)a->moe.num_experts : 0;
    cmf_masks_builder *b = NULL;
    cmf_status st = cmf_masks_builder_create(L, (uint32_t)a->intermediate_size,
                                             (uint32_t)a->num_attention_heads, n_exp, &b, err);
    if (st) return st;
    const cmf_masks *ms = cmf_file_masks(f);
    size_t eb = (n_exp + 7) / 8;
    uint8_t *ex = calloc(L, eb ? eb : 1);
    bool default_kept = false;
    if (!ex) st = cmf_err_set(err, CMF_E_NOMEM, fp, "expert area");
    for (size_t i = 0; !st && ms && i < ms->n_masks; i++) {
        const cmf_mask *m = &ms->masks[i];
        const uint8_t *experts = m->experts;
        bool keep = true;
        if (experts && renumber) { /* old bit kept[j] of a MoE layer becomes bit j */
            memset(ex, 0, L * eb);
            for (uint32_t l = 0; l < L && keep; l++) {
                const uint8_t *src = experts + l * ms->expert_bytes;
                uint8_t *dst = ex + l * eb;
                if (!renumber->present[l]) {
                    memcpy(dst, src, eb);
                    continue;
                }
                const uint8_t *kb = renumber->bits + (size_t)l * renumber->expert_bytes;
                uint32_t j = 0, any = 0;
                for (uint32_t e = 0; e < renumber->present[l]; e++) {
                    if (!cmf_bit(kb, e)) continue;
                    if (cmf_bit(src, e)) dst[j >> 3] |= (uint8_t)(1u << (j & 7)), any++;
                    j++;
                }
                keep = any > 0;
            }
            experts = ex;
        }
        if (!keep) {
            ++*dropped;
            continue;
        }
        st = cmf_masks_builder_add(b, m->name, m->description, m->ffn, m->heads, m->gates, experts,
                                   m->quality_json, err);
        ++*kept;
        default_kept |= ms->default_task && !strcmp(ms->default_task, m->name);
    }
    if (!st && default_kept) st = cmf_masks_builder_set_default(b, ms->default_task, err);
    free(ex);
    if (st) {
        cmf_masks_builder_free(b);
        return st;
    }
    *out = b;
    return CMF_OK;
}

/* The new mask's rows: every FFN, head and gate bit set (tail bits clear), k's expert sets. */
static cmf_status add_expert_mask(cmf_masks_builder *b, const cmf_arch *a, const cmf_moe_keep *k,
                                  const char *name, const char *stats_note, cmf_err *err) {
    uint32_t L = (uint32_t)a->num_layers, I = (uint32_t)a->intermediate_size,
             H = (uint32_t)a->num_attention_heads;
    size_t fb = (I + 7) / 8, hb = (H + 7) / 8, gb = (L + 7) / 8;
    uint8_t *ffn = calloc(L, fb), *heads = calloc(L, hb), *gates = calloc(1, gb);
    cmf_status st = CMF_OK;
    if (!ffn || !heads || !gates) st = cmf_err_set(err, CMF_E_NOMEM, name, "mask rows");
    for (uint32_t l = 0; !st && l < L; l++) {
        for (uint32_t i = 0; i < I; i++)
            ffn[l * fb + (i >> 3)] |= (uint8_t)(1u << (i & 7));
        for (uint32_t h = 0; h < H; h++)
            heads[l * hb + (h >> 3)] |= (uint8_t)(1u << (h & 7));
        gates[l >> 3] |= (uint8_t)(1u << (l & 7));
    }
    char desc[256];
    uint32_t n_moe = 0, kept = 0, present = 0;
    for (uint32_t l = 0; l < L; l++)
        if (k->present[l]) n_moe++, kept += k->kept[l], present += k->present[l];
    snprintf(desc, sizeof desc,
             "MoE expert mask: per layer the smallest top set covering %.4g of the routing "
             "counts (%s); %u of %u experts over %u MoE layers",
             k->cover, stats_note, kept, present, n_moe);
    if (!st) st = cmf_masks_builder_add(b, name, desc, ffn, heads, gates, k->bits, NULL, err);
    free(ffn), free(heads), free(gates);
    return st;
}

/* Copy the whole of f's image to a temporary file beside out; *tmp names it. */
static cmf_status copy_to_temp(const cmf_file *f, const char *out, char **tmp, cmf_err *err) {
    size_t len;
    const uint8_t *img = cmf_file_shard_bytes(f, 0, &len);
    int fd = -1;
    cmf_status st = io_create_temp(out, &fd, tmp, err);
    if (!st) st = io_pwrite_all(fd, img, len, 0, out, err);
    if (!st) st = io_fsync(fd, out, err);
    if (fd >= 0) close(fd);
    return st;
}

cmf_status cmf_moe_mask_add(const char *in_path, const char *out_path, const cmf_moe_keep *k,
                            const char *name, cmf_err *err) {
    if (!name || !*name) return cmf_err_set(err, CMF_E_INVALID_ARG, in_path, "a mask needs a name");
    cmf_file *f = NULL;
    cmf_status st = cmf_open(in_path, 0, &f, err);
    if (st) return st;
    const cmf_arch *a = &cmf_file_header(f)->arch;
    cmf_masks_builder *b = NULL;
    uint8_t *sec = NULL;
    size_t sec_len = 0;
    char *tmp = NULL;
    cmf_appender *ap = NULL;
    if (cmf_file_shard_count(f) > 1) {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, in_path,
                         "a sharded model: masks grow in one file (join it with `cortiq compact`)");
        goto out;
    }
    if (k->n_layers != (uint64_t)a->num_layers || !a->moe.present ||
        k->num_experts != (uint64_t)a->moe.num_experts) {
        st = cmf_err_set(err, CMF_E_INVALID_ARG, in_path,
                         "the expert sets were chosen for another model (%u layers, %u experts)",
                         k->n_layers, k->num_experts);
        goto out;
    }
    const cmf_masks *ms = cmf_file_masks(f);
    if (ms && cmf_masks_find(ms, name)) {
        st = cmf_err_set(err, CMF_E_INVALID_ARG, in_path,
                         "a mask named '%s' exists already (names are unique, spec §5.1)", name);
        goto out;
    }
    uint32_t n_kept, n_dropped;
    if ((st = cq_moe_masks_carry(f, NULL, &b, &n_kept, &n_dropped, err))) goto out;
    /* the other implementation's reader requires default_task; "general" names no mask here,
     * which selects none (docs/FORMAT.md), as that implementation writes it */
    if ((!ms || !ms->default_task) && strcmp(name, "general") &&
        (st = cmf_masks_builder_set_default(b, "general", err)))
        goto out;
    char note[64];
    char hex[17];
    cmf_hash64_to_hex(k->stats_hash, hex);
    snprintf(note, sizeof note, "stats hash64 %s", hex);
    if ((st = add_expert_mask(b, a, k, name, note, err))) goto out;
    if ((st = cmf_masks_builder_build(b, &sec, &sec_len, err))) goto out;
    const char *target = in_path;
    if (out_path) {
        if ((st = copy_to_temp(f, out_path, &tmp, err))) goto out;
        target = tmp;
    }
    cmf_close(f); /* the appender opens the target itself */
    f = NULL;
    if ((st = cmf_append_begin(target, &ap, err))) goto out;
    if ((st = cmf_append_set_masks(ap, sec, sec_len, err))) goto out;
    if ((st = cmf_append_commit(ap, err))) goto out;
    if (tmp) st = io_commit_rename(tmp, out_path, err);
out:
    cmf_append_free(ap);
    if (st && tmp) unlink(tmp);
    free(tmp);
    free(sec);
    cmf_masks_builder_free(b);
    cmf_close(f);
    return st;
}
