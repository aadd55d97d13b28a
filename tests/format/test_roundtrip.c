/* Writer -> reader round trip of every section and header block (spec §1-§9). */
#include "cortiq/hash.h"
#include "sample.h"
#include "test.h"

static void check_sample(const cmf_file *f, int mapped) {
    const cmf_header *h = cmf_file_header(f);
    const cmf_arch *a = &h->arch;
    CHECK(a->present && !strcmp(a->arch_name, "llama"));
    CHECK(a->hidden_size == 64 && a->intermediate_size == 40 && a->num_layers == 2 &&
          a->num_attention_heads == 4);
    CHECK(a->num_kv_heads == 2 && a->head_dim == 16 && a->vocab_size == 32 &&
          a->sliding_window == 128);
    CHECK(a->n_layer_types == 2 && a->layer_types[0] == CMF_LAYER_FULL_ATTENTION &&
          a->layer_types[1] == CMF_LAYER_SLIDING_ATTENTION);
    CHECK(a->has_rms_norm_eps && a->rms_norm_eps == 1e-6 && a->norm_style == CMF_NORM_QWEN);
    CHECK(a->has_rope_theta && a->rope_theta == 10000.0 && a->tie_word_embeddings);
    CHECK(a->yarn.present && a->yarn.factor == 4.0 && a->yarn.beta_fast == 32.0 &&
          a->yarn.beta_slow == 1.0);
    CHECK(a->moe.present && a->moe.num_experts == 4 && a->moe.top_k == 2 && a->moe.norm_topk_prob &&
          a->moe.routed_scaling_factor == 1.0 && !a->moe.has_shared_expert);
    CHECK(!a->mtp.present && a->partial_rotary_factor == 1.0);
    CHECK(h->quant_type && !strcmp(h->quant_type, "Q8_ROW") && !strcmp(h->format, "cmf"));
    const cmf_tokenizer_config *tc = &h->tokenizer_config;
    CHECK(tc->present && tc->chat_template && !strcmp(tc->chat_template, "{{ bos_token }}"));
    CHECK(tc->n_eos == 2 && tc->eos_token_ids[0] == 2 && tc->eos_token_ids[1] == 3);
    CHECK(tc->bos_token_id == 1 && tc->pad_token_id == -1);
    CHECK(h->n_skills == 1 && !strcmp(h->skills[0].id, "sql") && h->skills[0].n_layers == 2 &&
          h->skills[0].layers[1] == 1 && !h->skills[0].has_base_dir_hash);
    CHECK(h->provenance_json && strstr(h->provenance_json, "\"tool\":\"test\""));
    CHECK(h->has_masks_hash && h->has_vocab_hash && !h->has_index_hash && !h->has_shard);

    const cmf_envelope *e = cmf_file_envelope(f);
    CHECK(e->required_features ==
          (CMF_FEAT_TENSOR_DIR | CMF_FEAT_BINARY_MASKS | CMF_FEAT_QUANT_2F));
    CHECK(e->data_off % 4096 == 0 && e->header_off == 128 && e->header_hash && e->dir_hash);
    CHECK(cmf_file_tensor_count(f) == 8);
    const cmf_tensor *t = cmf_file_find(f, "lm_head.weight");
    CHECK(t && t->dtype == CMF_DT_F32 && t->ndim == 2 && t->shape[0] == 32 && t->shape[1] == 64 &&
          t->nbytes == 32 * 64 * 4);
    if (t) {
        float emb[32 * 64];
        sample_fill(emb, 32 * 64, 1);
        CHECK(!memcmp(t->data, emb, sizeof emb));
        if (mapped) CHECK(((uintptr_t)t->data & 63) == 0);
        CHECK(t->hash == cmf_hash64(emb, sizeof emb));
    }
    t = cmf_file_find(f, "extra.rank3");
    CHECK(t && t->ndim == 3 && t->shape[2] == 7 && t->shape[3] == 0);
    CHECK(cmf_file_find(f, "nope") == NULL);
    CHECK(cmf_file_find(f, "model.layers.1.mlp.up_proj.weight") != NULL);
    size_t first, count;
    cmf_file_prefix(f, "model.layers.", &first, &count);
    CHECK(count == 4);
    CHECK(!strcmp(cmf_file_sorted_at(f, first)->name, "model.layers.0.input_layernorm.weight"));
    cmf_file_prefix(f, "skill.sql.", &first, &count);
    CHECK(count == 1);
    cmf_file_prefix(f, "zzz", &first, &count);
    CHECK(count == 0);

    const cmf_masks *m = cmf_file_masks(f);
    CHECK(m && m->n_masks == 2 && m->n_layers == 2 && m->intermediate == 40 && m->ffn_bytes == 5 &&
          m->n_experts == 4);
    if (m) {
        CHECK(!strcmp(m->default_task, "general"));
        const cmf_mask *g = cmf_masks_find(m, "general"), *c = cmf_masks_find(m, "code");
        CHECK(g && c && !g->experts && c->experts && !g->quality_json && c->quality_json);
        CHECK(cmf_mask_ffn_active(m, g, 0) == 36 && cmf_mask_ffn_active(m, g, 1) == 33);
        CHECK(cmf_mask_heads_active(m, g, 0) == 4 && cmf_mask_heads_active(m, g, 1) == 2);
        CHECK(cmf_mask_layers_active(m, g) == 2);
        CHECK(cmf_mask_experts_active(m, g, 0) == 4 && cmf_mask_experts_active(m, c, 0) == 2 &&
              cmf_mask_experts_active(m, c, 1) == 4);
        CHECK(c->description && !strcmp(c->description, "coding tasks") && c->has_sparsity);
        CHECK(fabs(g->sparsity - (1.0 - 69.0 / 80.0)) < 1e-12);
    }
    size_t vlen;
    const uint8_t *v = cmf_file_vocab(f, &vlen);
    CHECK(v && vlen == strlen("{\"model\": {\"type\": \"BPE\"}}") && !memcmp(v, "{\"model\"", 8));
    CHECK(cmf_file_sparse_index(f) == NULL);
    cmf_verify_stats vs;
    CHECK(cmf_verify(f, 2, NULL, NULL, &vs) == CMF_OK);
    CHECK(vs.tensors_checked == 8 && vs.tensors_bad == 0 && vs.problems == 0);
}

/* A hand-made sparse index section is carried and parsed (writers should not emit one; tools may
 * carry it). */
static void test_sparse_index(void) {
    cmf_writer *w;
    CHECK_STATUS(cmf_writer_create("ix.cmf", NULL, &w, &t_err_), CMF_OK);
    const char *hdr =
        "{\"arch\": {\"num_layers\": 2, \"intermediate_size\": 64, \"num_attention_heads\": 4}}";
    CHECK_STATUS(cmf_writer_set_header(w, hdr, strlen(hdr), &t_err_), CMF_OK);
    uint8_t ix[8 + 16 + 8 + 16 + 4] = {0};
    ix[0] = 2;           /* n_entries */
    uint8_t *e = ix + 8; /* task 0, layer 1, 2 groups, 3 heads: body 7 -> pad 8 */
    e[4] = 1, e[8] = 2, e[12] = 3;
    e[16] = 0, e[18] = 1;            /* groups 0, 1 */
    e[20] = 0, e[21] = 2, e[22] = 3; /* heads */
    e = ix + 32;                     /* task 0, layer 0, 0 groups, 2 heads: body 2 -> pad 4 */
    e[12] = 2;
    e[16] = 1, e[17] = 3;
    CHECK_STATUS(cmf_writer_set_sparse_index(w, ix, sizeof ix, &t_err_), CMF_OK);
    CHECK_STATUS(cmf_writer_finish(w, &t_err_), CMF_OK);
    cmf_writer_free(w);
    cmf_file *f;
    CHECK_STATUS(cmf_open("ix.cmf", 0, &f, &t_err_), CMF_OK);
    const cmf_sparse_index *si = f ? cmf_file_sparse_index(f) : NULL;
    CHECK(si && si->n_entries == 2 && si->entries[0].layer == 1 && si->entries[0].n_heads == 3 &&
          si->entries[1].heads[1] == 3);
    cmf_close(f);
    /* unsorted heads are refused */
    size_t len;
    uint8_t *img = slurp("ix.cmf", &len);
    const cmf_envelope *env = NULL;
    cmf_envelope pe;
    if (img && cmf_envelope_parse(img, &pe, "ix", NULL) == CMF_OK) env = &pe;
    if (env) {
        img[env->index_off + 8 + 16 + 4 + 1] = 0; /* heads 0,0,3 */
        CHECK_STATUS(cmf_open_memory(img, len, "ix", CMF_OPEN_SKIP_META_HASH, &f, &t_err_),
                     CMF_E_PARSE);
    }
    free(img);
}

/* Writer refuses what it cannot write, leaving no file. */
static void test_writer_refusals(void) {
    cmf_writer *w;
    remove("bad.cmf");
    CHECK_STATUS(cmf_writer_create("bad.cmf", NULL, &w, &t_err_), CMF_OK);
    uint64_t sh[2] = {4, 30};
    uint8_t buf[4 * 30 * 4] = {0};
    CHECK_STATUS(cmf_writer_add_tensor(w, "a", CMF_DT_Q4_TILED, 2, sh, buf, 100, &t_err_),
                 CMF_E_UNSUPPORTED);
    CHECK_STATUS(cmf_writer_add_tensor(w, "", CMF_DT_F32, 2, sh, buf, sizeof buf, &t_err_),
                 CMF_E_INVALID_ARG);
    CHECK_STATUS(cmf_writer_add_tensor(w, "r", CMF_DT_MIX8_4, 2, sh, buf, sizeof buf, &t_err_),
                 CMF_E_INVALID_ARG);
    CHECK_STATUS(cmf_writer_add_tensor(w, "ok", CMF_DT_F32, 2, sh, buf, sizeof buf, &t_err_),
                 CMF_OK);
    CHECK_STATUS(cmf_writer_add_tensor(w, "ok", CMF_DT_F32, 2, sh, buf, sizeof buf, &t_err_),
                 CMF_E_INVALID_ARG);
    CHECK_STATUS(cmf_writer_set_header(w, "[1]", 3, &t_err_), CMF_E_INVALID_ARG);
    /* a payload of the wrong size is caught by the validating re-open: no file appears */
    CHECK_STATUS(cmf_writer_add_tensor(w, "short", CMF_DT_F32, 2, sh, buf, 10, &t_err_), CMF_OK);
    CHECK_STATUS(cmf_writer_finish(w, &t_err_), CMF_E_PARSE);
    cmf_writer_free(w);
    FILE *fp = fopen("bad.cmf", "rb");
    CHECK(fp == NULL);
    if (fp) fclose(fp);
}

int main(void) {
    cmf_err err;
    cmf_status st = sample_write("sample.cmf", NULL, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    cmf_file *f = NULL;
    st = cmf_open("sample.cmf", 0, &f, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    if (f) check_sample(f, 1);
    /* the same bytes through the memory API */
    size_t len;
    uint8_t *img = slurp("sample.cmf", &len);
    cmf_file *g = NULL;
    CHECK_STATUS(cmf_open_memory(img, len, "mem", CMF_OPEN_VERIFY_TENSORS, &g, &t_err_), CMF_OK);
    if (g) check_sample(g, 0);
    cmf_close(g);
    cmf_close(f);
    /* compaction of an untouched file reproduces it byte for byte */
    CHECK_STATUS(cmf_compact("sample.cmf", "sample2.cmf", 0, &t_err_), CMF_OK);
    size_t len2;
    uint8_t *img2 = slurp("sample2.cmf", &len2);
    CHECK(img2 && len2 == len && !memcmp(img, img2, len));
    free(img);
    free(img2);
    test_sparse_index();
    test_writer_refusals();
    TEST_DONE();
}
