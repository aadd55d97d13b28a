/* writer.c - cmf_writer: lays out and writes CMF v2 files (spec §1, §3, §4, §8.1, §10),
 * streaming tensor payloads, through a temp file that is validated before the rename. */
#include "cortiq/writer.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "cortiq/hash.h"
#include "common/durable_io.h"
#include "format/layout.h"

#define SINK_BUF ((size_t)4 << 20)

typedef enum { SRC_COPY, SRC_REF, SRC_STREAM } src_kind;

typedef struct w_tensor {
    dir_entry d; /* name owned */
    src_kind kind;
    const void *data;
    size_t nbytes;
    cmf_tensor_producer producer;
    void *user;
    unsigned shard;
} w_tensor;

struct cmf_sink {
    int fd;
    const char *path;
    uint64_t pos; /* absolute file offset of the next byte */
    uint64_t written;
    cmf_hash64_state h;
    uint8_t *buf;
    size_t fill;
};

struct cmf_writer {
    char *path;
    cmf_writer_opts opts;
    json_t *header;
    w_tensor *t;
    size_t n, cap;
    uint8_t *masks, *vocab, *index;
    size_t masks_len, vocab_len, index_len;
    int has_masks, has_vocab, has_index;
    int finished;
    /* temp files of the current finish() */
    char **tmp;
    int *fds;
    unsigned n_tmp;
};

cmf_status cmf_writer_create(const char *path, const cmf_writer_opts *opts, cmf_writer **out,
                             cmf_err *err) {
    *out = NULL;
    cmf_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path)) || !(w->header = json_object())) {
        if (w) free(w->path);
        free(w);
        return cmf_err_set(err, CMF_E_NOMEM, path, "writer");
    }
    if (opts) w->opts = *opts;
    *out = w;
    return CMF_OK;
}

cmf_status cmf_writer_set_header(cmf_writer *w, const char *json, size_t len, cmf_err *err) {
    json_t *h;
    cmf_status st = layout_parse_header_template(json, len, &h, w->path, err);
    if (st) return st;
    json_decref(w->header);
    w->header = h;
    return CMF_OK;
}

static cmf_status add(cmf_writer *w, const char *name, cmf_dtype dtype, unsigned ndim,
                      const uint64_t *shape, src_kind kind, const void *data, size_t nbytes,
                      cmf_tensor_producer prod, void *user, cmf_err *err) {
    cmf_status st = layout_check_tensor(w->path, name, dtype, ndim, shape, err);
    if (st) return st;
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].d.name, name))
            return cmf_err_set(err, CMF_E_INVALID_ARG, w->path, "tensor '%s' added twice", name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        w_tensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) return cmf_err_set(err, CMF_E_NOMEM, w->path, "tensor list");
        w->t = nt;
        w->cap = cap;
    }
    w_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->d.name = strdup(name);
    if (!t->d.name) return cmf_err_set(err, CMF_E_NOMEM, w->path, "tensor name");
    t->d.dtype = (uint8_t)dtype;
    t->d.ndim = (uint8_t)ndim;
    for (unsigned i = 0; i < ndim; i++)
        t->d.shape[i] = shape[i];
    t->kind = kind;
    t->nbytes = nbytes;
    t->producer = prod;
    t->user = user;
    if (kind == SRC_COPY) {
        void *copy = malloc(nbytes ? nbytes : 1);
        if (!copy) {
            free((char *)t->d.name);
            return cmf_err_set(err, CMF_E_NOMEM, w->path, "copy of tensor '%s' (%zu bytes)", name,
                               nbytes);
        }
        memcpy(copy, data, nbytes);
        t->data = copy;
    } else {
        t->data = data;
    }
    w->n++;
    return CMF_OK;
}

cmf_status cmf_writer_add_tensor(cmf_writer *w, const char *name, cmf_dtype dtype, unsigned ndim,
                                 const uint64_t *shape, const void *data, size_t nbytes,
                                 cmf_err *err) {
    return add(w, name, dtype, ndim, shape, SRC_COPY, data, nbytes, NULL, NULL, err);
}
cmf_status cmf_writer_add_tensor_ref(cmf_writer *w, const char *name, cmf_dtype dtype,
                                     unsigned ndim, const uint64_t *shape, const void *data,
                                     size_t nbytes, cmf_err *err) {
    return add(w, name, dtype, ndim, shape, SRC_REF, data, nbytes, NULL, NULL, err);
}
cmf_status cmf_writer_add_tensor_stream(cmf_writer *w, const char *name, cmf_dtype dtype,
                                        unsigned ndim, const uint64_t *shape,
                                        cmf_tensor_producer producer, void *user, cmf_err *err) {
    if (!producer)
        return cmf_err_set(err, CMF_E_INVALID_ARG, w->path, "tensor '%s': NULL producer", name);
    return add(w, name, dtype, ndim, shape, SRC_STREAM, NULL, 0, producer, user, err);
}

static cmf_status set_blob(cmf_writer *w, uint8_t **dst, size_t *dlen, int *has, const void *b,
                           size_t len, cmf_err *err) {
    uint8_t *c = malloc(len ? len : 1);
    if (!c) return cmf_err_set(err, CMF_E_NOMEM, w->path, "section of %zu bytes", len);
    if (len) memcpy(c, b, len);
    free(*dst);
    *dst = c;
    *dlen = len;
    *has = 1;
    return CMF_OK;
}
cmf_status cmf_writer_set_masks(cmf_writer *w, const void *b, size_t len, cmf_err *err) {
    return set_blob(w, &w->masks, &w->masks_len, &w->has_masks, b, len, err);
}
cmf_status cmf_writer_set_vocab(cmf_writer *w, const void *b, size_t len, cmf_err *err) {
    return set_blob(w, &w->vocab, &w->vocab_len, &w->has_vocab, b, len, err);
}
cmf_status cmf_writer_set_sparse_index(cmf_writer *w, const void *b, size_t len, cmf_err *err) {
    return set_blob(w, &w->index, &w->index_len, &w->has_index, b, len, err);
}

/* ---- sink ---- */
static cmf_status sink_flush(cmf_sink *s, cmf_err *err) {
    if (!s->fill) return CMF_OK;
    cmf_status st = io_pwrite_all(s->fd, s->buf, s->fill, s->pos, s->path, err);
    s->pos += s->fill;
    s->fill = 0;
    return st;
}

cmf_status cmf_sink_write(cmf_sink *s, const void *data, size_t len, cmf_err *err) {
    cmf_hash64_update(&s->h, data, len);
    s->written += len;
    if (s->fill + len <= SINK_BUF) {
        memcpy(s->buf + s->fill, data, len);
        s->fill += len;
        return CMF_OK;
    }
    cmf_status st = sink_flush(s, err);
    if (st) return st;
    if (len >= SINK_BUF) {
        st = io_pwrite_all(s->fd, data, len, s->pos, s->path, err);
        s->pos += len;
        return st;
    }
    memcpy(s->buf, data, len);
    s->fill = len;
    return CMF_OK;
}

/* ---- finish ---- */
static uint64_t rough_size(const dir_entry *d) {
    uint64_t n = 1;
    for (unsigned i = 0; i < d->ndim; i++)
        n *= d->shape[i];
    return n * 4;
}

static unsigned plan_shards(cmf_writer *w) {
    unsigned shard = 0;
    uint64_t acc = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint64_t r = rough_size(&w->t[i].d);
        if (w->opts.shard_max_bytes && acc > 0 && acc + r > w->opts.shard_max_bytes) {
            shard++;
            acc = 0;
        }
        acc += r;
        w->t[i].shard = shard;
    }
    return shard + 1;
}

static const uint8_t k_zeros[CMF_DATA_ALIGN];

static cmf_status pad_to(cmf_sink *s, uint64_t target, cmf_err *err) {
    cmf_status st = sink_flush(s, err);
    if (st || s->pos >= target) return st;
    while (s->pos < target) {
        size_t n = target - s->pos < sizeof k_zeros ? (size_t)(target - s->pos) : sizeof k_zeros;
        if ((st = io_pwrite_all(s->fd, k_zeros, n, s->pos, s->path, err))) return st;
        s->pos += n;
    }
    return CMF_OK;
}

static cmf_status write_shard(cmf_writer *w, unsigned shard, unsigned count, const char *path,
                              int fd, size_t *done, cmf_err *err) {
    cmf_status st;
    size_t first = 0, n = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->t[i].shard != shard) continue;
        if (!n) first = i;
        n++;
    }
    bool first_shard = shard == 0;
    bool has_masks = first_shard && w->has_masks, has_vocab = first_shard && w->has_vocab,
         has_index = first_shard && w->has_index;
    header_plan plan = {
        .masks_hash = has_masks ? cmf_hash64(w->masks, w->masks_len) : 0,
        .vocab_hash = has_vocab ? cmf_hash64(w->vocab, w->vocab_len) : 0,
        .index_hash = has_index ? cmf_hash64(w->index, w->index_len) : 0,
        .shard_no = count > 1 ? shard + 1 : 0,
        .shard_count = count > 1 ? count : 0,
        .strip_shard1_only = !first_shard,
    };
    /* hash64 of an empty section is 0, which reads as "absent": fine, nothing to protect */
    char *hjson = NULL;
    size_t hlen;
    if ((st = layout_header_json(w->header, &plan, &hjson, &hlen, path, err))) return st;

    dir_entry *d = calloc(n ? n : 1, sizeof *d);
    if (!d) {
        free(hjson);
        return cmf_err_set(err, CMF_E_NOMEM, path, "directory");
    }
    for (size_t k = 0; k < n; k++)
        d[k] = w->t[first + k].d;
    cmf_envelope e;
    memset(&e, 0, sizeof e);
    e.header_off = CMF_ENVELOPE_SIZE;
    e.header_len = hlen;
    e.dir_off = e.header_off + hlen;
    e.dir_len = layout_directory_size(d, n);
    e.data_off = ck_align_up(e.dir_off + e.dir_len, CMF_DATA_ALIGN);

    cmf_sink s = {.fd = fd, .path = path, .pos = e.header_off};
    s.buf = malloc(SINK_BUF);
    uint8_t *dirbuf = NULL;
    if (!s.buf) {
        st = cmf_err_set(err, CMF_E_NOMEM, path, "write buffer");
        goto out;
    }
    if ((st = io_pwrite_all(fd, hjson, hlen, e.header_off, path, err))) goto out;
    s.pos = e.data_off;
    uint64_t rel = 0;
    for (size_t k = 0; k < n; k++) {
        w_tensor *t = &w->t[first + k];
        rel = ck_align_up(rel, CMF_TENSOR_ALIGN);
        if ((st = pad_to(&s, e.data_off + rel, err))) goto out;
        cmf_hash64_init(&s.h);
        s.written = 0;
        if (t->kind == SRC_STREAM)
            st = t->producer(t->user, &s, err);
        else
            st = cmf_sink_write(&s, t->data, t->nbytes, err);
        if (st) goto out;
        d[k].off = rel;
        d[k].nbytes = s.written;
        d[k].hash = cmf_hash64_final(&s.h);
        rel += s.written;
        (*done)++;
        if (w->opts.progress) w->opts.progress(w->opts.progress_user, *done, w->n, s.pos + s.fill);
    }
    if ((st = sink_flush(&s, err))) goto out;
    e.data_len = rel;
    uint64_t pos = e.data_off + rel;
    struct {
        int has;
        const uint8_t *b;
        size_t len;
        uint64_t *off, *len_out;
    } secs[] = {
        {has_masks, w->masks, w->masks_len, &e.masks_off, &e.masks_len},
        {has_vocab, w->vocab, w->vocab_len, &e.vocab_off, &e.vocab_len},
        {has_index, w->index, w->index_len, &e.index_off, &e.index_len},
    };
    for (size_t i = 0; i < 3; i++) {
        if (!secs[i].has) continue;
        pos = ck_align_up(pos, CMF_TENSOR_ALIGN);
        if ((st = pad_to(&s, pos, err))) goto out;
        if ((st = io_pwrite_all(fd, secs[i].b, secs[i].len, pos, path, err))) goto out;
        *secs[i].off = pos;
        *secs[i].len_out = secs[i].len;
        pos += secs[i].len;
        s.pos = pos;
    }
    dirbuf = malloc(e.dir_len);
    if (!dirbuf) {
        st = cmf_err_set(err, CMF_E_NOMEM, path, "directory");
        goto out;
    }
    layout_write_directory(d, n, dirbuf);
    if ((st = io_pwrite_all(fd, dirbuf, e.dir_len, e.dir_off, path, err))) goto out;
    if ((st = io_pwrite_all(fd, k_zeros, (size_t)(e.data_off - e.dir_off - e.dir_len),
                            e.dir_off + e.dir_len, path, err)))
        goto out;
    e.required_features = layout_features(d, n, has_masks, first_shard ? w->header : NULL);
    e.header_hash = cmf_hash64(hjson, hlen);
    e.dir_hash = cmf_hash64(dirbuf, e.dir_len);
    uint8_t env[CMF_ENVELOPE_SIZE];
    cmf_envelope_write(&e, env);
    if ((st = io_pwrite_all(fd, env, sizeof env, 0, path, err))) goto out;
    if (ftruncate(fd, (off_t)pos) != 0)
        st = cmf_err_set(err, CMF_E_IO, path, "cannot set file size");
    if (!st) st = io_fsync(fd, path, err);
out:
    free(dirbuf);
    free(s.buf);
    free(d);
    free(hjson);
    return st;
}

static void drop_temps(cmf_writer *w) {
    for (unsigned i = 0; i < w->n_tmp; i++) {
        if (w->fds && w->fds[i] >= 0) close(w->fds[i]);
        if (w->tmp && w->tmp[i]) {
            unlink(w->tmp[i]);
            free(w->tmp[i]);
        }
    }
    free(w->tmp);
    free(w->fds);
    w->tmp = NULL;
    w->fds = NULL;
    w->n_tmp = 0;
}

cmf_status cmf_writer_finish(cmf_writer *w, cmf_err *err) {
    if (w->finished) return cmf_err_set(err, CMF_E_INVALID_ARG, w->path, "writer already finished");
    unsigned count = plan_shards(w);
    char **targets = calloc(count, sizeof *targets);
    w->tmp = calloc(count, sizeof *w->tmp);
    w->fds = calloc(count, sizeof *w->fds);
    if (!targets || !w->tmp || !w->fds) {
        free(targets);
        drop_temps(w);
        return cmf_err_set(err, CMF_E_NOMEM, w->path, "writer");
    }
    w->n_tmp = count;
    for (unsigned i = 0; i < count; i++)
        w->fds[i] = -1;
    cmf_status st = CMF_OK;
    /* base name for shards: "model.cmf" -> "model" */
    size_t plen = strlen(w->path);
    for (unsigned i = 0; i < count && !st; i++) {
        if (count == 1) {
            targets[i] = strdup(w->path);
        } else {
            size_t cap = plen + 24;
            targets[i] = malloc(cap);
            if (targets[i]) {
                char *base = strdup(w->path);
                if (base && plen > 4 && !strcmp(base + plen - 4, ".cmf")) base[plen - 4] = '\0';
                if (base) cmf_shard_name(targets[i], cap, base, i + 1, count);
                free(base);
            }
        }
        if (!targets[i]) st = cmf_err_set(err, CMF_E_NOMEM, w->path, "shard names");
    }
    size_t done = 0;
    for (unsigned i = 0; i < count && !st; i++) {
        if ((st = io_create_temp(targets[i], &w->fds[i], &w->tmp[i], err))) break;
        st = write_shard(w, i, count, targets[i], w->fds[i], &done, err);
    }
    /* re-open every temp file: the writer never publishes a file its own reader refuses */
    for (unsigned i = 0; i < count && !st; i++) {
        cmf_file *f;
        st = cmf_open(w->tmp[i], 0, &f, err);
        if (st && err) {
            char msg[CMF_ERR_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", err->msg);
            cmf_err_set(err, st, targets[i], "written file failed validation (nothing kept): %s",
                        msg);
        }
        cmf_close(f);
    }
    for (unsigned i = 0; i < count && !st; i++) {
        close(w->fds[i]);
        w->fds[i] = -1;
        if ((st = io_commit_rename(w->tmp[i], targets[i], err))) break;
        free(w->tmp[i]);
        w->tmp[i] = NULL;
    }
    drop_temps(w);
    for (unsigned i = 0; i < count; i++)
        free(targets[i]);
    free(targets);
    if (!st) w->finished = 1;
    return st;
}

void cmf_writer_free(cmf_writer *w) {
    if (!w) return;
    drop_temps(w);
    for (size_t i = 0; i < w->n; i++) {
        free((char *)w->t[i].d.name);
        if (w->t[i].kind == SRC_COPY) free((void *)w->t[i].data);
    }
    free(w->t);
    json_decref(w->header);
    free(w->masks);
    free(w->vocab);
    free(w->index);
    free(w->path);
    free(w);
}
