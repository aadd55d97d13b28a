/* cmd_defrag.c - `cortiq defrag FILE --task NAME -o OUT.cmf`: bake one task mask physically. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/converter.h"

static void usage(void) {
    printf("usage: cortiq defrag FILE --task NAME -o OUT.cmf [-q]\n"
           "  Bake task mask NAME of FILE into a standalone smaller model (spec 11): dead FFN\n"
           "  neurons (gate/up rows, down columns) and dead attention heads (q rows, o columns)\n"
           "  are dropped and the live ones re-encoded in each tensor's dtype (a down_proj whose\n"
           "  new width is not a multiple of 32 becomes q8_2f when its dtype needs that). The "
           "output\n"
           "  has per-layer sizes, provenance.defrag, and no masks section; it is written beside\n"
           "  OUT and renamed once it validates.\n"
           "  --task NAME     the task mask to bake (`cortiq masks FILE` lists them)\n"
           "  -o, --output F  the defragged file\n"
           "  -q, --quiet     no summary\n");
}

static void on_fallback(void *user, const char *tensor, cmf_dtype wanted, cmf_dtype written) {
    if (*(const int *)user) return;
    fprintf(stderr, "defrag: %s: %s cannot hold the new shape, written as %s\n", tensor,
            cmf_dtype_name(wanted), cmf_dtype_name(written));
}

int cmd_defrag(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *task = NULL;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a))
            return usage(), CLI_EXIT_OK;
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(a, "--task") && i + 1 < argc)
            task = argv[++i];
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            quiet = 1;
        else if (cli_word_in(a, "-o --output --task"))
            return cli_usage_error("defrag", "%s needs a value", a);
        else if (a[0] == '-')
            return cli_usage_error("defrag", "unknown option '%s'", a);
        else if (!in)
            in = a;
        else
            return cli_usage_error("defrag", "one input only");
    }
    if (!in || !task || !out) return cli_usage_error("defrag", "need FILE, --task NAME and -o OUT");
    cmf_defrag_opts o = {.on_fallback = on_fallback, .user = &quiet};
    cmf_defrag_stats s;
    cmf_err err;
    cmf_status st = cmf_defrag(in, task, out, &o, &s, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    if (!quiet) {
        fprintf(stderr,
                "defrag: task '%s': FFN neurons %llu -> %llu (%.1f%% kept), query heads %llu -> "
                "%llu",
                task, (unsigned long long)s.neurons_before, (unsigned long long)s.neurons_after,
                s.neurons_before ? 100.0 * s.neurons_after / s.neurons_before : 100.0,
                (unsigned long long)s.heads_before, (unsigned long long)s.heads_after);
        if (s.heads_padded)
            fprintf(stderr, " (%llu dead kept for GQA balance)",
                    (unsigned long long)s.heads_padded);
        fprintf(stderr, "; %zu tensors re-encoded (%zu in another dtype); %s -> ", s.recoded,
                s.fallbacks, cli_bytes(s.in_bytes));
        fprintf(stderr, "%s\n", cli_bytes(s.out_bytes));
    }
    return CLI_EXIT_OK;
}
