/* lanes_avxvnni.c - the AVX2 passes over the batched-decode copy built with AVX-VNNI
 * (lanes_avx2_pass.h: vpdpbusd in place of the vpmaddubsw forms, the same bits), which
 * lanes_avx2.c runs where the CPU has AVX-VNNI (cq_cpu_avxvnni). */
#include "quant/lanes_avx2_pass.h"

const cq_lanes_avx2_passes cq_lanes_avxvnni_passes = CQ_LANES_AVX2_PASSES;
