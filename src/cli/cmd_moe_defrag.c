/* cmd_moe_defrag.c - `cortiq moe-defrag MODEL.cmf --stats S.json -o OUT.cmf [--cover C]`: a
 * copy of a mixture-of-experts model holding only the experts a task routes to (spec §11.1;
 * docs/MOE.md). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/moe.h"

static void usage(void) {
    printf(
        "usage: cortiq moe-defrag MODEL.cmf --stats S.json -o OUT.cmf [--cover C]\n"
        "  Write OUT.cmf with, per MoE layer, only the smallest set of experts whose selection\n"
        "  counts in S (route statistics, `cortiq run|ppl --route-stats`) reach C of the layer's\n"
        "  total. Kept experts are renumbered 0.. in their order and copied byte for byte (a\n"
        "  layer's gate_proj, then up_proj, then down_proj tensors back to back); the router's\n"
        "  rows and expert_bias are gathered to match; provenance.moe_defrag records the cut.\n"
        "  OUT computes what MODEL computes with `--moe-mask S.json --moe-cover C`.\n"
        "  --stats S.json  route statistics of a task-representative run (required)\n"
        "  --cover C       fraction of each layer's routing mass to keep, in (0, 1] (default 0.95)\n"
        "  -o OUT.cmf      the output (required; written atomically)\n");
}

int cmd_moe_defrag(int argc, char **argv) {
    const char *path = NULL, *stats = NULL, *out = NULL;
    double cover = 0.95;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) return usage(), CLI_EXIT_OK;
        if (a[0] != '-') {
            if (path) return cli_usage_error("moe-defrag", "one MODEL only ('%s' is a second)", a);
            path = a;
            continue;
        }
        if (!cli_word_in(a, "--stats --cover -o --output"))
            return cli_usage_error("moe-defrag", "unknown option '%s'", a);
        if (!(v = cli_opt_value("moe-defrag", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!strcmp(a, "--stats"))
            stats = v;
        else if (!strcmp(a, "--cover")) {
            if (!cli_opt_double("moe-defrag", a, v, 0, true, 1, false, &cover))
                return CLI_EXIT_USAGE;
        } else
            out = v;
    }
    if (!path) return cli_usage_error("moe-defrag", "missing MODEL.cmf");
    if (!stats) return cli_usage_error("moe-defrag", "missing --stats S.json");
    if (!out) return cli_usage_error("moe-defrag", "missing -o OUT.cmf");
    cmf_file *f = NULL;
    int rc = cli_open_model(path, &f);
    if (rc) return rc;
    cmf_moe_keep k;
    cmf_err err;
    cmf_moe_defrag_stats ds;
    cmf_status st = cmf_moe_keep_from_stats(f, stats, cover, &k, &err);
    cmf_close(f);
    if (!st) st = cmf_moe_defrag(path, out, &k, &ds, &err);
    cmf_moe_keep_free(&k);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    printf("moe-defrag: %u of %u experts kept (cover %g); %s %s -> %s %s (%.1f%%)\n",
           ds.experts_out, ds.experts_in, cover, path, cli_bytes(ds.in_bytes), out,
           cli_bytes(ds.out_bytes),
           ds.in_bytes ? 100.0 * (double)ds.out_bytes / (double)ds.in_bytes : 0.0);
    if (ds.masks_dropped)
        printf("moe-defrag: %u task mask(s) left out: their expert area kept no expert of some "
               "layer\n",
               ds.masks_dropped);
    return CLI_EXIT_OK;
}
