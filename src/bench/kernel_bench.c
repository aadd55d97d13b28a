/* kernel_bench.c - read bandwidth and threaded kernel timing (see kernel_bench.h). */
#include "bench/kernel_bench.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cpu.h"
#include "common/hugepages.h"
#include "common/pieces.h"

double cq_bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define MAX_THREADS 64

/* Work shared out as the runtime shares a decode product (common/pieces.h): thread k of nt
 * owns units [k * n / nt, (k + 1) * n / nt) (on multiples of `step`), takes them in pieces
 * and then takes pieces of the other ranges. The two halves of a static split measured
 * finishing up to 22 % apart on the development VM, so a timing measured whichever vCPU the
 * hypervisor slowed at that moment. */
typedef struct {
    _Alignas(64) atomic_ullong taken; /* units of this range claimed (tag 1) */
} claim;

typedef struct {
    claim c[MAX_THREADS];
    uint64_t n, step;
    unsigned nt;
} pieces;

static void pieces_init(pieces *s, uint64_t n, uint64_t step, unsigned nt) {
    for (unsigned k = 0; k < nt; k++)
        atomic_init(&s->c[k].taken, 0);
    s->n = n, s->step = step, s->nt = nt;
}

/* The next piece [*a, *b) for thread tid (its own range first); false when none is left. */
static bool pieces_next(pieces *s, unsigned tid, uint64_t *a, uint64_t *b) {
    for (unsigned i = 0; i < s->nt; i++) {
        unsigned v = (tid + i) % s->nt;
        uint64_t lo = s->n * v / s->nt / s->step * s->step,
                 end = v + 1 == s->nt ? s->n : s->n * (v + 1) / s->nt / s->step * s->step;
        if (cq_take_piece(&s->c[v].taken, 1, lo, end, s->step, a, b)) return true;
    }
    return false;
}

typedef struct {
    const uint8_t *p;
    pieces *sh;
    unsigned tid;
    uint64_t sum;
    double cpu;
} sum_job;

static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t sum_scalar(const uint8_t *p, size_t n) {
    uint64_t a[4] = {0, 0, 0, 0}, v;
    for (size_t i = 0; i < n; i += 32)
        for (int k = 0; k < 4; k++) {
            memcpy(&v, p + i + 8 * k, 8);
            a[k] += v;
        }
    return a[0] + a[1] + a[2] + a[3];
}

static void *sum_thread(void *arg) {
    sum_job *j = arg;
    double c0 = thread_cpu_now();
    cq_isa isa = cq_cpu_isa();
    uint64_t a, b;
    j->sum = 0;
    while (pieces_next(j->sh, j->tid, &a, &b)) /* units of 256 bytes */
        j->sum += isa >= CQ_ISA_AVX512 ? cq_bench_sum_avx512(j->p + 256 * a, 256 * (b - a))
                  : isa >= CQ_ISA_AVX2 ? cq_bench_sum_avx2(j->p + 256 * a, 256 * (b - a))
                                       : sum_scalar(j->p + 256 * a, 256 * (b - a));
    j->cpu = thread_cpu_now() - c0;
    return NULL;
}

/* Run fn(jobs[k]) on nthreads threads (the calling thread takes the last share). */
static int run_threads(void *(*fn)(void *), void *jobs, size_t job_size, unsigned nthreads) {
    pthread_t th[MAX_THREADS];
    unsigned started = 0;
    int ok = 1;
    for (unsigned k = 0; k + 1 < nthreads; k++, started++)
        if (pthread_create(&th[k], NULL, fn, (char *)jobs + k * job_size)) {
            ok = 0;
            break;
        }
    if (ok) fn((char *)jobs + (nthreads - 1) * job_size);
    for (unsigned k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    return ok;
}

struct cq_bench_bw {
    uint8_t *buf;
    size_t share; /* bytes per thread, a multiple of 256 */
    unsigned nthreads;
};

cq_bench_bw *cq_bench_bw_new(size_t bytes, unsigned nthreads, bool huge) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    size_t share = bytes / nthreads / 256 * 256;
    cq_bench_bw *b = share ? malloc(sizeof *b) : NULL;
    if (!b) return NULL;
    *b = (cq_bench_bw){cq_huge_alloc(share * nthreads, huge), share, nthreads};
    if (!b->buf) {
        free(b);
        return NULL;
    }
    memset(b->buf, 1, share * nthreads);
    return b;
}

void cq_bench_bw_free(cq_bench_bw *b) {
    if (!b) return;
    cq_huge_free(b->buf, b->share * b->nthreads);
    free(b);
}

double cq_bench_bw_run(cq_bench_bw *b, unsigned reps, double *cpu_gbs) {
    unsigned nthreads = b->nthreads;
    size_t share = b->share;
    sum_job jobs[MAX_THREADS];
    pieces sh;
    double best = 1e30, best_cpu = 1e30;
    uint64_t check = 0;
    for (unsigned r = 0; r < reps; r++) {
        pieces_init(&sh, share * nthreads / 256, 64, nthreads); /* pieces of >= 16 KiB */
        for (unsigned k = 0; k < nthreads; k++)
            jobs[k] = (sum_job){b->buf, &sh, k, 0, 0};
        double t0 = cq_bench_now();
        if (!run_threads(sum_thread, jobs, sizeof jobs[0], nthreads)) return -1;
        double dt = cq_bench_now() - t0;
        if (dt < best) best = dt;
        double cpu = 0;
        for (unsigned k = 0; k < nthreads; k++) {
            check += jobs[k].sum;
            if (jobs[k].cpu > cpu) cpu = jobs[k].cpu;
        }
        if (cpu < best_cpu) best_cpu = cpu;
    }
    /* every byte is 1, so each 8-byte word adds 0x0101010101010101: a wrong sum means the
     * loop did not read what it claims */
    if (check != (uint64_t)reps * (share * nthreads / 8) * 0x0101010101010101ull) return -1;
    if (cpu_gbs) *cpu_gbs = best_cpu > 0 ? (double)(share * nthreads) / best_cpu / 1e9 : 0;
    return (double)(share * nthreads) / best / 1e9;
}

double cq_bench_read_bw(size_t bytes, unsigned nthreads, unsigned reps, double *cpu_gbs,
                        bool huge) {
    cq_bench_bw *b = cq_bench_bw_new(bytes, nthreads, huge);
    if (!b) return -1;
    double gbs = cq_bench_bw_run(b, reps, cpu_gbs);
    cq_bench_bw_free(b);
    return gbs;
}

typedef struct {
    const cmf_qmat *m;
    const float *X;
    size_t n;
    float *Y;
    pieces *sh;
    unsigned tid, flags;
    double cpu;
} mm_job;

static void *mm_thread(void *arg) {
    mm_job *j = arg;
    double c0 = thread_cpu_now();
    uint64_t r0, r1; /* pieces of 16-row multiples, as the runtime's */
    while (pieces_next(j->sh, j->tid, &r0, &r1))
        cmf_matmul_ex(j->m, j->X, j->n, j->m->cols, j->Y + r0, j->m->rows, r0, r1, j->flags);
    j->cpu = thread_cpu_now() - c0;
    return NULL;
}

double cq_bench_matmul(const cmf_qmat *m, const float *X, size_t n, float *Y, unsigned nthreads,
                       unsigned reps, unsigned flags, double *cpu_s) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    mm_job jobs[MAX_THREADS];
    pieces sh;
    for (unsigned k = 0; k < nthreads; k++)
        jobs[k] = (mm_job){m, X, n, Y, &sh, k, flags, 0};
    double best = 1e30, best_cpu = 1e30;
    for (unsigned r = 0; r < reps; r++) {
        pieces_init(&sh, m->rows, 16, nthreads);
        double t0 = cq_bench_now();
        if (!run_threads(mm_thread, jobs, sizeof jobs[0], nthreads)) return -1;
        double dt = cq_bench_now() - t0, cpu = 0;
        if (dt < best) best = dt;
        for (unsigned k = 0; k < nthreads; k++)
            if (jobs[k].cpu > cpu) cpu = jobs[k].cpu;
        if (cpu < best_cpu) best_cpu = cpu;
    }
    if (cpu_s) *cpu_s = best_cpu;
    return best;
}

double cq_bench_matmul_near_bw(const cmf_qmat *m, const float *X, size_t n, float *Y,
                               unsigned nthreads, unsigned reps, unsigned flags, double *cpu_s,
                               cq_bench_bw *bw, double *bw_gbs, double *bw_cpu_gbs) {
    double c0 = 0, c1 = 0, b0 = cq_bench_bw_run(bw, reps, &c0);
    double t = cq_bench_matmul(m, X, n, Y, nthreads, reps, flags, cpu_s);
    double b1 = cq_bench_bw_run(bw, reps, &c1);
    if (b0 <= 0 || b1 <= 0 || t <= 0) return -1;
    *bw_gbs = b0 > b1 ? b0 : b1;
    if (bw_cpu_gbs) *bw_cpu_gbs = c0 > c1 ? c0 : c1;
    return t;
}
