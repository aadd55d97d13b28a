/* MTP heads (spec §2.1) on the tiny checkpoints of tests/fixtures/mtp
 * (tools/make_mtp_checkpoints.py): a dense Qwen3 with a DeepSeek-V3 style head and a Qwen3-Next
 * hybrid with a Qwen3-Next head, each random and "agreeing" (drafts often equal to greedy).
 *  - convert: the head under model.mtp.* with arch.mtp, the checkpoint's names and DeepSeek's
 *    copies of the embedding and lm_head gone;
 *  - the draft's logits at five positions within 1e-4 of the script's torch implementation of
 *    x = eh_proj·[enorm(embed(t_{p+1})); hnorm(h_p)] → block → norm → lm_head;
 *  - speculative greedy decoding (cortiq_mtp_decode) token-identical to one-token greedy decode,
 *    at f32 and at q8 with the default activation mode, 1,200+ tokens per file kind in total;
 *    the agreeing heads' drafts accepted often (the accepted path), the random hybrid's
 *    rejected (the rollback of the KV cache and the Gated DeltaNet state; after the first few,
 *    only every 16th step drafts); the first 64 tokens
 *    equal transformers' greedy;
 *  - through the runtime (cortiq_generate): replies with the head equal those without, over a
 *    chat turn that reuses the previous one's prefix. */
#include "common/test.h"
#include "cortiq/runtime.h"
#include "engine/logits_cmp.h"
#include "engine/tiny_fixture.h"

#define MTP_DIR CORTIQ_SOURCE_DIR "/tests/fixtures/mtp/"
#define GEN     300 /* tokens generated per file and mode */

static const char *const fams[] = {"qwen3_mtp", "qwen3_mtp_agree", "qwen3_next_mtp",
                                   "qwen3_next_mtp_agree"};

static void *load_npy(const char *fam, const char *file, size_t *n) {
    char path[600], dt;
    snprintf(path, sizeof path, MTP_DIR "%s/%s", fam, file);
    void *p = npy_load(path, n, &dt);
    CHECK_MSG(p, "%s", path);
    return p;
}

static bool convert(const char *fam, const char *quant, const char *out) {
    char dir[512];
    snprintf(dir, sizeof dir, MTP_DIR "%s", fam);
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name(quant, &o.quant));
    cmf_err err;
    bool ok = cmf_convert_hf(dir, out, NULL, &o, NULL, &err) == CMF_OK;
    CHECK_MSG(ok, "%s %s: %s", fam, quant, err.msg);
    return ok;
}

/* The converted file names the head canonically and declares it. */
static void check_names(const char *fam, const cortiq_model *m) {
    const cmf_file *f = cortiq_model_file(m);
    const cmf_header *h = cmf_file_header(f);
    CHECK_MSG(h->arch.mtp.present && h->arch.mtp.num_layers == 1 && h->arch.mtp.share_lm_head &&
                  h->arch.mtp.share_embed,
              "%s: arch.mtp", fam);
    static const char *const want[] = {"model.mtp.enorm.weight",
                                       "model.mtp.hnorm.weight",
                                       "model.mtp.eh_proj.weight",
                                       "model.mtp.norm.weight",
                                       "model.mtp.layers.0.self_attn.q_proj.weight",
                                       "model.mtp.layers.0.mlp.down_proj.weight"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(cmf_file_find(f, want[i]), "%s: no %s", fam, want[i]);
    static const char *const gone[] = {
        "mtp.fc.weight", "model.layers.2.enorm.weight", "model.layers.2.embed_tokens.weight",
        "model.layers.2.shared_head.head.weight", "model.mtp.layers.0.embed_tokens.weight"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        CHECK_MSG(!cmf_file_find(f, gone[i]), "%s: %s kept", fam, gone[i]);
    CHECK(cortiq_model_has_mtp(m));
}

/* The head's logits after entry p (from h_p and t_{p+1}) against the torch implementation. */
static void check_drafts(const char *fam, cortiq_model *m) {
    size_t nt = 0, np = 0, nl = 0;
    int32_t *tokens = load_npy(fam, "tokens.npy", &nt);
    int32_t *pos = load_npy(fam, "draft_pos.npy", &np);
    float *ref = load_npy(fam, "draft_logits.npy", &nl);
    uint32_t V = cortiq_model_vocab(m);
    cortiq_session *s = NULL;
    cortiq_mtp *d = NULL;
    cmf_err err;
    CHECK(cortiq_session_create(m, 256, &s, &err) == CMF_OK);
    CHECK_MSG(s && cortiq_mtp_create(s, &d, &err) == CMF_OK, "%s", err.msg);
    if (!tokens || !pos || !ref || !d || nl != np * V) goto out;
    double worst = 0;
    for (size_t i = 0, done = 0; i < np; i++) {
        size_t p = (size_t)pos[i];
        CHECK_MSG(cortiq_mtp_eval(d, tokens + done, p + 1 - done, &err) == CMF_OK, "%s", err.msg);
        done = p + 1;
        int32_t draft = -1;
        CHECK_MSG(cortiq_mtp_draft(d, tokens[p + 1], &draft, &err) == CMF_OK, "%s", err.msg);
        const float *want = ref + i * V;
        double diff = max_rel_diff(cortiq_mtp_draft_logits(d), want, V);
        CHECK_MSG(diff <= 1e-4, "%s: draft logits at p=%zu off by %.3g", fam, p, diff);
        if (diff > worst) worst = diff;
        CHECK_MSG(draft == cortiq_argmax(want, V), "%s: draft %d at p=%zu, torch %d", fam, draft, p,
                  cortiq_argmax(want, V));
    }
    printf("%-22s draft logits within %.2g of torch\n", fam, worst);
out:
    cortiq_mtp_free(d);
    cortiq_session_free(s);
    free(tokens), free(pos), free(ref);
}

/* GEN greedy tokens after tokens[0..8): one at a time, or speculatively with the head. */
static int32_t *greedy(cortiq_model *m, const int32_t *prompt, bool spec, uint64_t *drafts,
                       uint64_t *accepted) {
    cortiq_session *s = NULL;
    cortiq_mtp *d = NULL;
    cortiq_sampler *smp = NULL;
    cortiq_sampler_params sp;
    cortiq_sampler_defaults(&sp);
    sp.temperature = 0;
    cmf_err err;
    int32_t *hist = malloc((8 + GEN + 1) * sizeof *hist);
    CHECK(hist && cortiq_session_create(m, 512, &s, &err) == CMF_OK);
    CHECK(s && cortiq_sampler_create(&sp, cortiq_model_vocab(m), &smp, &err) == CMF_OK);
    if (s && spec) CHECK_MSG(cortiq_mtp_create(s, &d, &err) == CMF_OK, "%s", err.msg);
    if (!hist || !smp || (spec && !d)) goto fail;
    memcpy(hist, prompt, 8 * sizeof *hist);
    size_t n = 8;
    if ((spec ? cortiq_mtp_eval(d, hist, 8, &err) : cortiq_session_eval(s, hist, 8, NULL, &err)))
        goto fail;
    int32_t ready = -1;
    while (n < 8 + GEN) {
        ready = -1; /* an accepted draft is in hist and the session already */
        int32_t t = cortiq_argmax(cortiq_session_logits(s), cortiq_model_vocab(m));
        hist[n] = t;
        if (!spec) {
            if (cortiq_session_eval(s, &t, 1, NULL, &err)) goto fail;
            n++;
            continue;
        }
        if (cortiq_mtp_decode(d, hist, n + 1, smp, n + 1 < 8 + GEN, &ready, &err)) goto fail;
        n++;
        if (ready >= 0) hist[n++] = ready;
        CHECK_MSG(cortiq_session_pos(s) == n, "session at %u, history %zu", cortiq_session_pos(s),
                  n);
    }
    if (d) cortiq_mtp_counts(d, drafts, accepted);
    cortiq_mtp_free(d), cortiq_sampler_free(smp), cortiq_session_free(s);
    return hist;
fail:
    CHECK_MSG(0, "greedy: %s", err.msg);
    cortiq_mtp_free(d), cortiq_sampler_free(smp), cortiq_session_free(s);
    free(hist);
    return NULL;
}

static size_t total_generated;

static void check_greedy(const char *fam, const char *quant, cortiq_model *m) {
    size_t nt = 0, ng = 0;
    int32_t *tokens = load_npy(fam, "tokens.npy", &nt);
    int32_t *ref = load_npy(fam, "greedy.npy", &ng);
    uint64_t drafts = 0, accepted = 0, u0, u1;
    int32_t *plain = tokens ? greedy(m, tokens, false, &u0, &u1) : NULL;
    int32_t *spec = tokens ? greedy(m, tokens, true, &drafts, &accepted) : NULL;
    if (plain && spec) {
        size_t first = 8 + GEN;
        for (size_t i = 8; i < 8 + GEN && first == 8 + GEN; i++)
            if (plain[i] != spec[i]) first = i;
        CHECK_MSG(first == 8 + GEN, "%s %s: --mtp differs from plain greedy at token %zu", fam,
                  quant, first);
        total_generated += GEN;
        /* transformers' greedy continuation (f32 only: q8 rounds the weights) */
        for (size_t i = 0; !strcmp(quant, "f32") && ref && i < ng && i < GEN; i++)
            if (spec[8 + i] != ref[i]) {
                CHECK_MSG(0, "%s: token %zu is %d, transformers %d", fam, i, spec[8 + i], ref[i]);
                break;
            }
        double rate = drafts ? (double)accepted / (double)drafts : 0;
        printf("%-22s %-4s drafts %4llu accepted %4llu (%.1f%%)\n", fam, quant,
               (unsigned long long)drafts, (unsigned long long)accepted, 100 * rate);
        CHECK(drafts >= 16); /* rejected drafts: then one every 16 steps */
        if (strstr(fam, "agree"))
            CHECK_MSG(rate > 0.4, "%s %s: agreeing head accepted %.2f", fam, quant, rate);
        else
            CHECK_MSG(drafts - accepted >= 16, "%s %s: random head: %llu rejections", fam, quant,
                      (unsigned long long)(drafts - accepted));
    }
    free(tokens), free(ref), free(plain), free(spec);
}

/* Two chat turns through the runtime, the second extending the first's prompt and reply:
 * with and without the head, the same replies. */
static void check_runtime(const char *fam, const char *path) {
    size_t nt = 0;
    int32_t *tokens = load_npy(fam, "tokens.npy", &nt);
    char *replies[2][2] = {{NULL, NULL}, {NULL, NULL}};
    uint64_t drafts[2] = {0, 0}, accepted[2] = {0, 0};
    for (int on = 0; tokens && on < 2; on++) {
        cortiq_runtime *rt = NULL;
        cortiq_runtime_opts o = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
        cmf_err err;
        CHECK_MSG(cortiq_runtime_open(path, &o, &rt, &err) == CMF_OK, "%s", err.msg);
        if (!rt) break;
        CHECK(cortiq_runtime_set_mtp(rt, on, &err) == CMF_OK);
        cortiq_generate_params p;
        cortiq_generate_defaults(&p);
        p.sampler.temperature = 0;
        p.max_tokens = 40;
        cortiq_generate_stats st;
        CHECK(cortiq_generate(rt, tokens, 12, &p, NULL, NULL, &replies[on][0], &st, &err) ==
              CMF_OK);
        /* a second turn: the whole first prompt again plus other tokens */
        int32_t turn2[40];
        memcpy(turn2, tokens, 12 * sizeof *turn2);
        memcpy(turn2 + 12, tokens + 20, 20 * sizeof *turn2);
        CHECK(cortiq_generate(rt, turn2, 32, &p, NULL, NULL, &replies[on][1], &st, &err) == CMF_OK);
        CHECK(cortiq_runtime_mtp_counts(rt, &drafts[on], &accepted[on]) == (on == 1));
        cortiq_runtime_free(rt);
    }
    for (int t = 0; t < 2; t++)
        CHECK_MSG(replies[0][t] && replies[1][t] && !strcmp(replies[0][t], replies[1][t]),
                  "%s: turn %d: with the head '%s', without '%s'", fam, t,
                  replies[1][t] ? replies[1][t] : "(none)",
                  replies[0][t] ? replies[0][t] : "(none)");
    CHECK_MSG(drafts[1] > 0, "%s: the runtime drafted nothing", fam);
    for (int i = 0; i < 4; i++)
        free(replies[i / 2][i % 2]);
    free(tokens);
}

int main(void) {
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        static const char *const quants[] = {"f32", "q8"};
        for (int q = 0; q < 2; q++) {
            char out[128];
            snprintf(out, sizeof out, "mtp_%s_%s.cmf", fams[i], quants[q]);
            if (!convert(fams[i], quants[q], out)) continue;
            /* f32: the references' precision; q8: the default activation mode and KV cache */
            cortiq_load_opts lo = {.threads = 2};
            if (q == 0) lo.kv = CORTIQ_KV_F32, lo.act = CORTIQ_ACT_F32;
            cortiq_model *m = NULL;
            cmf_err err;
            CHECK_MSG(cortiq_model_load(out, &lo, &m, &err) == CMF_OK, "%s", err.msg);
            if (m) {
                if (q == 0) check_names(fams[i], m), check_drafts(fams[i], m);
                check_greedy(fams[i], quants[q], m);
            }
            cortiq_model_free(m);
            if (q == 0) check_runtime(fams[i], out);
            remove(out);
        }
    }
    printf("generated %zu tokens in each mode\n", total_generated);
    CHECK(total_generated >= 1000);
    TEST_DONE();
}
