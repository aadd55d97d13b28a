/* session_task.c - selecting a session's task mask (cortiq_session_set_task). */
#include <stdio.h>
#include <string.h>

#include "engine/session.h"

/* The active skill's input_mask_task (spec §9 registry), or NULL: no single skill is active
 * (the backbone, or a blend) or its record names no task. */
static const char *skill_task(const cortiq_model *m) {
    if (!m->skill) return NULL;
    const cmf_header *h = cmf_file_header(m->file);
    for (size_t i = 0; i < h->n_skills; i++)
        if (!strcmp(h->skills[i].id, m->skill)) return h->skills[i].input_mask_task;
    return NULL;
}

const char *cortiq_model_default_task(const cortiq_model *m) {
    /* a skill's own task comes before the file's default, named even when the catalog lacks
     * it, so that selecting it fails loudly rather than running another task */
    const char *st = skill_task(m);
    if (st) return st;
    const cmf_masks *ms = cmf_file_masks(m->file);
    return ms && ms->default_task && cmf_masks_find(ms, ms->default_task) ? ms->default_task : NULL;
}

/* "a, b, c" (the file's task names) into buf. */
static void task_names(const cmf_masks *ms, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; ms && i < ms->n_masks && n + 1 < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", ms->masks[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
    if (!ms || !ms->n_masks) snprintf(buf, cap, "none: the file has no masks section");
}

static cmf_status not_at_start(const cortiq_session *s, cmf_err *err) {
    return cmf_err_set(err, CMF_E_INVALID_ARG, "task",
                       "a task is selected before a conversation (position %u, not 0): "
                       "reset the session first",
                       s->pos);
}

/* Replace the session's task by mask k of ms (NULL: dense). */
static cmf_status select_mask(cortiq_session *s, const cmf_masks *ms, const cmf_mask *k,
                              bool no_gather, cmf_err *err) {
    cq_task *t = NULL;
    if (k) {
        cmf_status st = cq_task_build(s->m, ms, k, no_gather, &t, err);
        if (st != CMF_OK) return st;
    }
    cq_task_free(s->task, s->m->n_layers);
    s->task = t;
    s->expert_allow = t ? t->expert_allow : NULL;
    return CMF_OK;
}

cmf_status cortiq_session_set_mask(cortiq_session *s, const cmf_masks *dims, const cmf_mask *mask,
                                   cmf_err *err) {
    if (s->pos) return not_at_start(s, err);
    return select_mask(s, dims, mask, false, err);
}

cmf_status cq_session_set_task(cortiq_session *s, const char *name, bool no_gather, cmf_err *err) {
    if (s->pos) return not_at_start(s, err);
    const cortiq_model *m = s->m;
    const cmf_masks *ms = cmf_file_masks(m->file);
    const cmf_mask *k = NULL;
    if (name && strcmp(name, "none")) {
        k = ms ? cmf_masks_find(ms, name) : NULL;
        if (!k) {
            char names[1024];
            task_names(ms, names, sizeof names);
            return cmf_err_set(err, CMF_E_NOT_FOUND, "task",
                               "no task '%s' in %s (available: %s; 'none' = dense)", name,
                               cmf_file_path(m->file), names);
        }
    }
    cmf_status st = select_mask(s, ms, k, no_gather, err);
    if (st != CMF_OK) return st;
    if (k && !k->quality_json &&
        !__atomic_exchange_n(&m->task_warned[k - ms->masks], 1, __ATOMIC_RELAXED)) {
        fprintf(stderr,
                "cortiq: warning: task '%s' has no measured quality (quality: null, spec "
                "§5.1): its outputs are unvalidated\n",
                k->name);
    }
    return CMF_OK;
}

cmf_status cortiq_session_set_task(cortiq_session *s, const char *name, cmf_err *err) {
    return cq_session_set_task(s, name, false, err);
}

const char *cortiq_session_task(const cortiq_session *s) {
    return s->task ? s->task->mask->name : NULL;
}

void cortiq_session_task_stats(const cortiq_session *s, cortiq_task_stats *out) {
    if (s->task)
        *out = s->task->stats;
    else
        memset(out, 0, sizeof *out);
}
