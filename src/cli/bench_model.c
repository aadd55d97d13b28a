/* bench_model.c - `cortiq bench MODEL.cmf [-p 512 -n 128 -t N -r 5] [--json]`: prefill and
 * decode throughput (mean ± sd over repetitions), load time and peak RSS. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/cli.h"
#include "cortiq/engine.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

static void usage(void) {
    printf("usage: cortiq bench MODEL.cmf [-p 512] [-n 128] [-t THREADS] [-r 5] [--int8-act] [--json]\n"
           "  Prefill of -p tokens and decode of -n tokens (greedy), repeated -r times: tok/s mean ± sd,\n"
           "  model load time, weights read per decode step, peak RSS. --int8-act: int8 activations.\n"
           "  cortiq bench quant   the quantization report (see cortiq bench quant --help)\n");
}

int bench_model_main(int argc, char **argv) {
    const char *path = NULL;
    uint64_t p = 512, n = 128, t = 0, r = 5;
    int json = 0, int8 = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) return usage(), CLI_EXIT_OK;
        else if (!strcmp(a, "-p") && more && cli_parse_u64(argv[++i], &p) && p >= 1 && p <= 65536);
        else if (!strcmp(a, "-n") && more && cli_parse_u64(argv[++i], &n) && n <= 65536);
        else if (!strcmp(a, "-t") && more && cli_parse_u64(argv[++i], &t) && t <= 64);
        else if (!strcmp(a, "-r") && more && cli_parse_u64(argv[++i], &r) && r >= 1 && r <= 1000);
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--int8-act")) int8 = 1;
        else if (a[0] == '-') return cli_usage_error("bench", "bad or incomplete option '%s'", a);
        else if (!path) path = a;
        else return cli_usage_error("bench", "one MODEL only");
    }
    if (!path) return cli_usage_error("bench", "missing MODEL.cmf (or `quant`)");
    cmf_err err;
    cortiq_model *m;
    cortiq_load_opts lo = {.threads = (unsigned)t, .int8_act = int8};
    double t0 = now_s();
    cmf_status st = cortiq_model_load(path, &lo, &m, &err);
    double load_s = now_s() - t0;
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    cortiq_session *s;
    if ((st = cortiq_session_create(m, (uint32_t)(p + n + 1), &s, &err))) {
        cli_error(&err);
        cortiq_model_free(m);
        return cli_exit_code(st);
    }
    uint32_t V = cortiq_model_vocab(m);
    int32_t *prompt = malloc(p * sizeof *prompt);
    uint64_t x = 12345;
    for (uint64_t i = 0; i < p; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        prompt[i] = (int32_t)((x >> 33) % V);
    }
    double *pre = calloc(r, sizeof *pre), *dec = calloc(r, sizeof *dec);
    for (uint64_t k = 0; k < r && !st; k++) {
        cortiq_session_reset(s);
        t0 = now_s();
        st = cortiq_session_eval(s, prompt, p, NULL, &err);
        pre[k] = p / (now_s() - t0);
        t0 = now_s();
        for (uint64_t j = 0; j < n && !st; j++) {
            int32_t tok = cortiq_argmax(cortiq_session_logits(s), V);
            st = cortiq_session_eval(s, &tok, 1, NULL, &err);
        }
        dec[k] = n ? n / (now_s() - t0) : 0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = ru.ru_maxrss / 1024.0;
    if (st) cli_error(&err);
    else {
        double pm, psd, dm, dsd;
        mean_sd(pre, (int)r, &pm, &psd);
        mean_sd(dec, (int)r, &dm, &dsd);
        uint64_t wb = cortiq_model_weight_bytes(m);
        if (json)
            printf("{\"model\": \"%s\", \"threads\": %u, \"prompt_tokens\": %llu, \"gen_tokens\": %llu, \"reps\": %llu, "
                   "\"load_s\": %.4f, \"prefill_tok_s\": %.2f, \"prefill_tok_s_sd\": %.2f, \"decode_tok_s\": %.2f, "
                   "\"decode_tok_s_sd\": %.2f, \"weight_bytes_per_token\": %llu, \"peak_rss_mb\": %.1f}\n",
                   path, cortiq_model_threads(m), (unsigned long long)p, (unsigned long long)n, (unsigned long long)r,
                   load_s, pm, psd, dm, dsd, (unsigned long long)wb, rss_mb);
        else
            printf("%s: %u threads, load %.3f s\n  prefill %llu tokens: %.1f ± %.1f tok/s\n  decode %llu tokens: %.2f ± "
                   "%.2f tok/s (%.2f GB/s of weights)\n  peak RSS %.1f MB\n",
                   path, cortiq_model_threads(m), load_s, (unsigned long long)p, pm, psd, (unsigned long long)n, dm, dsd,
                   dm * wb / 1e9, rss_mb);
    }
    free(pre);
    free(dec);
    free(prompt);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return cli_exit_code(st);
}
