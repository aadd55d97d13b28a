#include "common/cpu.h"

#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

static cq_cpu_features g_feat;
static int g_detected;
static int g_isa = -1;
static int g_amd = -1;     /* cq_cpu_force_amd's choice; -1: the vendor's */
static int g_gather = -1;  /* cq_cpu_force_gather_fast's choice; -1: the CPU's */
static int g_vnni = -1;    /* cq_cpu_force_avxvnni's choice; -1: the default below */
static int g_vnni_default; /* the CPU's AVX-VNNI unless CORTIQ_CPU=avx2 (cq_cpu_detect) */

/* Linux hands out the AMX tile data state (XCR0 bit 18) only to a process that asks for it. */
static bool amx_permitted(uint64_t xcr0) {
    if ((xcr0 & (3ull << 17)) != (3ull << 17)) return false; /* XTILECFG + XTILEDATA */
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

/* Whether Linux reports gathers free of the Downfall (GDS) mitigation: "Not affected", or
 * "Vulnerable" (no microcode, gathers at full speed). "Mitigation: ...", an unknown status
 * (a guest whose host decides) or no such file count as slow. */
static bool gathers_unmitigated(void) {
#ifdef __linux__
    FILE *f = fopen("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling", "r");
    if (!f) return false;
    char line[96] = {0};
    const bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    return ok && (strncmp(line, "Not affected", 12) == 0 || strncmp(line, "Vulnerable", 10) == 0);
#else
    return false;
#endif
}

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

const cq_cpu_features *cq_cpu_detect(void) {
    if (g_detected) return &g_feat;
    unsigned a, b, c, d;
    cq_cpu_features f;
    memset(&f, 0, sizeof f);
    bool amd = __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541 && d == 0x69746e65 &&
               c == 0x444d4163; /* "AuthenticAMD" in ebx, edx, ecx */
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        bool osxsave = c & (1u << 27);
        uint64_t xcr0 = osxsave ? xgetbv0() : 0;
        bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6;
        f.fma = ymm && (c & (1u << 12));
        f.f16c = ymm && (c & (1u << 29));
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            f.avx2 = ymm && (b & (1u << 5));
            f.avx512f = zmm && (b & (1u << 16));
            f.avx512dq = zmm && (b & (1u << 17));
            f.avx512bw = zmm && (b & (1u << 30));
            f.avx512vl = zmm && (b & (1u << 31));
            f.avx512vnni = zmm && (c & (1u << 11));
            bool tile = (d & (1u << 24)) && zmm && amx_permitted(xcr0);
            f.amx_tile = tile;
            f.amx_bf16 = tile && (d & (1u << 22));
            f.amx_int8 = tile && (d & (1u << 25));
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            f.avxvnni = ymm && (a & (1u << 4));
            f.avx512bf16 = zmm && (a & (1u << 5));
            f.bf16dot_fast = f.avx512bf16 && amd;
        }
    }
    f.amd = amd;
    f.gather_fast = !amd && f.avx2 && gathers_unmitigated();
    const char *env = getenv("CORTIQ_CPU");
    g_vnni_default = f.avxvnni && !(env && !strcmp(env, "avx2"));
    g_feat = f;
    g_detected = 1;
    return &g_feat;
}

static cq_isa best_isa(void) {
    const cq_cpu_features *f = cq_cpu_detect();
    if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->fma && f->f16c)
        return f->amx_bf16 && f->avx512bf16 ? CQ_ISA_AMX : CQ_ISA_AVX512;
    if (f->avx2 && f->fma && f->f16c) return CQ_ISA_AVX2;
    return CQ_ISA_SCALAR;
}

cq_isa cq_cpu_isa(void) {
    if (g_isa >= 0) return (cq_isa)g_isa;
    cq_isa isa = best_isa();
    const char *env = getenv("CORTIQ_CPU");
    cq_isa want;
    if (env && cq_isa_from_name(env, &want) && want < isa) isa = want;
    g_isa = (int)isa;
    return isa;
}

void cq_cpu_force(cq_isa isa) {
    cq_isa best = best_isa();
    g_isa = (int)(isa < best ? isa : best);
}

bool cq_cpu_amd(void) {
    return g_amd >= 0 ? g_amd != 0 : cq_cpu_detect()->amd;
}

void cq_cpu_force_amd(int amd) {
    g_amd = amd < 0 ? -1 : amd != 0;
}

bool cq_cpu_gather_fast(void) {
    return g_gather >= 0 ? g_gather != 0 : cq_cpu_detect()->gather_fast;
}

void cq_cpu_force_gather_fast(int fast) {
    g_gather = fast < 0 ? -1 : fast != 0;
}

bool cq_cpu_avxvnni(void) {
    if (g_vnni >= 0) return g_vnni != 0;
    cq_cpu_detect(); /* sets the default */
    return g_vnni_default != 0;
}

void cq_cpu_force_avxvnni(int on) {
    g_vnni = on < 0 ? -1 : on != 0 && cq_cpu_detect()->avxvnni;
}

static const char *const k_isa_names[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = "scalar",
    [CQ_ISA_AVX2] = "avx2",
    [CQ_ISA_AVX512] = "avx512",
    [CQ_ISA_AMX] = "amx",
};

const char *cq_isa_name(cq_isa isa) {
    return (unsigned)isa < CQ_ISA_COUNT ? k_isa_names[isa] : "?";
}

bool cq_isa_from_name(const char *name, cq_isa *out) {
    if (!strcmp(name, "avx2-vnni")) { /* the AVX2 tier; its AVX-VNNI is cq_cpu_avxvnni's */
        *out = CQ_ISA_AVX2;
        return true;
    }
    for (int i = 0; i < CQ_ISA_COUNT; i++) {
        if (!strcmp(name, k_isa_names[i])) {
            *out = (cq_isa)i;
            return true;
        }
    }
    return false;
}
