/* bench_quant_real.h - real weight matrices for `cortiq bench quant` (bench_quant_real.c). */
#ifndef CORTIQ_CLI_BENCH_QUANT_REAL_H
#define CORTIQ_CLI_BENCH_QUANT_REAL_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

/* One f32 matrix W[rows][cols] taken from a model file. */
typedef struct bq_matrix {
    char label[160]; /* "<model file> <tensor name>" */
    uint64_t rows, cols;
    float *w; /* malloc'd, rows * cols */
} bq_matrix;

#define BQ_PER_MODEL 4 /* layer 0: attention q and o, MLP gate and down */

/* Appends the layer-0 attention q / o and MLP gate / down projections of the model at path
 * (CMF, dequantized from any dtype; or GGUF, dequantized by the GGUF reader) as f32 to
 * out[*n ..], at most BQ_PER_MODEL of them; projections the model lacks, or with cols not a
 * multiple of 32, are skipped. Fails (nothing appended) when the file cannot be opened or
 * has none of them. */
cmf_status bq_load_model(const char *path, bq_matrix *out, size_t *n, cmf_err *err);

/* The cached real models: the *.cmf and *.gguf files in $HOME/.cache/cortiq/models, sorted
 * by name, at most max; paths[i] is malloc'd. Returns how many (0 when none or no HOME). */
size_t bq_cached_models(char **paths, size_t max);

void bq_matrix_free(bq_matrix *m);

#endif
