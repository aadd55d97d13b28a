/* read_row.c - the library in 20 lines: open a .cmf, list its tensors, print one row dequantized.
 * usage: example_read_row MODEL.cmf [TENSOR [ROW]] */
#include <cortiq/format.h>
#include <cortiq/quant.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: %s MODEL.cmf [TENSOR [ROW]]\n", argv[0]), 2;
    cmf_file *f;
    cmf_err err;
    if (cmf_open_model(argv[1], 0, &f, &err) != CMF_OK) return fprintf(stderr, "%s\n", err.msg), 1;
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        printf("%-50s %-8s %llu bytes\n", t->name, cmf_dtype_name(t->dtype),
               (unsigned long long)t->nbytes);
    }
    const cmf_tensor *t = cmf_file_find(f, argc > 2 ? argv[2] : cmf_file_tensor_at(f, 0)->name);
    uint64_t row = argc > 3 ? strtoull(argv[3], NULL, 10) : 0, rows, cols;
    if (!t || !cmf_quant_rows(t->ndim, t->shape, &rows, &cols) || row >= rows)
        return fprintf(stderr, "no such tensor or row\n"), cmf_close(f), 1;
    float *x = malloc(cols * sizeof *x);
    if (cmf_quant_dequant_row(t->dtype, t->ndim, t->shape, t->data, t->nbytes, row, x, &err) !=
        CMF_OK)
        return fprintf(stderr, "%s\n", err.msg), free(x), cmf_close(f), 1;
    printf("%s[%llu][0..%d] =", t->name, (unsigned long long)row, cols < 8 ? (int)cols : 8);
    for (uint64_t i = 0; i < cols && i < 8; i++)
        printf(" %g", x[i]);
    printf("\n");
    free(x);
    cmf_close(f);
    return 0;
}
