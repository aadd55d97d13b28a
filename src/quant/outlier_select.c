/* outlier_select.c - choose the overlay entries of q1s/q1t: the k weights whose verbatim storage
 * removes the most squared error. A quickselect finds the k-th largest gain in O(n). */
#include <math.h>
#include <stdlib.h>

#include "quant/quant_internal.h"

uint64_t q_outlier_budget(double frac, uint64_t n) {
    if (!(frac > 0.0)) return 0;
    double k = floor(frac * (double)n + 0.5);
    return k >= (double)n ? n : (uint64_t)k;
}

static void swapf(float *a, float *b) {
    float t = *a;
    *a = *b;
    *b = t;
}

/* Value of rank k (0-based, descending order) of a[0..n); reorders a. */
static float kth_largest(float *a, uint64_t n, uint64_t k) {
    uint64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        /* median of three as pivot keeps sorted inputs linear */
        uint64_t mid = lo + (hi - lo) / 2;
        if (a[mid] > a[lo]) swapf(&a[mid], &a[lo]);
        if (a[hi] > a[lo]) swapf(&a[hi], &a[lo]);
        if (a[mid] > a[hi]) swapf(&a[mid], &a[hi]);
        float pivot = a[hi];
        /* three-way partition: [lo, lt) > pivot, [lt, gt] == pivot, (gt, hi] < pivot */
        uint64_t lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            if (a[i] > pivot)
                swapf(&a[lt++], &a[i++]);
            else if (a[i] < pivot) {
                swapf(&a[i], &a[gt]);
                if (gt == 0) break;
                gt--;
            } else
                i++;
        }
        if (k < lt)
            hi = lt - 1;
        else if (k > gt)
            lo = gt + 1;
        else
            return pivot;
    }
    return a[lo];
}

/* NaN ranks below everything, so the order is total and exactly k indices come out. */
static float gain_key(float g) {
    return isnan(g) ? -INFINITY : g;
}

cmf_status q_top_k(const float *gain, uint64_t n, uint64_t k, uint64_t *idx, cmf_err *err) {
    if (k == 0) return CMF_OK;
    if (k > n) k = n;
    float *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return cmf_err_set(err, CMF_E_NOMEM, "encode", "cannot allocate outlier selection scratch");
    for (uint64_t i = 0; i < n; i++)
        tmp[i] = gain_key(gain[i]);
    float thr = kth_largest(tmp, n, k - 1);
    free(tmp);
    uint64_t above = 0;
    for (uint64_t i = 0; i < n; i++)
        if (gain_key(gain[i]) > thr) above++;
    uint64_t ties = k - above, m = 0;
    for (uint64_t i = 0; i < n && m < k; i++) {
        float g = gain_key(gain[i]);
        if (g > thr)
            idx[m++] = i;
        else if (g == thr && ties) {
            idx[m++] = i;
            ties--;
        }
    }
    return CMF_OK;
}

cmf_status q_overlay_encode(const q_tile_codec *c, const float *src, uint64_t n, uint64_t k,
                            uint8_t *tiles, bool *skip, uint64_t *idx, uint64_t *count,
                            cmf_err *err) {
    uint64_t nt = n / 32;
    float *gain = malloc((k ? n : 1) * sizeof *gain);
    bool *dirty = malloc(nt ? nt : 1);
    cmf_status st = CMF_OK;
    *count = 0;
    if (!gain || !dirty) {
        st = cmf_err_set(err, CMF_E_NOMEM, "encode", "cannot allocate outlier selection scratch");
        goto done;
    }
    for (uint64_t t = 0; t < nt; t++)
        dirty[t] = true;
    /* Alternate: base tiles without the current outliers -> per-weight gain (error left in the
     * base minus error of the f16 overlay copy) -> the k largest gains become the outliers.
     * Only tiles whose outlier set changed are re-fitted. Three rounds settle it. */
    for (int round = 0; round < 3 && k; round++) {
        for (uint64_t t = 0; t < nt; t++) {
            if (!dirty[t]) continue;
            float dec[32];
            c->encode(src + t * 32, skip + t * 32, tiles + t * c->tile_bytes);
            c->decode(tiles + t * c->tile_bytes, dec);
            for (unsigned j = 0; j < 32; j++) {
                /* in double: no overflow to inf - inf = NaN for weights near FLT_MAX; the
                 * overlay copy is the f16-range-clamped value the encoder stores */
                double w = src[t * 32 + j], be = w - dec[j];
                double ov = w - f16_to_f32(f32_to_f16(q_clamp_f16_range(src[t * 32 + j])));
                gain[t * 32 + j] = (float)(be * be - ov * ov);
            }
            dirty[t] = false;
        }
        if (round)
            for (uint64_t i = 0; i < k; i++) {
                skip[idx[i]] = false;
                dirty[idx[i] / 32] = true;
            }
        st = q_top_k(gain, n, k, idx, err);
        if (st != CMF_OK) goto done;
        for (uint64_t i = 0; i < k; i++) {
            skip[idx[i]] = true;
            dirty[idx[i] / 32] = true;
        }
    }
    /* keep only entries that lower the error */
    for (uint64_t i = 0; i < k; i++) {
        if (gain[idx[i]] > 0.0f) {
            idx[(*count)++] = idx[i];
        } else {
            skip[idx[i]] = false;
            dirty[idx[i] / 32] = true;
        }
    }
    for (uint64_t t = 0; t < nt; t++)
        if (dirty[t]) c->encode(src + t * 32, skip + t * 32, tiles + t * c->tile_bytes);
done:
    free(gain);
    free(dirty);
    return st;
}
