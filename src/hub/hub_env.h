/* hub_env.h - where a pull talks to and where it writes: endpoint, token, cache directory,
 * each from the options, else from the environment variables huggingface_hub reads. */
#ifndef CORTIQ_HUB_ENV_H
#define CORTIQ_HUB_ENV_H

#include "cortiq/hub.h"

typedef struct hub_env {
    char *endpoint;  /* no trailing '/' */
    char *token;     /* NULL: send none */
    char *cache_dir; /* the hub cache root (models--OWNER--NAME live under it) */
} hub_env;

/* Fill *env from opts and the environment (docs/HUB.md "Environment"). */
cmf_status hub_env_resolve(const cortiq_hub_opts *opts, hub_env *env, cmf_err *err);
void hub_env_free(hub_env *env);

/* The cache directory alone (malloc'd): opts->cache_dir, $HF_HUB_CACHE,
 * $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
 */
char *hub_env_cache_dir(const cortiq_hub_opts *opts, cmf_err *err);

#endif
