/* metrics.h - counters and histograms for GET /metrics (Prometheus text format 0.0.4). */
#ifndef CQ_SERVER_METRICS_H
#define CQ_SERVER_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_HIST_BUCKETS 12

typedef struct srv_hist {
    uint64_t count[SRV_HIST_BUCKETS + 1]; /* the last: +Inf */
    double sum;
    uint64_t n;
} srv_hist;

typedef enum {
    SRV_EP_CHAT,
    SRV_EP_COMPLETION,
    SRV_EP_EMBEDDING,
    SRV_EP_OTHER,
    SRV_EP_COUNT
} srv_ep;

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[SRV_EP_COUNT][6]; /* by status class: 2xx 4xx 429 5xx 503 disconnected */
    uint64_t prompt_tokens, cached_tokens, generated_tokens;
    srv_hist latency, ttft, decode_tok_s;
} srv_metrics;

typedef enum {
    SRV_OUT_OK,
    SRV_OUT_4XX,
    SRV_OUT_429,
    SRV_OUT_5XX,
    SRV_OUT_503,
    SRV_OUT_CANCELLED
} srv_outcome;

void srv_metrics_init(srv_metrics *m);
void srv_metrics_free(srv_metrics *m);
srv_outcome srv_outcome_of(int http);
void srv_metrics_request(srv_metrics *m, srv_ep ep, srv_outcome o, double seconds);
void srv_metrics_tokens(srv_metrics *m, size_t prompt, size_t cached, size_t generated,
                        double ttft_s, double decode_tok_s);

/* The exposition text (malloc'd): the counters above plus the gauges given. */
char *srv_metrics_render(srv_metrics *m, unsigned slots, unsigned busy, unsigned waiting,
                         uint64_t kv_used, uint64_t kv_cap, uint64_t batches,
                         uint64_t batched_tokens);

#endif
