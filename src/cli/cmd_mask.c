/* cmd_mask.c - `cortiq mask derive|rm`: make a task mask with a measured quality contract
 * (cmd_mask_derive.c), or remove one; both append a new masks section in place (spec §9). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mask_section.h"

int cmd_mask_derive(int argc, char **argv);

static void usage(void) {
    printf("usage: cortiq mask derive FILE --calib TEXT --heldout TEXT --keep F --name NAME\n"
           "                          [--heads K] [--group 1|32] [--description D] [--default]\n"
           "                          [--ctx N] [-t N]\n"
           "       cortiq mask rm FILE NAME\n"
           "  derive: choose each layer's FFN neurons (the top F by mean |act(gate)*up| over the\n"
           "          calibration text) and with --heads its attention heads (the top K by mean\n"
           "          L2 norm of their output), measure the held-out perplexity masked vs dense,\n"
           "          and append the mask with that quality; --default makes it the default_task\n"
           "          (details: cortiq mask derive --help).\n"
           "  rm:     remove task NAME (a default_task naming it is dropped).\n"
           "  Both append a new masks section in place: earlier bytes never change (`cortiq\n"
           "  compact` drops the dead ones). `cortiq masks FILE` lists the masks.\n");
}

static int mask_rm(int argc, char **argv) {
    const char *path = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        } else if (argv[i][0] == '-')
            return cli_usage_error("mask rm", "unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else if (!name)
            name = argv[i];
        else
            return cli_usage_error("mask rm", "unexpected argument '%s'", argv[i]);
    }
    if (!path || !name) return cli_usage_error("mask rm", "need FILE and NAME");
    cmf_file *f;
    int rc = cli_open_model(path, &f);
    if (rc) return rc;
    const cmf_masks *ms = cmf_file_masks(f);
    if (!ms || !cmf_masks_find(ms, name)) {
        fprintf(stderr, "%s: no task mask '%s' (cortiq masks %s lists them)\n", path, name, path);
        cmf_close(f);
        return CLI_EXIT_INVALID;
    }
    bool was_default = ms->default_task && !strcmp(ms->default_task, name);
    uint8_t *bytes = NULL;
    size_t len = 0;
    cmf_err err;
    cmf_status st = mask_section_build(ms, ms->n_layers, ms->intermediate, ms->n_heads, name, NULL,
                                       NULL, &bytes, &len, &err);
    cmf_close(f);
    if (!st) st = mask_section_append(path, bytes, len, &err);
    free(bytes);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    printf("%s: removed task mask '%s'%s\n", path, name,
           was_default ? " (it was the default_task: the file now has none)" : "");
    return CLI_EXIT_OK;
}

int cmd_mask(int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1])) {
        usage();
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "derive")) return cmd_mask_derive(argc - 1, argv + 1);
    if (!strcmp(argv[1], "rm")) return mask_rm(argc - 1, argv + 1);
    return cli_usage_error("mask", "unknown subcommand '%s' (derive, rm)", argv[1]);
}
