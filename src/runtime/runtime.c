/* runtime.c - model + tokenizer + chat template + sampler behind one handle: render a
 * conversation, reuse the KV cache for the common prefix, generate and stream text. */
#include "cortiq/runtime.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "cortiq/chat_template.h"
#include "runtime/text_load.h"

struct cortiq_runtime {
    cortiq_model *model;
    cortiq_session *session;
    cmf_tokenizer *tok;
    cmf_chat_template *tpl;
    bool has_template;
    char *special_json; /* {"bos_token": ..., "eos_token": ...} for the template */
    int32_t *eos;
    size_t n_eos;
    int32_t *hist; /* tokens evaluated in the session, in order */
    size_t n_hist;
    cortiq_mtp *mtp; /* speculative decoding with the MTP head; NULL = off */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *cortiq_finish_name(cortiq_finish f) {
    static const char *n[] = {"eos", "length", "context", "stopped"};
    return (unsigned)f < 4 ? n[f] : "?";
}

void cortiq_generate_defaults(cortiq_generate_params *p) {
    cortiq_sampler_defaults(&p->sampler);
    p->max_tokens = 512;
}

/* A special token's text: the header's own string if present, else the tokenizer's token for id. */
static void put_token(json_t *o, const char *key, const char *header_json, const cmf_tokenizer *tok,
                      int64_t id) {
    json_t *h = json_loads(header_json, 0, NULL);
    json_t *v = json_object_get(json_object_get(h, "tokenizer_config"), key);
    if (v && json_is_string(v))
        json_object_set(o, key, v);
    else if (id >= 0) {
        size_t len;
        const char *s = cmf_tokenizer_id_to_token(tok, (int32_t)id, &len);
        if (s) json_object_set_new(o, key, json_stringn(s, len));
    }
    json_decref(h);
}

cmf_status cortiq_runtime_open(const char *path, const cortiq_runtime_opts *opts,
                               cortiq_runtime **out, cmf_err *err) {
    *out = NULL;
    cortiq_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return cmf_err_set(err, CMF_E_NOMEM, path, "runtime");
    cortiq_load_opts lo = {.threads = opts ? opts->threads : 0,
                           .kv = opts ? opts->kv : CORTIQ_KV_F16,
                           .act = opts ? opts->act : CORTIQ_ACT_DEFAULT,
                           .no_huge_pages = opts ? opts->no_huge_pages : 0,
                           .verify_tensors = opts ? opts->verify_tensors : 0,
                           .skill = opts ? opts->skill : NULL,
                           .blend = opts ? opts->blend : NULL,
                           .n_blend = opts ? opts->n_blend : 0,
                           .batch_lanes = opts ? opts->batch_lanes : 0};
    cmf_status st = cortiq_model_load(path, &lo, &rt->model, err);
    if (st) {
        cortiq_runtime_free(rt);
        return st;
    }
    /* the tokenizer builds on a worker while this thread reads the weights in and allocates
     * the session (text_load.h) */
    cq_text_load text;
    cq_text_load_start(&text, rt->model, path);
    cortiq_model_page_in(rt->model); /* the move onto 2 MiB pages waits for cortiq_runtime_idle */
    uint32_t ctx = opts && opts->ctx ? opts->ctx : 4096;
    uint32_t maxc = cortiq_model_max_context(rt->model);
    if (maxc && ctx > maxc) ctx = maxc;
    st = cortiq_session_create(rt->model, ctx, &rt->session, err);
    cmf_err text_err;
    cmf_status text_st = cq_text_load_finish(&text, &text_err);
    if (!st && text_st) {
        st = text_st;
        if (err) *err = text_err;
    }
    rt->tok = text.tok;
    rt->tpl = text.tpl;
    if (!st) {
        const cmf_header *h = cmf_file_header(cortiq_model_file(rt->model));
        const cmf_tokenizer_config *tc = &h->tokenizer_config;
        rt->has_template = text.has_template;
        rt->eos = calloc(tc->n_eos + 1, sizeof *rt->eos);
        if (!rt->eos) st = cmf_err_set(err, CMF_E_NOMEM, path, "runtime");
        for (size_t i = 0; !st && i < tc->n_eos; i++)
            rt->eos[rt->n_eos++] = (int32_t)tc->eos_token_ids[i];
        json_t *sp = json_object();
        put_token(sp, "bos_token", h->json, rt->tok, tc->bos_token_id);
        put_token(sp, "eos_token", h->json, rt->tok, tc->n_eos ? tc->eos_token_ids[0] : -1);
        rt->special_json = json_dumps(sp, JSON_COMPACT);
        json_decref(sp);
    }
    if (!st && !(rt->hist = malloc((size_t)cortiq_session_ctx(rt->session) * sizeof *rt->hist)))
        st = cmf_err_set(err, CMF_E_NOMEM, path, "runtime");
    if (!st) st = cortiq_runtime_set_mtp(rt, true, err);
    if (st) {
        cortiq_runtime_free(rt);
        return st;
    }
    *out = rt;
    return CMF_OK;
}

void cortiq_runtime_free(cortiq_runtime *rt) {
    if (!rt) return;
    cortiq_mtp_free(rt->mtp);
    cortiq_session_free(rt->session);
    cortiq_model_free(rt->model);
    cmf_tokenizer_free(rt->tok);
    cmf_chat_template_free(rt->tpl);
    free(rt->special_json);
    free(rt->eos);
    free(rt->hist);
    free(rt);
}

cortiq_model *cortiq_runtime_model(cortiq_runtime *rt) {
    return rt->model;
}
cmf_status cortiq_runtime_set_mtp(cortiq_runtime *rt, bool on, cmf_err *err) {
    if (!on || !cortiq_model_has_mtp(rt->model)) {
        cortiq_mtp_free(rt->mtp);
        rt->mtp = NULL;
        return CMF_OK;
    }
    if (rt->mtp) return CMF_OK;
    rt->n_hist = 0; /* the head has seen none of the session: the next prompt runs in full */
    return cortiq_mtp_create(rt->session, &rt->mtp, err);
}

bool cortiq_runtime_mtp_counts(const cortiq_runtime *rt, uint64_t *drafts, uint64_t *accepted) {
    *drafts = *accepted = 0;
    if (rt->mtp) cortiq_mtp_counts(rt->mtp, drafts, accepted);
    return rt->mtp != NULL;
}

cortiq_session *cortiq_runtime_session(cortiq_runtime *rt) {
    return rt->session;
}
const cmf_tokenizer *cortiq_runtime_tokenizer(const cortiq_runtime *rt) {
    return rt->tok;
}
bool cortiq_runtime_has_template(const cortiq_runtime *rt) {
    return rt->has_template;
}

cmf_status cortiq_render_chat(cortiq_runtime *rt, const char *messages_json,
                              bool add_generation_prompt, char **out, cmf_err *err) {
    size_t len;
    return cmf_chat_template_render(rt->tpl, messages_json, NULL, NULL, add_generation_prompt,
                                    rt->special_json, out, &len, err);
}

cmf_status cortiq_render_chat_ex(cortiq_runtime *rt, const char *messages_json,
                                 const char *tools_json, const char *kwargs_json,
                                 bool add_generation_prompt, char **out, cmf_err *err) {
    if (!kwargs_json)
        return cmf_chat_template_render(rt->tpl, messages_json, tools_json, NULL,
                                        add_generation_prompt, rt->special_json, out, &(size_t){0},
                                        err);
    json_error_t je;
    json_t *kw = json_loads(kwargs_json, 0, &je);
    if (!json_is_object(kw)) {
        json_decref(kw);
        return cmf_err_set(err, CMF_E_PARSE, "chat_template_kwargs", "want a JSON object (%s)",
                           je.text);
    }
    json_t *sp = json_loads(rt->special_json, 0, NULL);
    if (!sp || json_object_update(sp, kw)) {
        json_decref(sp);
        json_decref(kw);
        return cmf_err_set(err, CMF_E_NOMEM, "chat_template_kwargs", "merge");
    }
    json_decref(kw);
    char *merged = json_dumps(sp, JSON_COMPACT);
    json_decref(sp);
    if (!merged) return cmf_err_set(err, CMF_E_NOMEM, "chat_template_kwargs", "merge");
    size_t len;
    cmf_status st = cmf_chat_template_render(rt->tpl, messages_json, tools_json, NULL,
                                             add_generation_prompt, merged, out, &len, err);
    free(merged);
    return st;
}

/* cortiq_generate never moves weights onto 2 MiB pages: a move during an answer cost more
 * than it gained on every answer measured (docs/KERNELS.md, "The move waits for the user");
 * cortiq_runtime_idle does it between turns. */

static bool is_eos(const cortiq_runtime *rt, int32_t t) {
    for (size_t i = 0; i < rt->n_eos; i++)
        if (rt->eos[i] == t) return true;
    return false;
}

cmf_status cortiq_generate(cortiq_runtime *rt, const int32_t *prompt, size_t n_prompt,
                           const cortiq_generate_params *p, cortiq_text_fn on_text, void *user,
                           char **reply, cortiq_generate_stats *stats, cmf_err *err) {
    cortiq_generate_stats s;
    memset(&s, 0, sizeof s);
    uint32_t ctx = cortiq_session_ctx(rt->session), vocab = cortiq_model_vocab(rt->model);
    if (n_prompt == 0) return cmf_err_set(err, CMF_E_INVALID_ARG, "generate", "empty prompt");
    if (n_prompt >= ctx)
        return cmf_err_set(err, CMF_E_LIMIT, "generate",
                           "prompt of %zu tokens does not fit the context of %u", n_prompt, ctx);
    /* reuse the cached prefix; always re-evaluate at least the last prompt token for its logits */
    size_t k = 0;
    while (k < rt->n_hist && k < n_prompt && rt->hist[k] == prompt[k])
        k++;
    if (k == n_prompt) k--;
    cortiq_session_truncate(rt->session, (uint32_t)k);
    k = cortiq_session_pos(rt->session); /* a recurrent state may return earlier */
    rt->n_hist = k;
    s.prompt_tokens = n_prompt;
    s.cached_tokens = k;
    /* greedy generation drafts with the MTP head (spec §2.1); the head sees every evaluation */
    bool greedy = p->sampler.temperature <= 0;
    double t0 = now_s();
    cmf_status st = rt->mtp ? cortiq_mtp_eval(rt->mtp, prompt + k, n_prompt - k, err)
                            : cortiq_session_eval(rt->session, prompt + k, n_prompt - k, NULL, err);
    if (st) return st;
    memcpy(rt->hist + k, prompt + k, (n_prompt - k) * sizeof *prompt);
    rt->n_hist = n_prompt;
    s.prefill_seconds = now_s() - t0;
    cortiq_sampler *smp = NULL;
    cmf_detok_stream *ds = NULL;
    char *text = NULL;
    size_t text_len = 0, text_cap = 0;
    if ((st = cortiq_sampler_create(&p->sampler, vocab, &smp, err))) return st;
    if ((st = cmf_detok_stream_create(rt->tok, true, &ds, err))) goto out;
    t0 = now_s();
    int32_t ready = -1; /* an accepted draft: evaluated (last of hist), not yet emitted */
    for (;;) {
        if (p->max_tokens && s.generated_tokens >= p->max_tokens) {
            s.finish = CORTIQ_FINISH_LENGTH;
            break;
        }
        int32_t t = ready >= 0 ? ready
                               : cortiq_sampler_sample(smp, cortiq_session_logits(rt->session),
                                                       rt->hist, rt->n_hist);
        bool evaluated = ready >= 0;
        if (is_eos(rt, t)) {
            s.finish = CORTIQ_FINISH_EOS;
            break;
        }
        s.generated_tokens++;
        const char *piece;
        size_t plen;
        if ((st = cmf_detok_stream_push(ds, t, &piece, &plen, err))) break;
        if (plen && reply) {
            if (text_len + plen + 1 > text_cap) {
                text_cap = (text_len + plen + 1) * 2;
                char *nt = realloc(text, text_cap);
                if (!nt) {
                    st = cmf_err_set(err, CMF_E_NOMEM, "generate", "reply text");
                    break;
                }
                text = nt;
            }
            memcpy(text + text_len, piece, plen);
            text_len += plen;
            text[text_len] = '\0';
        }
        if (plen && on_text && on_text(user, piece, plen)) {
            s.finish = CORTIQ_FINISH_STOPPED;
            break;
        }
        if (evaluated) {
            ready = -1;
            continue;
        }
        if (rt->n_hist + 1 >= ctx) {
            s.finish = CORTIQ_FINISH_CONTEXT;
            break;
        }
        if (rt->mtp) {
            /* draft only while a second token may still follow this one */
            bool more = greedy && (!p->max_tokens || s.generated_tokens < p->max_tokens) &&
                        rt->n_hist + 2 < ctx;
            rt->hist[rt->n_hist] = t;
            if ((st = cortiq_mtp_decode(rt->mtp, rt->hist, rt->n_hist + 1, smp, more, &ready, err)))
                break;
            rt->n_hist++;
            if (ready >= 0) rt->hist[rt->n_hist++] = ready;
            continue;
        }
        if ((st = cortiq_session_eval(rt->session, &t, 1, NULL, err))) break;
        rt->hist[rt->n_hist++] = t;
    }
    if (ready >= 0) { /* an accepted draft not emitted (stop, eos, length): drop it, as
                       * one-token decode never evaluates such a token */
        cortiq_session_truncate(rt->session, (uint32_t)(rt->n_hist - 1));
        rt->n_hist = cortiq_session_pos(rt->session);
    }
    s.decode_seconds = now_s() - t0;
out:
    cmf_detok_stream_free(ds);
    cortiq_sampler_free(smp);
    if (stats) *stats = s;
    if (reply && !st) {
        *reply = text ? text : calloc(1, 1);
        text = NULL;
    }
    free(text);
    return st;
}

cmf_status cortiq_chat_once(cortiq_runtime *rt, const char *system, const char *user_text,
                            const cortiq_generate_params *p, cortiq_text_fn on_text, void *user,
                            char **reply, cortiq_generate_stats *stats, cmf_err *err) {
    json_t *msgs = json_array();
    if (system)
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system));
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", user_text));
    char *mj = json_dumps(msgs, JSON_COMPACT);
    json_decref(msgs);
    if (!mj) return cmf_err_set(err, CMF_E_NOMEM, "chat", "messages");
    char *prompt = NULL;
    cmf_status st = cortiq_render_chat(rt, mj, true, &prompt, err);
    free(mj);
    if (st) return st;
    int32_t *ids = NULL;
    size_t n = 0;
    /* the template already wrote BOS and other special tokens: encode without adding more
     * (what transformers' apply_chat_template(tokenize=True) does) */
    st = cmf_tokenizer_encode(rt->tok, prompt, strlen(prompt), false, &ids, &n, err);
    free(prompt);
    if (!st) st = cortiq_generate(rt, ids, n, p, on_text, user, reply, stats, err);
    free(ids);
    return st;
}

uint64_t cortiq_runtime_idle(cortiq_runtime *rt) {
    return rt ? cortiq_model_move_step(rt->model, UINT64_MAX) : 0;
}
