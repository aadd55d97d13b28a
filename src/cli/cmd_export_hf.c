/* cmd_export_hf.c - `cortiq export-hf MODEL.cmf OUT_DIR [--dtype f32|f16|bf16]`: the model back
 * into a Hugging Face checkpoint (safetensors + config + tokenizer files). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/converter.h"

static void usage(void) {
    printf("usage: cortiq export-hf MODEL.cmf OUT_DIR [--dtype f32|f16|bf16]\n"
           "  Write the model as a Hugging Face checkpoint directory: model.safetensors (every\n"
           "  tensor dequantized to --dtype, default f32, names unchanged), config.json,\n"
           "  tokenizer.json, tokenizer_config.json (chat template, special tokens) and\n"
           "  generation_config.json. transformers, `cortiq convert` and other converters load\n"
           "  it. Skill overlays (skill.*) are not exported. OUT_DIR is created if missing.\n");
}

int cmd_export_hf(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    cmf_dtype dt = CMF_DT_F32;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) return usage(), CLI_EXIT_OK;
        if (!strcmp(argv[i], "--dtype")) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            if (!strcmp(v, "f32"))
                dt = CMF_DT_F32;
            else if (!strcmp(v, "f16"))
                dt = CMF_DT_F16;
            else if (!strcmp(v, "bf16"))
                dt = CMF_DT_BF16;
            else
                return cli_usage_error("export-hf", "--dtype '%s': want f32, f16 or bf16", v);
        } else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("export-hf", "unknown option '%s'", argv[i]);
        else if (!in)
            in = argv[i];
        else if (!out)
            out = argv[i];
        else
            return cli_usage_error("export-hf", "unexpected argument '%s'", argv[i]);
    }
    if (!in || !out) return cli_usage_error("export-hf", "need MODEL.cmf and OUT_DIR");
    cmf_err err;
    cmf_status st = cmf_export_hf(in, out, dt, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    printf("wrote %s (model.safetensors, config.json, tokenizer files)\n", out);
    return CLI_EXIT_OK;
}
