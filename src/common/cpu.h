/* cpu.h - which SIMD tier this process runs, chosen once from CPUID, and the one rule every
 * module dispatches by (CQ_ISA_SELECT).
 * CORTIQ_CPU=scalar|avx2|avx512|amx forces a tier (lower than the CPU supports) for testing;
 * avx2 means AVX2 + FMA + F16C alone (an AVX2-only CPU's), avx2-vnni the AVX2 tier with the
 * CPU's AVX-VNNI (cq_cpu_avxvnni). */
#ifndef CORTIQ_CPU_H
#define CORTIQ_CPU_H

#include <stdbool.h>

typedef enum cq_isa {
    CQ_ISA_SCALAR = 0,
    CQ_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CQ_ISA_AVX512 = 2, /* F, BW, VL, DQ (+ VNNI / BF16 reported separately) */
    CQ_ISA_AMX = 3,    /* AVX512 + AMX tiles with BF16 (Sapphire Rapids on), granted by the OS */
} cq_isa;
#define CQ_ISA_COUNT    4
#define CQ_ISA_BIT(isa) (1u << (isa))

typedef struct cq_cpu_features {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni;
    bool amx_tile, amx_bf16, amx_int8; /* usable: CPU, XCR0, and Linux's permission granted */
    /* vdpbf16ps outruns the f32 FMAs it replaces: AMD's AVX-512 BF16 (Zen 4: twice their
     * rate); Intel's (Sapphire Rapids: half their rate, bench_peak) does not */
    bool bf16dot_fast;
    bool amd; /* AuthenticAMD: the kernels tuned for its cores apply (cq_cpu_amd) */
    /* a vgatherdps from L1 outruns a tree of vblendvps picking among 8 values: Intel's cores
     * (vblendvps three ops since Golden Cove) unless Linux reports the Downfall (GDS)
     * microcode mitigation, which slows gathers several-fold; not AMD's (one-op vblendvps) */
    bool gather_fast;
} cq_cpu_features;

/* Features the CPU and OS support (XSAVE state checked). The first call also asks Linux for
 * the AMX tile data permission (arch_prctl), which a process needs before it uses tiles. */
const cq_cpu_features *cq_cpu_detect(void);
/* The tier in effect: the best supported, lowered by CORTIQ_CPU if set. */
cq_isa cq_cpu_isa(void);
/* Override the tier for this process (tests); clamped to what the CPU supports. */
void cq_cpu_force(cq_isa isa);
/* Whether the kernel variants tuned for AMD's cores run (docs/KERNELS.md, "Rows on AMD"): the
 * CPU's vendor unless a test or benchmark forced either choice (cq_cpu_force_amd: 1 or 0; -1
 * goes back to the vendor). The AVX-512 f16 and bf16 rows give the same bits either way; q8_row's
 * int8 decode at the AVX-512 tier gives the AVX2 tier's bits there (cq_avx512_q8_amd), which
 * differ from the VNNI rows' by f32 rounding only. */
bool cq_cpu_amd(void);
void cq_cpu_force_amd(int amd);
/* Whether gathers beat blend trees (cq_cpu_features.gather_fast) unless a test forced either
 * choice (cq_cpu_force_gather_fast: 1 or 0; -1 goes back to the CPU's). */
bool cq_cpu_gather_fast(void);
void cq_cpu_force_gather_fast(int fast);
/* Whether the AVX2 tier's integer kernels use AVX-VNNI (VEX vpdpbusd: Intel's client cores
 * since Alder Lake, Xeons since Sapphire Rapids; the same integer sums as the vpmaddubsw
 * forms, in fewer operations): the CPU's support unless CORTIQ_CPU=avx2 asked for plain AVX2,
 * or a test forced either choice (cq_cpu_force_avxvnni: 1, only where the CPU has it, or 0;
 * -1 goes back to the default). */
bool cq_cpu_avxvnni(void);
void cq_cpu_force_avxvnni(int on);
const char *cq_isa_name(cq_isa isa);
/* Parse a tier name ("scalar", "avx2", "avx2-vnni" (the AVX2 tier), "avx512", "amx"); false if
 * not one. */
bool cq_isa_from_name(const char *name, cq_isa *out);

/* The tier to run among those with an implementation (`have`: CQ_ISA_BIT per tier; scalar is
 * always assumed): the best one at or below the tier in effect. */
static inline cq_isa cq_isa_pick(unsigned have) {
    int i = (int)cq_cpu_isa();
    while (i > 0 && !(have & CQ_ISA_BIT(i)))
        i--;
    return (cq_isa)i;
}

/* Tiers whose entry of an array indexed by cq_isa is set. */
#define CQ_ISA_HAVE(by_tier)                                                                       \
    ((by_tier)[CQ_ISA_SCALAR] ? CQ_ISA_BIT(CQ_ISA_SCALAR) : 0u) |                                  \
        ((by_tier)[CQ_ISA_AVX2] ? CQ_ISA_BIT(CQ_ISA_AVX2) : 0u) |                                  \
        ((by_tier)[CQ_ISA_AVX512] ? CQ_ISA_BIT(CQ_ISA_AVX512) : 0u) |                              \
        ((by_tier)[CQ_ISA_AMX] ? CQ_ISA_BIT(CQ_ISA_AMX) : 0u)
_Static_assert(CQ_ISA_COUNT == 4, "CQ_ISA_HAVE names every tier");

/* The entry to run from an array of implementations indexed by cq_isa, filled with designated
 * initialisers (a missing tier falls back to the next lower one; the scalar entry must be set):
 *   static const cq_act_ops *const k_tiers[CQ_ISA_COUNT] = {[CQ_ISA_SCALAR] = &..., ...};
 *   return CQ_ISA_SELECT(k_tiers);
 * Every module dispatches this way, so a new tier or kernel is one entry in one array. */
#define CQ_ISA_SELECT(by_tier) ((by_tier)[cq_isa_pick(CQ_ISA_HAVE(by_tier))])

#endif
