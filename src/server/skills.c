/* skills.c - the skill instances of the server (see skills.h). */
#include "server/skills.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/skill.h"
#include "server/clock.h"
#include "server/ctx.h"

#define ROUTE_MAX  512 /* tokens routed on, as `cortiq run --skill auto` */
#define MAX_SKILLS 256

int srv_skills_init(srv_skills *k, const char *path, const cortiq_runtime_opts *ro,
                    cortiq_model *base, unsigned max, char *why, size_t why_len) {
    memset(k, 0, sizeof *k);
    pthread_mutex_init(&k->mu, NULL);
    if (srv_cond_init(&k->freed)) { /* its timed waits count on the monotonic clock */
        snprintf(why, why_len, "cannot make a condition variable on the monotonic clock");
        return -1;
    }
    k->path = path;
    k->base = base;
    k->max = max;
    /* as cortiq_runtime_open loads the backbone; the instances stay on the mapping's pages
     * (no move onto 2 MiB pages: that would copy every matrix once per instance) */
    k->lo = (cortiq_load_opts){.threads = ro->threads,
                               .kv = ro->kv,
                               .act = ro->act,
                               .no_huge_pages = 1,
                               .verify_tensors = 0};
    if (max && !(k->inst = calloc(max, sizeof *k->inst))) {
        snprintf(why, why_len, "out of memory for %u skill instances", max);
        return -1;
    }
    return 0;
}

void srv_skills_free(srv_skills *k) {
    for (unsigned i = 0; i < k->n; i++)
        cortiq_model_free(k->inst[i].model);
    free(k->inst);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->freed);
    memset(k, 0, sizeof *k);
}

bool srv_skills_lookup(const srv_skills *k, const char *name, const char **id, srv_error *e) {
    *id = NULL;
    if (!name || !strcmp(name, "none")) return true;
    const cmf_header *h = cmf_file_header(cortiq_model_file(k->base));
    char list[384] = "";
    size_t used = 0;
    for (size_t i = 0; i < h->n_skills; i++) {
        if (!strcmp(h->skills[i].id, name)) {
            *id = h->skills[i].id;
            return true;
        }
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "",
                                     h->skills[i].id);
    }
    if (!h->n_skills)
        srv_error_set(e, 400, "skill",
                      "skill '%.64s': this model's file has no skills; the only choice is \"none\"",
                      name);
    else
        srv_error_set(e, 400, "skill",
                      "skill '%.64s' is not in this model's file; available: %s, \"auto\" or "
                      "\"none\"",
                      name, list);
    return false;
}

bool srv_skills_route(srv_skills *k, srv_slots *slots, const cmf_tokenizer *tok, const char *text,
                      const char **id, srv_error *e) {
    cmf_err err;
    int32_t *ids = NULL;
    size_t n = 0;
    if (cmf_tokenizer_encode(tok, text, strlen(text), false, &ids, &n, &err)) {
        srv_error_set(e, 400, "skill", "skill auto: the prompt: %s", err.msg);
        return false;
    }
    uint32_t maxc = cortiq_model_max_context(k->base);
    if (n > ROUTE_MAX) n = ROUTE_MAX;
    if (maxc && n > maxc) n = maxc;
    cortiq_skill_score scores[MAX_SKILLS];
    size_t n_scores = 0;
    cmf_status st = CMF_E_INVALID_ARG;
    if (n) {
        srv_turn_take(slots); /* the router runs the backbone's forward pass */
        st = cortiq_skill_route(k->base, ids, n, scores, MAX_SKILLS, &n_scores, &err);
        srv_turn_give(slots);
    }
    free(ids);
    if (!n)
        srv_error_set(e, 400, "skill", "skill auto: the prompt is empty: nothing to route on");
    else if (st)
        srv_error_set(e, st == CMF_E_NOMEM ? 500 : 400, "skill", "skill auto: %s", err.msg);
    else
        *id = scores[0].id;
    return !st;
}

static srv_skill_inst *find(srv_skills *k, const char *id) {
    for (unsigned i = 0; i < k->n; i++)
        if (!strcmp(k->inst[i].id, id)) return &k->inst[i];
    return NULL;
}

/* Make room for one more instance: unload the least recently used unpinned one. */
static bool make_room(srv_skills *k, srv_slots *slots) {
    if (k->n < k->max) return true;
    srv_skill_inst *lru = NULL;
    for (unsigned i = 0; i < k->n; i++)
        if (!k->inst[i].pins && (!lru || k->inst[i].last_use < lru->last_use)) lru = &k->inst[i];
    if (!lru) return false;
    srv_slots_unbind(slots, lru->model); /* unpinned: no request runs on it */
    cortiq_model_free(lru->model);
    *lru = k->inst[--k->n];
    k->unloads++;
    return true;
}

bool srv_skills_pin(srv_skills *k, srv_slots *slots, const char *id, double timeout_s,
                    const volatile int *stop, cortiq_model **out, srv_error *e) {
    *out = k->base;
    if (!id) return true;
    double t_end = srv_now() + timeout_s;
    pthread_mutex_lock(&k->mu);
    srv_skill_inst *in;
    bool ok = true;
    /* every instance pinned: wait for one to come free (an unpin signals), as for a slot */
    while (!(in = find(k, id)) && !make_room(k, slots)) {
        double t = srv_now();
        if (srv_flag(stop) || t >= t_end) {
            srv_error_set(e, 503, "skill",
                          "skill '%.64s': all %u skill instances (--max-skill-models) stayed busy "
                          "with other skills' requests; try again",
                          id, k->max);
            ok = false;
            break;
        }
        struct timespec ts = srv_deadline(t + 0.1 < t_end ? t + 0.1 : t_end);
        pthread_cond_timedwait(&k->freed, &k->mu, &ts);
    }
    if (ok && !in) {
        /* loaded under the lock: a second request for the same skill waits for this load */
        cortiq_load_opts lo = k->lo;
        lo.skill = id;
        cmf_err err;
        cortiq_model *m = NULL;
        if (cortiq_model_load(k->path, &lo, &m, &err)) {
            srv_error_set(e, 500, "skill", "skill '%.64s': loading its instance: %s", id, err.msg);
            ok = false;
        } else {
            in = &k->inst[k->n++];
            *in = (srv_skill_inst){.id = id, .model = m};
            k->loads++;
        }
    }
    if (ok) {
        in->pins++;
        in->last_use = ++k->tick;
        *out = in->model;
    }
    pthread_mutex_unlock(&k->mu);
    return ok;
}

void srv_skills_unpin(srv_skills *k, cortiq_model *m) {
    if (!m || m == k->base) return;
    pthread_mutex_lock(&k->mu);
    for (unsigned i = 0; i < k->n; i++)
        if (k->inst[i].model == m && !--k->inst[i].pins) pthread_cond_broadcast(&k->freed);
    pthread_mutex_unlock(&k->mu);
}

bool srv_request_skill(srv_ctx *c, const srv_request *rq, const char *route_text,
                       cortiq_model **model, const char **id, srv_error *e) {
    const char *name = rq->skill ? rq->skill : c->cfg.default_skill;
    *model = NULL;
    *id = NULL;
    if (name && !strcmp(name, "auto")) {
        if (!srv_skills_route(&c->skills, &c->slots, c->tok, route_text ? route_text : "", id, e))
            return false;
    } else if (!srv_skills_lookup(&c->skills, name, id, e))
        return false;
    return srv_skills_pin(&c->skills, &c->slots, *id, c->cfg.queue_timeout, &c->stopping, model, e);
}
