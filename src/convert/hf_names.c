/* hf_names.c - the names a converted checkpoint's tensors are kept under (hf_names.h). */
#include "convert/hf_names.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_PREFIX "model.language_model."

/* Add "model.<part>.*" of name to the list of prefixes left out (once each). */
static void note_left_out(hf_names *h, const char *name) {
    const char *dot = strchr(name + 6, '.'); /* after "model." */
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    char item[128];
    snprintf(item, sizeof item, "%.*s.*", (int)(len < 100 ? len : 100), name);
    for (const char *p = h->left_what; (p = strstr(p, item)); p += strlen(item))
        if ((p == h->left_what || p[-1] == ' ') && (p[strlen(item)] == ',' || !p[strlen(item)]))
            return;
    size_t used = strlen(h->left_what);
    snprintf(h->left_what + used, sizeof h->left_what - used, "%s%s", used ? ", " : "", item);
}

cmf_status hf_names_build(const cmf_st *st, const char *dir, hf_names *out, cmf_err *err) {
    memset(out, 0, sizeof *out);
    size_t n = cmf_st_tensor_count(st);
    bool wrapped = false;
    for (size_t i = 0; i < n && !wrapped; i++)
        wrapped = !strncmp(cmf_st_tensor_at(st, i)->name, TEXT_PREFIX, strlen(TEXT_PREFIX));
    out->tensor = calloc(n ? n : 1, sizeof *out->tensor);
    out->name = calloc(n ? n : 1, sizeof *out->name);
    if (!out->tensor || !out->name) {
        hf_names_free(out);
        return cmf_err_set(err, CMF_E_NOMEM, dir, "tensor names");
    }
    for (size_t i = 0; i < n; i++) {
        const cmf_st_tensor *t = cmf_st_tensor_at(st, i);
        const char *name = t->name;
        char *kept;
        if (wrapped && !strncmp(name, TEXT_PREFIX, strlen(TEXT_PREFIX))) {
            const char *rest = name + strlen(TEXT_PREFIX);
            if ((kept = malloc(strlen(rest) + 7))) strcpy(kept, "model."), strcat(kept, rest);
        } else if (wrapped && !strncmp(name, "model.", 6)) {
            out->left_out++;
            note_left_out(out, name);
            continue;
        } else {
            kept = strdup(name);
        }
        if (!kept) {
            hf_names_free(out);
            return cmf_err_set(err, CMF_E_NOMEM, dir, "tensor names");
        }
        out->tensor[out->n] = t;
        out->name[out->n++] = kept;
    }
    return CMF_OK;
}

const cmf_st_tensor *hf_names_find(const hf_names *h, const char *name) {
    for (size_t i = 0; i < h->n; i++)
        if (!strcmp(h->name[i], name)) return h->tensor[i];
    return NULL;
}

void hf_names_free(hf_names *h) {
    for (size_t i = 0; h->name && i < h->n; i++)
        free(h->name[i]);
    free(h->name);
    free(h->tensor);
    memset(h, 0, sizeof *h);
}
