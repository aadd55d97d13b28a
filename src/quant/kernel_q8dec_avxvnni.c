/* kernel_q8dec_avxvnni.c - q8_row's one-token rows of the AVX2 tier (q8dec_rows.h, on the same
 * token) with a group's int32 sums made by AVX-VNNI's vpdpbusd, which kernel.c runs where the
 * CPU has it (cq_cpu_avxvnni).
 *
 * vpsignb moves the weights' signs onto the codes as in kernel_q8dec_avx2.c, and one vpdpbusd
 * takes |w| (once per group for all the tokens) times them into int32 lanes, where the plain
 * form needs vpmaddubsw and vpmaddwd: the same exact sums per 4 columns, so the same bits. */
#include <immintrin.h>

#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

#define Q8DEC_TOKEN   int8_t
#define Q8DEC_PREP(w) _mm256_abs_epi8(w)
#define Q8DEC_SUMS(x, w, p)                                                                        \
    _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), p, _mm256_sign_epi8(x, w))
#define Q8DEC_MATVEC   cq_avxvnni_q8dec_tok_matvec
#define Q8DEC_MULTI    cq_avxvnni_q8dec_tok_matvec_multi
#define Q8DEC_PREPARE  cq_avx2_q8dec_tok_prepare
#define Q8DEC_FROM_F32 cq_avxvnni_q8dec_matvec
#include "quant/q8dec_rows.h"
