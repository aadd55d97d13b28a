/* kernel_i8dec_avxvnni.c - the AVX2 tier's one-token int8 rows of the 4-bit class
 * (kernel_i8dec_avx2_rows.h) built with AVX-VNNI: per pair of groups two vpdpbusd make the int32
 * sums where the plain build takes two vpmaddubsw, an add and a vpmaddwd; the same sums, so the
 * same bits. With vbit's AVX-VNNI rows (kernel_i8dec_vbit_avxvnni.c) they make the record that
 * kernel_i8dec_avx2.c runs where the CPU has AVX-VNNI (cq_cpu_avxvnni). */
#include "quant/kernel_i8dec_avx2_rows.h"

const cq_i8dec_avx2_rows cq_i8dec_avxvnni =
    CQ_I8DEC_AVX2_ROWS(cq_avxvnni_i8dec_vbit_rows, cq_avxvnni_i8dec_vbit_rows_multi);
