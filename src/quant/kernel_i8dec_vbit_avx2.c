/* kernel_i8dec_vbit_avx2.c - vbit's one-token rows of the AVX2 tier (kernel_i8dec_vbit_avx2_rows.h)
 * with vpmaddubsw / vpmaddwd; kernel_i8dec_avx2.c runs the AVX-VNNI build where the CPU has it. */
#define CQ_VBIT_ROWS       cq_avx2_i8dec_vbit_rows
#define CQ_VBIT_ROWS_MULTI cq_avx2_i8dec_vbit_rows_multi
#include "quant/kernel_i8dec_vbit_avx2_rows.h"
