/* bench_util.h - timing, RSS and a memory read-bandwidth probe shared by the benchmarks. */
#ifndef CORTIQ_BENCH_UTIL_H
#define CORTIQ_BENCH_UTIL_H

#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Resident set size in bytes, from /proc/self/statm. */
static inline uint64_t bench_rss(void) {
    unsigned long size = 0, res = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (fp) {
        if (fscanf(fp, "%lu %lu", &size, &res) != 2) res = 0;
        fclose(fp);
    }
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

typedef struct bw_job {
    const uint8_t *p;
    size_t n;
    uint64_t out;
} bw_job;

/* Read n bytes with 256-bit loads (available on every machine we target) and fold them. */
__attribute__((target("avx2"))) static void *bw_worker(void *arg) {
    bw_job *j = arg;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= j->n; i += 128) {
        _mm_prefetch((const char *)(j->p + i + 2048), _MM_HINT_T0);
        _mm_prefetch((const char *)(j->p + i + 2112), _MM_HINT_T0);
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(j->p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(j->p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(j->p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(j->p + i + 96)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t l[4];
    _mm256_storeu_si256((__m256i *)l, a0);
    j->out = l[0] ^ l[1] ^ l[2] ^ l[3];
    return NULL;
}

/* Read bandwidth (bytes/s) over [p, p+n) with `threads` threads; best of `reps`. */
static inline double bench_read_bandwidth(const uint8_t *p, size_t n, unsigned threads, int reps) {
    double best = 0;
    for (int r = 0; r < reps; r++) {
        pthread_t t[64];
        bw_job j[64];
        size_t per = n / threads / 128 * 128;
        double t0 = bench_now();
        for (unsigned k = 0; k < threads; k++) {
            j[k] = (bw_job){p + k * per, per, 0};
            pthread_create(&t[k], NULL, bw_worker, &j[k]);
        }
        for (unsigned k = 0; k < threads; k++)
            pthread_join(t[k], NULL);
        double bw = (double)(per * threads) / (bench_now() - t0);
        if (bw > best) best = bw;
    }
    return best;
}

#endif
