/* kernel_i8dec_vbit_avxvnni.c - vbit's one-token rows of the AVX2 tier
 * (kernel_i8dec_vbit_avx2_rows.h) built with AVX-VNNI: vpdpbusd for the codes held as bytes
 * (widths 3-6; the 8-bit ones keep vpmaddwd); the same sums as the plain build, so the same bits.
 * kernel_i8dec_avx2.c runs them where the CPU has AVX-VNNI (cq_cpu_avxvnni). */
#define CQ_VBIT_ROWS       cq_avxvnni_i8dec_vbit_rows
#define CQ_VBIT_ROWS_MULTI cq_avxvnni_i8dec_vbit_rows_multi
#include "quant/kernel_i8dec_vbit_avx2_rows.h"
