/* cortiq_session_eval_batch: one decode step of several sessions in one pass gives each
 * session exactly (bit for bit) the logits of its token evaluated alone, for every quant family
 * the kernels treat differently (q8: f32 activations; q4: int8 activations, prepared tokens;
 * f16: float weights) and for sessions at different positions, on the file's layout, with the
 * default decode copies (q4_tiled / q4_block) and with all of them (cortiq_load_opts.batch_lanes
 * > 0: q8_row and q4tp too), which must also agree with the file's layout within float rounding
 * (hybrid families too); which matrices each setting copies; then the refusals. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cpu.h"
#include "test.h"
#include "tiny_fixture.h"

#define NS    5
#define STEPS 6

static void check_family_lanes(const char *fam, const char *quant, int lanes) {
    char path[256];
    snprintf(path, sizeof path, "batch_decode_%s_%s_lanes%d.cmf", fam, quant, lanes);
    size_t n_tok;
    int32_t *tok = tiny_convert(fam, quant, path, &n_tok);
    if (!tok) return;
    cortiq_model *m = NULL;
    cmf_err err;
    cortiq_load_opts lo = {.threads = 3, .batch_lanes = lanes};
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) {
        free(tok);
        return;
    }
    if (lanes)
        printf("%s %s: batched-decode copies %llu bytes\n", fam, quant,
               (unsigned long long)cortiq_model_lanes_bytes(m));
    uint32_t V = cortiq_model_vocab(m);
    cortiq_session *alone[NS], *batched[NS];
    for (int i = 0; i < NS; i++) {
        CHECK(cortiq_session_create(m, 128, &alone[i], &err) == CMF_OK);
        CHECK(cortiq_session_create(m, 128, &batched[i], &err) == CMF_OK);
        /* prompts of different lengths: the sessions decode at different positions */
        size_t np = 3 + (size_t)i * 5 < n_tok ? 3 + (size_t)i * 5 : n_tok;
        CHECK(cortiq_session_eval(alone[i], tok, np, NULL, &err) == CMF_OK);
        CHECK(cortiq_session_eval(batched[i], tok, np, NULL, &err) == CMF_OK);
    }
    int mismatches = 0;
    for (int step = 0; step < STEPS; step++) {
        int32_t next[NS];
        for (int i = 0; i < NS; i++) {
            next[i] = cortiq_argmax(cortiq_session_logits(alone[i]), V);
            CHECK(cortiq_session_eval(alone[i], &next[i], 1, NULL, &err) == CMF_OK);
        }
        /* batches of every size from 2 to NS: the first k sessions together, the rest alone */
        int k = 2 + step % (NS - 1);
        CHECK_MSG(cortiq_session_eval_batch(batched, next, (size_t)k, &err) == CMF_OK, "%s",
                  err.msg);
        for (int i = k; i < NS; i++)
            CHECK(cortiq_session_eval_batch(batched + i, next + i, 1, &err) == CMF_OK);
        for (int i = 0; i < NS; i++) {
            CHECK(cortiq_session_pos(alone[i]) == cortiq_session_pos(batched[i]));
            mismatches += memcmp(cortiq_session_logits(alone[i]), cortiq_session_logits(batched[i]),
                                 V * sizeof(float)) != 0;
        }
    }
    CHECK_MSG(mismatches == 0, "%s %s%s: %d session steps differ from decoding alone", fam, quant,
              lanes ? " (lanes)" : "", mismatches);
    /* refusals: a session twice, more than 16, a full context */
    cortiq_session *twice[2] = {batched[0], batched[0]};
    int32_t two[2] = {1, 1};
    CHECK(cortiq_session_eval_batch(twice, two, 2, &err) == CMF_E_INVALID_ARG);
    int32_t many[17] = {0};
    cortiq_session *many_s[17];
    for (int i = 0; i < 17; i++)
        many_s[i] = batched[i % NS];
    CHECK(cortiq_session_eval_batch(many_s, many, 17, &err) == CMF_E_INVALID_ARG);
    int32_t bad[2] = {1, (int32_t)V + 5};
    cortiq_session *pair[2] = {batched[0], batched[1]};
    CHECK(cortiq_session_eval_batch(pair, bad, 2, &err) == CMF_E_INVALID_ARG);
    for (int i = 0; i < NS; i++) {
        cortiq_session_free(alone[i]);
        cortiq_session_free(batched[i]);
    }
    cortiq_model_free(m);
    free(tok);
    unlink(path);
}

static void check_family(const char *fam, const char *quant) {
    check_family_lanes(fam, quant, -1);
}

/* batch_lanes: 0 copies q4_tiled, q4_block, q4tp and vbit only, a positive value q8_row too, a
 * negative one none (where the tier has the layout at all: the "all"
 * load copies something). */
static void check_which_copies(const char *fam, const char *quant, bool by_default) {
    char path[256];
    snprintf(path, sizeof path, "batch_decode_which_%s_%s.cmf", fam, quant);
    size_t n_tok;
    int32_t *tok = tiny_convert(fam, quant, path, &n_tok);
    if (!tok) return;
    uint64_t bytes[3] = {0, 0, 0}; /* none, default, all */
    for (int k = 0; k < 3; k++) {
        cortiq_model *m = NULL;
        cmf_err err;
        cortiq_load_opts lo = {.threads = 2, .batch_lanes = k - 1};
        CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
        bytes[k] = cortiq_model_lanes_bytes(m);
        cortiq_model_free(m);
    }
    CHECK_MSG(bytes[0] == 0, "%s %s: copies with batch_lanes < 0", fam, quant);
    if (bytes[2])
        CHECK_MSG(bytes[1] == (by_default ? bytes[2] : 0),
                  "%s %s: default copies %llu bytes, all %llu", fam, quant,
                  (unsigned long long)bytes[1], (unsigned long long)bytes[2]);
    else
        printf("%s %s: no decode copies on this tier\n", fam, quant);
    free(tok);
    unlink(path);
}

/* The batched-decode copies change no result beyond float rounding: a prompt and 8 greedy
 * steps with and without them (hybrid Gated DeltaNet families too, whose sessions decode
 * alone). */
static void check_lanes_agree(const char *fam, const char *quant) {
    char path[256];
    snprintf(path, sizeof path, "batch_decode_agree_%s_%s.cmf", fam, quant);
    size_t n_tok;
    int32_t *tok = tiny_convert(fam, quant, path, &n_tok);
    if (!tok) return;
    float *ref = NULL;
    for (int lanes = 0; lanes < 2; lanes++) {
        cortiq_model *m = NULL;
        cmf_err err;
        cortiq_load_opts lo = {.threads = 2, .batch_lanes = lanes ? 1 : -1};
        CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
        cortiq_session *s = NULL;
        if (m) CHECK(cortiq_session_create(m, 128, &s, &err) == CMF_OK);
        if (!s) {
            cortiq_model_free(m);
            break;
        }
        uint32_t V = cortiq_model_vocab(m);
        CHECK(cortiq_session_eval(s, tok, n_tok < 20 ? n_tok : 20, NULL, &err) == CMF_OK);
        for (int k = 0; k < 8; k++) {
            int32_t next = cortiq_argmax(cortiq_session_logits(s), V);
            CHECK(cortiq_session_eval(s, &next, 1, NULL, &err) == CMF_OK);
        }
        const float *lg = cortiq_session_logits(s);
        if (!lanes) {
            ref = malloc(V * sizeof *ref);
            if (ref) memcpy(ref, lg, V * sizeof *ref);
        } else if (ref) {
            float worst = 0, mag = 0;
            for (uint32_t i = 0; i < V; i++) {
                worst = fmaxf(worst, fabsf(lg[i] - ref[i]));
                mag = fmaxf(mag, fabsf(ref[i]));
            }
            CHECK_MSG(worst <= 1e-4f * (mag + 1),
                      "%s %s: logits with the copies differ by %g "
                      "(largest %g)",
                      fam, quant, worst, mag);
        }
        cortiq_session_free(s);
        cortiq_model_free(m);
    }
    free(ref);
    free(tok);
    unlink(path);
}

/* A mixture-of-experts session restricting its experts or counting routes decodes alone. */
static void check_moe_refusals(void) {
    const char *path = "batch_decode_moe_refusals.cmf";
    size_t n_tok;
    int32_t *tok = tiny_convert("qwen3_moe", "q8", path, &n_tok);
    if (!tok) return;
    cortiq_model *m = NULL;
    cmf_err err;
    cortiq_load_opts lo = {.threads = 2};
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    cortiq_session *s[2] = {NULL, NULL};
    for (int i = 0; m && i < 2; i++) {
        CHECK(cortiq_session_create(m, 64, &s[i], &err) == CMF_OK);
        CHECK(cortiq_session_eval(s[i], tok, 3, NULL, &err) == CMF_OK);
    }
    int32_t next[2] = {tok[3], tok[4]};
    if (s[0] && s[1]) {
        CHECK(cortiq_session_count_routes(s[1], &err) == CMF_OK);
        CHECK(cortiq_session_eval_batch(s, next, 2, &err) == CMF_E_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "route statistics") != NULL, "%s", err.msg);
        CHECK(cortiq_session_pos(s[0]) == 3 && cortiq_session_pos(s[1]) == 3);
    }
    for (int i = 0; i < 2; i++)
        cortiq_session_free(s[i]);
    cortiq_model_free(m);
    free(tok);
    unlink(path);
}

int main(void) {
    check_family("qwen3", "q8");
    check_family("qwen3", "q4");
    check_family("llama", "f16");
    check_family("gemma3_text", "vbit");
    check_family("qwen3_moe", "q8");       /* experts chosen per token */
    check_family("qwen2_moe_mixed", "q4"); /* shared expert with its gate; dense layers too */
    check_family_lanes("qwen3", "q8", 1);
    check_family_lanes("qwen3", "q4", 1);
    check_family_lanes("llama", "q4t", 1);
    check_family_lanes("gemma3_text", "q4tp", 1);
    check_family_lanes("qwen2_moe_mixed", "q4t", 1);
    check_family_lanes("llama", "q4t", 0);
    check_family_lanes("gemma3_text", "vbit", 0); /* the default copy */
    check_family_lanes("gemma3_text", "vbit", 1);
    check_which_copies("llama", "q4t", true);
    check_which_copies("llama", "vbit", true); /* rows sorted by width within windows of 64 */
    check_which_copies("qwen3", "q8", false);
    /* q4tp: its copy (codes and ladder numbers) is near the file's size on both tiers */
    check_which_copies("gemma3_text", "q4tp", true);
    check_lanes_agree("qwen3", "q8");
    check_lanes_agree("qwen3_next", "q4t");
    check_lanes_agree("qwen3_5_text", "q4tp");
    check_lanes_agree("qwen3", "vbit");
    check_moe_refusals();
    TEST_DONE();
}
