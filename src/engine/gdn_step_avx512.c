/* gdn_step_avx512.c - the delta-rule step compiled for AVX-512 (gdn_step.h). */
#define GDN_STEP_NAME cq_gdn_step_avx512
#include "engine/gdn_step_body.h"
