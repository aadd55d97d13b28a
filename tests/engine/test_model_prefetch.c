/* cortiq_model_prefetch (and cortiq_model_page_in with step-wise moves): after it returns, every
 * page of every layer matrix and of the output head is resident (mincore), starting from a file
 * whose pages were dropped from the page cache (posix_fadvise DONTNEED), and the model computes the
 * same logits as without it and as with no_huge_pages (which moves nothing; this file is too small
 * to fill a 2 MiB window, see test_model_hugepages for the moves). NULL is allowed. This tiny file
 * is smaller than the kernel's read-ahead, so opening it already brings every page in (the test
 * prints both counts); the cold path proper is measured by bench/vs_llamacpp's cold start on real
 * models. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "engine/model.h"
#include "test.h"

#define TINY CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/"

/* pages of [p, p + n) that are not resident */
static size_t missing_pages(const uint8_t *p, uint64_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(page - 1);
    size_t len = (size_t)(n + ((uintptr_t)p - a)), np = (len + page - 1) / page, miss = 0;
    unsigned char vec[4096];
    for (size_t off = 0; off < np; off += sizeof vec) {
        size_t k = np - off < sizeof vec ? np - off : sizeof vec;
        CHECK(mincore((void *)(a + off * page), k * page, vec) == 0);
        for (size_t i = 0; i < k; i++)
            miss += !(vec[i] & 1);
    }
    return miss;
}

static size_t model_missing(const cortiq_model *m) {
    size_t miss = missing_pages(m->head.data, m->head.nbytes);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        const cmf_qmat *w[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->wu, &y->wd};
        for (int k = 0; k < 7; k++)
            miss += missing_pages(w[k]->data, w[k]->nbytes);
    }
    return miss;
}

static void drop_cache(const char *path) {
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    fdatasync(fd);
    /* twice: pages still on a per-CPU LRU list are skipped by the first call */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    usleep(1000);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* prefetch: 0 none, 1 the default (weights moved onto 2 MiB pages where they fill a window),
 * 2 with no_huge_pages (nothing moved), 3 cortiq_model_page_in and then moves of one window
 * at a time (as cortiq_generate does between tokens) */
static void logits_of(const char *path, int prefetch, float *out, uint32_t *V) {
    cmf_err err;
    cortiq_model *m;
    cortiq_load_opts lo = {.threads = 1, .no_huge_pages = prefetch == 2};
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (prefetch == 3) {
        uint64_t listed = cortiq_model_page_in(m), moved = 0, step;
        CHECK_MSG(model_missing(m) == 0, "%zu weight pages not resident after page_in",
                  model_missing(m));
        CHECK(cortiq_model_moves_left(m) == listed);
        while ((step = cortiq_model_move_step(m, 1)) > 0)
            moved += step;
        CHECK(moved <= listed && cortiq_model_moves_left(m) == 0);
        CHECK(cortiq_model_move_step(m, UINT64_MAX) == 0); /* nothing left */
    } else if (prefetch) {
        size_t before = model_missing(m);
        uint64_t moved = cortiq_model_prefetch(m);
        printf("weight pages not resident: %zu before prefetch, %zu after; %llu bytes moved onto "
               "2 MiB pages\n",
               before, model_missing(m), (unsigned long long)moved);
        if (prefetch == 2) CHECK(moved == 0);
        CHECK_MSG(model_missing(m) == 0, "%zu weight pages not resident after prefetch",
                  model_missing(m));
    }
    cortiq_session *s;
    CHECK(cortiq_session_create(m, 16, &s, &err) == CMF_OK);
    const int32_t prompt[4] = {1, 2, 3, 4};
    CHECK(cortiq_session_eval(s, prompt, 4, NULL, &err) == CMF_OK);
    *V = cortiq_model_vocab(m);
    memcpy(out, cortiq_session_logits(s), *V * sizeof(float));
    cortiq_session_free(s);
    cortiq_model_free(m);
}

int main(void) {
    const char *path = "prefetch_qwen3.cmf";
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name("q8", &o.quant));
    cmf_err err;
    CHECK_MSG(cmf_convert_hf(TINY "qwen3", path, NULL, &o, NULL, &err) == CMF_OK, "%s", err.msg);
    static float a[1 << 16], b[1 << 16], c[1 << 16];
    uint32_t Va = 0, Vb = 0, Vc = 0;
    drop_cache(path);
    logits_of(path, 1, a, &Va);
    drop_cache(path);
    logits_of(path, 0, b, &Vb);
    drop_cache(path);
    logits_of(path, 2, c, &Vc);
    static float d[1 << 16];
    uint32_t Vd = 0;
    drop_cache(path);
    logits_of(path, 3, d, &Vd);
    CHECK(Va == Vb && Va == Vc && Va == Vd && Va <= (1u << 16));
    CHECK(memcmp(a, b, Va * sizeof(float)) == 0);
    CHECK(memcmp(a, c, Va * sizeof(float)) == 0);
    CHECK(memcmp(a, d, Va * sizeof(float)) == 0);
    CHECK(cortiq_model_prefetch(NULL) == 0 && cortiq_model_page_in(NULL) == 0);
    CHECK(cortiq_model_move_step(NULL, 1) == 0 && cortiq_model_moves_left(NULL) == 0);
    unlink(path);
    TEST_DONE();
}
