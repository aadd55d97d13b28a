/* cli_moe.c - the MoE options of run, ppl and logits (cli_moe.h). */
#include "cli/cli_moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/moe.h"

int cli_moe_opt(const char *cmd, cli_moe_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    bool mask = !strcmp(a, "--moe-mask"), cover = !strcmp(a, "--moe-cover"),
         stats = !strcmp(a, "--route-stats");
    if (!mask && !cover && !stats) return 0;
    if (!(v = cli_opt_value(cmd, argc, argv, i))) return -1;
    if (mask) o->mask = v;
    if (stats) o->stats_out = v;
    if (cover) {
        if (!cli_opt_double(cmd, a, v, 0, true, 1, false, &o->cover)) return -1;
        o->cover_set = true;
    }
    return 1;
}

int cli_moe_begin(const char *cmd, cli_moe_opts *o, cortiq_model *m, cortiq_session *s) {
    if (!o->cover_set) o->cover = 0.9;
    if (!o->mask && (o->mask = getenv("CMF_MOE_MASK")) && *o->mask) {
        const char *c = getenv("CMF_MOE_MASK_COVER");
        if (c && !o->cover_set &&
            !cli_opt_double(cmd, "CMF_MOE_MASK_COVER", c, 0, true, 1, false, &o->cover))
            return CLI_EXIT_USAGE;
        fprintf(stderr, "cortiq %s: CMF_MOE_MASK=%s: routing restricted at cover %g\n", cmd,
                o->mask, o->cover);
    } else if (o->mask && !*o->mask)
        o->mask = NULL;
    cmf_err err;
    cmf_status st = CMF_OK;
    if (o->mask) {
        cmf_moe_keep k;
        st = cmf_moe_keep_from_stats(cortiq_model_file(m), o->mask, o->cover, &k, &err);
        if (!st) {
            const uint8_t **rows = calloc(k.n_layers, sizeof *rows);
            if (!rows) {
                cmf_moe_keep_free(&k);
                fprintf(stderr, "cortiq %s: out of memory\n", cmd);
                return CLI_EXIT_SYSTEM;
            }
            for (uint32_t l = 0; l < k.n_layers; l++)
                rows[l] = k.present[l] ? k.bits + (size_t)l * k.expert_bytes : NULL;
            st = cortiq_session_restrict_experts(s, rows, &err);
            free(rows);
            cmf_moe_keep_free(&k);
        }
    }
    if (!st && o->stats_out) st = cortiq_session_count_routes(s, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    return 0;
}

int cli_moe_end(const char *cmd, const cli_moe_opts *o, cortiq_model *m, const cortiq_session *s) {
    if (!o->stats_out) return 0;
    uint32_t L = (uint32_t)cmf_file_header(cortiq_model_file(m))->arch.num_layers;
    const uint64_t **counts = calloc(L ? L : 1, sizeof *counts);
    uint32_t *n = calloc(L ? L : 1, sizeof *n), n_moe = 0;
    if (!counts || !n) {
        free(counts), free(n);
        fprintf(stderr, "cortiq %s: out of memory\n", cmd);
        return CLI_EXIT_SYSTEM;
    }
    for (uint32_t l = 0; l < L; l++)
        n_moe += (counts[l] = cortiq_session_route_counts(s, l, &n[l])) != NULL;
    cmf_err err;
    cmf_status st = cmf_moe_stats_write(o->stats_out, L, counts, n, &err);
    free(counts), free(n);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    fprintf(stderr, "cortiq %s: route statistics of %u MoE layers -> %s\n", cmd, n_moe,
            o->stats_out);
    return 0;
}
