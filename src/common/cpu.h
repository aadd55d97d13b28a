/* cpu.h - which SIMD tier this process runs, chosen once from CPUID.
 * CORTIQ_CPU=scalar|avx2|avx512|amx forces a tier (lower than the CPU supports) for testing. */
#ifndef CORTIQ_CPU_H
#define CORTIQ_CPU_H

#include <stdbool.h>

typedef enum cq_isa {
    CQ_ISA_SCALAR = 0,
    CQ_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CQ_ISA_AVX512 = 2, /* F, BW, VL, DQ (+ VNNI / BF16 reported separately) */
    CQ_ISA_AMX = 3,    /* AVX512 + AMX tiles with BF16 (Sapphire Rapids on), granted by the OS */
} cq_isa;

typedef struct cq_cpu_features {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni;
    bool amx_tile, amx_bf16, amx_int8; /* usable: CPU, XCR0, and Linux's permission granted */
} cq_cpu_features;

/* Features the CPU and OS support (XSAVE state checked). The first call also asks Linux for
 * the AMX tile data permission (arch_prctl), which a process needs before it uses tiles. */
const cq_cpu_features *cq_cpu_detect(void);
/* The tier in effect: the best supported, lowered by CORTIQ_CPU if set. */
cq_isa cq_cpu_isa(void);
/* Override the tier for this process (tests); clamped to what the CPU supports. */
void cq_cpu_force(cq_isa isa);
const char *cq_isa_name(cq_isa isa);

#endif
