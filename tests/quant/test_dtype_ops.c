/* The per-dtype records (format/dtype.c, quant/dtype_ops.c) agree with each other: every live
 * dtype has a compute record of its kind (fixed: an exact-size row decoder; variable: a
 * validator and a checked row decoder), reserved ids have none, and the int8-activation policy
 * is the one the engine relies on. */
#include "common/test.h"
#include "cortiq/dtype.h"
#include "quant/dtype_ops.h"
#include "quant/kernel_gen.h"
#include "quant/kernels_engine.h"

/* Whether the prepared int8 token path takes a q8_row matrix on this CPU and tier. */
static bool q8_has_tok8(void) {
    kg_rng rng = {7};
    kg_opts o = {0, 0, 0};
    uint64_t nb;
    volatile uint64_t one = 1; /* not constant: GCC's overflow check misreads kg_payload */
    uint8_t *p = kg_payload(CMF_DT_Q8_ROW, one, 64, &rng, &o, &nb);
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, CMF_DT_Q8_ROW, 1, 64, p, nb, "t", NULL) == CMF_OK);
    bool has = cmf_tok8_supports(&m) != 0;
    cmf_qmat_free(&m);
    free(p);
    return has;
}

int main(void) {
    for (unsigned id = 0; id < CMF_DT_COUNT; id++) {
        const cmf_dtype_traits *t = cmf_dtype_get(id);
        const cq_dtype_ops *o = cq_dtype_ops_get((cmf_dtype)id);
        CHECK_MSG(t && t->name && t->kind != CMF_DTK_UNKNOWN, "id %u has no traits", id);
        if (!t) continue;
        if (t->kind == CMF_DTK_RESERVED) {
            CHECK_MSG(!o, "reserved %s has a compute record", t->name);
            continue;
        }
        CHECK_MSG(o && o->encode, "%s has no compute record", t->name);
        if (!o) continue;
        if (t->kind == CMF_DTK_FIXED)
            CHECK_MSG(o->decode_row && !o->validate && !o->decode_row_checked,
                      "fixed %s: exact-size row decoder only", t->name);
        else
            CHECK_MSG(!o->decode_row && o->validate && o->decode_row_checked,
                      "variable %s: validator and checked row decoder", t->name);
        cmf_dtype back;
        CHECK(cmf_dtype_from_name(t->name, &back) && back == (cmf_dtype)id);
    }
    CHECK(cq_dtype_ops_get(CMF_DT_COUNT) == NULL);
    /* int8 activations: q8_row from 2 tokens, and for one token exactly where the prepared
     * int8 token path takes q8_row (AVX-512 VNNI; not AVX2, whose prepared token is the 4-bit
     * class's: a batched decode step shares its weight loads with each token's arithmetic as
     * alone); the 4-bit class and vbit always, others never */
    CHECK(cq_dtype_int8_act(CMF_DT_Q8_ROW, 2));
    CHECK(cq_dtype_int8_act(CMF_DT_Q8_ROW, 1) == q8_has_tok8());
    static const cmf_dtype always[] = {CMF_DT_Q4_BLOCK, CMF_DT_Q4_TILED, CMF_DT_Q4TP, CMF_DT_VBIT,
                                       CMF_DT_VBIT_RO};
    for (size_t i = 0; i < sizeof always / sizeof *always; i++)
        CHECK(cq_dtype_int8_act(always[i], 1) && cq_dtype_int8_act(always[i], 7));
    static const cmf_dtype never[] = {CMF_DT_F32, CMF_DT_F16, CMF_DT_BF16, CMF_DT_Q8_2F,
                                      CMF_DT_Q1,  CMF_DT_Q1S, CMF_DT_Q1T,  CMF_DT_MIX8_4};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        CHECK(!cq_dtype_int8_act(never[i], 1) && !cq_dtype_int8_act(never[i], 7));
    TEST_DONE();
}
