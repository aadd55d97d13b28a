/* batch_act.c - a batch's activations prepared once for every product and row range that reads
 * them (cmf_pact, quant/kernels_engine.h): rounded to bf16 and regrouped for the bf16 dot
 * products (gemm_bf16dot_avx512.c), or regrouped in f32 for the AVX-512 or the AVX2 float panels
 * (gemm_f32_avx512.c, gemm_f32_avx2.c). Each is the first half of what the one-call kernel does,
 * so the bits are that kernel's. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "quant/gemm_impl.h"
#include "quant/kernels_engine.h"

/* Tokens per group and columns per token (cols rounded up) of a kind's layout. */
static size_t group_of(cmf_pact_kind k) {
    return k == CMF_PACT_BF16 ? CQ_BACT_GROUP : k == CMF_PACT_F32 ? CQ_FACT_GROUP : CQ_FACT2_GROUP;
}

/* Elements of one group's region (bf16: 2-byte units). */
static size_t group_elems(cmf_pact_kind k, size_t cols) {
    return k == CMF_PACT_BF16  ? 2 * CQ_BACT_PAIRS(cols) * CQ_BACT_GROUP
           : k == CMF_PACT_F32 ? CQ_FACT_COLS(cols) * CQ_FACT_GROUP
                               : CQ_FACT2_STRIDE(cols);
}

cmf_pact_kind cmf_pact_for(const cmf_qmat *m, size_t n, unsigned flags) {
    if ((flags & CMF_KF_BF16_ACT) && cq_bf16dot_takes(m, n)) return CMF_PACT_BF16;
    if (cq_float_avx512_takes(m, n, flags)) return CMF_PACT_F32;
    return cq_float_avx2_takes(m, n) ? CMF_PACT_F32_AVX2 : CMF_PACT_NONE;
}

size_t cmf_pact_group(cmf_pact_kind kind) {
    return kind == CMF_PACT_NONE ? 0 : group_of(kind);
}

size_t cmf_pact_bytes(cmf_pact_kind kind, size_t n, size_t cols) {
    if (kind == CMF_PACT_NONE) return 0;
    size_t g = group_of(kind); /* bf16: a pair per 32-bit word, so 4 bytes per 2 columns */
    return (n + g - 1) / g * group_elems(kind, cols) * (kind == CMF_PACT_BF16 ? 2 : 4);
}

void cmf_pact_bind(cmf_pact *a, cmf_pact_kind kind, void *mem, size_t n, size_t cols) {
    *a = (cmf_pact){kind, n, cols, mem};
}

size_t cmf_pact_cut(const cmf_pact *a, size_t t) {
    if (a->kind == CMF_PACT_F32_AVX2) return cq_fact2_cut(a->n, t);
    const size_t g = group_of(a->kind);
    t = (t + g - 1) / g * g;
    return t < a->n ? t : a->n;
}

void cmf_pact_prepare(cmf_pact *a, const float *X, size_t ldx, size_t t0, size_t t1) {
    const size_t g = group_of(a->kind), stride = group_elems(a->kind, a->cols);
    for (size_t i = t0 / g; i * g < t1; i++)
        if (a->kind == CMF_PACT_BF16)
            cq_bact_group_avx512(X, a->n, ldx, a->cols, CQ_BACT_PAIRS(a->cols), i,
                                 (uint32_t *)a->mem + i * stride / 2, true);
        else if (a->kind == CMF_PACT_F32)
            cq_fact_group_avx512(X, a->n, ldx, a->cols, CQ_FACT_COLS(a->cols), i,
                                 (float *)a->mem + i * stride, true);
        else
            cq_fact2_group_avx2(X, a->n, ldx, a->cols, i, (float *)a->mem + i * stride, true);
#if defined(__x86_64__) || defined(__i386__)
    /* the groups went out with non-temporal stores (gemm_impl.h): visible before the pool's
     * barrier hands them to the other threads */
    _mm_sfence();
#endif
}

bool cmf_matmul_pact(const cmf_qmat *m, const cmf_pact *a, float *Y, size_t ldy, uint64_t r0,
                     uint64_t r1) {
    if (r0 >= r1) return true;
    switch (a->kind) {
    case CMF_PACT_BF16:
        return cq_gemm_bf16dot_rows_avx512(m, a->mem, a->n, Y, ldy, r0, r1);
    case CMF_PACT_F32:
        return cq_gemm_float_rows_avx512(m, a->mem, a->n, Y, ldy, r0, r1);
    case CMF_PACT_F32_AVX2:
        return cq_gemm_float_rows_avx2(m, a->mem, a->n, Y, ldy, r0, r1);
    default:
        return false;
    }
}
