/* matmul_sched.h - the parallel work of a forward pass: matrix products split over the model's
 * thread pool, and the per-token steps between them.
 *
 * A product call runs up to CQ_MM_PRODUCTS products that read the same input (q/k/v and an
 * attention layer's g_proj; gate/up) in one parallel region. Each weight is decoded once per
 * batch. One token (decode), and a batch whose input was prepared once for the whole call (see
 * below), hand the rows out in pieces that a thread done with its own range takes from the
 * others (common/pieces.h), so a thread a hypervisor slowed holds nobody up; other batches give
 * each thread an equal range of every product's rows (their kernels regroup the input per
 * call). Pieces start on 16-row blocks (64 for a vbit copy's windows), so every row's result is the
 * same whichever thread computed it.
 *
 * The steps between products (norms, biases, RoPE, residual adds) are independent per token:
 * a batch splits them over the pool by tokens, one token runs them on the caller. When a batch
 * of CQ_QACT_MIN or more tokens takes the integer GEMM (cmf_qact_*), the step that produces a
 * product's input also quantizes it, in the same parallel region (cq_matmul_after); a batch on
 * float weights whose kernels take a prepared input (cmf_pact_*: bf16 activations for the bf16
 * dot products, or the AVX-512 float panels' f32 groups) has it rounded or regrouped there the
 * same way, each thread whole token groups.
 * Internal to src/engine. */
#ifndef CORTIQ_ENGINE_MATMUL_SCHED_H
#define CORTIQ_ENGINE_MATMUL_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"

typedef struct cq_claim cq_claim; /* one thread's share of a decode product (matmul_sched.c) */

/* A session's scheduler: the model's pool and kernel flags, and the scratch of its products. */
typedef struct cq_sched {
    const cortiq_model *m;
    /* integer prefill GEMM (model->prefill_qact): the quantized batch, per-thread panels */
    void *qa_mem;
    cmf_qact qa;
    /* batches on float weights: the batch rounded to bf16 or regrouped once for all its
     * products (cmf_pact); pa_bytes of memory */
    void *pa_mem;
    size_t pa_bytes;
    cmf_pact pa;
    uint8_t *qa_scratch;
    size_t qa_stride;
    /* decode products: per-thread prepared tokens (cmf_tok8_*) and claims */
    uint8_t *tok8;
    size_t tok8_stride;
    cq_claim *claim;
    uint32_t job; /* decode products run so far (the tag of their claims) */
} cq_sched;

/* Scratch for batches of up to `batch` tokens whose products read at most in_cols columns.
 * False when out of memory (cq_sched_free then releases what was allocated). */
bool cq_sched_init(cq_sched *sc, const cortiq_model *m, size_t batch, size_t in_cols);
void cq_sched_free(cq_sched *sc);

/* Products of one input x (n tokens of the first weight's cols floats each): y[t] = W x[t],
 * row t of y at y + t * w->rows. With glu, products 0 and 1 are gate and up, and each thread
 * turns the gate rows it computed into act(gate) * up (model->act), so the next product's input
 * needs no pass of its own. */
/* The most products one call runs (q, k, v and an attention layer's g_proj). */
#define CQ_MM_PRODUCTS 4

typedef struct cq_product {
    const cmf_qmat *w;
    float *y;
} cq_product;

typedef struct cq_matmul {
    cq_product p[CQ_MM_PRODUCTS];
    unsigned np;
    const float *x;
    size_t n;
    bool glu;
    /* each: the n tokens (at most CQ_DECODE_MAX) are decode steps of different sessions. Each
     * row gets exactly what a product of that token alone gives (the one-token kernels, pieces
     * on the same 16-row blocks), but every piece of weights is read once from memory for all
     * of them: the tokens take it in turn while it is in the thread's cache. */
    bool each;
} cq_matmul;

/* The most tokens a product with `each` takes. */
#define CQ_DECODE_MAX 16

/* A step applied to token t of a batch, independently of the other tokens. */
typedef void (*cq_token_fn)(const void *ctx, size_t t);

/* step(ctx, t) for every t < n. */
void cq_each_token(cq_sched *sc, size_t n, cq_token_fn step, const void *ctx);

/* step(ctx, t) for every token of mm (step may be NULL), then the products of mm. The step
 * writes mm->x; when the products take the integer GEMM each thread quantizes the tokens it
 * stepped in the same parallel region. */
void cq_matmul_after(cq_sched *sc, cq_token_fn step, const void *ctx, const cq_matmul *mm);

/* The most products cq_matmul_group takes. */
#define CQ_GROUP_MAX 16

/* count (<= CQ_GROUP_MAX) one-token products, each with its own input (mm[i].n == 1; one
 * product, or gate and up with glu), in one parallel region: the threads take 64-row pieces of
 * them in turn from a shared counter. A MoE decode step runs its k small experts so, two
 * regions per layer instead of two per expert. Each row gets exactly what cq_matmul_after of
 * its product alone gives (the same one-token kernels on 16-row-aligned pieces). */
void cq_matmul_group(cq_sched *sc, const cq_matmul *mm, unsigned count);

/* y = W x for n tokens: cq_matmul_after with no step and one product. */
void cq_matmul_one(cq_sched *sc, const cmf_qmat *w, const float *x, size_t n, float *y);

#endif
