/* logits_cmp.h - the logits distance the engine tests state their bounds in. */
#ifndef CORTIQ_TESTS_LOGITS_CMP_H
#define CORTIQ_TESTS_LOGITS_CMP_H

#include <math.h>
#include <stddef.h>

/* max |a - b| / max |b| over n values (b is the reference; 1 when b is all zero). */
static inline double max_rel_diff(const float *a, const float *b, size_t n) {
    double md = 0, mref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md) md = d;
        if (fabs(b[i]) > mref) mref = fabs(b[i]);
    }
    return md / (mref > 0 ? mref : 1);
}

#endif
