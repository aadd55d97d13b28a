/* q4tp_rung.h - a q4tp row's scale ladder 2^(lo + c*step), evaluated in f32 the way the other
 * CMF implementation defines it: rung 0 = exp2f(lo), each next rung = the previous times
 * exp2f(step). The spec gives the real value only; this order fixes its f32 bits, so that
 * every reader decodes a file to the same floats (docs/FORMAT.md, "q4tp ladder"). */
#ifndef CORTIQ_QUANT_Q4TP_RUNG_H
#define CORTIQ_QUANT_Q4TP_RUNG_H

#include <math.h>

/* 2^f for f in [-0.5, 0.5] in the SIMD tiers' ladders: its Taylor series to degree 7 in Horner
 * form, with the tier's fma and broadcast (the same operations, so the same bits, per lane). */
#define CQ_EXP2_FRAC(fma, set1, f)                                                                 \
    fma(fma(fma(fma(fma(fma(fma(set1(1.525273380405984e-05f), f, set1(1.5403530393381606e-04f)),   \
                            f, set1(1.3333558146428443e-03f)),                                     \
                        f, set1(9.618129107628477e-03f)),                                          \
                    f, set1(5.550410866482158e-02f)),                                              \
                f, set1(2.402265069591007e-01f)),                                                  \
            f, set1(6.931471805599453e-01f)),                                                      \
        f, set1(1.0f))

static inline void cq_q4tp_ladder_f32(float lo, float step, float ladder[32]) {
    float ratio = exp2f(step);
    ladder[0] = exp2f(lo);
    for (unsigned c = 1; c < 32; c++)
        ladder[c] = ladder[c - 1] * ratio;
}

/* One rung of the same ladder (code < 32). */
static inline float cq_q4tp_rung(float lo, float step, unsigned code) {
    float ratio = exp2f(step), s = exp2f(lo);
    for (unsigned c = 0; c < code; c++)
        s *= ratio;
    return s;
}

#endif
