/* gdn.h - Gated DeltaNet, the linear-attention token mixer of Qwen3-Next and Qwen3.5 (a layer
 * tagged LinearAttention in arch.layer_types), a sibling of attention in a layer.
 *
 * Per token, with nk key heads of dk dims and nv value heads of dv dims (each key head serves
 * r = nv / nk consecutive value heads):
 *   [q; k; v] = silu(causal depthwise conv of width K over the projection Wqkv x)
 *   q, k      l2-normalised per head (q also scaled by 1/sqrt(dk))
 *   beta      = sigmoid(Wb x),  g = -exp(A_log) * softplus(Wa x + dt_bias)   (per value head)
 *   S_h      <- exp(g) S_h;  S_h += k (beta (v - S_h^T k))^T;  o_h = S_h^T q   (S_h: [dk, dv])
 *   o         = Wout (rmsnorm(o_h) * w * silu(z_h)),  z = Wz x
 * The projections are either Qwen3.5's separate in_proj_qkv / in_proj_z / in_proj_b /
 * in_proj_a or Qwen3-Next's fused in_proj_qkvz / in_proj_ba, whose rows are grouped per key
 * head ([q, k, v(r heads), z(r heads)] and [b(r), a(r)]); tensor presence decides.
 *
 * The recurrent state of a layer (the conv's last K-1 inputs and every head's S) lives in the
 * session beside the KV cache (cq_gdn_state). A block call of at least chunk_min tokens (a
 * prefill) runs the chunked form (gdn_chunk.h: matrix products per CQ_GDN_CHUNK tokens), a
 * shorter one (decode) the recurrence token by token (gdn_step.h); both leave the same state, to
 * float rounding, and split the heads over the thread pool. The state
 * cannot be cut back to an earlier position, so the session keeps checkpoints (copies of the
 * whole state at two positions of the last multi-token eval) and truncation returns to the
 * latest checkpoint at or below the position asked for (docs/HYBRID.md). Internal to
 * src/engine. */
#ifndef CORTIQ_ENGINE_GDN_H
#define CORTIQ_ENGINE_GDN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/matmul_sched.h"
#include "engine/model.h"

/* The weights of one Gated DeltaNet layer. */
struct cq_gdn {
    uint32_t nk, nv, dk, dv, kernel;       /* heads, head dims, conv width */
    uint32_t key_dim, value_dim, conv_dim; /* nk*dk, nv*dv, 2*key_dim + value_dim */
    bool fused;                            /* Qwen3-Next layout (qkvz, ba) */
    cmf_qmat qkvz, ba;     /* fused: [2 key_dim + 2 value_dim, hidden], [2 nv, hidden] */
    cmf_qmat qkv, z, b, a; /* split: [conv_dim | value_dim | nv | nv, hidden] */
    cmf_qmat out;          /* [hidden, value_dim] */
    float *conv_w;         /* [conv_dim, kernel] */
    float *neg_a;          /* [nv] -exp(A_log) */
    float *dt_bias;        /* [nv] */
    float *norm_w;         /* [dv] the gated output norm's weight (x * w) */
    size_t state_off;      /* floats into a session's state before this layer's (gdn_load.c) */
};

/* Floats of a layer's recurrent state: conv tail [kernel - 1, conv_dim], then S [nv, dk, dv]. */
size_t cq_gdn_state_floats(const cq_gdn *g);

/* Bind layer l's Gated DeltaNet tensors (model.layers.l.linear_attn.*) against the header's
 * linear_* fields; adds their bytes to m->weight_bytes. */
cmf_status cq_gdn_load(cortiq_model *m, const cmf_arch *a, uint32_t l, const char *path,
                       cq_gdn **out, cmf_err *err);
void cq_gdn_free(cq_gdn *g);

#define CQ_GDN_CHECKPOINTS 2

/* A session's recurrent state of every Gated DeltaNet layer, its checkpoints, and the scratch
 * of one chunk. */
typedef struct cq_gdn_state {
    size_t floats; /* of all layers (0: the model has none) */
    float *live;   /* the state after the session's pos tokens */
    float *ckpt[CQ_GDN_CHECKPOINTS];
    uint32_t ckpt_pos[CQ_GDN_CHECKPOINTS];
    bool ckpt_ok[CQ_GDN_CHECKPOINTS];
    /* per token of a chunk: the projections, the conv's output (q, k, v), z, beta, g, output */
    float *proj, *proj2, *qkv, *conv, *z, *beta, *g, *core;
    size_t proj_w, proj2_w, max_conv, max_value, max_nv;
    /* the chunked form: the fewest tokens of a block call that take it (CQ_GDN_CHUNK_MIN, or the
     * environment's CORTIQ_GDN_CHUNK_MIN), and each value head's scratch */
    size_t chunk_min, chunk_floats;
    float *chunk_work; /* [max_nv, chunk_floats] */
} cq_gdn_state;

#define CQ_GDN_CHUNK_MIN 16

/* False when out of memory (cq_gdn_state_free then releases what was allocated). */
bool cq_gdn_state_init(cq_gdn_state *st, const cortiq_model *m, size_t batch);
void cq_gdn_state_free(cq_gdn_state *st);
/* The state at position 0 (no checkpoints kept). */
void cq_gdn_state_reset(cq_gdn_state *st);
/* Remember the live state as the one at pos (in the slot of the older checkpoint). */
void cq_gdn_checkpoint(cq_gdn_state *st, uint32_t pos);
/* Go back to the latest state at or below pos (a checkpoint, else position 0); returns the
 * position of the state now live. Checkpoints past it are dropped. */
uint32_t cq_gdn_rewind(cq_gdn_state *st, uint32_t pos);

/* The buffers a block call works in: xn [n, hidden] its input, o [n, hidden] its output. */
typedef struct cq_gdn_io {
    cq_sched *sched;
    cq_gdn_state *st;
    const float *xn;
    float *o;
    float eps; /* the gated norm's epsilon (rms_norm_eps) */
} cq_gdn_io;

/* o = gated_delta_net(xn) for the n tokens that follow the state; advances the state.
 * make_input(ctx, t) writes row t of xn first, in the parallel region of the first product. */
void cq_gdn_block(const cq_gdn_io *io, const cq_gdn *g, size_t n, cq_token_fn make_input,
                  const void *ctx);

#endif
