/* cmd_run.c - `cortiq run MODEL.cmf [--prompt TEXT]`: one answer, or an interactive chat. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cortiq/runtime.h"

static void usage(void) {
    printf(
        "usage: cortiq run MODEL.cmf [--prompt TEXT] [options]\n"
        "  With --prompt: answer once and exit. Without: interactive chat (history kept; "
        "/reset, /exit).\n"
        "  The file's chat template renders the conversation (ChatML when the file has none).\n"
        "  --system TEXT        system message\n"
        "  --raw                no template: the prompt text is tokenized as is (BOS added per "
        "tokenizer)\n"
        "  --max-tokens N       stop after N generated tokens (default 512)\n"
        "  --greedy             always the most likely token (same as --temp 0)\n"
        "  --temp T  --top-k K  --top-p P  --min-p P  --repeat-penalty R  --seed S\n"
        "  --ctx N              context length (default min(4096, model max))\n"
        "  --kv f16|q8|f32      KV cache type (default f16; q8: int8 + a scale per head)\n"
        "  --f32-act            f32 activations everywhere (default: int8 GEMM for the prompt on\n"
        "                       VNNI CPUs, int8 activations for 4-bit weights)\n"
        "  --no-huge-pages      keep the weights on the file's 4 KiB pages (default: moved onto\n"
        "                       2 MiB pages where the kernel offers transparent huge pages,\n"
        "                       a few at a time after each generated token)\n"
        "  -t, --threads N      compute threads (default: all cores)\n"
        "  --verify             check every tensor's hash64 before computing (reads the whole\n"
        "                       file once); without it, open checks the metadata's hashes only\n"
        "  Generation stops on any of the file's eos_token_ids. A stats line ends each answer "
        "on stderr.\n");
}

static char g_last_char = '\n'; /* the last byte of the answer printed so far */

static int print_piece(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    if (len) g_last_char = text[len - 1];
    fflush(stdout);
    return 0;
}

/* End an answer on its own line, so piped answers do not run together. */
static void end_answer(void) {
    if (g_last_char != '\n') putchar('\n');
    g_last_char = '\n';
    fflush(stdout);
}

static void print_stats(const cortiq_generate_stats *s) {
    end_answer();
    size_t pre = s->prompt_tokens - s->cached_tokens;
    fprintf(stderr,
            "[prompt %zu tokens (%zu cached), prefill %.1f tok/s | generated %zu tokens, decode "
            "%.1f tok/s | finish %s]\n",
            s->prompt_tokens, s->cached_tokens,
            s->prefill_seconds > 0 ? pre / s->prefill_seconds : 0.0, s->generated_tokens,
            s->decode_seconds > 0 ? s->generated_tokens / s->decode_seconds : 0.0,
            cortiq_finish_name(s->finish));
}

static cmf_status run_raw(cortiq_runtime *rt, const char *prompt, const cortiq_generate_params *gp,
                          cmf_err *err) {
    int32_t *ids = NULL;
    size_t n = 0;
    cmf_status st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), prompt, strlen(prompt), true,
                                         &ids, &n, err);
    cortiq_generate_stats s;
    if (!st) st = cortiq_generate(rt, ids, n, gp, print_piece, NULL, NULL, &s, err);
    if (!st) print_stats(&s);
    free(ids);
    return st;
}

static cmf_status chat_loop(cortiq_runtime *rt, const char *system,
                            const cortiq_generate_params *gp, cmf_err *err) {
    json_t *msgs = json_array();
    if (system)
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system));
    int tty = isatty(0);
    char line[65536];
    cmf_status st = CMF_OK;
    static const char help[] =
        "chat: type a message; /reset starts over (the system message stays), /help shows this, "
        "/exit or Ctrl-D quits\n";
    if (tty) fputs(help, stderr);
    for (;;) {
        if (tty) fprintf(stderr, "> ");
        if (!fgets(line, sizeof line, stdin)) {
            if (tty) fputc('\n', stderr); /* leave the shell prompt on a line of its own */
            break;
        }
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (!len) continue;
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/help")) {
            fputs(help, stderr);
            continue;
        }
        if (!strcmp(line, "/reset")) {
            json_array_clear(msgs);
            if (system)
                json_array_append_new(msgs,
                                      json_pack("{s:s,s:s}", "role", "system", "content", system));
            fprintf(stderr, "chat: conversation cleared%s\n",
                    system ? " (the system message stays)" : "");
            continue;
        }
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", line));
        char *mj = json_dumps(msgs, JSON_COMPACT), *prompt = NULL, *reply = NULL;
        st = cortiq_render_chat(rt, mj, true, &prompt, err);
        free(mj);
        int32_t *ids = NULL;
        size_t n = 0;
        if (!st)
            st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), prompt, strlen(prompt), false,
                                      &ids, &n, err);
        cortiq_generate_stats s;
        if (!st) st = cortiq_generate(rt, ids, n, gp, print_piece, NULL, &reply, &s, err);
        free(prompt);
        free(ids);
        if (st) break;
        print_stats(&s);
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "assistant", "content", reply));
        free(reply);
    }
    json_decref(msgs);
    return st;
}

int cmd_run(int argc, char **argv) {
    const char *path = NULL, *prompt = NULL, *system = NULL;
    int raw = 0;
    cortiq_generate_params gp;
    cortiq_generate_defaults(&gp);
    cortiq_runtime_opts ro = {0};
    uint64_t ctx_wanted = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        double d;
        uint64_t u;
#define VALUE()                                                                                    \
    if (!(v = cli_opt_value("run", argc, argv, &i))) return CLI_EXIT_USAGE
#define U64(lo, hi)                                                                                \
    VALUE();                                                                                       \
    if (!cli_opt_u64("run", a, v, lo, hi, &u)) return CLI_EXIT_USAGE
#define DBL(lo, lo_open, hi, hi_open)                                                              \
    VALUE();                                                                                       \
    if (!cli_opt_double("run", a, v, lo, lo_open, hi, hi_open, &d)) return CLI_EXIT_USAGE
        if (cli_is_help(a))
            return usage(), CLI_EXIT_OK;
        else if (!strcmp(a, "--prompt")) {
            VALUE();
            prompt = v;
        } else if (!strcmp(a, "--system")) {
            VALUE();
            system = v;
        } else if (!strcmp(a, "--raw"))
            raw = 1;
        else if (!strcmp(a, "--greedy"))
            gp.sampler.temperature = 0;
        else if (!strcmp(a, "--max-tokens")) {
            U64(1, UINT32_MAX);
            gp.max_tokens = (uint32_t)u;
        } else if (!strcmp(a, "--temp")) {
            DBL(0, false, 1e308, false);
            gp.sampler.temperature = (float)d;
        } else if (!strcmp(a, "--top-k")) {
            U64(0, (1u << 30));
            gp.sampler.top_k = (int)u;
        } else if (!strcmp(a, "--top-p")) {
            DBL(0, true, 1, false);
            gp.sampler.top_p = (float)d;
        } else if (!strcmp(a, "--min-p")) {
            DBL(0, false, 1, true);
            gp.sampler.min_p = (float)d;
        } else if (!strcmp(a, "--repeat-penalty")) {
            DBL(0, true, 1e308, false);
            gp.sampler.repeat_penalty = (float)d;
        } else if (!strcmp(a, "--seed")) {
            U64(0, UINT64_MAX);
            gp.sampler.seed = u;
        } else if (!strcmp(a, "--ctx")) {
            U64(16, (1u << 24));
            ro.ctx = (uint32_t)u;
            ctx_wanted = u;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            U64(1, 64);
            ro.threads = (unsigned)u;
        } else if (!strcmp(a, "--f32-act"))
            ro.f32_act = 1;
        else if (!strcmp(a, "--no-huge-pages"))
            ro.no_huge_pages = 1;
        else if (!strcmp(a, "--verify"))
            ro.verify_tensors = 1;
        else if (!strcmp(a, "--kv")) {
            VALUE();
            if (!cortiq_kv_type_from_name(v, &ro.kv))
                return cli_usage_error("run", "--kv '%s': want f16, q8 or f32", v);
        } else if (a[0] == '-')
            return cli_usage_error("run", "unknown option '%s'", a);
        else if (!path)
            path = a;
        else
            return cli_usage_error("run", "one MODEL only ('%s' is a second)", a);
#undef DBL
#undef U64
#undef VALUE
    }
    if (!path) return cli_usage_error("run", "missing MODEL.cmf");
    cmf_err err;
    cortiq_runtime *rt;
    cmf_status st = cortiq_runtime_open(path, &ro, &rt, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    if (!raw && !cortiq_runtime_has_template(rt))
        fprintf(stderr,
                "cortiq run: %s has no chat template; using ChatML (a base model may answer "
                "better with --raw, which sends the prompt as plain text)\n",
                path);
    uint32_t ctx = cortiq_session_ctx(cortiq_runtime_session(rt));
    if (ctx_wanted && ctx_wanted != ctx)
        fprintf(stderr, "cortiq run: --ctx %llu is more than the model's %u positions; using %u\n",
                (unsigned long long)ctx_wanted, ctx, ctx);
    if (prompt && raw)
        st = run_raw(rt, prompt, &gp, &err);
    else if (prompt) {
        cortiq_generate_stats s;
        st = cortiq_chat_once(rt, system, prompt, &gp, print_piece, NULL, NULL, &s, &err);
        if (!st) print_stats(&s);
    } else
        st = chat_loop(rt, system, &gp, &err);
    if (st) cli_error(&err);
    cortiq_runtime_free(rt);
    return cli_exit_code(st);
}
