/* cmd_skill_route.c - routing from the command line (spec §9): the runners' --skill auto and
 * --skill-blend T, and `cortiq skill route FILE` which shows the decision for prompts. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "cli/cmd_skill.h"
#include "common/fileio.h"
#include "cortiq/runtime.h"

#define MAX_SKILLS 256
#define ROUTE_MAX  512

void cli_skill_choice_free(cli_skill_choice *c) {
    free(c->skill);
    for (size_t i = 0; i < c->n_blend; i++)
        free(c->blend_ids[i]);
    free(c->blend_ids);
    free(c->blend);
    memset(c, 0, sizeof *c);
}

/* Scores of one prompt on an open backbone runtime. */
static cmf_status route_text(cortiq_runtime *rt, const char *text, const int32_t *ids, size_t n_ids,
                             cortiq_skill_score *scores, size_t *n, cmf_err *err) {
    int32_t *own = NULL;
    if (!ids) {
        cmf_status st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), text, strlen(text),
                                             false, &own, &n_ids, err);
        if (st) return st;
        ids = own;
    }
    /* a long text routes on its beginning: the first ROUTE_MAX tokens, within the context */
    uint32_t maxc = cortiq_model_max_context(cortiq_runtime_model(rt));
    if (n_ids > ROUTE_MAX) n_ids = ROUTE_MAX;
    if (maxc && n_ids > maxc) n_ids = maxc;
    cmf_status st =
        cortiq_skill_route(cortiq_runtime_model(rt), ids, n_ids, scores, MAX_SKILLS, n, err);
    free(own);
    return st;
}

static cmf_status open_backbone(const char *path, unsigned threads, cortiq_runtime **rt,
                                cmf_err *err) {
    cortiq_runtime_opts ro = {.threads = threads, .ctx = 16, .kv = CORTIQ_KV_F32};
    return cortiq_runtime_open(path, &ro, rt, err);
}

int cli_skill_choose(const char *cmd, const char *path, const char *skill_arg, double blend_t,
                     const char *text, const int32_t *ids, size_t n_ids, unsigned threads,
                     cli_skill_choice *out) {
    memset(out, 0, sizeof *out);
    bool autoroute = skill_arg && !strcmp(skill_arg, "auto");
    if (blend_t > 0 && skill_arg && !autoroute)
        return cli_usage_error(cmd, "--skill-blend routes by itself: use it without --skill, or "
                                    "with --skill auto");
    if (!autoroute && !(blend_t > 0)) {
        if (skill_arg && strcmp(skill_arg, "none") && !(out->skill = strdup(skill_arg)))
            return CLI_EXIT_SYSTEM;
        return 0;
    }
    if (!ids && !text)
        return cli_usage_error(cmd, "--skill auto and --skill-blend route on the prompt: give one");
    cmf_err err;
    cortiq_runtime *rt = NULL;
    cortiq_skill_score scores[MAX_SKILLS];
    size_t n = 0;
    cmf_status st = open_backbone(path, threads, &rt, &err);
    if (!st) st = route_text(rt, text, ids, n_ids, scores, &n, &err);
    if (st) {
        cli_error(&err);
        cortiq_runtime_free(rt);
        return cli_exit_code(st);
    }
    fprintf(stderr, "cortiq %s: routing E =", cmd);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %s:%.4g", scores[i].id, scores[i].error);
    fputc('\n', stderr);
    int rc = 0;
    if (blend_t > 0) {
        /* w_i = softmax(-E_i / T) */
        out->blend = calloc(n, sizeof *out->blend);
        out->blend_ids = calloc(n, sizeof *out->blend_ids);
        double z = 0;
        for (size_t i = 0; i < n; i++)
            z += exp(-(scores[i].error - scores[0].error) / blend_t);
        for (size_t i = 0; out->blend && out->blend_ids && i < n; i++) {
            if (!(out->blend_ids[i] = strdup(scores[i].id))) break;
            out->blend[i].id = out->blend_ids[i];
            out->blend[i].weight = (float)(exp(-(scores[i].error - scores[0].error) / blend_t) / z);
            out->n_blend = i + 1;
        }
        if (out->n_blend != n) rc = CLI_EXIT_SYSTEM;
        fprintf(stderr, "cortiq %s: blend T=%g w =", cmd, blend_t);
        for (size_t i = 0; i < out->n_blend; i++)
            fprintf(stderr, " %s:%.4f", out->blend[i].id, (double)out->blend[i].weight);
        fputc('\n', stderr);
    } else {
        fprintf(stderr, "cortiq %s: routed to skill '%s'\n", cmd, scores[0].id);
        if (!(out->skill = strdup(scores[0].id))) rc = CLI_EXIT_SYSTEM;
    }
    cortiq_runtime_free(rt);
    if (rc) cli_skill_choice_free(out);
    return rc;
}

static void route_usage(void) {
    printf("usage: cortiq skill route FILE (--prompt TEXT | --prompts LINES.txt) [-t N] [--json]\n"
           "  Score every skill with a selection block on each prompt (recon-argmin, spec 9):\n"
           "  E = |r - B B^T r|^2 / |phi|^2, phi = the backbone's mean residual stream after\n"
           "  phi_layer over the prompt's tokens (no BOS), r = phi - mean. Prints per prompt the\n"
           "  winner and every E; with --prompts, one prompt per non-empty line and the count\n"
           "  of prompts each skill won.\n"
           "  -t, --threads N   compute threads (default: online CPUs)\n"
           "  --json            one JSON object per prompt\n");
}

int skill_route_main(int argc, char **argv) {
    const char *path = NULL, *prompt = NULL, *prompts = NULL;
    uint64_t threads = 0;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) return route_usage(), CLI_EXIT_OK;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--prompt") || !strcmp(a, "--prompts") || !strcmp(a, "-t") ||
                   !strcmp(a, "--threads")) {
            if (!(v = cli_opt_value("skill route", argc, argv, &i))) return CLI_EXIT_USAGE;
            if (!strcmp(a, "--prompt"))
                prompt = v;
            else if (!strcmp(a, "--prompts"))
                prompts = v;
            else if (!cli_opt_u64("skill route", a, v, 1, 64, &threads))
                return CLI_EXIT_USAGE;
        } else if (a[0] == '-') {
            return cli_usage_error("skill route", "unknown option '%s'", a);
        } else if (!path) {
            path = a;
        } else {
            return cli_usage_error("skill route", "one FILE only");
        }
    }
    if (!path || !!prompt == !!prompts)
        return cli_usage_error("skill route", "need FILE and one of --prompt / --prompts");
    char *buf = NULL;
    if (prompts) {
        size_t len;
        if (!(buf = cq_read_file(prompts, &len))) {
            fprintf(stderr, "%s: IO: cannot read: %s\n", prompts, strerror(errno));
            return CLI_EXIT_SYSTEM;
        }
    }
    cmf_err err;
    cortiq_runtime *rt = NULL;
    cmf_status st = open_backbone(path, (unsigned)threads, &rt, &err);
    const char *wins_id[MAX_SKILLS];
    size_t wins[MAX_SKILLS] = {0}, n_ids = 0, n_prompts = 0;
    char *save = NULL;
    char *line = buf ? strtok_r(buf, "\n", &save) : (char *)prompt;
    for (; !st && line; line = buf ? strtok_r(NULL, "\n", &save) : NULL) {
        if (!*line) continue;
        cortiq_skill_score sc[MAX_SKILLS];
        size_t n = 0;
        if ((st = route_text(rt, line, NULL, 0, sc, &n, &err))) break;
        n_prompts++;
        size_t k = 0;
        while (k < n_ids && strcmp(wins_id[k], sc[0].id))
            k++;
        if (k == n_ids && n_ids < MAX_SKILLS) wins_id[n_ids++] = sc[0].id;
        if (k < MAX_SKILLS) wins[k]++;
        if (json) {
            printf("{\"winner\": ");
            cli_json_string(sc[0].id);
            printf(", \"scores\": [");
            for (size_t i = 0; i < n; i++) {
                printf("%s{\"id\": ", i ? ", " : "");
                cli_json_string(sc[i].id);
                printf(", \"E\": %.6g}", sc[i].error);
            }
            printf("]}\n");
        } else {
            printf("%s\t", sc[0].id);
            for (size_t i = 0; i < n; i++)
                printf("%s%s=%.4g", i ? " " : "", sc[i].id, sc[i].error);
            printf("\n");
        }
    }
    if (!st && !json && prompts) {
        printf("wins over %zu prompt(s):", n_prompts);
        for (size_t k = 0; k < n_ids; k++)
            printf(" %s=%zu", wins_id[k], wins[k]);
        printf("\n");
    }
    if (st) cli_error(&err);
    cortiq_runtime_free(rt);
    free(buf);
    return st ? cli_exit_code(st) : CLI_EXIT_OK;
}
