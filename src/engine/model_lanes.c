/* model_lanes.c - the decode copies of a model's integer matrices (cmf_qmat_lanes_bytes: panels
 * of 8 rows, one int32 lane per row), made once at load on the model's threads.
 *
 * Which matrices (cortiq_load_opts.batch_lanes): by default those whose copy keeps about the
 * file's bits per weight (cmf_qmat_lanes_compact: q4_tiled and q4_block, q4tp with 4-5 % more,
 * its codes and ladder numbers, vbit 2-5 % more), whose one-token kernels on it are the faster
 * (docs/KERNELS.md, "Batched decode lanes"); for a server's batched steps q8_row too (its copy
 * costs one session speed: q8_row's one-token kernel is the faster); none when negative.
 *
 * All copies share one allocation (on 2 MiB pages unless no_huge_pages): one per matrix
 * rounded each to whole 2 MiB pages, which made a 2.4 MB matrix take 4 MB. Every copied range
 * of rows hands its file pages back at once (MADV_DONTNEED: they stay in the page cache for
 * the next process and refault if something still reads them: a task mask's gathered rows, a
 * skill instance of the same file), so the resident set holds the weights about once even
 * while the copies are made. That advice drops anonymous pages' contents, so it is given only
 * inside the file's mappings and before any 2 MiB window of them has moved (model_prefetch.c):
 * this runs at the end of the load. A tied head's table rows are read from its copy too
 * (cq_embed_token). */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hugepages.h"
#include "engine/model.h"
#include "engine/pool.h"

/* a range of one matrix's rows: a unit of work of about CHUNK_BYTES of copy */
typedef struct lanes_chunk {
    const cmf_qmat *w;
    uint8_t *buf;
    uint64_t r0, r1;
} lanes_chunk;

#define CHUNK_BYTES ((uint64_t)1 << 20)

typedef struct lanes_job {
    const cortiq_model *m;
    const lanes_chunk *chunks;
    size_t n;
    _Atomic size_t next;
} lanes_job;

/* Whether [p, p + n) lies inside one of the file's mappings (shards). */
static bool in_file(const cortiq_model *m, const uint8_t *p, uint64_t n) {
    for (size_t s = 0; s < cmf_file_shard_count(m->file); s++) {
        size_t len = 0;
        const uint8_t *base = cmf_file_shard_bytes(m->file, s, &len);
        if (base && p >= base && p + n <= base + len) return true;
    }
    return false;
}

/* The whole pages inside [p, p + n) of the file's mappings handed back (see above). */
static void release(const cortiq_model *m, const uint8_t *p, uint64_t n) {
    if (!p || !n || m->moves || !in_file(m, p, n)) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
    if (e > a) (void)madvise((void *)a, (size_t)(e - a), MADV_DONTNEED);
}

static void fill_some(void *ctx, unsigned tid, unsigned nt) {
    (void)tid, (void)nt;
    lanes_job *j = ctx;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
        const lanes_chunk *c = &j->chunks[i];
        cmf_qmat_lanes_fill(c->w, c->buf, c->r0, c->r1);
        for (unsigned part = 0; part < 3; part++) { /* codes, scales apart, q4tp's codes */
            uint64_t n;
            const uint8_t *src = cmf_qmat_lanes_source(c->w, c->r0, c->r1, part, &n);
            release(j->m, src, n);
        }
    }
}

/* w, whose copy would take b bytes (0: none on this tier) */
static bool wanted(const cmf_qmat *w, int batch_lanes, uint64_t b) {
    if (batch_lanes < 0 || !w->data || !b) return false;
    return batch_lanes > 0 || cmf_qmat_lanes_compact(w);
}

/* rows per chunk of w, whose copy is b bytes: a multiple of 64 (the blocks of every copy's
 * rows, cmf_qmat_lanes_block) */
static uint64_t chunk_rows(const cmf_qmat *w, uint64_t b) {
    uint64_t panel = b / ((w->rows + 7) / 8), rows = CHUNK_BYTES / panel * 8;
    return rows < 64 ? 64 : rows & ~(uint64_t)63;
}

void cq_model_build_lanes(cortiq_model *m, int batch_lanes) {
    if (!m->layers || !(m->q4flags & CMF_KF_INT8_ACT) || batch_lanes < 0) return;
    const size_t cap = (size_t)(m->n_layers + 1) * CQ_DECODE_MATS_PER_LAYER + 1;
    cmf_qmat **mats = malloc(cap * sizeof *mats);
    uint64_t *off = malloc(cap * sizeof *off), *len = malloc(cap * sizeof *len), total = 0;
    lanes_chunk *chunks = NULL;
    size_t n = mats && off && len ? cq_decode_mats(m, true, mats) : 0, k = 0, nc = 0;
    for (size_t i = 0; i < n; i++) { /* the wanted ones to the front, with their places */
        uint64_t b = cmf_qmat_lanes_bytes(mats[i]);
        if (!wanted(mats[i], batch_lanes, b)) b = 0;
        for (size_t e = 0; b && e < k; e++) /* listed twice */
            if (mats[e] == mats[i]) b = 0;
        if (!b) continue;
        mats[k] = mats[i], off[k] = total, len[k] = b;
        total += (b + 63) & ~(uint64_t)63;
        const uint64_t rows = chunk_rows(mats[k], b);
        nc += (size_t)((mats[k]->rows + rows - 1) / rows);
        k++;
    }
    uint8_t *arena = total ? cq_huge_alloc((size_t)total, m->huge_pages) : NULL;
    chunks = arena ? malloc(nc * sizeof *chunks) : NULL;
    if (chunks) {
        size_t c = 0;
        for (size_t i = 0; i < k; i++) {
            const uint64_t rows = chunk_rows(mats[i], len[i]), R = mats[i]->rows;
            for (uint64_t r = 0; r < R; r += rows)
                chunks[c++] =
                    (lanes_chunk){mats[i], arena + off[i], r, r + rows < R ? r + rows : R};
        }
        lanes_job j = {m, chunks, nc, 0};
        cq_pool_run(m->pool, fill_some, &j);
        for (size_t i = 0; i < k; i++) {
            mats[i]->lanes = arena + off[i];
            mats[i]->lanes_bytes = len[i];
            release(m, mats[i]->data, mats[i]->nbytes);
        }
        m->lanes = arena, m->lanes_bytes = total, m->lanes_mats = mats, m->n_lanes_mats = k;
        mats = NULL;
    } else if (arena) { /* an optimisation: without it decode reads the file */
        cq_huge_free(arena, (size_t)total);
    }
    free(chunks);
    free(len);
    free(off);
    free(mats);
}

void cq_model_free_lanes(cortiq_model *m) {
    for (size_t i = 0; i < m->n_lanes_mats; i++) /* borrowed: not theirs to free */
        m->lanes_mats[i]->lanes = NULL, m->lanes_mats[i]->lanes_bytes = 0;
    if (m->lanes) cq_huge_free(m->lanes, (size_t)m->lanes_bytes);
    free(m->lanes_mats);
    m->lanes = NULL, m->lanes_mats = NULL, m->n_lanes_mats = 0, m->lanes_bytes = 0;
}
