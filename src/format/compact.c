/* compact.c - rewrite a file tightly (spec §9 "compaction = a plain rewrite"). */
#include <string.h>

#include "cortiq/writer.h"
#include "format/file_impl.h"

cmf_status cmf_compact(const char *in_path, const char *out_path, int drop_index, cmf_err *err) {
    cmf_file *f;
    cmf_status st = cmf_open(in_path, 0, &f, err);
    if (st) return st;
    cmf_writer *w = NULL;
    if ((st = cmf_writer_create(out_path, NULL, &w, err))) goto out;
    const cmf_header *h = cmf_file_header(f);
    if ((st = cmf_writer_set_header(w, h->json, h->json_len, err))) goto out;
    /* tensors in their physical order, so a compacted file reads sequentially like the original */
    for (size_t i = 0; i < cmf_file_tensor_count(f) && !st; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        st = cmf_writer_add_tensor_ref(w, t->name, (cmf_dtype)t->dtype, t->ndim, t->shape, t->data,
                                       t->nbytes, err);
    }
    if (st) goto out;
    const cmf_envelope *e = cmf_file_envelope(f);
    size_t len;
    const uint8_t *img = cmf_file_shard_bytes(f, 0, &len);
    if (e->masks_off && (st = cmf_writer_set_masks(w, img + e->masks_off, e->masks_len, err)))
        goto out;
    if (e->vocab_off && (st = cmf_writer_set_vocab(w, img + e->vocab_off, e->vocab_len, err)))
        goto out;
    if (!drop_index && e->index_off &&
        (st = cmf_writer_set_sparse_index(w, img + e->index_off, e->index_len, err)))
        goto out;
    st = cmf_writer_finish(w, err);
out:
    cmf_writer_free(w);
    cmf_close(f);
    return st;
}
