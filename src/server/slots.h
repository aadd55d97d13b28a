/* slots.h - the server's N decoding slots, each a session of one model instance (the backbone
 * or a skill's, server/skills.h), and the queue of requests waiting for one. The forward pass is
 * not reentrant and the instances share the cores, so every evaluation of any instance takes the
 * engine turn (a FIFO ticket lock). Decode steps are batched
 * continuously: the slots that want their next token gather, and the engine thread evaluates
 * all of them in one pass over the weights (cortiq_session_eval_batch), which gives
 * each exactly what it would get alone; slots of different instances gather in the same
 * round but each instance's slots go in their own pass. Prompts take the turn on their own. */
#ifndef CQ_SERVER_SLOTS_H
#define CQ_SERVER_SLOTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cortiq/engine.h"

/* A flag another thread sets (srv_ctx.stopping, .aborting: the waits below take them). */
static inline bool srv_flag(const volatile int *f) {
    return __atomic_load_n(f, __ATOMIC_RELAXED) != 0;
}

typedef struct srv_slot {
    cortiq_session *sess; /* NULL after its instance was unloaded (srv_slots_unbind) */
    cortiq_model *model;  /* the instance sess belongs to */
    int32_t *hist;        /* tokens the session holds, in order (the prompt-prefix cache) */
    size_t n_hist;
    /* hist[0 .. n_exact) came from prompt evaluations whose cache a fresh evaluation of the same
     * tokens repeats bit for bit (srv_slot_exact_chunk); decoded tokens never count */
    size_t n_exact;
    bool busy;
    unsigned index;
} srv_slot;

/* The slot holds only hist[0 .. n) (n <= n_hist): a reset or a truncation. */
static inline void srv_slot_keep(srv_slot *sl, size_t n) {
    if (sl->n_exact > n) sl->n_exact = n;
    __atomic_store_n(&sl->n_hist, n, __ATOMIC_RELAXED); /* read by /metrics */
}

/* The chunk size from which the slot's prompt evaluations give every token the bits of a fresh
 * one however the prompt is cut (cortiq_model_exact_chunk; 0 with a task mask, whose gathered
 * matrices may take other kernels: then only whole CORTIQ_EVAL_CHUNK chunks from the start). */
static inline uint32_t srv_slot_exact_chunk(const srv_slot *sl) {
    return cortiq_session_task(sl->sess) ? 0 : cortiq_model_exact_chunk(sl->model);
}

/* tokens[0 .. n) were evaluated by one call from hist's end (a prompt or part of one): hist
 * takes them, and they count as exact when everything before them did and the call's chunks
 * were at least the exact size (without one, any prompt evaluation: it starts on a whole
 * chunk). */
static inline void srv_slot_append_prompt(srv_slot *sl, const int32_t *tokens, size_t n) {
    uint32_t exact = srv_slot_exact_chunk(sl);
    if (sl->n_exact == sl->n_hist && (!exact || n >= exact)) sl->n_exact += n;
    memcpy(sl->hist + sl->n_hist, tokens, n * sizeof *tokens);
    __atomic_store_n(&sl->n_hist, sl->n_hist + n, __ATOMIC_RELAXED); /* read by /metrics */
}

typedef struct srv_slots {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    srv_slot *slot;
    unsigned n;
    uint32_t ctx;          /* positions of every session */
    cortiq_model *base;    /* the backbone instance */
    cortiq_session *first; /* the runtime's own session (on base): never freed here */
    bool first_parked;     /* first is in no slot (its slot moved to another instance) */
    unsigned waiting, max_waiting;
    /* the engine turn: tickets served in order */
    pthread_mutex_t turn_mu;
    pthread_cond_t turn_cv;
    uint64_t next_ticket, serving;
    /* continuous batching: decode steps waiting for the next batched pass, which the engine
     * thread evaluates (always the same thread, so the thread pool's caller keeps its core) */
    pthread_mutex_t batch_mu;
    pthread_cond_t batch_cv;  /* the decoding slots wait here for their step */
    pthread_cond_t engine_cv; /* the engine thread waits here for steps */
    pthread_t engine;
    bool engine_started, engine_stop;
    struct srv_decode *pending[16];
    unsigned n_pending;
    unsigned decoders; /* generations between their prompt and their end */
    bool no_batch;     /* the model refuses batched decode (mixture of experts): one by one */
    uint64_t batches, batched_tokens; /* for /metrics */
} srv_slots;

/* first: a session made by the caller (the runtime's own), used as slot 0; n - 1 more are
 * created with ctx positions. Starts the engine thread; srv_slots_free stops it (no request may
 * be decoding then). */
int srv_slots_init(srv_slots *s, cortiq_model *m, cortiq_session *first, unsigned n,
                   unsigned max_waiting, char *why, size_t why_len);
void srv_slots_free(srv_slots *s); /* frees the sessions it created, not `first` */

typedef enum {
    SRV_SLOT_OK,
    SRV_SLOT_QUEUE_FULL,
    SRV_SLOT_TIMEOUT,
    SRV_SLOT_STOPPING
} srv_slot_wait;

/* Take a free slot, preferring one whose session is on `model` and runs `task` (NULL: dense),
 * among those the one whose cache shares the longest prefix with prompt, then one on `model`;
 * waits up to timeout_s while all are busy. *stop (checked every 100 ms) ends the wait. */
srv_slot_wait srv_slots_acquire(srv_slots *s, const int32_t *prompt, size_t n_prompt,
                                const cortiq_model *model, const char *task, double timeout_s,
                                const volatile int *stop, srv_slot **out);
/* Put a taken slot's session on `model` (an instance of the same file): nothing when it is
 * there already, else a new session of ctx positions replaces the old (its cache is lost). -1
 * with why when the session cannot be made (memory); the slot keeps its old session then. */
int srv_slot_bind(srv_slots *s, srv_slot *slot, cortiq_model *model, char *why, size_t why_len);
/* Free the sessions the slots hold on `model` (before the instance is unloaded: no request
 * may be running on it). */
void srv_slots_unbind(srv_slots *s, const cortiq_model *model);
/* Make a taken slot run `task` (NULL: dense). A different task empties its cache (position 0:
 * the cached positions belong to the old task). -1 with why (the engine's message, which lists
 * the file's tasks) when the file has no such task. */
int srv_slot_use_task(srv_slots *s, srv_slot *slot, const char *task, char *why, size_t why_len);
void srv_slots_release(srv_slots *s, srv_slot *slot);
unsigned srv_slots_busy(srv_slots *s);
unsigned srv_slots_waiting(srv_slots *s);
/* positions held by all sessions, and their total capacity */
void srv_slots_kv_use(srv_slots *s, uint64_t *used, uint64_t *cap);

/* Evaluate tokens on a slot's session in the engine turn; keeps slot->hist in step. */
int srv_slot_eval(srv_slots *s, srv_slot *slot, const int32_t *tokens, size_t n, char *why,
                  size_t why_len);
/* One decode step of a slot, from its submission to its result. */
typedef struct srv_decode {
    srv_slot *slot;
    int32_t token;
    int rc;
    bool done;
    char why[CMF_ERR_MSG_MAX];
} srv_decode;

/* The next token of a decoding slot, evaluated by the engine thread in a batch with the other
 * slots' (see above). Submitting returns at once, so that the slot's own work for the token
 * it just sampled (its text, the HTTP stream) runs while the pass does; d must stay in place
 * until srv_slot_decode_wait returned, which every submission needs (the engine writes the
 * session and the slot's history until then). srv_slot_decode does both in turn. */
void srv_slot_decode_submit(srv_slots *s, srv_slot *slot, int32_t token, srv_decode *d);
int srv_slot_decode_wait(srv_slots *s, srv_decode *d, char *why, size_t why_len);
int srv_slot_decode(srv_slots *s, srv_slot *slot, int32_t token, char *why, size_t why_len);
/* A generation starts (+1) or stops (-1) decoding: how many the engine thread waits for. */
void srv_slots_decoders(srv_slots *s, int delta);
void srv_turn_take(srv_slots *s);
void srv_turn_give(srv_slots *s);

#endif
