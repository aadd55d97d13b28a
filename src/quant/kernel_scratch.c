/* kernel_scratch.c - per-thread scratch memory for the kernels' per-call buffers (quantized or
 * reordered activations, packed panels).
 *
 * A decode step runs every matrix product once per token on every pool thread, so a buffer
 * allocated and freed per call is an allocation per token per matrix (and for a prefill chunk
 * of megabytes, an mmap, its page faults and an munmap per call). Each thread instead keeps
 * one block per slot, grown when a call needs more and freed when the thread exits. */
#include <pthread.h>
#include <stdlib.h>

#include "quant/kernel_impl.h"

typedef struct {
    void *p[CQ_SCRATCH_SLOTS];
    size_t n[CQ_SCRATCH_SLOTS];
} scratch_set;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void scratch_free(void *v) {
    scratch_set *s = v;
    for (int i = 0; i < CQ_SCRATCH_SLOTS; i++)
        free(s->p[i]);
    free(s);
}

static void key_make(void) {
    key_ok = pthread_key_create(&key, scratch_free) == 0;
}

void *cq_kernel_scratch(cq_scratch_slot slot, size_t bytes) {
    if ((unsigned)slot >= CQ_SCRATCH_SLOTS) return NULL;
    pthread_once(&key_once, key_make);
    if (!key_ok) return NULL;
    scratch_set *s = pthread_getspecific(key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return NULL;
        if (pthread_setspecific(key, s)) {
            free(s);
            return NULL;
        }
    }
    if (s->n[slot] < bytes) {
        size_t want = (bytes + 4095) & ~(size_t)4095; /* whole pages; also a multiple of 64 */
        if (want < bytes) return NULL;                /* overflow */
        void *p = aligned_alloc(64, want);
        if (!p) return NULL;
        free(s->p[slot]);
        s->p[slot] = p;
        s->n[slot] = want;
    }
    return s->p[slot];
}
