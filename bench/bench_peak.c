/* bench_peak.c - the machine's compute roof for prefill: the clock each core runs at and the
 * multiply-add throughput of the instructions the GEMMs use, per thread and for T threads.
 *
 * Clock: a chain of dependent register-to-register 64-bit adds retires one per cycle on every
 * x86 core we target, so adds / second is the clock under load (turbo and the hypervisor's share
 * included). Not adds of an immediate: Golden Cove cores (Sapphire Rapids) fold those chains at
 * rename, several per cycle.
 * Throughput: 12 independent accumulator chains per thread (more than FMA latency x ports, so
 * the ports, not the latency, bound it; the AVX2 int8 row 6, whose chains carry only an add) of
 *   - f32 FMA on 256-bit (AVX2) and 512-bit (AVX-512) vectors: 2 flops per lane;
 *   - int8 dot products as the integer GEMMs issue them: AVX-512 VNNI vpdpbusd (64 u8 x s8
 *     multiply-adds into 16 int32), AVX-VNNI-less AVX2 vpmaddubsw + vpmaddwd + vpaddd (32
 *     multiply-adds per 3 instructions);
 *   - the bf16 dot product of the bf16 prefill (AVX-512 BF16 vdpbf16ps: 32 bf16 x bf16
 *     multiply-adds into 16 f32), given in flops like the FMA rows;
 *   - AMX tile products, 4 independent 16 x 16 accumulator tiles (the f16 / bf16 prefill's
 *     2 x 2 blocking): tdpbf16ps (16 x 16 x 32 bf16 multiply-adds, in flops) and tdpbssd
 *     (16 x 16 x 64 int8 multiply-adds), operands kept in tiles (the instruction's own rate).
 * Times are each thread's CPU time (the rate of a thread that has a core to itself; on a quiet
 * machine the same as wall time). Each result is also given per cycle and thread, against the
 * clock of the same thread read by adds between its slices of the test (a guest's speed moves
 * within seconds, so a clock read once at the start can put a row above what the core can
 * issue): FMA ports x lanes x 2 for the float rows, the derivation docs/PERFORMANCE.md quotes.
 *
 * usage: bench_peak [THREADS] [SECONDS_PER_TEST]   (defaults 2, 0.5) */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "common/cpu.h"

/* A thread's share of a test: `slices` times, `adds` x 64 dependent adds (the clock) and then
 * `iters` steps of fn, each timed apart, so that the clock is read in the same seconds as the
 * throughput it divides (the guests' speed moves within seconds). */
typedef struct peak_job {
    uint64_t (*fn)(uint64_t iters);
    uint64_t iters, adds;
    int slices;
    double secs, add_secs;
    uint64_t sink;
} peak_job;

/* `iters` x 64 dependent adds: the clock. */
static uint64_t add_chain(uint64_t iters) {
    uint64_t x = 1, one = 1;
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile(".rept 64\n\taddq %1, %0\n\t.endr" : "+r"(x) : "r"(one));
    }
    return x;
}

/* 12 independent accumulators, named (an array would be kept in memory and stored every step) */
#define CHAIN_VARS(T, init)                                                                        \
    T a0 = init(0), a1 = init(1), a2 = init(2), a3 = init(3), a4 = init(4), a5 = init(5),          \
      a6 = init(6), a7 = init(7), a8 = init(8), a9 = init(9), a10 = init(10), a11 = init(11)
#define CHAIN_STEP(op)                                                                             \
    a0 = op(a0), a1 = op(a1), a2 = op(a2), a3 = op(a3), a4 = op(a4), a5 = op(a5), a6 = op(a6),     \
    a7 = op(a7), a8 = op(a8), a9 = op(a9), a10 = op(a10), a11 = op(a11)
#define CHAIN_FOLD(add)                                                                            \
    add(add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7))),                         \
        add(add(a8, a9), add(a10, a11)))

#define YF(k)   _mm256_set1_ps((float)(k))
#define YFMA(a) _mm256_fmadd_ps(a, m, c)
__attribute__((target("avx2,fma"))) static uint64_t fma_ymm(uint64_t iters) {
    __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    CHAIN_VARS(__m256, YF);
    for (uint64_t i = 0; i < iters; i++) {
        CHAIN_STEP(YFMA);
    }
    float o[8];
    _mm256_storeu_ps(o, CHAIN_FOLD(_mm256_add_ps));
    return (uint64_t)o[0];
}

#define ZF(k)   _mm512_set1_ps((float)(k))
#define ZFMA(a) _mm512_fmadd_ps(a, m, c)
__attribute__((target("avx512f"))) static uint64_t fma_zmm(uint64_t iters) {
    __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    CHAIN_VARS(__m512, ZF);
    for (uint64_t i = 0; i < iters; i++) {
        CHAIN_STEP(ZFMA);
    }
    return (uint64_t)_mm512_reduce_add_ps(CHAIN_FOLD(_mm512_add_ps));
}

#define ZI(k)  _mm512_set1_epi32(k)
#define ZDP(a) _mm512_dpbusd_epi32(a, w, x)
__attribute__((target("avx512f,avx512vnni"))) static uint64_t vnni_zmm(uint64_t iters) {
    __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(-2);
    CHAIN_VARS(__m512i, ZI);
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(w), "+v"(x)); /* no hoisting of anything out of the loop */
        CHAIN_STEP(ZDP);
    }
    return (uint64_t)_mm512_reduce_add_epi32(CHAIN_FOLD(_mm512_add_epi32));
}

#define ZBF(a) _mm512_dpbf16_ps(a, (__m512bh)w, (__m512bh)x)
__attribute__((target("avx512f,avx512bf16"))) static uint64_t bf16dot_zmm(uint64_t iters) {
    __m512i w = _mm512_set1_epi32(0x3f803f80), x = _mm512_set1_epi32(0x3f003f00); /* 1, 0.5 */
    CHAIN_VARS(__m512, ZF);
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(w), "+v"(x));
        CHAIN_STEP(ZBF);
    }
    return (uint64_t)_mm512_reduce_add_ps(CHAIN_FOLD(_mm512_add_ps));
}

/* AMX: 8 tiles of 16 rows x 64 bytes; C in 0-3, A in 4-5, B in 6-7 */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

__attribute__((target("amx-tile"))) static void amx_setup(void) {
    static const uint8_t ops[1024] = {1, 2, 3};
    amx_config cfg = {.palette = 1};
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ops, 64);
    _tile_loadd(5, ops, 64);
    _tile_loadd(6, ops, 64);
    _tile_loadd(7, ops, 64);
}

__attribute__((target("amx-tile"))) static uint64_t amx_finish(void) {
    float c[256];
    _tile_stored(0, c, 64);
    _tile_release();
    return (uint64_t)c[0];
}

/* 4 independent tile products per step, OP (immediates: C, A, B) for the 2 x 2 blocking */
#define AMX_LOOP(NAME, TARGET, OP)                                                                 \
    __attribute__((target(TARGET))) static uint64_t NAME(uint64_t iters) {                         \
        amx_setup();                                                                               \
        for (uint64_t i = 0; i < iters; i++) {                                                     \
            OP(0, 4, 6);                                                                           \
            OP(1, 4, 7);                                                                           \
            OP(2, 5, 6);                                                                           \
            OP(3, 5, 7);                                                                           \
        }                                                                                          \
        return amx_finish();                                                                       \
    }
AMX_LOOP(amx_bf16, "amx-tile,amx-bf16", _tile_dpbf16ps)
AMX_LOOP(amx_int8, "amx-tile,amx-int8", _tile_dpbssd)

/* The AVX2 int8 dot product as the GEMM issues it: vpmaddubsw (u8 x s8 -> s16 pairs) of weights
 * and activations, vpmaddwd with ones (-> s32), vpaddd into the accumulator; 32 multiply-adds per
 * accumulator and step. Six accumulators, each with its own product (3 weight x 2 activation
 * vectors; with more, gcc keeps sums on the stack): were the products alike, the compiler would
 * compute one for all the chains, and the row would time the adds. */
#define YMB(w, x) _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), one)
__attribute__((target("avx2"))) static uint64_t maddubs_ymm(uint64_t iters) {
    __m256i w0 = _mm256_set1_epi8(3), w1 = _mm256_set1_epi8(5), w2 = _mm256_set1_epi8(7),
            x0 = _mm256_set1_epi8(-2), x1 = _mm256_set1_epi8(-3), one = _mm256_set1_epi16(1);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
    for (uint64_t i = 0; i < iters; i++) {
        /* the products depend on the step, as a GEMM's operands do: no hoisting */
        __asm__ volatile("" : "+x"(w0), "+x"(w1), "+x"(w2), "+x"(x0), "+x"(x1));
        a0 = _mm256_add_epi32(a0, YMB(w0, x0));
        a1 = _mm256_add_epi32(a1, YMB(w1, x0));
        a2 = _mm256_add_epi32(a2, YMB(w2, x0));
        a3 = _mm256_add_epi32(a3, YMB(w0, x1));
        a4 = _mm256_add_epi32(a4, YMB(w1, x1));
        a5 = _mm256_add_epi32(a5, YMB(w2, x1));
    }
    int32_t o[8];
    _mm256_storeu_si256((__m256i *)o,
                        _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), a2),
                                         _mm256_add_epi32(_mm256_add_epi32(a3, a4), a5)));
    return (uint64_t)(uint32_t)o[0];
}

/* Seconds of CPU time of the calling thread: a shared machine's other processes take cores
 * away, not cycles from a running thread, so this is the rate a thread with a core has. */
static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *run_job(void *arg) {
    peak_job *j = arg;
    j->secs = j->add_secs = 0;
    j->sink = 0;
    for (int s = 0; s < j->slices; s++) {
        double t0 = thread_cpu_now();
        if (j->adds) j->sink += add_chain(j->adds);
        double t1 = thread_cpu_now();
        j->sink += j->fn(j->iters);
        j->secs += thread_cpu_now() - t1;
        j->add_secs += t1 - t0;
    }
    return NULL;
}

/* What a test gives: steps of fn per CPU second of its slowest thread, and that thread's clock
 * (Hz) from the adds between its slices (0 when none were run). */
typedef struct {
    double steps, hz;
} peak_rate;

/* fn on each of `threads` threads at once, the best of three runs of ~target_s each; with a
 * clock (adds per second of one thread, 0 for none) each run is 8 slices with ~1/4 of fn's
 * time in adds between them. */
static peak_rate rate(uint64_t (*fn)(uint64_t), unsigned threads, double target_s, double adds_hz) {
    const int slices = adds_hz > 0 ? 8 : 1;
    uint64_t iters = 1u << 16;
    for (;;) { /* calibrate on one thread until a run lasts ~1/8 of the target */
        peak_job j = {fn, iters, 0, 1, 0, 0, 0};
        run_job(&j);
        if (j.secs > target_s / 8) {
            iters = (uint64_t)((double)iters * target_s / j.secs / slices);
            break;
        }
        iters *= 4;
    }
    const uint64_t adds = adds_hz > 0 ? (uint64_t)(adds_hz * target_s / slices / 4 / 64) + 1 : 0;
    peak_rate best = {0, 0};
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[64];
        peak_job jobs[64];
        for (unsigned t = 0; t < threads; t++) {
            jobs[t] = (peak_job){fn, iters, adds, slices, 0, 0, 0};
            pthread_create(&th[t], NULL, run_job, &jobs[t]);
        }
        unsigned slowest = 0;
        for (unsigned t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            if (jobs[t].secs > jobs[slowest].secs) slowest = t;
        }
        const peak_job *j = &jobs[slowest];
        peak_rate r = {(double)iters * slices / j->secs,
                       adds ? (double)adds * 64 * slices / j->add_secs : 0};
        if (r.steps > best.steps) best = r;
    }
    return best;
}

int main(int argc, char **argv) {
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
    double secs = argc > 2 ? atof(argv[2]) : 0.5;
    if (threads < 1 || threads > 64) threads = 2;
    double clk = rate(add_chain, 1, secs, 0).steps * 64,
           clk_all = rate(add_chain, threads, secs, 0).steps * 64;
    printf("clock (dependent adds): %.2f GHz on 1 thread, %.2f GHz per thread on %u\n", clk / 1e9,
           clk_all / 1e9, threads);
    printf("| instruction | ops per step | %u threads: G ops/s | clock between its slices, GHz | "
           "per thread per cycle |\n",
           threads);
    printf("| --- | --- | --- | --- | --- |\n");
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
        avx512 = __builtin_cpu_supports("avx512f"), vnni = __builtin_cpu_supports("avx512vnni"),
        bf16 = __builtin_cpu_supports("avx512bf16");
    const cq_cpu_features *cpu = cq_cpu_detect(); /* AMX: also asks Linux for the tile state */
    struct {
        const char *name;
        int have;
        uint64_t (*fn)(uint64_t);
        double ops; /* per step of all chains: flops or multiply-adds */
    } rows[] = {
        {"f32 FMA, 256-bit (flops)", avx2, fma_ymm, 12 * 8 * 2},
        {"f32 FMA, 512-bit (flops)", avx512, fma_zmm, 12 * 16 * 2},
        {"int8 vpmaddubsw+vpmaddwd, 256-bit (multiply-adds)", avx2, maddubs_ymm, 6 * 32},
        {"int8 vpdpbusd, 512-bit (multiply-adds)", vnni, vnni_zmm, 12 * 64},
        {"bf16 vdpbf16ps, 512-bit (flops)", bf16, bf16dot_zmm, 12 * 32 * 2},
        {"bf16 AMX tdpbf16ps (flops)", cpu->amx_bf16, amx_bf16, 4 * 16 * 16 * 32 * 2},
        {"int8 AMX tdpbssd (multiply-adds)", cpu->amx_int8, amx_int8, 4 * 16 * 16 * 64},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!rows[i].have) {
            printf("| %s | – | not on this CPU | – | – |\n", rows[i].name);
            continue;
        }
        /* the slowest thread's rate, per its own clock in the same seconds */
        const peak_rate r = rate(rows[i].fn, threads, secs, clk_all);
        const double per = r.steps * rows[i].ops; /* ops per second, one thread */
        printf("| %s | %.0f | %.1f | %.2f | %.1f |\n", rows[i].name, rows[i].ops,
               per * threads / 1e9, r.hz / 1e9, per / r.hz);
    }
    return 0;
}
