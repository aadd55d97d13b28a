/* cmd_run.c - `cortiq run MODEL.cmf [--prompt TEXT]`: one answer, or an interactive chat. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd_skill.h"
#include "cli/cli_hub.h"
#include "cli/cli_moe.h"
#include "cli/run_chat.h"
#include "cli/run_output.h"
#include "common/fileio.h"
#include "cortiq/runtime.h"

static void usage(void) {
    printf(
        "usage: cortiq run MODEL.cmf [--prompt TEXT] [options]\n"
        "  MODEL may be OWNER/NAME[@REVISION][:FILE.gguf]: pulled (`cortiq pull`) and converted\n"
        "  once into ~/.cache/cortiq/converted (--quant Q, default q8), then run.\n"
        "  With --prompt: answer once and exit. Without: interactive chat (history kept; /help\n"
        "  lists its commands: /reset, /save F, /load F, /exit; multi-line input; Ctrl-C stops\n"
        "  a reply; the oldest turns are dropped when the context fills).\n"
        "  The file's chat template renders the conversation (ChatML when the file has none).\n"
        "  --prompt-file F      the prompt is the whole of file F\n"
        "  --stop STR           end the answer where STR appears (not printed); up to 16\n"
        "  --system TEXT        system message\n"
        "  --task NAME          run the file's task mask NAME (default: the skill's\n"
        "                       input_mask_task, else the file's default_task; none: dense); the\n"
        "                       inactive neurons, heads and layers are not computed\n"
        "  --raw                no template: the prompt text is tokenized as is (BOS added per "
        "tokenizer)\n"
        "  --max-tokens N       stop after N generated tokens (default 512)\n"
        "  --greedy             always the most likely token (same as --temp 0)\n"
        "  --temp T  --top-k K  --top-p P  --min-p P  --repeat-penalty R  --seed S\n"
        "  --ctx N              context length (default min(4096, model max))\n"
        "  --kv f16|q8|f32      KV cache type (default f16; q8: int8 + a scale per head)\n"
        "  --f32-act            f32 activations everywhere (default: int8 GEMM for the prompt on\n"
        "                       VNNI CPUs, bf16 for the prompt on bf16 weights with AVX-512\n"
        "                       BF16, int8 activations for 4-bit weights)\n"
        "  --no-huge-pages      keep the weights on the file's 4 KiB pages (default: in a chat,\n"
        "                       moved onto 2 MiB pages between turns where the kernel offers\n"
        "                       transparent huge pages; never during an answer)\n"
        "  --mtp / --no-mtp     speculative decoding with the file's MTP head (spec 2.1; default\n"
        "                       on where the file has one): greedy only, the reply is exactly\n"
        "                       --no-mtp's; the stats line gives the drafts' acceptance rate\n"
        "  -t, --threads N      compute threads (default: all cores)\n"
        "  --verify             check every tensor's hash64 before computing (reads the whole\n"
        "                       file once); without it, open checks the metadata's hashes only\n"
        "  --skill ID|auto|none skill overlay (spec 9): registry id, auto = routed on the prompt\n"
        "                       (least reconstruction error), none = backbone (default)\n"
        "  --skill-blend T      soft blend of the routable skills, weights softmax(-E/T)\n" CLI_MOE_HELP
        "  Generation stops on any of the file's eos_token_ids. A stats line ends each answer "
        "on stderr.\n");
}

static cmf_status run_raw(cortiq_runtime *rt, const char *prompt, const cortiq_generate_params *gp,
                          run_out *out, cmf_err *err) {
    int32_t *ids = NULL;
    size_t n = 0;
    cmf_status st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), prompt, strlen(prompt), true,
                                         &ids, &n, err);
    cortiq_generate_stats s;
    run_out_begin(out);
    if (!st) st = cortiq_generate(rt, ids, n, gp, run_out_piece, out, NULL, &s, err);
    if (!st) {
        run_out_end(out, NULL);
        run_print_stats(out, &s);
    }
    free(ids);
    return st;
}

/* The whole of a --prompt-file, NUL-terminated; NULL (and a message) if it cannot be read. */
static char *read_prompt_file(const char *path) {
    size_t len;
    char *text = cq_read_file(path, &len);
    if (!text) fprintf(stderr, "%s: IO: cannot read: %s\n", path, strerror(errno));
    return text;
}

int cmd_run(int argc, char **argv) {
    const char *path = NULL, *prompt = NULL, *system = NULL, *task = NULL;
    int raw = 0, mtp = -1; /* mtp: -1 default (on where the file has a head), 0 off, 1 asked */
    cortiq_generate_params gp;
    cortiq_generate_defaults(&gp);
    cortiq_runtime_opts ro = {0};
    uint64_t ctx_wanted = 0;
    const char *prompt_file = NULL, *stops[16], *quant = NULL;
    size_t n_stops = 0;
    const char *skill = NULL;
    double blend_t = 0;
    cli_moe_opts moe = {0};
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
        int moe_opt = cli_moe_opt("run", &moe, argc, argv, &i);
        if (moe_opt) {
            if (moe_opt < 0) return CLI_EXIT_USAGE;
        } else if (cli_is_help(a))
            return usage(), CLI_EXIT_OK;
        else if (!strcmp(a, "--prompt")) {
            VALUE();
            prompt = v;
        } else if (!strcmp(a, "--prompt-file")) {
            VALUE();
            prompt_file = v;
        } else if (!strcmp(a, "--stop")) {
            VALUE();
            if (!*v) return cli_usage_error("run", "--stop '': a stop string cannot be empty");
            if (n_stops == sizeof stops / sizeof stops[0])
                return cli_usage_error("run", "at most %zu --stop strings",
                                       sizeof stops / sizeof stops[0]);
            stops[n_stops++] = v;
        } else if (!strcmp(a, "--task")) {
            VALUE();
            task = v;
        } else if (!strcmp(a, "--system")) {
            VALUE();
            system = v;
        } else if (!strcmp(a, "--quant")) {
            VALUE();
            quant = v;
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
            ro.act = CORTIQ_ACT_F32;
        else if (!strcmp(a, "--mtp"))
            mtp = 1;
        else if (!strcmp(a, "--no-mtp"))
            mtp = 0;
        else if (!strcmp(a, "--no-huge-pages"))
            ro.no_huge_pages = 1;
        else if (!strcmp(a, "--verify"))
            ro.verify_tensors = 1;
        else if (!strcmp(a, "--skill")) {
            VALUE();
            skill = v;
        } else if (!strcmp(a, "--skill-blend")) {
            DBL(0, true, 1e30, false);
            blend_t = d;
        } else if (!strcmp(a, "--kv")) {
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
    if (prompt && prompt_file) return cli_usage_error("run", "--prompt or --prompt-file, not both");
    char *file_text = prompt_file ? read_prompt_file(prompt_file) : NULL;
    if (prompt_file && !file_text) return CLI_EXIT_SYSTEM;
    if (file_text) prompt = file_text;
    char *model_path;
    int hub_rc = cli_hub_model_for_run(path, quant, &model_path);
    if (hub_rc >= 0) {
        free(file_text);
        return hub_rc;
    }
    path = model_path;
    cli_skill_choice sk;
    int sk_rc = cli_skill_choose("run", path, skill, blend_t, prompt, NULL, 0, ro.threads, &sk);
    if (sk_rc) {
        free(file_text);
        free(model_path);
        return sk_rc;
    }
    ro.skill = sk.skill;
    ro.blend = sk.blend;
    ro.n_blend = sk.n_blend;
    cmf_err err;
    cortiq_runtime *rt;
    cmf_status st = cortiq_runtime_open(path, &ro, &rt, &err);
    cli_skill_choice_free(&sk); /* the model keeps what it needs from the file's registry */
    if (st) {
        cli_error(&err);
        free(file_text);
        free(model_path);
        return cli_exit_code(st);
    }
    if (!raw && !cortiq_runtime_has_template(rt))
        fprintf(stderr,
                "cortiq run: %s has no chat template; using ChatML (a base model may answer "
                "better with --raw, which sends the prompt as plain text)\n",
                path);
    int task_rc =
        cli_select_task("run", cortiq_runtime_model(rt), cortiq_runtime_session(rt), task);
    if (task_rc) {
        cortiq_runtime_free(rt);
        free(file_text);
        free(model_path);
        return task_rc;
    }
    int moe_rc = cli_moe_begin("run", &moe, cortiq_runtime_model(rt), cortiq_runtime_session(rt));
    if (moe_rc) {
        cortiq_runtime_free(rt);
        free(file_text);
        free(model_path);
        return moe_rc;
    }
    uint32_t ctx = cortiq_session_ctx(cortiq_runtime_session(rt));
    if (ctx_wanted && ctx_wanted != ctx)
        fprintf(stderr, "cortiq run: --ctx %llu is more than the model's %u positions; using %u\n",
                (unsigned long long)ctx_wanted, ctx, ctx);
    if (mtp == 0 && (st = cortiq_runtime_set_mtp(rt, false, &err))) cli_error(&err);
    uint64_t d0, a0;
    bool drafting = cortiq_runtime_mtp_counts(rt, &d0, &a0);
    if (mtp == 1 && !drafting)
        fprintf(stderr, "cortiq run: --mtp: %s has no MTP head (arch.mtp, spec 2.1)\n", path);
    if (drafting && gp.sampler.temperature > 0)
        fprintf(stderr,
                "cortiq run: the MTP head drafts for greedy decoding only (--greedy / --temp 0); "
                "sampling at temperature %g runs without it\n",
                (double)gp.sampler.temperature);
    run_out out = {.stops = stops,
                   .n_stops = n_stops,
                   .rt = drafting && gp.sampler.temperature <= 0 ? rt : NULL};
    if (prompt && raw)
        st = run_raw(rt, prompt, &gp, &out, &err);
    else if (prompt) {
        cortiq_generate_stats s;
        run_out_begin(&out);
        st = cortiq_chat_once(rt, system, prompt, &gp, run_out_piece, &out, NULL, &s, &err);
        if (!st) {
            run_out_end(&out, NULL);
            run_print_stats(&out, &s);
        }
    } else
        st = run_chat(rt, system, &gp, &out, &err);
    if (st) cli_error(&err);
    int stats_rc =
        st ? 0 : cli_moe_end("run", &moe, cortiq_runtime_model(rt), cortiq_runtime_session(rt));
    run_out_free(&out);
    free(file_text);
    cortiq_runtime_free(rt);
    free(model_path);
    return st ? cli_exit_code(st) : stats_rc;
}
