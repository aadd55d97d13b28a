/* test_gemm_qact_vbit.c - the integer prefill GEMM (cmf_matmul_qact) on vbit and vbit_ro, every
 * tier against the exact integer sums. Scales of 1 and integer activations whose blocks each
 * reach +-127 (activation scale 1, codes = the values) make every f32 step exact, so each tier
 * must give sum (u - L) * x to the last bit, whatever its code form:
 *  - mixed widths 3..8, AVX2 panels of at most 4 bits (its unsigned form) and wider ones
 *    (its |v| and sign form) up to 5, 6 and 8 bits; the AVX2 tier with its vpmaddubsw passes
 *    and, where the CPU has AVX-VNNI, its vpdpbusd ones;
 *  - the extremes: 8-bit u = 255 (v = 128) and u = 0 (v = -127), rows of all-max and all-min
 *    codes of each panel's widest width against all +127 / -127 tokens (AVX2's int16 sums and
 *    saturating pairs at their limits);
 *  - odd row counts, row ranges not starting or ending on a panel (8 / 16 rows), cols 32, 96,
 *    896, token counts across the groups of 12 and the AVX2 passes of 6, and 300 rows (the AVX2
 *    tier's panels by width class, per window of 256 rows, outputs scattered back). */
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/kernel_gen.h"
#include "quant/kernels_engine.h"

static void *amalloc(size_t n) {
    return aligned_alloc(64, (n + 63) / 64 * 64);
}

static void put_bits(uint8_t *row, uint64_t pos, unsigned bits, unsigned v) {
    for (unsigned k = 0; k < bits; k++, pos++)
        if (v >> (bits - 1 - k) & 1u) row[pos / 8] |= (uint8_t)(0x80u >> (pos % 8));
}

/* Row r's width: the AVX2 panels of rows 0-7, 8-15, 16-23 at most 4 (its unsigned form), 5
 * and 6 bits wide (its |v| and sign form, as every wider panel), then any width. Each of those
 * panels, and rows 24-31, hold a row of the panel's widest codes all at their maximum and one all 0
 * (extremes). */
static const struct {
    uint64_t row;
    unsigned bits, max;
} k_extreme[] = {{2, 4, 1},  {3, 4, 0},  {10, 5, 1}, {11, 5, 0},
                 {18, 6, 1}, {19, 6, 0}, {26, 8, 1}, {27, 8, 0}};

static unsigned width_of(kg_rng *r, uint64_t row) {
    static const unsigned widths[5] = {3, 4, 5, 6, 8};
    for (size_t i = 0; i < sizeof k_extreme / sizeof *k_extreme; i++)
        if (k_extreme[i].row == row) return k_extreme[i].bits;
    return row < 24 ? 3 + kg_u32(r, (unsigned)(row / 8) + 2) : widths[kg_u32(r, 5)];
}

/* A vbit / vbit_ro payload with all scales 1; u[r * cols + c] receives the codes. */
static uint8_t *payload(cmf_dtype dt, uint64_t rows, uint64_t cols, kg_rng *r, unsigned *u,
                        uint8_t *bits, uint64_t *nbytes) {
    const int ro = dt == CMF_DT_VBIT_RO;
    const uint64_t G = cols / 32;
    uint64_t hdr = rows + 2 * rows * G + (ro ? 4 * (rows + 1) : 0), packed = 0;
    for (uint64_t i = 0; i < rows; i++) {
        bits[i] = (uint8_t)width_of(r, i);
        packed += bits[i] * cols / 8;
    }
    uint8_t *p = calloc(1, hdr + packed);
    memcpy(p, bits, rows);
    for (uint64_t i = 0; i < rows * G; i++)
        st_u16(p + rows + 2 * i, 0x3C00); /* f16 1.0 */
    uint64_t off = 0;
    for (uint64_t i = 0; i < rows; i++) {
        if (ro) st_u32(p + rows + 2 * rows * G + 4 * i, (uint32_t)off);
        unsigned b = bits[i], max = (1u << b) - 1;
        for (uint64_t c = 0; c < cols; c++) {
            unsigned k = kg_u32(r, 4), v = k == 0 ? 0 : k == 1 ? max : kg_u32(r, max + 1);
            for (size_t e = 0; e < sizeof k_extreme / sizeof *k_extreme; e++)
                if (k_extreme[e].row == i) v = k_extreme[e].max ? max : 0;
            u[i * cols + c] = v;
            put_bits(p + hdr + off, c * b, b, v);
        }
        off += b * cols / 8;
    }
    if (ro) st_u32(p + rows + 2 * rows * G + 4 * rows, (uint32_t)off);
    *nbytes = hdr + packed;
    return p;
}

/* Integer activations in [-127, 127], every block holding a +-127; tokens 0 and 1 all +127 and
 * all -127. */
static void acts(kg_rng *r, float *X, size_t n, size_t cols) {
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < cols; c++) {
            float v = (float)((int)kg_u32(r, 255) - 127);
            if (c % 32 == 7) v = kg_u32(r, 2) ? 127.0f : -127.0f;
            if (t == 0) v = 127.0f;
            if (t == 1) v = -127.0f;
            X[t * cols + c] = v;
        }
}

static bool tier_runs(cq_isa tier) {
    const cq_cpu_features *c = cq_cpu_detect();
    if (!test_tier_on(tier)) return false;
    if (tier == CQ_ISA_AVX512) return c->avx512f && c->avx512vnni;
    if (tier == CQ_ISA_AVX2) return c->avx2 && c->fma;
    if (tier == CQ_ISA_AMX) return test_cpu_has_tier(CQ_ISA_AMX) && c->amx_int8 && c->avx512vnni;
    return true;
}

static void check(cmf_dtype dt, uint64_t rows, uint64_t cols, uint64_t seed) {
    kg_rng r = {seed};
    unsigned *u = malloc(rows * cols * sizeof *u);
    uint8_t *bits = malloc(rows);
    uint64_t nbytes;
    uint8_t *p = payload(dt, rows, cols, &r, u, bits, &nbytes);
    cmf_qmat m;
    CHECK_STATUS(cmf_qmat_init(&m, dt, rows, cols, p, nbytes, "w", &t_err_), CMF_OK);
    CHECK(cmf_qact_supports(&m));
    void *scratch = amalloc(cmf_qact_scratch_bytes(cols));
    static const size_t ns[] = {1, 2, 7, 13, 30};
    static const cq_isa tiers[] = {CQ_ISA_SCALAR, CQ_ISA_AVX2, CQ_ISA_AVX512, CQ_ISA_AMX};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        size_t n = ns[ni], ldy = rows + 1;
        float *X = malloc(n * cols * sizeof *X), *Y = malloc(n * ldy * sizeof *Y);
        acts(&r, X, n, cols);
        void *am = amalloc(cmf_qact_bytes(n, cols));
        cmf_qact a;
        cmf_qact_bind(&a, am, n, cols);
        /* the AVX2 tier twice where the CPU has AVX-VNNI: its vpmaddubsw and vpdpbusd passes */
        static const struct { int ti, vnni; } runs[] = {{0, 0}, {1, 0}, {1, 1}, {2, 0}, {3, 0}};
        for (size_t run = 0; run < sizeof runs / sizeof *runs; run++) {
            const int ti = runs[run].ti, vnni = runs[run].vnni;
            if (!tier_runs(tiers[ti]) || (vnni && !cq_cpu_detect()->avxvnni)) continue;
            cq_cpu_force(tiers[ti]);
            cq_cpu_force_avxvnni(vnni);
            cmf_qact_quantize(&a, X, cols);
            /* whole, then ranges starting and ending mid-panel */
            uint64_t splits[][2] = {{0, rows}, {3, rows > 29 ? 29 : rows}, {rows - 1, rows}};
            for (int s = 0; s < 3; s++) {
                uint64_t r0 = splits[s][0], r1 = splits[s][1];
                for (size_t i = 0; i < n * ldy; i++)
                    Y[i] = -1e30f;
                cmf_matmul_qact(&m, &a, Y, ldy, r0, r1, scratch);
                for (size_t t = 0; t < n; t++)
                    for (uint64_t i = r0; i < r1; i++) {
                        int64_t want = 0;
                        int L = (1 << (bits[i] - 1)) - 1;
                        for (uint64_t c = 0; c < cols; c++)
                            want += ((int64_t)u[i * cols + c] - L) * (int64_t)X[t * cols + c];
                        float got = Y[t * ldy + (i - r0)];
                        CHECK_MSG(got == (float)want,
                                  "%s tier %s%s %llux%llu rows [%llu,%llu) row %llu (%u bits) tok "
                                  "%zu/%zu: %.1f, exact %lld",
                                  cmf_dtype_get(dt)->name, cq_isa_name(tiers[ti]),
                                  vnni ? "-vnni" : "", (unsigned long long)rows,
                                  (unsigned long long)cols, (unsigned long long)r0,
                                  (unsigned long long)r1, (unsigned long long)i, bits[i], t, n, got,
                                  (long long)want);
                    }
                for (size_t t = 0; t < n; t++) /* nothing past the range */
                    for (uint64_t i = r1 - r0; i < ldy; i++)
                        CHECK(Y[t * ldy + i] == -1e30f);
            }
        }
        free(am), free(X), free(Y);
    }
    free(scratch), free(p), free(u), free(bits);
    cmf_qmat_free(&m);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    const cq_isa saved = cq_cpu_isa();
    static const cmf_dtype dts[] = {CMF_DT_VBIT, CMF_DT_VBIT_RO};
    for (int d = 0; d < 2; d++) {
        check(dts[d], 45, 96, 11 + d);
        check(dts[d], 37, 32, 21 + d);
        check(dts[d], 23, 896, 31 + d);
        check(dts[d], 300, 32, 41 + d); /* the AVX2 tier's width classes: two row windows */
    }
    cq_cpu_force(saved);
    cq_cpu_force_avxvnni(-1);
    if (test_tier_on(CQ_ISA_AVX2) && !cq_cpu_detect()->avxvnni)
        printf("note: no AVX-VNNI on this CPU, the AVX2 tier's vpdpbusd passes not checked\n");
    TEST_DONE();
}
