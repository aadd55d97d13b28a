/* hub_select.h - which files of a repo a conversion needs (docs/HUB.md "What is fetched"). */
#ifndef CORTIQ_HUB_SELECT_H
#define CORTIQ_HUB_SELECT_H

#include "hub/hub_listing.h"

typedef struct hub_selection {
    size_t *idx; /* indices into the listing's files */
    size_t n, cap;
    bool gguf;          /* the selection is one .gguf (idx[0]) */
    bool sharded_index; /* model.safetensors.index.json is selected: its shards come after it */
} hub_selection;

/* Select by file (a repo path, taken alone) or by want. CMF_E_NOT_FOUND when the file is not
 * in the listing or the repo has nothing of the wanted kind. */
cmf_status hub_select(const hub_listing *l, const char *repo, const char *file,
                      cortiq_hub_want want, hub_selection *out, cmf_err *err);

/* Add the shards an index's weight_map names (index_json: the index file's text). */
cmf_status hub_select_index_shards(const hub_listing *l, const char *index_json, hub_selection *sel,
                                   cmf_err *err);

void hub_selection_free(hub_selection *s);

/* The default .gguf among names (top-level, no split parts, no mmproj): the first quant of the
 * preference order found, else the first name in byte order. SIZE_MAX when there is none. */
size_t hub_select_gguf(const char *const *names, size_t n);

#endif
