/* bench_model.c - `cortiq bench MODEL.cmf [-p 512 -n 128 -t N -r 5] [--json]`: prefill and
 * decode throughput (mean ± sd over repetitions), load time and peak RSS. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/cli.h"
#include "cortiq/chat_template.h"
#include "cortiq/engine.h"
#include "cortiq/tokenizer.h"
#include "runtime/text_load.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++)
        q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* Ends the JSON object (or adds a text line): time to the first generated token of repetition 1,
 * from the start of the model load and as a CLOCK_MONOTONIC reading (for a parent that took the
 * same clock at fork), and with --text the tokenizer / template build times and the wait for
 * them. */
static void print_first_token(int json, int text, double first_s, double first_clock, double tok_s,
                              double tpl_s, double wait_s) {
    if (json) {
        printf("\"first_token_s\": %.4f, \"first_token_monotonic_s\": %.6f", first_s, first_clock);
        if (text)
            printf(", \"tokenizer_load_s\": %.4f, \"template_load_s\": %.4f, \"text_wait_s\": %.4f",
                   tok_s, tpl_s, wait_s);
        printf("}\n");
    } else {
        printf("  first token %.3f s after the load started", first_s);
        if (text)
            printf(" (tokenizer %.1f ms, chat template %.1f ms on a worker; waited %.1f ms)",
                   tok_s * 1e3, tpl_s * 1e3, wait_s * 1e3);
        printf("\n");
    }
}

static void usage(void) {
    printf(
        "usage: cortiq bench MODEL.cmf [-p 512] [-n 128] [-t THREADS] [-r 5] [--int8-act] "
        "[--f32-act] [--kv f16|q8|f32] [--task NAME] [--no-huge-pages] [--verify] "
        "[--lanes default|all|none] [--text] "
        "[--no-warmup] [--json] [--skill ID]\n"
        "  Prefill of -p tokens and decode of -n tokens (greedy), repeated -r times after one\n"
        "  untimed warm-up round (as llama-bench warms up): tok/s mean ± sd, model load time, the\n"
        "  first token's time (from the warm-up: cold), weights read per decode step, peak RSS.\n"
        "  --no-warmup: time the first round too (its page faults on the KV cache and scratch).\n"
        "  --int8-act: int8 activations.\n"
        "  --f32-act: f32 activations everywhere (default: int8 GEMM for prefill on VNNI CPUs,\n"
        "  bf16 for prefill on bf16 weights on AMD AVX-512 BF16 / AMX, int8 activations for 4-bit\n"
        "  weights at decode).\n"
        "  --kv: KV cache type (default f16); its size is reported as kv_bytes.\n"
        "  --task NAME: run the file's task mask NAME (default: the skill's\n"
        "  input_mask_task, else the file's default_task; none: dense).\n"
        "  --no-huge-pages: keep the weights on the file's 4 KiB pages (default: moved onto\n"
        "          2 MiB pages where the kernel offers them; reported as huge_page_bytes).\n"
        "  --verify: check every tensor's hash64 at load (counted in the load time).\n"
        "  --lanes default|all|none: which integer matrices get the decode copy at load (rows\n"
        "          in int32 lanes; default the 4-bit ones whose copy keeps the file's size, all:\n"
        "          every q8_row and q4tp one too, as a server with several slots; reported as\n"
        "          lanes_bytes).\n"
        "  --text: start as `cortiq run` does: the tokenizer and chat template build on a worker\n"
        "          while the weights are paged in (timed, and how long the first token waited),\n"
        "          and the weights move onto 2 MiB pages only after the first token (all at\n"
        "          once here, before the decode timing, as a chat's idle time between turns\n"
        "          does in `cortiq run`).\n"
        "  --skill ID: run with skill ID's tensors in place of the backbone's (spec 9; none =\n"
        "          backbone, the default).\n"
        "  cortiq bench quant   the quantization report (see cortiq bench quant --help)\n");
}

int bench_model_main(int argc, char **argv) {
    const char *path = NULL, *task = NULL;
    uint64_t p = 512, n = 128, t = 0, r = 5;
    int json = 0;
    int text = 0;
    cortiq_kv_type kv = CORTIQ_KV_F16;
    cortiq_act_mode act = CORTIQ_ACT_DEFAULT;
    int no_huge = 0, verify = 0, warmup = 1, lanes = 0;
    const char *skill = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a))
            return usage(), CLI_EXIT_OK;
        else if (!strcmp(a, "-p") || !strcmp(a, "-n") || !strcmp(a, "-t") ||
                 !strcmp(a, "--threads") || !strcmp(a, "-r")) {
            const char *v = cli_opt_value("bench", argc, argv, &i);
            bool ok = v && (a[1] == 'p'   ? cli_opt_u64("bench", a, v, 1, 65536, &p)
                            : a[1] == 'n' ? cli_opt_u64("bench", a, v, 0, 65536, &n)
                            : a[1] == 'r' ? cli_opt_u64("bench", a, v, 1, 1000, &r)
                                          : cli_opt_u64("bench", a, v, 1, 64, &t));
            if (!ok) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--text"))
            text = 1;
        else if (!strcmp(a, "--int8-act") || !strcmp(a, "--f32-act")) {
            cortiq_act_mode want = a[2] == 'i' ? CORTIQ_ACT_INT8 : CORTIQ_ACT_F32;
            if (act != CORTIQ_ACT_DEFAULT && act != want)
                return cli_usage_error("bench", "--int8-act and --f32-act exclude each other");
            act = want;
        } else if (!strcmp(a, "--no-huge-pages"))
            no_huge = 1;
        else if (!strcmp(a, "--no-warmup"))
            warmup = 0;
        else if (!strcmp(a, "--verify"))
            verify = 1;
        else if (!strcmp(a, "--lanes")) {
            const char *v = cli_opt_value("bench", argc, argv, &i);
            if (!v) return CLI_EXIT_USAGE;
            if (!strcmp(v, "default") || !strcmp(v, "all") || !strcmp(v, "none"))
                lanes = v[0] == 'd' ? 0 : v[0] == 'a' ? 1 : -1;
            else
                return cli_usage_error("bench", "--lanes '%s': want default, all or none", v);
        } else if (!strcmp(a, "--skill")) {
            if (!(skill = cli_opt_value("bench", argc, argv, &i))) return CLI_EXIT_USAGE;
            if (!strcmp(skill, "auto"))
                return cli_usage_error("bench", "--skill auto routes on a prompt; name a skill");
        } else if (!strcmp(a, "--task")) {
            if (!(task = cli_opt_value("bench", argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--kv")) {
            const char *v = cli_opt_value("bench", argc, argv, &i);
            if (!v) return CLI_EXIT_USAGE;
            if (!cortiq_kv_type_from_name(v, &kv))
                return cli_usage_error("bench", "--kv '%s': want f16, q8 or f32", v);
        } else if (a[0] == '-')
            return cli_usage_error("bench", "unknown option '%s'", a);
        else if (!path)
            path = a;
        else
            return cli_usage_error("bench", "one MODEL only");
    }
    if (!path) return cli_usage_error("bench", "missing MODEL.cmf (or `quant`)");
    cmf_err err;
    cortiq_model *m;
    cortiq_load_opts lo = {.threads = (unsigned)t,
                           .kv = kv,
                           .act = act,
                           .no_huge_pages = no_huge,
                           .verify_tensors = verify,
                           .skill = skill,
                           .batch_lanes = lanes};
    double t0 = now_s();
    cmf_status st = cortiq_model_load(path, &lo, &m, &err);
    double load_s = now_s() - t0;
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    const double t_begin = t0;
    /* as cortiq_runtime_open (`cortiq run`) does: with --text the tokenizer and template build
     * on a worker while the weights are paged in and the session allocated, and the move onto
     * 2 MiB pages waits for the first token */
    cq_text_load tl;
    if (text) cq_text_load_start(&tl, m, path);
    uint64_t huge = 0; /* bytes moved onto 2 MiB pages */
    if (text)
        cortiq_model_page_in(m);
    else
        huge = cortiq_model_prefetch(m);
    cortiq_session *s = NULL;
    st = cortiq_session_create(m, (uint32_t)(p + n + 1), &s, &err);
    double wait0 = now_s(), first_clock = 0;
    cmf_err text_err;
    cmf_status text_st = text ? cq_text_load_finish(&tl, &text_err) : CMF_OK;
    double text_wait_s = now_s() - wait0;
    if (!st && text_st) st = text_st, err = text_err;
    cmf_tokenizer *text_tok = text ? tl.tok : NULL;
    cmf_chat_template *tpl = text ? tl.tpl : NULL;
    double tok_s = text ? tl.tok_s : 0, tpl_s = text ? tl.tpl_s : 0;
    int rc = st ? (cli_error(&err), cli_exit_code(st)) : cli_select_task("bench", m, s, task);
    if (rc) {
        cmf_tokenizer_free(text_tok);
        cmf_chat_template_free(tpl);
        cortiq_session_free(s);
        cortiq_model_free(m);
        return rc;
    }
    uint32_t V = cortiq_model_vocab(m);
    int32_t *prompt = malloc(p * sizeof *prompt);
    uint64_t x = 12345;
    for (uint64_t i = 0; i < p; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        prompt[i] = (int32_t)((x >> 33) % V);
    }
    double *pre = calloc(r, sizeof *pre), *dec = calloc(r, sizeof *dec);
    /* round 0 is the warm-up unless --no-warmup: its first token is the cold one */
    for (uint64_t k = 0; k < r + (uint64_t)warmup && !st; k++) {
        const bool timed = k >= (uint64_t)warmup;
        const uint64_t i = k - (uint64_t)warmup;
        cortiq_session_reset(s);
        t0 = now_s();
        st = cortiq_session_eval(s, prompt, p, NULL, &err);
        if (timed) pre[i] = p / (now_s() - t0);
        if (k == 0 && !st) {
            (void)cortiq_argmax(cortiq_session_logits(s), V);
            first_clock = now_s();
            if (text) huge = cortiq_model_move_step(m, UINT64_MAX);
        }
        t0 = now_s();
        for (uint64_t j = 0; j < n && !st; j++) {
            int32_t tok = cortiq_argmax(cortiq_session_logits(s), V);
            st = cortiq_session_eval(s, &tok, 1, NULL, &err);
        }
        if (timed) dec[i] = n ? n / (now_s() - t0) : 0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = ru.ru_maxrss / 1024.0;
    if (st)
        cli_error(&err);
    else {
        double pm, psd, dm, dsd;
        mean_sd(pre, (int)r, &pm, &psd);
        mean_sd(dec, (int)r, &dm, &dsd);
        uint64_t wb = cortiq_model_weight_bytes(m), macs = cortiq_model_token_macs(m);
        if (json)
            printf(
                "{\"model\": \"%s\", \"threads\": %u, \"prompt_tokens\": %llu, \"gen_tokens\": "
                "%llu, \"reps\": %llu, \"warmup\": %s, "
                "\"load_s\": %.4f, \"prefill_tok_s\": %.2f, \"prefill_tok_s_sd\": %.2f, "
                "\"decode_tok_s\": %.2f, "
                "\"decode_tok_s_sd\": %.2f, \"weight_bytes_per_token\": %llu, \"token_macs\": "
                "%llu, \"peak_rss_mb\": "
                "%.1f, \"kv\": \"%s\", \"kv_bytes\": %llu, \"huge_page_bytes\": %llu, \"lanes_bytes\": "
                "%llu, \"task\": ",
                path, cortiq_model_threads(m), (unsigned long long)p, (unsigned long long)n,
                (unsigned long long)r, warmup ? "true" : "false", load_s, pm, psd, dm, dsd,
                (unsigned long long)wb, (unsigned long long)macs, rss_mb, cortiq_kv_type_name(kv),
                (unsigned long long)cortiq_session_kv_bytes(s), (unsigned long long)huge,
                (unsigned long long)cortiq_model_lanes_bytes(m));
        if (json) {
            if (cortiq_session_task(s))
                cli_json_string(cortiq_session_task(s));
            else
                printf("null");
            printf(", ");
        } else
            printf("%s: %u threads, load %.3f s%s\n  prefill %llu tokens: %.1f ± %.1f tok/s (%.1f "
                   "GFLOP/s in the layers' products)\n  "
                   "decode %llu tokens: %.2f ± "
                   "%.2f tok/s (%.2f GB/s of weights)\n  peak RSS %.1f MB, KV cache %s %.1f MB, "
                   "%.1f MB of weights on 2 MiB pages, %.1f MB as the decode copy\n",
                   path, cortiq_model_threads(m), load_s, warmup ? ", one warm-up round" : "",
                   (unsigned long long)p, pm, psd, 2e-9 * (double)macs * pm, (unsigned long long)n,
                   dm, dsd, dm * wb / 1e9, rss_mb, cortiq_kv_type_name(kv),
                   cortiq_session_kv_bytes(s) / 1048576.0, huge / 1048576.0,
                   cortiq_model_lanes_bytes(m) / 1048576.0);
        print_first_token(json, text, first_clock - t_begin, first_clock, tok_s, tpl_s,
                          text_wait_s);
    }
    free(pre);
    free(dec);
    free(prompt);
    cmf_tokenizer_free(text_tok);
    cmf_chat_template_free(tpl);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return cli_exit_code(st);
}
