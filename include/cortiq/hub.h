/* cortiq/hub.h - models by name: download a Hugging Face repository's files into the
 * huggingface_hub cache, so that `convert`, `import-gguf` and `run` can take OWNER/NAME.
 *
 *   cortiq_hub_opts o;
 *   cortiq_hub_opts_default(&o);
 *   cortiq_hub_result r;
 *   if (cortiq_hub_pull("HuggingFaceTB/SmolLM2-135M-Instruct", &o, &r, &err) == CMF_OK) {
 *       ... r.snapshot_dir holds config.json, tokenizer files, *.safetensors ...
 *       cortiq_hub_result_free(&r);
 *   }
 *
 * The cache is the one huggingface_hub keeps ($HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub):
 *   models--OWNER--NAME/blobs/<sha256 or git oid>      one file per content
 *   models--OWNER--NAME/snapshots/<commit>/<path>      relative symlinks into blobs/
 *   models--OWNER--NAME/refs/<revision>                the commit a branch or tag pointed at
 * so files downloaded by Python tools are reused and the other way round. A file already in
 * the cache is never downloaded again; a partial download (blobs/<name>.incomplete) is resumed
 * with an HTTP Range request. Every file is checked against the hub's metadata (sha256 for LFS
 * files, the git blob oid for the others) before it is renamed into blobs/.
 *
 * The token ($HF_TOKEN) is sent to the endpoint's own scheme, host and port only: redirects
 * (the hub sends LFS downloads to a CDN) are followed without it.
 *
 * libcurl is loaded (dlopen of libcurl.so.4) at the first pull, not linked, so programs that
 * never pull do not pay for it. Where it is missing, cortiq_hub_pull returns CMF_E_NETWORK
 * with the message "libcurl.so.4 not found: install libcurl4 (apt install libcurl4)".
 *
 * The library prints nothing: progress goes through a callback (docs/HUB.md).
 */
#ifndef CORTIQ_HUB_H
#define CORTIQ_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a pull without a named file fetches. */
typedef enum cortiq_hub_want {
    CORTIQ_HUB_WANT_ANY = 0,         /* safetensors checkpoint if the repo has one, else a GGUF */
    CORTIQ_HUB_WANT_SAFETENSORS = 1, /* config, tokenizer, chat template, *.safetensors (+index) */
    CORTIQ_HUB_WANT_GGUF = 2,        /* one .gguf, the default quant order of docs/HUB.md */
} cortiq_hub_want;

/* Progress of one pull, reported from the calling thread. */
typedef enum cortiq_hub_event {
    CORTIQ_HUB_EV_START = 0,   /* the file list is known: files_total, bytes_total are set */
    CORTIQ_HUB_EV_BYTES = 1,   /* bytes arrived (at most about 10 reports a second) */
    CORTIQ_HUB_EV_CACHED = 2,  /* file was already in the cache: not downloaded */
    CORTIQ_HUB_EV_DONE = 3,    /* file was downloaded, checked and moved into the cache */
    CORTIQ_HUB_EV_RESUMED = 4, /* file continues a partial download of bytes_resumed bytes */
} cortiq_hub_event;

typedef struct cortiq_hub_progress {
    cortiq_hub_event event;
    const char *file;        /* the repo path the event is about (NULL for START / BYTES) */
    uint64_t file_size;      /* its size */
    uint64_t bytes_resumed;  /* RESUMED: bytes already on disk */
    uint64_t bytes_done;     /* bytes of the files to download that are on disk now */
    uint64_t bytes_total;    /* bytes of the files to download (cached files not counted) */
    uint64_t bytes_received; /* bytes received by this call (rate = bytes_received / seconds) */
    unsigned files_done;     /* files finished, cached ones included */
    unsigned files_total;    /* files selected */
    double seconds;          /* since the downloads started */
} cortiq_hub_progress;

typedef void (*cortiq_hub_progress_fn)(void *user, const cortiq_hub_progress *p);

typedef struct cortiq_hub_opts {
    const char *endpoint;  /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;     /* NULL: $HF_TOKEN, else the file $HF_TOKEN_PATH or $HF_HOME/token;
                              "" sends none */
    const char *cache_dir; /* NULL: the huggingface_hub cache (see above) */
    const char *revision;  /* branch, tag or commit; NULL: the repo's default branch */
    const char *file;      /* one repo path to fetch (e.g. "model-Q8_0.gguf"); NULL: select */
    cortiq_hub_want want;  /* used when file is NULL */
    unsigned parallel;     /* files downloaded at once; 0 = 4 */
    long timeout_s;        /* a transfer that stalls (under 1 byte/s) this long fails; 0 = 60 */
    cortiq_hub_progress_fn progress; /* may be NULL */
    void *progress_user;
} cortiq_hub_opts;

/* Zeroed options: everything from the environment, default branch, selection by want. */
CORTIQ_API void cortiq_hub_opts_default(cortiq_hub_opts *o);

typedef struct cortiq_hub_result {
    char *repo;             /* OWNER/NAME */
    char *commit;           /* the 40-hex commit the revision resolved to */
    char *snapshot_dir;     /* <cache>/models--OWNER--NAME/snapshots/<commit> */
    char *gguf_path;        /* the fetched .gguf inside snapshot_dir, or NULL */
    unsigned files;         /* files selected */
    unsigned files_fetched; /* of which were downloaded (the rest were in the cache) */
    uint64_t bytes_fetched; /* bytes downloaded by this call */
    bool offline;           /* the hub was not asked (HF_HUB_OFFLINE) or could not be reached:
                               the revision's cached snapshot was used as it is */
} cortiq_hub_result;

/* A model reference "OWNER/NAME[@REVISION][:FILE]" split into its parts. */
typedef struct cortiq_hub_ref {
    char repo[256];
    char revision[256]; /* "" when absent */
    char file[512];     /* "" when absent */
} cortiq_hub_ref;

/* True when spec has the shape of a repo reference (two name segments of letters, digits,
 * '-', '_', '.', then optional @REVISION and :FILE), filling *out. A name ending in .cmf,
 * .gguf, .safetensors, .json or .jinja is taken for a file path, not a repo. A caller that also
 * takes local paths should try the path first: a path that exists always wins. */
CORTIQ_API bool cortiq_hub_ref_parse(const char *spec, cortiq_hub_ref *out);

/* Resolve the revision to a commit, list the repo, select the files (opts->file, else by
 * opts->want), download the missing ones in parallel and fill *out (free it with
 * cortiq_hub_result_free). With HF_HUB_OFFLINE=1, or when the endpoint cannot be reached
 * and the revision was pulled before, the cached snapshot is used (out->offline).
 * Errors name the URL or file and what to do:
 *   CMF_E_NETWORK    the endpoint could not be reached, a transfer failed or stalled, HTTP
 *                    401/403 (gated or private: set HF_TOKEN) or another HTTP error
 *   CMF_E_NOT_FOUND  HTTP 404 (repo, revision or file), or nothing in the repo to fetch
 *   CMF_E_HASH       a downloaded file does not match the hub's checksum (it is deleted)
 *   CMF_E_PARSE      the hub's answer is not the JSON expected
 *   CMF_E_IO         the cache cannot be written
 *   CMF_E_INVALID_ARG a malformed repo id, revision or file name */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_hub_pull(const char *repo,
                                                       const cortiq_hub_opts *opts,
                                                       cortiq_hub_result *out, cmf_err *err);

/* Free what a successful cortiq_hub_pull filled; NULL and a zeroed result are fine. */
CORTIQ_API void cortiq_hub_result_free(cortiq_hub_result *r);

/* The cache directory the options select (opts may be NULL): malloc'd, or NULL when out of
 * memory or no home directory is known (err says which). */
CORTIQ_API char *cortiq_hub_cache_dir(const cortiq_hub_opts *opts, cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
