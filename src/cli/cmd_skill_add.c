/* cmd_skill_add.c - `cortiq skill add FILE --id ID --from TUNED.cmf|HF_DIR`: append a skill in
 * place (spec §9, append-only): the donor's tensors that differ from the backbone's bytes, as
 * skill.ID.<name> in the donor's own encoding; the registry record; the selection subspace
 * fitted on the calibration prompts' phi; and the quality contract measured on held-out text. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/err.h"
#include "cli/cmd_skill.h"
#include "common/fileio.h"
#include "cortiq/converter.h"
#include "cortiq/runtime.h"
#include "cortiq/writer.h"

static void usage(void) {
    printf(
        "usage: cortiq skill add FILE --id ID --from TUNED.cmf|HF_DIR [--layers 3,4,5]\n"
        "                        [--calib TEXT] [--heldout TEXT] [--phi-layer L] [--rank K]\n"
        "                        [--name NAME] [--task NAME] [--quant Q] [-t N]\n"
        "  Append skill ID to FILE in place (spec 9, append-only: no earlier byte changes; the\n"
        "  header and directory are re-emitted at the tail, the envelope switched last).\n"
        "  --from SRC     the fine-tuned model: a .cmf, or a Hugging Face directory converted\n"
        "                 first with the backbone's quant_type (or --quant). Every backbone tensor\n"
        "                 whose donor bytes differ is appended as skill.ID.<name>, full shape, in\n"
        "                 the donor's dtype.\n"
        "  --layers LIST  compare only these layers' tensors (comma-separated, ranges a-b)\n"
        "  --calib TEXT   calibration prompts, one per line: the selection subspace for --skill\n"
        "                 auto (mean and top-K principal directions of phi at --phi-layer)\n"
        "  --heldout TEXT held-out text: quality = perplexity of backbone vs overlaid\n"
        "  --phi-layer L  layer whose output is phi (default: 2/3 of the layers, as the\n"
        "                 reference implementation)\n"
        "  --rank K       basis rows (default 4; at most prompts - 1)\n"
        "  --name NAME    a human name for the record\n"
        "  --task NAME    the record's input_mask_task: a task mask of FILE that runs with the\n"
        "                 skill when no --task is given (the overlaid quality is measured so)\n"
        "  --quant Q      encoding of an HF_DIR donor (default: the backbone's quant_type)\n"
        "  -t, --threads N compute threads (default: online CPUs)\n");
}

typedef struct add_args {
    const char *path, *id, *from, *layers, *calib, *heldout, *name, *quant, *task;
    uint64_t phi_layer, rank, threads;
    bool has_phi;
} add_args;

/* "3,4,7-9" -> bits in set[CQ_LAYER_SET] */
#define LAYER_SET 4096
static bool parse_layers(const char *s, unsigned char *set) {
    while (*s) {
        char *end;
        unsigned long a = strtoul(s, &end, 10), b = a;
        if (end == s) return false;
        if (*end == '-') {
            s = end + 1;
            b = strtoul(s, &end, 10);
            if (end == s) return false;
        }
        if (a > b || b >= LAYER_SET) return false;
        for (unsigned long l = a; l <= b; l++)
            set[l] = 1;
        if (*end == ',')
            end++;
        else if (*end)
            return false;
        s = end;
    }
    return true;
}

/* layer index of "model.layers.N.…", or -1 */
static long layer_of(const char *name) {
    const char *p = "model.layers.";
    if (strncmp(name, p, strlen(p))) return -1;
    char *end;
    long l = strtol(name + strlen(p), &end, 10);
    return *end == '.' ? l : -1;
}

/* Windows of the context length, non-overlapping; every token but a window's first scored. */
static cmf_status text_ppl(const char *path, const char *skill, const char *task, const char *text,
                           unsigned threads, double *ppl, size_t *scored, cmf_err *err) {
    cortiq_runtime_opts ro = {.threads = threads, .kv = CORTIQ_KV_F32, .skill = skill};
    cortiq_runtime *rt = NULL;
    cmf_status st = cortiq_runtime_open(path, &ro, &rt, err);
    if (!st) st = cortiq_session_set_task(cortiq_runtime_session(rt), task, err);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!st)
        st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), text, strlen(text), true, &ids, &n,
                                  err);
    float *logits = NULL;
    double nll = 0;
    *scored = 0;
    if (!st) {
        cortiq_session *s = cortiq_runtime_session(rt);
        uint32_t win = cortiq_session_ctx(s), V = cortiq_model_vocab(cortiq_runtime_model(rt));
        if (!(logits = malloc((size_t)win * V * sizeof *logits)))
            st = cmf_err_set(err, CMF_E_NOMEM, path, "logits");
        for (size_t b = 0; !st && b + 1 < n; b += win) {
            size_t e = b + win < n ? b + win : n;
            cortiq_session_reset(s);
            if ((st = cortiq_session_eval(s, ids + b, e - b, logits, err))) break;
            for (size_t t = 0; t + 1 < e - b; t++) {
                nll += cli_token_nll(logits + t * V, V, ids[b + t + 1]);
                (*scored)++;
            }
        }
    }
    if (!st && !*scored) st = cmf_err_set(err, CMF_E_INVALID_ARG, path, "held-out text too short");
    if (!st) *ppl = exp(nll / (double)*scored);
    free(logits);
    free(ids);
    cortiq_runtime_free(rt);
    return st;
}

/* The selection subspace (spec §9): phi of every calibration line on the backbone, their mean,
 * and the top-K principal directions of the centred cloud (power iteration with deflation). */
static cmf_status fit_selection(const add_args *a, uint32_t n_layers, cmf_skill_selection *sel,
                                size_t *n_prompts, cmf_err *err) {
    size_t len;
    char *text = cq_read_file(a->calib, &len);
    if (!text) return cmf_err_set(err, CMF_E_IO, a->calib, "cannot read: %s", strerror(errno));
    cortiq_runtime_opts ro = {.threads = (unsigned)a->threads, .ctx = 16, .kv = CORTIQ_KV_F32};
    cortiq_runtime *rt = NULL;
    cmf_status st = cortiq_runtime_open(a->path, &ro, &rt, err);
    memset(sel, 0, sizeof *sel);
    sel->phi_layer = a->has_phi ? (uint32_t)a->phi_layer : n_layers * 2 / 3;
    if (!st && sel->phi_layer >= n_layers)
        st = cmf_err_set(err, CMF_E_INVALID_ARG, a->path, "--phi-layer %u: the model has %u layers",
                         sel->phi_layer, n_layers);
    float *phis = NULL;
    size_t n = 0, cap = 0;
    uint64_t H = 0;
    char *save = NULL;
    for (char *line = st ? NULL : strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (!*line) continue;
        cortiq_model *m = cortiq_runtime_model(rt);
        H = cmf_file_header(cortiq_model_file(m))->arch.hidden_size;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            float *g = realloc(phis, cap * H * sizeof *g);
            if (!g) {
                st = cmf_err_set(err, CMF_E_NOMEM, a->calib, "phi");
                break;
            }
            phis = g;
        }
        int32_t *ids = NULL;
        size_t k = 0;
        st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), line, strlen(line), false, &ids, &k,
                                  err);
        uint32_t maxc = cortiq_model_max_context(m); /* a long line: its beginning */
        if (maxc && k > maxc) k = maxc;
        if (!st && !k)
            st = cmf_err_set(err, CMF_E_INVALID_ARG, a->calib, "a line encodes to no tokens");
        if (!st) st = cortiq_model_probe_phi(m, ids, k, sel->phi_layer, phis + n * H, err);
        free(ids);
        if (st) break;
        n++;
    }
    cortiq_runtime_free(rt);
    free(text);
    if (!st && n < 2)
        st = cmf_err_set(err, CMF_E_INVALID_ARG, a->calib,
                         "%zu calibration prompt(s): need at least 2 lines", n);
    *n_prompts = n;
    sel->hidden = H;
    sel->rank = (uint32_t)(a->rank < n - 1 ? a->rank : n - 1);
    if (!st && (!(sel->mean = calloc(H, sizeof(float))) ||
                !(sel->basis = calloc(H * (sel->rank ? sel->rank : 1), sizeof(float)))))
        st = cmf_err_set(err, CMF_E_NOMEM, a->calib, "selection");
    double *v = st ? NULL : malloc(H * sizeof *v), *next = st ? NULL : malloc(H * sizeof *next);
    if (!st && (!v || !next)) st = cmf_err_set(err, CMF_E_NOMEM, a->calib, "selection");
    if (!st) {
        for (size_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < H; j++)
                sel->mean[j] += phis[i * H + j] / (float)n;
        for (size_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < H; j++)
                phis[i * H + j] -= sel->mean[j];
    }
    for (uint32_t r = 0; !st && r < sel->rank; r++) {
        /* start from the centred sample of largest norm (never orthogonal to the cloud) */
        size_t best = 0;
        double bn = -1;
        for (size_t i = 0; i < n; i++) {
            double s2 = 0;
            for (uint64_t j = 0; j < H; j++)
                s2 += (double)phis[i * H + j] * phis[i * H + j];
            if (s2 > bn) bn = s2, best = i;
        }
        for (uint64_t j = 0; j < H; j++)
            v[j] = phis[best * H + j];
        for (int it = 0; it < 60; it++) {
            memset(next, 0, H * sizeof *next);
            for (size_t i = 0; i < n; i++) {
                double d = 0;
                for (uint64_t j = 0; j < H; j++)
                    d += phis[i * H + j] * v[j];
                for (uint64_t j = 0; j < H; j++)
                    next[j] += d * phis[i * H + j];
            }
            double norm = 0;
            for (uint64_t j = 0; j < H; j++)
                norm += next[j] * next[j];
            norm = sqrt(norm);
            if (!(norm > 1e-20)) break;
            for (uint64_t j = 0; j < H; j++)
                v[j] = next[j] / norm;
        }
        for (uint64_t j = 0; j < H; j++)
            sel->basis[r * H + j] = (float)v[j];
        for (size_t i = 0; i < n; i++) { /* deflate */
            double d = 0;
            for (uint64_t j = 0; j < H; j++)
                d += phis[i * H + j] * v[j];
            for (uint64_t j = 0; j < H; j++)
                phis[i * H + j] -= (float)(d * v[j]);
        }
    }
    free(v);
    free(next);
    free(phis);
    if (st) cmf_skill_selection_free(sel);
    return st;
}

/* The donor as a CMF file: opened directly, or an HF directory converted to a temporary file
 * (*tmp receives its path, to unlink). */
static cmf_status open_donor(const add_args *a, const cmf_file *f, cmf_file **out, char **tmp,
                             cmf_err *err) {
    struct stat sb;
    *tmp = NULL;
    if (stat(a->from, &sb) != 0)
        return cmf_err_set(err, CMF_E_IO, a->from, "cannot read: %s", strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return cmf_open_model(a->from, 0, out, err);
    const cmf_header *base = cmf_file_header(f);
    /* the backbone's encoding: --quant, else quant_type (any case), else the dtype of its
     * first layer's q_proj */
    char q[32] = "";
    const char *src = a->quant ? a->quant : base->quant_type;
    const cmf_tensor *probe = cmf_file_find(f, "model.layers.0.self_attn.q_proj.weight");
    if (!src && probe) src = cmf_dtype_name((cmf_dtype)probe->dtype);
    for (size_t i = 0; src && src[i] && i + 1 < sizeof q; i++)
        q[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]), q[i + 1] = 0;
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.threads = (unsigned)a->threads;
    if (!a->quant && !cmf_convert_quant_from_name(q, &o.quant) && probe)
        snprintf(q, sizeof q, "%s", cmf_dtype_name((cmf_dtype)probe->dtype));
    if (!*q || !cmf_convert_quant_from_name(q, &o.quant))
        return cmf_err_set(err, CMF_E_INVALID_ARG, a->path,
                           "quant_type \"%s\" of the backbone is not a --quant name: pass "
                           "--quant to encode the donor %s",
                           *q ? q : "(absent)", a->from);
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/cortiq-skill-donor-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return cmf_err_set(err, CMF_E_IO, path, "cannot create: %s", strerror(errno));
    close(fd);
    if (!(*tmp = strdup(path))) return cmf_err_set(err, CMF_E_NOMEM, path, "path");
    cmf_status st = cmf_convert_hf(a->from, path, NULL, &o, NULL, err);
    return st ? st : cmf_open_model(path, 0, out, err);
}

static int parse_args(int argc, char **argv, add_args *a) {
    memset(a, 0, sizeof *a);
    a->rank = 4;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v;
        if (cli_is_help(s)) return usage(), -1;
        if (s[0] != '-') {
            if (a->path) return cli_usage_error("skill add", "one FILE only ('%s' is a second)", s);
            a->path = s;
            continue;
        }
        if (!cli_word_in(s, "--id --from --layers --calib --heldout --phi-layer --rank --name "
                            "--task --quant -t --threads"))
            return cli_usage_error("skill add", "unknown option '%s'", s);
        if (!(v = cli_opt_value("skill add", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!strcmp(s, "--id"))
            a->id = v;
        else if (!strcmp(s, "--from"))
            a->from = v;
        else if (!strcmp(s, "--layers"))
            a->layers = v;
        else if (!strcmp(s, "--calib"))
            a->calib = v;
        else if (!strcmp(s, "--heldout"))
            a->heldout = v;
        else if (!strcmp(s, "--name"))
            a->name = v;
        else if (!strcmp(s, "--task"))
            a->task = v;
        else if (!strcmp(s, "--quant"))
            a->quant = v;
        else if (!strcmp(s, "--phi-layer")) {
            if (!cli_opt_u64("skill add", s, v, 0, 65535, &a->phi_layer)) return CLI_EXIT_USAGE;
            a->has_phi = true;
        } else if (!strcmp(s, "--rank")) {
            if (!cli_opt_u64("skill add", s, v, 0, 64, &a->rank)) return CLI_EXIT_USAGE;
        } else if (!cli_opt_u64("skill add", s, v, 1, 64, &a->threads))
            return CLI_EXIT_USAGE;
    }
    if (!a->path || !a->id || !a->from)
        return cli_usage_error("skill add", "need FILE, --id ID and --from SRC");
    if (!skill_id_ok(a->id))
        return cli_usage_error("skill add",
                               "--id '%s': [A-Za-z0-9_-], 1-64 characters, not none/auto", a->id);
    return 0;
}

/* A differing tensor to append. */
typedef struct diff {
    const cmf_tensor *t; /* the donor's */
} diff;

static cmf_status append_skill(const add_args *a, const cmf_header *h, const diff *d, size_t nd,
                               const unsigned char *layers, const cmf_skill_selection *sel,
                               cmf_err *err) {
    cmf_appender *ap = NULL;
    cmf_status st = cmf_append_begin(a->path, &ap, err);
    for (size_t i = 0; !st && i < nd; i++) {
        char name[600];
        snprintf(name, sizeof name, "skill.%s.%s", a->id, d[i].t->name);
        st = cmf_append_add_tensor(ap, name, (cmf_dtype)d[i].t->dtype, d[i].t->ndim, d[i].t->shape,
                                   d[i].t->data, d[i].t->nbytes, 0, err);
    }
    json_t *root = st ? NULL : json_loadb(h->json, h->json_len, 0, NULL);
    if (!st && !root) st = cmf_err_set(err, CMF_E_PARSE, a->path, "header JSON");
    if (!st) {
        json_t *skills = json_object_get(root, "skills");
        if (!json_is_array(skills)) {
            skills = json_array();
            json_object_set_new(root, "skills", skills);
        }
        json_t *rec = json_object();
        json_object_set_new(rec, "id", json_string(a->id));
        if (a->name) json_object_set_new(rec, "name", json_string(a->name));
        json_t *ls = json_array();
        for (long l = 0; l < LAYER_SET; l++)
            if (layers[l]) json_array_append_new(ls, json_integer(l));
        json_object_set_new(rec, "layers", ls);
        if (sel) {
            char *sj = cmf_skill_selection_encode(sel);
            json_t *so = sj ? json_loads(sj, 0, NULL) : NULL;
            free(sj);
            if (!so) st = cmf_err_set(err, CMF_E_NOMEM, a->path, "selection");
            json_object_set_new(rec, "selection", so);
        }
        json_object_set_new(rec, "input_mask_task", a->task ? json_string(a->task) : json_null());
        json_object_set_new(rec, "quality", json_null());
        json_array_append_new(skills, rec);
        char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!st)
            st = text ? cmf_append_set_header(ap, text, strlen(text), err)
                      : (cmf_status)cmf_err_set(err, CMF_E_NOMEM, a->path, "header");
        free(text);
    }
    json_decref(root);
    if (!st) st = cmf_append_commit(ap, err);
    cmf_append_free(ap);
    return st;
}

/* Write the measured quality into the record (a second, header-only append). */
static cmf_status record_quality(const char *path, const char *id, json_t *quality, cmf_err *err) {
    cmf_appender *ap = NULL;
    cmf_file *f = NULL;
    cmf_status st = cmf_open(path, 0, &f, err);
    if (!st) st = cmf_append_begin(path, &ap, err);
    if (!st) {
        const cmf_header *h = cmf_file_header(f);
        json_t *root = json_loadb(h->json, h->json_len, 0, NULL);
        size_t k;
        json_t *rec;
        json_array_foreach(json_object_get(root, "skills"), k, rec) {
            if (!strcmp(json_string_value(json_object_get(rec, "id")), id))
                json_object_set(rec, "quality", quality);
        }
        char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(root);
        st = text ? cmf_append_set_header(ap, text, strlen(text), err)
                  : (cmf_status)cmf_err_set(err, CMF_E_NOMEM, path, "header");
        free(text);
    }
    cmf_close(f);
    if (!st) st = cmf_append_commit(ap, err);
    cmf_append_free(ap);
    return st;
}

static cmf_status measure_quality(const add_args *a, cmf_err *err) {
    size_t len;
    char *text = cq_read_file(a->heldout, &len);
    if (!text) return cmf_err_set(err, CMF_E_IO, a->heldout, "cannot read: %s", strerror(errno));
    double pb = 0, po = 0;
    size_t nb = 0, no = 0;
    /* the backbone dense, the skill as `run --skill ID` runs it: under its task, if any */
    cmf_status st = text_ppl(a->path, NULL, NULL, text, (unsigned)a->threads, &pb, &nb, err);
    if (!st) st = text_ppl(a->path, a->id, a->task, text, (unsigned)a->threads, &po, &no, err);
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, (const unsigned char *)text, len);
    free(text);
    if (st) return st;
    char hex[2 * crypto_hash_sha256_BYTES + 1];
    for (size_t i = 0; i < sizeof digest; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    json_t *q = json_object();
    json_object_set_new(q, "metric", json_string("ppl"));
    json_object_set_new(q, "backbone", json_real(round(pb * 1e4) / 1e4));
    json_object_set_new(q, "overlaid", json_real(round(po * 1e4) / 1e4));
    json_object_set_new(q, "dataset_sha256", json_string(hex));
    json_object_set_new(q, "n_tokens", json_integer((json_int_t)nb));
    st = record_quality(a->path, a->id, q, err);
    json_decref(q);
    if (!st)
        printf(
            "quality: held-out perplexity backbone %.4f -> overlaid %.4f (%+.1f%%, %zu tokens)\n",
            pb, po, 100.0 * (po / pb - 1.0), nb);
    return st;
}

int skill_add_main(int argc, char **argv) {
    add_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    unsigned char *only = NULL;
    if (a.layers) {
        only = calloc(LAYER_SET, 1);
        if (!only) return CLI_EXIT_SYSTEM;
        if (!parse_layers(a.layers, only)) {
            free(only);
            return cli_usage_error("skill add", "--layers '%s': want e.g. 3,4,5 or 3-5", a.layers);
        }
    }
    cmf_err err;
    cmf_file *f = NULL, *donor = NULL;
    char *tmp = NULL;
    diff *d = NULL;
    size_t nd = 0, compared = 0;
    unsigned char touched[LAYER_SET] = {0};
    cmf_skill_selection sel = {0};
    bool have_sel = false;
    cmf_status st = cmf_open(a.path, 0, &f, &err);
    const cmf_header *h = st ? NULL : cmf_file_header(f);
    if (!st && (cmf_file_envelope(f)->required_features & CMF_FEAT_SKILL_FILE))
        st = cmf_err_set(&err, CMF_E_UNSUPPORTED, a.path,
                         "a standalone skill file holds no backbone: add skills to a model");
    if (!st && skill_record(f, a.id))
        st = cmf_err_set(&err, CMF_E_INVALID_ARG, a.path,
                         "skill '%s' is already registered (`cortiq skill rm %s %s` first)", a.id,
                         a.path, a.id);
    const cmf_masks *ms = st ? NULL : cmf_file_masks(f);
    if (!st && a.task && !(ms && cmf_masks_find(ms, a.task)))
        st = cmf_err_set(&err, CMF_E_NOT_FOUND, a.path,
                         "--task '%s': the file has no such task mask (`cortiq masks %s`)", a.task,
                         a.path);
    if (!st) st = open_donor(&a, f, &donor, &tmp, &err);
    size_t n = st ? 0 : cmf_file_tensor_count(f);
    if (!st && !(d = calloc(n ? n : 1, sizeof *d)))
        st = cmf_err_set(&err, CMF_E_NOMEM, a.path, "directory");
    for (size_t i = 0; !st && i < n; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (!strncmp(t->name, "skill.", 6)) continue;
        long l = layer_of(t->name);
        if (only && (l < 0 || l >= LAYER_SET || !only[l])) continue;
        const cmf_tensor *dt = cmf_file_find(donor, t->name);
        if (!dt) continue;
        compared++;
        if (dt->ndim != t->ndim || memcmp(dt->shape, t->shape, t->ndim * sizeof *t->shape))
            st = cmf_err_set(&err, CMF_E_INVALID_ARG, a.from,
                             "tensor '%s' has another shape than the backbone's: a skill replaces "
                             "tensors at full shape (spec 9)",
                             t->name);
        else if (dt->dtype != t->dtype || dt->nbytes != t->nbytes ||
                 memcmp(dt->data, t->data, t->nbytes)) {
            d[nd++].t = dt;
            if (l >= 0 && l < LAYER_SET) touched[l] = 1;
        }
    }
    if (!st && !nd)
        st = cmf_err_set(&err, CMF_E_INVALID_ARG, a.from,
                         "%zu tensor(s) compared, all byte-identical to the backbone: nothing to "
                         "add",
                         compared);
    if (!st && a.calib) {
        size_t np = 0;
        st = fit_selection(&a, (uint32_t)h->arch.num_layers, &sel, &np, &err);
        if (!st)
            printf("selection: phi_layer %u, rank %u from %zu calibration prompt(s)\n",
                   sel.phi_layer, sel.rank, np);
        have_sel = !st;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < nd; i++)
        bytes += d[i].t->nbytes;
    if (!st) st = append_skill(&a, h, d, nd, touched, have_sel ? &sel : NULL, &err);
    cmf_close(f);
    cmf_close(donor);
    if (tmp) unlink(tmp);
    free(tmp);
    free(d);
    free(only);
    cmf_skill_selection_free(&sel);
    if (!st)
        printf("skill '%s': %zu tensor(s) of %zu compared differ, appended (%s)\n", a.id, nd,
               compared, cli_bytes(bytes));
    if (!st && !a.calib)
        printf("selection: none (no --calib): --skill auto will not route to it\n");
    if (!st && a.heldout) st = measure_quality(&a, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}
