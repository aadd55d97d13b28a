/* gdn_chunk_avx512.c - the chunked delta rule compiled for AVX-512 (gdn_chunk.h). */
#define GDN_CHUNK_NAME cq_gdn_chunk_avx512
#define GDN_CHUNK_NB   32
#include "engine/gdn_chunk_body.h"
