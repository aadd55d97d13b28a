/* vbit_alloc.c - per-row bit widths for vbit/vbit_ro (spec §3.2): discrete water-filling.
 *
 * A row with amplitude A quantized at b bits keeps noise ~ in * A^2 * 4^-b. Starting every row at
 * the floor, we repeatedly grant the upgrade (to the next level of {3,4,5,6,8}) that removes the
 * most noise per added bit, while the budget mean_bits * weights allows it. That is water-filling
 * over log2 A: at the end every upgraded row's marginal return sits above one common water level.
 * For a family (MoE experts of one layer x projection) all rows of all members share one budget,
 * so a loud expert draws bits from a quiet one. */
#include <stdlib.h>

#include "quant/quant_internal.h"

static const unsigned k_levels[CMF_VBIT_NLEVELS] = CMF_VBIT_LEVELS;

double cmf_vbit_row_amplitude(const float *row, uint64_t in, double b_field) {
    if (in < 32) return 0.0;
    double acc = 0.0;
    for (uint64_t g = 0; g < in / 32; g++) {
        double m = q_absmax(row + g * 32, 32);
        acc += m * m;
    }
    return sqrt(acc / (double)(in / 32)) * b_field;
}

typedef struct {
    double prio;  /* log2 of the noise removed per added bit by the next upgrade */
    uint64_t row; /* global row index over the family */
} heap_item;

static bool item_before(const heap_item *a, const heap_item *b) {
    return a->prio > b->prio || (a->prio == b->prio && a->row < b->row);
}

static void heap_push(heap_item *h, size_t *n, heap_item it) {
    size_t i = (*n)++;
    while (i > 0 && item_before(&it, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = it;
}

static heap_item heap_pop(heap_item *h, size_t *n) {
    heap_item top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && item_before(&h[c + 1], &h[c])) c++;
        if (!item_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

/* Priority of upgrading level index li -> li+1 for a row of log2 amplitude la. */
static double upgrade_prio(double la, unsigned li) {
    double b0 = k_levels[li], b1 = k_levels[li + 1];
    return 2.0 * la + log2(exp2(-2.0 * b0) - exp2(-2.0 * b1)) - log2(b1 - b0);
}

cmf_status cmf_vbit_allocate_family(size_t n_members, const cmf_vbit_member *members,
                                    double mean_bits, uint8_t *const *bits_out, cmf_err *err) {
    if (!members || !bits_out || !n_members)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "vbit", "no members to allocate");
    if (!isfinite(mean_bits))
        return cmf_err_set(err, CMF_E_INVALID_ARG, "vbit", "mean_bits is not finite");
    uint64_t total_rows = 0;
    double total_w = 0.0;
    for (size_t m = 0; m < n_members; m++) {
        const cmf_vbit_member *mb = &members[m];
        if (!mb->src || !bits_out[m] || !mb->rows || !mb->in || mb->in % 32)
            return cmf_err_set(err, CMF_E_INVALID_ARG, "vbit",
                               "member %zu: need src, bits and in %% 32 == 0 (in=%llu)", m,
                               (unsigned long long)mb->in);
        total_rows += mb->rows;
        total_w += (double)mb->rows * (double)mb->in;
    }
    if (total_rows > SIZE_MAX / sizeof(heap_item))
        return cmf_err_set(err, CMF_E_NOMEM, "vbit", "too many rows (%llu)",
                           (unsigned long long)total_rows);
    heap_item *heap = malloc((size_t)total_rows * sizeof *heap);
    double *la = malloc((size_t)total_rows * sizeof *la);
    unsigned char *li = malloc((size_t)total_rows);
    uint64_t *in_of = malloc((size_t)total_rows * sizeof *in_of);
    if (!heap || !la || !li || !in_of) {
        free(heap);
        free(la);
        free(li);
        free(in_of);
        return cmf_err_set(err, CMF_E_NOMEM, "vbit", "cannot allocate the allocation heap");
    }
    size_t hn = 0;
    uint64_t g = 0;
    for (size_t m = 0; m < n_members; m++)
        for (uint64_t r = 0; r < members[m].rows; r++, g++) {
            double b = members[m].row_weights ? (double)members[m].row_weights[r] : 1.0;
            if (!(b >= 0.0) || !isfinite(b)) b = 0.0;
            double a = cmf_vbit_row_amplitude(members[m].src + r * members[m].in, members[m].in, b);
            li[g] = 0;
            in_of[g] = members[m].in;
            la[g] = a > 0.0 ? log2(a) : -INFINITY;
            if (a > 0.0) heap_push(heap, &hn, (heap_item){upgrade_prio(la[g], 0), g});
        }
    /* budget in bits above the floor */
    double left = (mean_bits - CMF_VBIT_FLOOR) * total_w;
    while (hn && left > 0.0) {
        heap_item it = heap_pop(heap, &hn);
        unsigned l = li[it.row];
        double cost = (double)(k_levels[l + 1] - k_levels[l]) * (double)in_of[it.row];
        if (cost > left) continue; /* a cheaper upgrade elsewhere may still fit */
        left -= cost;
        li[it.row] = (unsigned char)(l + 1);
        if (l + 2 < CMF_VBIT_NLEVELS)
            heap_push(heap, &hn, (heap_item){upgrade_prio(la[it.row], l + 1), it.row});
    }
    g = 0;
    for (size_t m = 0; m < n_members; m++)
        for (uint64_t r = 0; r < members[m].rows; r++, g++)
            bits_out[m][r] = (uint8_t)k_levels[li[g]];
    free(heap);
    free(la);
    free(li);
    free(in_of);
    return CMF_OK;
}

cmf_status cmf_vbit_allocate(uint64_t rows, uint64_t in, const float *src, const float *row_weights,
                             double mean_bits, uint8_t *bits_out, cmf_err *err) {
    cmf_vbit_member m = {rows, in, src, row_weights};
    uint8_t *const outs[1] = {bits_out};
    return cmf_vbit_allocate_family(1, &m, mean_bits, outs, err);
}
