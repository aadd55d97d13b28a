/* file.c - cmf_open: map a file and validate every rule of spec §1.2 and the structure of
 * every section before handing out a cmf_file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/mapfile.h"
#include "cortiq/hash.h"
#include "format/file_impl.h"

cmf_file *cmf__file_new(const char *path, size_t n_shards) {
    cmf_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->path = strdup(path);
    f->shards = calloc(n_shards, sizeof *f->shards);
    f->name_blocks = calloc(n_shards, sizeof *f->name_blocks);
    f->n_shards = n_shards;
    if (!f->path || !f->shards || !f->name_blocks) {
        free(f->path);
        free(f->shards);
        free(f->name_blocks);
        free(f);
        return NULL;
    }
    return f;
}

typedef struct section {
    const char *name;
    uint64_t off, len;
    bool present;
} section;

static cmf_status check_sections(const cmf_shard *sh, section *s, size_t *ns, cmf_err *err) {
    const cmf_envelope *e = &sh->env;
    const char *ctx = sh->path;
    section all[] = {
        {"header", e->header_off, e->header_len, true},
        {"directory", e->dir_off, e->dir_len, true},
        {"data", e->data_off, e->data_len, true},
        {"masks", e->masks_off, e->masks_len, e->masks_off != 0},
        {"vocab", e->vocab_off, e->vocab_len, e->vocab_off != 0},
        {"index", e->index_off, e->index_len, e->index_off != 0},
    };
    size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        section *x = &all[i];
        if (!x->present) {
            if (x->len != 0)
                return cmf_err_set(err, CMF_E_BOUNDS, ctx, "%s_off=0 (absent) but %s_len=%llu",
                                   x->name, x->name, (unsigned long long)x->len);
            continue;
        }
        if (x->off < CMF_ENVELOPE_SIZE && !(i == 2 && x->len == 0 && x->off == 0))
            return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                               "%s section at offset %llu overlaps the 128-byte envelope", x->name,
                               (unsigned long long)x->off);
        if (!ck_span_within(x->off, x->len, sh->size))
            return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                               "%s section [%llu, +%llu) extends past EOF (file is %zu bytes)",
                               x->name, (unsigned long long)x->off, (unsigned long long)x->len,
                               sh->size);
    }
    if (e->data_off % CMF_DATA_ALIGN)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx, "data_off=%llu is not a multiple of %d",
                           (unsigned long long)e->data_off, CMF_DATA_ALIGN);
    if (e->header_len > CMF_MAX_HEADER_LEN)
        return cmf_err_set(err, CMF_E_LIMIT, ctx, "header_len=%llu exceeds the cap of %llu bytes",
                           (unsigned long long)e->header_len,
                           (unsigned long long)CMF_MAX_HEADER_LEN);
    /* Live sections never share bytes, except that masks/vocab/index may sit inside the data
     * range after append-only growth (spec §9); those are checked against tensor spans later. */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (!all[i].present || !all[j].present || !all[i].len || !all[j].len) continue;
            if (i == 2 && j >= 3) continue;
            uint64_t a0 = all[i].off, a1 = a0 + all[i].len, b0 = all[j].off, b1 = b0 + all[j].len;
            if (a0 < b1 && b0 < a1)
                return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                                   "%s section [%llu, %llu) overlaps %s section [%llu, %llu)",
                                   all[i].name, (unsigned long long)a0, (unsigned long long)a1,
                                   all[j].name, (unsigned long long)b0, (unsigned long long)b1);
        }
    }
    memcpy(s, all, sizeof all);
    *ns = n;
    return CMF_OK;
}

static cmf_status check_hash(const char *ctx, const char *what, const uint8_t *p, uint64_t len,
                             uint64_t want, cmf_err *err) {
    if (!want) return CMF_OK;
    uint64_t got = cmf_hash64(p, len);
    if (got != want) {
        char a[17], b[17];
        cmf_hash64_to_hex(want, a);
        cmf_hash64_to_hex(got, b);
        return cmf_err_set(err, CMF_E_HASH, ctx, "%s hash64 mismatch: stored %s, bytes hash to %s",
                           what, a, b);
    }
    return CMF_OK;
}

/* masks/vocab/index inside the data range must not overlap any tensor of this shard. */
static cmf_status check_sections_vs_tensors(const cmf_file *f, const cmf_shard *sh,
                                            const section *s, size_t ns, cmf_err *err) {
    const cmf_envelope *e = &sh->env;
    for (size_t i = 3; i < ns; i++) {
        if (!s[i].present || !s[i].len) continue;
        uint64_t lo = s[i].off, hi = s[i].off + s[i].len;
        if (hi <= e->data_off || lo >= e->data_off + e->data_len) continue;
        for (size_t k = 0; k < sh->n_tensors; k++) {
            const cmf_tensor *t = &f->tensors[sh->first_tensor + k];
            uint64_t t0 = e->data_off + t->off, t1 = t0 + t->nbytes;
            if (t0 < hi && lo < t1)
                return cmf_err_set(err, CMF_E_BOUNDS, sh->path,
                                   "%s section [%llu, %llu) overlaps tensor '%s'", s[i].name,
                                   (unsigned long long)lo, (unsigned long long)hi, t->name);
        }
    }
    return CMF_OK;
}

static cmf_status check_features(const cmf_file *f, const cmf_shard *sh, cmf_err *err) {
    const char *ctx = sh->path;
    uint32_t feat = sh->env.required_features;
    bool has_masks = sh->env.masks_off != 0;
    if (has_masks != !!(feat & CMF_FEAT_BINARY_MASKS))
        return cmf_err_set(err, CMF_E_PARSE, ctx, "masks section %s but BINARY_MASKS (bit 1) is %s",
                           has_masks ? "present" : "absent",
                           (feat & CMF_FEAT_BINARY_MASKS) ? "set" : "clear");
    if (!(feat & CMF_FEAT_QUANT_2F)) {
        for (size_t k = 0; k < sh->n_tensors; k++) {
            const cmf_tensor *t = &f->tensors[sh->first_tensor + k];
            if (cmf_dtype_get(t->dtype)->quant_2f)
                return cmf_err_set(err, CMF_E_PARSE, ctx,
                                   "tensor '%s' is %s but QUANT_2F (bit 2) is clear", t->name,
                                   cmf_dtype_name(t->dtype));
        }
    }
    bool keyed = false;
    for (size_t i = 0; i < sh->header.n_skills; i++)
        keyed |= sh->header.skills[i].has_base_dir_hash;
    if (keyed != !!(feat & CMF_FEAT_SKILL_FILE))
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "%s skill record with base_dir_hash but SKILL_FILE (bit 6) is %s",
                           keyed ? "a" : "no", (feat & CMF_FEAT_SKILL_FILE) ? "set" : "clear");
    return CMF_OK;
}

cmf_status cmf__load_shard(cmf_file *f, cmf_shard *sh, unsigned flags, cmf_err *err) {
    const char *ctx = sh->path;
    cmf_status st;
    if (sh->size >= 4 && memcmp(sh->base, CMF_MAGIC, 4) != 0)
        return cmf_envelope_parse(sh->base, &sh->env, ctx, err); /* reports InvalidMagic */
    if (sh->size < CMF_ENVELOPE_SIZE)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                           "file is %zu bytes, smaller than the 128-byte envelope", sh->size);
    if ((st = cmf_envelope_parse(sh->base, &sh->env, ctx, err))) return st;
    section secs[6];
    size_t ns;
    if ((st = check_sections(sh, secs, &ns, err))) return st;
    const cmf_envelope *e = &sh->env;
    if (!(flags & CMF_OPEN_SKIP_META_HASH)) {
        if ((st = check_hash(ctx, "header", sh->base + e->header_off, e->header_len, e->header_hash,
                             err)))
            return st;
        if ((st =
                 check_hash(ctx, "directory", sh->base + e->dir_off, e->dir_len, e->dir_hash, err)))
            return st;
    }
    if ((st = cmf_header_parse((const char *)sh->base + e->header_off, e->header_len, &sh->header,
                               ctx, err)))
        return st;
    const cmf_header *h = &sh->header;
    struct {
        const char *name;
        uint64_t off, len, hash;
        bool has;
    } opt[] = {
        {"masks", e->masks_off, e->masks_len, h->masks_hash, h->has_masks_hash},
        {"vocab", e->vocab_off, e->vocab_len, h->vocab_hash, h->has_vocab_hash},
        {"index", e->index_off, e->index_len, h->index_hash, h->has_index_hash},
    };
    for (size_t i = 0; i < 3; i++) {
        /* The other implementation's `skill export` copies the specialist's section_hashes into
         * the standalone skill file and leaves the vocab out: a hash naming an absent section is
         * tolerated there only (docs/FORMAT.md, Skills), refused everywhere else. */
        bool skill_file = e->required_features & CMF_FEAT_SKILL_FILE;
        if (opt[i].has && !opt[i].off && !skill_file)
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "section_hashes.%s is set but the %s section is absent", opt[i].name,
                               opt[i].name);
        if (!(flags & CMF_OPEN_SKIP_META_HASH) && opt[i].off && opt[i].has) {
            char what[32];
            snprintf(what, sizeof what, "%s section", opt[i].name);
            if ((st = check_hash(ctx, what, sh->base + opt[i].off, opt[i].len, opt[i].hash, err)))
                return st;
        }
    }
    if ((st = cmf__parse_directory(f, sh, (size_t)(sh - f->shards), err))) return st;
    if ((st = check_features(f, sh, err))) return st;
    return check_sections_vs_tensors(f, sh, secs, ns, err);
}

/* Shard-independent work once every shard is loaded: names, masks, index, tensor hashes. */
static cmf_status finish_open(cmf_file *f, unsigned flags, cmf_err *err) {
    cmf_status st;
    if ((st = cmf__index_names(f, err))) return st;
    const cmf_shard *s0 = &f->shards[0];
    if (s0->env.masks_off && (st = cmf__parse_masks(s0, &f->masks, err))) return st;
    if (s0->env.index_off && (st = cmf__parse_sparse_index(s0, f->masks, &f->index, err)))
        return st;
    if (flags & CMF_OPEN_VERIFY_TENSORS) {
        for (size_t i = 0; i < f->n_tensors; i++) {
            const cmf_tensor *t = &f->tensors[i];
            if (cmf_hash64(t->data, t->nbytes) != t->hash)
                return cmf_err_set(err, CMF_E_HASH, f->shards[t->shard].path,
                                   "tensor '%s' hash64 mismatch", t->name);
        }
    }
    return CMF_OK;
}

cmf_status cmf__open_paths(const char *display, char **paths, size_t n, unsigned flags,
                           cmf_file **out, cmf_err *err);

cmf_status cmf__open_paths(const char *display, char **paths, size_t n, unsigned flags,
                           cmf_file **out, cmf_err *err) {
    *out = NULL;
    cmf_file *f = cmf__file_new(display, n);
    if (!f) return cmf_err_set(err, CMF_E_NOMEM, display, "opening");
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < n && !st; i++) {
        cmf_shard *sh = &f->shards[i];
        sh->path = strdup(paths[i]);
        if (!sh->path) {
            st = cmf_err_set(err, CMF_E_NOMEM, paths[i], "opening");
            break;
        }
        if ((st = cq_map_file(paths[i], &sh->base, &sh->size, err))) break;
        sh->mapped = 1;
        st = cmf__load_shard(f, sh, flags, err);
    }
    if (!st && n > 1) {
        for (size_t i = 0; i < n && !st; i++) {
            const cmf_header *h = &f->shards[i].header;
            if (!h->has_shard || h->shard_no != (int64_t)i + 1 || h->shard_count != (int64_t)n)
                st = cmf_err_set(
                    err, CMF_E_SHARD, f->shards[i].path,
                    "expected shard block {no=%zu, count=%zu}, header has %s{no=%lld, count=%lld}",
                    i + 1, n, h->has_shard ? "" : "none ", (long long)h->shard_no,
                    (long long)h->shard_count);
        }
    }
    if (!st) st = finish_open(f, flags, err);
    if (st) {
        cmf_close(f);
        return st;
    }
    *out = f;
    return CMF_OK;
}

cmf_status cmf_open(const char *path, unsigned flags, cmf_file **out, cmf_err *err) {
    char *paths[1] = {(char *)path};
    return cmf__open_paths(path, paths, 1, flags, out, err);
}

cmf_status cmf_open_memory(const void *buf, size_t len, const char *name, unsigned flags,
                           cmf_file **out, cmf_err *err) {
    *out = NULL;
    if (!name) name = "<memory>";
    cmf_file *f = cmf__file_new(name, 1);
    if (!f) return cmf_err_set(err, CMF_E_NOMEM, name, "opening");
    cmf_shard *sh = &f->shards[0];
    sh->path = strdup(name);
    sh->base = buf;
    sh->size = len;
    cmf_status st = sh->path ? cmf__load_shard(f, sh, flags, err)
                             : cmf_err_set(err, CMF_E_NOMEM, name, "opening");
    if (!st) st = finish_open(f, flags, err);
    if (st) {
        cmf_close(f);
        return st;
    }
    *out = f;
    return CMF_OK;
}

void cmf_close(cmf_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_shards; i++) {
        cmf_shard *sh = &f->shards[i];
        if (sh->mapped) cq_unmap_file(sh->base, sh->size);
        cmf_header_free(&sh->header);
        free(sh->path);
        free(f->name_blocks[i]);
    }
    cmf__free_masks(f->masks);
    cmf__free_sparse_index(f->index);
    free(f->shards);
    free(f->name_blocks);
    free(f->tensors);
    free(f->table);
    free(f->sorted);
    free(f->path);
    free(f);
}

const char *cmf_file_path(const cmf_file *f) {
    return f->path;
}
const cmf_envelope *cmf_file_envelope(const cmf_file *f) {
    return &f->shards[0].env;
}
const cmf_header *cmf_file_header(const cmf_file *f) {
    return &f->shards[0].header;
}
size_t cmf_file_tensor_count(const cmf_file *f) {
    return f->n_tensors;
}
const cmf_tensor *cmf_file_tensor_at(const cmf_file *f, size_t i) {
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}
const cmf_masks *cmf_file_masks(const cmf_file *f) {
    return f->masks;
}
const cmf_sparse_index *cmf_file_sparse_index(const cmf_file *f) {
    return f->index;
}

const uint8_t *cmf_file_vocab(const cmf_file *f, size_t *len) {
    const cmf_shard *s = &f->shards[0];
    if (!s->env.vocab_off) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = (size_t)s->env.vocab_len;
    return s->base + s->env.vocab_off;
}

size_t cmf_file_shard_count(const cmf_file *f) {
    return f->n_shards;
}
const char *cmf_file_shard_path(const cmf_file *f, size_t i) {
    return i < f->n_shards ? f->shards[i].path : NULL;
}
const cmf_envelope *cmf_file_shard_envelope(const cmf_file *f, size_t i) {
    return i < f->n_shards ? &f->shards[i].env : NULL;
}
const cmf_header *cmf_file_shard_header(const cmf_file *f, size_t i) {
    return i < f->n_shards ? &f->shards[i].header : NULL;
}
const uint8_t *cmf_file_shard_bytes(const cmf_file *f, size_t i, size_t *len) {
    if (i >= f->n_shards) return NULL;
    if (len) *len = f->shards[i].size;
    return f->shards[i].base;
}
