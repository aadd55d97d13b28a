/* arch_check.c - header fields that change what a model computes: the activation is chosen by
 * name, and every field this runtime does not implement is refused by name at load, never
 * ignored (the other implementation writes several; docs/FORMAT.md "Header fields"). */
#include <jansson.h>
#include <string.h>

#include "engine/model.h"

/* Present with a value other than the neutral one = a computation this runtime lacks. */
static bool non_neutral(json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return false;
    if (json_is_integer(v)) return json_integer_value(v) != 0;
    if (json_is_real(v)) return json_real_value(v) != 0.0;
    if (json_is_array(v)) return json_array_size(v) > 0;
    return true;
}

static const char *const k_refused_fields[] = {
    "mla",                          /* DeepSeek-V2 multi-head latent attention */
    "g3n",                          /* Gemma-3n AltUp / LAuReL / per-layer embeddings */
    "global_head_dim",              /* Gemma-4 dual-geometry attention */
    "num_global_kv_heads",          /* Gemma-4 */
    "global_partial_rotary_factor", /* Gemma-4 */
    "attn_v_norm",                  /* Gemma-4 scale-less V norm */
    "rope_freq_factors",            /* MiniCPM3 per-frequency rope divisors */
    "head_clusters",                /* hierarchical softmax head */
    "loop_final_norm",              /* looped transformer */
    "kda_gate_lower_bound",         /* Kimi delta attention */
};

cmf_status cq_arch_check(const cmf_header *h, const char *path, cq_act *act, cmf_err *err) {
    const char *name = h->arch.hidden_act;
    if (!name || !strcmp(name, "silu") || !strcmp(name, "swish"))
        *act = CQ_ACT_SILU;
    else if (!strcmp(name, "gelu_tanh") || !strcmp(name, "gelu_pytorch_tanh") ||
             !strcmp(name, "gelu_new") || !strcmp(name, "gelu_fast"))
        *act = CQ_ACT_GELU_TANH;
    else
        return cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                           "arch.hidden_act=\"%s\": this runtime computes silu and gelu_tanh only",
                           name);
    json_t *root = json_loads(h->json, JSON_DECODE_ANY, NULL);
    json_t *arch = json_object_get(root, "arch");
    cmf_status st = CMF_OK;
    for (size_t i = 0; !st && i < sizeof k_refused_fields / sizeof k_refused_fields[0]; i++)
        if (non_neutral(json_object_get(arch, k_refused_fields[i])))
            st = cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                             "arch.%s is set: this runtime does not implement it and will not "
                             "compute the model without it",
                             k_refused_fields[i]);
    json_t *loops = json_object_get(arch, "num_loops");
    if (!st && json_is_integer(loops) && json_integer_value(loops) > 1)
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                         "arch.num_loops=%lld: looped transformers are not implemented",
                         (long long)json_integer_value(loops));
    json_t *mscale = json_object_get(json_object_get(arch, "yarn"), "mscale_all_dim");
    if (!st && non_neutral(mscale))
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                         "arch.yarn.mscale_all_dim is set: DeepSeek YaRN attention scaling is not "
                         "implemented");
    /* LinearAttention layers run Gated DeltaNet (gdn.h); another linear core is refused */
    json_t *core = json_object_get(json_object_get(arch, "linear_core"), "kind");
    if (!st && core &&
        (!json_is_string(core) || strcmp(json_string_value(core), "gated_delta_net")))
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                         "arch.linear_core.kind is \"%s\": this runtime's LinearAttention layers "
                         "are gated_delta_net",
                         json_is_string(core) ? json_string_value(core) : "(not a string)");
    if (!st && json_is_true(json_object_get(json_object_get(arch, "moe"), "router_resonance")))
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                         "arch.moe.router_resonance is set: resonance routing is not implemented");
    json_decref(root);
    return st;
}
