/* gdn_chunk_body.h - the body of a gdn_chunk.h tier: define GDN_CHUNK_NAME and GDN_CHUNK_NB (the
 * column tile, a multiple of the tier's vector width), then include. The products run as 4-row by
 * NB-column register tiles (mm below); the forward substitution row by row. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "engine/gdn_chunk.h"

#define NB GDN_CHUNK_NB
#define CH CQ_GDN_CHUNK

/* C[m, n] = C (if acc) + sign * A[m, k] B[k, n], row-major with leading dimensions. With tri,
 * rows i0..i0+3 sum over kk < i0 + 4 only: the caller zeroes A past its diagonal. */
static void mm(float *restrict C, size_t ldc, const float *restrict A, size_t lda,
               const float *restrict B, size_t ldb, uint32_t m, uint32_t n, uint32_t k, float sign,
               bool acc, bool tri) {
    for (uint32_t i0 = 0; i0 < m; i0 += 4) {
        uint32_t mr = m - i0 < 4 ? m - i0 : 4;
        uint32_t kend = tri && i0 + mr < k ? i0 + mr : k;
        const float *a0 = A + (size_t)i0 * lda;
        for (uint32_t j0 = 0; j0 < n; j0 += NB) {
            uint32_t nr = n - j0 < NB ? n - j0 : NB;
            float t[4][NB];
            memset(t, 0, sizeof t);
            if (mr == 4 && nr == NB) { /* the full tile: fixed trip counts, kept in registers */
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
                    y[c] = (acc ? y[c] : 0.0f) + sign * t[r][c];
            }
        }
    }
}

void GDN_CHUNK_NAME(float *restrict S, const cq_gdn_chunk_in *in, float *restrict work) {
    const uint32_t n = in->n, dk = in->dk, dv = in->dv;
    const size_t w = (size_t)dv + dk;
    float *K = work;                  /* [n, dk] keys */
    float *Q = K + (size_t)CH * dk;   /* [n, dk] queries */
    float *KT = Q + (size_t)CH * dk;  /* [dk, CH] keys transposed */
    float *UW = KT + (size_t)CH * dk; /* [n, dv + dk]: rows [U_i | W_i], then [D_i | W_i] */
    float *KK = UW + (size_t)CH * w;  /* [n, CH] k_i . k_j, then L */
    float *P = KK + (size_t)CH * CH;  /* [n, CH] q_i . k_j exp(G_i - G_j), j <= i */
    float G[CH], eG[CH];
    float cum = 0;
    for (uint32_t t = 0; t < n; t++) {
        cum += in->g[t * in->gstride];
        G[t] = cum, eG[t] = expf(cum);
        memcpy(K + (size_t)t * dk, in->k + t * in->stride, dk * sizeof(float));
        memcpy(Q + (size_t)t * dk, in->q + t * in->stride, dk * sizeof(float));
        for (uint32_t d = 0; d < dk; d++)
            KT[(size_t)d * CH + t] = K[(size_t)t * dk + d];
    }
    mm(KK, CH, K, dk, KT, CH, n, n, dk, 1.0f, false, false);
    mm(P, CH, Q, dk, KT, CH, n, n, dk, 1.0f, false, false);
    /* forward substitution: row i = [beta v_i | beta exp(G_i) k_i] - sum_{j<i} L[i,j] row j */
    for (uint32_t i = 0; i < n; i++) {
        const float b = in->beta[i * in->gstride];
        float *restrict r = UW + i * w;
        const float *v = in->v + i * in->stride;
        for (uint32_t c = 0; c < dv; c++)
            r[c] = b * v[c];
        for (uint32_t d = 0; d < dk; d++)
            r[dv + d] = b * eG[i] * K[(size_t)i * dk + d];
        for (uint32_t j = 0; j < i; j++) {
            const float l = b * KK[(size_t)i * CH + j] * expf(G[i] - G[j]);
            const float *restrict rj = UW + j * w;
            for (size_t c = 0; c < w; c++)
                r[c] -= l * rj[c];
        }
        float *p = P + (size_t)i * CH;
        for (uint32_t j = 0; j < n; j++)
            p[j] = j <= i ? p[j] * expf(G[i] - G[j]) : 0.0f;
    }
    /* D = U - W S0; o = exp(G) (Q S0) + P D; then S = exp(G_n) S0 + (exp(G_n - G) K)^T D */
    mm(UW, w, UW + dv, w, S, dv, n, dv, dk, -1.0f, true, false);
    mm(in->o, in->ostride, Q, dk, S, dv, n, dv, dk, 1.0f, false, false);
    for (uint32_t i = 0; i < n; i++) {
        float *o = in->o + i * in->ostride;
        for (uint32_t c = 0; c < dv; c++)
            o[c] *= eG[i];
    }
    mm(in->o, in->ostride, P, CH, UW, w, n, dv, n, 1.0f, true, true);
    const float last = G[n - 1];
    for (uint32_t t = 0; t < n; t++) {
        const float f = expf(last - G[t]);
        for (uint32_t d = 0; d < dk; d++)
            KT[(size_t)d * CH + t] *= f;
    }
    for (size_t e = 0; e < (size_t)dk * dv; e++)
        S[e] *= eG[n - 1];
    mm(S, dv, KT, CH, UW, w, dk, dv, n, 1.0f, true, false);
}

#undef NB
#undef CH
