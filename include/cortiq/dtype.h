/* cortiq/dtype.h - tensor dtype ids of spec §3.1 and their size rules.
 *
 * Ids are shared with .vmfc and never reused; reserved ids keep their slot.
 */
#ifndef CORTIQ_DTYPE_H
#define CORTIQ_DTYPE_H

#include <stdbool.h>
#include <stdint.h>
#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cmf_dtype {
    CMF_DT_F32 = 0,
    CMF_DT_F16 = 1,
    CMF_DT_BF16 = 2,
    CMF_DT_Q8_ROW = 3,
    CMF_DT_Q4_BLOCK = 4,
    CMF_DT_MIX8_4 = 5, /* reserved */
    CMF_DT_U8 = 6,     /* reserved */
    CMF_DT_Q4_COL = 7, /* reserved */
    CMF_DT_VBIT = 8,
    CMF_DT_Q8_2F = 9,
    CMF_DT_VBIT_RO = 10,
    CMF_DT_Q4_TILED = 11,
    CMF_DT_Q1 = 12,
    CMF_DT_Q1S = 13,
    CMF_DT_Q1T = 14,
    CMF_DT_Q4TP = 15,
    CMF_DT_COUNT
} cmf_dtype;

#define CMF_MAX_DIMS 6

typedef enum cmf_dtype_kind {
    CMF_DTK_UNKNOWN = 0, /* id never assigned */
    CMF_DTK_RESERVED,    /* assigned but not live in v2: reading it is an error */
    CMF_DTK_FIXED,       /* nbytes is a function of the shape */
    CMF_DTK_VARIABLE,    /* nbytes is stored only in the directory (vbit, q1s, q1t...) */
} cmf_dtype_kind;

typedef struct cmf_dtype_traits {
    const char *name; /* spec name: "q8_row" */
    cmf_dtype_kind kind;
    bool matrix_only;     /* 2-D only */
    bool needs_in_mult32; /* 2-D with in % 32 == 0 */
    bool quant_2f;        /* its presence needs required_features bit QUANT_2F */
    uint32_t max_in;      /* largest in of a 2-D shape (q1t: u16 column index); 0 = no limit */
} cmf_dtype_traits;

/* Traits of an id; NULL when id >= CMF_DT_COUNT. */
CORTIQ_API const cmf_dtype_traits *cmf_dtype_get(unsigned id);

/* Spec name of an id (reserved ids keep theirs: 5 is "mix8_4"), "unknown" past the table. */
CORTIQ_API const char *cmf_dtype_name(unsigned id);

/* Look a dtype up by spec name (e.g. "q4_tiled"); returns false if not a live dtype. */
CORTIQ_API bool cmf_dtype_from_name(const char *name, cmf_dtype *out);

/* Number of elements of a shape, with overflow checking. Returns false on a zero
 * dimension or an element count that does not fit in 2^62. ndim == 0 means a scalar. */
CORTIQ_API bool cmf_shape_numel(unsigned ndim, const uint64_t *shape, uint64_t *numel);

/* Exact byte size of a tensor of a FIXED-size dtype (CMF_DTK_FIXED). For a variable
 * dtype it fills the smallest and largest size a valid payload can have.
 * Returns CMF_E_PARSE (with message) when the shape is not allowed for the dtype
 * (not 2-D, in % 32 != 0, overflow). ctx names the tensor for the message. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_dtype_nbytes(unsigned id, unsigned ndim,
                                                        const uint64_t *shape, uint64_t *min_nbytes,
                                                        uint64_t *max_nbytes, const char *ctx,
                                                        cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
