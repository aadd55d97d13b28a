/* Routing restricted to a set of experts (spec §5 expert area, §11.1), route statistics, and
 * moe-defrag, on the tiny MoE checkpoints at f32:
 *  - the counters of a run add up to tokens x top_k per MoE layer, and written as CMF_MOE_STATS
 *    they choose, at a cover, per layer the smallest top set of experts;
 *  - the restriction set from that choice changes the logits, and the file moe-defrag cuts at the
 *    same cover computes the very same logits (bit for bit, batch and token by token) and the same
 *    greedy tokens: softmax over the kept set, top_k clamped to it, expert_bias gathered;
 *  - the cut file keeps arch.moe.num_experts, has contiguous renumbered experts whose payloads
 *    are the source's bytes, role-contiguous banks, gathered router rows and its provenance;
 *  - a restriction leaving a MoE layer no expert is refused, naming the layer. */
#include "common/test.h"
#include "cortiq/moe.h"
#include "engine/moe_rewrite.h"
#include "engine/tiny_fixture.h"

#define N 64

/* logits [n][V] of path with the expert restriction of k (NULL = none); counts of the run into
 * *stats_path when non-NULL */
static float *logits_of(const char *path, const cmf_moe_keep *k, const int32_t *tokens, size_t n,
                        int one_by_one, const char *stats_path, uint32_t *V) {
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) return NULL;
    CHECK(cortiq_session_create(m, 128, &s, &err) == CMF_OK);
    *V = cortiq_model_vocab(m);
    const cmf_arch *a = &cmf_file_header(cortiq_model_file(m))->arch;
    uint32_t L = (uint32_t)a->num_layers;
    if (k) {
        const uint8_t *rows[16] = {0};
        for (uint32_t l = 0; l < L && l < 16; l++)
            rows[l] = k->present[l] ? k->bits + l * k->expert_bytes : NULL;
        CHECK_MSG(cortiq_session_restrict_experts(s, rows, &err) == CMF_OK, "%s", err.msg);
    }
    if (stats_path) CHECK(cortiq_session_count_routes(s, &err) == CMF_OK);
    float *out = malloc(n * (size_t)*V * sizeof(float));
    if (out && one_by_one)
        for (size_t i = 0; i < n; i++) {
            CHECK(cortiq_session_eval(s, &tokens[i], 1, NULL, &err) == CMF_OK);
            memcpy(out + i * *V, cortiq_session_logits(s), *V * sizeof(float));
        }
    else if (out)
        CHECK(cortiq_session_eval(s, tokens, n, out, &err) == CMF_OK);
    if (stats_path) {
        const uint64_t *counts[16] = {0};
        uint32_t ne[16] = {0};
        for (uint32_t l = 0; l < L && l < 16; l++) {
            counts[l] = cortiq_session_route_counts(s, l, &ne[l]);
            if (!counts[l]) continue;
            uint64_t total = 0;
            for (uint32_t e = 0; e < ne[l]; e++)
                total += counts[l][e];
            CHECK_MSG(total == n * (uint64_t)(a->moe.top_k < ne[l] ? a->moe.top_k : ne[l]),
                      "layer %u: %llu selections for %zu tokens", l, (unsigned long long)total, n);
        }
        CHECK(cmf_moe_stats_write(stats_path, L, counts, ne, &err) == CMF_OK);
    }
    cortiq_session_free(s);
    cortiq_model_free(m);
    return out;
}

/* greedy continuation of tokens[0..8) for 24 steps */
static void greedy(const char *path, const cmf_moe_keep *k, const int32_t *tokens, int32_t *out) {
    int32_t seq[40];
    memcpy(seq, tokens, 8 * sizeof *seq);
    uint32_t V = 0;
    for (int g = 0; g < 24; g++) {
        float *l = logits_of(path, k, seq, 8 + g, 0, NULL, &V);
        if (!l) return;
        out[g] = seq[8 + g] = cortiq_argmax(l + (size_t)(8 + g - 1) * V, V);
        free(l);
    }
}

/* the cut file's structure against its source */
static void check_layout(const char *src, const char *cut, const cmf_moe_keep *k) {
    cmf_file *a = NULL, *b = NULL;
    cmf_err err;
    CHECK(cmf_open(src, 0, &a, &err) == CMF_OK && cmf_open(cut, 0, &b, &err) == CMF_OK);
    if (!a || !b) goto out;
    CHECK(cmf_file_header(b)->arch.moe.num_experts == cmf_file_header(a)->arch.moe.num_experts);
    CHECK(cmf_file_header(b)->provenance_json &&
          strstr(cmf_file_header(b)->provenance_json, "\"moe_defrag\""));
    for (uint32_t l = 0; l < k->n_layers; l++) {
        if (!k->present[l]) continue;
        char name[128], old[256];
        uint32_t j = 0;
        for (uint32_t e = 0; e < k->present[l]; e++) {
            if (!cmf_bit(k->bits + l * k->expert_bytes, e)) continue;
            static const char *roles[] = {"gate_proj", "up_proj", "down_proj"};
            for (int r = 0; r < 3; r++) {
                snprintf(old, sizeof old, "model.layers.%u.mlp.experts.%u.%s.weight", l, e,
                         roles[r]);
                snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%u.%s.weight", l, j,
                         roles[r]);
                const cmf_tensor *x = cmf_file_find(a, old), *y = cmf_file_find(b, name);
                CHECK_MSG(x && y && x->nbytes == y->nbytes && x->dtype == y->dtype &&
                              !memcmp(x->data, y->data, x->nbytes),
                          "%s -> %s not copied byte for byte", old, name);
            }
            snprintf(old, sizeof old, "model.layers.%u.mlp.gate.weight", l);
            const cmf_tensor *ra = cmf_file_find(a, old), *rb = cmf_file_find(b, old);
            CHECK(ra && rb && rb->shape[0] == k->kept[l]);
            if (ra && rb && rb->shape[0] == k->kept[l])
                CHECK_MSG(!memcmp(ra->data + e * ra->shape[1] * 4, rb->data + j * rb->shape[1] * 4,
                                  ra->shape[1] * 4),
                          "layer %u router row %u -> %u", l, e, j);
            j++;
        }
        snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%u.gate_proj.weight", l, j);
        CHECK_MSG(!cmf_file_find(b, name), "%s: more experts than kept", name);
        /* role-contiguous: this layer's expert tensors in directory order are all gate_proj,
         * then all up_proj, then all down_proj, experts ascending within each */
        snprintf(name, sizeof name, "model.layers.%u.mlp.experts.", l);
        uint32_t seen = 0;
        for (size_t i = 0; i < cmf_file_tensor_count(b); i++) {
            const char *nm = cmf_file_tensor_at(b, i)->name;
            if (strncmp(nm, name, strlen(name))) continue;
            static const char *roles[] = {"gate_proj", "up_proj", "down_proj"};
            snprintf(old, sizeof old, "%s%u.%s.weight", name, seen % k->kept[l],
                     roles[seen / k->kept[l]]);
            CHECK_MSG(!strcmp(nm, old), "position %u of layer %u's bank: %s, want %s", seen, l, nm,
                      old);
            seen++;
        }
        CHECK(seen == 3 * k->kept[l]);
    }
out:
    cmf_close(a);
    cmf_close(b);
}

static void run(const char *fam, double cover) {
    char base[96], stats[96], cut[96];
    snprintf(base, sizeof base, "moe_restrict_%s.cmf", fam);
    snprintf(stats, sizeof stats, "moe_restrict_%s.json", fam);
    snprintf(cut, sizeof cut, "moe_restrict_%s_cut.cmf", fam);
    bool sigmoid = !strcmp(fam, "qwen3_moe_sigmoid");
    size_t nt = 0;
    int32_t *tokens = tiny_convert(sigmoid ? "qwen3_moe" : fam, "f32", base, &nt);
    if (!tokens || nt < N) return;
    if (sigmoid) {
        char tmp[128];
        snprintf(tmp, sizeof tmp, "%s.sig.cmf", base);
        CHECK(moe_write_sigmoid(base, tmp, true));
        CHECK(rename(tmp, base) == 0);
    }
    uint32_t V = 0;
    float *full = logits_of(base, NULL, tokens, N, 0, stats, &V);
    cmf_file *f = NULL;
    cmf_err err;
    cmf_moe_keep k = {0};
    CHECK(cmf_open(base, 0, &f, &err) == CMF_OK);
    CHECK_MSG(f && cmf_moe_keep_from_stats(f, stats, cover, &k, &err) == CMF_OK, "%s", err.msg);
    cmf_close(f);
    uint32_t dropped = 0;
    for (uint32_t l = 0; l < k.n_layers; l++)
        dropped += k.present[l] - k.kept[l];
    CHECK_MSG(dropped > 0, "%s: cover %g dropped no expert", fam, cover);
    cmf_moe_defrag_stats ds;
    CHECK_MSG(cmf_moe_defrag(base, cut, &k, &ds, &err) == CMF_OK, "%s", err.msg);
    CHECK(ds.experts_out + dropped == ds.experts_in && ds.out_bytes < ds.in_bytes);
    check_layout(base, cut, &k);

    float *masked = logits_of(base, &k, tokens, N, 0, NULL, &V);
    float *masked1 = logits_of(base, &k, tokens, N, 1, NULL, &V);
    float *defrag = logits_of(cut, NULL, tokens, N, 0, NULL, &V);
    float *defrag1 = logits_of(cut, NULL, tokens, N, 1, NULL, &V);
    size_t bytes = N * (size_t)V * sizeof(float);
    CHECK(full && masked && masked1 && defrag && defrag1);
    if (full && masked && masked1 && defrag && defrag1) {
        CHECK_MSG(memcmp(full, masked, bytes), "%s: the restriction changed nothing", fam);
        CHECK_MSG(!memcmp(masked, defrag, bytes), "%s: restricted != defragged (batch)", fam);
        CHECK_MSG(!memcmp(masked1, defrag1, bytes), "%s: restricted != defragged (one by one)",
                  fam);
        double d = 0;
        for (size_t i = 0; i < N * (size_t)V; i++)
            d = fmax(d, fabs((double)masked[i] - masked1[i]));
        CHECK_MSG(d < 1e-4, "%s: batch vs one by one %.3g", fam, d);
    }
    int32_t g_masked[24] = {0}, g_cut[24] = {1};
    greedy(base, &k, tokens, g_masked);
    greedy(cut, NULL, tokens, g_cut);
    CHECK_MSG(!memcmp(g_masked, g_cut, sizeof g_masked), "%s: greedy tokens differ", fam);
    printf("%-18s cover %.2f: %u of %u experts kept, %s %llu -> %llu bytes, logits equal\n", fam,
           cover, ds.experts_out, ds.experts_in, cut, (unsigned long long)ds.in_bytes,
           (unsigned long long)ds.out_bytes);

    /* a restriction that leaves layer 1 nothing is refused, naming the layer */
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    CHECK(cortiq_model_load(base, NULL, &m, &err) == CMF_OK);
    if (m && cortiq_session_create(m, 16, &s, &err) == CMF_OK) {
        uint8_t none[4] = {0}, all[4] = {0xFF, 0xFF, 0xFF, 0xFF};
        const uint8_t *rows[2] = {all, none};
        cmf_status st = cortiq_session_restrict_experts(s, rows, &err);
        CHECK_MSG(st == CMF_E_INVALID_ARG && strstr(err.msg, "layer 1") &&
                      strstr(err.msg, "routable"),
                  "%d %s", st, err.msg);
        CHECK(cortiq_session_restrict_experts(s, NULL, &err) == CMF_OK);
    }
    cortiq_session_free(s);
    cortiq_model_free(m);
    cmf_moe_keep_free(&k);
    free(full), free(masked), free(masked1), free(defrag), free(defrag1), free(tokens);
}

int main(void) {
    run("qwen3_moe", 0.7);         /* softmax, norm_topk_prob */
    run("qwen2_moe", 0.7);         /* softmax without renormalisation, shared expert */
    run("qwen2_moe_mixed", 0.7);   /* a dense layer 0 beside a MoE layer 1 */
    run("qwen3_moe_sigmoid", 0.7); /* sigmoid router, expert_bias, routed scaling */
    TEST_DONE();
}
