/* cmd_masks.c - `cortiq masks FILE [--json]`: each task mask, per layer active
 * neurons/heads/experts. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/format.h"

static void usage(void) {
    printf("usage: cortiq masks FILE [--json]\n"
           "  Every task mask of the masks section (spec 5): name, sparsity, quality contract, and "
           "per\n"
           "  layer the active FFN neurons, attention heads, layer gate and (MoE) routable "
           "experts;\n"
           "  then the deprecated sparse index (spec 7) when the file has one (shown, never "
           "written).\n");
}

int cmd_masks(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("masks", "unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return cli_usage_error("masks", "one FILE only");
    }
    if (!path) return cli_usage_error("masks", "missing FILE");
    cmf_file *f;
    int rc = cli_open_model(path, &f);
    if (rc) return rc;
    const cmf_masks *m = cmf_file_masks(f);
    if (!m) {
        if (json)
            printf("{\"masks\": []}\n");
        else
            printf("%s: no masks section\n", path);
        cmf_close(f);
        return CLI_EXIT_OK;
    }
    if (json) {
        printf("{\"default_task\": ");
        if (m->default_task)
            cli_json_string(m->default_task);
        else
            printf("null");
        printf(", \"n_layers\": %u, \"intermediate\": %u, \"n_heads\": %u, \"n_experts\": %u, "
               "\"masks\": [",
               m->n_layers, m->intermediate, m->n_heads, m->n_experts);
    } else {
        printf("%zu mask(s); dims: %u layers, %u FFN neurons, %u heads%s", m->n_masks, m->n_layers,
               m->intermediate, m->n_heads, m->n_experts ? "" : "\n");
        if (m->n_experts) printf(", %u experts\n", m->n_experts);
    }
    for (size_t i = 0; i < m->n_masks; i++) {
        const cmf_mask *k = &m->masks[i];
        if (json) {
            printf("%s\n {\"task_id\": %u, \"name\": ", i ? "," : "", k->task_id);
            cli_json_string(k->name);
            printf(", \"sparsity\": ");
            if (k->has_sparsity)
                printf("%g", k->sparsity);
            else
                printf("null");
            printf(", \"quality\": %s, \"layers_active\": %u, \"layers\": [",
                   k->quality_json ? k->quality_json : "null", cmf_mask_layers_active(m, k));
            for (uint32_t l = 0; l < m->n_layers; l++)
                printf("%s{\"gate\": %d, \"ffn\": %u, \"heads\": %u, \"experts\": %u}",
                       l ? ", " : "", cmf_bit(k->gates, l), cmf_mask_ffn_active(m, k, l),
                       cmf_mask_heads_active(m, k, l), cmf_mask_experts_active(m, k, l));
            printf("]}");
            continue;
        }
        printf("\n[%u] %s%s%s\n", k->task_id, k->name,
               m->default_task && !strcmp(m->default_task, k->name) ? " (default)" : "",
               k->description ? "" : "");
        if (k->description) printf("    %s\n", k->description);
        if (k->has_sparsity) printf("    sparsity %.4f\n", k->sparsity);
        printf("    quality  %s\n", k->quality_json ? k->quality_json : "null (not measured)");
        printf("    layer  gate  ffn_active  heads_active%s\n",
               k->experts ? "  experts_routable" : "");
        for (uint32_t l = 0; l < m->n_layers; l++) {
            printf("    %5u  %4s  %10u  %12u", l, cmf_bit(k->gates, l) ? "on" : "off",
                   cmf_mask_ffn_active(m, k, l), cmf_mask_heads_active(m, k, l));
            if (k->experts) printf("  %16u", cmf_mask_experts_active(m, k, l));
            printf("\n");
        }
    }
    const cmf_sparse_index *ix = cmf_file_sparse_index(f);
    if (json)
        printf("\n], \"sparse_index_entries\": %zu}\n", ix ? ix->n_entries : 0);
    else if (ix) {
        /* deprecated (spec §7): shown, never written; the engine reads the mask bits */
        printf("\nsparse index (deprecated, display only): %zu entries\n", ix->n_entries);
        printf("    task  layer  ffn_groups  heads\n");
        for (size_t i = 0; i < ix->n_entries; i++)
            printf("    %4u  %5u  %10u  %5u\n", ix->entries[i].task_id, ix->entries[i].layer,
                   ix->entries[i].n_groups, ix->entries[i].n_heads);
    }
    cmf_close(f);
    return CLI_EXIT_OK;
}
