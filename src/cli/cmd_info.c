/* cmd_info.c - `cortiq info FILE [--json]`: what a file holds, from the envelope to the skills. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/format.h"
#include "cortiq/hash.h"

static void usage(void) {
    printf(
        "usage: cortiq info FILE [--json]\n"
        "  Envelope, required features by name, architecture, tensor count and bytes per dtype,\n"
        "  sections and their sizes, masks, skills and shards. A shard name opens the whole set.\n"
        "  --json   the same as one JSON object (for machines)\n");
}

typedef struct dtype_tally {
    uint64_t count[CMF_DT_COUNT], bytes[CMF_DT_COUNT], total_bytes;
} dtype_tally;

static void tally_dtypes(const cmf_file *f, dtype_tally *t) {
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *x = cmf_file_tensor_at(f, i);
        t->count[x->dtype]++;
        t->bytes[x->dtype] += x->nbytes;
        t->total_bytes += x->nbytes;
    }
}

static void features_text(uint32_t feat, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned b = 0; b < 32; b++) {
        if (!(feat & (1u << b))) continue;
        const char *name = cmf_feature_name(b);
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? " " : "",
                              name ? name : "?");
    }
}

static void print_int(const char *label, int64_t v) {
    if (v >= 0) printf("  %-26s %lld\n", label, (long long)v);
}

static void print_text(const cmf_file *f) {
    const cmf_envelope *e = cmf_file_envelope(f);
    const cmf_header *h = cmf_file_header(f);
    char feat[256], hx[17], dx[17];
    features_text(e->required_features, feat, sizeof feat);
    cmf_hash64_to_hex(e->header_hash, hx);
    cmf_hash64_to_hex(e->dir_hash, dx);
    printf("file        %s\n", cmf_file_path(f));
    printf("format      CMF v%u, features 0x%x [%s]\n", e->version, e->required_features, feat);
    printf("hashes      header %s, directory %s\n", hx, dx);
    if (h->quant_type) printf("quant_type  %s (informational)\n", h->quant_type);
    const cmf_arch *a = &h->arch;
    if (a->present) {
        printf("arch        %s\n", a->arch_name ? a->arch_name : "(unnamed)");
        print_int("hidden_size", a->hidden_size);
        print_int("intermediate_size", a->intermediate_size);
        print_int("num_layers", a->num_layers);
        print_int("num_attention_heads", a->num_attention_heads);
        print_int("num_kv_heads", a->num_kv_heads);
        print_int("head_dim", a->head_dim);
        print_int("vocab_size", a->vocab_size);
        print_int("max_position_embeddings", a->max_position_embeddings);
        print_int("sliding_window", a->sliding_window);
        if (a->norm_style)
            printf("  %-26s %s\n", "norm_style", a->norm_style == CMF_NORM_QWEN ? "qwen" : "gemma");
        if (a->has_rms_norm_eps) printf("  %-26s %g\n", "rms_norm_eps", a->rms_norm_eps);
        if (a->has_rope_theta) printf("  %-26s %g\n", "rope_theta", a->rope_theta);
        if (a->has_rope_local_base_freq)
            printf("  %-26s %g\n", "rope_local_base_freq", a->rope_local_base_freq);
        printf("  %-26s %s\n", "tie_word_embeddings", a->tie_word_embeddings ? "true" : "false");
        if (a->n_layer_types) {
            size_t cnt[4] = {0};
            for (size_t i = 0; i < a->n_layer_types; i++)
                cnt[a->layer_types[i]]++;
            printf("  %-26s full %zu, sliding %zu, linear %zu, other %zu\n", "layer_types", cnt[0],
                   cnt[1], cnt[2], cnt[3]);
        }
        if (a->yarn.present)
            printf("  %-26s factor %g, original_max %g\n", "yarn", a->yarn.factor,
                   a->yarn.original_max_position_embeddings);
        if (a->moe.present)
            printf("  %-26s %lld experts, top-%lld, expert ffn %lld%s\n", "moe",
                   (long long)a->moe.num_experts, (long long)a->moe.top_k,
                   (long long)a->moe.moe_intermediate_size,
                   a->moe.has_shared_expert ? ", shared expert" : "");
        if (a->mtp.present) printf("  %-26s %lld layer(s)\n", "mtp", (long long)a->mtp.num_layers);
    }
    dtype_tally t;
    tally_dtypes(f, &t);
    printf("tensors     %zu, %s\n", cmf_file_tensor_count(f), cli_bytes(t.total_bytes));
    for (unsigned d = 0; d < CMF_DT_COUNT; d++)
        if (t.count[d])
            printf("  %-10s %8llu tensors  %s\n", cmf_dtype_name(d), (unsigned long long)t.count[d],
                   cli_bytes(t.bytes[d]));
    printf("sections\n");
    printf("  %-10s @%-12llu %s\n", "header", (unsigned long long)e->header_off,
           cli_bytes(e->header_len));
    printf("  %-10s @%-12llu %s\n", "directory", (unsigned long long)e->dir_off,
           cli_bytes(e->dir_len));
    printf("  %-10s @%-12llu %s\n", "data", (unsigned long long)e->data_off,
           cli_bytes(e->data_len));
    if (e->masks_off)
        printf("  %-10s @%-12llu %s\n", "masks", (unsigned long long)e->masks_off,
               cli_bytes(e->masks_len));
    if (e->vocab_off)
        printf("  %-10s @%-12llu %s\n", "vocab", (unsigned long long)e->vocab_off,
               cli_bytes(e->vocab_len));
    if (e->index_off)
        printf("  %-10s @%-12llu %s (deprecated)\n", "index", (unsigned long long)e->index_off,
               cli_bytes(e->index_len));
    const cmf_tokenizer_config *tc = &h->tokenizer_config;
    if (tc->present) {
        printf("chat        template %s, eos [", tc->chat_template ? "yes" : "no");
        for (size_t i = 0; i < tc->n_eos; i++)
            printf("%s%lld", i ? ", " : "", (long long)tc->eos_token_ids[i]);
        printf("], bos %lld, pad %lld\n", (long long)tc->bos_token_id, (long long)tc->pad_token_id);
    }
    const cmf_masks *m = cmf_file_masks(f);
    if (m) {
        printf("masks       %zu task(s)%s%s\n", m->n_masks, m->default_task ? ", default " : "",
               m->default_task ? m->default_task : "");
        for (size_t i = 0; i < m->n_masks; i++)
            printf("  %-20s layers %u/%u active, quality %s\n", m->masks[i].name,
                   cmf_mask_layers_active(m, &m->masks[i]), m->n_layers,
                   m->masks[i].quality_json ? "measured" : "not measured");
    }
    const cmf_sparse_index *ix = cmf_file_sparse_index(f);
    if (ix) printf("index       %zu entries (deprecated; display only)\n", ix->n_entries);
    if (h->n_skills) {
        printf("skills      %zu\n", h->n_skills);
        for (size_t i = 0; i < h->n_skills; i++) {
            const cmf_skill *s = &h->skills[i];
            char prefix[300];
            snprintf(prefix, sizeof prefix, "skill.%s.", s->id);
            size_t first, count;
            cmf_file_prefix(f, prefix, &first, &count);
            printf("  %-20s %zu replacement tensors%s%s", s->id, count, s->name ? ", " : "",
                   s->name ? s->name : "");
            if (s->has_base_dir_hash) {
                char bh[17];
                cmf_hash64_to_hex(s->base_dir_hash, bh);
                printf(", standalone against base %s", bh);
            }
            printf("\n");
        }
    }
    if (e->required_features & CMF_FEAT_SKILL_FILE)
        printf(
            "note        standalone skill file: not runnable until attached to its base model\n");
    size_t ns = cmf_file_shard_count(f);
    if (ns > 1) {
        printf("shards      %zu\n", ns);
        for (size_t i = 0; i < ns; i++) {
            size_t len;
            cmf_file_shard_bytes(f, i, &len);
            printf("  %s  %s\n", cmf_file_shard_path(f, i), cli_bytes(len));
        }
    } else if (h->has_shard) {
        printf("shard       %lld of %lld (opened alone)\n", (long long)h->shard_no,
               (long long)h->shard_count);
    }
}

static void print_json(const cmf_file *f) {
    const cmf_envelope *e = cmf_file_envelope(f);
    const cmf_header *h = cmf_file_header(f);
    printf("{\"file\": ");
    cli_json_string(cmf_file_path(f));
    printf(", \"version\": %u, \"required_features\": %u, \"features\": [", e->version,
           e->required_features);
    int first = 1;
    for (unsigned b = 0; b < 32; b++)
        if (e->required_features & (1u << b)) {
            printf("%s\"%s\"", first ? "" : ", ", cmf_feature_name(b) ? cmf_feature_name(b) : "?");
            first = 0;
        }
    printf("],\n \"sections\": {\"header\": [%llu, %llu], \"directory\": [%llu, %llu], \"data\": "
           "[%llu, %llu], "
           "\"masks\": [%llu, %llu], \"vocab\": [%llu, %llu], \"index\": [%llu, %llu]},\n",
           (unsigned long long)e->header_off, (unsigned long long)e->header_len,
           (unsigned long long)e->dir_off, (unsigned long long)e->dir_len,
           (unsigned long long)e->data_off, (unsigned long long)e->data_len,
           (unsigned long long)e->masks_off, (unsigned long long)e->masks_len,
           (unsigned long long)e->vocab_off, (unsigned long long)e->vocab_len,
           (unsigned long long)e->index_off, (unsigned long long)e->index_len);
    dtype_tally t;
    tally_dtypes(f, &t);
    printf(" \"tensor_count\": %zu, \"tensor_bytes\": %llu, \"dtypes\": {",
           cmf_file_tensor_count(f), (unsigned long long)t.total_bytes);
    first = 1;
    for (unsigned d = 0; d < CMF_DT_COUNT; d++)
        if (t.count[d]) {
            printf("%s\"%s\": {\"count\": %llu, \"bytes\": %llu}", first ? "" : ", ",
                   cmf_dtype_name(d), (unsigned long long)t.count[d],
                   (unsigned long long)t.bytes[d]);
            first = 0;
        }
    printf("},\n \"masks\": [");
    const cmf_masks *m = cmf_file_masks(f);
    for (size_t i = 0; m && i < m->n_masks; i++) {
        printf("%s", i ? ", " : "");
        cli_json_string(m->masks[i].name);
    }
    printf("], \"shards\": [");
    for (size_t i = 0; i < cmf_file_shard_count(f); i++) {
        printf("%s", i ? ", " : "");
        cli_json_string(cmf_file_shard_path(f, i));
    }
    /* the header JSON itself: arch, tokenizer_config, skills, provenance, as written */
    printf("],\n \"header\": %s}\n", h->json);
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("info", "unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return cli_usage_error("info", "one FILE only");
    }
    if (!path) return cli_usage_error("info", "missing FILE");
    cmf_file *f;
    int rc = cli_open_model(path, &f);
    if (rc) return rc;
    if (json)
        print_json(f);
    else
        print_text(f);
    cmf_close(f);
    return CLI_EXIT_OK;
}
