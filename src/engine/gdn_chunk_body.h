/* gdn_chunk_body.h - the body of a gdn_chunk.h tier: define GDN_CHUNK_NAME, GDN_CHUNK_NB (the
 * column tile, a multiple of the tier's vector width) and optionally GDN_CHUNK_TILE (the full
 * 4 x NB tile of a product in the tier's intrinsics: ISO C forbids the compiler to fuse
 * multiply-adds by itself), then include. The products run as 4-row by NB-column register tiles
 * (mm below); T row by row. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "engine/gdn_chunk.h"

#define NB GDN_CHUNK_NB
#define CH CQ_GDN_CHUNK

#ifndef GDN_CHUNK_MM_SHAPES
#define GDN_CHUNK_MM_SHAPES
enum { MM_FULL, MM_A_LOWER, MM_C_LOWER };
#endif

/* C[m, n] = C (if acc) + A[m, k] B[k, n], row-major with leading dimensions.
 * MM_A_LOWER: rows i0..i0+3 sum over kk < i0 + 4 only (the caller zeroes A past its diagonal);
 * MM_C_LOWER: only C's lower triangle is wanted (tiles wholly above the diagonal are skipped). */
static void mm(float *restrict C, size_t ldc, const float *restrict A, size_t lda,
               const float *restrict B, size_t ldb, uint32_t m, uint32_t n, uint32_t k, bool acc,
               int shape) {
    for (uint32_t i0 = 0; i0 < m; i0 += 4) {
        uint32_t mr = m - i0 < 4 ? m - i0 : 4;
        uint32_t kend = shape == MM_A_LOWER && i0 + mr < k ? i0 + mr : k;
        uint32_t nend = shape == MM_C_LOWER && i0 + mr < n ? i0 + mr : n;
        const float *a0 = A + (size_t)i0 * lda;
        for (uint32_t j0 = 0; j0 < nend; j0 += NB) {
            uint32_t nr = n - j0 < NB ? n - j0 : NB;
            float t[4][NB];
            memset(t, 0, sizeof t);
            if (mr == 4 && nr == NB) { /* the full tile: fixed trip counts, kept in registers */
#ifdef GDN_CHUNK_TILE
                GDN_CHUNK_TILE(t, a0, lda, B + j0, ldb, kend);
#else
                for (uint32_t kk = 0; kk < kend; kk++) {
                    const float *b = B + (size_t)kk * ldb + j0;
                    const float x0 = a0[kk], x1 = a0[lda + kk], x2 = a0[2 * lda + kk],
                                x3 = a0[3 * lda + kk];
                    for (uint32_t c = 0; c < NB; c++) {
                        t[0][c] += x0 * b[c];
                        t[1][c] += x1 * b[c];
                        t[2][c] += x2 * b[c];
                        t[3][c] += x3 * b[c];
                    }
                }
#endif
            } else {
                for (uint32_t kk = 0; kk < kend; kk++) {
                    const float *b = B + (size_t)kk * ldb + j0;
                    for (uint32_t r = 0; r < mr; r++) {
                        const float x = a0[r * lda + kk];
                        for (uint32_t c = 0; c < nr; c++)
                            t[r][c] += x * b[c];
                    }
                }
            }
            for (uint32_t r = 0; r < mr; r++) {
                float *y = C + (size_t)(i0 + r) * ldc + j0;
                for (uint32_t c = 0; c < nr; c++)
                    y[c] = (acc ? y[c] : 0.0f) + t[r][c];
            }
        }
    }
}

void GDN_CHUNK_NAME(float *restrict S, const cq_gdn_chunk_in *in, float *restrict work) {
    const uint32_t n = in->n, dk = in->dk, dv = in->dv;
    float *K = work;                 /* [n, dk] keys */
    float *Q = K + (size_t)CH * dk;  /* [n, dk] queries */
    float *KT = Q + (size_t)CH * dk; /* [dk, CH] keys transposed */
    float *X = KT + (size_t)CH * dk; /* [n, dv] beta (v - exp(G) k S0) */
    float *D = X + (size_t)CH * dv;  /* [n, dv] the deltas, T X */
    float *T = D + (size_t)CH * dv;  /* [n, CH] k_i . k_j, then row by row T (zero past i) */
    float *P = T + (size_t)CH * CH;  /* [n, CH] q_i . k_j exp(G_i - G_j), j <= i */
    float G[CH], eG[CH], inv[CH], E[CH], L[CH];
    float cum = 0;
    for (uint32_t t = 0; t < n; t++) {
        cum += in->g[t * in->gstride];
        G[t] = cum, eG[t] = expf(cum), inv[t] = 1.0f / eG[t];
        memcpy(K + (size_t)t * dk, in->k + t * in->stride, dk * sizeof(float));
        memcpy(Q + (size_t)t * dk, in->q + t * in->stride, dk * sizeof(float));
        for (uint32_t d = 0; d < dk; d++)
            KT[(size_t)d * CH + t] = K[(size_t)t * dk + d];
    }
    /* exp(G_i - G_j) = exp(G_i) / exp(G_j) while exp(G) stays a normal float (G > -80) */
    const bool ratio = G[n - 1] > -80.0f;
    mm(T, CH, K, dk, KT, CH, n, n, dk, false, MM_C_LOWER);
    mm(P, CH, Q, dk, KT, CH, n, n, dk, false, MM_C_LOWER);
    /* X = beta (v - exp(G) (K S0)); o = exp(G) (Q S0) */
    mm(X, dv, K, dk, S, dv, n, dv, dk, false, MM_FULL);
    mm(in->o, in->ostride, Q, dk, S, dv, n, dv, dk, false, MM_FULL);
    for (uint32_t i = 0; i < n; i++) {
        const float b = in->beta[i * in->gstride];
        const float *v = in->v + i * in->stride;
        float *x = X + (size_t)i * dv, *o = in->o + i * in->ostride;
        for (uint32_t c = 0; c < dv; c++) {
            x[c] = b * (v[c] - eG[i] * x[c]);
            o[c] *= eG[i];
        }
    }
    /* T = (I + L)^-1 row by row: T_i = e_i - sum_{j<i} L[i,j] T_j (T_j is zero past j) */
    for (uint32_t i = 0; i < n; i++) {
        const float b = in->beta[i * in->gstride];
        for (uint32_t j = 0; j <= i; j++) /* E[j] = exp(G_i - G_j) */
            E[j] = ratio ? eG[i] * inv[j] : expf(G[i] - G[j]);
        float *restrict t = T + (size_t)i * CH, *restrict p = P + (size_t)i * CH;
        for (uint32_t j = 0; j < i; j++)
            L[j] = b * t[j] * E[j];
        memset(t, 0, CH * sizeof(float));
        t[i] = 1.0f;
        for (uint32_t j = 0; j < i; j++) {
            const float l = L[j];
            const float *restrict tj = T + (size_t)j * CH;
            for (uint32_t c = 0; c <= j; c++)
                t[c] -= l * tj[c];
        }
        for (uint32_t j = 0; j < n; j++)
            p[j] = j <= i ? p[j] * E[j] : 0.0f;
    }
    /* D = T X; o += P D; S = exp(G_n) S0 + (exp(G_n - G) K)^T D */
    mm(D, dv, T, CH, X, dv, n, dv, n, false, MM_A_LOWER);
    mm(in->o, in->ostride, P, CH, D, dv, n, dv, n, true, MM_A_LOWER);
    const float last = G[n - 1];
    for (uint32_t t = 0; t < n; t++)
        E[t] = ratio ? eG[n - 1] * inv[t] : expf(last - G[t]);
    for (uint32_t d = 0; d < dk; d++) {
        float *kt = KT + (size_t)d * CH;
        for (uint32_t t = 0; t < n; t++)
            kt[t] *= E[t];
    }
    for (size_t e = 0; e < (size_t)dk * dv; e++)
        S[e] *= eG[n - 1];
    mm(S, dv, KT, CH, D, dv, dk, dv, n, true, MM_FULL);
}

#undef NB
#undef CH
