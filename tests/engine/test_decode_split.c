/* Decode products split over threads (matmul_sched.c: each thread takes its range in shrinking
 * pieces, then pieces of the others'; on AVX-512 VNNI the 4-bit class runs on a token quantized
 * once per thread, cmf_tok8_*): however the pieces fall, every row's result must be the one a
 * single thread computes, bit for bit. The tiny checkpoints of three families, in q4tp, q4t,
 * q8 and f16, are fed 40 tokens one at a time with 1, 2 and 3 threads (3 leaves ranges of
 * unequal length and more stealing); with at most 40 keys decode attention is one unit per kv
 * head whatever the thread count, so the logits of every step must be identical. Ten runs with
 * 2 threads then check that timing (who steals what) changes nothing either. A MoE decode step
 * runs its experts' products as one group (cq_matmul_group: 64-row pieces from a shared
 * counter), which the same comparison covers. */
#include <string.h>

#include "cortiq/engine.h"
#include "test.h"
#include "tiny_fixture.h"

#define STEPS 40

/* The logits of STEPS single-token steps, [STEPS][V]; NULL on failure. */
static float *decode_logits(const char *cmf, unsigned threads, const int32_t *tokens, uint32_t *V) {
    cortiq_load_opts lo = {.threads = threads};
    return tiny_logits(cmf, &lo, 64, tokens, STEPS, 1, V);
}

static void run(const char *fam, const char *quant) {
    char out[256];
    snprintf(out, sizeof out, "split_%s_%s.cmf", fam, quant);
    size_t nt = 0;
    int32_t *tokens = tiny_convert(fam, quant, out, &nt);
    CHECK(nt >= STEPS);
    if (!tokens || nt < STEPS) return;
    uint32_t V = 0, V2 = 0;
    float *ref = decode_logits(out, 1, tokens, &V);
    for (unsigned th = 2; ref && th <= 3; th++)
        for (int rep = 0; rep < (th == 2 ? 10 : 1); rep++) {
            float *got = decode_logits(out, th, tokens, &V2);
            CHECK(got && V2 == V);
            size_t diff = 0;
            for (size_t i = 0; got && i < (size_t)STEPS * V; i++)
                diff += memcmp(&got[i], &ref[i], sizeof *got) != 0;
            CHECK_MSG(diff == 0,
                      "%s %s, %u threads (run %d): %zu of %zu logits differ from 1 thread", fam,
                      quant, th, rep, diff, (size_t)STEPS * V);
            free(got);
        }
    free(ref);
    free(tokens);
    remove(out);
}

int main(void) {
    /* qwen3_moe: its decode runs the selected experts' products as one group per layer */
    static const char *fams[] = {"llama", "qwen2", "gemma3_text", "qwen3_moe"};
    static const char *quants[] = {"q4tp", "q4t", "q8", "f16"};
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
        for (size_t q = 0; q < sizeof quants / sizeof quants[0]; q++)
            run(fams[f], quants[q]);
    TEST_DONE();
}
