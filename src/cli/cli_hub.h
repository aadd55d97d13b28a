/* cli_hub.h - OWNER/NAME wherever a command takes a model: pull it into the hub cache (with a
 * progress bar), and for `run`, convert it once into the CMF cache. */
#ifndef CORTIQ_CLI_HUB_H
#define CORTIQ_CLI_HUB_H

#include <stdbool.h>

#include "cortiq/hub.h"

/* Draw a pull's progress on stderr: a bar with rate and ETA on a terminal, one line per file
 * otherwise. user: the command name. */
void cli_hub_progress(void *user, const cortiq_hub_progress *p);

/* True when path names something on disk (then it is a path, whatever its shape). */
bool cli_hub_exists(const char *path);
/* True for a name ending in ".gguf". */
bool cli_hub_is_gguf(const char *name);

/* Pull ref with the command's progress display (none when quiet); on failure print the error
 * and return the exit code, else -1 with *r filled (free it with cortiq_hub_result_free). */
int cli_hub_pull_ref(const char *cmd, const cortiq_hub_ref *ref, cortiq_hub_want want, bool quiet,
                     cortiq_hub_result *r);

/* For a command's model argument spec: a path that exists, or anything that is not shaped
 * like OWNER/NAME[@REV][:FILE], comes back as is in *path; a repo reference is pulled
 * (want selects the kind when no FILE is named) and *path is the snapshot directory, or the
 * .gguf for a GGUF. Returns -1 to go on (free *path), else the exit code (the error printed). */
int cli_hub_resolve(const char *cmd, const char *spec, cortiq_hub_want want, bool quiet,
                    char **path);

/* `cortiq run OWNER/NAME`: a .cmf of the repo at its current commit in the conversion cache
 * ($XDG_CACHE_HOME/cortiq/converted, else ~/.cache/cortiq/converted), converted on first
 * use with quant (NULL: q8). A spec that is a local path comes back as is (quant must then
 * be NULL). Returns -1 to go on (free *path), else the exit code. */
int cli_hub_model_for_run(const char *spec, const char *quant, char **path);

#endif
