/* metrics.c - counters and histograms, rendered as Prometheus text (see metrics.h). */
#include "server/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double k_seconds[SRV_HIST_BUCKETS] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                   1,    2.5,   5,    10,  30,   120};
static const double k_tok_s[SRV_HIST_BUCKETS] = {1,   2,   5,   10,   20,   50,
                                                 100, 200, 500, 1000, 2000, 5000};

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void srv_metrics_free(srv_metrics *m) {
    pthread_mutex_destroy(&m->mu);
}

srv_outcome srv_outcome_of(int http) {
    return http == 429   ? SRV_OUT_429
           : http == 503 ? SRV_OUT_503
           : http >= 500 ? SRV_OUT_5XX
           : http >= 400 ? SRV_OUT_4XX
                         : SRV_OUT_OK;
}

static void observe(srv_hist *h, const double *bounds, double v) {
    unsigned b = 0;
    while (b < SRV_HIST_BUCKETS && v > bounds[b])
        b++;
    h->count[b]++;
    h->sum += v;
    h->n++;
}

void srv_metrics_request(srv_metrics *m, srv_ep ep, srv_outcome o, double seconds) {
    pthread_mutex_lock(&m->mu);
    m->requests[ep][o]++;
    if (ep != SRV_EP_OTHER && o == SRV_OUT_OK) observe(&m->latency, k_seconds, seconds);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_tokens(srv_metrics *m, size_t prompt, size_t cached, size_t generated,
                        double ttft_s, double decode_tok_s) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->cached_tokens += cached;
    m->generated_tokens += generated;
    if (ttft_s >= 0) observe(&m->ttft, k_seconds, ttft_s);
    if (decode_tok_s > 0) observe(&m->decode_tok_s, k_tok_s, decode_tok_s);
    pthread_mutex_unlock(&m->mu);
}

typedef struct out {
    char *s;
    size_t len, cap;
} out;

__attribute__((format(printf, 2, 3))) static void put(out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (o->len + (size_t)n + 1 > o->cap) {
        size_t cap = (o->len + (size_t)n + 1) * 2;
        char *s = realloc(o->s, cap);
        if (!s) return;
        o->s = s;
        o->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(o->s + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    o->len += (size_t)n;
}

static void put_hist(out *o, const char *name, const char *help, const srv_hist *h,
                     const double *bounds) {
    put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t acc = 0;
    for (unsigned b = 0; b < SRV_HIST_BUCKETS; b++) {
        acc += h->count[b];
        put(o, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[b], (unsigned long long)acc);
    }
    acc += h->count[SRV_HIST_BUCKETS];
    put(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
        (unsigned long long)acc, name, h->sum, name, (unsigned long long)h->n);
}

char *srv_metrics_render(srv_metrics *m, unsigned slots, unsigned busy, unsigned waiting,
                         uint64_t kv_used, uint64_t kv_cap, uint64_t batches,
                         uint64_t batched_tokens) {
    static const char *ep[SRV_EP_COUNT] = {"chat", "completions", "embeddings", "other"};
    static const char *oc[] = {"ok",           "client_error", "rate_limited",
                               "server_error", "unavailable",  "cancelled"};
    out o = {0};
    pthread_mutex_lock(&m->mu);
    put(&o, "# HELP cortiq_requests_total Requests answered, by endpoint and outcome.\n"
            "# TYPE cortiq_requests_total counter\n");
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int k = 0; k < 6; k++)
            put(&o, "cortiq_requests_total{endpoint=\"%s\",outcome=\"%s\"} %llu\n", ep[e], oc[k],
                (unsigned long long)m->requests[e][k]);
    put(&o,
        "# HELP cortiq_prompt_tokens_total Prompt tokens received.\n"
        "# TYPE cortiq_prompt_tokens_total counter\ncortiq_prompt_tokens_total %llu\n"
        "# HELP cortiq_prompt_tokens_cached_total Prompt tokens found in a slot's cache.\n"
        "# TYPE cortiq_prompt_tokens_cached_total counter\n"
        "cortiq_prompt_tokens_cached_total %llu\n"
        "# HELP cortiq_generated_tokens_total Tokens generated.\n"
        "# TYPE cortiq_generated_tokens_total counter\ncortiq_generated_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens, (unsigned long long)m->cached_tokens,
        (unsigned long long)m->generated_tokens);
    put_hist(&o, "cortiq_request_seconds", "Wall-clock time of answered requests.", &m->latency,
             k_seconds);
    put_hist(&o, "cortiq_time_to_first_token_seconds",
             "From the request's arrival to its first generated token.", &m->ttft, k_seconds);
    put_hist(&o, "cortiq_decode_tokens_per_second", "Decode rate of each generation.",
             &m->decode_tok_s, k_tok_s);
    pthread_mutex_unlock(&m->mu);
    put(&o,
        "# HELP cortiq_slots Decoding slots (--parallel).\n# TYPE cortiq_slots gauge\n"
        "cortiq_slots %u\n"
        "# HELP cortiq_slots_busy Slots serving a request.\n# TYPE cortiq_slots_busy gauge\n"
        "cortiq_slots_busy %u\n"
        "# HELP cortiq_queue_depth Requests waiting for a slot.\n"
        "# TYPE cortiq_queue_depth gauge\ncortiq_queue_depth %u\n"
        "# HELP cortiq_kv_positions_used KV cache positions held, all slots.\n"
        "# TYPE cortiq_kv_positions_used gauge\ncortiq_kv_positions_used %llu\n"
        "# HELP cortiq_kv_positions_capacity KV cache positions, all slots.\n"
        "# TYPE cortiq_kv_positions_capacity gauge\ncortiq_kv_positions_capacity %llu\n",
        slots, busy, waiting, (unsigned long long)kv_used, (unsigned long long)kv_cap);
    put(&o,
        "# HELP cortiq_decode_passes_total Decode passes over the weights (continuous batching).\n"
        "# TYPE cortiq_decode_passes_total counter\ncortiq_decode_passes_total %llu\n"
        "# HELP cortiq_decode_pass_tokens_total Tokens those passes decoded (all slots).\n"
        "# TYPE cortiq_decode_pass_tokens_total counter\ncortiq_decode_pass_tokens_total %llu\n",
        (unsigned long long)batches, (unsigned long long)batched_tokens);
    return o.s;
}
