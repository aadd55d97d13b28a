/* cmd_convert.c - `cortiq convert --model DIR --quant Q --output OUT.cmf`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/convert_progress.h"
#include "cli/cli_hub.h"
#include "cortiq/converter.h"

static void usage(void) {
    printf(
        "usage: cortiq convert --model DIR --quant Q --output OUT.cmf [options]\n"
        "  DIR may be OWNER/NAME[@REVISION]: the repo is pulled first (`cortiq pull`).\n"
        "  DIR: a Hugging Face checkpoint (config.json, model.safetensors or an index with "
        "shards,\n"
        "  tokenizer.json, tokenizer_config.json / chat_template.jinja / generation_config.json).\n"
        "  Supported model_type: llama mistral qwen2 qwen3 gemma3 gemma3_text qwen2_moe qwen3_moe "
        "qwen3_next\n  qwen3_5 qwen3_5_moe qwen3_5_text qwen3_5_moe_text laguna (dense layers).\n"
        "  --quant Q          f32 f16 bf16 q8 q8_2f q4 q4t q4tp vbit q1s q1t (q1: needs "
        "--allow-q1)\n"
        "  --embed-quant Q    dtype of model.embed_tokens.weight (default: --quant)\n"
        "  --head-quant Q     dtype of lm_head.weight (default: --quant)\n"
        "  --mean-bits B      vbit mean code width in bits (default 4.25; the group scales add 0.5)\n"
        "  --masks DIR        per-task keep-sets, one <task>.json each (docs/CONVERT.md)\n"
        "  --defrag DIR       prune FFN neurons (spec 11): DIR/tensors/*.npy overlays, DIR/ffn_keep.npy\n"
        "                     keep-set [layers, intermediate] (else zero down_proj columns)\n"
        "  --shard-max-gb G   split into {base}-NNNNN-of-MMMMM.cmf shards of about G GB (f32 "
        "size)\n"
        "  -t, --threads N    encoder threads (default: all cores)\n"
        "  --allow-q1         permit q1 (for 1-bit-trained models only)\n"
        "  -q, --quiet        no progress display\n"
        "  1-D tensors, norms and tensors under 32 elements are always f16; a shape the chosen\n"
        "  dtype cannot hold falls back to q8 (2-D) or f16, and the converter says so.\n");
}

static int parse_quant(const char *s, cmf_dtype *dt) {
    if (!cmf_convert_quant_from_name(s, dt))
        return cli_usage_error("convert", "unknown quant '%s'", s);
    return 0;
}

int cmd_convert(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *masks = NULL;
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    bool quiet = false;
    int have_quant = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double dv;
        uint64_t uv;
        if (cli_is_help(a))
            return usage(), CLI_EXIT_OK;
        else if (!strcmp(a, "--model") && v)
            model = argv[++i];
        else if ((!strcmp(a, "--output") || !strcmp(a, "-o")) && v)
            out = argv[++i];
        else if (!strcmp(a, "--masks") && v)
            masks = argv[++i];
        else if (!strcmp(a, "--defrag") && v)
            o.defrag_dir = argv[++i];
        else if (!strcmp(a, "--quant") && v) {
            if (parse_quant(argv[++i], &o.quant)) return CLI_EXIT_USAGE;
            have_quant = 1;
        } else if (!strcmp(a, "--embed-quant") && v) {
            if (parse_quant(argv[++i], &o.embed_quant)) return CLI_EXIT_USAGE;
            o.has_embed_quant = true;
        } else if (!strcmp(a, "--head-quant") && v) {
            if (parse_quant(argv[++i], &o.head_quant)) return CLI_EXIT_USAGE;
            o.has_head_quant = true;
        } else if (!strcmp(a, "--mean-bits")) {
            if (!cli_opt_double("convert", a, cli_opt_value("convert", argc, argv, &i), 3, false, 8,
                                false, &dv))
                return CLI_EXIT_USAGE;
            o.vbit_mean_bits = dv;
        } else if (!strcmp(a, "--shard-max-gb")) {
            if (!cli_opt_double("convert", a, cli_opt_value("convert", argc, argv, &i), 0, true,
                                1e308, false, &dv))
                return CLI_EXIT_USAGE;
            o.shard_max_bytes = (uint64_t)(dv * 1e9);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_opt_u64("convert", a, cli_opt_value("convert", argc, argv, &i), 1, 64, &uv))
                return CLI_EXIT_USAGE;
            o.threads = (unsigned)uv;
        } else if (!strcmp(a, "--allow-q1"))
            o.allow_q1 = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            quiet = true;
        else if (!v &&
                 cli_word_in(
                     a, "--model --output -o --masks --defrag --quant --embed-quant --head-quant"))
            return cli_usage_error("convert", "%s needs a value", a);
        else
            return cli_usage_error("convert", "unknown option or argument '%s'", a);
    }
    if (!model || !out || !have_quant)
        return cli_usage_error("convert", "need --model DIR, --quant Q and --output OUT.cmf");
    char *model_dir;
    int hub_rc = cli_hub_resolve("convert", model, CORTIQ_HUB_WANT_SAFETENSORS, quiet, &model_dir);
    if (hub_rc >= 0) return hub_rc;
    cmf_err err;
    cmf_convert_stats s;
    cli_convert_progress shown;
    if (!quiet) cli_convert_progress_attach(&o, &shown);
    cmf_status st = cmf_convert_hf(model_dir, out, masks, &o, &s, &err);
    if (!quiet) cli_convert_progress_end(&shown);
    free(model_dir);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    if (!quiet)
        fprintf(
            stderr,
            "convert: %zu tensors (%zu fallbacks), %.1f MB source -> %.1f MB, %.2f s, %.0f MB/s\n",
            s.tensors, s.fallbacks, s.source_bytes / 1e6, s.output_bytes / 1e6, s.seconds,
            s.seconds > 0 ? s.source_bytes / 1e6 / s.seconds : 0.0);
    return CLI_EXIT_OK;
}
