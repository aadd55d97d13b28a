/* bench_mat.h - what the one-thread kernel benchmarks (bench_gemm, bench_float_paths) share: the
 * calling thread's CPU clock, a random valid matrix of a dtype (tests/quant/kernel_gen.h) with
 * random activations, and the --shape option with the Qwen2.5-0.5B layer's shapes as default. */
#ifndef CORTIQ_BENCH_MAT_H
#define CORTIQ_BENCH_MAT_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../tests/quant/kernel_gen.h"
#include "cortiq/kernels.h"

#define BENCH_SHAPES_MAX 16

/* CPU time of the calling thread: other load on the machine changes it little. */
static inline double bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* m bound to a random valid payload of dt (returned: free it after cmf_qmat_free), seeded from
 * the shape; *X gets n tokens of activations in [-1, 1). Exits on failure. */
static inline uint8_t *bench_mat(cmf_dtype dt, uint64_t rows, uint64_t cols, size_t n, cmf_qmat *m,
                                 float **X) {
    kg_rng r = {rows * 31 + cols};
    kg_opts o = {0, 0, 0};
    uint64_t nbytes;
    uint8_t *p = kg_payload(dt, rows, cols, &r, &o, &nbytes);
    cmf_err err = {0};
    if (cmf_qmat_init(m, dt, rows, cols, p, nbytes, "w", &err) != CMF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    *X = malloc(n * cols * sizeof **X);
    for (size_t i = 0; i < n * cols; i++)
        (*X)[i] = kg_unif(&r, -1, 1);
    return p;
}

/* One --shape ROWSxCOLS into shapes[*ns]; false (said on stderr) when malformed or too many. */
static inline bool bench_shape_arg(const char *arg, uint64_t shapes[][2], size_t *ns) {
    unsigned long long r, c;
    char tail;
    if (*ns == BENCH_SHAPES_MAX || sscanf(arg, "%llux%llu%c", &r, &c, &tail) != 2 || !r || !c ||
        r > (1u << 20) || c > (1u << 20)) {
        fprintf(stderr, "--shape %s: want ROWSxCOLS, each 1 to 1048576, at most %d\n", arg,
                BENCH_SHAPES_MAX);
        return false;
    }
    shapes[*ns][0] = r, shapes[*ns][1] = c, ++*ns;
    return true;
}

/* Without --shape: the Qwen2.5-0.5B layer's q / o, gate / up, down and k / v shapes. */
static inline void bench_default_shapes(uint64_t shapes[][2], size_t *ns) {
    static const uint64_t qwen[][2] = {{896, 896}, {4864, 896}, {896, 4864}, {128, 896}};
    if (*ns) return;
    for (; *ns < 4; ++*ns)
        shapes[*ns][0] = qwen[*ns][0], shapes[*ns][1] = qwen[*ns][1];
}

#endif
