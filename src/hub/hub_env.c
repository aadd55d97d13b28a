/* hub_env.c - endpoint, token and cache directory, resolved the way huggingface_hub does so
 * that both tools share one cache and one login. */
#include "hub/hub_env.h"

#include "common/err.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* "~/x" -> "$HOME/x" (huggingface_hub expands the user in every path variable). */
static char *expand_home(const char *path) {
    const char *home = getenv("HOME");
    if (path[0] == '~' && (path[1] == '/' || !path[1]) && home && *home) {
        size_t n = strlen(home) + strlen(path);
        char *out = malloc(n);
        if (out) snprintf(out, n, "%s%s", home, path + 1);
        return out;
    }
    return strdup(path);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", a, b);
    return out;
}

/* $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface; NULL if no home. */
static char *hf_home(void) {
    const char *v = env_nonempty("HF_HOME");
    if (v) return expand_home(v);
    if ((v = env_nonempty("XDG_CACHE_HOME"))) {
        char *x = expand_home(v), *out = x ? join(x, "huggingface") : NULL;
        free(x);
        return out;
    }
    if (!(v = env_nonempty("HOME"))) return NULL;
    return join(v, ".cache/huggingface");
}

char *hub_env_cache_dir(const cortiq_hub_opts *opts, cmf_err *err) {
    const char *v = opts && opts->cache_dir ? opts->cache_dir : NULL;
    if (!v) v = env_nonempty("HF_HUB_CACHE");
    if (!v) v = env_nonempty("HUGGINGFACE_HUB_CACHE");
    char *out = NULL;
    if (v)
        out = expand_home(v);
    else {
        char *home = hf_home();
        if (!home) {
            cmf_err_set(err, CMF_E_INVALID_ARG, "hub",
                        "no cache directory: set HF_HUB_CACHE, HF_HOME or HOME");
            return NULL;
        }
        out = join(home, "hub");
        free(home);
    }
    if (!out) cmf_err_set(err, CMF_E_NOMEM, "hub", "out of memory");
    return out;
}

/* The token a `huggingface-cli login` stored: $HF_TOKEN_PATH, else $HF_HOME/token; first line,
 * trimmed. NULL when there is none. */
static char *token_from_file(void) {
    const char *v = env_nonempty("HF_TOKEN_PATH");
    char *path = NULL;
    if (v)
        path = expand_home(v);
    else {
        char *home = hf_home();
        path = home ? join(home, "token") : NULL;
        free(home);
    }
    if (!path) return NULL;
    size_t len;
    char *text = cq_read_file(path, &len);
    free(path);
    if (!text) return NULL;
    size_t b = 0, e = strcspn(text, "\r\n");
    while (b < e && isspace((unsigned char)text[b]))
        b++;
    while (e > b && isspace((unsigned char)text[e - 1]))
        e--;
    memmove(text, text + b, e - b);
    text[e - b] = 0;
    if (!*text) {
        free(text);
        return NULL;
    }
    return text;
}

cmf_status hub_env_resolve(const cortiq_hub_opts *opts, hub_env *env, cmf_err *err) {
    memset(env, 0, sizeof *env);
    const char *ep = opts->endpoint ? opts->endpoint : env_nonempty("HF_ENDPOINT");
    if (!ep) ep = DEFAULT_ENDPOINT;
    if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
        return cmf_err_set(err, CMF_E_INVALID_ARG, "hub",
                           "endpoint '%s' is not an http:// or https:// URL (HF_ENDPOINT)", ep);
    if (!(env->endpoint = strdup(ep))) goto nomem;
    for (size_t n = strlen(env->endpoint); n > 0 && env->endpoint[n - 1] == '/'; n--)
        env->endpoint[n - 1] = 0;
    if (opts->token) {
        if (*opts->token && !(env->token = strdup(opts->token))) goto nomem;
    } else {
        const char *t = env_nonempty("HF_TOKEN");
        if (!t) t = env_nonempty("HUGGING_FACE_HUB_TOKEN");
        if (t && !(env->token = strdup(t))) goto nomem;
        if (!t) env->token = token_from_file();
    }
    cmf_err local;
    if (!(env->cache_dir = hub_env_cache_dir(opts, &local))) {
        hub_env_free(env);
        if (err) *err = local;
        return local.code;
    }
    return CMF_OK;
nomem:
    hub_env_free(env);
    return cmf_err_set(err, CMF_E_NOMEM, "hub", "out of memory");
}

void hub_env_free(hub_env *env) {
    if (!env) return;
    free(env->endpoint);
    free(env->token);
    free(env->cache_dir);
    memset(env, 0, sizeof *env);
}
