/* slots.c - slot pool, waiting queue and the engine turn (see slots.h). */
#include "server/slots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"

static void *engine_main(void *arg);

int srv_slots_init(srv_slots *s, cortiq_model *m, cortiq_session *first, unsigned n,
                   unsigned max_waiting, char *why, size_t why_len) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->turn_mu, NULL);
    pthread_cond_init(&s->turn_cv, NULL);
    pthread_mutex_init(&s->batch_mu, NULL);
    pthread_cond_init(&s->batch_cv, NULL);
    /* the two with timed waits count on the monotonic clock */
    if (srv_cond_init(&s->freed) || srv_cond_init(&s->engine_cv)) {
        snprintf(why, why_len, "cannot make a condition variable on the monotonic clock");
        return -1;
    }
    s->max_waiting = max_waiting;
    if (!(s->slot = calloc(n, sizeof *s->slot))) {
        snprintf(why, why_len, "out of memory for %u slots", n);
        return -1;
    }
    uint32_t ctx = cortiq_session_ctx(first);
    s->ctx = ctx;
    s->base = m;
    s->first = first;
    for (unsigned i = 0; i < n; i++) {
        srv_slot *sl = &s->slot[i];
        sl->index = i;
        sl->model = m;
        if (i == 0)
            sl->sess = first;
        else {
            cmf_err err;
            if (cortiq_session_create(m, ctx, &sl->sess, &err)) {
                snprintf(why, why_len, "slot %u: %s", i, err.msg);
                return -1;
            }
        }
        s->n = i + 1;
        if (!(sl->hist = malloc((size_t)ctx * sizeof *sl->hist))) {
            snprintf(why, why_len, "out of memory for slot %u", i);
            return -1;
        }
        cortiq_session_reset(sl->sess);
        /* as `cortiq run` does: the file's default_task (spec §5.1), dense when it names none */
        cmf_err err;
        if (cortiq_session_set_task(sl->sess, cortiq_model_default_task(m), &err)) {
            snprintf(why, why_len, "slot %u: %s", i, err.msg);
            return -1;
        }
    }
    int e = pthread_create(&s->engine, NULL, engine_main, s);
    if (e) {
        snprintf(why, why_len, "the engine thread: %s", strerror(e));
        return -1;
    }
    s->engine_started = true;
    return 0;
}

void srv_slots_free(srv_slots *s) {
    if (s->engine_started) {
        pthread_mutex_lock(&s->batch_mu);
        s->engine_stop = true;
        pthread_cond_signal(&s->engine_cv);
        pthread_mutex_unlock(&s->batch_mu);
        pthread_join(s->engine, NULL);
    }
    for (unsigned i = 0; i < s->n; i++) {
        if (s->slot[i].sess != s->first) cortiq_session_free(s->slot[i].sess);
        free(s->slot[i].hist);
    }
    free(s->slot);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->freed);
    pthread_mutex_destroy(&s->turn_mu);
    pthread_cond_destroy(&s->turn_cv);
    pthread_mutex_destroy(&s->batch_mu);
    pthread_cond_destroy(&s->batch_cv);
    pthread_cond_destroy(&s->engine_cv);
    memset(s, 0, sizeof *s);
}

static size_t common_prefix(const srv_slot *sl, const int32_t *p, size_t n) {
    size_t k = 0;
    while (k < sl->n_hist && k < n && sl->hist[k] == p[k])
        k++;
    return k;
}

static bool same_task(const char *a, const char *b) {
    return a == b || (a && b && !strcmp(a, b));
}

/* The slot's cache counts only when it ran the same instance and task; a slot on both ranks
 * first, then one on the instance (a task switch costs less than a new session). */
static srv_slot *pick(srv_slots *s, const int32_t *prompt, size_t n, const cortiq_model *model,
                      const char *task) {
    srv_slot *best = NULL;
    size_t best_k = 0;
    int best_rank = -1;
    for (unsigned i = 0; i < s->n; i++) {
        srv_slot *sl = &s->slot[i];
        if (sl->busy) continue;
        bool on = sl->sess && sl->model == model;
        int rank = on ? 1 + same_task(cortiq_session_task(sl->sess), task) : 0;
        size_t k = rank == 2 ? common_prefix(sl, prompt, n) : 0;
        if (rank > best_rank || (rank == best_rank && k > best_k)) {
            best = sl;
            best_k = k;
            best_rank = rank;
        }
    }
    return best;
}

int srv_slot_bind(srv_slots *s, srv_slot *slot, cortiq_model *model, char *why, size_t why_len) {
    if (slot->sess && slot->model == model) return 0;
    pthread_mutex_lock(&s->mu);
    bool take_first = model == s->base && s->first_parked;
    s->first_parked = s->first_parked && !take_first;
    pthread_mutex_unlock(&s->mu);
    cortiq_session *ns = s->first;
    cmf_err err;
    srv_turn_take(s);
    cmf_status st = take_first ? CMF_OK : cortiq_session_create(model, s->ctx, &ns, &err);
    srv_turn_give(s);
    if (st) {
        snprintf(why, why_len, "a session for slot %u: %s", slot->index, err.msg);
        return -1;
    }
    cortiq_session_reset(ns);
    pthread_mutex_lock(&s->mu); /* pick, /metrics and srv_slots_unbind read the slot's session */
    cortiq_session *old = slot->sess;
    slot->sess = ns;
    slot->model = model;
    srv_slot_keep(slot, 0);
    if (old == s->first) s->first_parked = true;
    /* freed under the lock: once the slot no longer holds it, nothing keeps its instance
     * loaded, and srv_slots_unbind (which takes the lock) precedes an unload */
    if (old != s->first) cortiq_session_free(old);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void srv_slots_unbind(srv_slots *s, const cortiq_model *model) {
    cortiq_session *drop[256];
    unsigned n = 0;
    pthread_mutex_lock(&s->mu);
    /* a busy slot on the unpinned instance belongs to a request of another instance that has
     * not replaced the session yet (srv_slot_bind): it never evaluates it, so it goes too */
    for (unsigned i = 0; i < s->n; i++) {
        srv_slot *sl = &s->slot[i];
        if (!sl->sess || sl->model != model) continue;
        if (sl->sess == s->first)
            s->first_parked = true;
        else
            drop[n++] = sl->sess;
        sl->sess = NULL;
        sl->model = NULL;
        srv_slot_keep(sl, 0);
    }
    pthread_mutex_unlock(&s->mu);
    for (unsigned i = 0; i < n; i++)
        cortiq_session_free(drop[i]);
}

int srv_slot_use_task(srv_slots *s, srv_slot *slot, const char *task, char *why, size_t why_len) {
    if (same_task(cortiq_session_task(slot->sess), task)) return 0;
    srv_turn_take(s); /* a task's first selection builds its gathered matrices */
    cortiq_session_reset(slot->sess);
    srv_slot_keep(slot, 0);
    cmf_err err;
    cmf_status st = cortiq_session_set_task(slot->sess, task, &err);
    srv_turn_give(s);
    if (st) snprintf(why, why_len, "%s", err.msg);
    return st ? -1 : 0;
}

srv_slot_wait srv_slots_acquire(srv_slots *s, const int32_t *prompt, size_t n_prompt,
                                const cortiq_model *model, const char *task, double timeout_s,
                                const volatile int *stop, srv_slot **out) {
    double t_end = srv_now() + timeout_s;
    pthread_mutex_lock(&s->mu);
    srv_slot *sl = pick(s, prompt, n_prompt, model, task);
    srv_slot_wait r = SRV_SLOT_OK;
    if (!sl) {
        if (s->waiting >= s->max_waiting) {
            pthread_mutex_unlock(&s->mu);
            return SRV_SLOT_QUEUE_FULL;
        }
        s->waiting++;
        while (!(sl = pick(s, prompt, n_prompt, model, task))) {
            if (srv_flag(stop)) {
                r = SRV_SLOT_STOPPING;
                break;
            }
            double t = srv_now();
            if (t >= t_end) {
                r = SRV_SLOT_TIMEOUT;
                break;
            }
            struct timespec ts = srv_deadline(t + 0.1 < t_end ? t + 0.1 : t_end);
            pthread_cond_timedwait(&s->freed, &s->mu, &ts);
        }
        s->waiting--;
    }
    if (sl) sl->busy = true;
    pthread_mutex_unlock(&s->mu);
    *out = sl;
    return sl ? SRV_SLOT_OK : r;
}

void srv_slots_release(srv_slots *s, srv_slot *slot) {
    pthread_mutex_lock(&s->mu);
    slot->busy = false;
    pthread_cond_broadcast(&s->freed);
    pthread_mutex_unlock(&s->mu);
}

unsigned srv_slots_busy(srv_slots *s) {
    unsigned b = 0;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < s->n; i++)
        b += s->slot[i].busy;
    pthread_mutex_unlock(&s->mu);
    return b;
}

unsigned srv_slots_waiting(srv_slots *s) {
    pthread_mutex_lock(&s->mu);
    unsigned w = s->waiting;
    pthread_mutex_unlock(&s->mu);
    return w;
}

void srv_slots_kv_use(srv_slots *s, uint64_t *used, uint64_t *cap) {
    *used = *cap = 0;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < s->n; i++) {
        *used += __atomic_load_n(&s->slot[i].n_hist, __ATOMIC_RELAXED);
        *cap += s->slot[i].sess ? cortiq_session_ctx(s->slot[i].sess) : 0;
    }
    pthread_mutex_unlock(&s->mu);
}

void srv_turn_take(srv_slots *s) {
    pthread_mutex_lock(&s->turn_mu);
    uint64_t me = s->next_ticket++;
    while (s->serving != me)
        pthread_cond_wait(&s->turn_cv, &s->turn_mu);
    pthread_mutex_unlock(&s->turn_mu);
}

void srv_turn_give(srv_slots *s) {
    pthread_mutex_lock(&s->turn_mu);
    s->serving++;
    pthread_cond_broadcast(&s->turn_cv);
    pthread_mutex_unlock(&s->turn_mu);
}

int srv_slot_eval(srv_slots *s, srv_slot *slot, const int32_t *tokens, size_t n, char *why,
                  size_t why_len) {
    cmf_err err;
    srv_turn_take(s);
    cmf_status st = cortiq_session_eval(slot->sess, tokens, n, NULL, &err);
    srv_turn_give(s);
    if (st) {
        snprintf(why, why_len, "%s", err.msg);
        /* the session may hold part of the chunk: forget it all */
        cortiq_session_reset(slot->sess);
        srv_slot_keep(slot, 0);
        return -1;
    }
    srv_slot_append_prompt(slot, tokens, n);
    return 0;
}

/* ---- continuous batching ---- */

#define GATHER_WAIT_S 0.002 /* how long the engine waits for the other decoding slots to join */

void srv_slots_decoders(srv_slots *s, int delta) {
    pthread_mutex_lock(&s->batch_mu);
    s->decoders = (unsigned)((int)s->decoders + delta);
    pthread_cond_signal(&s->engine_cv); /* the engine may be waiting for this one */
    pthread_mutex_unlock(&s->batch_mu);
}

/* Evaluate the gathered steps: per model instance, its slots running no task mask in one
 * batched pass (a session running a task has its own gathered matrices: the batched pass refuses
 * it), the others one by one, as are all of them when the model refuses batches or the batch
 * fails (then each step's own error reaches its own request). */
static void run_batch(srv_slots *s, srv_decode **d, unsigned n) {
    cortiq_session *sess[16], *bsess[16];
    int32_t tok[16], btok[16];
    bool alone[16], grouped[16] = {false}, batched[16] = {false};
    for (unsigned i = 0; i < n; i++) {
        sess[i] = d[i]->slot->sess;
        tok[i] = d[i]->token;
        alone[i] = cortiq_session_task(sess[i]) != NULL;
    }
    cmf_err err;
    srv_turn_take(s);
    for (unsigned i = 0; i < n; i++) {
        if (alone[i] || grouped[i]) continue;
        unsigned nb = 0, member[16];
        for (unsigned k = i; k < n; k++)
            if (!alone[k] && d[k]->slot->model == d[i]->slot->model) {
                grouped[k] = true;
                member[nb] = k;
                bsess[nb] = sess[k];
                btok[nb++] = tok[k];
            }
        if (nb < 2 || s->no_batch) continue;
        cmf_status st = cortiq_session_eval_batch(bsess, btok, nb, &err);
        if (st == CMF_E_UNSUPPORTED) s->no_batch = true; /* the model's: no batch will pass */
        for (unsigned k = 0; st == CMF_OK && k < nb; k++)
            batched[member[k]] = true;
    }
    for (unsigned i = 0; i < n; i++) {
        d[i]->rc = 0;
        if (!batched[i] && cortiq_session_eval(sess[i], &tok[i], 1, NULL, &err)) {
            d[i]->rc = -1;
            snprintf(d[i]->why, sizeof d[i]->why, "%s", err.msg);
        }
    }
    srv_turn_give(s);
    for (unsigned i = 0; i < n; i++) {
        srv_slot *sl = d[i]->slot;
        if (d[i]->rc) {
            cortiq_session_reset(sl->sess);
            srv_slot_keep(sl, 0);
        } else {
            sl->hist[sl->n_hist] = tok[i];
            __atomic_store_n(&sl->n_hist, sl->n_hist + 1, __ATOMIC_RELAXED);
        }
    }
}

/* The engine thread: gathers the decode steps (up to GATHER_WAIT_S for every decoding slot to
 * join), evaluates them, and wakes their slots; until srv_slots_free stops it. */
static void *engine_main(void *arg) {
    srv_slots *s = arg;
    pthread_mutex_lock(&s->batch_mu);
    for (;;) {
        while (!s->n_pending && !s->engine_stop)
            pthread_cond_wait(&s->engine_cv, &s->batch_mu);
        if (!s->n_pending) break; /* stopping, nothing left */
        struct timespec until = srv_deadline(srv_now() + GATHER_WAIT_S);
        while (s->n_pending < s->decoders && s->n_pending < 16 && !s->engine_stop &&
               pthread_cond_timedwait(&s->engine_cv, &s->batch_mu, &until) == 0) {
        }
        srv_decode *batch[16];
        unsigned n = s->n_pending;
        memcpy(batch, s->pending, n * sizeof *batch);
        s->n_pending = 0;
        if (n == 16) pthread_cond_broadcast(&s->batch_cv); /* room in pending again */
        pthread_mutex_unlock(&s->batch_mu);
        run_batch(s, batch, n);
        pthread_mutex_lock(&s->batch_mu);
        s->batches++;
        s->batched_tokens += n;
        for (unsigned i = 0; i < n; i++)
            batch[i]->done = true;
        pthread_cond_broadcast(&s->batch_cv); /* their steps are done */
    }
    pthread_mutex_unlock(&s->batch_mu);
    return NULL;
}

void srv_slot_decode_submit(srv_slots *s, srv_slot *slot, int32_t token, srv_decode *d) {
    *d = (srv_decode){.slot = slot, .token = token};
    pthread_mutex_lock(&s->batch_mu);
    while (s->n_pending == 16)
        pthread_cond_wait(&s->batch_cv, &s->batch_mu);
    s->pending[s->n_pending++] = d;
    pthread_cond_signal(&s->engine_cv);
    pthread_mutex_unlock(&s->batch_mu);
}

int srv_slot_decode_wait(srv_slots *s, srv_decode *d, char *why, size_t why_len) {
    pthread_mutex_lock(&s->batch_mu);
    while (!d->done)
        pthread_cond_wait(&s->batch_cv, &s->batch_mu);
    pthread_mutex_unlock(&s->batch_mu);
    if (d->rc) snprintf(why, why_len, "%s", d->why);
    return d->rc;
}

int srv_slot_decode(srv_slots *s, srv_slot *slot, int32_t token, char *why, size_t why_len) {
    srv_decode d;
    srv_slot_decode_submit(s, slot, token, &d);
    return srv_slot_decode_wait(s, &d, why, why_len);
}
