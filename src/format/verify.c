/* verify.c - the whole hash chain (spec §8, §8.1): header and directory hashes, section hashes,
 * every tensor's hash64. Tensor bytes are hashed in word-aligned chunks by a pool of threads;
 * hash64's fold is an XOR, so chunk results combine in any order. Every problem is reported. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/bytes.h"
#include "cortiq/hash.h"
#include "format/file_impl.h"
#include "format/hash64_impl.h"

#define CHUNK_WORDS ((size_t)1 << 20) /* 8 MiB per work item */

typedef struct work_item {
    uint32_t tensor;
    uint64_t first_word, n_words;
    uint64_t fold;
} work_item;

typedef struct verify_job {
    const cmf_file *f;
    work_item *items;
    size_t n_items;
    atomic_size_t next;
} verify_job;

/* Map a chunk's pages in one call instead of one fault per 4 KiB page (a cold mmap of a
 * file in the page cache otherwise spends most of verify's time in page faults). */
static void prefault(const uint8_t *p, size_t n) {
#ifdef MADV_POPULATE_READ
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1);
    madvise((void *)a, n + ((uintptr_t)p - a), MADV_POPULATE_READ); /* best effort: a hint */
#else
    (void)p, (void)n;
#endif
}

static void *worker(void *arg) {
    verify_job *j = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n_items) break;
        work_item *w = &j->items[i];
        const cmf_tensor *t = &j->f->tensors[w->tensor];
        prefault(t->data + 8 * w->first_word, (size_t)(8 * w->n_words));
        w->fold =
            cmf_hash64_fold_words(t->data + 8 * w->first_word, (size_t)w->n_words, w->first_word);
    }
    return NULL;
}

static void report(cmf_problem_fn fn, void *user, cmf_verify_stats *s, const char *path,
                   cmf_status code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void report(cmf_problem_fn fn, void *user, cmf_verify_stats *s, const char *path,
                   cmf_status code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->problems++;
    if (fn) fn(user, path, code, msg);
}

static void check_meta(const cmf_shard *sh, cmf_problem_fn fn, void *user, cmf_verify_stats *s,
                       cmf_status *first) {
    const cmf_envelope *e = &sh->env;
    const cmf_header *h = &sh->header;
    struct {
        const char *what;
        uint64_t off, len, want;
        int present;
    } items[] = {
        {"header", e->header_off, e->header_len, e->header_hash, 1},
        {"directory", e->dir_off, e->dir_len, e->dir_hash, 1},
        {"masks section", e->masks_off, e->masks_len, h->has_masks_hash ? h->masks_hash : 0,
         e->masks_off != 0},
        {"vocab section", e->vocab_off, e->vocab_len, h->has_vocab_hash ? h->vocab_hash : 0,
         e->vocab_off != 0},
        {"index section", e->index_off, e->index_len, h->has_index_hash ? h->index_hash : 0,
         e->index_off != 0},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        if (!items[i].present) continue;
        if (!items[i].want) {
            /* zero = absent (spec §8.1): older files pass, but say so for the two envelope hashes
             */
            continue;
        }
        uint64_t got = cmf_hash64(sh->base + items[i].off, (size_t)items[i].len);
        s->bytes_hashed += items[i].len;
        if (got != items[i].want) {
            char a[17], b[17];
            cmf_hash64_to_hex(items[i].want, a);
            cmf_hash64_to_hex(got, b);
            report(fn, user, s, sh->path, CMF_E_HASH,
                   "%s hash64 mismatch: stored %s, bytes hash to %s", items[i].what, a, b);
            if (!*first) *first = CMF_E_HASH;
        }
    }
}

cmf_status cmf_verify(const cmf_file *f, unsigned threads, cmf_problem_fn fn, void *user,
                      cmf_verify_stats *stats) {
    cmf_verify_stats s;
    memset(&s, 0, sizeof s);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cmf_status first = CMF_OK;
    for (size_t i = 0; i < f->n_shards; i++)
        check_meta(&f->shards[i], fn, user, &s, &first);

    size_t n_items = 0;
    for (size_t i = 0; i < f->n_tensors; i++)
        n_items += (size_t)(f->tensors[i].nbytes / 8 / CHUNK_WORDS) + 1;
    verify_job job = {.f = f, .items = calloc(n_items ? n_items : 1, sizeof(work_item))};
    if (!job.items) {
        report(fn, user, &s, f->path, CMF_E_NOMEM, "out of memory planning %zu hash chunks",
               n_items);
        if (stats) *stats = s;
        return CMF_E_NOMEM;
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        uint64_t words = f->tensors[i].nbytes / 8;
        for (uint64_t w = 0; w == 0 || w < words; w += CHUNK_WORDS) {
            work_item *it = &job.items[job.n_items++];
            it->tensor = (uint32_t)i;
            it->first_word = w;
            it->n_words = words - w < CHUNK_WORDS ? words - w : CHUNK_WORDS;
        }
    }
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    if (threads > 64) threads = 64;
    pthread_t tids[64];
    unsigned started = 0;
    for (unsigned t = 1; t < threads; t++)
        if (pthread_create(&tids[started], NULL, worker, &job) == 0) started++;
    worker(&job);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tids[t], NULL);

    /* combine: items of one tensor are consecutive */
    for (size_t k = 0; k < job.n_items;) {
        uint32_t ti = job.items[k].tensor;
        const cmf_tensor *t = &f->tensors[ti];
        uint64_t fold = 0;
        for (; k < job.n_items && job.items[k].tensor == ti; k++)
            fold ^= job.items[k].fold;
        uint64_t words = t->nbytes / 8;
        if (t->nbytes % 8) {
            uint8_t last[8] = {0};
            memcpy(last, t->data + 8 * words, t->nbytes % 8);
            fold ^= hash64_fmix(ld_u64(last)) ^ (words * HASH64_SALT);
        }
        uint64_t got = cmf_hash64_finish(fold, t->nbytes);
        s.tensors_checked++;
        s.bytes_hashed += t->nbytes;
        if (got != t->hash) {
            char a[17], b[17];
            cmf_hash64_to_hex(t->hash, a);
            cmf_hash64_to_hex(got, b);
            report(fn, user, &s, f->shards[t->shard].path, CMF_E_HASH,
                   "tensor '%s' hash64 mismatch: stored %s, bytes hash to %s", t->name, a, b);
            s.tensors_bad++;
            if (!first) first = CMF_E_HASH;
        }
    }
    free(job.items);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (stats) *stats = s;
    return first;
}
