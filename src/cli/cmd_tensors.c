/* cmd_tensors.c - `cortiq tensors FILE [--prefix P] [--json]`: the tensor directory. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/format.h"
#include "cortiq/hash.h"

static void usage(void) {
    printf("usage: cortiq tensors FILE [--prefix P] [--sorted] [--json]\n"
           "  List the tensor directory: name, dtype, shape, offset, bytes, hash64.\n"
           "  --prefix P   only names starting with P (e.g. skill.sql.), in name order\n"
           "  --sorted     name order instead of directory order\n"
           "  --json       one JSON array of objects\n");
}

static void print_shape(const cmf_tensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (unsigned i = 0; i < t->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? ", " : "",
                              (unsigned long long)t->shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

int cmd_tensors(int argc, char **argv) {
    const char *path = NULL, *prefix = NULL;
    int json = 0, sorted = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--sorted"))
            sorted = 1;
        else if (!strcmp(argv[i], "--prefix") && i + 1 < argc)
            prefix = argv[++i];
        else if (argv[i][0] == '-')
            return cli_usage_error("tensors", "unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return cli_usage_error("tensors", "one FILE only");
    }
    if (!path) return cli_usage_error("tensors", "missing FILE");
    cmf_file *f;
    int rc = cli_open_model(path, &f);
    if (rc) return rc;
    size_t first = 0, count = cmf_file_tensor_count(f);
    if (prefix) cmf_file_prefix(f, prefix, &first, &count);
    if (json)
        printf("[");
    else
        printf("%-60s %-9s %-22s %12s %12s %s\n", "name", "dtype", "shape", "offset", "bytes",
               "hash64");
    for (size_t k = 0; k < count; k++) {
        const cmf_tensor *t =
            (prefix || sorted) ? cmf_file_sorted_at(f, first + k) : cmf_file_tensor_at(f, k);
        char shape[160], hex[17];
        print_shape(t, shape, sizeof shape);
        cmf_hash64_to_hex(t->hash, hex);
        if (json) {
            printf("%s\n {\"name\": ", k ? "," : "");
            cli_json_string(t->name);
            printf(", \"dtype\": \"%s\", \"shape\": %s, \"offset\": %llu, \"nbytes\": %llu, "
                   "\"hash64\": \"%s\", "
                   "\"shard\": %u}",
                   cmf_dtype_name(t->dtype), shape, (unsigned long long)t->off,
                   (unsigned long long)t->nbytes, hex, t->shard + 1);
        } else {
            printf("%-60s %-9s %-22s %12llu %12llu %s\n", t->name, cmf_dtype_name(t->dtype), shape,
                   (unsigned long long)t->off, (unsigned long long)t->nbytes, hex);
        }
    }
    if (json) printf("\n]\n");
    cmf_close(f);
    return CLI_EXIT_OK;
}
