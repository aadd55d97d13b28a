/* cmd_sign.c - `cortiq sign FILE... --key KEYFILE`: detached <file>.sig per file (spec §8.2). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/sign.h"

static void usage(void) {
    printf(
        "usage: cortiq sign FILE... --key KEYFILE [-o SIG]\n"
        "  Sign each FILE (a .cmf, or every shard file of a set) with the Ed25519 key in KEYFILE\n"
        "  (from `cortiq keygen`): SHA-256 of the whole file, Ed25519 over that digest, written "
        "to\n"
        "  FILE.sig as {\"alg\": \"ed25519-sha256\", \"pubkey\", \"sha256\", \"sig\"}. The file "
        "itself\n"
        "  is not modified. `cortiq verify FILE` checks FILE.sig when it is present.\n"
        "  -o SIG   write the signature there instead of FILE.sig (one FILE only)\n");
}

int cmd_sign(int argc, char **argv) {
    const char *key = NULL, *out = NULL;
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--key") || !strcmp(argv[i], "-k")) {
            if (i + 1 >= argc) return cli_usage_error("sign", "--key needs a KEYFILE");
            key = argv[++i];
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc) return cli_usage_error("sign", "-o needs a path");
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("sign", "unknown option '%s'", argv[i]);
        } else {
            nfiles++;
        }
    }
    if (!key) return cli_usage_error("sign", "missing --key KEYFILE");
    if (!nfiles) return cli_usage_error("sign", "missing FILE");
    if (out && nfiles > 1) return cli_usage_error("sign", "-o works with one FILE only");
    int rc = CLI_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--key") || !strcmp(argv[i], "-k") || !strcmp(argv[i], "-o") ||
            !strcmp(argv[i], "--output")) {
            i++;
            continue;
        }
        cmf_signature s;
        cmf_err err;
        cmf_status st = cmf_sign_file(argv[i], key, out, &s, &err);
        if (st) {
            cli_error(&err);
            /* an unsafe key mode or a non-regular FILE is a refused input, not a usage error */
            int c = st == CMF_E_INVALID_ARG ? CLI_EXIT_INVALID : cli_exit_code(st);
            if (c > rc) rc = c;
            continue;
        }
        char pk[2 * CMF_SIG_PUBKEY_BYTES + 1];
        cmf_hex_encode(s.pubkey, sizeof s.pubkey, pk);
        printf("%s: signed -> %s%s (ed25519, pubkey %s)\n", argv[i], out ? out : argv[i],
               out ? "" : ".sig", pk);
    }
    return rc;
}
