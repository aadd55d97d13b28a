/* cmd_requant.c - `cortiq requant FILE --to Q [--tensors GLOB] [-o OUT]`: re-encode tensors of
 * a CMF file in another dtype, in place (atomic) or into OUT. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cortiq/converter.h"

#define MAX_GLOBS 32

static void usage(void) {
    printf("usage: cortiq requant FILE --to Q [--tensors GLOB]... [-o OUT] [options]\n"
           "  Dequantize the selected tensors and encode them as Q; the rest of the file\n"
           "  (norms, biases, masks, tokenizer, skills) is kept byte for byte. Without -o the\n"
           "  file is rewritten in place: the new file is written beside it and renamed over it\n"
           "  only once it validates.\n"
           "  --to Q            f32 f16 bf16 q8 q8_2f q4 q4t q4tp vbit q1s q1t (q1: --allow-q1)\n"
           "  --tensors GLOB    tensors whose name matches (fnmatch; repeatable; `*` crosses "
           "dots);\n"
           "                    default: every 2-D matrix of 32 elements or more\n"
           "  -o, --output OUT  write OUT instead of rewriting FILE\n"
           "  --mean-bits B     vbit mean code width in bits (default: the source's, or 4.25)\n"
           "  --allow-q1        permit q1 (for 1-bit-trained models only)\n"
           "  -q, --quiet       no summary\n"
           "  A selected tensor the target cannot hold (e.g. q4tp needs rows of a multiple of 32)\n"
           "  is refused, naming the tensor and the rule; nothing is written then.\n");
}

int cmd_requant(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *globs[MAX_GLOBS];
    cmf_requant_opts o;
    cmf_requant_opts_default(&o);
    int have_to = 0, quiet = 0;
    size_t ng = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double dv;
        if (cli_is_help(a))
            return usage(), CLI_EXIT_OK;
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v)
            out = argv[++i];
        else if (!strcmp(a, "--to") && v) {
            if (!cmf_convert_quant_from_name(argv[++i], &o.to))
                return cli_usage_error("requant", "unknown dtype '%s'", argv[i]);
            have_to = 1;
        } else if (!strcmp(a, "--tensors") && v) {
            if (ng == MAX_GLOBS)
                return cli_usage_error("requant", "at most %d --tensors globs", MAX_GLOBS);
            globs[ng++] = argv[++i];
        } else if (!strcmp(a, "--mean-bits")) {
            if (!cli_opt_double("requant", a, cli_opt_value("requant", argc, argv, &i), 3, false, 8,
                                false, &dv))
                return CLI_EXIT_USAGE;
            o.vbit_mean_bits = dv;
        } else if (!strcmp(a, "--allow-q1"))
            o.allow_q1 = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            quiet = 1;
        else if (cli_word_in(a, "-o --output --to --tensors"))
            return cli_usage_error("requant", "%s needs a value", a);
        else if (a[0] == '-')
            return cli_usage_error("requant", "unknown option '%s'", a);
        else if (!in)
            in = a;
        else
            return cli_usage_error("requant", "one input only");
    }
    if (!in || !have_to) return cli_usage_error("requant", "need FILE and --to Q");
    o.globs = globs;
    o.n_globs = ng;
    cmf_requant_stats s;
    cmf_err err;
    cmf_status st = cmf_requant(in, out ? out : in, &o, &s, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    if (!quiet) {
        fprintf(stderr, "requant: %zu tensors selected, %zu re-encoded as %s; %s -> ", s.selected,
                s.recoded, cmf_dtype_name(o.to), cli_bytes(s.in_bytes));
        fprintf(stderr, "%s\n", cli_bytes(s.out_bytes));
        char sig[4096];
        snprintf(sig, sizeof sig, "%s.sig", out ? out : in);
        if (!access(sig, F_OK))
            fprintf(stderr, "requant: %s signs the old bytes: sign the file again\n", sig);
    }
    return CLI_EXIT_OK;
}
