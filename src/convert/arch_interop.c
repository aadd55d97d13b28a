/* arch_interop.c - fields a reader needs to compute the model, derived once at write time. */
#include "convert/arch_interop.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

const char *cq_quant_type_label(cmf_dtype dt) {
    switch (dt) {
    case CMF_DT_F32:
        return "F32";
    case CMF_DT_F16:
        return "F16";
    case CMF_DT_BF16:
        return "BF16";
    case CMF_DT_Q8_ROW:
        return "Q8_ROW";
    case CMF_DT_Q8_2F:
        return "Q8_2F";
    case CMF_DT_Q4_BLOCK:
    case CMF_DT_Q4_TILED:
    case CMF_DT_Q4TP:
        return "Q4_BLOCK";
    default: /* vbit, vbit_ro and the 1-bit family */
        return "VBIT";
    }
}

static int64_t int_field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (json_is_integer(v)) return json_integer_value(v);
    if (json_is_real(v)) return (int64_t)json_real_value(v);
    return -1;
}

static const char *str_field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool starts_with(const char *s, const char *prefix) {
    return s && !strncmp(s, prefix, strlen(prefix));
}

/* Every reader keys the activation on one of two spellings; transformers has several for the
 * same functions. An unknown name is kept as it is, so a reader refuses it by name. */
static void canonical_act(json_t *arch) {
    const char *act = str_field(arch, "hidden_act");
    if (!act) return;
    static const char *const tanh_names[] = {"gelu_pytorch_tanh", "gelu_tanh", "gelu_new",
                                             "gelu_fast"};
    for (size_t i = 0; i < sizeof tanh_names / sizeof tanh_names[0]; i++)
        if (!strcmp(act, tanh_names[i])) {
            json_object_set_new(arch, "hidden_act", json_string("gelu_tanh"));
            return;
        }
    if (!strcmp(act, "swish")) json_object_set_new(arch, "hidden_act", json_string("silu"));
}

/* The period P when exactly the layers with (i + 1) % P == 0 are global and the rest sliding;
 * 0 when the schedule is not of that form. */
static int64_t sliding_period(json_t *types) {
    size_t n = json_array_size(types);
    int64_t period = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = json_string_value(json_array_get(types, i));
        if (t && !strcmp(t, "FullAttention")) {
            period = (int64_t)i + 1;
            break;
        }
    }
    if (period < 2) return 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = json_string_value(json_array_get(types, i));
        bool global = ((int64_t)i + 1) % period == 0;
        if (!t || strcmp(t, global ? "FullAttention" : "SlidingAttention")) return 0;
    }
    return period;
}

void cq_arch_complete(json_t *arch) {
    int64_t layers = int_field(arch, "num_layers");
    json_t *types = json_object_get(arch, "layer_types");
    if (!json_is_array(types) && layers > 0 && layers <= CQ_ARCH_MAX_LAYERS) {
        types = json_array();
        for (int64_t i = 0; i < layers; i++)
            json_array_append_new(types, json_string("FullAttention"));
        json_object_set_new(arch, "layer_types", types);
    }
    canonical_act(arch);
    const char *name = str_field(arch, "arch_name");
    int64_t hidden = int_field(arch, "hidden_size");
    /* Gemma scales the input embeddings by sqrt(hidden) (rounded to the model dtype in
     * transformers; the reader multiplies in f32) */
    if (starts_with(name, "gemma") && hidden > 0 && !json_object_get(arch, "embed_multiplier"))
        json_object_set_new(arch, "embed_multiplier", json_real(sqrt((double)hidden)));
    if (json_object_get(arch, "sliding_window") &&
        !json_object_get(arch, "sliding_window_pattern")) {
        int64_t period = sliding_period(types);
        if (period) json_object_set_new(arch, "sliding_window_pattern", json_integer(period));
    }
    bool linear = false;
    for (size_t i = 0; i < json_array_size(types); i++) {
        const char *t = json_string_value(json_array_get(types, i));
        linear |= t && !strcmp(t, "LinearAttention");
    }
    if (linear && !json_object_get(arch, "linear_core")) {
        json_t *core = json_object();
        json_object_set_new(core, "kind", json_string("gated_delta_net"));
        int64_t heads = int_field(arch, "linear_num_value_heads");
        int64_t vdim = int_field(arch, "linear_value_head_dim");
        json_object_set_new(core, "num_heads", json_integer(heads > 0 ? heads : 0));
        json_object_set_new(core, "value_head_dim", json_integer(vdim > 0 ? vdim : 0));
        json_object_set_new(arch, "linear_core", core);
    }
    /* YaRN's attention factor, written out: readers default differently when it is absent
     * (transformers and cortiq: 0.1 ln(factor) + 1; the other implementation: 1) */
    json_t *yarn = json_object_get(arch, "yarn");
    json_t *factor = json_object_get(yarn, "factor");
    if (json_is_number(factor) && !json_object_get(yarn, "attention_factor")) {
        double f = json_number_value(factor);
        json_object_set_new(yarn, "attention_factor", json_real(f <= 1 ? 1.0 : 0.1 * log(f) + 1.0));
    }
    json_t *moe = json_object_get(arch, "moe");
    if (!json_object_get(arch, "intermediate_size") && json_is_object(moe)) {
        json_t *mi = json_object_get(moe, "moe_intermediate_size");
        if (mi) json_object_set(arch, "intermediate_size", mi);
    }
}
