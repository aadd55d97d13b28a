/* cli_hub_run.c - `cortiq run OWNER/NAME`: pull, then keep one converted .cmf per repo, commit
 * and quant under $XDG_CACHE_HOME/cortiq/converted, converting on first use only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_hub.h"
#include "cli/convert_progress.h"
#include "cortiq/converter.h"

/* $XDG_CACHE_HOME/cortiq/converted, else $HOME/.cache/cortiq/converted (malloc'd). */
static char *converted_root(void) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[4096];
    if (x && *x)
        snprintf(buf, sizeof buf, "%s/cortiq/converted", x);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.cache/cortiq/converted", home);
    else
        return NULL;
    return strdup(buf);
}

static int mkdirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Convert the pulled repo into out (the converters write through a temp file and a rename,
 * so an interrupted run leaves no .cmf behind). */
static int convert_into(const cortiq_hub_result *r, const char *quant, cmf_dtype dt,
                        const char *out) {
    fprintf(stderr, "run: converting %s (%.12s) to %s, once: %s\n", r->repo, r->commit, quant, out);
    if (r->gguf_path) {
        char *argv[] = {"import-gguf", r->gguf_path, "--quant", (char *)quant,
                        "-o",          (char *)out,  NULL};
        return cmd_import_gguf(6, argv);
    }
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.quant = dt;
    cli_convert_progress shown;
    cli_convert_progress_attach(&o, &shown);
    cmf_convert_stats s;
    cmf_err err;
    cmf_status st = cmf_convert_hf(r->snapshot_dir, out, NULL, &o, &s, &err);
    cli_convert_progress_end(&shown);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}

int cli_hub_model_for_run(const char *spec, const char *quant, char **path) {
    cortiq_hub_ref ref;
    *path = NULL;
    if (cli_hub_exists(spec) || !cortiq_hub_ref_parse(spec, &ref)) {
        if (quant)
            return cli_usage_error("run",
                                   "--quant is for OWNER/NAME (converted on first use); "
                                   "'%s' is a file",
                                   spec);
        if (!(*path = strdup(spec))) return CLI_EXIT_SYSTEM;
        return -1;
    }
    if (ref.file[0] && !cli_hub_is_gguf(ref.file))
        return cli_usage_error("run", "'%s': the file after ':' must be a .gguf", spec);
    if (!quant) quant = "q8";
    cmf_dtype dt;
    if (!cmf_convert_quant_from_name(quant, &dt))
        return cli_usage_error("run", "unknown quant '%s'", quant);
    char *root = converted_root();
    if (!root) {
        fprintf(stderr, "cortiq run: no cache directory: set XDG_CACHE_HOME or HOME\n");
        return CLI_EXIT_SYSTEM;
    }
    cortiq_hub_result r;
    int rc = cli_hub_pull_ref("run", &ref, CORTIQ_HUB_WANT_ANY, false, &r);
    if (rc >= 0) {
        free(root);
        return rc;
    }
    /* keyed by repo, commit, quant and (for a GGUF source) the file it came from */
    char dir[4096], out[8192], owner_name[300];
    snprintf(owner_name, sizeof owner_name, "%s", r.repo);
    char *slash = strchr(owner_name, '/');
    if (slash) memmove(slash + 2, slash + 1, strlen(slash + 1) + 1), slash[0] = '-', slash[1] = '-';
    snprintf(dir, sizeof dir, "%s/%s/%s", root, owner_name, r.commit);
    free(root);
    if (r.gguf_path) {
        const char *base = strrchr(r.gguf_path, '/');
        base = base ? base + 1 : r.gguf_path;
        snprintf(out, sizeof out, "%s/%s-%.*s.cmf", dir, quant, (int)(strlen(base) - 5), base);
    } else
        snprintf(out, sizeof out, "%s/%s.cmf", dir, quant);
    rc = -1;
    if (!cli_hub_exists(out)) {
        if (mkdirs(dir) != 0) {
            fprintf(stderr, "%s: IO: cannot create directory: %s\n", dir, strerror(errno));
            rc = CLI_EXIT_SYSTEM;
        } else if ((rc = convert_into(&r, quant, dt, out)) == CLI_EXIT_OK)
            rc = -1;
    }
    cortiq_hub_result_free(&r);
    if (rc >= 0) return rc;
    if (!(*path = strdup(out))) return CLI_EXIT_SYSTEM;
    return -1;
}
