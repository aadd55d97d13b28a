#include "format/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/err.h"
#include "cortiq/hash.h"
#include "format/utf8.h"

cmf_status layout_check_tensor(const char *ctx, const char *name, cmf_dtype dtype, unsigned ndim,
                               const uint64_t *shape, cmf_err *err) {
    size_t n = strlen(name);
    if (n == 0 || n > UINT16_MAX)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "tensor name length %zu not in [1, 65535]",
                           n);
    if (!utf8_valid_no_nul((const uint8_t *)name, n))
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "tensor name '%s' is not valid UTF-8",
                           name);
    if (ndim > CMF_MAX_DIMS)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "tensor '%s': ndim=%u > %d", name, ndim,
                           CMF_MAX_DIMS);
    for (unsigned i = 0; i < ndim; i++)
        if (shape[i] == 0 || shape[i] > UINT32_MAX)
            return cmf_err_set(err, CMF_E_INVALID_ARG, ctx,
                               "tensor '%s': shape[%u]=%llu not in [1, 2^32)", name, i,
                               (unsigned long long)shape[i]);
    const cmf_dtype_traits *t = cmf_dtype_get(dtype);
    if (!t || t->kind == CMF_DTK_UNKNOWN || t->kind == CMF_DTK_RESERVED)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "tensor '%s': dtype %u is not writable",
                           name, (unsigned)dtype);
    uint64_t lo, hi;
    char what[128];
    snprintf(what, sizeof what, "%s: tensor '%.80s'", ctx, name);
    cmf_status st = cmf_dtype_nbytes(dtype, ndim, shape, &lo, &hi, what, err);
    if (st) {
        if (err) err->code = CMF_E_UNSUPPORTED;
        return CMF_E_UNSUPPORTED;
    }
    return CMF_OK;
}

uint64_t layout_directory_size(const dir_entry *e, size_t n) {
    uint64_t pool = 0;
    for (size_t i = 0; i < n; i++)
        pool += strlen(e[i].name);
    return 16 + (uint64_t)n * CMF_DIR_RECORD_SIZE + pool;
}

void layout_write_directory(const dir_entry *e, size_t n, uint8_t *out) {
    uint64_t pool_off = 16 + (uint64_t)n * CMF_DIR_RECORD_SIZE;
    st_u64(out, n);
    st_u64(out + 8, pool_off);
    uint32_t name_off = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *r = out + 16 + i * CMF_DIR_RECORD_SIZE;
        size_t len = strlen(e[i].name);
        memset(r, 0, CMF_DIR_RECORD_SIZE);
        st_u32(r, name_off);
        st_u16(r + 4, (uint16_t)len);
        r[6] = e[i].dtype;
        r[7] = e[i].ndim;
        for (unsigned k = 0; k < e[i].ndim; k++)
            st_u32(r + 8 + 4 * k, (uint32_t)e[i].shape[k]);
        st_u64(r + 32, e[i].off);
        st_u64(r + 40, e[i].nbytes);
        st_u64(r + 48, e[i].hash);
        memcpy(out + pool_off + name_off, e[i].name, len);
        name_off += (uint32_t)len;
    }
}

static int set_hash(json_t *o, const char *key, uint64_t h) {
    char hex[17];
    cmf_hash64_to_hex(h, hex);
    return json_object_set_new(o, key, json_string(hex));
}

cmf_status layout_header_json(json_t *tmpl, const header_plan *p, char **out, size_t *len,
                              const char *ctx, cmf_err *err) {
    json_t *h = json_deep_copy(tmpl);
    json_t *hashes = json_object();
    if (!h || !hashes) {
        json_decref(h);
        json_decref(hashes);
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "header");
    }
    int bad = 0;
    if (!json_object_get(h, "format")) bad |= json_object_set_new(h, "format", json_string("cmf"));
    if (!json_object_get(h, "version"))
        bad |= json_object_set_new(h, "version", json_integer(CMF_VERSION));
    if (p->masks_hash) bad |= set_hash(hashes, "masks", p->masks_hash);
    if (p->vocab_hash) bad |= set_hash(hashes, "vocab", p->vocab_hash);
    if (p->index_hash) bad |= set_hash(hashes, "index", p->index_hash);
    if (json_object_size(hashes))
        bad |= json_object_set_new(h, "section_hashes", hashes);
    else {
        json_decref(hashes);
        json_object_del(h, "section_hashes");
    }
    if (p->shard_count) {
        json_t *s = json_pack("{s:I,s:I}", "no", (json_int_t)p->shard_no, "count",
                              (json_int_t)p->shard_count);
        bad |= !s || json_object_set_new(h, "shard", s);
    }
    if (p->strip_shard1_only) {
        bad |= json_object_set_new(h, "tokenizer_config", json_null());
        json_object_del(h, "skills");
    }
    char *s = bad ? NULL : json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!s) return cmf_err_set(err, CMF_E_NOMEM, ctx, "serializing header JSON");
    *out = s;
    *len = strlen(s);
    return CMF_OK;
}

uint32_t layout_features(const dir_entry *e, size_t n, bool has_masks, json_t *header) {
    uint32_t f = CMF_FEAT_TENSOR_DIR;
    if (has_masks) f |= CMF_FEAT_BINARY_MASKS;
    for (size_t i = 0; i < n; i++)
        if (cmf_dtype_get(e[i].dtype)->quant_2f) f |= CMF_FEAT_QUANT_2F;
    json_t *skills = json_object_get(header, "skills");
    size_t k;
    json_t *s;
    json_array_foreach(skills, k, s) {
        json_t *h = json_object_get(s, "base_dir_hash");
        if (h && !json_is_null(h)) f |= CMF_FEAT_SKILL_FILE;
    }
    return f;
}

cmf_status layout_parse_header_template(const char *json, size_t len, json_t **out, const char *ctx,
                                        cmf_err *err) {
    json_error_t jerr;
    json_t *h = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!h)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "header JSON invalid at col %d: %s",
                           jerr.column, jerr.text);
    if (!json_is_object(h)) {
        json_decref(h);
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "header JSON must be an object");
    }
    *out = h;
    return CMF_OK;
}
