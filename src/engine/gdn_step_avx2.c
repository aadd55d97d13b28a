/* gdn_step_avx2.c - the delta-rule step compiled for AVX2 + FMA (gdn_step.h). */
#define GDN_STEP_NAME cq_gdn_step_avx2
#include "engine/gdn_step_body.h"
