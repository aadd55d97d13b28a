/* cmd_keygen.c - `cortiq keygen KEYFILE`: a new Ed25519 signing key (spec §8.2). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/sign.h"

static void usage(void) {
    printf("usage: cortiq keygen [--force] KEYFILE\n"
           "  Create a new random Ed25519 signing key: KEYFILE holds the 32-byte private seed as "
           "64 hex\n"
           "  digits, mode 0600, written atomically. The seed is never printed; the public key is\n"
           "  (give it to whoever checks your files: `cortiq verify --pubkey HEX`).\n"
           "  --force   replace an existing KEYFILE (otherwise an existing file is refused)\n");
}

int cmd_keygen(int argc, char **argv) {
    const char *path = NULL;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
            force = true;
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("keygen", "unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return cli_usage_error("keygen", "one KEYFILE only");
    }
    if (!path) return cli_usage_error("keygen", "missing KEYFILE");
    uint8_t pk[CMF_SIG_PUBKEY_BYTES];
    char hex[2 * CMF_SIG_PUBKEY_BYTES + 1];
    cmf_err err;
    cmf_status st = cmf_sign_keygen(path, force, pk, &err);
    if (st) {
        cli_error(&err);
        if (st == CMF_E_INVALID_ARG) fprintf(stderr, "cortiq keygen: use --force to replace it\n");
        return st == CMF_E_INVALID_ARG ? CLI_EXIT_INVALID : cli_exit_code(st);
    }
    cmf_hex_encode(pk, sizeof pk, hex);
    printf("wrote %s (private, mode 0600)\npubkey %s\n", path, hex);
    return CLI_EXIT_OK;
}
