/* bench_verify - `verify` throughput on a large file in page cache against the machine's read
 * bandwidth, both measured in this run with the same thread count.
 * usage: bench_verify [GIB=2] [THREADS=2] [FILE=/tmp/cortiq_bench_verify.cmf] */
#include <sys/stat.h>

#include "bench_util.h"
#include "cortiq/format.h"
#include "cortiq/writer.h"

typedef struct gen {
    uint64_t seed;
    size_t bytes;
} gen;

static cmf_status produce(void *user, cmf_sink *sink, cmf_err *err) {
    gen *g = user;
    static uint64_t buf[1 << 17]; /* 1 MiB */
    for (size_t done = 0; done < g->bytes; done += sizeof buf) {
        for (size_t i = 0; i < sizeof buf / 8; i++) {
            g->seed = g->seed * 6364136223846793005ULL + 1442695040888963407ULL;
            buf[i] = g->seed;
        }
        cmf_status st = cmf_sink_write(sink, buf, sizeof buf, err);
        if (st) return st;
    }
    return CMF_OK;
}

int main(int argc, char **argv) {
    double gib = argc > 1 ? atof(argv[1]) : 2.0;
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
    const char *path = argc > 3 ? argv[3] : "/tmp/cortiq_bench_verify.cmf";
    size_t tensor_bytes = (size_t)64 << 20;
    size_t n = (size_t)(gib * 1073741824.0) / tensor_bytes;
    struct stat sb;
    cmf_err err;
    cmf_file *f = NULL;
    if (stat(path, &sb) != 0 || (uint64_t)sb.st_size < n * tensor_bytes ||
        cmf_open(path, 0, &f, &err) != CMF_OK) {
        cmf_writer *w;
        if (cmf_writer_create(path, NULL, &w, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        gen *g = calloc(n, sizeof *g);
        uint64_t shape[2] = {tensor_bytes / 4 / 4096, 4096};
        for (size_t i = 0; i < n; i++) {
            char name[64];
            snprintf(name, sizeof name, "t.%zu.weight", i);
            g[i] = (gen){i + 1, tensor_bytes};
            if (cmf_writer_add_tensor_stream(w, name, CMF_DT_F32, 2, shape, produce, &g[i], &err))
                return fprintf(stderr, "%s\n", err.msg), 1;
        }
        printf("writing %zu x 64 MiB ...\n", n);
        if (cmf_writer_finish(w, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        cmf_writer_free(w);
        free(g);
        if (cmf_open(path, 0, &f, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    }
    size_t len;
    const uint8_t *img = cmf_file_shard_bytes(f, 0, &len);
    /* touch every page once so both measurements read from the page cache */
    double bw = bench_read_bandwidth(img, len, threads, 1);
    bw = bench_read_bandwidth(img, len, threads, 3);
    double best = 0;
    cmf_verify_stats vs;
    for (int r = 0; r < 3; r++) {
        if (cmf_verify(f, threads, NULL, NULL, &vs) != CMF_OK)
            return fprintf(stderr, "verify failed\n"), 1;
        double gbs = vs.bytes_hashed / vs.seconds;
        if (gbs > best) best = gbs;
    }
    printf(
        "file %.2f GiB, %u threads: read bandwidth %.1f GB/s, verify %.1f GB/s = %.0f %% of bandwidth\n",
        len / 1073741824.0, threads, bw / 1e9, best / 1e9, 100.0 * best / bw);
    printf(
        "{\"file_gib\": %.2f, \"threads\": %u, \"read_gbs\": %.2f, \"verify_gbs\": %.2f, \"ratio\": %.3f}\n",
        len / 1073741824.0, threads, bw / 1e9, best / 1e9, best / bw);
    cmf_close(f);
    return 0;
}
