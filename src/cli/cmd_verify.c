/* cmd_verify.c - `cortiq verify FILE...`: the whole hash chain of each file, every problem
 * reported. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "cortiq/format.h"
#include "cortiq/quant.h"
#include "cortiq/sign.h"

static void usage(void) {
    printf(
        "usage: cortiq verify [-t THREADS] [--single] [--quiet] [--pubkey HEX] FILE...\n"
        "  Validate each file's structure (everything open() checks), then its hash chain:\n"
        "  header and directory hashes, section_hashes (masks, vocab, index) and every tensor's\n"
        "  hash64, and every variable-length payload's internal counts and offsets (vbit, q1s,\n"
        "  q1t). Every problem is printed, not only the first. A shard name verifies the\n"
        "  whole shard set; --single checks exactly the named file.\n"
        "  Signatures (spec 8.2): when <file>.sig sits beside a file (each shard has its own), it\n"
        "  is checked too: a bad one is a problem; none is not (\"signature: none\").\n"
        "  --pubkey HEX   require every file to be signed by this Ed25519 public key (64 hex digits)\n"
        "  Exit status: 0 all files good, 1 any problem, 2 usage, 3 I/O error.\n");
}

typedef struct {
    unsigned long problems;
} tally;

/* Check the .sig beside one file; absence is fine unless a signer is required (want). */
static cmf_status check_signature(const char *path, const uint8_t *want, int quiet, tally *t) {
    cmf_signature sig;
    cmf_err err;
    cmf_status st = cmf_sign_verify_file(path, NULL, want, &sig, &err);
    if (st == CMF_E_NOT_FOUND && !want) {
        if (!quiet) printf("%s: signature: none\n", path);
        return CMF_OK;
    }
    if (st == CMF_E_NOT_FOUND)
        st = cmf_err_set(&err, CMF_E_HASH, path,
                         "signature: none (%s.sig is missing) but --pubkey requires one", path);
    if (st) {
        t->problems++;
        fprintf(stderr, "%s\n", err.msg);
        return st;
    }
    char pk[2 * CMF_SIG_PUBKEY_BYTES + 1];
    cmf_hex_encode(sig.pubkey, sizeof sig.pubkey, pk);
    if (!quiet) printf("%s: signature: OK (ed25519, pubkey %.16s\u2026)\n", path, pk);
    return CMF_OK;
}

/* Every shard file has its own .sig. */
static cmf_status check_signatures(const cmf_file *f, const uint8_t *want, int quiet, tally *t) {
    cmf_status worst = CMF_OK;
    for (size_t i = 0; i < cmf_file_shard_count(f); i++) {
        cmf_status st = check_signature(cmf_file_shard_path(f, i), want, quiet, t);
        if (st && !worst) worst = st;
    }
    return worst;
}

static void on_problem(void *user, const char *path, cmf_status code, const char *msg) {
    ((tally *)user)->problems++;
    fprintf(stderr, "%s: %s: %s\n", path, cmf_status_name(code), msg);
}

int cmd_verify(int argc, char **argv) {
    unsigned threads = 0;
    int quiet = 0, single = 0, nfiles = 0, rc = CLI_EXIT_OK;
    uint8_t want_pk[CMF_SIG_PUBKEY_BYTES];
    const uint8_t *want = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[i], "--pubkey")) { /* applies to every FILE, wherever it stands */
            if (i + 1 >= argc ||
                !cmf_hex_decode(argv[i + 1], strlen(argv[i + 1]), want_pk, sizeof want_pk))
                return cli_usage_error(
                    "verify", "--pubkey needs an Ed25519 public key as 64 lowercase hex digits");
            want = want_pk;
            i++;
        }
    }
    for (int i = 1; i < argc; i++) {
        uint64_t v;
        if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) {
            if (i + 1 >= argc || !cli_parse_u64(argv[++i], &v) || v > 64)
                return cli_usage_error("verify", "-t needs a thread count 0..64");
            threads = (unsigned)v;
            continue;
        }
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = 1;
            continue;
        }
        if (!strcmp(argv[i], "--pubkey")) { /* parsed before the loop */
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--single")) {
            single = 1;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("verify", "unknown option '%s'", argv[i]);
        nfiles++;
        cmf_file *f;
        cmf_err err;
        cmf_status st = cmf_open_model(argv[i], single ? CMF_OPEN_NO_SHARDS : 0, &f, &err);
        if (st) {
            cli_error(&err);
            tally sig_t = {0};
            if (st != CMF_E_IO) /* a file that exists: does its signature still match? */
                check_signature(argv[i], want, quiet, &sig_t);
            if (!quiet) printf("%s: FAILED (%s)\n", argv[i], cmf_status_name(st));
            int c = cli_exit_code(st);
            if (c > rc) rc = c;
            continue;
        }
        tally t = {0};
        cmf_verify_stats vs;
        st = cmf_verify(f, threads, on_problem, &t, &vs);
        /* the format layer checks sizes; the payload's inside is the quant layer's to check */
        for (size_t k = 0; k < cmf_file_tensor_count(f); k++) {
            const cmf_tensor *x = cmf_file_tensor_at(f, k);
            cmf_err perr;
            cmf_status ps = cmf_quant_validate((cmf_dtype)x->dtype, x->ndim, x->shape, x->data,
                                               x->nbytes, x->name, &perr);
            if (ps) {
                on_problem(&t, cmf_file_shard_path(f, x->shard), ps, perr.msg);
                if (!st) st = ps;
            }
        }
        cmf_status ss = check_signatures(f, want, quiet, &t);
        if (ss && !st) st = ss;
        if (!quiet)
            printf(
                "%s: %s  (%zu shard%s, %llu tensors, %s hashed in %.3f s, %.2f GB/s, %lu problem%s)\n",
                argv[i], st ? "FAILED" : "OK", cmf_file_shard_count(f),
                cmf_file_shard_count(f) == 1 ? "" : "s", (unsigned long long)vs.tensors_checked,
                cli_bytes(vs.bytes_hashed), vs.seconds,
                vs.seconds > 0 ? vs.bytes_hashed / vs.seconds / 1e9 : 0.0, t.problems,
                t.problems == 1 ? "" : "s");
        if (st) {
            int c = cli_exit_code(st);
            if (c > rc) rc = c;
        }
        cmf_close(f);
    }
    if (!nfiles) return cli_usage_error("verify", "missing FILE");
    return rc;
}
