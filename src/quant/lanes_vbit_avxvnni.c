/* lanes_vbit_avxvnni.c - the AVX2 passes over vbit's batched-decode copy built with AVX-VNNI
 * (lanes_vbit_avx2_pass.h: vpdpbusd in place of the vpmaddubsw forms, the same bits), which
 * lanes_vbit_avx2.c runs where the CPU has AVX-VNNI (cq_cpu_avxvnni). */
#include "quant/lanes_vbit_avx2_pass.h"

const cq_lanes_vbit_avx2_passes cq_lanes_vbit_avxvnni_passes = CQ_LANES_VBIT_AVX2_PASSES;
