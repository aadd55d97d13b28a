/* Skill overlays through the library API (spec §9): cortiq_load_opts.skill reads skill.ID.<name>
 * in place of the backbone tensor, a blend builds sum_i w_i T_i, the registry's ids are checked
 * (unknown ids named with the list), and a file without selection blocks cannot be routed.
 * The skills are made here: layer 1's down_proj scaled by 0.5 (skill "half") and 1.5 ("more"),
 * appended to the f32 conversion of tests/fixtures/skills/base. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "cortiq/quant.h"
#include "cortiq/skill.h"
#include "cortiq/writer.h"
#include "test.h"

#define FILE_ "skill_overlay.cmf"
#define DOWN  "model.layers.1.mlp.down_proj.weight"

static const int32_t k_ids[] = {1, 40, 50, 60, 70, 80};
enum { N_IDS = sizeof k_ids / sizeof k_ids[0] };

static int make_file(void) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name("f32", &o.quant));
    cmf_err err;
    int ok = cmf_convert_hf(CORTIQ_SOURCE_DIR "/tests/fixtures/skills/base", FILE_, NULL, &o, NULL,
                            &err) == CMF_OK;
    CHECK_MSG(ok, "%s", err.msg);
    if (!ok) return 0;
    cmf_file *f = NULL;
    CHECK_STATUS(cmf_open(FILE_, 0, &f, &t_err_), CMF_OK);
    const cmf_tensor *t = f ? cmf_file_find(f, DOWN) : NULL;
    CHECK(t && t->dtype == CMF_DT_F32);
    if (!t) return cmf_close(f), 0;
    size_t n = t->nbytes / 4;
    float *half = malloc(t->nbytes), *more = malloc(t->nbytes);
    CHECK_STATUS(
        cmf_quant_dequant(CMF_DT_F32, t->ndim, t->shape, t->data, t->nbytes, half, &t_err_),
        CMF_OK);
    for (size_t i = 0; i < n; i++)
        more[i] = 1.5f * half[i], half[i] *= 0.5f;
    const cmf_header *h = cmf_file_header(f);
    /* the header with a two-skill registry: {"skills": [...]} spliced before the last brace */
    const char *reg =
        ",\"skills\":[{\"id\":\"half\",\"layers\":[1]},{\"id\":\"more\",\"layers\":[1]}]}";
    char *json = malloc(h->json_len + strlen(reg) + 1);
    memcpy(json, h->json, h->json_len);
    size_t end = h->json_len;
    while (end && json[end - 1] != '}')
        end--;
    strcpy(json + end - 1, reg);
    cmf_appender *a = NULL;
    CHECK_STATUS(cmf_append_begin(FILE_, &a, &t_err_), CMF_OK);
    CHECK_STATUS(cmf_append_add_tensor(a, "skill.half." DOWN, CMF_DT_F32, t->ndim, t->shape, half,
                                       t->nbytes, 0, &t_err_),
                 CMF_OK);
    CHECK_STATUS(cmf_append_add_tensor(a, "skill.more." DOWN, CMF_DT_F32, t->ndim, t->shape, more,
                                       t->nbytes, 0, &t_err_),
                 CMF_OK);
    CHECK_STATUS(cmf_append_set_header(a, json, strlen(json), &t_err_), CMF_OK);
    cmf_close(f);
    CHECK_STATUS(cmf_append_commit(a, &t_err_), CMF_OK);
    cmf_append_free(a);
    free(json), free(half), free(more);
    return 1;
}

/* The last position's logits of k_ids under opts (malloc'd [*V]); NULL when the load fails,
 * with its status in *st. */
static float *logits(const cortiq_load_opts *lo, uint32_t *V, cmf_status *st, cmf_err *err) {
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    float *out = NULL;
    if ((*st = cortiq_model_load(FILE_, lo, &m, err))) return NULL;
    *V = cortiq_model_vocab(m);
    CHECK_STATUS(cortiq_session_create(m, 16, &s, &t_err_), CMF_OK);
    CHECK_STATUS(cortiq_session_eval(s, k_ids, N_IDS, NULL, &t_err_), CMF_OK);
    out = malloc(*V * sizeof *out);
    memcpy(out, cortiq_session_logits(s), *V * sizeof *out);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return out;
}

static double max_diff(const float *a, const float *b, uint32_t n) {
    double d = 0;
    for (uint32_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

int main(void) {
    if (!make_file()) TEST_DONE();
    cmf_err err;
    cmf_status st;
    uint32_t V = 0;
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    float *base = logits(&lo, &V, &st, &err);
    lo.skill = "none";
    float *none = logits(&lo, &V, &st, &err);
    lo.skill = "half";
    float *half = logits(&lo, &V, &st, &err);
    lo.skill = NULL;
    cortiq_skill_weight one[] = {{"half", 2.0f}};
    lo.blend = one, lo.n_blend = 1; /* normalized: 1.0 x half */
    float *blend1 = logits(&lo, &V, &st, &err);
    cortiq_skill_weight even[] = {{"half", 0.5f}, {"more", 0.5f}};
    lo.blend = even, lo.n_blend = 2; /* 0.25 W + 0.75 W = the backbone */
    float *blend2 = logits(&lo, &V, &st, &err);
    CHECK(base && none && half && blend1 && blend2);
    if (base && none && half && blend1 && blend2) {
        CHECK_MSG(!memcmp(base, none, V * sizeof *base), "skill none differs from the backbone");
        CHECK_MSG(max_diff(base, half, V) > 1e-3, "skill half computes the backbone");
        CHECK_MSG(!memcmp(half, blend1, V * sizeof *half), "blend {half: 1} differs from half: %g",
                  max_diff(half, blend1, V));
        CHECK_MSG(max_diff(base, blend2, V) < 1e-4, "blend of 0.5x and 1.5x vs backbone: %g",
                  max_diff(base, blend2, V));
    }
    /* refusals */
    lo.blend = NULL, lo.n_blend = 0, lo.skill = "sql";
    CHECK(!logits(&lo, &V, &st, &err) && st == CMF_E_NOT_FOUND);
    CHECK_MSG(strstr(err.msg, "skill 'sql' is not in this file (skills: half, more)"), "%s",
              err.msg);
    cortiq_skill_weight neg[] = {{"half", -1.0f}, {"more", 2.0f}}, zero[] = {{"half", 0.0f}};
    lo.skill = NULL, lo.blend = neg, lo.n_blend = 2;
    CHECK(!logits(&lo, &V, &st, &err) && st == CMF_E_INVALID_ARG);
    lo.blend = zero, lo.n_blend = 1;
    CHECK(!logits(&lo, &V, &st, &err) && st == CMF_E_INVALID_ARG);
    /* no selection blocks: nothing to route to */
    cortiq_model *m = NULL;
    CHECK_STATUS(cortiq_model_load(FILE_, NULL, &m, &t_err_), CMF_OK);
    cortiq_skill_score sc[4];
    size_t n = 9;
    if (m) CHECK_STATUS(cortiq_skill_route(m, k_ids, N_IDS, sc, 4, &n, &t_err_), CMF_E_NOT_FOUND);
    CHECK(n == 0);
    cortiq_model_free(m);
    free(base), free(none), free(half), free(blend1), free(blend2);
    TEST_DONE();
}
