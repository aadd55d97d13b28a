/* requant.c - `cortiq requant`: re-encode selected tensors of a CMF file in another dtype.
 * Selected tensors are dequantized and encoded again; everything else (norms, biases, the
 * masks, tokenizer and sparse-index sections, the skills registry) is carried byte for byte.
 * The output goes through the writer's temp file and rename, so in place is atomic. */
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "convert/arch_interop.h"
#include "convert/recode.h"
#include "cortiq/converter.h"
#include "cortiq/writer.h"

void cmf_requant_opts_default(cmf_requant_opts *o) {
    memset(o, 0, sizeof *o);
    o->to = CMF_DT_Q4TP;
}

/* The tensors the converter quantizes: every 2-D matrix of 32 elements or more. */
static bool default_selection(const cmf_tensor *t) {
    return t->ndim == 2 && t->shape[0] * t->shape[1] >= 32;
}

static bool selected(const cmf_requant_opts *o, const cmf_tensor *t) {
    if (!o->n_globs) return default_selection(t);
    for (size_t i = 0; i < o->n_globs; i++)
        if (!fnmatch(o->globs[i], t->name, 0)) return true;
    return false;
}

static bool is_float(cmf_dtype dt) {
    return dt == CMF_DT_F32 || dt == CMF_DT_F16 || dt == CMF_DT_BF16;
}

/* Why tensor t cannot become `to`, or NULL. */
static const char *refusal(cmf_dtype to, const cmf_tensor *t) {
    uint64_t numel = 0;
    if (!cmf_shape_numel(t->ndim, t->shape, &numel)) return "a zero dimension";
    if ((t->ndim < 2 || numel < 32) && to != CMF_DT_F16 && !(is_float(to) && t->dtype == to))
        return "1-D tensors and tensors under 32 elements are always f16 (spec §3.2)";
    return cq_dtype_shape_rule(to, t->ndim, t->shape);
}

static cmf_status produce(void *user, cmf_sink *sink, cmf_err *err) {
    const cq_recode *r = user;
    uint8_t *buf;
    size_t len;
    cmf_status st = cq_recode_run(r, &buf, &len, err);
    if (!st) st = cmf_sink_write(sink, buf, len, err);
    free(buf);
    return st;
}

/* quant_type: the label of the dtype that holds the most matrix weights after the requant. */
static cmf_status update_header(json_t *h, const cmf_file *f, const cq_recode *jobs,
                                const cmf_requant_opts *o, size_t n_recoded) {
    uint64_t by_dt[CMF_DT_COUNT] = {0};
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (!default_selection(t)) continue;
        cmf_dtype dt = jobs[i].src ? jobs[i].dtype : (cmf_dtype)t->dtype;
        by_dt[dt] += t->shape[0] * t->shape[1];
    }
    unsigned best = 0;
    for (unsigned d = 1; d < CMF_DT_COUNT; d++)
        if (by_dt[d] > by_dt[best]) best = d;
    json_object_set_new(h, "quant_type", json_string(cq_quant_type_label((cmf_dtype)best)));
    json_t *prov = json_object_get(h, "provenance");
    if (!json_is_object(prov)) {
        prov = json_object();
        json_object_set_new(h, "provenance", prov);
    }
    if (json_object_get(prov, "quant"))
        json_object_set_new(prov, "quant", json_string(cmf_dtype_name(best)));
    json_t *rq = json_object();
    json_object_set_new(rq, "to", json_string(cmf_dtype_name(o->to)));
    json_object_set_new(rq, "tensors", json_integer((json_int_t)n_recoded));
    json_t *sel = json_array();
    for (size_t i = 0; i < o->n_globs; i++)
        json_array_append_new(sel, json_string(o->globs[i]));
    json_object_set_new(rq, "selection", o->n_globs ? sel : json_string("2-D weights"));
    if (!o->n_globs) json_decref(sel);
    json_object_set_new(prov, "requant", rq);
    json_object_del(h, "section_hashes");
    return CMF_OK;
}

cmf_status cmf_requant(const char *in_path, const char *out_path, const cmf_requant_opts *o,
                       cmf_requant_stats *stats, cmf_err *err) {
    cmf_requant_opts dflt;
    if (!o) cmf_requant_opts_default(&dflt), o = &dflt;
    if (stats) memset(stats, 0, sizeof *stats);
    const cmf_dtype_traits *tt = cmf_dtype_get(o->to);
    if (!tt || tt->kind == CMF_DTK_RESERVED || tt->kind == CMF_DTK_UNKNOWN)
        return cmf_err_set(err, CMF_E_INVALID_ARG, in_path, "dtype %u is not a live dtype",
                           (unsigned)o->to);
    if (o->to == CMF_DT_Q1 && !o->allow_q1)
        return cmf_err_set(err, CMF_E_INVALID_ARG, in_path,
                           "q1 is only for 1-bit-trained models: it destroys a normal checkpoint; "
                           "opt in explicitly");
    cmf_file *f = NULL;
    cmf_status st = cmf_open(in_path, 0, &f, err);
    if (st) return st;
    const cmf_header *h = cmf_file_header(f);
    json_t *hdr = NULL;
    char *hjson = NULL;
    cmf_writer *w = NULL;
    size_t n = cmf_file_tensor_count(f), n_sel = 0, n_rec = 0;
    cq_recode *jobs = calloc(n ? n : 1, sizeof *jobs);
    if (!jobs) {
        st = cmf_err_set(err, CMF_E_NOMEM, in_path, "tensor list");
        goto out;
    }
    if (h->has_shard) {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, in_path,
                         "a shard (spec §10): requant rewrites one whole file");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (!selected(o, t)) continue;
        n_sel++;
        const char *why = refusal(o->to, t);
        if (why) {
            st = cmf_err_set(
                err, CMF_E_UNSUPPORTED, in_path, "tensor '%s' [%llu%s%llu] cannot be %s: %s%s",
                t->name, (unsigned long long)t->shape[0], t->ndim > 1 ? ", " : "",
                t->ndim > 1 ? (unsigned long long)t->shape[1] : 0ULL, cmf_dtype_name(o->to), why,
                o->n_globs ? "" : " (narrow the selection with --tensors)");
            goto out;
        }
        if (t->dtype == o->to) continue; /* already there: copied as is */
        jobs[i] = (cq_recode){.src = t, .dtype = o->to, .vbit_mean_bits = o->vbit_mean_bits};
        n_rec++;
    }
    if (o->n_globs && !n_sel) {
        st = cmf_err_set(err, CMF_E_NOT_FOUND, in_path, "no tensor matches --tensors %s",
                         o->globs[0]);
        goto out;
    }
    json_error_t je;
    hdr = json_loadb(h->json, h->json_len, 0, &je);
    if (!hdr) {
        st = cmf_err_set(err, CMF_E_PARSE, in_path, "header: %s", je.text);
        goto out;
    }
    update_header(hdr, f, jobs, o, n_rec);
    hjson = json_dumps(hdr, JSON_COMPACT);
    if (!hjson) {
        st = cmf_err_set(err, CMF_E_NOMEM, in_path, "header");
        goto out;
    }
    if ((st = cmf_writer_create(out_path, NULL, &w, err))) goto out;
    if ((st = cmf_writer_set_header(w, hjson, strlen(hjson), err))) goto out;
    for (size_t i = 0; i < n && !st; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (!jobs[i].src)
            st = cmf_writer_add_tensor_ref(w, t->name, (cmf_dtype)t->dtype, t->ndim, t->shape,
                                           t->data, t->nbytes, err);
        else
            st = cmf_writer_add_tensor_stream(w, t->name, o->to, t->ndim, t->shape, produce,
                                              &jobs[i], err);
    }
    const cmf_envelope *e = cmf_file_envelope(f);
    size_t len;
    const uint8_t *img = cmf_file_shard_bytes(f, 0, &len);
    if (!st && e->masks_off) st = cmf_writer_set_masks(w, img + e->masks_off, e->masks_len, err);
    if (!st && e->vocab_off) st = cmf_writer_set_vocab(w, img + e->vocab_off, e->vocab_len, err);
    if (!st && e->index_off)
        st = cmf_writer_set_sparse_index(w, img + e->index_off, e->index_len, err);
    if (!st) st = cmf_writer_finish(w, err);
    if (!st && stats) {
        stats->selected = n_sel;
        stats->recoded = n_rec;
        stats->in_bytes = len;
        struct stat sb;
        if (!stat(out_path, &sb)) stats->out_bytes = (uint64_t)sb.st_size;
    }
out:
    cmf_writer_free(w);
    free(hjson);
    json_decref(hdr);
    free(jobs);
    cmf_close(f);
    return st;
}
