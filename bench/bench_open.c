/* bench_open - time and RSS of cmf_open() on a file with N tensors (default 10,000).
 * usage: bench_open [N] [FILE]   (FILE defaults to /tmp/cortiq_bench_open.cmf, rewritten) */
#include "bench_util.h"
#include "cortiq/format.h"
#include "cortiq/writer.h"

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 10000;
    const char *path = argc > 2 ? argv[2] : "/tmp/cortiq_bench_open.cmf";
    cmf_err err;
    cmf_writer *w;
    if (cmf_writer_create(path, NULL, &w, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    const char *hdr = "{\"arch\": {\"arch_name\": \"bench\", \"num_layers\": 40}}";
    if (cmf_writer_set_header(w, hdr, strlen(hdr), &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    static uint16_t payload[256];
    uint64_t shape[2] = {4, 64};
    for (size_t i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.%zu.mlp.experts.%zu.%s_proj.weight", i / 250,
                 (i / 3) % 84, (const char *[]){"gate", "up", "down"}[i % 3]);
        payload[0] = (uint16_t)i;
        if (cmf_writer_add_tensor(w, name, CMF_DT_F16, 2, shape, payload, sizeof payload, &err))
            return fprintf(stderr, "%s\n", err.msg), 1;
    }
    if (cmf_writer_finish(w, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    cmf_writer_free(w);

    /* warm the page cache once, then measure */
    cmf_file *f;
    if (cmf_open(path, 0, &f, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    cmf_close(f);
    double times[15];
    uint64_t rss_cost = 0;
    for (int r = 0; r < 15; r++) {
        uint64_t rss0 = bench_rss();
        double t0 = bench_now();
        cmf_status st = cmf_open(path, 0, &f, &err);
        times[r] = bench_now() - t0;
        if (st) return fprintf(stderr, "%s\n", err.msg), 1;
        uint64_t rss1 = bench_rss();
        if (r == 0) rss_cost = rss1 > rss0 ? rss1 - rss0 : 0;
        cmf_close(f);
    }
    for (int i = 0; i < 15; i++)
        for (int j = i + 1; j < 15; j++)
            if (times[j] < times[i]) {
                double t = times[i];
                times[i] = times[j];
                times[j] = t;
            }
    printf("open of %zu tensors: median %.3f ms (min %.3f, max %.3f), RSS cost %.2f MiB\n", n,
           times[7] * 1e3, times[0] * 1e3, times[14] * 1e3, rss_cost / 1048576.0);
    printf("{\"tensors\": %zu, \"open_ms_median\": %.3f, \"rss_mib\": %.2f}\n", n, times[7] * 1e3,
           rss_cost / 1048576.0);
    return 0;
}
