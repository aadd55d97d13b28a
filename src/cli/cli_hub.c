/* cli_hub.c - model arguments that name a Hugging Face repo: `convert --model OWNER/NAME`,
 * `import-gguf OWNER/NAME[:FILE]` and `run OWNER/NAME` pull through the same code as
 * `cortiq pull` (`run`'s conversion cache is cli_hub_run.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_hub.h"

bool cli_hub_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

bool cli_hub_is_gguf(const char *name) {
    size_t n = strlen(name);
    return n > 5 && !strcmp(name + n - 5, ".gguf");
}

int cli_hub_pull_ref(const char *cmd, const cortiq_hub_ref *ref, cortiq_hub_want want, bool quiet,
                     cortiq_hub_result *r) {
    cortiq_hub_opts o;
    cortiq_hub_opts_default(&o);
    o.revision = ref->revision[0] ? ref->revision : NULL;
    o.file = ref->file[0] ? ref->file : NULL;
    o.want = want;
    if (!quiet) {
        o.progress = cli_hub_progress;
        o.progress_user = (void *)cmd;
    }
    cmf_err err;
    cmf_status st = cortiq_hub_pull(ref->repo, &o, r, &err);
    if (st) {
        fprintf(stderr, "cortiq %s: ", cmd);
        cli_error(&err);
        return cli_exit_code(st);
    }
    if (r->offline)
        fprintf(stderr,
                "%s: the hub was not asked (HF_HUB_OFFLINE) or could not be reached: using the "
                "cached snapshot %s of %s\n",
                cmd, r->commit, r->repo);
    return -1;
}

int cli_hub_resolve(const char *cmd, const char *spec, cortiq_hub_want want, bool quiet,
                    char **path) {
    cortiq_hub_ref ref;
    *path = NULL;
    if (cli_hub_exists(spec) || !cortiq_hub_ref_parse(spec, &ref)) {
        if (!(*path = strdup(spec))) return CLI_EXIT_SYSTEM;
        return -1;
    }
    if (want == CORTIQ_HUB_WANT_GGUF && ref.file[0] && !cli_hub_is_gguf(ref.file))
        return cli_usage_error(cmd, "'%s': the file after ':' must be a .gguf", spec);
    if (want == CORTIQ_HUB_WANT_SAFETENSORS && ref.file[0])
        return cli_usage_error(cmd, "'%s': a checkpoint is the whole repo, name no file", spec);
    cortiq_hub_result r;
    int rc = cli_hub_pull_ref(cmd, &ref, want, quiet, &r);
    if (rc >= 0) return rc;
    if (want == CORTIQ_HUB_WANT_SAFETENSORS && r.gguf_path) {
        cortiq_hub_result_free(&r);
        return cli_usage_error(cmd, "'%s' is a GGUF file: use `cortiq import-gguf`", spec);
    }
    *path = strdup(r.gguf_path ? r.gguf_path : r.snapshot_dir);
    cortiq_hub_result_free(&r);
    return *path ? -1 : CLI_EXIT_SYSTEM;
}
