/* cortiq/safetensors.h - read safetensors checkpoints (one file, or a directory of shards
 * with its index), one of the converter's inputs.
 *
 * The reader maps its file(s) read-only and validates every count, size and offset before
 * allocating anything or touching payload bytes: a handle that opened is a file whose every
 * tensor span lies inside it, whose element counts match its byte counts and whose tensors do
 * not overlap. Tensor payloads are then turned into f32 a row range at a time into a caller
 * buffer, so a converter's memory stays bounded by one chunk.
 *
 * Everything a handle hands out (names, strings, tensor records, data pointers) lives until
 * its close function. Handles are immutable after open and may be read from many threads.
 */
#ifndef CORTIQ_SAFETENSORS_H
#define CORTIQ_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cmf_st_dtype {
    CMF_ST_F32 = 0,
    CMF_ST_F16,
    CMF_ST_BF16,
    /* parsed for size validation, refused for reading: */
    CMF_ST_F64,
    CMF_ST_I64,
    CMF_ST_I32,
    CMF_ST_I16,
    CMF_ST_I8,
    CMF_ST_U64,
    CMF_ST_U32,
    CMF_ST_U16,
    CMF_ST_U8,
    CMF_ST_BOOL,
    CMF_ST_F8_E4M3,
    CMF_ST_F8_E5M2,
    CMF_ST_DTYPE_COUNT
} cmf_st_dtype;

#define CMF_ST_MAX_HEADER (100u * 1000u * 1000u) /* header length cap, bytes */
#define CMF_ST_MAX_DIMS   8

typedef struct cmf_st_tensor {
    const char *name;
    cmf_st_dtype dtype;
    const char *dtype_name; /* as written in the header, e.g. "BF16" */
    uint32_t ndim;
    uint64_t shape[CMF_ST_MAX_DIMS];
    uint64_t nelem;
    uint64_t row_len; /* shape[ndim-1] (1 for a scalar) */
    uint64_t nrows;   /* nelem / row_len (0 when nelem is 0) */
    uint64_t nbytes;
    uint32_t file;       /* index of the shard file it lives in */
    const uint8_t *data; /* payload in the map */
} cmf_st_tensor;

typedef struct cmf_st cmf_st;

/* Open a checkpoint: a .safetensors file, or a directory holding either
 * model.safetensors.index.json (its weight_map names the shard files: all are opened and
 * act as one namespace; every tensor of a shard must be listed for that shard and every
 * listed tensor must exist) or a single model.safetensors. Each file is validated:
 * 8-byte header length <= CMF_ST_MAX_HEADER and inside the file, header a JSON object,
 * each entry {dtype, shape, data_offsets:[begin,end]} with a known dtype, non-negative
 * shape whose product does not overflow, begin <= end <= data length,
 * end - begin == numel * elemsize, no two tensors overlapping; "__metadata__" (string values)
 * kept. Fails CMF_E_PARSE / CMF_E_BOUNDS / CMF_E_LIMIT / CMF_E_SHARD / CMF_E_NOT_FOUND
 * / CMF_E_IO with the file and tensor named. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_st_open(const char *path, cmf_st **out, cmf_err *err);
/* One file image in memory (buf outlives the handle). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_st_open_memory(const void *buf, size_t len,
                                                          const char *name, cmf_st **out,
                                                          cmf_err *err);
CORTIQ_API void cmf_st_close(cmf_st *s); /* NULL allowed */

CORTIQ_API size_t cmf_st_file_count(const cmf_st *s);
CORTIQ_API const char *cmf_st_file_path(const cmf_st *s, size_t i);
CORTIQ_API size_t cmf_st_tensor_count(const cmf_st *s);
/* Tensors in byte-wise name order (deterministic over shards). */
CORTIQ_API const cmf_st_tensor *cmf_st_tensor_at(const cmf_st *s, size_t i);
CORTIQ_API const cmf_st_tensor *cmf_st_find(const cmf_st *s, const char *name); /* NULL if absent */
/* A "__metadata__" string value of the first file (NULL if absent). */
CORTIQ_API const char *cmf_st_metadata(const cmf_st *s, const char *key);

CORTIQ_API const char *cmf_st_dtype_name(cmf_st_dtype d);

/* Rows [row0, row0 + nrows) of t as f32 into dst (F32 copied, F16/BF16 converted exactly).
 * CMF_E_UNSUPPORTED naming tensor and dtype for any other dtype; CMF_E_INVALID_ARG for a
 * range past t->nrows. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_st_rows_f32(const cmf_st *s, const cmf_st_tensor *t,
                                                       uint64_t row0, uint64_t nrows, float *dst,
                                                       cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
