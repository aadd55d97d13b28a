/* append.c - append-only growth (spec §9): new tensors after the current end of file, header
 * and directory re-emitted at the tail, envelope rewritten in place as the very last write.
 * Earlier bytes never change, so a crash at any write boundary leaves the old file valid. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "cortiq/hash.h"
#include "cortiq/writer.h"
#include "format/file_impl.h"
#include "common/durable_io.h"
#include "format/layout.h"

typedef struct a_tensor {
    dir_entry d; /* name owned */
    uint8_t *data;
} a_tensor;

struct cmf_appender {
    char *path;
    cmf_file *f;
    json_t *header;
    dir_entry *old; /* current directory (names borrowed from f) */
    size_t n_old;
    unsigned char *replaced; /* per old entry */
    a_tensor *add;
    size_t n_add, cap_add;
    uint8_t *masks;
    size_t masks_len;
    int new_masks;
};

cmf_status cmf_append_begin(const char *path, cmf_appender **out, cmf_err *err) {
    *out = NULL;
    cmf_appender *a = calloc(1, sizeof *a);
    if (!a || !(a->path = strdup(path))) {
        free(a);
        return cmf_err_set(err, CMF_E_NOMEM, path, "appender");
    }
    cmf_status st = cmf_open(path, 0, &a->f, err);
    if (st) {
        cmf_append_free(a);
        return st;
    }
    const cmf_header *h = cmf_file_header(a->f);
    if (h->has_shard && h->shard_count > 1) {
        cmf_append_free(a);
        return cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                           "appending to one shard of a sharded model is not supported");
    }
    if ((st = layout_parse_header_template(h->json, h->json_len, &a->header, path, err))) {
        cmf_append_free(a);
        return st;
    }
    a->n_old = cmf_file_tensor_count(a->f);
    a->old = calloc(a->n_old ? a->n_old : 1, sizeof *a->old);
    a->replaced = calloc(a->n_old ? a->n_old : 1, 1);
    if (!a->old || !a->replaced) {
        cmf_append_free(a);
        return cmf_err_set(err, CMF_E_NOMEM, path, "appender");
    }
    for (size_t i = 0; i < a->n_old; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(a->f, i);
        dir_entry *d = &a->old[i];
        d->name = t->name;
        d->dtype = t->dtype;
        d->ndim = t->ndim;
        memcpy(d->shape, t->shape, sizeof d->shape);
        d->off = t->off;
        d->nbytes = t->nbytes;
        d->hash = t->hash;
    }
    *out = a;
    return CMF_OK;
}

cmf_status cmf_append_add_tensor(cmf_appender *a, const char *name, cmf_dtype dtype, unsigned ndim,
                                 const uint64_t *shape, const void *data, size_t nbytes,
                                 int replace, cmf_err *err) {
    cmf_status st = layout_check_tensor(a->path, name, dtype, ndim, shape, err);
    if (st) return st;
    uint64_t lo, hi;
    if ((st = cmf_dtype_nbytes(dtype, ndim, shape, &lo, &hi, a->path, err))) return st;
    if (nbytes < lo || nbytes > hi)
        return cmf_err_set(err, CMF_E_INVALID_ARG, a->path,
                           "tensor '%s': %zu bytes, %s of this shape needs [%llu, %llu]", name,
                           nbytes, cmf_dtype_name(dtype), (unsigned long long)lo,
                           (unsigned long long)hi);
    for (size_t i = 0; i < a->n_add; i++)
        if (!strcmp(a->add[i].d.name, name))
            return cmf_err_set(err, CMF_E_INVALID_ARG, a->path, "tensor '%s' appended twice", name);
    const cmf_tensor *old = cmf_file_find(a->f, name);
    if (old && !replace)
        return cmf_err_set(err, CMF_E_INVALID_ARG, a->path,
                           "tensor '%s' already exists (pass replace to supersede it)", name);
    if (a->n_add == a->cap_add) {
        size_t cap = a->cap_add ? 2 * a->cap_add : 16;
        a_tensor *na = realloc(a->add, cap * sizeof *na);
        if (!na) return cmf_err_set(err, CMF_E_NOMEM, a->path, "appender");
        a->add = na;
        a->cap_add = cap;
    }
    a_tensor *t = &a->add[a->n_add];
    memset(t, 0, sizeof *t);
    t->d.name = strdup(name);
    t->data = malloc(nbytes ? nbytes : 1);
    if (!t->d.name || !t->data) {
        free((char *)t->d.name);
        free(t->data);
        return cmf_err_set(err, CMF_E_NOMEM, a->path, "tensor '%s'", name);
    }
    memcpy(t->data, data, nbytes);
    t->d.dtype = (uint8_t)dtype;
    t->d.ndim = (uint8_t)ndim;
    for (unsigned i = 0; i < ndim; i++)
        t->d.shape[i] = shape[i];
    t->d.nbytes = nbytes;
    t->d.hash = cmf_hash64(data, nbytes);
    if (old) a->replaced[old - cmf_file_tensor_at(a->f, 0)] = 1;
    a->n_add++;
    return CMF_OK;
}

cmf_status cmf_append_drop_tensor(cmf_appender *a, const char *name, cmf_err *err) {
    const cmf_tensor *old = cmf_file_find(a->f, name);
    if (!old)
        return cmf_err_set(err, CMF_E_NOT_FOUND, a->path, "tensor '%s' is not in the file", name);
    a->replaced[old - cmf_file_tensor_at(a->f, 0)] = 1;
    return CMF_OK;
}

cmf_status cmf_append_set_header(cmf_appender *a, const char *json, size_t len, cmf_err *err) {
    json_t *h;
    cmf_status st = layout_parse_header_template(json, len, &h, a->path, err);
    if (st) return st;
    json_decref(a->header);
    a->header = h;
    return CMF_OK;
}

cmf_status cmf_append_set_masks(cmf_appender *a, const void *bytes, size_t len, cmf_err *err) {
    uint8_t *c = malloc(len ? len : 1);
    if (!c) return cmf_err_set(err, CMF_E_NOMEM, a->path, "masks");
    memcpy(c, bytes, len);
    free(a->masks);
    a->masks = c;
    a->masks_len = len;
    a->new_masks = 1;
    return CMF_OK;
}

static const uint8_t k_zeros[64];

cmf_status cmf_append_commit(cmf_appender *a, cmf_err *err) {
    const cmf_envelope *old = cmf_file_envelope(a->f);
    cmf_envelope e = *old;
    size_t file_size;
    cmf_file_shard_bytes(a->f, 0, &file_size);
    const uint8_t *vocab = NULL, *index = NULL, *masks = NULL;
    size_t vocab_len = 0;
    vocab = cmf_file_vocab(a->f, &vocab_len);
    size_t all_len;
    const uint8_t *img = cmf_file_shard_bytes(a->f, 0, &all_len);
    if (old->index_off) index = img + old->index_off;
    if (old->masks_off) masks = img + old->masks_off;

    int fd = open(a->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return cmf_err_set(err, CMF_E_IO, a->path, "cannot open for append: %s", strerror(errno));
    cmf_status st = CMF_OK;
    /* the real end of file may be past the envelope's view (an earlier append that crashed) */
    struct stat sb;
    uint64_t pos = fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : file_size;
    size_t n_all = a->n_old + a->n_add, n = 0;
    dir_entry *d = calloc(n_all ? n_all : 1, sizeof *d);
    char *hjson = NULL;
    uint8_t *dirbuf = NULL;
    if (!d) {
        st = cmf_err_set(err, CMF_E_NOMEM, a->path, "directory");
        goto out;
    }
    for (size_t i = 0; i < a->n_old; i++)
        if (!a->replaced[i]) d[n++] = a->old[i];
    /* 1. new tensors, 64-aligned relative to data_off (data_off is 4096-aligned) */
    for (size_t i = 0; i < a->n_add; i++) {
        a_tensor *t = &a->add[i];
        uint64_t at = ck_align_up(pos, CMF_TENSOR_ALIGN);
        if (at > pos && (st = io_pwrite_all(fd, k_zeros, (size_t)(at - pos), pos, a->path, err)))
            goto out;
        if ((st = io_pwrite_all(fd, t->data, t->d.nbytes, at, a->path, err))) goto out;
        t->d.off = at - e.data_off;
        d[n++] = t->d;
        pos = at + t->d.nbytes;
        e.data_len = pos - e.data_off;
    }
    /* 2. masks, if replaced */
    if (a->new_masks) {
        uint64_t at = ck_align_up(pos, CMF_TENSOR_ALIGN);
        if ((st = io_pwrite_all(fd, a->masks, a->masks_len, at, a->path, err))) goto out;
        e.masks_off = at;
        e.masks_len = a->masks_len;
        masks = a->masks;
        pos = at + a->masks_len;
        /* the deprecated sparse index (spec §7) names the old masks' task ids: it goes with
         * them (writers stop emitting it; never re-emitted for new masks) */
        index = NULL;
        e.index_off = e.index_len = 0;
    }
    /* 3. header and directory at the tail */
    header_plan plan = {
        .masks_hash = e.masks_off ? cmf_hash64(masks, (size_t)e.masks_len) : 0,
        .vocab_hash = vocab ? cmf_hash64(vocab, vocab_len) : 0,
        .index_hash = index ? cmf_hash64(index, (size_t)e.index_len) : 0,
    };
    size_t hlen;
    if ((st = layout_header_json(a->header, &plan, &hjson, &hlen, a->path, err))) goto out;
    e.header_off = pos;
    e.header_len = hlen;
    if ((st = io_pwrite_all(fd, hjson, hlen, pos, a->path, err))) goto out;
    pos += hlen;
    e.dir_off = pos;
    e.dir_len = layout_directory_size(d, n);
    dirbuf = malloc(e.dir_len);
    if (!dirbuf) {
        st = cmf_err_set(err, CMF_E_NOMEM, a->path, "directory");
        goto out;
    }
    layout_write_directory(d, n, dirbuf);
    if ((st = io_pwrite_all(fd, dirbuf, e.dir_len, pos, a->path, err))) goto out;
    e.required_features = layout_features(d, n, e.masks_off != 0, a->header);
    e.header_hash = cmf_hash64(hjson, hlen);
    e.dir_hash = cmf_hash64(dirbuf, e.dir_len);
    /* 4. everything durable before the switch */
    if ((st = io_fsync(fd, a->path, err))) goto out;
    /* 5. the switch: one 128-byte write. Then re-open; if our own reader refuses the result,
     *    put the old envelope back so the file stays what it was. */
    {
        uint8_t env[CMF_ENVELOPE_SIZE], old_env[CMF_ENVELOPE_SIZE];
        cmf_envelope_write(&e, env);
        memcpy(old_env, img, CMF_ENVELOPE_SIZE);
        if ((st = io_pwrite_all(fd, env, sizeof env, 0, a->path, err))) goto out;
        if ((st = io_fsync(fd, a->path, err))) goto out;
        cmf_file *check = NULL;
        cmf_err cerr;
        if (cmf_open(a->path, 0, &check, &cerr) != CMF_OK) {
            io_pwrite_all(fd, old_env, sizeof old_env, 0, a->path, NULL);
            fsync(fd);
            st =
                cmf_err_set(err, cerr.code, a->path,
                            "appended file failed validation, old envelope restored: %s", cerr.msg);
        }
        cmf_close(check);
    }
out:
    close(fd);
    free(dirbuf);
    free(hjson);
    free(d);
    return st;
}

void cmf_append_free(cmf_appender *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n_add; i++) {
        free((char *)a->add[i].d.name);
        free(a->add[i].data);
    }
    free(a->add);
    free(a->old);
    free(a->replaced);
    free(a->masks);
    json_decref(a->header);
    cmf_close(a->f);
    free(a->path);
    free(a);
}
