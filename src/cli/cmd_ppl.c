/* cmd_ppl.c - `cortiq ppl MODEL.cmf TEXTFILE [--ctx N --stride S]`: perplexity computed the way
 * the transformers documentation does it: windows of up to N tokens advanced by S, each
 * scoring only the tokens not scored before, ppl = exp(total NLL / scored tokens). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd_skill.h"
#include "cli/cli_moe.h"
#include "common/fileio.h"
#include "cortiq/runtime.h"

static void usage(void) {
    printf(
        "usage: cortiq ppl MODEL.cmf TEXTFILE [--ctx N] [--stride S] [-t N] [--kv f16|q8|f32] [--f32-act] [--task NAME] [--verify]\n"
        "       [--moe-mask S.json [--moe-cover C]] [--route-stats F.json]\n"
        "  Perplexity of the text (tokenized with special tokens, as transformers' "
        "tokenizer(text)\n"
        "  does) with a strided sliding window: N tokens per window (default 1024, at most the\n"
        "  model's context), advancing S tokens (default N/2). Ends with `PPL = <value>`.\n"
        "  --kv: KV cache type (default f16).\n"
        "  --task NAME: the file's task mask NAME (default: the skill's\n"
        "  input_mask_task, else the file's default_task; none: dense).\n"
        "  --f32-act: f32 activations everywhere (default: int8 GEMM for batches on VNNI CPUs,\n"
        "  bf16 for batches on bf16 weights on AMD AVX-512 BF16 / AMX).\n"
        "  --verify: check every tensor's hash64 before computing.\n"
        "  --skill ID|auto|none: skill overlay (spec 9); auto routes on the text's beginning.\n"
        "  --skill-blend T: soft blend of the routable skills, weights softmax(-E/T).\n" CLI_MOE_HELP);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "ppl [#####     ]  45%  1234/2730 tokens  350 tok/s  ETA 4 s" over itself on stderr. */
static void show_progress(bool on, size_t done, size_t total, double t0) {
    if (!on || !total) return;
    double el = now_s() - t0, rate = el > 0 ? done / el : 0;
    char bar[21];
    size_t fill = done * 20 / total;
    for (size_t i = 0; i < 20; i++)
        bar[i] = i < fill ? '#' : ' ';
    bar[20] = 0;
    fprintf(stderr, "\rppl [%s] %3.0f%%  %zu/%zu tokens  %.0f tok/s  ETA %.0f s ", bar,
            100.0 * done / total, done, total, rate, rate > 0 ? (total - done) / rate : 0.0);
    fflush(stderr);
}

int cmd_ppl(int argc, char **argv) {
    const char *path = NULL, *text_path = NULL, *task = NULL;
    uint64_t ctx = 1024, stride = 0, threads = 0;
    bool ctx_set = false;
    cortiq_kv_type kv = CORTIQ_KV_F16;
    cortiq_act_mode act = CORTIQ_ACT_DEFAULT;
    int verify = 0;
    const char *skill = NULL;
    double blend_t = 0;
    cli_moe_opts moe = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) return usage(), CLI_EXIT_OK;
        int moe_opt = cli_moe_opt("ppl", &moe, argc, argv, &i);
        if (moe_opt < 0) return CLI_EXIT_USAGE;
        if (moe_opt) continue;
        if (!strcmp(a, "--f32-act")) {
            act = CORTIQ_ACT_F32;
            continue;
        }
        if (!strcmp(a, "--verify")) {
            verify = 1;
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            if (!path)
                path = a;
            else if (!text_path)
                text_path = a;
            else
                return cli_usage_error("ppl", "unexpected argument '%s' (after MODEL and TEXTFILE)",
                                       a);
            continue;
        }
        bool known = !strcmp(a, "--ctx") || !strcmp(a, "--stride") || !strcmp(a, "-t") ||
                     !strcmp(a, "--threads") || !strcmp(a, "--kv") || !strcmp(a, "--task") ||
                     !strcmp(a, "--skill") || !strcmp(a, "--skill-blend");
        if (!known) return cli_usage_error("ppl", "unknown option '%s'", a);
        if (!(v = cli_opt_value("ppl", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!strcmp(a, "--skill")) {
            skill = v;
        } else if (!strcmp(a, "--skill-blend")) {
            if (!cli_opt_double("ppl", a, v, 0, true, 1e30, false, &blend_t)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--ctx")) {
            if (!cli_opt_u64("ppl", a, v, 2, 1u << 20, &ctx)) return CLI_EXIT_USAGE;
            ctx_set = true;
        } else if (!strcmp(a, "--stride")) {
            if (!cli_opt_u64("ppl", a, v, 1, 1u << 20, &stride)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--kv")) {
            if (!cortiq_kv_type_from_name(v, &kv))
                return cli_usage_error("ppl", "--kv '%s': want f16, q8 or f32", v);
        } else if (!strcmp(a, "--task")) {
            task = v;
        } else if (!cli_opt_u64("ppl", a, v, 1, 64, &threads)) {
            return CLI_EXIT_USAGE;
        }
    }
    if (!path || !text_path) return cli_usage_error("ppl", "need MODEL.cmf and TEXTFILE");
    size_t tlen;
    char *text = cq_read_file(text_path, &tlen);
    if (!text) {
        fprintf(stderr, "%s: IO: cannot read: %s\n", text_path, strerror(errno));
        return CLI_EXIT_SYSTEM;
    }
    cli_skill_choice sk;
    int sk_rc =
        cli_skill_choose("ppl", path, skill, blend_t, text, NULL, 0, (unsigned)threads, &sk);
    if (sk_rc) {
        free(text);
        return sk_rc;
    }
    cmf_err err;
    cortiq_runtime *rt = NULL;
    cortiq_runtime_opts ro = {.threads = (unsigned)threads,
                              .ctx = (uint32_t)ctx,
                              .kv = kv,
                              .act = act,
                              .verify_tensors = verify,
                              .skill = sk.skill,
                              .blend = sk.blend,
                              .n_blend = sk.n_blend};
    cmf_status st = cortiq_runtime_open(path, &ro, &rt, &err);
    cli_skill_choice_free(&sk);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!st)
        st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), text, tlen, true, &ids, &n, &err);
    free(text);
    if (st) {
        cli_error(&err);
        cortiq_runtime_free(rt);
        return cli_exit_code(st);
    }
    int task_rc =
        cli_select_task("ppl", cortiq_runtime_model(rt), cortiq_runtime_session(rt), task);
    if (task_rc) {
        free(ids);
        cortiq_runtime_free(rt);
        return task_rc;
    }
    int moe_rc = cli_moe_begin("ppl", &moe, cortiq_runtime_model(rt), cortiq_runtime_session(rt));
    if (moe_rc) {
        free(ids);
        cortiq_runtime_free(rt);
        return moe_rc;
    }
    /* a batch job: every window onto 2 MiB pages now, not token by token as chat does */
    cortiq_model_move_step(cortiq_runtime_model(rt), UINT64_MAX);
    cortiq_session *s = cortiq_runtime_session(rt);
    uint32_t win = cortiq_session_ctx(s);
    if (ctx_set && win < ctx)
        fprintf(stderr, "cortiq ppl: --ctx %llu is more than the model's %u positions; using %u\n",
                (unsigned long long)ctx, win, win);
    if (stride > win)
        fprintf(stderr, "cortiq ppl: --stride %llu is more than the window of %u; using %u\n",
                (unsigned long long)stride, win, win / 2 ? win / 2 : 1);
    if (!stride || stride > win) stride = win / 2 ? win / 2 : 1;
    uint32_t V = cortiq_model_vocab(cortiq_runtime_model(rt));
    float *logits = malloc((size_t)win * V * sizeof(float));
    double nll = 0;
    size_t scored = 0, prev_end = 0;
    bool progress = isatty(2); /* a bar on a terminal only: logs stay clean */
    double t_start = now_s();
    for (size_t begin = 0; begin < n && !st; begin += stride) {
        size_t end = begin + win < n ? begin + win : n;
        size_t trg = end - prev_end; /* tokens of this window not scored before */
        cortiq_session_reset(s);
        st = cortiq_session_eval(s, ids + begin, end - begin, logits, &err);
        /* logits at t predict ids[begin + t + 1]; labels before the last trg are masked */
        size_t first_label = (end - begin) - trg;
        for (size_t t = first_label ? first_label - 1 : 0; !st && t + 1 < end - begin; t++) {
            nll += cli_token_nll(logits + t * V, V, ids[begin + t + 1]);
            scored++;
        }
        prev_end = end;
        show_progress(progress, end, n, t_start);
        if (end == n) break;
    }
    if (progress) fputs("\r\033[K", stderr); /* the bar gives way to the result */
    free(logits);
    free(ids);
    int stats_rc = st ? 0 : cli_moe_end("ppl", &moe, cortiq_runtime_model(rt), s);
    cortiq_runtime_free(rt);
    if (!st && stats_rc) return stats_rc;
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    if (!scored) {
        fprintf(stderr, "%s: text too short to score\n", text_path);
        return CLI_EXIT_INVALID;
    }
    printf("tokens %zu, scored %zu, window %u, stride %llu\n", n, scored, win,
           (unsigned long long)stride);
    printf("PPL = %.4f\n", exp(nll / (double)scored));
    return CLI_EXIT_OK;
}
