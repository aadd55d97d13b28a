/* skill_overlay.c - tensor-source indirection (spec §9): for every tensor the runtime reads
 * either the backbone entry or skill.{active}.{name}; a blend materializes sum_i w_i T_i in f32
 * for the tensors some member replaces and leaves every other tensor a view into the mapping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/quant.h"
#include "engine/skill_overlay.h"

static const cmf_skill *registry_find(const cmf_header *h, const char *id) {
    for (size_t i = 0; i < h->n_skills; i++)
        if (!strcmp(h->skills[i].id, id)) return &h->skills[i];
    return NULL;
}

static cmf_status unknown_id(const cmf_header *h, const char *id, const char *path, cmf_err *err) {
    char list[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < h->n_skills && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 h->skills[i].id);
    return cmf_err_set(err, CMF_E_NOT_FOUND, path, "skill '%s' is not in this file (skills: %s)",
                       id, h->n_skills ? list : "none");
}

cmf_status cq_overlay_init(cortiq_model *m, const cortiq_load_opts *o, const char *path,
                           cmf_err *err) {
    const cmf_header *h = cmf_file_header(m->file);
    if (!o) return CMF_OK;
    if (o->n_blend) {
        double sum = 0;
        for (size_t i = 0; i < o->n_blend; i++) {
            if (!o->blend[i].id || !registry_find(h, o->blend[i].id))
                return unknown_id(h, o->blend[i].id ? o->blend[i].id : "(null)", path, err);
            if (!isfinite(o->blend[i].weight) || o->blend[i].weight < 0)
                return cmf_err_set(err, CMF_E_INVALID_ARG, path,
                                   "blend weight of skill '%s' is %g: want a finite value >= 0",
                                   o->blend[i].id, (double)o->blend[i].weight);
            sum += o->blend[i].weight;
        }
        if (!(sum > 0)) return cmf_err_set(err, CMF_E_INVALID_ARG, path, "blend weights sum to 0");
        m->blend = calloc(o->n_blend, sizeof *m->blend);
        if (!m->blend) return cmf_err_set(err, CMF_E_NOMEM, path, "blend");
        for (size_t i = 0; i < o->n_blend; i++) {
            m->blend[i].id = registry_find(h, o->blend[i].id)->id;
            m->blend[i].weight = (float)(o->blend[i].weight / sum);
        }
        m->n_blend = o->n_blend;
        return CMF_OK;
    }
    if (!o->skill || !strcmp(o->skill, "none")) return CMF_OK;
    const cmf_skill *s = registry_find(h, o->skill);
    if (!s) return unknown_id(h, o->skill, path, err);
    m->skill = s->id;
    return CMF_OK;
}

static const cmf_tensor *skill_tensor(const cortiq_model *m, const char *id, const char *name) {
    char full[512];
    int n = snprintf(full, sizeof full, "skill.%s.%s", id, name);
    return n > 0 && (size_t)n < sizeof full ? cmf_file_find(m->file, full) : NULL;
}

/* sum_i w_i T_i in f32, as a tensor the model owns. */
static const cmf_tensor *blend_tensor(cortiq_model *m, const cmf_tensor *base, cmf_status *st,
                                      cmf_err *err) {
    for (size_t i = 0; i < m->n_blended; i++)
        if (!strcmp(m->blended[i]->name, base->name)) return m->blended[i];
    uint64_t numel = 1;
    for (unsigned d = 0; d < base->ndim; d++)
        numel *= base->shape[d];
    for (size_t i = 0; i < m->n_blend; i++) {
        const cmf_tensor *src = skill_tensor(m, m->blend[i].id, base->name);
        if (src && (src->ndim != base->ndim ||
                    memcmp(src->shape, base->shape, base->ndim * sizeof *src->shape))) {
            *st = cmf_err_set(err, CMF_E_PARSE, src->name,
                              "a skill tensor must have the shape of the tensor it replaces "
                              "(spec §9), '%s' differs",
                              base->name);
            return NULL;
        }
    }
    cmf_tensor **grown = realloc(m->blended, (m->n_blended + 1) * sizeof *grown);
    cmf_tensor *t = calloc(1, sizeof *t);
    float *acc = calloc(numel ? numel : 1, sizeof *acc), *tmp = malloc((numel ? numel : 1) * 4);
    char *name = strdup(base->name);
    if (grown) m->blended = grown;
    if (!grown || !t || !acc || !tmp || !name) {
        free(t), free(acc), free(tmp), free(name);
        *st = cmf_err_set(err, CMF_E_NOMEM, base->name, "blended tensor");
        return NULL;
    }
    for (size_t i = 0; i < m->n_blend; i++) {
        const cmf_tensor *src = skill_tensor(m, m->blend[i].id, base->name);
        if (!src) src = base;
        if ((*st = cmf_quant_dequant((cmf_dtype)src->dtype, src->ndim, src->shape, src->data,
                                     src->nbytes, tmp, err))) {
            free(t), free(acc), free(tmp), free(name);
            return NULL;
        }
        float w = m->blend[i].weight;
        for (uint64_t k = 0; k < numel; k++)
            acc[k] += w * tmp[k];
    }
    free(tmp);
    *t = *base;
    t->name = name;
    t->dtype = CMF_DT_F32;
    t->nbytes = numel * 4;
    t->data = (const uint8_t *)acc;
    t->hash = 0;
    m->blended[m->n_blended++] = t;
    return t;
}

const cmf_tensor *cq_overlay_find(cortiq_model *m, const char *name, cmf_status *st, cmf_err *err) {
    *st = CMF_OK;
    const cmf_tensor *base = cmf_file_find(m->file, name);
    if (!base) return NULL;
    if (m->skill) {
        const cmf_tensor *s = skill_tensor(m, m->skill, name);
        return s ? s : base;
    }
    for (size_t i = 0; i < m->n_blend; i++)
        if (skill_tensor(m, m->blend[i].id, name)) return blend_tensor(m, base, st, err);
    return base;
}

void cq_overlay_free(cortiq_model *m) {
    for (size_t i = 0; i < m->n_blended; i++) {
        free((char *)m->blended[i]->name);
        free((void *)m->blended[i]->data);
        free(m->blended[i]);
    }
    free(m->blended);
    free(m->blend);
}
