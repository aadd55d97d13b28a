/* Prompt prefill through the integer GEMM (cmf_matmul_qact, the default for q8_row / q4_* / vbit
 * weights on AVX-512 VNNI and AVX2 CPUs; CTest runs this once more with CORTIQ_CPU=avx2) against
 * exact f32 activations (CORTIQ_ACT_F32), on tiny checkpoints converted to q8, q4t, q4tp and vbit
 * (vbit_ro):
 *  - the logits of a 64-token batch stay within 3e-2 of the exact run (max |diff| / max |logit|;
 *    per-32 int8 activations carry ~0.4 % relative error per product, which the layers compound),
 *    the argmax agrees at >= 90 % of the positions, and the path really ran (nonzero difference);
 *  - decode (one token at a time) and batches below the GEMM's threshold: int8 activations
 *    (CMF_KF_INT8_ACT) within the same 3e-2, and really taken (nonzero difference); except
 *    one token through q8_row weights where AVX-512 VNNI is not in effect (q8's prepared int8
 *    token exists only there: cq_dtype_int8_act's CQ_INT8_TOK8), which keeps f32 activations (equal
 * to the exact run) while q8 batches below the threshold still take int8. */
#include <math.h>
#include <string.h>

#include "cortiq/engine.h"
#include "common/cpu.h"
#include "cortiq/kernels.h"
#include "quant/kernels_engine.h"
#include "logits_cmp.h"
#include "test.h"
#include "tiny_fixture.h"

static float *eval_all(const char *path, int exact, const int32_t *tokens, size_t n, int one_by_one,
                       uint32_t *V) {
    cortiq_load_opts lo = {
        .threads = 2, .kv = CORTIQ_KV_F32, .act = exact ? CORTIQ_ACT_F32 : CORTIQ_ACT_DEFAULT};
    return tiny_logits(path, &lo, 128, tokens, n, one_by_one, V);
}

static void run(const char *fam, const char *quant) {
    char out[256];
    snprintf(out, sizeof out, "prefill_qact_%s_%s.cmf", fam, quant);
    size_t nt = 0;
    int32_t *tokens = tiny_convert(fam, quant, out, &nt);
    CHECK(nt == 64);
    if (!tokens) return;
    uint32_t V = 0;
    float *exact = eval_all(out, 1, tokens, 64, 0, &V), *fast = eval_all(out, 0, tokens, 64, 0, &V);
    float *exact1 = eval_all(out, 1, tokens, 64, 1, &V),
          *fast1 = eval_all(out, 0, tokens, 64, 1, &V);
    float *small_exact = eval_all(out, 1, tokens, 3, 0, &V),
          *small_fast = eval_all(out, 0, tokens, 3, 0, &V);
    if (exact && fast && exact1 && fast1 && small_exact && small_fast) {
        double rel = max_rel_diff(fast, exact, 64 * (size_t)V);
        int agree = 0;
        for (size_t t = 0; t < 64; t++)
            agree += cortiq_argmax(fast + t * V, V) == cortiq_argmax(exact + t * V, V);
        printf("%-12s %-4s int8 prefill: logits max rel diff %.3g, argmax agrees at %d/64\n", fam,
               quant, rel, agree);
        CHECK_MSG(rel <= 3e-2, "%s %s: int8 prefill logits differ by %.3g", fam, quant, rel);
        CHECK_MSG(agree >= 58, "%s %s: argmax agrees at %d/64 positions", fam, quant, agree);
        if (cmf_qact_simd()) CHECK_MSG(rel > 0, "%s %s: the integer GEMM did not run", fam, quant);
        CHECK(max_rel_diff(exact, exact1, 64 * (size_t)V) <= 1e-5);
        double rel1 = max_rel_diff(fast1, exact1, 64 * (size_t)V),
               rel3 = max_rel_diff(small_fast, small_exact, 3 * (size_t)V);
        /* decode and small batches: int8 activations (CMF_KF_INT8_ACT) for these integer-coded
         * weights too, within the same bound */
        printf("%-12s %-4s int8 decode: logits max rel diff %.3g\n", fam, quant, rel1);
        CHECK_MSG(rel1 <= 3e-2 && rel3 <= 3e-2, "%s %s: int8 decode differs by %.3g / %.3g", fam,
                  quant, rel1, rel3);
        if (cq_cpu_isa() > CQ_ISA_AVX2 && !strcmp(quant, "q8") && !cmf_qact_fast()) {
            /* AVX-512 without VNNI: q8_row's one token streams in f32 (the AVX2 tier and VNNI
             * take their prepared-token kernels) */
            CHECK_MSG(rel1 == 0, "%s q8: one-token products took int8 (%.3g off)", fam, rel1);
            CHECK_MSG(rel3 > 0, "%s q8: int8 small batches did not run", fam);
        } else if (cq_cpu_isa() == CQ_ISA_AVX2 ||
                   (cq_cpu_isa() > CQ_ISA_AVX2 && strcmp(quant, "vbit"))) {
            /* (vbit's one-token int8 path on AVX-512 needs VBMI and GFNI: not checked there) */
            CHECK_MSG(rel1 > 0, "%s %s: int8 decode did not run", fam, quant);
        }
    }
    free(exact), free(fast), free(exact1), free(fast1), free(small_exact), free(small_fast),
        free(tokens);
    remove(out);
}

int main(void) {
    static const char *fams[] = {"llama", "qwen2", "gemma3_text", "mistral"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        run(fams[i], "q8");
        run(fams[i], "q4t");
        run(fams[i], "q4tp");
        run(fams[i], "vbit");
    }
    TEST_DONE();
}
