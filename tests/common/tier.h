/* tier.h - SIMD tests run once per CPU tier. tests/CMakeLists.txt registers such a test once
 * per tier it covers (module.test_x.scalar, .avx2, .avx512, .amx) with the tier as argument.
 * test_tier_select: with a tier this CPU lacks, prints SKIP and exits 77 (CTest: skipped);
 * otherwise only that tier's checks run (test_tier_on). The "scalar" run also holds the checks
 * tied to no SIMD tier. Without an argument (a run by hand) every tier the CPU has is checked. */
#ifndef CORTIQ_TEST_TIER_H
#define CORTIQ_TEST_TIER_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cpu.h"

static int t_tier = -1; /* the tier to check; -1: all */

/* Whether this CPU has tier isa (cq_cpu_force clamps to what it has); the tier in effect is
 * left as it was. */
static inline bool test_cpu_has_tier(cq_isa isa) {
    cq_isa saved = cq_cpu_isa();
    cq_cpu_force(isa);
    bool have = cq_cpu_isa() == isa;
    cq_cpu_force(saved);
    return have;
}

static inline void test_tier_select(int argc, char **argv) {
    if (argc < 2) return;
    cq_isa want;
    if (!cq_isa_from_name(argv[1], &want)) {
        fprintf(stderr, "%s: unknown tier '%s'\n", argv[0], argv[1]);
        exit(2);
    }
    if (!test_cpu_has_tier(want)) {
        printf("SKIP: this CPU has no %s tier\n", argv[1]);
        exit(77);
    }
    t_tier = (int)want;
}

/* Whether the checks of tier isa run in this process. */
static inline bool test_tier_on(cq_isa isa) {
    return t_tier < 0 || t_tier == (int)isa;
}

#endif
