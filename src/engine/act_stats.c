/* act_stats.c - activation statistics of a dense session (cortiq_session_collect_stats), the
 * evidence `cortiq mask derive` chooses neurons and heads from. */
#include <math.h>

#include "engine/session.h"

void cortiq_session_collect_stats(cortiq_session *s, cortiq_act_stats *st) {
    s->stats = st;
}

void cq_stats_ffn(cortiq_session *s, uint32_t l, size_t n) {
    const cq_layer *y = &s->m->layers[l];
    double *acc = s->stats->ffn + (size_t)l * s->stats->ffn_stride;
    for (size_t t = 0; t < n; t++) {
        const float *g = s->g + t * y->ffn;
        for (uint32_t i = 0; i < y->ffn; i++)
            acc[i] += fabsf(g[i]);
    }
}

void cq_stats_heads(cortiq_session *s, uint32_t l, size_t n) {
    if (!s->stats->heads) return;
    const cq_layer *y = &s->m->layers[l];
    uint32_t hd = s->m->head_dim;
    double *acc = s->stats->heads + (size_t)l * s->stats->heads_stride;
    for (size_t t = 0; t < n; t++)
        for (uint32_t h = 0; h < y->n_heads; h++) {
            const float *a = s->att + (t * y->n_heads + h) * hd;
            double q = 0;
            for (uint32_t d = 0; d < hd; d++)
                q += (double)a[d] * a[d];
            acc[h] += sqrt(q);
        }
}
