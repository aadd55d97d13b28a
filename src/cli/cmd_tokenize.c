/* cmd_tokenize.c - `cortiq tokenize SRC TEXT` and `cortiq detokenize SRC IDS...`: run the
 * tokenizer of a .cmf file (its vocab section, spec §6) or of a tokenizer.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/format.h"
#include "cortiq/tokenizer.h"

/* Read a whole stream (stdin) into a malloc'ed buffer. */
static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
        if (n == cap) {
            char *q = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
            if (!q) {
                free(b);
                return NULL;
            }
            b = q;
            cap *= 2;
        }
    }
    if (b && ferror(f)) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

/* Load the tokenizer of SRC: a CMF file (magic "CMF\x01") or a tokenizer.json. */
static int load_src(const char *cmd, const char *path, cmf_tokenizer **tok) {
    cmf_err err;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cortiq %s: %s: cannot open\n", cmd, path);
        return CLI_EXIT_SYSTEM;
    }
    unsigned char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    cmf_status st;
    if (got == 4 && !memcmp(magic, "CMF\x01", 4)) {
        fclose(f);
        cmf_file *cf = NULL;
        st = cmf_open(path, 0, &cf, &err);
        if (st) {
            cli_error(&err);
            return cli_exit_code(st);
        }
        size_t len;
        const uint8_t *v = cmf_file_vocab(cf, &len);
        if (!v) {
            fprintf(stderr, "cortiq %s: %s: the file has no tokenizer (vocab section, spec §6)\n",
                    cmd, path);
            cmf_close(cf);
            return CLI_EXIT_INVALID;
        }
        st = cmf_tokenizer_load((const char *)v, len, tok, &err);
        cmf_close(cf);
    } else {
        /* a tokenizer.json: the rest of this stream after the bytes already read, so that a
         * pipe (SRC = /dev/stdin) works too */
        size_t rest = 0;
        char *tail = read_all(f, &rest);
        fclose(f);
        char *all = tail && rest <= SIZE_MAX - got - 1 ? malloc(got + rest + 1) : NULL;
        if (!all) {
            free(tail);
            fprintf(stderr, "cortiq %s: %s: %s\n", cmd, path,
                    tail ? "out of memory" : "read error or out of memory");
            return CLI_EXIT_SYSTEM;
        }
        memcpy(all, magic, got);
        memcpy(all + got, tail, rest);
        all[got + rest] = 0;
        free(tail);
        st = cmf_tokenizer_load(all, got + rest, tok, &err);
        free(all);
    }
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}

static void tokenize_usage(void) {
    printf(
        "usage: cortiq tokenize SRC TEXT|- [--json] [--no-special]\n"
        "  Encode TEXT (or stdin with '-') with the tokenizer of SRC: a .cmf file (its vocab\n"
        "  section) or a Hugging Face tokenizer.json. Prints the ids on one line, then one line\n"
        "  per token: id, TAB, the token string as a JSON literal.\n"
        "  --json        print {\"ids\": [...], \"pieces\": [...]} instead\n"
        "  --no-special  do not add the post-processor's special tokens (BOS/EOS)\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *src = NULL, *text_arg = NULL;
    bool json = false, special = true;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            tokenize_usage();
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--no-special"))
            special = false;
        else if (argv[i][0] == '-' && argv[i][1] && strcmp(argv[i], "--") != 0)
            return cli_usage_error("tokenize", "unknown option '%s'", argv[i]);
        else if (!src)
            src = argv[i];
        else if (!text_arg)
            text_arg = argv[i];
        else
            return cli_usage_error("tokenize", "unexpected argument '%s' (quote the text)",
                                   argv[i]);
    }
    if (!src || !text_arg) return cli_usage_error("tokenize", "need SRC and TEXT");
    size_t len;
    char *owned = NULL;
    const char *text = text_arg;
    if (!strcmp(text_arg, "-")) {
        if (!(owned = read_all(stdin, &len))) {
            fprintf(stderr, "cortiq tokenize: cannot read stdin\n");
            return CLI_EXIT_SYSTEM;
        }
        text = owned;
    } else {
        len = strlen(text_arg);
    }
    cmf_tokenizer *tok = NULL;
    int rc = load_src("tokenize", src, &tok);
    if (rc) {
        free(owned);
        return rc;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    cmf_err err;
    cmf_status st = cmf_tokenizer_encode(tok, text, len, special, &ids, &n, &err);
    free(owned);
    if (st) {
        cli_error(&err);
        cmf_tokenizer_free(tok);
        return cli_exit_code(st);
    }
    if (json) {
        fputs("{\"ids\": [", stdout);
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? ", " : "", ids[i]);
        fputs("], \"pieces\": [", stdout);
        for (size_t i = 0; i < n; i++) {
            size_t pl = 0;
            const char *p = cmf_tokenizer_id_to_token(tok, ids[i], &pl);
            if (i) fputs(", ", stdout);
            cli_json_bytes(p ? p : "", p ? pl : 0);
        }
        fputs("]}\n", stdout);
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        putchar('\n');
        for (size_t i = 0; i < n; i++) {
            size_t pl = 0;
            const char *p = cmf_tokenizer_id_to_token(tok, ids[i], &pl);
            printf("%d\t", ids[i]);
            cli_json_bytes(p ? p : "", p ? pl : 0);
            putchar('\n');
        }
    }
    free(ids);
    cmf_tokenizer_free(tok);
    return CLI_EXIT_OK;
}

static void detokenize_usage(void) {
    printf("usage: cortiq detokenize SRC IDS...|- [--json] [--skip-special]\n"
           "  Decode ids with the tokenizer of SRC (.cmf or tokenizer.json). IDS are integers, as\n"
           "  separate arguments or separated by spaces/commas; '-' reads them from stdin.\n"
           "  Prints the text followed by a newline.\n"
           "  --json          print {\"text\": \"...\"} instead\n"
           "  --skip-special  drop special tokens (BOS, EOS, ...)\n");
}

/* Append the ids found in s (separated by spaces, commas, brackets or newlines). */
static int parse_ids(const char *s, int32_t **ids, size_t *n, size_t *cap) {
    const char *p = s;
    while (*p) {
        if (strchr(" ,\t\r\n[]", *p)) {
            p++;
            continue;
        }
        char num[24];
        size_t k = 0;
        while (*p && !strchr(" ,\t\r\n[]", *p) && k < sizeof num - 1)
            num[k++] = *p++;
        num[k] = 0;
        uint64_t v;
        if (!cli_parse_u64(num, &v) || v > INT32_MAX) {
            fprintf(stderr, "cortiq detokenize: '%s' is not a token id\n", num);
            return CLI_EXIT_USAGE;
        }
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            int32_t *q = realloc(*ids, nc * sizeof *q);
            if (!q) return CLI_EXIT_SYSTEM;
            *ids = q;
            *cap = nc;
        }
        (*ids)[(*n)++] = (int32_t)v;
    }
    return CLI_EXIT_OK;
}

int cmd_detokenize(int argc, char **argv) {
    const char *src = NULL;
    bool json = false, skip = false;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = CLI_EXIT_OK;
    bool any = false;
    for (int i = 1; i < argc && !rc; i++) {
        if (cli_is_help(argv[i])) {
            free(ids);
            detokenize_usage();
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--skip-special"))
            skip = true;
        else if (argv[i][0] == '-' && argv[i][1])
            rc = cli_usage_error("detokenize", "unknown option '%s'", argv[i]);
        else if (!src)
            src = argv[i];
        else if (!strcmp(argv[i], "-")) {
            size_t len;
            char *in = read_all(stdin, &len);
            char *z = in ? realloc(in, len + 1) : NULL;
            if (!z) {
                free(in);
                rc = CLI_EXIT_SYSTEM;
                break;
            }
            z[len] = 0;
            rc = parse_ids(z, &ids, &n, &cap);
            free(z);
            any = true;
        } else {
            rc = parse_ids(argv[i], &ids, &n, &cap);
            any = true;
        }
    }
    if (!rc && (!src || !any)) rc = cli_usage_error("detokenize", "need SRC and IDS");
    cmf_tokenizer *tok = NULL;
    if (!rc) rc = load_src("detokenize", src, &tok);
    size_t vocab = tok ? cmf_tokenizer_vocab_size(tok) : 0;
    for (size_t i = 0; !rc && i < n; i++)
        if ((size_t)ids[i] >= vocab) {
            fprintf(stderr, "cortiq detokenize: id %d is outside the vocabulary [0, %zu) of %s\n",
                    ids[i], vocab, src);
            rc = CLI_EXIT_USAGE;
        }
    if (!rc) {
        char *text = NULL;
        size_t len = 0;
        cmf_err err;
        cmf_status st = cmf_tokenizer_decode(tok, ids, n, skip, &text, &len, &err);
        if (st) {
            cli_error(&err);
            rc = cli_exit_code(st);
        } else if (json) {
            fputs("{\"text\": ", stdout);
            cli_json_bytes(text, len);
            fputs("}\n", stdout);
        } else {
            fwrite(text, 1, len, stdout);
            putchar('\n');
        }
        free(text);
    }
    cmf_tokenizer_free(tok);
    free(ids);
    return rc;
}
