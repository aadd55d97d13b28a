/* request.c - OpenAI request bodies (chat, completions, embeddings) into srv_request, every
 * honoured field range-checked; errors name the parameter and the rule. */
#include "server/request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/engine.h"

void srv_error_set(srv_error *e, int http, const char *param, const char *fmt, ...) {
    e->http = http;
    e->type = http == 401   ? "authentication_error"
              : http == 404 ? "not_found_error"
              : http == 429 ? "rate_limit_error"
              : http >= 500 ? "server_error"
                            : "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

void srv_request_free(srv_request *r) {
    if (!r) return;
    free(r->model);
    free(r->messages_json);
    free(r->tools_json);
    free(r->kwargs_json);
    free(r->prompt);
    for (size_t i = 0; i < r->n_inputs; i++)
        free(r->inputs[i]);
    free(r->inputs);
    for (size_t i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    jg_free(r->grammar);
    free(r->task);
    free(r->skill);
    free(r->bias_ids);
    free(r->bias_vals);
    memset(r, 0, sizeof *r);
}

/* A JSON parse error: NaN and Infinity are not JSON, so a client that sends them fails here;
 * the key before the error position names the parameter. */
static void parse_error(const char *body, size_t len, const json_error_t *je, srv_error *e) {
    size_t pos = (size_t)je->position < len ? (size_t)je->position : len;
    /* the last "key": before the error */
    char key[64] = "";
    size_t q = pos < len ? pos : len; /* indexes, never a pointer before body */
    while (q > 0 && body[q - 1] != ':')
        q--;
    if (q > 0) {
        size_t end = q - 1; /* the ':' */
        while (end > 0 && strchr(" \t\r\n", body[end - 1]))
            end--;
        if (end > 0 && body[end - 1] == '"') {
            size_t start = end - 1; /* the closing quote */
            while (start > 0 && body[start - 1] != '"')
                start--;
            if (start > 0) {
                size_t kl = end - 1 - start;
                if (kl >= sizeof key) kl = sizeof key - 1;
                memcpy(key, body + start, kl);
                key[kl] = '\0';
            }
        }
    }
    bool nonfinite = false; /* "NaN" or "Infinity" within 16 bytes of the error */
    size_t from = pos > 16 ? pos - 16 : 0, to = pos + 16 < len ? pos + 16 : len;
    for (size_t i = from; i < to; i++)
        if ((to - i >= 3 && !memcmp(body + i, "NaN", 3)) ||
            (to - i >= 8 && !memcmp(body + i, "Infinity", 8)))
            nonfinite = true;
    if (nonfinite && key[0])
        srv_error_set(e, 400, key, "%s: not a finite number (NaN and Infinity are not JSON)", key);
    else
        srv_error_set(e, 400, key, "the body is not valid JSON: %s at line %d column %d", je->text,
                      je->line, je->column);
}

/* A number field in [lo, hi]; absent leaves *out. */
static bool get_num(json_t *o, const char *key, double lo, double hi, float *out, srv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) {
        srv_error_set(e, 400, key, "%s: want a number", key);
        return false;
    }
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) {
        srv_error_set(e, 400, key, "%s %g is outside [%g, %g]", key, d, lo, hi);
        return false;
    }
    *out = (float)d;
    return true;
}

/* An integer field in [lo, hi]; absent leaves *out and *has. */
static bool get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *has,
                    srv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    double d = json_is_real(v) ? json_real_value(v) : 0;
    if (json_is_real(v) && d == floor(d) && fabs(d) < 9e15) v = NULL; /* 16.0 counts as 16 */
    if (v && !json_is_integer(v)) {
        srv_error_set(e, 400, key, "%s: want an integer", key);
        return false;
    }
    int64_t x = v ? json_integer_value(v) : (int64_t)d;
    if (x < lo || x > hi) {
        srv_error_set(e, 400, key, "%s %lld is outside [%lld, %lld]", key, (long long)x,
                      (long long)lo, (long long)hi);
        return false;
    }
    *out = x;
    if (has) *has = true;
    return true;
}

static bool get_bool(json_t *o, const char *key, bool *out, srv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) {
        srv_error_set(e, 400, key, "%s: want true or false", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* A message's content: a string, null, or an array of parts whose text parts are joined. */
static bool flatten_content(json_t *msg, size_t idx, srv_error *e) {
    json_t *c = json_object_get(msg, "content");
    if (!c || json_is_string(c) || json_is_null(c)) return true;
    if (!json_is_array(c)) {
        srv_error_set(e, 400, "messages",
                      "messages[%zu].content: want a string or an array of parts", idx);
        return false;
    }
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "text");
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!json_is_string(t) || (type && strcmp(type, "text"))) {
            srv_error_set(e, 400, "messages",
                          "messages[%zu].content[%zu]: only text parts are supported", idx, i);
            return false;
        }
        total += json_string_length(t);
    }
    char *s = malloc(total + 1), *w = s;
    if (!s) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "text");
        memcpy(w, json_string_value(t), json_string_length(t));
        w += json_string_length(t);
    }
    json_object_set_new(msg, "content", json_stringn(s, total));
    free(s);
    return true;
}

/* Assistant tool calls carry their arguments as a JSON string; templates read them as an
 * object (what transformers' examples pass), so a string that parses is replaced. */
static void parse_tool_arguments(json_t *msg) {
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, call) {
        json_t *fn = json_object_get(call, "function");
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_string(args)) continue;
        json_t *obj = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
        if (json_is_object(obj))
            json_object_set_new(fn, "arguments", obj);
        else
            json_decref(obj);
    }
}

static bool parse_messages(json_t *root, srv_request *r, srv_error *e) {
    json_t *msgs = json_object_get(root, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        srv_error_set(e, 400, "messages", "messages: want a non-empty array of messages");
        return false;
    }
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m) || !json_is_string(json_object_get(m, "role"))) {
            srv_error_set(e, 400, "messages", "messages[%zu]: want an object with a string role",
                          i);
            return false;
        }
        if (!flatten_content(m, i, e)) return false;
        parse_tool_arguments(m);
    }
    r->messages_json = json_dumps(msgs, JSON_COMPACT);
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) {
            srv_error_set(e, 400, "tools", "tools: want an array");
            return false;
        }
        const char *choice = json_string_value(json_object_get(root, "tool_choice"));
        if (json_array_size(tools) && !(choice && !strcmp(choice, "none"))) {
            r->tools_json = json_dumps(tools, JSON_COMPACT);
            r->has_tools = true;
        }
    }
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) {
            srv_error_set(e, 400, "chat_template_kwargs", "chat_template_kwargs: want an object");
            return false;
        }
        r->kwargs_json = json_dumps(kw, JSON_COMPACT);
    }
    if (!r->messages_json) {
        srv_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    return true;
}

/* A string, or an array of exactly one string (what clients send for one prompt). */
static bool parse_prompt(json_t *root, srv_request *r, srv_error *e) {
    json_t *p = json_object_get(root, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (!json_is_string(p)) {
        srv_error_set(e, 400, "prompt", "prompt: want a string (or an array of one string)");
        return false;
    }
    r->prompt = strndup(json_string_value(p), json_string_length(p));
    return r->prompt != NULL;
}

static bool parse_inputs(json_t *root, srv_request *r, srv_error *e) {
    json_t *in = json_object_get(root, "input");
    size_t n = json_is_string(in) ? 1 : json_is_array(in) ? json_array_size(in) : 0;
    if (!n || n > SRV_MAX_INPUTS) {
        srv_error_set(e, 400, "input", "input: want a string or an array of 1 to %d strings",
                      SRV_MAX_INPUTS);
        return false;
    }
    if (!(r->inputs = calloc(n, sizeof *r->inputs))) return false;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(in) ? in : json_array_get(in, i);
        if (!json_is_string(s) || json_string_length(s) == 0) {
            srv_error_set(e, 400, "input", "input[%zu]: want a non-empty string", i);
            return false;
        }
        r->inputs[r->n_inputs++] = strndup(json_string_value(s), json_string_length(s));
    }
    return true;
}

static bool parse_stop(json_t *root, srv_request *r, srv_error *e) {
    json_t *s = json_object_get(root, "stop");
    if (!s || json_is_null(s)) return true;
    size_t n = json_is_string(s) ? 1 : json_is_array(s) ? json_array_size(s) : 0;
    if ((!json_is_string(s) && !json_is_array(s)) || n > SRV_MAX_STOP) {
        srv_error_set(e, 400, "stop", "stop: want a string or an array of at most %d strings",
                      SRV_MAX_STOP);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_string(s) ? s : json_array_get(s, i);
        if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 256) {
            srv_error_set(e, 400, "stop", "stop[%zu]: want a string of 1 to 256 bytes", i);
            return false;
        }
        r->stop[r->n_stop++] = strndup(json_string_value(x), json_string_length(x));
    }
    return true;
}

static bool parse_bias(json_t *root, srv_request *r, srv_error *e) {
    json_t *b = json_object_get(root, "logit_bias");
    if (!b || json_is_null(b)) return true;
    if (!json_is_object(b) || json_object_size(b) > SRV_MAX_BIAS) {
        srv_error_set(e, 400, "logit_bias", "logit_bias: want an object of at most %d entries",
                      SRV_MAX_BIAS);
        return false;
    }
    size_t n = json_object_size(b);
    r->bias_ids = calloc(n + 1, sizeof *r->bias_ids);
    r->bias_vals = calloc(n + 1, sizeof *r->bias_vals);
    if (!r->bias_ids || !r->bias_vals) return false;
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || id < 0 || id > INT32_MAX) {
            srv_error_set(e, 400, "logit_bias", "logit_bias: key '%.64s' is not a token id", key);
            return false;
        }
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        if (!isfinite(d) || d < -100 || d > 100) {
            srv_error_set(e, 400, "logit_bias", "logit_bias[%lld]: want a number in [-100, 100]",
                          id);
            return false;
        }
        r->bias_ids[r->n_bias] = id;
        r->bias_vals[r->n_bias++] = (float)d;
    }
    return true;
}

static bool parse_sampling(json_t *root, srv_request *r, srv_error *e) {
    cortiq_sampler_params d;
    cortiq_sampler_defaults(&d);
    r->temperature = d.temperature;
    r->top_k = d.top_k;
    r->top_p = d.top_p;
    r->min_p = d.min_p;
    r->repetition_penalty = d.repeat_penalty;
    r->seed = d.seed;
    r->n = 1;
    int64_t x;
    bool has = false;
    if (!get_num(root, "temperature", 0, 2, &r->temperature, e) ||
        !get_num(root, "top_p", 0, 1, &r->top_p, e) ||
        !get_num(root, "min_p", 0, 1, &r->min_p, e) ||
        !get_num(root, "presence_penalty", -2, 2, &r->presence_penalty, e) ||
        !get_num(root, "frequency_penalty", -2, 2, &r->frequency_penalty, e) ||
        !get_num(root, "repetition_penalty", 0.01, 10, &r->repetition_penalty, e))
        return false;
    if (json_is_number(json_object_get(root, "top_p")) && r->top_p <= 0) {
        srv_error_set(e, 400, "top_p", "top_p 0 is outside (0, 1]");
        return false;
    }
    x = r->top_k;
    if (!get_int(root, "top_k", 0, 1 << 20, &x, NULL, e)) return false;
    r->top_k = (int)x;
    /* any integer seeds (negative ones are taken modulo 2^64) */
    if (!get_int(root, "seed", INT64_MIN, INT64_MAX, &x, &r->has_seed, e)) return false;
    if (r->has_seed) r->seed = (uint64_t)x;
    x = 0;
    if (!get_int(root, "max_tokens", 1, 1 << 24, &x, &has, e)) return false;
    if (!get_int(root, "max_completion_tokens", 1, 1 << 24, &x, &has, e)) return false;
    r->has_max_tokens = has;
    r->max_tokens = (uint32_t)x;
    x = 1;
    if (!get_int(root, "n", 1, SRV_MAX_N, &x, NULL, e)) return false;
    r->n = (uint32_t)x;
    if (!get_bool(root, "stream", &r->stream, e)) return false;
    json_t *so = json_object_get(root, "stream_options");
    if (json_is_object(so) && !get_bool(so, "include_usage", &r->include_usage, e)) return false;
    /* chat: logprobs is a boolean with top_logprobs beside it; completions: logprobs is the
     * number of alternatives */
    json_t *lp = json_object_get(root, "logprobs");
    if (r->kind == SRV_CHAT) {
        if (!get_bool(root, "logprobs", &r->logprobs, e)) return false;
        x = 0;
        if (!get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &x, NULL, e)) return false;
        r->top_logprobs = (uint32_t)x;
    } else if (lp && !json_is_null(lp)) {
        x = 0;
        if (!get_int(root, "logprobs", 0, 5, &x, NULL, e)) return false;
        r->logprobs = true;
        r->top_logprobs = (uint32_t)x;
    }
    return parse_stop(root, r, e) && parse_bias(root, r, e);
}

/* response_format: "text" (nothing), "json_object" (any object) or "json_schema" (the schema
 * compiled; keywords outside the subset refused, named). */
static bool parse_response_format(json_t *root, srv_request *r, srv_error *e) {
    json_t *rf = json_object_get(root, "response_format");
    if (!rf || json_is_null(rf)) return true;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type) {
        srv_error_set(e, 400, "response_format", "response_format: want an object with a type");
        return false;
    }
    if (!strcmp(type, "text")) return true;
    if (!strcmp(type, "json_object")) {
        r->grammar = jg_any_object();
        return r->grammar != NULL;
    }
    if (strcmp(type, "json_schema")) {
        srv_error_set(e, 400, "response_format",
                      "response_format type '%.64s' is not text, json_object or json_schema", type);
        return false;
    }
    json_t *js = json_object_get(rf, "json_schema");
    json_t *schema = json_object_get(js, "schema");
    if (!json_is_object(js) || !schema) {
        srv_error_set(e, 400, "response_format",
                      "response_format json_schema: want {\"json_schema\": {\"schema\": ...}}");
        return false;
    }
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) return false;
    char why[400];
    r->grammar = jg_compile_schema(text, strlen(text), why, sizeof why);
    free(text);
    if (!r->grammar) {
        srv_error_set(e, 400, "response_format", "response_format json_schema: %s", why);
        return false;
    }
    return true;
}

bool srv_request_parse(srv_kind kind, const char *body, size_t len, srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->kind = kind;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        parse_error(body, len, &je, e);
        return false;
    }
    bool ok = json_is_object(root);
    if (!ok) srv_error_set(e, 400, NULL, "the body must be a JSON object");
    json_t *model = json_object_get(root, "model");
    if (ok && model && !json_is_null(model)) {
        if (!json_is_string(model)) {
            srv_error_set(e, 400, "model", "model: want a string");
            ok = false;
        } else
            r->model = strdup(json_string_value(model));
    }
    json_t *task =
        json_object_get(root, "task"); /* CMF extension: checked against the file later */
    if (ok && task && !json_is_null(task)) {
        if (!json_is_string(task) || !json_string_length(task)) {
            srv_error_set(e, 400, "task", "task: want a task mask's name or \"none\"");
            ok = false;
        } else if (!(r->task = strdup(json_string_value(task))))
            ok = false;
    }
    json_t *skill = json_object_get(root, "skill"); /* CMF extension: checked like task */
    if (ok && skill && !json_is_null(skill)) {
        if (!json_is_string(skill) || !json_string_length(skill)) {
            srv_error_set(e, 400, "skill",
                          "skill: want a skill id of the file, \"auto\" or \"none\"");
            ok = false;
        } else if (!(r->skill = strdup(json_string_value(skill))))
            ok = false;
    }
    if (ok) {
        if (kind == SRV_CHAT)
            ok = parse_messages(root, r, e) && parse_sampling(root, r, e) &&
                 parse_response_format(root, r, e);
        else if (kind == SRV_COMPLETION)
            ok = parse_prompt(root, r, e) && parse_sampling(root, r, e) &&
                 parse_response_format(root, r, e);
        else
            ok = parse_inputs(root, r, e);
    }
    if (!ok && !e->http) srv_error_set(e, 500, NULL, "out of memory");
    json_decref(root);
    if (!ok) srv_request_free(r);
    return ok;
}
