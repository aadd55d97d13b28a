/* cmd_import_gguf.c - `cortiq import-gguf FILE.gguf --quant Q -o OUT.cmf`: a llama.cpp GGUF
 * model as a CMF file with HF tensor names and values (docs/CONVERT.md). Every tensor is a
 * converter source whose f32 values are the GGUF tensor dequantized in HF form (Q/K rows
 * un-permuted, Gemma norms shifted back); the shared pipeline (cortiq/converter.h) picks each
 * dtype, encodes on worker threads and streams to the writer. The header carries arch,
 * tokenizer_config and provenance; the vocab section is the tokenizer.json built from the
 * GGUF tokenizer metadata. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/convert_progress.h"
#include "common/err.h"
#include "cli/cli_hub.h"
#include "convert/arch_interop.h"
#include "cortiq/gguf.h"
#include "cortiq/converter.h"
#include "cortiq/version.h"

static void usage(void) {
    printf(
        "usage: cortiq import-gguf FILE.gguf --quant Q -o OUT.cmf [options]\n"
        "  FILE.gguf may be OWNER/NAME[@REVISION][:FILE.gguf]: pulled first (`cortiq pull`;\n"
        "  without :FILE, the default quant of docs/HUB.md).\n"
        "  Convert a llama.cpp GGUF model (llama/SmolLM, qwen2, qwen3, gemma2, gemma3, ...) to CMF with\n"
        "  HF tensor names and values. Tensors are dequantized (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0\n"
        "  Q2_K Q3_K Q4_K Q5_K Q6_K) and re-encoded; the tokenizer becomes the vocab section.\n"
        "  --quant Q               f32 f16 bf16 q8 q8_2f q4 q4t q4tp vbit q1s q1t (q1: --allow-q1)\n"
        "  -o, --output OUT.cmf    the file to write (atomically)\n"
        "  --embed-quant Q         dtype of model.embed_tokens.weight (default: --quant)\n"
        "  --head-quant Q          dtype of lm_head.weight (default: --quant)\n"
        "  --mean-bits B           vbit mean code width in bits (default 4.25; the group scales add 0.5)\n"
        "  --chat-template FILE    use this Jinja template (else the GGUF's own, if any)\n"
        "  --shard-max-gb G        split into shards of about G GB (f32 size)\n"
        "  --skip-unmapped         drop tensors without an HF name instead of failing\n"
        "  -t, --threads N         encoder threads (default: all cores)\n"
        "  --allow-q1              permit q1 (for 1-bit-trained models only)\n"
        "  -q, --quiet             no progress display\n"
        "  1-D tensors, norms and tensors under 32 elements are always f16. A GGUF is already lossy:\n"
        "  --quant f16 stores its dequantized values, not the original weights.\n");
}

typedef struct gguf_source {
    const cmf_gguf *g;
    const cmf_gguf_tensor *t;
    uint64_t row0, nrows; /* nrows > 0: one expert's rows of a stacked tensor */
} gguf_source;

/* Converter callback: the tensor's values in HF form (the GGUF map is read-only: thread-safe). */
static cmf_status read_tensor(void *user, const cmf_convert_source *src, float *dst, cmf_err *err) {
    (void)src;
    const gguf_source *s = user;
    if (s->nrows) return cmf_gguf_tensor_rows_f32(s->g, s->t, s->row0, s->nrows, dst, err);
    return cmf_gguf_tensor_hf_f32(s->g, s->t, dst, err);
}

/* llama.cpp stacks a MoE layer's experts into one 3-D tensor per role,
 * blk.N.ffn_{gate,up,down}_exps [n_expert, rows, cols]; HF (and CMF, spec §2.2) keeps one 2-D
 * tensor per expert. Returns the number of experts of such a tensor (its HF role in *role),
 * else 0. */
static uint64_t stacked_experts(const cmf_gguf_tensor *t, const char **role, unsigned *layer) {
    static const char *const roles[][2] = {
        {"ffn_gate_exps.weight", "gate_proj"},
        {"ffn_up_exps.weight", "up_proj"},
        {"ffn_down_exps.weight", "down_proj"},
    };
    int used = 0;
    if (t->ndim != 3 || sscanf(t->name, "blk.%u.%n", layer, &used) != 1 || !used) return 0;
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++)
        if (strcmp(t->name + used, roles[i][0]) == 0) {
            *role = roles[i][1];
            return t->shape[0];
        }
    return 0;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (size_t got; b && (got = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    if (b) b[n] = 0;
    return b;
}

/* Header JSON: format, version, arch, quant_type, tokenizer_config, provenance. *has_tpl: the
 * header carries a chat template (the GGUF's or --chat-template's). */
static char *build_header(const cmf_gguf *g, const char *src, const char *quant, cmf_dtype dt,
                          const char *tpl, bool *has_tpl, cmf_err *err) {
    char *arch = NULL, *tc = NULL;
    if (cmf_gguf_arch_json(g, &arch, err) || cmf_gguf_tokenizer_config_json(g, &tc, err)) {
        free(arch);
        return NULL;
    }
    json_t *h = json_object();
    json_object_set_new(h, "format", json_string("cmf"));
    json_object_set_new(h, "version", json_integer(2));
    json_object_set_new(h, "arch", json_loads(arch, 0, NULL));
    json_object_set_new(h, "quant_type", json_string(cq_quant_type_label(dt)));
    json_t *tcj = json_loads(tc, 0, NULL);
    if (tpl) json_object_set_new(tcj, "chat_template", json_string(tpl));
    *has_tpl = json_is_string(json_object_get(tcj, "chat_template"));
    json_object_set_new(h, "tokenizer_config", tcj);
    json_t *prov = json_object();
    const char *base = strrchr(src, '/');
    json_object_set_new(prov, "tool", json_string("cortiq import-gguf"));
    json_object_set_new(prov, "version", json_string(cortiq_version()));
    json_object_set_new(prov, "source", json_string(base ? base + 1 : src));
    json_object_set_new(prov, "source_format", json_string("gguf"));
    const char *name = cmf_gguf_get_str(g, "general.name");
    if (name) json_object_set_new(prov, "source_model", json_string(name));
    json_object_set_new(prov, "quant", json_string(quant));
    json_object_set_new(h, "provenance", prov);
    char *out = json_dumps(h, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(h);
    free(arch);
    free(tc);
    if (!out) cmf_err_set(err, CMF_E_NOMEM, src, "header: out of memory");
    return out;
}

typedef struct import_args {
    const char *in, *out, *quant_name, *tpl_path;
    bool skip_unmapped;
    bool quiet; /* -q: no progress display, no summary */
    cmf_convert_opts o;
} import_args;

/* Parse argv into *a; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, import_args *a) {
    memset(a, 0, sizeof *a);
    cmf_convert_opts_default(&a->o);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double dv;
        uint64_t uv;
        if (cli_is_help(s)) {
            usage();
            return CLI_EXIT_OK;
        } else if ((!strcmp(s, "-o") || !strcmp(s, "--output")) && v)
            a->out = argv[++i];
        else if (!strcmp(s, "--quant") && v) {
            a->quant_name = argv[++i];
            if (!cmf_convert_quant_from_name(a->quant_name, &a->o.quant))
                return cli_usage_error("import-gguf", "unknown quant '%s'", a->quant_name);
        } else if (!strcmp(s, "--embed-quant") && v) {
            if (!cmf_convert_quant_from_name(argv[++i], &a->o.embed_quant))
                return cli_usage_error("import-gguf", "unknown quant '%s'", argv[i]);
            a->o.has_embed_quant = true;
        } else if (!strcmp(s, "--head-quant") && v) {
            if (!cmf_convert_quant_from_name(argv[++i], &a->o.head_quant))
                return cli_usage_error("import-gguf", "unknown quant '%s'", argv[i]);
            a->o.has_head_quant = true;
        } else if (!strcmp(s, "--mean-bits")) {
            if (!cli_opt_double("import-gguf", s, cli_opt_value("import-gguf", argc, argv, &i), 3,
                                false, 8, false, &dv))
                return CLI_EXIT_USAGE;
            a->o.vbit_mean_bits = dv;
        } else if (!strcmp(s, "--shard-max-gb")) {
            if (!cli_opt_double("import-gguf", s, cli_opt_value("import-gguf", argc, argv, &i), 0,
                                true, 1e308, false, &dv))
                return CLI_EXIT_USAGE;
            a->o.shard_max_bytes = (uint64_t)(dv * 1e9);
        } else if (!strcmp(s, "-t") || !strcmp(s, "--threads")) {
            if (!cli_opt_u64("import-gguf", s, cli_opt_value("import-gguf", argc, argv, &i), 1, 64,
                             &uv))
                return CLI_EXIT_USAGE;
            a->o.threads = (unsigned)uv;
        } else if (!strcmp(s, "--chat-template") && v)
            a->tpl_path = argv[++i];
        else if (!strcmp(s, "--skip-unmapped"))
            a->skip_unmapped = true;
        else if (!strcmp(s, "--allow-q1"))
            a->o.allow_q1 = true;
        else if (!strcmp(s, "-q") || !strcmp(s, "--quiet"))
            a->quiet = true;
        else if (!v &&
                 cli_word_in(s, "-o --output --quant --embed-quant --head-quant --chat-template"))
            return cli_usage_error("import-gguf", "%s needs a value", s);
        else if (s[0] == '-' && s[1])
            return cli_usage_error("import-gguf", "unknown option '%s'", s);
        else if (!a->in)
            a->in = s;
        else
            return cli_usage_error("import-gguf", "one input only");
    }
    if (!a->in || !a->out || !a->quant_name)
        return cli_usage_error("import-gguf", "need FILE.gguf, --quant Q and -o OUT.cmf");
    if (a->o.quant == CMF_DT_Q1 && !a->o.allow_q1)
        return cli_usage_error("import-gguf",
                               "q1 is for 1-bit-trained models: add --allow-q1 to mean it");
    return -1;
}

int cmd_import_gguf(int argc, char **argv) {
    import_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    char *in_path;
    if ((rc = cli_hub_resolve("import-gguf", a.in, CORTIQ_HUB_WANT_GGUF, a.quiet, &in_path)) >= 0)
        return rc;
    a.in = in_path;
    char *tpl = NULL;
    bool has_tpl = false;
    if (a.tpl_path && !(tpl = read_text(a.tpl_path))) {
        fprintf(stderr, "cortiq import-gguf: cannot read %s\n", a.tpl_path);
        free(in_path);
        return CLI_EXIT_SYSTEM;
    }
    cmf_err err;
    cmf_gguf *g = NULL;
    cmf_convert_source *src = NULL;
    gguf_source *users = NULL;
    char(*names)[256] = NULL;
    char *header = NULL, *vocab = NULL;
    size_t vocab_len = 0, n = 0;
    cmf_status st = cmf_gguf_open(a.in, &g, &err);
    if (st) goto done;
    if (!(header = build_header(g, a.in, a.quant_name, a.o.quant, tpl, &has_tpl, &err))) {
        st = err.code ? err.code : CMF_E_NOMEM;
        goto done;
    }
    if ((st = cmf_gguf_tokenizer_json(g, &vocab, &vocab_len, &err))) goto done;
    size_t nt = cmf_gguf_tensor_count(g), slots = nt;
    for (size_t i = 0; i < nt; i++) { /* a stacked expert tensor becomes one per expert */
        const char *role;
        unsigned layer;
        uint64_t ne = stacked_experts(cmf_gguf_tensor_at(g, i), &role, &layer);
        if (ne > CMF_GGUF_MAX_TENSORS) {
            st = cmf_err_set(
                &err, CMF_E_LIMIT, a.in, "tensor '%s' stacks %llu experts (at most %u)",
                cmf_gguf_tensor_at(g, i)->name, (unsigned long long)ne, CMF_GGUF_MAX_TENSORS);
            goto done;
        }
        if (ne) slots += ne - 1;
    }
    src = calloc(slots ? slots : 1, sizeof *src);
    users = calloc(slots ? slots : 1, sizeof *users);
    names = calloc(slots ? slots : 1, sizeof *names);
    if (!src || !users || !names) {
        st = cmf_err_set(&err, CMF_E_NOMEM, a.in, "out of memory");
        goto done;
    }
    const char *arch = cmf_gguf_get_str(g, "general.architecture");
    size_t n_stacked = 0;
    for (size_t i = 0; i < nt; i++) {
        const cmf_gguf_tensor *t = cmf_gguf_tensor_at(g, i);
        const char *role;
        unsigned layer;
        uint64_t ne = stacked_experts(t, &role, &layer);
        if (ne && cmf_ggml_type_can_dequantize(t->type)) {
            uint64_t rows = t->shape[1];
            for (uint64_t e = 0; e < ne; e++, n++) {
                snprintf(names[n], sizeof names[n], "model.layers.%u.mlp.experts.%llu.%s.weight",
                         layer, (unsigned long long)e, role);
                users[n] = (gguf_source){g, t, e * rows, rows};
                src[n] = (cmf_convert_source){.name = names[n],
                                              .ndim = 2,
                                              .shape = {rows, t->shape[2]},
                                              .read_f32 = read_tensor,
                                              .user = &users[n],
                                              .source_bytes = t->nbytes / ne};
            }
            n_stacked++;
            continue;
        }
        if (!cmf_gguf_hf_name(arch, t->name, names[n], sizeof names[n])) {
            if (a.skip_unmapped) {
                fprintf(stderr, "import-gguf: skipping '%s' (no HF name)\n", t->name);
                continue;
            }
            st = cmf_err_set(
                &err, CMF_E_UNSUPPORTED, a.in,
                "tensor '%s' has no HF name for architecture %s (--skip-unmapped drops it)",
                t->name, arch ? arch : "?");
            goto done;
        }
        if (!cmf_ggml_type_can_dequantize(t->type)) {
            const char *tn = cmf_ggml_type_name(t->type);
            st = cmf_err_set(&err, CMF_E_UNSUPPORTED, a.in,
                             "tensor '%s': ggml type %s cannot be dequantized", t->name,
                             tn ? tn : "?");
            goto done;
        }
        users[n] = (gguf_source){g, t, 0, 0};
        src[n] = (cmf_convert_source){.name = names[n],
                                      .ndim = t->ndim,
                                      .read_f32 = read_tensor,
                                      .user = &users[n],
                                      .source_bytes = t->nbytes};
        memcpy(src[n].shape, t->shape, t->ndim * sizeof t->shape[0]);
        if (t->ndim == 1 && strstr(names[n], "shared_expert_gate.weight")) { /* HF: [1, hidden] */
            src[n].ndim = 2;
            src[n].shape[0] = 1;
            src[n].shape[1] = t->shape[0];
        }
        n++;
    }
    cmf_convert_stats s;
    cmf_convert_sort_canonical(src, n);
    cli_convert_progress shown;
    if (!a.quiet) cli_convert_progress_attach(&a.o, &shown);
    st = cmf_convert_run(a.out, header, src, n, (const uint8_t *)vocab, vocab_len, NULL, 0, &a.o,
                         &s, &err);
    if (!a.quiet) cli_convert_progress_end(&shown);
    if (!st && !a.quiet)
        fprintf(
            stderr,
            "import-gguf: %zu tensors (%zu skipped, %zu fallbacks), %.1f MB GGUF -> %.1f MB, %.2f s\n",
            s.tensors, slots - n, s.fallbacks, s.source_bytes / 1e6, s.output_bytes / 1e6,
            s.seconds);
    if (!st && !a.quiet && n_stacked)
        fprintf(stderr, "import-gguf: %zu stacked expert tensors split into one per expert\n",
                n_stacked);
    /* Spec §6.1 runs a file without a template as ChatML, which models trained on another turn
     * format (Gemma's <start_of_turn>, Llama 3's headers) answer with noise. */
    if (!st && !has_tpl)
        fprintf(stderr,
                "import-gguf: note: %s has no tokenizer.chat_template, so %s chats in ChatML "
                "(spec §6.1); if the model was trained on another turn format, import again with "
                "--chat-template FILE\n",
                a.in, a.out);
done:
    if (st) cli_error(&err);
    cmf_gguf_close(g);
    free(src);
    free(users);
    free(names);
    free(header);
    free(vocab);
    free(tpl);
    free(in_path);
    return st ? cli_exit_code(st) : CLI_EXIT_OK;
}
