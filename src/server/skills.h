/* skills.h - per-request skills (spec §9, docs/SERVER.md "Skills"). A skill overlay binds when
 * a model is loaded, so the server holds one model instance per skill in use: the backbone (the
 * runtime's model, always there) and up to --max-skill-models skill instances, each loaded from
 * the same file on first use (its matrices are views into a mapping of the same file, so the
 * instances share the page cache) and unloaded, least recently used first, when another skill
 * needs room and no request holds it. A request pins its instance while it runs. */
#ifndef CQ_SERVER_SKILLS_H
#define CQ_SERVER_SKILLS_H

#include <pthread.h>
#include <stdint.h>

#include "cortiq/runtime.h"
#include "server/request.h"
#include "server/slots.h"

typedef struct srv_skill_inst {
    const char *id; /* the registry's id (lives as long as the backbone's file) */
    cortiq_model *model;
    unsigned pins; /* requests running on it */
    uint64_t last_use;
} srv_skill_inst;

typedef struct srv_skills {
    pthread_mutex_t mu;
    pthread_cond_t freed; /* an instance's last pin went */
    const char *path;
    cortiq_load_opts lo; /* the backbone's load options; skill set per instance */
    cortiq_model *base;  /* the backbone: the runtime's model */
    srv_skill_inst *inst;
    unsigned n, max;
    uint64_t tick, loads, unloads; /* loads and unloads for /metrics */
} srv_skills;

int srv_skills_init(srv_skills *k, const char *path, const cortiq_runtime_opts *ro,
                    cortiq_model *base, unsigned max, char *why, size_t why_len);
/* Unloads every instance: after the slots' sessions are freed. */
void srv_skills_free(srv_skills *k);

/* The registry's id for `name` (NULL for "none"); false with a 400 naming the name and listing
 * the file's skills when the file has no such skill. */
bool srv_skills_lookup(const srv_skills *k, const char *name, const char **id, srv_error *e);
/* The skill `auto` picks for text: the backbone's router (cortiq_skill_route) on text's first
 * 512 tokens without BOS, as `cortiq run --skill auto` does. false with e set (400 when the file
 * has no routable skill). Takes the engine turn of `slots`. */
bool srv_skills_route(srv_skills *k, srv_slots *slots, const cmf_tokenizer *tok, const char *text,
                      const char **id, srv_error *e);
/* The instance running skill id (NULL: the backbone), loaded when absent, pinned until
 * srv_skills_unpin. When all --max-skill-models instances are pinned by other skills' requests
 * it waits up to timeout_s (*stop ends the wait) for one to come free. false with e set: 503
 * after the wait, 500 when the load fails. */
bool srv_skills_pin(srv_skills *k, srv_slots *slots, const char *id, double timeout_s,
                    const volatile int *stop, cortiq_model **out, srv_error *e);
void srv_skills_unpin(srv_skills *k, cortiq_model *m); /* the backbone and NULL: nothing */

#endif
