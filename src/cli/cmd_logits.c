/* cmd_logits.c - `cortiq logits MODEL.cmf --ids 1,2,3`: the logits of token ids fed directly
 * (no tokenizer, no template), as float32 .npy - what comparisons between engines need. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_skill.h"
#include "cli/cli_moe.h"
#include "cli/npy_write.h"
#include "common/err.h"
#include "cortiq/engine.h"

static void usage(void) {
    printf(
        "usage: cortiq logits MODEL.cmf --ids 1,2,3 [--all] [-o OUT.npy] [--exact] [options]\n"
        "  Feed the token ids (comma-separated) to the model as one prompt and report the logits\n"
        "  of the last position: its --top largest on stdout, all of them with -o.\n"
        "  -o OUT.npy      write float32 .npy: shape (vocab,), or (n_ids, vocab) with --all\n"
        "  --all           every position's logits, not only the last one's\n"
        "  --exact         f32 activations and an f32 KV cache (no int8 rounding anywhere): the\n"
        "                  mode for comparing with another engine or with transformers\n"
        "  --greedy N      then generate N tokens greedily (argmax), printing their ids\n"
        "  --top K         how many of the largest logits to print (default 10, 0 = none)\n"
        "  --kv f16|q8|f32 KV cache type (default f16; --exact implies f32)\n"
        "  -t, --threads N compute threads (default: all cores)\n"
        "  --task NAME     the file's task mask NAME (default: the skill's\n"
        "                  input_mask_task, else the file's default_task; none: dense)\n"
        "  --skill ID      skill overlay (spec 9): an id of the file's registry, none (backbone)\n"
        "                  or auto (the skill of least reconstruction error on these ids)\n"
        "  --skill-blend T soft blend of every routable skill, weights softmax(-E/T)\n" CLI_MOE_HELP);
}

/* "1,2,3" into a malloc'd array; false on junk, an empty list or a negative id. */
static bool parse_ids(const char *s, int32_t **out, size_t *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return false;
    size_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            free(ids);
            return false;
        }
        ids[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) { /* trailing comma */
            free(ids);
            return false;
        }
    }
    if (!k) {
        free(ids);
        return false;
    }
    *out = ids, *n = k;
    return true;
}

static void print_top(const float *l, uint32_t V, uint64_t k, size_t pos) {
    if (!k) return;
    if (k > V) k = V;
    uint32_t *best = malloc(k * sizeof *best);
    if (!best) return;
    size_t have = 0;
    for (uint32_t v = 0; v < V; v++) { /* insertion into the k best, ties to the lower id */
        size_t at = have < k ? have : k;
        while (at > 0 && l[v] > l[best[at - 1]])
            at--;
        if (at >= k) continue;
        size_t last = have < k ? have : k - 1;
        memmove(best + at + 1, best + at, (last - at) * sizeof *best);
        best[at] = v;
        if (have < k) have++;
    }
    printf("position %zu top %llu:", pos, (unsigned long long)k);
    for (size_t i = 0; i < have; i++)
        printf(" %u:%.6g", best[i], (double)l[best[i]]);
    printf("\n");
    free(best);
}

typedef struct logits_args {
    const char *path, *out, *ids_text, *task;
    bool all, exact;
    uint64_t greedy, top, threads;
    cortiq_kv_type kv;
    const char *skill;
    double blend_t;
    cli_moe_opts moe;
} logits_args;

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, logits_args *a) {
    a->top = 10;
    a->kv = CORTIQ_KV_F16;
    bool kv_set = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(s)) return usage(), CLI_EXIT_OK;
        int moe_opt = cli_moe_opt("logits", &a->moe, argc, argv, &i);
        if (moe_opt < 0) return CLI_EXIT_USAGE;
        if (moe_opt) continue;
        if (!strcmp(s, "--all"))
            a->all = true;
        else if (!strcmp(s, "--exact"))
            a->exact = true;
        else if (s[0] == '-' && s[1] && !v)
            return cli_usage_error("logits", "option '%s' needs a value", s);
        else if (!strcmp(s, "--ids"))
            a->ids_text = argv[++i];
        else if (!strcmp(s, "-o") || !strcmp(s, "--out"))
            a->out = argv[++i];
        else if (!strcmp(s, "--greedy")) {
            if (!cli_parse_u64(argv[++i], &a->greedy) || a->greedy > 1000000)
                return cli_usage_error("logits", "--greedy '%s': want a count of tokens", v);
        } else if (!strcmp(s, "--top")) {
            if (!cli_parse_u64(argv[++i], &a->top) || a->top > 1000000)
                return cli_usage_error("logits", "--top '%s': want a count", v);
        } else if (!strcmp(s, "-t") || !strcmp(s, "--threads")) {
            if (!cli_parse_u64(argv[++i], &a->threads) || a->threads < 1 || a->threads > 64)
                return cli_usage_error("logits", "%s '%s': want 1 to 64 threads", s, v);
        } else if (!strcmp(s, "--kv")) {
            if (!cortiq_kv_type_from_name(argv[++i], &a->kv))
                return cli_usage_error("logits", "--kv '%s': want f16, q8 or f32", v);
            kv_set = true;
        } else if (!strcmp(s, "--skill")) {
            a->skill = argv[++i];
        } else if (!strcmp(s, "--skill-blend")) {
            if (!cli_opt_double("logits", s, argv[++i], 0, true, 1e30, false, &a->blend_t))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(s, "--task")) {
            a->task = argv[++i];
        } else if (s[0] == '-' && s[1])
            return cli_usage_error("logits", "unknown option '%s'", s);
        else if (!a->path)
            a->path = s;
        else
            return cli_usage_error("logits", "unexpected argument '%s'", s);
    }
    if (!a->path) return cli_usage_error("logits", "need MODEL.cmf");
    if (!a->ids_text) return cli_usage_error("logits", "need --ids");
    if (a->exact && kv_set && a->kv != CORTIQ_KV_F32)
        return cli_usage_error("logits", "--exact uses an f32 KV cache; drop --kv");
    if (a->exact) a->kv = CORTIQ_KV_F32;
    return -1;
}

static int fail(cmf_status st, const cmf_err *err) {
    cli_error(err);
    return cli_exit_code(st);
}

int cmd_logits(int argc, char **argv) {
    logits_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    int32_t *ids;
    size_t n;
    if (!parse_ids(a.ids_text, &ids, &n))
        return cli_usage_error("logits", "--ids '%s': want comma-separated token ids", a.ids_text);
    cli_skill_choice sk;
    if ((rc = cli_skill_choose("logits", a.path, a.skill, a.blend_t, NULL, ids, n,
                               (unsigned)a.threads, &sk))) {
        free(ids);
        return rc;
    }
    cmf_err err;
    cortiq_load_opts lo = {.threads = (unsigned)a.threads,
                           .kv = a.kv,
                           .act = a.exact ? CORTIQ_ACT_F32 : CORTIQ_ACT_DEFAULT,
                           .skill = sk.skill,
                           .blend = sk.blend,
                           .n_blend = sk.n_blend};
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    float *logits = NULL;
    cmf_status st = cortiq_model_load(a.path, &lo, &m, &err);
    if (!st) st = cortiq_session_create(m, (uint32_t)(n + a.greedy), &s, &err);
    if (!st && ((rc = cli_select_task("logits", m, s, a.task)) != CLI_EXIT_OK ||
                (rc = cli_moe_begin("logits", &a.moe, m, s)))) {
        free(ids);
        cortiq_session_free(s);
        cortiq_model_free(m);
        return rc;
    }
    uint32_t V = m ? cortiq_model_vocab(m) : 0;
    size_t rows = a.all ? n : 1;
    if (!st && !(logits = malloc(rows * V * sizeof *logits)))
        st = cmf_err_set(&err, CMF_E_NOMEM, a.path, "%zu x %u logits", rows, V);
    if (!st) {
        float *all = a.all ? logits : NULL;
        st = cortiq_session_eval(s, ids, n, all, &err);
        if (!st && !a.all) memcpy(logits, cortiq_session_logits(s), V * sizeof *logits);
    }
    if (!st) {
        print_top(logits + (rows - 1) * V, V, a.top, n - 1);
        if (a.greedy) printf("greedy:");
        for (uint64_t g = 0; !st && g < a.greedy; g++) {
            int32_t t = cortiq_argmax(cortiq_session_logits(s), V);
            printf(" %d", t);
            if (g + 1 < a.greedy) st = cortiq_session_eval(s, &t, 1, NULL, &err);
        }
        if (a.greedy) printf("\n");
    }
    rc = st ? fail(st, &err) : cli_moe_end("logits", &a.moe, m, s);
    if (!rc && a.out) {
        uint64_t shape[2] = {rows, V};
        rc = a.all ? cli_write_npy_f32("logits", a.out, 2, shape, logits)
                   : cli_write_npy_f32("logits", a.out, 1, shape + 1, logits);
    }
    free(logits);
    free(ids);
    cortiq_session_free(s);
    cortiq_model_free(m);
    cli_skill_choice_free(&sk);
    return rc;
}
