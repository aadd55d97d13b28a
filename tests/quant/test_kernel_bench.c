/* The measuring helpers behind `cortiq bench quant` (src/bench/kernel_bench.c): the threads
 * share the work in pieces claimed as they go (each its own range in halves of what is left,
 * then the others'), so what is checked is that every byte / row is covered exactly once:
 *  - the bandwidth probe's sum check passes (it returns a negative value when the bytes it
 *    summed are not every byte of the buffer once) for 1-3 threads and sizes that leave
 *    ranges of unequal length, on 4 KiB and on 2 MiB pages (cq_huge_alloc);
 *  - cq_bench_matmul's output equals one cmf_matmul_ex call over all rows, bit for bit (pieces
 *    start on 16-row blocks), for row counts that are and are not multiples of 16. */
#include <stdlib.h>
#include <string.h>

#include "cortiq/quant.h"
#include "bench/kernel_bench.h"
#include "quant/kernels_engine.h"
#include "quant/kernel_gen.h"
#include "test.h"

int main(void) {
    static const size_t sizes[] = {768, 4096 + 256, 1u << 20, (1u << 20) + 768 * 3};
    for (unsigned nt = 1; nt <= 3; nt++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            for (int huge = 0; huge <= 1; huge++) {
                double cpu = 0, gbs = cq_bench_read_bw(sizes[i], nt, 3, &cpu, huge);
                CHECK_MSG(gbs > 0 && cpu > 0, "read bw %zu bytes, %u threads, huge %d: %g",
                          sizes[i], nt, huge, gbs);
            }
        }
    kg_rng rng = {7};
    static const cmf_dtype dts[] = {CMF_DT_Q4TP, CMF_DT_Q8_ROW, CMF_DT_F16};
    static const uint64_t rows_list[] = {16, 100, 1000, 4099};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t k = 0; k < sizeof rows_list / sizeof rows_list[0]; k++) {
            uint64_t rows = rows_list[k], cols = 576, nb;
            kg_opts o = {0, 0, 0};
            uint8_t *p = kg_payload(dts[d], rows, cols, &rng, &o, &nb);
            cmf_qmat m;
            CHECK(cmf_qmat_init(&m, dts[d], rows, cols, p, nb, "t", NULL) == CMF_OK);
            float *x = malloc(cols * sizeof *x), *want = malloc(rows * sizeof *want),
                  *got = malloc(rows * sizeof *got);
            for (uint64_t i = 0; i < cols; i++)
                x[i] = kg_unif(&rng, -1, 1);
            cmf_matmul_ex(&m, x, 1, cols, want, rows, 0, rows, CMF_KF_INT8_ACT);
            for (unsigned nt = 1; nt <= 3; nt++) {
                for (uint64_t r = 0; r < rows; r++)
                    got[r] = -1e30f;
                CHECK(cq_bench_matmul(&m, x, 1, got, nt, 2, CMF_KF_INT8_ACT, NULL) > 0);
                CHECK_MSG(!memcmp(got, want, rows * sizeof *got), "%s %llu rows, %u threads",
                          cmf_dtype_name(dts[d]), (unsigned long long)rows, nt);
            }
            cmf_qmat_free(&m);
            free(p), free(x), free(want), free(got);
        }
    TEST_DONE();
}
