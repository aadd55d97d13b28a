/* bench_tokenizer.c - tokenizer load time and single-thread encode throughput.
 * usage: bench_tokenizer TOKENIZER.json CORPUS [reps]
 * The corpus is cut into chunks of <= 16 KiB at line ends (as tools/bench_tokenizer_hf.py does for
 * the Python package), each chunk encoded without special tokens; the best of `reps` runs counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fileio.h"
#include "cortiq/tokenizer.h"

#define CHUNK (16 * 1024)

static double clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static double now(void) {
    return clock_s(CLOCK_MONOTONIC);
}
static double cpu(void) {
    return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER.json CORPUS [reps]\n", argv[0]);
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (reps < 1) reps = 1;
    size_t jlen, clen;
    char *json = cq_read_file(argv[1], &jlen), *corpus = cq_read_file(argv[2], &clen);
    if (!json || !corpus) {
        fprintf(stderr, "cannot read inputs\n");
        return 3;
    }
    cmf_err err;
    cmf_tokenizer *tok = NULL;
    double best_load = 1e9, best_load_cpu = 1e9;
    for (int r = 0; r < 3; r++) {
        cmf_tokenizer_free(tok);
        tok = NULL;
        double t0 = now(), c0 = cpu();
        if (cmf_tokenizer_load(json, jlen, &tok, &err) != CMF_OK) {
            fprintf(stderr, "load: %s\n", err.msg);
            return 1;
        }
        double dt = now() - t0, dc = cpu() - c0;
        if (dt < best_load) best_load = dt;
        if (dc < best_load_cpu) best_load_cpu = dc;
    }
    double best = 1e9, best_cpu = 1e9;
    size_t ntok = 0, nchunks = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), c0 = cpu();
        ntok = nchunks = 0;
        for (size_t start = 0; start < clen;) {
            size_t end = start + CHUNK < clen ? start + CHUNK : clen;
            if (end < clen) {
                size_t k = end;
                while (k > start && corpus[k - 1] != '\n')
                    k--;
                if (k - 1 > start) end = k;
            }
            int32_t *ids;
            size_t n;
            if (cmf_tokenizer_encode(tok, corpus + start, end - start, false, &ids, &n, &err) !=
                CMF_OK) {
                fprintf(stderr, "encode: %s\n", err.msg);
                return 1;
            }
            free(ids);
            ntok += n;
            nchunks++;
            start = end;
        }
        double dt = now() - t0, dc = cpu() - c0;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    printf(
        "cortiq: load %.1f ms (cpu %.1f ms); encode %.2f MB in %.3f s = %.2f MB/s (cpu %.2f MB/s), %zu tokens "
        "(%zu chunks)\n",
        best_load * 1e3, best_load_cpu * 1e3, (double)clen / 1e6, best, (double)clen / 1e6 / best,
        (double)clen / 1e6 / best_cpu, ntok, nchunks);
    cmf_tokenizer_free(tok);
    free(json);
    free(corpus);
    return 0;
}
