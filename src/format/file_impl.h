/* file_impl.h - the insides of cmf_file, shared by the reader, verifier, appender and compactor. */
#ifndef CORTIQ_FORMAT_FILE_IMPL_H
#define CORTIQ_FORMAT_FILE_IMPL_H

#include "cortiq/format.h"

/* Caps on values an attacker controls, checked before anything is allocated. */
#define CMF_MAX_HEADER_LEN (UINT64_C(64) << 20)
#define CMF_MAX_TENSORS    UINT64_C(4000000)
#define CMF_MAX_MASKS_META (UINT64_C(16) << 20)

typedef struct cmf_shard {
    char *path;
    const uint8_t *base; /* the whole file image */
    size_t size;
    int mapped; /* munmap on close */
    cmf_envelope env;
    cmf_header header;
    size_t first_tensor, n_tensors; /* range in cmf_file.tensors */
} cmf_shard;

struct cmf_file {
    char *path;
    cmf_shard *shards;
    size_t n_shards;
    cmf_tensor *tensors;
    size_t n_tensors;
    char **name_blocks; /* one NUL-terminated name arena per shard */
    uint32_t *table;    /* open addressing: tensor index + 1, 0 = empty */
    size_t table_mask;
    uint32_t *sorted; /* tensor indices in byte-wise name order */
    cmf_masks *masks;
    cmf_sparse_index *index;
};

/* Validate one file image and fill *sh (envelope, header, its tensors appended to f). */
cmf_status cmf__load_shard(cmf_file *f, cmf_shard *sh, unsigned flags, cmf_err *err);
/* Parse the directory of sh into f->tensors (appending n records). */
cmf_status cmf__parse_directory(cmf_file *f, cmf_shard *sh, size_t shard_idx, cmf_err *err);
/* Build the name hash table and sorted order over all tensors; duplicate names are an error. */
cmf_status cmf__index_names(cmf_file *f, cmf_err *err);
cmf_status cmf__parse_masks(const cmf_shard *sh, cmf_masks **out, cmf_err *err);
/* The same on the raw section bytes (sec[0..len), len as masks_len) sized by arch; the result
 * points into sec, which must outlive it. ctx names the file in messages. */
cmf_status cmf__parse_masks_bytes(const uint8_t *sec, uint64_t len, const cmf_arch *arch,
                                  const char *ctx, cmf_masks **out, cmf_err *err);
void cmf__free_masks(cmf_masks *m);
cmf_status cmf__parse_sparse_index(const cmf_shard *sh, const cmf_masks *masks,
                                   cmf_sparse_index **out, cmf_err *err);
void cmf__free_sparse_index(cmf_sparse_index *ix);
cmf_file *cmf__file_new(const char *path, size_t n_shards);

#endif
