/* `convert --defrag SKILL_DIR` (spec §11) on the tiny llama with generated skill directories:
 * an explicit keep-set (ffn_keep.npy, bool) gives byte for byte the FFN tensors that
 * `cortiq defrag` writes for the same mask; without it the keep-set is read from the zero
 * columns of the effective down_proj (a tensors/ overlay); q4t writes an odd-width down_proj as
 * q8_2f; bad inputs are refused by name. */
#include <sys/stat.h>

#include "test.h"

#include "defrag_fixture.h"

static int convert_defrag(const char *quant, const char *dir, const char *out, cmf_err *err) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name(quant, &o.quant));
    o.threads = 1;
    o.defrag_dir = dir;
    return cmf_convert_hf(DF_TINY, out, NULL, &o, NULL, err) == CMF_OK;
}

static void check_same_ffn(const char *a_path, const char *b_path) {
    cmf_file *a = df_open(a_path), *b = df_open(b_path);
    if (!a || !b) return;
    CHECK_EQ_U64(cmf_file_tensor_count(a), cmf_file_tensor_count(b));
    for (size_t i = 0; i < cmf_file_tensor_count(a); i++) {
        const cmf_tensor *x = cmf_file_tensor_at(a, i), *y = cmf_file_find(b, x->name);
        if (strstr(x->name, "self_attn")) continue;
        CHECK_MSG(y && x->hash == y->hash && x->shape[0] == y->shape[0] &&
                      x->shape[1] == y->shape[1],
                  "%s differs", x->name);
    }
    CHECK(cmf_file_masks(a) == NULL);
    CHECK(cmf_file_header(a)->provenance_json &&
          strstr(cmf_file_header(a)->provenance_json, "\"kept_per_layer\""));
    cmf_close(a);
    cmf_close(b);
}

static void test_keep_file(void) {
    df_task t;
    df_task_make(&t, 0.5, 11);
    mkdir("dfh_skill", 0755);
    uint8_t keep[DF_L][DF_I];
    for (unsigned l = 0; l < DF_L; l++)
        for (unsigned i = 0; i < DF_I; i++)
            keep[l][i] = cmf_bit(t.ffn[l], i);
    uint64_t shape[2] = {DF_L, DF_I};
    df_npy_write("dfh_skill/ffn_keep.npy", "|b1", 1, shape, 2, keep);
    cmf_err err;
    CHECK_MSG(convert_defrag("f32", "dfh_skill", "dfh_keep.cmf", &err), "%s", err.msg);
    CHECK(df_verify("dfh_keep.cmf"));
    /* the same mask through `cortiq defrag` */
    CHECK(df_convert("f32", "dfh_plain.cmf"));
    CHECK(df_with_masks("dfh_plain.cmf", "dfh_src.cmf", &t, 1));
    CHECK_STATUS(cmf_defrag("dfh_src.cmf", "t0", "dfh_ref.cmf", NULL, NULL, &t_err_), CMF_OK);
    check_same_ffn("dfh_keep.cmf", "dfh_ref.cmf");
    /* q4t: an odd width goes q8_2f */
    unsigned k0 = cmf_popcount(t.ffn[0], DF_I);
    CHECK_MSG(convert_defrag("q4t", "dfh_skill", "dfh_keep_q4t.cmf", &err), "%s", err.msg);
    cmf_file *f = df_open("dfh_keep_q4t.cmf");
    const cmf_tensor *d0 = f ? cmf_file_find(f, "model.layers.0.mlp.down_proj.weight") : NULL;
    CHECK(d0 && d0->shape[1] == k0 && d0->dtype == (k0 % 32 ? CMF_DT_Q8_2F : CMF_DT_Q4_TILED));
    cmf_close(f);
    /* --defrag with --masks, a wrong keep shape */
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.defrag_dir = "dfh_skill";
    CHECK(cmf_convert_hf(DF_TINY, "dfh_x.cmf", "dfh_skill", &o, NULL, &err) == CMF_E_INVALID_ARG);
    uint64_t bad[2] = {DF_L, DF_I / 2};
    df_npy_write("dfh_skill/ffn_keep.npy", "|b1", 1, bad, 2, keep);
    CHECK(!convert_defrag("f32", "dfh_skill", "dfh_x.cmf", &err));
    CHECK_MSG(strstr(err.msg, "ffn_keep.npy") && strstr(err.msg, "shape"), "%s", err.msg);
    remove("dfh_skill/ffn_keep.npy");
}

static void test_autodetect(void) {
    mkdir("dfh_auto", 0755);
    mkdir("dfh_auto/tensors", 0755);
    cmf_file *f = df_open("dfh_plain.cmf");
    const cmf_tensor *d = f ? cmf_file_find(f, "model.layers.0.mlp.down_proj.weight") : NULL;
    CHECK(d && d->dtype == CMF_DT_F32);
    if (!d) return;
    float *v = malloc(d->nbytes);
    memcpy(v, d->data, d->nbytes);
    unsigned dead = 0;
    for (unsigned c = 0; c < DF_I; c++)
        if (c % 3 == 1) { /* the Factory-Hard bake: dead neurons' down columns are zero */
            dead++;
            for (unsigned r = 0; r < DF_HID; r++)
                v[r * DF_I + c] = 0.0f;
        }
    uint64_t shape[2] = {DF_HID, DF_I};
    df_npy_write("dfh_auto/tensors/model.layers.0.mlp.down_proj.weight.npy", "<f4", 4, shape, 2, v);
    cmf_err err;
    CHECK_MSG(convert_defrag("f32", "dfh_auto", "dfh_auto.cmf", &err), "%s", err.msg);
    cmf_file *g = df_open("dfh_auto.cmf");
    if (g) {
        const cmf_tensor *gd = cmf_file_find(g, "model.layers.0.mlp.down_proj.weight"),
                         *gg = cmf_file_find(g, "model.layers.0.mlp.gate_proj.weight"),
                         *g1 = cmf_file_find(g, "model.layers.1.mlp.gate_proj.weight");
        const cmf_tensor *sg = cmf_file_find(f, "model.layers.0.mlp.gate_proj.weight");
        CHECK(gd && gd->shape[1] == DF_I - dead);
        CHECK(g1 && g1->shape[0] == DF_I); /* layer 1 has no zero column: untouched */
        /* kept gate row j is source row (j-th live neuron) */
        if (gg && sg) {
            const float *a = (const float *)gg->data, *b = (const float *)sg->data;
            unsigned j = 0, ok = 1;
            for (unsigned i = 0; i < DF_I; i++)
                if (i % 3 != 1)
                    ok &= !memcmp(a + (size_t)j++ * DF_HID, b + (size_t)i * DF_HID,
                                  DF_HID * sizeof *a);
            CHECK(ok);
        }
        cmf_close(g);
    }
    /* an overlay naming no checkpoint tensor */
    df_npy_write("dfh_auto/tensors/model.layers.9.mlp.down_proj.weight.npy", "<f4", 4, shape, 2, v);
    CHECK(!convert_defrag("f32", "dfh_auto", "dfh_x.cmf", &err));
    CHECK_MSG(strstr(err.msg, "no such tensor"), "%s", err.msg);
    remove("dfh_auto/tensors/model.layers.9.mlp.down_proj.weight.npy");
    free(v);
    cmf_close(f);
}

int main(void) {
    test_keep_file();
    test_autodetect();
    TEST_DONE();
}
