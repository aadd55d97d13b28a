/* bench_handover.c - the hand-over of a buffer between two cores, as a prefill's prepared
 * activations go (docs/KERNELS.md, "Streamed out"): core 1 reads the buffer (a product reading
 * every group), core 0 then rewrites it (the next regroup), core 1 reads it again. Core 0's
 * write is timed for three forms: plain stores, plain stores with `prefetchw` two KiB ahead, and
 * non-temporal stores with a fence; so is core 1's read after it. What a plain store costs
 * depends on how the host places the two vCPUs: cheap where they share a cache, an ownership
 * round trip per line where they do not.
 *
 *   bench_handover [--kb K] [--reps R]      (default 74 KiB: a 128-token bf16 batch of 576
 *                                            columns; 60 reps, the first 10 not timed)
 *
 * Prints the mean write and read-after times of each form, in microseconds. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FORM_PLAIN, FORM_PREFETCHW, FORM_STREAM, FORMS };
static const char *const form_names[FORMS] = {"plain", "prefetchw", "stream"};

typedef struct handover {
    unsigned char *buf;
    size_t bytes;
    int reps, warm;
    atomic_int step;   /* 4 per rep: core 1 read, core 0 write, core 1 timed read, done */
    double read_after; /* core 1's timed reads, summed */
} handover;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void wait_step(handover *h, int s) {
    while (atomic_load_explicit(&h->step, memory_order_acquire) != s)
        _mm_pause();
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
}

static volatile long sink;

static void *reader(void *arg) {
    handover *h = arg;
    pin(1);
    for (int r = 0; r < h->reps; r++) {
        wait_step(h, 4 * r + 1);
        long s = 0;
        for (size_t i = 0; i < h->bytes; i += 64) /* every line into this core's cache */
            s += h->buf[i];
        sink = s;
        atomic_store_explicit(&h->step, 4 * r + 2, memory_order_release);
        wait_step(h, 4 * r + 3);
        double t0 = now();
        s = 0;
        for (size_t i = 0; i < h->bytes; i += 8)
            s += *(const long *)(const void *)(h->buf + i);
        sink = s;
        if (r >= h->warm) h->read_after += now() - t0;
        atomic_store_explicit(&h->step, 4 * r + 4, memory_order_release);
    }
    return NULL;
}

__attribute__((target("avx2,prfchw"))) static void write_buf(unsigned char *p, size_t n, int form) {
    const __m256i v = _mm256_set1_epi32(3);
    for (size_t i = 0; i < n; i += 64) {
        __m256i *d = (__m256i *)(void *)(p + i);
        if (form == FORM_STREAM) {
            _mm256_stream_si256(d, v), _mm256_stream_si256(d + 1, v);
            continue;
        }
        if (form == FORM_PREFETCHW && i + 2048 < n)
            __builtin_prefetch(p + i + 2048, 1, 3); /* prefetchw */
        _mm256_store_si256(d, v), _mm256_store_si256(d + 1, v);
    }
    if (form == FORM_STREAM) _mm_sfence();
}

int main(int argc, char **argv) {
    size_t kb = 74;
    int reps = 60;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--kb"))
            kb = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_handover [--kb K] [--reps R]\n");
            return 2;
        }
    }
    if (!__builtin_cpu_supports("avx2") || kb < 1 || reps < 11) return 2;
    printf("%zu KiB written by core 0 after core 1 read it, %d reps (mean of the last %d)\n", kb,
           reps, reps - 10);
    printf("%-10s %12s %18s\n", "form", "write us", "read after us");
    for (int form = 0; form < FORMS; form++) {
        handover h = {.bytes = kb * 1024, .reps = reps, .warm = 10};
        h.buf = aligned_alloc(64, h.bytes);
        if (!h.buf) return 3;
        memset(h.buf, 1, h.bytes);
        atomic_init(&h.step, 0);
        pin(0);
        pthread_t t;
        if (pthread_create(&t, NULL, reader, &h)) return 3;
        double write = 0;
        for (int r = 0; r < reps; r++) {
            atomic_store_explicit(&h.step, 4 * r + 1, memory_order_release);
            wait_step(&h, 4 * r + 2);
            double t0 = now();
            write_buf(h.buf, h.bytes, form);
            if (r >= h.warm) write += now() - t0;
            atomic_store_explicit(&h.step, 4 * r + 3, memory_order_release);
            wait_step(&h, 4 * r + 4);
        }
        pthread_join(t, NULL);
        int n = reps - h.warm;
        printf("%-10s %12.1f %18.1f\n", form_names[form], write / n * 1e6, h.read_after / n * 1e6);
        free(h.buf);
    }
    return 0;
}
