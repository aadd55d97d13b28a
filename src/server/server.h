/* server.h - `cortiq serve`: an OpenAI-compatible HTTP server over the runtime (docs/SERVER.md).
 * srv_main opens nothing itself: the command gives it an open runtime and the options. */
#ifndef CQ_SERVER_SERVER_H
#define CQ_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/runtime.h"

typedef struct srv_config {
    const char *host;     /* default 127.0.0.1 */
    unsigned port;        /* 0: any free port (printed on the "listening" line) */
    unsigned parallel;    /* slots; default 1 */
    const char *api_key;  /* NULL: no authentication */
    const char *cors;     /* NULL: no CORS headers */
    const char *model_id; /* the name /v1/models lists */
    size_t max_body;      /* bytes; larger bodies get 413 */
    unsigned max_queue;   /* requests waiting for a slot; more get 429 */
    double queue_timeout; /* seconds a request waits for a slot before 503 */
    double max_seconds;   /* wall-clock limit of one request's generation */
    /* skills (docs/SERVER.md "Skills"): the file the runtime was opened from and its options
     * (skill instances are loaded from it), the skill a request without "skill" runs (NULL or
     * "none": the backbone, "auto", an id) and the skill instances held at once */
    const char *path;
    cortiq_runtime_opts ro;
    const char *default_skill;
    unsigned max_skill_models;
} srv_config;

void srv_config_defaults(srv_config *c);

/* Serve until SIGINT or SIGTERM (the caller has blocked both in every thread: srv_main waits
 * for them with sigwait). Returns 0 after a clean shutdown, non-zero when the server could not
 * start (the reason is printed). */
int srv_main(cortiq_runtime *rt, const srv_config *cfg);

#endif
