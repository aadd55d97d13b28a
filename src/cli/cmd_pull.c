/* cmd_pull.c - `cortiq pull OWNER/NAME[:FILE] [--revision R]`: download a Hugging Face repo's
 * model files into the huggingface_hub cache (docs/HUB.md). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_hub.h"

static void usage(void) {
    printf(
        "usage: cortiq pull OWNER/NAME[@REVISION][:FILE] [options]\n"
        "  Download what a conversion needs from the Hugging Face Hub into the huggingface_hub\n"
        "  cache (shared with Python tools): config.json, tokenizer and chat-template files and\n"
        "  the *.safetensors weights (+ index); or, for a GGUF repo, one .gguf: FILE when named,\n"
        "  else the first of Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q5_1 Q5_0 Q4_1 Q4_0 F16 BF16.\n"
        "  Files already in the cache are not downloaded again; a cut download resumes. Each file\n"
        "  is checked against the hub's sha256 (git blob id for small files). Prints the\n"
        "  snapshot directory (or the .gguf) on stdout.\n"
        "  --revision R     branch, tag or commit (default: main; same as @R)\n"
        "  --gguf           fetch a .gguf even where the repo also has safetensors\n"
        "  --parallel N     files downloaded at once (default 4)\n"
        "  -q, --quiet      no progress display\n"
        "  Environment: HF_TOKEN (gated/private repos), HF_ENDPOINT (mirror), HF_HOME,\n"
        "  HF_HUB_CACHE (cache location), HF_HUB_OFFLINE=1 (the cache only; also the fallback\n"
        "  when the endpoint cannot be reached).\n");
}

int cmd_pull(int argc, char **argv) {
    const char *spec = NULL, *revision = NULL;
    bool quiet = false;
    cortiq_hub_opts o;
    cortiq_hub_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t u;
        if (cli_is_help(a)) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--revision")) {
            if (!(revision = cli_opt_value("pull", argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--gguf"))
            o.want = CORTIQ_HUB_WANT_GGUF;
        else if (!strcmp(a, "--parallel")) {
            if (!cli_opt_u64("pull", a, cli_opt_value("pull", argc, argv, &i), 1, 32, &u))
                return CLI_EXIT_USAGE;
            o.parallel = (unsigned)u;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            quiet = true;
        else if (a[0] == '-')
            return cli_usage_error("pull", "unknown option '%s'", a);
        else if (!spec)
            spec = a;
        else
            return cli_usage_error("pull", "one OWNER/NAME only ('%s' is a second)", a);
    }
    if (!spec) return cli_usage_error("pull", "missing OWNER/NAME");
    cortiq_hub_ref ref;
    if (!cortiq_hub_ref_parse(spec, &ref))
        return cli_usage_error("pull", "'%s' is not OWNER/NAME[@REVISION][:FILE]", spec);
    if (revision && ref.revision[0] && strcmp(revision, ref.revision))
        return cli_usage_error("pull", "two revisions: @%s and --revision %s", ref.revision,
                               revision);
    o.revision = revision ? revision : ref.revision[0] ? ref.revision : NULL;
    o.file = ref.file[0] ? ref.file : NULL;
    if (!quiet) {
        o.progress = cli_hub_progress;
        o.progress_user = (void *)"pull";
    }
    cortiq_hub_result r;
    cmf_err err;
    cmf_status st = cortiq_hub_pull(ref.repo, &o, &r, &err);
    if (st) {
        fprintf(stderr, "cortiq pull: ");
        cli_error(&err);
        return cli_exit_code(st);
    }
    if (r.offline)
        fprintf(stderr,
                "pull: the hub was not asked (HF_HUB_OFFLINE) or could not be reached: "
                "using the cached snapshot %s\n",
                r.commit);
    if (!quiet)
        fprintf(stderr, "pull: %s at %s: %u file(s), %u downloaded (%s), %u from the cache\n",
                r.repo, r.commit, r.files, r.files_fetched, cli_bytes(r.bytes_fetched),
                r.files - r.files_fetched);
    printf("%s\n", r.gguf_path ? r.gguf_path : r.snapshot_dir);
    cortiq_hub_result_free(&r);
    return CLI_EXIT_OK;
}
