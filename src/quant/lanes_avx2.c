/* lanes_avx2.c - the batched-decode copy of q8_row and the 4-bit class (q4_tiled, q4_block,
 * q4tp; its layout: lanes.c) read on the AVX2 tier: one int32 lane per row.
 *
 * The row-major kernels (kernel_i8dec_avx2.c) finish each 32-column group of a row inside one
 * vector, so every token pays a correction load, a conversion, a scale multiply and an FMA per
 * 64 weights; on two Zen 3 cores that binds batched decode at ~3.9 cycles per 64 weights and token.
 * Here a panel of 8 rows holds, per group, 4 vectors of 32 bytes: byte 4i + j of vector k holds
 * row i's codes of columns 4k + j (low nibble) and 16 + 4k + j (high nibble). One and, and one
 * shift + and, give two vectors of 8 rows x 4 consecutive codes, which every token multiplies by
 * its 4 matching activations broadcast (vpmaddubsw, the prefill GEMM's form, gemm_i8_avx2.c):
 * per 256 weights and token 8 vpmaddubsw and 8 int16 adds, then one vpmaddwd, the offset
 * correction, one conversion and one FMA for all 8 rows. A block's int16 sum stays within
 * 8 * 2 * 15 * 127 = 30480.
 *
 * Each row's sum runs group after group in its own lane, the same instructions for one token
 * as for several, so a token's result does not depend on which tokens share the pass. The
 * scales follow the nibbles of each panel: f16 as stored (q4_tiled, q4_block), or q4tp's 8
 * rows' lo and step and their 5-bit codes per group (f32 rungs would make the copy a fifth
 * larger than the file). A pass computes the panel's rungs 0..7 and the factors of the rest
 * once (2 exp2 polynomials and 12 products for 8 rows, the integer GEMM's ladder and so its
 * bits, q4tp_ladder_avx2.h); each group then takes its rungs one of two ways, the same bits either
 * way. On AMD's cores a tree of 10 blends on the codes' bits and one product (an exp2 per group
 * and 8 rows took 2.1x as long there, a gather from the panel's ladders 1.6x; one token, in
 * cache, Zen 4). On Intel's, where vblendvps is three operations (Golden Cove), the tree took
 * ~15 cycles a group, half the one-token pass; there the pass writes the panel's 32 rungs
 * (1 KiB, from the same parts) and one gather a group reads them (~5 cycles), unless the
 * Downfall mitigation slows gathers (cq_cpu_gather_fast).
 *
 * q8_row takes the same panels with its int8 weights as they are: per group 8 vectors, byte
 * 4i + j of vector k row i's weight of column 4k + j, and the panel's 8 row scales (f32) after
 * the groups. Per group and token: 8 times vpsignb (the weight's sign onto the 4 broadcast
 * codes), vpmaddubsw by |w| (a pair at most 2 * 128 * 127 = 32512) and vpmaddwd, then one
 * conversion and one FMA by the token's dx; the row scale multiplies the sum at the end. Against
 * the row-major q8 kernel (kernel_q8dec_avx2.c): 17 multiply-pipe operations per 256 weights and
 * token instead of 24.
 *
 * The passes live in lanes_avx2_pass.h, built here with vpmaddubsw and in lanes_avxvnni.c with
 * AVX-VNNI's vpdpbusd (the same integer sums, so the same bits), which run where the CPU has it
 * (cq_cpu_avxvnni). The copy is made on request (cmf_qmat_build_lanes) and then serves the
 * matrix's prepared-token products on this tier (kernel.c). */
#include <immintrin.h>
#include <string.h>

#include "quant/lanes_avx2_pass.h"

/* q8_row in the GEMM's sign form: block b's |w| vectors at panel + (16b + k) * 32, w's at
 * panel + (16b + 8 + k) * 32, the row scales at rs[0 .. 8). */
static void unpack_q8(const cmf_qmat *m, const uint8_t *p, size_t nb, uint8_t *panel, float *rs) {
    const uint64_t G = m->groups;
    for (uint64_t g = 0; g < nb; g++) {
        __m256i *o = (__m256i *)(void *)(panel + g * 16 * 32);
        for (int k = 0; k < 8; k++) {
            __m256i w =
                g < G ? _mm256_load_si256((const __m256i *)(const void *)(p + g * 256 + 32 * k))
                      : _mm256_setzero_si256();
            _mm256_store_si256(o + k, _mm256_abs_epi8(w));
            _mm256_store_si256(o + 8 + k, w);
        }
    }
    _mm256_storeu_ps(rs, _mm256_load_ps((const float *)(const void *)(p + G * 256)));
}

void cq_avx2_lanes_unpack(const cmf_qmat *m, uint64_t r, size_t nb, uint8_t *panel, float *bs) {
    const uint64_t G = m->groups;
    if (m->dtype == CMF_DT_Q8_ROW) {
        unpack_q8(m, (const uint8_t *)m->lanes + (r / PR) * cq_lanes_panel_bytes(m), nb, panel, bs);
        return;
    }
    const uint8_t *p = (const uint8_t *)m->lanes + (r / PR) * cq_lanes_panel_bytes(m),
                  *sc = p + G * 128;
    const __m256i m4 = _mm256_set1_epi8(15);
    const int tp = m->dtype == CMF_DT_Q4TP ? tp_pick() : TP_NONE;
    ladders8 lad;
    if (tp != TP_NONE) panel_ladders(sc, tp, &lad);
    for (uint64_t g = 0; g < nb; g++) {
        __m256i *o = (__m256i *)(void *)(panel + g * 8 * 32);
        if (g >= G) { /* blocks past the columns: zero codes and scales */
            for (int k = 0; k < 8; k++)
                _mm256_store_si256(o + k, _mm256_setzero_si256());
            _mm256_storeu_ps(bs + g * PR, _mm256_setzero_ps());
            continue;
        }
        cq_prefetch_weights(p + g * 128);
        cq_prefetch_weights(p + g * 128 + 64);
        for (int k = 0; k < 4; k++) {
            __m256i v = _mm256_load_si256((const __m256i *)(const void *)(p + g * 128 + 32 * k));
            _mm256_store_si256(o + k, _mm256_and_si256(v, m4));
            _mm256_store_si256(o + 4 + k, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
        _mm256_storeu_ps(bs + g * PR, group_scales(sc, g, tp, &lad));
    }
}

static const cq_lanes_avx2_passes passes_avx2 = CQ_LANES_AVX2_PASSES;

void cq_avx2_lanes_matvec_multi(const cmf_qmat *m, const void *const *tok, size_t n,
                                float *const *y, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups, pb = cq_lanes_panel_bytes(m);
    const cq_lanes_avx2_passes *ps = cq_cpu_avxvnni() ? &cq_lanes_avxvnni_passes : &passes_avx2;
    const pass_fn *fns = m->dtype == CMF_DT_Q8_ROW ? ps->q8
                         : m->dtype == CMF_DT_Q4TP ? (tp_pick() == TP_BLEND ? ps->tp : ps->tg)
                                                   : ps->f16;
    cq_lanes_toks k;
    const size_t passes = cq_lanes_toks_init(&k, tok, n, m->cols, CQ_LANES_PASS);
    for (uint64_t r = r0 - r0 % PR; r < r1; r += PR) {
        const uint8_t *p = (const uint8_t *)m->lanes + (r / PR) * pb;
        const uint64_t lo = r < r0 ? r0 : r, hi = r + PR < r1 ? r + PR : r1;
        for (size_t q = 0; q < passes; q++) {
            const size_t t = k.first[q], nt = k.count[q];
            __m256 v[CQ_LANES_PASS];
            fns[nt](p, G, k.xq + t, k.dx + t, k.c8 + t, v);
            for (size_t j = 0; j < nt; j++) {
                float *o = y[t + j] + (lo - r0);
                if (lo == r && hi == r + PR) {
                    _mm256_storeu_ps(o, v[j]);
                } else {
                    float f[PR];
                    _mm256_storeu_ps(f, v[j]);
                    memcpy(o, f + (lo - r), (size_t)(hi - lo) * sizeof *f);
                }
            }
        }
    }
}
