/* cmd_mask_derive.c - `cortiq mask derive FILE --calib TEXT --heldout TEXT --keep F --name NAME`.
 *
 * Criterion: neuron i of layer l is kept by its mean |act(gate_i) * up_i| over the calibration
 * tokens (the magnitude of what it adds to the down projection's input), the top
 * round(F * intermediate) of each layer; with --heads K the top round(K * heads) heads of each
 * layer by the mean L2 norm of their attention output. Ties go to the lower index.
 * Quality (spec §5.1, a held-out contract): perplexity of the held-out text with the candidate
 * mask over the dense perplexity, windows as `cortiq ppl` takes them (ctx tokens, stride ctx/2,
 * each token scored once). The mask is then appended in place with that measurement. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mask_section.h"
#include "common/err.h"
#include "common/fileio.h"
#include "cortiq/runtime.h"
#include "cortiq/sign.h"

static void usage(void) {
    printf(
        "usage: cortiq mask derive FILE --calib TEXT --heldout TEXT --keep F --name NAME\n"
        "                  [--heads K] [--group 1|32] [--description D] [--default] [--ctx N] [-t N]\n"
        "  Choose each layer's FFN neurons by mean |act(gate)*up| over the calibration text\n"
        "  (the top F of them, 0 < F <= 1), and with --heads the top K of its attention heads\n"
        "  by mean L2 norm of their output; measure the held-out perplexity masked vs dense;\n"
        "  append the mask with quality {heldout_ppl_ratio, value, baseline_dense, n_samples,\n"
        "  dataset_sha256 (of the held-out file)} in place (earlier bytes untouched).\n"
        "  --group 32: choose the FFN neurons in whole aligned groups of 32 (ranked by their\n"
        "  summed statistic), so down projections stored in 32-column groups (q4, q4t, q4tp, q1)\n"
        "  skip whole groups; by default neurons are chosen one by one.\n"
        "  --default: make it the file's default_task. --ctx: tokens per window (default 512).\n");
}

typedef struct derive_args {
    const char *path, *calib, *heldout, *name, *description;
    double keep, heads;
    uint64_t group; /* 1, or 32: FFN neurons chosen in whole aligned groups */
    bool set_default;
    uint64_t ctx, threads;
} derive_args;

static int parse(int argc, char **argv, derive_args *a) {
    a->ctx = 512;
    a->group = 1;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v;
        if (cli_is_help(s)) return usage(), CLI_EXIT_OK;
        if (!strcmp(s, "--default")) {
            a->set_default = true;
            continue;
        }
        if (s[0] != '-') {
            if (a->path) return cli_usage_error("mask derive", "unexpected argument '%s'", s);
            a->path = s;
            continue;
        }
        if (!(v = cli_opt_value("mask derive", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!strcmp(s, "--calib"))
            a->calib = v;
        else if (!strcmp(s, "--heldout"))
            a->heldout = v;
        else if (!strcmp(s, "--name"))
            a->name = v;
        else if (!strcmp(s, "--description"))
            a->description = v;
        else if (!strcmp(s, "--keep")) {
            if (!cli_opt_double("mask derive", s, v, 0, true, 1, false, &a->keep))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(s, "--heads")) {
            if (!cli_opt_double("mask derive", s, v, 0, true, 1, false, &a->heads))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(s, "--group")) {
            if (!cli_opt_u64("mask derive", s, v, 1, 32, &a->group)) return CLI_EXIT_USAGE;
            if (a->group != 1 && a->group != 32)
                return cli_usage_error("mask derive", "--group %s: want 1 or 32", v);
        } else if (!strcmp(s, "--ctx")) {
            if (!cli_opt_u64("mask derive", s, v, 8, 1u << 20, &a->ctx)) return CLI_EXIT_USAGE;
        } else if (!strcmp(s, "-t") || !strcmp(s, "--threads")) {
            if (!cli_opt_u64("mask derive", s, v, 1, 64, &a->threads)) return CLI_EXIT_USAGE;
        } else
            return cli_usage_error("mask derive", "unknown option '%s'", s);
    }
    if (!a->path || !a->calib || !a->heldout || !a->name || a->keep <= 0)
        return cli_usage_error("mask derive", "need FILE, --calib, --heldout, --keep and --name");
    if (!strcmp(a->name, "none"))
        return cli_usage_error("mask derive", "'none' names the dense model, not a mask");
    return -1;
}

static cmf_status tokenize_file(cortiq_runtime *rt, const char *path, int32_t **ids, size_t *n,
                                cmf_err *err) {
    size_t len;
    char *text = cq_read_file(path, &len);
    if (!text) return cmf_err_set(err, CMF_E_IO, path, "cannot read: %s", strerror(errno));
    cmf_status st =
        cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), text, len, true, ids, n, err);
    free(text);
    if (!st && *n < 2) st = cmf_err_set(err, CMF_E_INVALID_ARG, path, "%zu tokens: too short", *n);
    return st;
}

/* Activation statistics over the calibration tokens, windows of win tokens. */
static cmf_status collect(cortiq_session *s, const int32_t *ids, size_t n, uint32_t win,
                          cortiq_act_stats *st, cmf_err *err) {
    cortiq_session_collect_stats(s, st);
    cmf_status rc = CMF_OK;
    for (size_t b = 0; b < n && !rc; b += win) {
        cortiq_session_reset(s);
        rc = cortiq_session_eval(s, ids + b, n - b < win ? n - b : win, NULL, err);
    }
    cortiq_session_collect_stats(s, NULL);
    return rc;
}

/* Perplexity as `cortiq ppl` computes it: windows of win tokens advancing win / 2. */
static cmf_status perplexity(cortiq_session *s, uint32_t V, const int32_t *ids, size_t n,
                             uint32_t win, double *ppl, size_t *scored, cmf_err *err) {
    float *logits = malloc((size_t)win * V * sizeof *logits);
    if (!logits) return cmf_err_set(err, CMF_E_NOMEM, "mask derive", "logits");
    size_t stride = win / 2 ? win / 2 : 1, prev_end = 0;
    double nll = 0;
    cmf_status st = CMF_OK;
    *scored = 0;
    for (size_t begin = 0; begin < n && !st; begin += stride) {
        size_t end = begin + win < n ? begin + win : n, trg = end - prev_end;
        cortiq_session_reset(s);
        st = cortiq_session_eval(s, ids + begin, end - begin, logits, err);
        size_t first = (end - begin) - trg;
        for (size_t t = first ? first - 1 : 0; !st && t + 1 < end - begin; t++) {
            nll += cli_token_nll(logits + t * V, V, ids[begin + t + 1]);
            (*scored)++;
        }
        prev_end = end;
        if (end == n) break;
    }
    free(logits);
    *ppl = *scored ? exp(nll / (double)*scored) : NAN;
    return st;
}

typedef struct ranked {
    double score;
    uint32_t i;
} ranked;

static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Sets, in row (bits of `dim`), the top `keep` entries of score (ties: lower index). */
static bool top_bits(const double *score, uint32_t dim, uint32_t keep, uint8_t *row) {
    ranked *r = malloc(dim * sizeof *r);
    if (!r) return false;
    for (uint32_t i = 0; i < dim; i++)
        r[i] = (ranked){score[i], i};
    qsort(r, dim, sizeof *r, by_score);
    for (uint32_t k = 0; k < keep && k < dim; k++)
        row[r[k].i / 8] |= (uint8_t)(1u << (r[k].i % 8));
    free(r);
    return true;
}

/* The same over whole aligned groups of g neurons, ranked by their summed score. */
static bool top_groups(const double *score, uint32_t dim, uint32_t g, uint32_t keep, uint8_t *row) {
    uint32_t ng = (dim + g - 1) / g;
    double *gs = calloc(ng, sizeof *gs);
    uint8_t *gr = calloc((ng + 7) / 8, 1);
    bool ok = gs && gr;
    for (uint32_t i = 0; ok && i < dim; i++)
        gs[i / g] += score[i];
    ok = ok && top_bits(gs, ng, (keep + g - 1) / g, gr);
    for (uint32_t i = 0; ok && i < dim; i++)
        if (gr[i / g / 8] >> (i / g % 8) & 1) row[i / 8] |= (uint8_t)(1u << (i % 8));
    free(gs), free(gr);
    return ok;
}

static uint32_t share(double f, uint32_t dim) {
    uint32_t k = (uint32_t)llround(f * dim);
    return k < 1 ? 1 : k > dim ? dim : k;
}

typedef struct derived {
    cmf_masks dims;
    cmf_mask mask;
    uint8_t *ffn, *heads, *gates;
} derived;

static cmf_status choose(const cmf_arch *arch, const cortiq_act_stats *st, const derive_args *a,
                         derived *d, cmf_err *err) {
    uint32_t L = (uint32_t)arch->num_layers, F = (uint32_t)arch->intermediate_size;
    uint32_t H = (uint32_t)arch->num_attention_heads;
    d->dims = (cmf_masks){.n_layers = L,
                          .intermediate = F,
                          .n_heads = H,
                          .ffn_bytes = (F + 7) / 8,
                          .head_bytes = (H + 7) / 8,
                          .gates_bytes = (L + 7) / 8};
    d->ffn = calloc((size_t)L * d->dims.ffn_bytes, 1);
    d->heads = calloc((size_t)L * d->dims.head_bytes, 1);
    d->gates = calloc(d->dims.gates_bytes, 1);
    if (!d->ffn || !d->heads || !d->gates) return cmf_err_set(err, CMF_E_NOMEM, "mask", "rows");
    for (uint32_t l = 0; l < L; l++) {
        d->gates[l / 8] |= (uint8_t)(1u << (l % 8));
        uint8_t *fr = d->ffn + (size_t)l * d->dims.ffn_bytes;
        const double *fs = st->ffn + (size_t)l * st->ffn_stride;
        bool seen = false;
        for (uint32_t i = 0; i < F && !seen; i++)
            seen = fs[i] > 0;
        bool ok =
            !seen || (a->group > 1 ? top_groups(fs, F, (uint32_t)a->group, share(a->keep, F), fr)
                                   : top_bits(fs, F, share(a->keep, F), fr));
        if (!ok) return cmf_err_set(err, CMF_E_NOMEM, "mask", "ranking");
        if (!seen) /* no dense FFN here (a MoE layer): the expert area is the place to narrow it */
            for (uint32_t i = 0; i < F; i++)
                fr[i / 8] |= (uint8_t)(1u << (i % 8));
        uint8_t *hr = d->heads + (size_t)l * d->dims.head_bytes;
        if (a->heads > 0 &&
            !top_bits(st->heads + (size_t)l * st->heads_stride, H, share(a->heads, H), hr))
            return cmf_err_set(err, CMF_E_NOMEM, "mask", "ranking");
        if (!(a->heads > 0))
            for (uint32_t h = 0; h < H; h++)
                hr[h / 8] |= (uint8_t)(1u << (h % 8));
    }
    d->mask = (cmf_mask){.name = a->name, .ffn = d->ffn, .heads = d->heads, .gates = d->gates};
    return CMF_OK;
}

static void hex(const uint8_t *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

int cmd_mask_derive(int argc, char **argv) {
    derive_args a = {0};
    int rc = parse(argc, argv, &a);
    if (rc >= 0) return rc;
    cmf_err err;
    cortiq_runtime *rt = NULL;
    cortiq_runtime_opts ro = {.threads = (unsigned)a.threads, .ctx = (uint32_t)a.ctx};
    cmf_status st = cortiq_runtime_open(a.path, &ro, &rt, &err);
    int32_t *cal = NULL, *held = NULL;
    size_t n_cal = 0, n_held = 0, scored = 0, scored_m = 0;
    derived d = {0};
    cortiq_act_stats stats = {0};
    uint8_t sha[CMF_SIG_SHA256_BYTES], *section = NULL;
    size_t section_len = 0;
    double dense = 0, masked = 0;
    char quality[512];
    if (!st) st = tokenize_file(rt, a.calib, &cal, &n_cal, &err);
    if (!st) st = tokenize_file(rt, a.heldout, &held, &n_held, &err);
    if (!st) st = cmf_sha256_file(a.heldout, sha, &err);
    cortiq_model *m = rt ? cortiq_runtime_model(rt) : NULL;
    cortiq_session *s = rt ? cortiq_runtime_session(rt) : NULL;
    const cmf_file *f = m ? cortiq_model_file(m) : NULL;
    const cmf_masks *old = f ? cmf_file_masks(f) : NULL;
    if (!st && old && cmf_masks_find(old, a.name))
        st = cmf_err_set(&err, CMF_E_INVALID_ARG, a.path,
                         "a task mask '%s' exists (cortiq mask rm %s %s first)", a.name, a.path,
                         a.name);
    const cmf_arch *arch = f ? &cmf_file_header(f)->arch : NULL;
    if (!st) {
        uint32_t L = (uint32_t)arch->num_layers;
        stats.ffn_stride = (size_t)arch->intermediate_size;
        stats.heads_stride = (size_t)arch->num_attention_heads;
        stats.ffn = calloc((size_t)L * stats.ffn_stride, sizeof(double));
        stats.heads = calloc((size_t)L * stats.heads_stride, sizeof(double));
        if (!stats.ffn || !stats.heads) st = cmf_err_set(&err, CMF_E_NOMEM, "mask", "stats");
    }
    uint32_t win = s ? cortiq_session_ctx(s) : 0, V = m ? cortiq_model_vocab(m) : 0;
    if (!st) st = cortiq_session_set_task(s, "none", &err);
    if (!st) st = collect(s, cal, n_cal, win, &stats, &err);
    if (!st) st = choose(arch, &stats, &a, &d, &err);
    if (!st) st = perplexity(s, V, held, n_held, win, &dense, &scored, &err);
    if (s) cortiq_session_reset(s);
    if (!st) st = cortiq_session_set_mask(s, &d.dims, &d.mask, &err);
    if (!st) st = perplexity(s, V, held, n_held, win, &masked, &scored_m, &err);
    if (!st) {
        char sha_hex[2 * CMF_SIG_SHA256_BYTES + 1];
        hex(sha, sizeof sha, sha_hex);
        snprintf(quality, sizeof quality,
                 "{\"metric\": \"heldout_ppl_ratio\", \"value\": %.6f, \"baseline_dense\": %.6f, "
                 "\"n_samples\": %zu, \"dataset_sha256\": \"%s\"}",
                 masked / dense, dense, scored, sha_hex);
        mask_new add = {.name = a.name,
                        .description = a.description,
                        .quality_json = quality,
                        .ffn = d.ffn,
                        .heads = d.heads,
                        .gates = d.gates};
        st = mask_section_build(old, d.dims.n_layers, d.dims.intermediate, d.dims.n_heads, NULL,
                                &add, a.set_default ? a.name : NULL, &section, &section_len, &err);
    }
    cortiq_task_stats ts = {0};
    if (s) cortiq_session_task_stats(s, &ts);
    cortiq_runtime_free(rt); /* the file is unmapped before it grows */
    if (!st) st = mask_section_append(a.path, section, section_len, &err);
    if (st)
        cli_error(&err);
    else
        printf("%s: task mask '%s' appended: FFN %llu of %llu neurons, heads %llu of %llu\n"
               "  calibration %zu tokens (%s), held-out %zu tokens scored (%s)\n"
               "  held-out PPL dense %.4f, masked %.4f: quality heldout_ppl_ratio %.4f\n",
               a.path, a.name, (unsigned long long)ts.ffn_active,
               (unsigned long long)ts.ffn_neurons, (unsigned long long)ts.heads_active,
               (unsigned long long)ts.heads, n_cal, a.calib, scored, a.heldout, dense, masked,
               masked / dense);
    free(section), free(cal), free(held), free(stats.ffn), free(stats.heads);
    free(d.ffn), free(d.heads), free(d.gates);
    return cli_exit_code(st);
}
