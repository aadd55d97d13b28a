/* kernel_bench.h - measuring the machine's read bandwidth and a kernel's throughput, for
 * bench/bench_matvec.c and `cortiq bench quant`. Internal to the project (not installed). */
#ifndef CORTIQ_BENCH_KERNEL_BENCH_H
#define CORTIQ_BENCH_KERNEL_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/kernels_engine.h"

/* Monotonic clock in seconds. */
double cq_bench_now(void);

/* Read bandwidth in GB/s (1e9 bytes/s): nthreads threads sum a `bytes`-byte buffer with the
 * widest vector loads the CPU has, each its own share in pieces of half what is left and then
 * pieces of the others' shares (as the runtime splits a decode product, so one thread that a
 * virtual machine slows does not hold the rest back); the best of `reps` passes
 * (the buffer is written once first so every page is resident). If cpu_gbs is not NULL it
 * receives the rate computed from the slowest thread's CPU time instead of the wall time
 * (see cq_bench_matmul). Returns a negative value when the buffer cannot be allocated or a
 * thread cannot be started. */
double cq_bench_read_bw(size_t bytes, unsigned nthreads, unsigned reps, double *cpu_gbs, bool huge);

/* The same probe keeping its buffer, so the bandwidth can be measured again next to every
 * kernel timing. On a shared or virtual machine it drifts by tens of percent within minutes
 * (18-31 GB/s on the 2-core development VM, docs/PERFORMANCE.md); compared with a figure taken
 * minutes earlier, a kernel would be charged with that drift. NULL when out of memory. */
typedef struct cq_bench_bw cq_bench_bw;
/* huge: the buffer on 2 MiB pages (cq_huge_alloc), as the runtime keeps its weights */
cq_bench_bw *cq_bench_bw_new(size_t bytes, unsigned nthreads, bool huge);
double cq_bench_bw_run(cq_bench_bw *b, unsigned reps, double *cpu_gbs);
void cq_bench_bw_free(cq_bench_bw *b);

/* Seconds of the fastest of `reps` calls of cmf_matmul_ex(m, X, n, cols, Y, rows, ...) with
 * the rows shared out like the probe's bytes (pieces of 16-row multiples, as the runtime's
 * decode products take them). X holds n * cols floats,
 * Y n * rows. If cpu_s is not NULL it receives the smallest, over the reps, of the largest
 * per-thread CPU time: the wall time the call would take if every thread had a core to
 * itself (robust against other processes competing for the cores). Returns a negative
 * value if a thread cannot be started. */
double cq_bench_matmul(const cmf_qmat *m, const float *X, size_t n, float *Y, unsigned nthreads,
                       unsigned reps, unsigned flags, double *cpu_s);

/* cq_bench_matmul bracketed by bandwidth probes: the best of `reps` probe passes just before
 * and the best of `reps` just after (as many as the kernel's timed calls, so neither side gets
 * more chances at a lucky pass). *bw_gbs / *bw_cpu_gbs receive the higher of the two sides,
 * i.e. the bandwidth the machine showed while the kernel ran, erring high (so a percentage of
 * it errs low). Negative when a measurement fails. */
double cq_bench_matmul_near_bw(const cmf_qmat *m, const float *X, size_t n, float *Y,
                               unsigned nthreads, unsigned reps, unsigned flags, double *cpu_s,
                               cq_bench_bw *bw, double *bw_gbs, double *bw_cpu_gbs);

/* A payload of the same dtype and cols with rows_out rows, row r being row r % m->rows of m
 * (*out from cq_huge_alloc(*out_nbytes, huge): on 2 MiB pages when huge; release
 * with cq_huge_free(*out, *out_nbytes)). CMF_E_NOMEM, CMF_E_LIMIT when a u32 field of the
 * layout would overflow, CMF_E_UNSUPPORTED for q4_block with cols % 32 != 0. */
cmf_status cq_qmat_tile_rows(const cmf_qmat *m, uint64_t rows_out, bool huge, uint8_t **out,
                             uint64_t *out_nbytes, cmf_err *err);

/* The vector sum loops behind cq_bench_read_bw (one per tier; n is a multiple of 256). */
uint64_t cq_bench_sum_avx512(const uint8_t *p, size_t n);
uint64_t cq_bench_sum_avx2(const uint8_t *p, size_t n);

#endif
