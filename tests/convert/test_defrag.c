/* `cortiq defrag` (spec §11) on the tiny llama: the dense logits of the defragged f32 file equal
 * bit for bit those of the masked source, computed independently as a dense run of a copy whose
 * dead neurons (gate/up rows, down columns) and dead heads (o_proj columns) are zeroed — a zeroed
 * neuron or head contributes exactly 0, as under the mask. Also: per-layer shapes, the header
 * (intermediate_size, attention_heads_per_layer, provenance.defrag), no masks section, the
 * q8_2f rule for down_proj widths that are not a multiple of 32, verification, refusals.
 * Bit for bit holds for the batch path (prefill); token by token the one-token kernel's SIMD
 * lanes see the columns in other groupings, so there it is rounding-level (< 1e-5). */
#include <jansson.h>

#include "common/cpu.h"
#include "test.h"

#include "defrag_fixture.h"
#include "engine/npy.h"

/* A copy of the f32 file `in` with the task's dead neurons and heads zeroed. */
static int zeroed_copy(const char *in, const char *out, const df_task *t) {
    cmf_file *f = df_open(in);
    if (!f) return 0;
    cmf_err err;
    cmf_writer *w = NULL;
    const cmf_header *h = cmf_file_header(f);
    cmf_status st = cmf_writer_create(out, NULL, &w, &err);
    if (!st) st = cmf_writer_set_header(w, h->json, h->json_len, &err);
    size_t n = cmf_file_tensor_count(f);
    float **bufs = calloc(n, sizeof *bufs);
    for (size_t i = 0; i < n && !st; i++) {
        const cmf_tensor *x = cmf_file_tensor_at(f, i);
        unsigned l;
        char rest[128];
        int kind = -1; /* 0 gate/up rows, 1 down cols, 2 o_proj cols */
        if (sscanf(x->name, "model.layers.%u.%127s", &l, rest) == 2) {
            if (!strcmp(rest, "mlp.gate_proj.weight") || !strcmp(rest, "mlp.up_proj.weight"))
                kind = 0;
            else if (!strcmp(rest, "mlp.down_proj.weight"))
                kind = 1;
            else if (!strcmp(rest, "self_attn.o_proj.weight"))
                kind = 2;
        }
        if (kind < 0) {
            st = cmf_writer_add_tensor_ref(w, x->name, (cmf_dtype)x->dtype, x->ndim, x->shape,
                                           x->data, x->nbytes, &err);
            continue;
        }
        CHECK(x->dtype == CMF_DT_F32);
        float *v = bufs[i] = malloc(x->nbytes);
        memcpy(v, x->data, x->nbytes);
        uint64_t R = x->shape[0], C = x->shape[1];
        for (uint64_t r = 0; r < R; r++)
            for (uint64_t c = 0; c < C; c++) {
                bool dead = kind == 0   ? !cmf_bit(t->ffn[l], (uint32_t)r)
                            : kind == 1 ? !cmf_bit(t->ffn[l], (uint32_t)c)
                                        : !cmf_bit(t->heads[l], (uint32_t)(c / DF_HD));
                if (dead) v[r * C + c] = 0.0f;
            }
        st = cmf_writer_add_tensor_ref(w, x->name, CMF_DT_F32, x->ndim, x->shape, v, x->nbytes,
                                       &err);
    }
    size_t vlen;
    const uint8_t *vocab = cmf_file_vocab(f, &vlen);
    if (!st && vocab) st = cmf_writer_set_vocab(w, vocab, vlen, &err);
    if (!st) st = cmf_writer_finish(w, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    cmf_writer_free(w);
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    cmf_close(f);
    return st == CMF_OK;
}

static size_t count_diff(const float *a, const float *b, size_t n, double *maxd) {
    size_t d = 0;
    *maxd = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) d++;
        double e = fabs((double)a[i] - b[i]);
        if (e > *maxd) *maxd = e;
    }
    return d;
}

static const cmf_tensor *find(cmf_file *f, const char *name) {
    const cmf_tensor *t = cmf_file_find(f, name);
    CHECK_MSG(t != NULL, "%s missing", name);
    return t;
}

/* f32: shapes, header, and logits bit for bit against the zeroed reference. */
static void test_f32_exact(const int32_t *tokens, size_t nt) {
    df_task t;
    df_task_make(&t, 0.5, 7);
    /* layer 0: head 2 dead (its kv group keeps head 3 only: padded, o columns zeroed);
     * layer 1: heads 1 and 3 dead (one per group: the layer shrinks to 2 heads) */
    t.heads[0][0] = 0x0b;
    t.heads[1][0] = 0x05;
    CHECK(df_convert("f32", "df_plain_f32.cmf"));
    CHECK(df_with_masks("df_plain_f32.cmf", "df_src_f32.cmf", &t, 1));
    cmf_err err;
    cmf_defrag_stats s;
    CHECK_STATUS(cmf_defrag("df_src_f32.cmf", "t0", "df_out_f32.cmf", NULL, &s, &t_err_), CMF_OK);
    CHECK(zeroed_copy("df_plain_f32.cmf", "df_zero_f32.cmf", &t));
    CHECK(df_verify("df_out_f32.cmf"));
    unsigned kept[DF_L];
    for (unsigned l = 0; l < DF_L; l++)
        kept[l] = cmf_popcount(t.ffn[l], DF_I);
    CHECK_EQ_U64(s.neurons_before, DF_L * DF_I);
    CHECK_EQ_U64(s.neurons_after, kept[0] + kept[1]);
    CHECK_EQ_U64(s.heads_after, 4 + 2);
    CHECK_EQ_U64(s.heads_padded, 1);
    CHECK(s.out_bytes < s.in_bytes);

    cmf_file *f = df_open("df_out_f32.cmf");
    if (!f) return;
    CHECK(cmf_file_masks(f) == NULL);
    CHECK(!(cmf_file_envelope(f)->required_features & CMF_FEAT_BINARY_MASKS));
    for (unsigned l = 0; l < DF_L; l++) {
        char n[128];
        snprintf(n, sizeof n, "model.layers.%u.mlp.gate_proj.weight", l);
        const cmf_tensor *g = find(f, n);
        snprintf(n, sizeof n, "model.layers.%u.mlp.down_proj.weight", l);
        const cmf_tensor *d = find(f, n);
        snprintf(n, sizeof n, "model.layers.%u.self_attn.q_proj.weight", l);
        const cmf_tensor *q = find(f, n);
        snprintf(n, sizeof n, "model.layers.%u.self_attn.o_proj.weight", l);
        const cmf_tensor *o = find(f, n);
        if (!g || !d || !q || !o) continue;
        CHECK_EQ_U64(g->shape[0], kept[l]);
        CHECK_EQ_U64(d->shape[0], DF_HID);
        CHECK_EQ_U64(d->shape[1], kept[l]);
        CHECK(g->dtype == CMF_DT_F32 && d->dtype == CMF_DT_F32);
        CHECK_EQ_U64(q->shape[0], (l ? 2 : 4) * DF_HD);
        CHECK_EQ_U64(o->shape[1], (l ? 2 : 4) * DF_HD);
    }
    const cmf_header *h = cmf_file_header(f);
    CHECK_EQ_U64(h->arch.intermediate_size, kept[0] > kept[1] ? kept[0] : kept[1]);
    CHECK(h->arch.n_heads_per_layer == 2 && h->arch.attention_heads_per_layer[0] == 4 &&
          h->arch.attention_heads_per_layer[1] == 2);
    json_t *p = h->provenance_json ? json_loads(h->provenance_json, 0, NULL) : NULL;
    json_t *d = json_object_get(p, "defrag");
    CHECK(json_is_object(d));
    CHECK(!strcmp(json_string_value(json_object_get(d, "source_skill")) ?: "", "t0"));
    CHECK(json_integer_value(json_object_get(d, "pre_intermediate")) == DF_I);
    CHECK(json_integer_value(json_object_get(d, "post_intermediate_max")) ==
          h->arch.intermediate_size);
    json_t *kp = json_object_get(d, "kept_per_layer");
    CHECK(json_array_size(kp) == DF_L && json_integer_value(json_array_get(kp, 0)) == kept[0] &&
          json_integer_value(json_array_get(kp, 1)) == kept[1]);
    double want = 1.0 - (double)(kept[0] + kept[1]) / (DF_L * DF_I);
    CHECK(fabs(json_number_value(json_object_get(d, "pruned_ratio")) - want) < 1e-4);
    json_decref(p);
    cmf_close(f);

    for (int obo = 0; obo < 2; obo++) {
        uint32_t V1 = 0, V2 = 0;
        float *a = df_logits("df_out_f32.cmf", tokens, nt, obo, &V1);
        float *b = df_logits("df_zero_f32.cmf", tokens, nt, obo, &V2);
        CHECK(a && b && V1 == V2);
        if (a && b) {
            double maxd;
            size_t nd = count_diff(a, b, nt * V1, &maxd);
            printf("f32 %s: %zu of %zu logits differ from the zeroed reference, max |diff| %.3g\n",
                   obo ? "token by token" : "batch", nd, nt * (size_t)V1, maxd);
            /* On the AVX-512 tier the batch products sum each output in column order, where a
             * zero term changes nothing: bit for bit. The one-token kernels, and the AVX2 and
             * scalar tiers' batch kernels below their GEMMs' thresholds, spread columns over
             * lanes, so removing columns moves terms between lanes: rounding-level only. */
            if (!obo && cq_cpu_isa() >= CQ_ISA_AVX512)
                CHECK_MSG(nd == 0, "defragged f32 logits differ from the masked reference");
            else
                CHECK_MSG(maxd < 1e-5, "token by token: max |diff| %.3g", maxd);
        }
        free(a);
        free(b);
    }
    (void)err;
}

/* q4t: gate/up stay q4_tiled; a down_proj whose width is not a multiple of 32 becomes q8_2f,
 * one whose width is keeps q4_tiled. The file verifies and runs close to the source. */
static void test_q4t_rule(const int32_t *tokens, size_t nt) {
    df_task t;
    df_task_make(&t, 0.6, 3);
    for (unsigned i = 0; i < DF_I; i++) /* layer 1 keeps exactly 64 neurons */
        df_set(t.ffn[1], i, i % 2 == 0);
    unsigned k0 = cmf_popcount(t.ffn[0], DF_I);
    CHECK(k0 % 32 != 0);
    CHECK(df_convert("q4t", "df_plain_q4t.cmf"));
    CHECK(df_with_masks("df_plain_q4t.cmf", "df_src_q4t.cmf", &t, 1));
    cmf_defrag_stats s;
    CHECK_STATUS(cmf_defrag("df_src_q4t.cmf", "t0", "df_out_q4t.cmf", NULL, &s, &t_err_), CMF_OK);
    CHECK_EQ_U64(s.fallbacks, 1);
    CHECK(df_verify("df_out_q4t.cmf"));
    cmf_file *f = df_open("df_out_q4t.cmf");
    if (!f) return;
    const cmf_tensor *d0 = find(f, "model.layers.0.mlp.down_proj.weight"),
                     *d1 = find(f, "model.layers.1.mlp.down_proj.weight"),
                     *g0 = find(f, "model.layers.0.mlp.gate_proj.weight");
    CHECK(d0 && d0->dtype == CMF_DT_Q8_2F && d0->shape[1] == k0);
    CHECK(d1 && d1->dtype == CMF_DT_Q4_TILED && d1->shape[1] == 64);
    CHECK(g0 && g0->dtype == CMF_DT_Q4_TILED && g0->shape[0] == k0);
    CHECK(cmf_file_envelope(f)->required_features & CMF_FEAT_QUANT_2F);
    cmf_close(f);
    uint32_t V = 0;
    float *a = df_logits("df_out_q4t.cmf", tokens, nt, 0, &V);
    CHECK(a != NULL);
    for (size_t i = 0; a && i < nt * (size_t)V; i++)
        if (!isfinite(a[i])) {
            CHECK_MSG(0, "logit %zu not finite", i);
            break;
        }
    free(a);
}

static void test_refusals(void) {
    df_task t[2];
    df_task_make(&t[0], 0.5, 1);
    df_task_make(&t[1], 0.5, 2);
    t[1].gates[0] = 0x01; /* layer 1 gated off */
    CHECK(df_with_masks("df_plain_f32.cmf", "df_src_ref.cmf", t, 2));
    cmf_err err;
    CHECK(cmf_defrag("df_src_ref.cmf", "nope", "df_x.cmf", NULL, NULL, &err) == CMF_E_NOT_FOUND);
    CHECK_MSG(strstr(err.msg, "t0, t1") != NULL, "%s", err.msg);
    CHECK(cmf_defrag("df_src_ref.cmf", "t1", "df_x.cmf", NULL, NULL, &err) == CMF_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "layer 1") != NULL, "%s", err.msg);
    CHECK(cmf_defrag("df_plain_f32.cmf", "t0", "df_x.cmf", NULL, NULL, &err) == CMF_E_NOT_FOUND);
    CHECK_MSG(strstr(err.msg, "no masks section") != NULL, "%s", err.msg);
    /* a layer without a live neuron */
    memset(t[0].ffn[1], 0, DF_FFN_B);
    CHECK(df_with_masks("df_plain_f32.cmf", "df_src_ref.cmf", t, 1));
    CHECK(cmf_defrag("df_src_ref.cmf", "t0", "df_x.cmf", NULL, NULL, &err) == CMF_E_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "layer 1 keeps no FFN neuron") != NULL, "%s", err.msg);
    FILE *fp = fopen("df_x.cmf", "rb");
    CHECK(fp == NULL); /* nothing left under the target name */
    if (fp) fclose(fp);
}

int main(void) {
    size_t nt = 0;
    char dt;
    int32_t *tokens = npy_load(DF_TINY "/tokens.npy", &nt, &dt);
    CHECK(tokens && dt == 'i' && nt >= 16);
    if (!tokens) TEST_DONE();
    nt = 16;
    remove("df_x.cmf");
    test_f32_exact(tokens, nt);
    test_q4t_rule(tokens, nt);
    test_refusals();
    free(tokens);
    TEST_DONE();
}
