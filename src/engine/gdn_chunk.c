/* gdn_chunk.c - the scalar tier of the chunked delta rule, its scratch size and the tier choice
 * (gdn_chunk.h). */
#define GDN_CHUNK_NAME cq_gdn_chunk_scalar
#define GDN_CHUNK_NB   8
#include "engine/gdn_chunk_body.h"

#include "common/cpu.h"

static const cq_gdn_chunk_fn k_tiers[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = cq_gdn_chunk_scalar,
    [CQ_ISA_AVX2] = cq_gdn_chunk_avx2,
    [CQ_ISA_AVX512] = cq_gdn_chunk_avx512,
};

size_t cq_gdn_chunk_work(uint32_t dk, uint32_t dv) {
    /* K, Q, K^T, X, D, T, P (gdn_chunk_body.h) */
    return (size_t)CQ_GDN_CHUNK * (3 * (size_t)dk + 2 * (size_t)dv) +
           2 * (size_t)CQ_GDN_CHUNK * CQ_GDN_CHUNK;
}

cq_gdn_chunk_fn cq_gdn_chunk_get(void) {
    cq_gdn_chunk_fn f = CQ_ISA_SELECT(k_tiers);
    /* without fused multiply-adds the products lose to the recurrence (bench_gdn_chunk: 0.27x) */
    return f == cq_gdn_chunk_scalar ? NULL : f;
}
