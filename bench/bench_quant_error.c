/* bench_quant_error.c - relative RMSE and bits/weight of every live dtype on a Gaussian and a
 * heavy-tailed (Student-t(4) + outlier channels) matrix; the table of docs/QUANT.md.
 * usage: bench_quant_error [rows in]   (default 256 1024) */
#include <stdio.h>
#include <stdlib.h>

#include "../tests/quant/quant_matrix.h"
#include "cortiq/quant.h"

int main(int argc, char **argv) {
    uint64_t rows = argc > 2 ? strtoull(argv[1], NULL, 10) : 256,
             in = argc > 2 ? strtoull(argv[2], NULL, 10) : 1024;
    uint64_t shape[2] = {rows, in}, n = rows * in;
    float *g = malloc(n * sizeof *g), *h = malloc(n * sizeof *h), *dec = malloc(n * sizeof *dec);
    if (!g || !h || !dec) return 3;
    qm_gaussian(g, rows, in, 1);
    qm_heavy(h, rows, in, 2);
    static const cmf_dtype dts[] = {CMF_DT_F16,      CMF_DT_BF16,     CMF_DT_Q8_ROW, CMF_DT_Q8_2F,
                                    CMF_DT_Q4_BLOCK, CMF_DT_Q4_TILED, CMF_DT_Q4TP,   CMF_DT_VBIT,
                                    CMF_DT_VBIT_RO,  CMF_DT_Q1,       CMF_DT_Q1S,    CMF_DT_Q1T};
    printf(
        "%llux%llu\n| dtype | bits/weight (gauss) | rel RMSE gauss | bits/weight (heavy) | rel RMSE heavy |\n"
        "|---|---|---|---|---|\n",
        (unsigned long long)rows, (unsigned long long)in);
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        printf("| %s", cmf_dtype_name(dts[k]));
        for (int which = 0; which < 2; which++) {
            const float *src = which ? h : g;
            uint8_t *out = NULL;
            size_t len = 0;
            cmf_err err;
            if (cmf_quant_encode(dts[k], 2, shape, src, NULL, &out, &len, &err) != CMF_OK ||
                cmf_quant_dequant(dts[k], 2, shape, out, len, dec, &err) != CMF_OK) {
                fprintf(stderr, "%s: %s\n", cmf_dtype_name(dts[k]), err.msg);
                return 1;
            }
            printf(" | %.3f | %.4f", 8.0 * (double)len / (double)n, qm_rel_rmse(src, dec, n));
            free(out);
        }
        printf(" |\n");
    }
    free(g);
    free(h);
    free(dec);
    return 0;
}
