/* cmd_skill.c - `cortiq skill SUBCOMMAND`: skills over one backbone (spec §9, §9.1). Dispatches
 * to add / export / apply / route and holds the small ones: list and rm. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "cli/cmd_skill.h"
#include "cortiq/writer.h"

static void usage(void) {
    printf("usage: cortiq skill SUBCOMMAND ...   (spec 9: skills over one backbone)\n"
           "  add FILE --id ID --from TUNED.cmf|HF_DIR [--layers 3,4,5] [--calib TEXT]\n"
           "      [--heldout TEXT] [--phi-layer L] [--rank K] [--name NAME] [--task NAME]\n"
           "      [--quant Q]\n"
           "                         append a skill in place (append-only)\n"
           "  list FILE [--json]     the registry: layers, tensors, bytes, routing, quality\n"
           "  rm FILE ID             drop a skill in place (its bytes stay dead until compact)\n"
           "  export FILE --id ID --base BASE.cmf -o SKILL.cmf\n"
           "                         cut a standalone skill file (SKILL_FILE, spec 9.1)\n"
           "  apply BASE.cmf SKILL.cmf -o OUT.cmf [--force]\n"
           "                         attach a standalone skill to its base: a complete model\n"
           "  route FILE --prompt TEXT | --prompts LINES.txt\n"
           "                         show the recon-argmin routing decision\n"
           "  `cortiq skill SUBCOMMAND --help` describes each.\n");
}

int skill_id_ok(const char *id) {
    size_t n = strlen(id);
    if (!n || n > 64 || !strcmp(id, "none") || !strcmp(id, "auto")) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

const cmf_skill *skill_record(const cmf_file *f, const char *id) {
    const cmf_header *h = cmf_file_header(f);
    for (size_t i = 0; i < h->n_skills; i++)
        if (!strcmp(h->skills[i].id, id)) return &h->skills[i];
    return NULL;
}

static void list_usage(void) {
    printf("usage: cortiq skill list FILE [--json]\n"
           "  Each skill of the registry: id, name, layers, its skill.ID.* tensors and bytes,\n"
           "  routing (selection phi_layer and rank) and the measured quality contract; for a\n"
           "  standalone skill file also base_dir_hash.\n");
}

static int skill_list(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) return list_usage(), CLI_EXIT_OK;
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("skill list", "unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return cli_usage_error("skill list", "one FILE only");
    }
    if (!path) return cli_usage_error("skill list", "missing FILE");
    cmf_file *f;
    int rc = cli_open_model(path, &f);
    if (rc) return rc;
    const cmf_header *h = cmf_file_header(f);
    if (json) printf("{\"skills\": [");
    if (!json && !h->n_skills) printf("%s: no skills (a plain backbone)\n", path);
    for (size_t i = 0; i < h->n_skills; i++) {
        const cmf_skill *s = &h->skills[i];
        char prefix[96];
        snprintf(prefix, sizeof prefix, "skill.%s.", s->id);
        size_t first, count;
        cmf_file_prefix(f, prefix, &first, &count);
        uint64_t bytes = 0;
        for (size_t k = 0; k < count; k++)
            bytes += cmf_file_sorted_at(f, first + k)->nbytes;
        if (s->has_base_dir_hash) /* a standalone skill file stores plain names (spec §9.1) */
            count = cmf_file_tensor_count(f), bytes = 0;
        for (size_t k = 0; s->has_base_dir_hash && k < count; k++)
            bytes += cmf_file_tensor_at(f, k)->nbytes;
        json_t *sel = s->selection_json ? json_loads(s->selection_json, 0, NULL) : NULL;
        json_int_t phi = json_integer_value(json_object_get(sel, "phi_layer"));
        json_int_t rank = json_integer_value(json_object_get(sel, "rank"));
        if (json) {
            printf("%s\n {\"id\": ", i ? "," : "");
            cli_json_string(s->id);
            printf(", \"tensors\": %zu, \"bytes\": %llu, \"layers\": [", count,
                   (unsigned long long)bytes);
            for (size_t k = 0; k < s->n_layers; k++)
                printf("%s%lld", k ? ", " : "", (long long)s->layers[k]);
            printf("], \"routable\": %s", sel ? "true" : "false");
            if (sel)
                printf(", \"phi_layer\": %lld, \"rank\": %lld", (long long)phi, (long long)rank);
            printf(", \"input_mask_task\": ");
            if (s->input_mask_task)
                cli_json_string(s->input_mask_task);
            else
                printf("null");
            printf(", \"quality\": %s", s->quality_json ? s->quality_json : "null");
            if (s->has_base_dir_hash)
                printf(", \"base_dir_hash\": \"%016llx\"", (unsigned long long)s->base_dir_hash);
            printf("}");
        } else {
            printf("%s%s%s%s\n", s->id, s->name ? " (" : "", s->name ? s->name : "",
                   s->name ? ")" : "");
            printf("    tensors  %zu, %s\n    layers  ", count, cli_bytes(bytes));
            for (size_t k = 0; k < s->n_layers; k++)
                printf("%s%lld", k ? "," : " ", (long long)s->layers[k]);
            if (sel)
                printf("\n    routing  phi_layer %lld, rank %lld\n", (long long)phi,
                       (long long)rank);
            else
                printf("\n    routing  none (no selection block: --skill auto skips it)\n");
            if (s->input_mask_task)
                printf("    task     %s (its input_mask_task)\n", s->input_mask_task);
            printf("    quality  %s\n", s->quality_json ? s->quality_json : "null (not measured)");
            if (s->has_base_dir_hash)
                printf("    standalone: base_dir_hash %016llx (attach with `cortiq skill apply`)\n",
                       (unsigned long long)s->base_dir_hash);
        }
        json_decref(sel);
    }
    if (json) printf("]}\n");
    cmf_close(f);
    return CLI_EXIT_OK;
}

static void rm_usage(void) {
    printf("usage: cortiq skill rm FILE ID\n"
           "  Remove skill ID in place, append-only (spec 9): its skill.ID.* tensors leave the\n"
           "  directory and its record the registry; the header and directory are re-emitted at\n"
           "  the tail and the envelope switched last. The bytes stay (dead) until `cortiq\n"
           "  compact`.\n");
}

static int skill_rm(int argc, char **argv) {
    const char *path = NULL, *id = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) return rm_usage(), CLI_EXIT_OK;
        if (argv[i][0] == '-') return cli_usage_error("skill rm", "unknown option '%s'", argv[i]);
        if (!path)
            path = argv[i];
        else if (!id)
            id = argv[i];
        else
            return cli_usage_error("skill rm", "need FILE and ID only");
    }
    if (!path || !id) return cli_usage_error("skill rm", "need FILE and ID");
    cmf_err err;
    cmf_appender *a = NULL;
    cmf_status st = cmf_append_begin(path, &a, &err);
    const cmf_file *f = NULL;
    cmf_file *ro = NULL;
    if (!st) st = cmf_open(path, 0, &ro, &err);
    f = ro;
    if (!st && !skill_record(f, id))
        st = cmf_err_set(&err, CMF_E_NOT_FOUND, path, "no skill '%s' in the registry", id);
    char prefix[96];
    snprintf(prefix, sizeof prefix, "skill.%s.", id);
    size_t first = 0, count = 0;
    if (!st) cmf_file_prefix(f, prefix, &first, &count);
    for (size_t k = 0; !st && k < count; k++)
        st = cmf_append_drop_tensor(a, cmf_file_sorted_at(f, first + k)->name, &err);
    if (!st) {
        const cmf_header *h = cmf_file_header(f);
        json_t *root = json_loadb(h->json, h->json_len, 0, NULL);
        json_t *skills = json_object_get(root, "skills");
        size_t k;
        json_t *rec;
        json_array_foreach(skills, k, rec) {
            if (!strcmp(json_string_value(json_object_get(rec, "id")), id)) {
                json_array_remove(skills, k);
                break;
            }
        }
        if (json_array_size(skills) == 0) json_object_del(root, "skills");
        char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(root);
        st = text ? cmf_append_set_header(a, text, strlen(text), &err)
                  : (cmf_status)cmf_err_set(&err, CMF_E_NOMEM, path, "header");
        free(text);
    }
    if (!st) st = cmf_append_commit(a, &err);
    cmf_close(ro);
    cmf_append_free(a);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    printf("removed skill '%s' (%zu tensor(s)) from %s; `cortiq compact` reclaims the bytes\n", id,
           count, path);
    return CLI_EXIT_OK;
}

int cmd_skill(int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1])) {
        usage();
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "add")) return skill_add_main(argc - 1, argv + 1);
    if (!strcmp(sub, "list")) return skill_list(argc - 1, argv + 1);
    if (!strcmp(sub, "rm")) return skill_rm(argc - 1, argv + 1);
    if (!strcmp(sub, "export")) return skill_export_main(argc - 1, argv + 1);
    if (!strcmp(sub, "apply")) return skill_apply_main(argc - 1, argv + 1);
    if (!strcmp(sub, "route")) return skill_route_main(argc - 1, argv + 1);
    return cli_usage_error("skill", "unknown subcommand '%s' (add, list, rm, export, apply, route)",
                           sub);
}
