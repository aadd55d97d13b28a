/* mtp_names.c - canonical names of an MTP head's tensors (mtp_names.h, spec §2.1).
 *   Qwen3-Next / Qwen3.5         DeepSeek-V3 (layer N = num_hidden_layers + i)   canonical
 *   mtp.pre_fc_norm_embedding    model.layers.N.enorm                           model.mtp.enorm
 *   mtp.pre_fc_norm_hidden       model.layers.N.hnorm                           model.mtp.hnorm
 *   mtp.fc                       model.layers.N.eh_proj                         model.mtp.eh_proj
 *   mtp.norm                     model.layers.N.shared_head.norm                model.mtp.norm
 *   mtp.layers.{i}.*             model.layers.N.{self_attn,mlp,*_layernorm}.*
 * model.mtp.layers.{i}.* (lm_head, embed_tokens) model.layers.N.{shared_head.head,embed_tokens}
 * dropped: shared DeepSeek keeps enorm / hnorm / eh_proj / shared_head per depth; the spec has one
 * set, so depths after the first keep theirs inside their layer (model.mtp.layers.{i}.enorm...). */
#include "convert/mtp_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t int_key(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

int64_t cq_mtp_config_layers(json_t *cfg) {
    json_t *sources[] = {cfg, json_object_get(cfg, "text_config")};
    for (int i = 0; i < 2; i++) {
        int64_t n = int_key(sources[i], "mtp_num_hidden_layers");
        if (n <= 0) n = int_key(sources[i], "num_nextn_predict_layers");
        if (n > 0) return n;
    }
    return 0;
}

static char *head_name(const char *role) {
    size_t n = strlen("model.mtp.") + strlen(role) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "model.mtp.%s", role);
    return s;
}

static char *printed(const char *fmt, long long i, const char *rest) {
    size_t n = strlen(fmt) + strlen(rest) + 32;
    char *s = malloc(n);
    if (s) snprintf(s, n, fmt, i, rest);
    return s;
}

/* The head's own tensors (norms, projection) by their role suffix; NULL otherwise. */
static const char *head_role(const char *rest, bool deepseek) {
    static const char *const qwen[][2] = {{"pre_fc_norm_embedding.weight", "enorm.weight"},
                                          {"pre_fc_norm_hidden.weight", "hnorm.weight"},
                                          {"fc.weight", "eh_proj.weight"},
                                          {"norm.weight", "norm.weight"}};
    static const char *const ds[][2] = {{"enorm.weight", "enorm.weight"},
                                        {"hnorm.weight", "hnorm.weight"},
                                        {"eh_proj.weight", "eh_proj.weight"},
                                        {"shared_head.norm.weight", "norm.weight"}};
    for (int k = 0; k < 4; k++) {
        const char *const *r = deepseek ? ds[k] : qwen[k];
        if (!strcmp(rest, r[0])) return r[1];
    }
    return NULL;
}

char *cq_mtp_canonical(const char *name, int64_t n_layers, int64_t n_mtp, bool *drop) {
    *drop = false;
    if (n_mtp <= 0) return NULL;
    long long i;
    int used = 0;
    if (!strncmp(name, "mtp.", 4)) { /* Qwen3-Next / Qwen3.5 */
        if (sscanf(name, "mtp.layers.%lld.%n", &i, &used) == 1 && used)
            return printed("model.mtp.layers.%lld.%s", i, name + used);
        const char *role = head_role(name + 4, false);
        return role ? head_name(role) : NULL;
    }
    if (sscanf(name, "model.layers.%lld.%n", &i, &used) != 1 || !used || i < n_layers ||
        i >= n_layers + n_mtp)
        return NULL;
    long long depth = i - n_layers;
    const char *rest = name + used;
    if (!strcmp(rest, "embed_tokens.weight") || !strcmp(rest, "shared_head.head.weight")) {
        *drop = true;
        return NULL;
    }
    const char *role = head_role(rest, true);
    if (role && depth == 0) return head_name(role);
    return printed("model.mtp.layers.%lld.%s", depth, rest);
}
