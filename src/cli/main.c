/* main.c - `cortiq` entry point: dispatch to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/version.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*fn)(int, char **);
} command;

static const command k_commands[] = {
#define CMD(c, n, s) {n, s, cmd_##c},
#include "cli/commands.def"
#undef CMD
};

static void usage(FILE *out) {
    fprintf(out, "usage: cortiq <command> [options]   (cortiq <command> --help for details)\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(out, "  %-14s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(out,
            "\nexit codes: 0 ok, 1 invalid input or failed check, 2 usage error, 3 system error\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (cli_is_help(argv[1]) || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cortiq %s\n", cortiq_version());
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "cortiq: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
