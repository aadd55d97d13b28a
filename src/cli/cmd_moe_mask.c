/* cmd_moe_mask.c - `cortiq moe-mask MODEL.cmf --stats S.json --name NAME [--cover C] [-o OUT]`:
 * add a task mask whose expert area keeps, per MoE layer, the smallest top set of experts
 * covering C of the routing counts in S (spec §5, §11.1; docs/MOE.md). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/moe.h"

static void usage(void) {
    printf(
        "usage: cortiq moe-mask MODEL.cmf --stats S.json --name NAME [--cover C] [-o OUT.cmf]\n"
        "  Add task mask NAME to a mixture-of-experts model: per MoE layer, the experts kept are\n"
        "  the smallest set, by decreasing count, whose selection counts in S (route statistics,\n"
        "  `cortiq run|ppl --route-stats`, CMF_MOE_STATS) reach C of the layer's total. Its FFN,\n"
        "  head and layer-gate bits are all set; quality is null (not measured: compare with\n"
        "  `cortiq ppl --task NAME`). Activate it with `cortiq run MODEL --task NAME`.\n"
        "  --stats S.json  route statistics of a task-representative run (required)\n"
        "  --name NAME     the mask's name, new in the file (required)\n"
        "  --cover C       fraction of each layer's routing mass to keep, in (0, 1] (default 0.95)\n"
        "  -o OUT.cmf      write a copy with the mask added (default: the file grows in place,\n"
        "                  append-only; existing masks are kept)\n");
}

int cmd_moe_mask(int argc, char **argv) {
    const char *path = NULL, *stats = NULL, *name = NULL, *out = NULL;
    double cover = 0.95;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) return usage(), CLI_EXIT_OK;
        if (a[0] != '-') {
            if (path) return cli_usage_error("moe-mask", "one MODEL only ('%s' is a second)", a);
            path = a;
            continue;
        }
        if (!cli_word_in(a, "--stats --name --cover -o --output"))
            return cli_usage_error("moe-mask", "unknown option '%s'", a);
        if (!(v = cli_opt_value("moe-mask", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!strcmp(a, "--stats"))
            stats = v;
        else if (!strcmp(a, "--name"))
            name = v;
        else if (!strcmp(a, "--cover")) {
            if (!cli_opt_double("moe-mask", a, v, 0, true, 1, false, &cover)) return CLI_EXIT_USAGE;
        } else
            out = v;
    }
    if (!path) return cli_usage_error("moe-mask", "missing MODEL.cmf");
    if (!stats) return cli_usage_error("moe-mask", "missing --stats S.json");
    if (!name || !*name) return cli_usage_error("moe-mask", "missing --name NAME");
    cmf_file *f = NULL;
    int rc = cli_open_model(path, &f);
    if (rc) return rc;
    cmf_moe_keep k;
    cmf_err err;
    cmf_status st = cmf_moe_keep_from_stats(f, stats, cover, &k, &err);
    cmf_close(f);
    if (!st) st = cmf_moe_mask_add(path, out, &k, name, &err);
    if (st) {
        cli_error(&err);
        cmf_moe_keep_free(&k);
        return cli_exit_code(st);
    }
    uint32_t kept = 0, present = 0;
    for (uint32_t l = 0; l < k.n_layers; l++)
        kept += k.kept[l], present += k.present[l];
    printf("moe-mask: '%s' added to %s: %u of %u experts routable (cover %g)\n", name,
           out ? out : path, kept, present, cover);
    for (uint32_t l = 0; l < k.n_layers; l++)
        if (k.present[l]) printf("  layer %u: %u of %u\n", l, k.kept[l], k.present[l]);
    cmf_moe_keep_free(&k);
    return CLI_EXIT_OK;
}
