/* gemm_i8_avxvnni.c - the AVX2 integer GEMM's panel passes built with AVX-VNNI
 * (gemm_i8_avx2_pass.h: vpdpbusd in place of the vpmaddubsw forms, the same bits), which
 * gemm_i8_avx2.c runs where the CPU has AVX-VNNI (cq_cpu_avxvnni). */
#include "quant/gemm_i8_avx2_pass.h"

const cq_gemm_avx2_tokens_fn cq_gemm_avxvnni_tokens[TMAX + 1] = CQ_GEMM_AVX2_TOKENS;
