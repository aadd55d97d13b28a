/* cmd_compact.c - `cortiq compact IN -o OUT`: rewrite tightly, dropping bytes appends left dead. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/writer.h"

static void usage(void) {
    printf("usage: cortiq compact IN -o OUT [--drop-index]\n"
           "  Rewrite IN without the dead bytes left by append-only growth (spec 9). OUT may equal "
           "IN;\n"
           "  the new file is written beside OUT and renamed over it only once it validates.\n"
           "  --drop-index   leave out the deprecated sparse index section (spec 7)\n");
}

int cmd_compact(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    int drop = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--drop-index"))
            drop = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("compact", "unknown option '%s'", argv[i]);
        else if (!in)
            in = argv[i];
        else
            return cli_usage_error("compact", "one input only");
    }
    if (!in || !out) return cli_usage_error("compact", "need IN and -o OUT");
    cmf_err err;
    cmf_status st = cmf_compact(in, out, drop, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}
