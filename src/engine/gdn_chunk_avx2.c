/* gdn_chunk_avx2.c - the chunked delta rule compiled for AVX2 + FMA (gdn_chunk.h). */
#define GDN_CHUNK_NAME cq_gdn_chunk_avx2
#define GDN_CHUNK_NB   16
#include "engine/gdn_chunk_body.h"
