/* `cortiq requant` on the tiny llama: f32 -> q8 gives byte for byte the tensors a direct q8
 * conversion writes; q8 -> f32 holds the q8 values exactly; glob selection touches only what it
 * matches; masks, tokenizer and unselected tensors are carried byte for byte; in place is a
 * rewrite that verifies and runs; refusals name the tensor and the rule and write nothing. */
#include <jansson.h>

#include "test.h"

#include "defrag_fixture.h"
#include "engine/npy.h"

static const uint8_t *section(cmf_file *f, int masks, size_t *len) {
    const cmf_envelope *e = cmf_file_envelope(f);
    size_t n;
    const uint8_t *img = cmf_file_shard_bytes(f, 0, &n);
    *len = masks ? e->masks_len : e->vocab_len;
    uint64_t off = masks ? e->masks_off : e->vocab_off;
    return off ? img + off : NULL;
}

static int same_section(cmf_file *a, cmf_file *b, int masks) {
    size_t la, lb;
    const uint8_t *x = section(a, masks, &la), *y = section(b, masks, &lb);
    return x && y && la == lb && !memcmp(x, y, la);
}

static void test_round_trip(void) {
    df_task t;
    df_task_make(&t, 0.5, 5);
    CHECK(df_convert("f32", "rq_plain_f32.cmf"));
    CHECK(df_convert("q8", "rq_plain_q8.cmf"));
    CHECK(df_with_masks("rq_plain_f32.cmf", "rq_src.cmf", &t, 1));
    cmf_requant_opts o;
    cmf_requant_opts_default(&o);
    o.to = CMF_DT_Q8_ROW;
    cmf_requant_stats s;
    CHECK_STATUS(cmf_requant("rq_src.cmf", "rq_q8.cmf", &o, &s, &t_err_), CMF_OK);
    CHECK_EQ_U64(s.recoded, 16); /* embed, head, 7 matrices x 2 layers */
    CHECK(df_verify("rq_q8.cmf"));
    cmf_file *a = df_open("rq_q8.cmf"), *b = df_open("rq_plain_q8.cmf"),
             *src = df_open("rq_src.cmf");
    if (!a || !b || !src) return;
    CHECK_EQ_U64(cmf_file_tensor_count(a), cmf_file_tensor_count(b));
    for (size_t i = 0; i < cmf_file_tensor_count(b); i++) {
        const cmf_tensor *y = cmf_file_tensor_at(b, i), *x = cmf_file_find(a, y->name);
        CHECK_MSG(x && x->dtype == y->dtype && x->nbytes == y->nbytes && x->hash == y->hash,
                  "%s differs from a direct q8 conversion", y->name);
    }
    CHECK_MSG(same_section(a, src, 1), "masks section not carried");
    CHECK_MSG(same_section(a, src, 0), "tokenizer section not carried");
    const cmf_header *h = cmf_file_header(a);
    CHECK(h->quant_type && !strcmp(h->quant_type, "Q8_ROW"));
    json_t *p = json_loads(h->provenance_json ? h->provenance_json : "{}", 0, NULL);
    json_t *rq = json_object_get(p, "requant");
    CHECK(json_is_object(rq) &&
          !strcmp(json_string_value(json_object_get(rq, "to")) ?: "", "q8_row"));
    json_decref(p);

    /* q8 -> f32: the q8 values exactly */
    o.to = CMF_DT_F32;
    CHECK_STATUS(cmf_requant("rq_q8.cmf", "rq_back.cmf", &o, &s, &t_err_), CMF_OK);
    cmf_file *c = df_open("rq_back.cmf");
    if (c) {
        const cmf_tensor *x = cmf_file_find(a, "model.layers.1.mlp.down_proj.weight"),
                         *y = cmf_file_find(c, "model.layers.1.mlp.down_proj.weight");
        CHECK(x && y && y->dtype == CMF_DT_F32);
        float *v = malloc(DF_HID * DF_I * sizeof *v);
        CHECK_STATUS(cmf_quant_dequant((cmf_dtype)x->dtype, x->ndim, x->shape, x->data, x->nbytes,
                                       v, &t_err_),
                     CMF_OK);
        CHECK(y && !memcmp(v, y->data, DF_HID * DF_I * sizeof *v));
        free(v);
        cmf_close(c);
    }
    cmf_close(a);
    cmf_close(b);
    cmf_close(src);
}

static void test_glob_in_place(const int32_t *tokens, size_t nt) {
    cmf_requant_opts o;
    cmf_requant_opts_default(&o); /* q4tp */
    const char *globs[] = {"*.mlp.*_proj.weight", "model.layers.1.self_attn.q_proj.weight"};
    o.globs = globs;
    o.n_globs = 2;
    CHECK(df_convert("f32", "rq_inplace.cmf"));
    cmf_file *before = df_open("rq_plain_f32.cmf");
    cmf_requant_stats s;
    CHECK_STATUS(cmf_requant("rq_inplace.cmf", "rq_inplace.cmf", &o, &s, &t_err_), CMF_OK);
    CHECK_EQ_U64(s.selected, 7);
    CHECK(df_verify("rq_inplace.cmf"));
    cmf_file *f = df_open("rq_inplace.cmf");
    if (!f || !before) return;
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *x = cmf_file_tensor_at(f, i), *y = cmf_file_find(before, x->name);
        bool sel =
            strstr(x->name, ".mlp.") || !strcmp(x->name, "model.layers.1.self_attn.q_proj.weight");
        CHECK_MSG(y && (sel ? x->dtype == CMF_DT_Q4TP : x->hash == y->hash && x->dtype == y->dtype),
                  "%s", x->name);
    }
    CHECK(!strcmp(cmf_file_header(f)->quant_type, "F32")); /* most matrix weights stay f32 */
    cmf_close(f);
    cmf_close(before);
    uint32_t V1 = 0, V2 = 0;
    float *a = df_logits("rq_inplace.cmf", tokens, nt, 0, &V1),
          *b = df_logits("rq_plain_f32.cmf", tokens, nt, 0, &V2);
    CHECK(a && b && V1 == V2);
    double num = 0, den = 0;
    for (size_t i = 0; a && b && i < nt * (size_t)V1; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    double rel = den > 0 ? sqrt(num / den) : 1;
    printf("q4tp FFN + one q_proj against f32: relative logit RMS error %.4f\n", rel);
    CHECK(rel > 0 && rel < 0.2);
    free(a);
    free(b);
}

static void test_refusals(void) {
    df_task t;
    df_task_make(&t, 0.45, 9);
    CHECK(cmf_popcount(t.ffn[0], DF_I) % 32 != 0);
    CHECK(df_with_masks("rq_plain_f32.cmf", "rq_src2.cmf", &t, 1));
    CHECK_STATUS(cmf_defrag("rq_src2.cmf", "t0", "rq_defrag.cmf", NULL, NULL, &t_err_), CMF_OK);
    cmf_requant_opts o;
    cmf_requant_opts_default(&o);
    cmf_err err;
    remove("rq_never.cmf");
    CHECK(cmf_requant("rq_defrag.cmf", "rq_never.cmf", &o, NULL, &err) == CMF_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "model.layers.0.mlp.down_proj.weight") &&
                  strstr(err.msg, "multiple of 32"),
              "%s", err.msg);
    FILE *fp = fopen("rq_never.cmf", "rb");
    CHECK(!fp);
    if (fp) fclose(fp);
    const char *norm[] = {"*norm*"};
    o.globs = norm;
    o.n_globs = 1;
    o.to = CMF_DT_Q8_ROW;
    CHECK(cmf_requant("rq_defrag.cmf", "rq_never.cmf", &o, NULL, &err) == CMF_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "always f16"), "%s", err.msg);
    const char *none[] = {"nothing.*"};
    o.globs = none;
    CHECK(cmf_requant("rq_defrag.cmf", "rq_never.cmf", &o, NULL, &err) == CMF_E_NOT_FOUND);
    /* the odd-width down_proj excluded: the rest goes to q4tp */
    const char *gu[] = {"*gate_proj*", "*up_proj*", "*self_attn*"};
    o.globs = gu;
    o.n_globs = 3;
    o.to = CMF_DT_Q4TP;
    CHECK_STATUS(cmf_requant("rq_defrag.cmf", "rq_defrag_q4tp.cmf", &o, NULL, &t_err_), CMF_OK);
    CHECK(df_verify("rq_defrag_q4tp.cmf"));
    o.to = CMF_DT_Q1;
    CHECK(cmf_requant("rq_defrag.cmf", "rq_never.cmf", &o, NULL, &err) == CMF_E_INVALID_ARG);
}

int main(void) {
    size_t nt = 0;
    char dt;
    int32_t *tokens = npy_load(DF_TINY "/tokens.npy", &nt, &dt);
    CHECK(tokens && dt == 'i' && nt >= 16);
    if (!tokens) TEST_DONE();
    test_round_trip();
    test_glob_in_place(tokens, 16);
    test_refusals();
    free(tokens);
    TEST_DONE();
}
