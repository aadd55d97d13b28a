/* http.c - the daemon (libmicrohttpd, a thread per connection: a request's generation runs on
 * its connection's thread and a streamed answer's reader may wait for the next token), request
 * bodies with their size limit, authentication, CORS, routing, and the shutdown on SIGINT /
 * SIGTERM. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/clock.h"
#include "server/complete.h"
#include "server/constrain.h"
#include "server/ctx.h"
#include "server/embed.h"
#include "server/respond.h"

void srv_config_defaults(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->parallel = 1;
    c->model_id = "model";
    c->max_body = 8u << 20;
    c->max_queue = 64;
    c->queue_timeout = 60;
    c->max_seconds = 600;
    c->max_skill_models = 4;
}

/* A connection's request body, gathered over the calls of the access handler. */
typedef struct body {
    char *data;
    size_t len, cap, seen;
    double t0;
} body;

static bool body_add(body *b, const char *p, size_t n, size_t max) {
    b->seen += n;
    if (b->seen > max) return true; /* the rest is read and dropped: 413 at the end */
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        if (cap > max + 1) cap = max + 1;
        char *d = realloc(b->data, cap);
        if (!d) return false;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

/* Constant-time comparison of the bearer token with --api-key. */
static bool authorized(struct MHD_Connection *conn, const char *key) {
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    size_t a = strlen(h), b = strlen(key);
    unsigned char diff = (unsigned char)(a != b);
    for (size_t i = 0; i < a && i < b; i++)
        diff |= (unsigned char)(h[i] ^ key[i]);
    return diff == 0;
}

static enum MHD_Result models(struct MHD_Connection *conn, srv_ctx *c) {
    json_t *m =
        json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:{s:I,s:I}}]}", "object", "list", "data", "id",
                  c->cfg.model_id, "object", "model", "created", (json_int_t)c->created, "owned_by",
                  "cortiq", "meta", "n_ctx", (json_int_t)c->ctx, "n_vocab", (json_int_t)c->vocab);
    /* CMF extension: the skills a request may name and the one it gets without "skill" */
    const cmf_header *h = cmf_file_header(cortiq_model_file(c->model));
    json_t *skills = json_array();
    for (size_t i = 0; i < h->n_skills; i++)
        json_array_append_new(skills, json_string(h->skills[i].id));
    const char *def = c->cfg.default_skill ? c->cfg.default_skill : "none";
    json_object_set_new(json_array_get(json_object_get(m, "data"), 0), "cmf",
                        json_pack("{s:o,s:s}", "skills", skills, "default_skill", def));
    return srv_reply_json(conn, c, 200, m);
}

static enum MHD_Result metrics(struct MHD_Connection *conn, srv_ctx *c) {
    uint64_t used, cap;
    srv_slots_kv_use(&c->slots, &used, &cap);
    pthread_mutex_lock(&c->slots.batch_mu);
    uint64_t batches = c->slots.batches, batched = c->slots.batched_tokens;
    pthread_mutex_unlock(&c->slots.batch_mu);
    char *t = srv_metrics_render(&c->metrics, c->slots.n, srv_slots_busy(&c->slots),
                                 srv_slots_waiting(&c->slots), used, cap, batches, batched);
    if (!t) return MHD_NO;
    pthread_mutex_lock(&c->skills.mu);
    unsigned loaded = c->skills.n;
    uint64_t loads = c->skills.loads, unloads = c->skills.unloads;
    pthread_mutex_unlock(&c->skills.mu);
    size_t n = strlen(t), room = n + 512;
    char *all = realloc(t, room);
    if (!all) {
        free(t);
        return MHD_NO;
    }
    n += (size_t)snprintf(
        all + n, room - n,
        "# HELP cortiq_skill_instances Skill model instances loaded (--max-skill-models).\n"
        "# TYPE cortiq_skill_instances gauge\ncortiq_skill_instances %u\n"
        "# HELP cortiq_skill_loads_total Skill instances loaded.\n"
        "# TYPE cortiq_skill_loads_total counter\ncortiq_skill_loads_total %llu\n"
        "# HELP cortiq_skill_unloads_total Skill instances unloaded to make room.\n"
        "# TYPE cortiq_skill_unloads_total counter\ncortiq_skill_unloads_total %llu\n",
        loaded, (unsigned long long)loads, (unsigned long long)unloads);
    return srv_reply_text(conn, c, 200, "text/plain; version=0.0.4", all, n);
}

static enum MHD_Result route(srv_ctx *c, struct MHD_Connection *conn, const char *url,
                             const char *method, body *b) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    srv_error e;
    if (!strcmp(method, "OPTIONS") && c->cfg.cors) { /* CORS preflight */
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        srv_add_headers(c, r);
        enum MHD_Result ok = MHD_queue_response(conn, 204, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (get && (!strcmp(url, "/health") || !strcmp(url, "/v1/health"))) {
        /* for load balancers: no key needed, 503 while shutting down */
        json_t *h = json_pack("{s:s,s:I,s:I}", "status", srv_flag(&c->stopping) ? "stopping" : "ok",
                              "slots_idle", (json_int_t)(c->slots.n - srv_slots_busy(&c->slots)),
                              "slots_processing", (json_int_t)srv_slots_busy(&c->slots));
        return srv_reply_json(conn, c, srv_flag(&c->stopping) ? 503 : 200, h);
    }
    if (srv_flag(&c->stopping)) { /* draining: a load balancer retries elsewhere */
        srv_error_set(&e, 503, NULL, "the server is shutting down");
        srv_metrics_request(&c->metrics, SRV_EP_OTHER, SRV_OUT_503, 0);
        return srv_reply_error(conn, c, &e, "5");
    }
    if (c->cfg.api_key && !authorized(conn, c->cfg.api_key)) {
        srv_error_set(&e, 401, NULL, "a valid API key is needed (Authorization: Bearer KEY)");
        srv_metrics_request(&c->metrics, SRV_EP_OTHER, SRV_OUT_4XX, 0);
        return srv_reply_error(conn, c, &e, NULL);
    }
    if (b->seen > c->cfg.max_body) {
        srv_error_set(&e, 413, NULL, "the request body has %zu bytes; the limit is %zu", b->seen,
                      c->cfg.max_body);
        srv_metrics_request(&c->metrics, SRV_EP_OTHER, SRV_OUT_4XX, 0);
        return srv_reply_error(conn, c, &e, NULL);
    }
    const char *data = b->data ? b->data : "";
    if (post && !strcmp(url, "/v1/chat/completions"))
        return srv_handle_generate(conn, c, SRV_CHAT, data, b->len, b->t0);
    if (post && !strcmp(url, "/v1/completions"))
        return srv_handle_generate(conn, c, SRV_COMPLETION, data, b->len, b->t0);
    if (post && !strcmp(url, "/v1/embeddings"))
        return srv_handle_embeddings(conn, c, data, b->len, b->t0);
    if (get && (!strcmp(url, "/v1/models") || !strcmp(url, "/models"))) return models(conn, c);
    if (get && !strcmp(url, "/metrics")) return metrics(conn, c);
    srv_error_set(&e, 404, NULL, "no route %s %s", method, url);
    srv_metrics_request(&c->metrics, SRV_EP_OTHER, SRV_OUT_4XX, 0);
    return srv_reply_error(conn, c, &e, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    srv_ctx *c = cls;
    body *b = *con_cls;
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return MHD_NO;
        b->t0 = srv_now();
        *con_cls = b;
        __atomic_add_fetch(&c->in_flight, 1, __ATOMIC_SEQ_CST);
        return MHD_YES;
    }
    if (*upload_data_size) {
        bool ok = body_add(b, upload_data, *upload_data_size, c->cfg.max_body);
        *upload_data_size = 0;
        return ok ? MHD_YES : MHD_NO;
    }
    return route(c, conn, url, method, b);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    (void)toe;
    srv_ctx *c = cls;
    body *b = *con_cls;
    if (b) {
        free(b->data);
        __atomic_sub_fetch(&c->in_flight, 1, __ATOMIC_SEQ_CST);
    }
    free(b);
    *con_cls = NULL;
}

static int fill_eos(srv_ctx *c) {
    const cmf_header *h = cmf_file_header(cortiq_model_file(c->model));
    const cmf_tokenizer_config *tc = &h->tokenizer_config;
    if (!(c->eos = calloc(tc->n_eos + 1, sizeof *c->eos))) return -1;
    for (size_t i = 0; i < tc->n_eos; i++)
        c->eos[c->n_eos++] = (int32_t)tc->eos_token_ids[i];
    return 0;
}

/* The next SIGINT or SIGTERM (blocked in every thread by the command). */
static int wait_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    /* a failed wait is not a signal: only SIGINT or SIGTERM may start the drain */
    while (sigwait(&set, &sig) != 0 || (sig != SIGINT && sig != SIGTERM))
        ;
    return sig;
}

static void *second_signal(void *arg) {
    srv_ctx *c = arg;
    wait_signal();
    fprintf(stderr, "cortiq serve: second signal: ending the generations now\n");
    __atomic_store_n(&c->aborting, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* The skill instances, and --skill checked against the file (an id is loaded now). */
static int start_skills(srv_ctx *c, char *why, size_t why_len) {
    if (srv_skills_init(&c->skills, c->cfg.path, &c->cfg.ro, c->model, c->cfg.max_skill_models, why,
                        why_len))
        return -1;
    const char *def = c->cfg.default_skill, *id;
    srv_error e;
    if (def && !strcmp(def, "auto")) {
        const cmf_header *h = cmf_file_header(cortiq_model_file(c->model));
        size_t routable = 0;
        for (size_t i = 0; i < h->n_skills; i++)
            routable += h->skills[i].selection_json != NULL;
        if (routable) return 0;
        snprintf(why, why_len,
                 "--skill auto: no skill of this file has a selection block: nothing to route to");
        return -1;
    }
    cortiq_model *m;
    if (!srv_skills_lookup(&c->skills, def, &id, &e) ||
        !srv_skills_pin(&c->skills, &c->slots, id, 0, &c->stopping, &m, &e)) {
        snprintf(why, why_len, "--skill: %.400s", e.message);
        return -1;
    }
    srv_skills_unpin(&c->skills, m);
    return 0;
}

int srv_main(cortiq_runtime *rt, const srv_config *cfg) {
    srv_ctx *c = calloc(1, sizeof *c);
    if (!c) return 1;
    c->rt = rt;
    c->model = cortiq_runtime_model(rt);
    c->tok = cortiq_runtime_tokenizer(rt);
    c->cfg = *cfg;
    c->vocab = cortiq_model_vocab(c->model);
    c->ctx = cortiq_session_ctx(cortiq_runtime_session(rt));
    /* for the start line, read before any slot runs */
    const char *kv_name = cortiq_kv_type_name(cortiq_session_kv_type(cortiq_runtime_session(rt)));
    double kv_mib = (double)cortiq_session_kv_bytes(cortiq_runtime_session(rt)) / (1 << 20);
    c->created = (long)time(NULL);
    srv_metrics_init(&c->metrics);
    char why[512];
    int rc = 1;
    struct MHD_Daemon *d = NULL;
    if (fill_eos(c) || srv_slots_init(&c->slots, c->model, cortiq_runtime_session(rt),
                                      cfg->parallel, cfg->max_queue, why, sizeof why)) {
        fprintf(stderr, "cortiq serve: %s\n", c->eos ? why : "out of memory");
        goto out;
    }
    if (start_skills(c, why, sizeof why)) {
        fprintf(stderr, "cortiq serve: %s\n", why);
        goto out;
    }
    bool v6 = strchr(cfg->host, ':') != NULL;
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)cfg->port)};
    if (v6 ? inet_pton(AF_INET6, cfg->host, &a6.sin6_addr) != 1
           : inet_pton(AF_INET, cfg->host, &a4.sin_addr) != 1) {
        fprintf(stderr, "cortiq serve: --host '%s' is not an IPv4 or IPv6 address\n", cfg->host);
        goto out;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0);
    d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, c,
                         MHD_OPTION_SOCK_ADDR, v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, c, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned)(cfg->parallel + cfg->max_queue + 64),
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "cortiq serve: cannot listen on %s port %u (in use, or not allowed)\n",
                cfg->host, cfg->port);
        goto out;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = di ? di->port : cfg->port;
    fprintf(stderr,
            "cortiq serve: listening on http://%s%s%s:%u (model %s, %u slot%s of %u positions, "
            "KV cache %s, %.1f MiB a slot)\n",
            v6 ? "[" : "", cfg->host, v6 ? "]" : "", port, cfg->model_id, cfg->parallel,
            cfg->parallel == 1 ? "" : "s", c->ctx, kv_name, kv_mib);
    int sig = wait_signal();
    fprintf(stderr,
            "cortiq serve: %s: finishing the requests in flight (again to cut them short)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* drain: stop accepting, refuse new requests on open connections (503), let the requests in
     * flight finish; a second signal ends their generations at the next token */
    MHD_quiesce_daemon(d);
    __atomic_store_n(&c->stopping, 1, __ATOMIC_SEQ_CST);
    pthread_t second;
    bool watching = pthread_create(&second, NULL, second_signal, c) == 0;
    while (__atomic_load_n(&c->in_flight, __ATOMIC_SEQ_CST) > 0 &&
           !__atomic_load_n(&c->aborting, __ATOMIC_SEQ_CST))
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    MHD_stop_daemon(d);
    if (watching) {
        pthread_cancel(second); /* it waits in sigwait, a cancellation point */
        pthread_join(second, NULL);
    }
    rc = 0;
out:
    if (c->slots.slot) srv_slots_free(&c->slots);
    if (c->skills.base) srv_skills_free(&c->skills); /* after the sessions on its instances */
    srv_metrics_free(&c->metrics);
    srv_tok_table_free(c->tok_table);
    free(c->eos);
    free(c);
    return rc;
}
