/* test_tok8_multi.c - cmf_matvec_tok8_multi (batched decode on prepared int8 tokens: each
 * weight step loaded and decoded once for several tokens) gives every token exactly the bits
 * cmf_matvec_tok8 gives it alone: q8_row, the 4-bit class (q4_tiled, q4_block, q4tp) and vbit
 * / vbit_ro; 1 to CMF_TOK8_MULTI_MAX tokens; group counts with tails of every kind (none, 1-2
 * groups, which rows of 4 pair up, 3-4, more than 4), row ranges from 0 and from later 16-row
 * blocks, with and without a partial last block; on the AVX2 tier with and without AVX-VNNI
 * where the CPU has it. Skipped where the CPU has no prepared-token path (cmf_tok8_bytes is 0). */
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/kernel_gen.h"
#include "quant/kernels_engine.h"

static void check(cmf_dtype dt, uint64_t rows, uint64_t cols, uint64_t seed) {
    kg_rng r = {seed};
    kg_opts o = {0, 0, 0};
    uint64_t nbytes;
    uint8_t *payload = kg_payload(dt, rows, cols, &r, &o, &nbytes);
    cmf_qmat m;
    CHECK_STATUS(cmf_qmat_init(&m, dt, rows, cols, payload, nbytes, "w", &t_err_), CMF_OK);
    int layout = cmf_tok8_supports(&m);
    CHECK(layout != 0);
    enum { T = CMF_TOK8_MULTI_MAX };
    size_t tb = (cmf_tok8_bytes(cols) + 63) / 64 * 64;
    uint8_t *toks = aligned_alloc(64, T * tb);
    float *x = malloc(cols * sizeof *x), *alone = malloc(T * rows * sizeof(float)),
          *multi = malloc(T * rows * sizeof(float));
    const void *tp[T];
    for (size_t t = 0; t < T; t++) {
        for (uint64_t i = 0; i < cols; i++)
            x[i] = kg_unif(&r, -2.0f, 2.0f) * (i % 37 == t % 5 ? 9.0f : 1.0f);
        if (t == 3 && cols >= 64) memset(x + 32, 0, 32 * sizeof *x); /* a zero group (dx = 0) */
        cmf_tok8_prepare(toks + t * tb, x, cols, layout);
        tp[t] = toks + t * tb;
    }
    /* whole, from a later 16-row block, a partial range from a block start, a lone row, and
     * from a row off any block (the kernels' 8-row steps then start there) */
    uint64_t ranges[][2] = {
        {0, rows}, {16, rows}, {0, rows > 21 ? 21 : rows}, {rows - 1, rows}, {3, rows}};
    for (size_t q = 0; q < sizeof ranges / sizeof *ranges; q++) {
        uint64_t r0 = ranges[q][0], r1 = ranges[q][1];
        if (r0 >= r1) continue;
        for (size_t t = 0; t < T; t++)
            cmf_matvec_tok8(&m, tp[t], alone + t * rows, r0, r1);
        for (size_t n = 1; n <= T; n++) {
            float *ys[T];
            memset(multi, 0xff, T * rows * sizeof *multi);
            /* the tokens in another order than prepared: each slot's own token counts */
            const void *tq[T];
            for (size_t t = 0; t < n; t++) {
                tq[t] = tp[(t + n) % T];
                ys[t] = multi + t * rows;
            }
            cmf_matvec_tok8_multi(&m, tq, n, ys, r0, r1);
            for (size_t t = 0; t < n; t++)
                CHECK_MSG(memcmp(alone + ((t + n) % T) * rows, ys[t], (r1 - r0) * sizeof(float)) ==
                              0,
                          "%s %llu x %llu, rows [%llu, %llu), token %zu of %zu differs",
                          cmf_dtype_name(dt), (unsigned long long)rows, (unsigned long long)cols,
                          (unsigned long long)r0, (unsigned long long)r1, t, n);
        }
    }
    cmf_qmat_free(&m);
    free(toks), free(x), free(alone), free(multi), free(payload);
}

/* Every dtype with a prepared-token path on the tier in effect, over the shapes below; seed is
 * the first matrix seed, the next one is returned. */
static uint64_t check_dtypes(uint64_t seed) {
    static const cmf_dtype dts[] = {CMF_DT_Q8_ROW, CMF_DT_Q4_TILED, CMF_DT_Q4_BLOCK,
                                    CMF_DT_Q4TP,   CMF_DT_VBIT,     CMF_DT_VBIT_RO};
    /* groups of 32 columns: 1, 2 (tails only), 17, 18 (tails of 1-2: rows of 4 pair them),
     * 20 (tail of 4), 22 (of 6), 32 (whole blocks), 48; rows with and without a partial
     * 16-row block, and counts that leave 1-3 rows past a step of 4 */
    static const uint64_t cols[] = {32, 64, 544, 576, 640, 704, 1024, 1536};
    static const uint64_t rows[] = {48, 37, 18};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        cmf_qmat probe;
        uint64_t nb;
        kg_rng r = {seed};
        kg_opts o = {0, 0, 0};
        uint8_t *p = kg_payload(dts[d], 16, 64, &r, &o, &nb);
        CHECK_STATUS(cmf_qmat_init(&probe, dts[d], 16, 64, p, nb, "p", &t_err_), CMF_OK);
        bool ok = cmf_tok8_supports(&probe) != 0;
        cmf_qmat_free(&probe);
        free(p);
        if (!ok) { /* the 4-bit class and vbit need VBMI and GFNI besides VNNI */
            printf("skip %s: no prepared-token path\n", cmf_dtype_name(dts[d]));
            continue;
        }
        /* q8_row: the VNNI rows, then AMD's (cq_avx512_q8_amd), on both sides */
        for (int amd = 0; amd < (dts[d] == CMF_DT_Q8_ROW ? 2 : 1); amd++) {
            cq_cpu_force_amd(dts[d] == CMF_DT_Q8_ROW ? amd : -1);
            for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
                for (size_t k = 0; k < sizeof rows / sizeof *rows; k++)
                    check(dts[d], rows[k], cols[c], seed++);
        }
        cq_cpu_force_amd(-1);
    }
    return seed;
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    if (t_tier >= 0) cq_cpu_force((cq_isa)t_tier); /* that tier's kernels on both sides */
    if (!cmf_tok8_bytes(64)) {
        printf("SKIP: no prepared int8 token path on this CPU tier\n");
        return 77;
    }
    /* the AVX2 tier on a CPU with AVX-VNNI: its vpdpbusd rows (kernel_*_avxvnni.c), then the
     * plain ones */
    const int vnni_runs = cq_cpu_isa() == CQ_ISA_AVX2 && cq_cpu_detect()->avxvnni ? 2 : 1;
    uint64_t seed = 1;
    for (int vnni = vnni_runs - 1; vnni >= 0; vnni--) {
        cq_cpu_force_avxvnni(vnni_runs == 2 ? vnni : -1);
        seed = check_dtypes(seed);
    }
    cq_cpu_force_avxvnni(-1);
    TEST_DONE();
}
