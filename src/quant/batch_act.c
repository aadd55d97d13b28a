/* batch_act.c - a batch's activations prepared once for every product and row range that reads
 * them (quant/kernels_engine.h): rounded to bf16 and regrouped for the bf16 dot products
 * (cmf_bact, gemm_bf16dot_avx512.c), or regrouped in f32 for the AVX-512 float panels (cmf_fact,
 * gemm_f32_avx512.c). Each is the first half of what the one-call kernel does, so the bits are
 * that kernel's. */
#include "quant/gemm_impl.h"
#include "quant/kernels_engine.h"

#define BGROUP 16 /* tokens per bf16 group: one vector's lanes */

bool cmf_bact_supports(const cmf_qmat *m, size_t n) {
    return cq_bf16dot_takes(m, n);
}

size_t cmf_bact_bytes(size_t n, size_t cols) {
    return (n + BGROUP - 1) / BGROUP * CQ_BACT_PAIRS(cols) * BGROUP * sizeof(uint32_t);
}

void cmf_bact_bind(cmf_bact *a, void *mem, size_t n, size_t cols) {
    a->n = n;
    a->cols = cols;
    a->xb = mem;
}

void cmf_bact_prepare(cmf_bact *a, const float *X, size_t ldx, size_t t0, size_t t1) {
    const size_t kpp = CQ_BACT_PAIRS(a->cols);
    for (size_t g = t0 / BGROUP; g * BGROUP < t1; g++)
        cq_bact_group_avx512(X, a->n, ldx, a->cols, kpp, g, a->xb + g * kpp * BGROUP);
}

bool cmf_matmul_bact(const cmf_qmat *m, const cmf_bact *a, float *Y, size_t ldy, uint64_t r0,
                     uint64_t r1) {
    return r0 >= r1 || cq_gemm_bf16dot_rows_avx512(m, a->xb, a->n, Y, ldy, r0, r1);
}

bool cmf_fact_supports(const cmf_qmat *m, size_t n, unsigned flags) {
    return cq_float_avx512_takes(m, n, flags);
}

size_t cmf_fact_group(void) {
    return CQ_FACT_GROUP;
}

size_t cmf_fact_bytes(size_t n, size_t cols) {
    return (n + CQ_FACT_GROUP - 1) / CQ_FACT_GROUP * CQ_FACT_COLS(cols) * CQ_FACT_GROUP *
           sizeof(float);
}

void cmf_fact_bind(cmf_fact *a, void *mem, size_t n, size_t cols) {
    a->n = n;
    a->cols = cols;
    a->xg = mem;
}

void cmf_fact_prepare(cmf_fact *a, const float *X, size_t ldx, size_t t0, size_t t1) {
    const size_t kp = CQ_FACT_COLS(a->cols);
    for (size_t g = t0 / CQ_FACT_GROUP; g * CQ_FACT_GROUP < t1; g++)
        cq_fact_group_avx512(X, a->n, ldx, a->cols, kp, g, a->xg + g * kp * CQ_FACT_GROUP);
}

bool cmf_matmul_fact(const cmf_qmat *m, const cmf_fact *a, float *Y, size_t ldy, uint64_t r0,
                     uint64_t r1) {
    return r0 >= r1 || cq_gemm_float_rows_avx512(m, a->xg, a->n, Y, ldy, r0, r1);
}
