/* model.h - the runtime's view of a CMF model: configuration (from the header, checked
 * against the tensors), weight views into the mmap, rope tables. Internal to src/engine. */
#ifndef CORTIQ_ENGINE_MODEL_H
#define CORTIQ_ENGINE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "cortiq/engine.h"
#include "quant/kernels_engine.h"
#include "engine/pool.h"

/* Caps on header values an attacker controls (checked before any allocation). */
#define CQ_MAX_HIDDEN   65536
#define CQ_MAX_LAYERS   1024
#define CQ_MAX_HEADS    1024
#define CQ_MAX_HEAD_DIM 1024
#define CQ_MAX_VOCAB    (1u << 22)
#define CQ_MAX_FFN      (1u << 20)
#define CQ_MAX_EXPERTS  4096 /* arch.moe.num_experts */

/* Per chunk row, a session keeps the cos / sin of this many RoPE tables (Gemma 3's local and
 * global ones); a model with more shares the slots (each entry is tagged, session.h). */
#define CQ_ROPE_SLOTS 2

typedef enum { CQ_ACT_SILU, CQ_ACT_GELU_TANH } cq_act;

typedef struct cq_gdn cq_gdn;           /* a Gated DeltaNet layer's weights (gdn.h) */
typedef struct cq_mtp_head cq_mtp_head; /* the multi-token-prediction head (mtp.h) */

/* One routed expert: a gated MLP of its own width; each matrix keeps its own dtype. */
typedef struct cq_expert {
    cmf_qmat wg, wu, wd;
    uint32_t ffn;
} cq_expert;

/* A mixture-of-experts FFN (spec §2.2): o = sum over the selected experts of w_e * expert_e(x)
 * plus the shared expert, weighted by sigmoid(shared_gate x) when that tensor exists. */
typedef struct cq_moe {
    uint32_t n_experts;   /* experts present (a prefix 0 .. n-1 of moe.num_experts) */
    uint32_t top_k;       /* clamped to n_experts */
    cmf_qmat router;      /* [n_experts, hidden] */
    float *expert_bias;   /* [n_experts], selection only; NULL when absent */
    cq_expert *experts;   /* [n_experts] */
    bool has_shared;      /* shared expert present */
    cq_expert shared;     /* always added */
    bool has_shared_gate; /* shared_gate present: its weight is sigmoid(shared_gate x), else 1 */
    cmf_qmat shared_gate; /* [1, hidden] */
    bool norm_topk_prob, router_sigmoid;
    float routed_scaling; /* applied to the selected weights (1 by default) */
} cq_moe;

/* self_attn.g_proj (spec §2): the attention output times softplus(g_proj xn) before o_proj, xn
 * being the layer's normed input (q_proj's); one gate per head or one per channel. */
typedef enum { CQ_OUT_GATE_NONE, CQ_OUT_GATE_HEAD, CQ_OUT_GATE_CHANNEL } cq_out_gate;

typedef struct cq_layer {
    bool sliding;
    uint32_t n_heads; /* query heads of this layer */
    float rope_theta;
    uint32_t rot_dim;      /* rotated dims per head (partial rotary) */
    const float *inv_freq; /* rot_dim/2 frequencies (owned by the model) */
    float rope_mscale;     /* YaRN attention factor applied to cos/sin (1 otherwise) */
    uint32_t rope_slot;    /* the session's cos / sin cache of this table (forward.c rope_cs):
                              distinct tables in turn, < CQ_ROPE_SLOTS */
    cmf_qmat wq, wk, wv, wo, wg, wu, wd;
    float *bq, *bk, *bv;                /* NULL when absent */
    float *attn_norm, *q_norm, *k_norm; /* weights with gemma's (1+w) folded in */
    float *post_attn_norm;              /* gemma: after attention, before the residual add */
    float *ffn_norm;                    /* before the MLP (llama: post_attention_layernorm) */
    float *post_ffn_norm;               /* gemma: after the MLP */
    uint32_t ffn;                       /* intermediate size from the tensor shape (spec §11) */
    cq_moe *moe; /* a MoE FFN instead of wg/wu/wd when the layer has a router; NULL otherwise */
    cq_gdn *gdn; /* LinearAttention: Gated DeltaNet instead of attention (gdn.h); NULL otherwise */
    bool attn_gate; /* q_proj is twice as wide: per head [query; gate], att *= sigmoid(gate) */
    cq_out_gate out_gate; /* g_proj's kind (its rows: n_heads, or n_heads * head_dim) */
    cmf_qmat wgp;         /* g_proj [rows, hidden] when out_gate is not NONE */
} cq_layer;

/* The n elements of tensor t (any shape, any dtype) dequantized into a new float array;
 * CMF_E_PARSE (naming path and tensor) when t does not have n elements. */
cmf_status cq_load_floats(const cmf_tensor *t, uint64_t n, const char *path, float **out,
                          cmf_err *err);

/* The matrices a decode step streams (model_prefetch.c): each layer's seven, eight with an
 * attention output gate (g_proj) (a LinearAttention layer: its Gated DeltaNet projections too;
 * a MoE layer: the router, the shared expert and its gate; its routed experts stay lazy, read as
 * tokens select them), the MTP head's block with with_mtp, and the head (the embedding table
 * too when tied; an untied table is read a row per token). out: room for
 * CQ_DECODE_MATS_PER_LAYER per layer (the MTP block's included) + 1. Returns their number. */
#define CQ_DECODE_MATS_PER_LAYER 20
size_t cq_decode_mats(cortiq_model *m, bool with_mtp, cmf_qmat **out);

/* The decode copies of the decode step's integer matrices that batch_lanes names
 * (cortiq_load_opts.batch_lanes, model_lanes.c), in one allocation (m->lanes, m->lanes_bytes;
 * none on some tiers), their file pages released. Runs at the end of the load, before any
 * window moves onto 2 MiB pages. cq_model_free_lanes: detaches and frees them (before the
 * matrices are freed). */
void cq_model_build_lanes(cortiq_model *m, int batch_lanes);
void cq_model_free_lanes(cortiq_model *m);

/* Choose the activation from arch.hidden_act and refuse header fields whose computation this
 * runtime lacks (src/engine/arch_check.c). */
cmf_status cq_arch_check(const cmf_header *h, const char *path, cq_act *act, cmf_err *err);

struct cortiq_model {
    cmf_file *file;
    cq_pool *pool;
    uint32_t hidden, n_layers, n_heads, n_kv, head_dim, vocab, max_pos;
    uint32_t sliding_window; /* 0 = none */
    float eps, embed_scale, logit_scale, attn_scale, final_softcap, attn_softcap;
    cq_act act;
    cmf_qmat embed, head;
    float *final_norm;
    cq_layer *layers;  /* n_layers, then the MTP head's block when mtp is set */
    cq_mtp_head *mtp;  /* arch.mtp (spec §2.1): its norms and eh_proj; NULL when absent */
    float *freq_store; /* all inv_freq tables */
    uint64_t weight_bytes;
    uint64_t token_macs; /* cortiq_model_token_macs */
    unsigned kflags;     /* cmf_matmul_ex flags for every product (CMF_KF_INT8_ACT or 0) */
    cortiq_kv_type kv;   /* KV cache type of new sessions (cortiq_load_opts.kv) */
    bool prefill_qact;   /* batched products use cmf_matmul_qact where the weights allow */
    /* extra cmf_matmul_ex flags for integer-coded weights (q8_row, q4_*, vbit*) */
    unsigned q4flags;
    unsigned bf16flags; /* extra flags for batches on bf16 weights (CMF_KF_BF16_ACT or 0) */
    bool huge_pages;    /* cortiq_model_prefetch moves the matrices onto 2 MiB pages */
    /* 2 MiB windows of the decode matrices left on file pages by cortiq_model_page_in, moved
     * by cortiq_model_move_step: moves[moved .. n_moves) */
    uintptr_t *moves;
    size_t n_moves, moved;
    uint64_t lanes_bytes;  /* decode copies (model_lanes.c): their bytes */
    void *lanes;           /* their one allocation (lanes_bytes), or NULL */
    cmf_qmat **lanes_mats; /* the matrices reading it */
    size_t n_lanes_mats;
    /* skill overlay (skill_overlay.c): the active skill id (NULL = backbone) or a blend, and
     * the blended f32 working tensors the model owns */
    const char *skill;
    cortiq_skill_weight *blend;
    size_t n_blend;
    cmf_tensor **blended;
    size_t n_blended;
    /* per task mask: its unmeasured-quality warning was printed (once per model; atomic) */
    unsigned char *task_warned;
};

#endif
