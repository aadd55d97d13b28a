/* cortiq/status.h - the one status enum of the library, and error messages.
 *
 * Every fallible function returns a cmf_status and, when given a non-NULL
 * cmf_err, fills it with a message that names the file, the offending value
 * and the rule it broke, e.g.
 *   "model.cmf: Bounds: tensor 'lm_head.weight' off+nbytes=9000 > data_len=8192"
 * Status values are pinned: a number never changes meaning.
 */
#ifndef CORTIQ_STATUS_H
#define CORTIQ_STATUS_H

#include <stddef.h>

#include "cortiq/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cmf_status {
    CMF_OK = 0,
    CMF_E_INVALID_MAGIC = 1,       /* spec §1.2: magic != "CMF\x01" */
    CMF_E_UNSUPPORTED_VERSION = 2, /* spec §1.2: version != 2 */
    CMF_E_UNSUPPORTED_FEATURE = 3, /* spec §1.1: a required_features bit we cannot honour */
    CMF_E_BOUNDS = 4,              /* a section, tensor or record past its container */
    CMF_E_PARSE = 5,               /* malformed content: names, dtypes, JSON, payloads */
    CMF_E_HASH = 6,                /* a stored hash64 does not match the bytes */
    CMF_E_IO = 7,                  /* the operating system refused (open, mmap, write, rename) */
    CMF_E_NOMEM = 8,               /* allocation failed */
    CMF_E_INVALID_ARG = 9,         /* misuse of the API (not bad data) */
    CMF_E_NOT_FOUND = 10,          /* a named tensor, shard sibling or key is absent */
    CMF_E_UNSUPPORTED = 11,        /* valid input this operation cannot handle (e.g. dtype/shape) */
    CMF_E_SHARD = 12,              /* shard set inconsistent (spec §10) */
    CMF_E_LIMIT = 13,              /* a resource cap an untrusted value tried to exceed */
    CMF_E_NETWORK = 14,            /* a server unreachable, a transfer cut, an HTTP error status */
    CMF_STATUS_COUNT
} cmf_status;

#define CMF_ERR_MSG_MAX 512

/* Caller-owned error record; pass NULL where the message is not wanted. */
typedef struct cmf_err {
    cmf_status code;
    char msg[CMF_ERR_MSG_MAX];
} cmf_err;

/* Short, stable name of a status: "Bounds", "Parse", ... ("?" if out of range). */
CORTIQ_API const char *cmf_status_name(cmf_status s);

/* Reset *err to CMF_OK with an empty message. */
CORTIQ_API void cmf_err_clear(cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
