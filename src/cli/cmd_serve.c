/* cmd_serve.c - `cortiq serve MODEL.cmf`: the OpenAI-compatible HTTP server (src/server/,
 * docs/SERVER.md). */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/runtime.h"
#include "server/server.h"

static void usage(void) {
    fputs("usage: cortiq serve MODEL.cmf [options]\n"
          "  An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions,\n"
          "  /v1/embeddings; GET /v1/models, /health, /metrics (docs/SERVER.md). SIGINT or\n"
          "  SIGTERM finish the requests in flight and stop.\n"
          "  --host ADDR          address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)\n"
          "  --port N             TCP port (default 8080; 0: any free port, printed at start)\n"
          "  --parallel N         requests served at once, each in its own KV cache (default 1)\n"
          "  --no-batch-lanes     with --parallel > 1, copy into the decode lanes only the 4-bit\n"
          "                       matrices `cortiq run` copies (by default every q8_row and q4tp\n"
          "                       one is copied too, at load, into the layout that serves several\n"
          "                       slots' tokens per pass at less arithmetic; on AVX-512 it sums\n"
          "                       q8_row's rows in another order than `cortiq run`, so a greedy\n"
          "                       answer can part from run's at a near-tie)\n"
          "  --max-queue N        requests waiting for a slot before 429 (default 64)\n"
          "  --timeout S          wall-clock limit of one generation in seconds (default 600)\n"
          "  --api-key K          require \"Authorization: Bearer K\" (not on /health)\n"
          "  --cors ORIGIN        allow browser requests from ORIGIN (default: no CORS headers)\n"
          "  --name NAME          the model id /v1/models lists (default: the file's base name)\n"
          "  --ctx N              context length of each slot (default min(4096, model max))\n"
          "  --kv f16|q8|f32      KV cache type of every slot (default f16; q8 halves the\n"
          "                       cache's memory and what each decode step reads of it)\n"
          "  -t, --threads N      compute threads (default: all cores)\n"
          "  --skill ID|auto|none the skill a request without \"skill\" runs (spec 9; default\n"
          "                       none: the backbone; auto: routed on each prompt)\n"
          "  --max-skill-models N skill instances held at once besides the backbone, each\n"
          "                       loaded on first use (default 4)\n",
          stdout);
}

/* The file name without its folders and .cmf. */
static char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 4 && !strcmp(b + n - 4, ".cmf")) n -= 4;
    return strndup(b, n);
}

int cmd_serve(int argc, char **argv) {
    srv_config cfg;
    srv_config_defaults(&cfg);
    cortiq_runtime_opts ro = {0};
    const char *path = NULL, *name = NULL;
    bool lanes = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        uint64_t u;
        double d;
#define VALUE()                                                                                    \
    if (!(v = cli_opt_value("serve", argc, argv, &i))) return CLI_EXIT_USAGE
#define U64(lo, hi)                                                                                \
    VALUE();                                                                                       \
    if (!cli_opt_u64("serve", a, v, lo, hi, &u)) return CLI_EXIT_USAGE
        if (cli_is_help(a))
            return usage(), CLI_EXIT_OK;
        else if (!strcmp(a, "--host")) {
            VALUE();
            cfg.host = v;
        } else if (!strcmp(a, "--port")) {
            U64(0, 65535);
            cfg.port = (unsigned)u;
        } else if (!strcmp(a, "--parallel")) {
            U64(1, 256);
            cfg.parallel = (unsigned)u;
        } else if (!strcmp(a, "--no-batch-lanes")) {
            lanes = false;
        } else if (!strcmp(a, "--max-queue")) {
            U64(0, 100000);
            cfg.max_queue = (unsigned)u;
        } else if (!strcmp(a, "--timeout")) {
            VALUE();
            if (!cli_opt_double("serve", a, v, 0, true, 86400, false, &d)) return CLI_EXIT_USAGE;
            cfg.max_seconds = d;
        } else if (!strcmp(a, "--api-key")) {
            VALUE();
            if (!*v) return cli_usage_error("serve", "--api-key '': a key cannot be empty");
            cfg.api_key = v;
        } else if (!strcmp(a, "--cors")) {
            VALUE();
            cfg.cors = v;
        } else if (!strcmp(a, "--name")) {
            VALUE();
            name = v;
        } else if (!strcmp(a, "--ctx")) {
            U64(16, 1u << 24);
            ro.ctx = (uint32_t)u;
        } else if (!strcmp(a, "--kv")) {
            VALUE();
            if (!cortiq_kv_type_from_name(v, &ro.kv))
                return cli_usage_error("serve", "--kv '%s': want f16, q8 or f32", v);
        } else if (!strcmp(a, "--skill")) {
            VALUE();
            cfg.default_skill = v;
        } else if (!strcmp(a, "--max-skill-models")) {
            U64(1, 256);
            cfg.max_skill_models = (unsigned)u;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            U64(1, 4096);
            ro.threads = (unsigned)u;
        } else if (a[0] == '-')
            return cli_usage_error("serve", "unknown option '%s'", a);
        else if (!path)
            path = a;
        else
            return cli_usage_error("serve", "one MODEL only ('%s' is a second)", a);
#undef U64
#undef VALUE
    }
    if (!path) return cli_usage_error("serve", "missing MODEL.cmf");
    /* SIGINT / SIGTERM are taken by srv_main's sigwait: blocked before any thread starts (the
     * model's pool, the server's), so every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* q8_row's (and AVX2 q4tp's) copies pay only with several slots; 0 keeps run's */
    ro.batch_lanes = lanes && cfg.parallel > 1;
    cmf_err err;
    cortiq_runtime *rt;
    cmf_status st = cortiq_runtime_open(path, &ro, &rt, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    uint64_t lb = cortiq_model_lanes_bytes(cortiq_runtime_model(rt));
    if (lb)
        fprintf(stderr, "cortiq serve: integer matrices copied into decode lanes (%.1f MiB)\n",
                (double)lb / (1 << 20));
    char *base = base_name(path);
    cfg.model_id = name ? name : base;
    cfg.path = path;
    cfg.ro = ro; /* the runtime holds the backbone; skill instances load with the same options */
    int rc = srv_main(rt, &cfg) ? CLI_EXIT_SYSTEM : CLI_EXIT_OK;
    free(base);
    cortiq_runtime_free(rt);
    return rc;
}
