"""The C declarations this package calls, and where libcortiq is loaded from.

Only the public API of include/cortiq/*.h is declared here (cffi ABI mode: no compiler at install
or import time). The struct layouts below mirror those headers; tests/python/test_layout.py
compiles the headers and fails when a field moves, so a header change cannot go unnoticed.
Enums are declared as the 4-byte integers the C compilers give them.
"""
from __future__ import annotations

import os
from pathlib import Path

import cffi

CDEF = r"""
typedef int cmf_status;
typedef int cmf_dtype;
typedef int cortiq_kv_type;
typedef int cortiq_act_mode;
typedef int cortiq_finish;

typedef struct cmf_err { cmf_status code; char msg[512]; } cmf_err;
const char *cmf_status_name(cmf_status s);

const char *cmf_dtype_name(unsigned id);
bool cmf_dtype_from_name(const char *name, cmf_dtype *out);

/* format.h */
typedef struct cmf_tensor {
    const char *name;
    uint32_t name_len;
    uint8_t dtype;
    uint8_t ndim;
    uint64_t shape[6];
    uint64_t off;
    uint64_t nbytes;
    uint64_t hash;
    uint32_t shard;
    const uint8_t *data;
} cmf_tensor;

/* The leading fields of cmf_header (the rest is read from the JSON text itself). */
typedef struct cmf_header_head {
    const char *json;
    size_t json_len;
} cmf_header_head;

typedef struct cmf_mask {
    uint32_t task_id;
    const char *name;
    const char *description;
    double sparsity;
    bool has_sparsity;
    const char *quality_json;
    const char *parent;
    const char *priority;
    bool has_hot_pack;
    uint64_t blob_off, blob_len;
    bool has_expert_fields;
    const uint8_t *ffn;
    const uint8_t *heads;
    const uint8_t *gates;
    const uint8_t *experts;
} cmf_mask;

typedef struct cmf_masks {
    const char *default_task;
    uint32_t n_layers, intermediate, n_heads, n_experts;
    uint32_t ffn_bytes, head_bytes, gates_bytes, expert_bytes;
    size_t n_masks;
    cmf_mask *masks;
} cmf_masks;

typedef struct cmf_file cmf_file;
cmf_status cmf_open(const char *path, unsigned flags, cmf_file **out, cmf_err *err);
cmf_status cmf_open_model(const char *path, unsigned flags, cmf_file **out, cmf_err *err);
void cmf_close(cmf_file *f);
const char *cmf_file_path(const cmf_file *f);
const void *cmf_file_header(const cmf_file *f);
size_t cmf_file_tensor_count(const cmf_file *f);
const cmf_tensor *cmf_file_tensor_at(const cmf_file *f, size_t i);
const cmf_tensor *cmf_file_find(const cmf_file *f, const char *name);
const cmf_masks *cmf_file_masks(const cmf_file *f);
const uint8_t *cmf_file_vocab(const cmf_file *f, size_t *len);
size_t cmf_file_shard_count(const cmf_file *f);
const char *cmf_file_shard_path(const cmf_file *f, size_t shard);

typedef void (*cmf_problem_fn)(void *user, const char *shard_path, cmf_status code,
                               const char *msg);
typedef struct cmf_verify_stats {
    uint64_t tensors_checked, tensors_bad;
    uint64_t bytes_hashed;
    uint64_t problems;
    double seconds;
} cmf_verify_stats;
cmf_status cmf_verify(const cmf_file *f, unsigned threads, cmf_problem_fn on_problem, void *user,
                      cmf_verify_stats *stats);

/* quant.h */
typedef struct cmf_quant_opts {
    double vbit_mean_bits;
    const float *row_weights;
    double outlier_frac;
} cmf_quant_opts;
void cmf_quant_opts_default(cmf_quant_opts *o);
cmf_status cmf_quant_encode(cmf_dtype dt, unsigned ndim, const uint64_t *shape, const float *src,
                            const cmf_quant_opts *opts, uint8_t **out, size_t *out_len,
                            cmf_err *err);
cmf_status cmf_quant_dequant(cmf_dtype dt, unsigned ndim, const uint64_t *shape,
                             const uint8_t *data, uint64_t nbytes, float *out, cmf_err *err);
cmf_dtype cmf_quant_policy_dtype(cmf_dtype wanted, unsigned ndim, const uint64_t *shape);

/* writer.h */
typedef struct cmf_writer cmf_writer;
typedef struct cmf_writer_opts {
    uint64_t shard_max_bytes;
    void (*progress)(void *user, size_t done, size_t total, uint64_t bytes_written);
    void *progress_user;
} cmf_writer_opts;
cmf_status cmf_writer_create(const char *path, const cmf_writer_opts *opts, cmf_writer **out,
                             cmf_err *err);
cmf_status cmf_writer_set_header(cmf_writer *w, const char *json, size_t len, cmf_err *err);
cmf_status cmf_writer_add_tensor_ref(cmf_writer *w, const char *name, cmf_dtype dtype,
                                     unsigned ndim, const uint64_t *shape, const void *data,
                                     size_t nbytes, cmf_err *err);
cmf_status cmf_writer_set_masks(cmf_writer *w, const void *bytes, size_t len, cmf_err *err);
cmf_status cmf_writer_set_vocab(cmf_writer *w, const void *bytes, size_t len, cmf_err *err);
cmf_status cmf_writer_finish(cmf_writer *w, cmf_err *err);
void cmf_writer_free(cmf_writer *w);

typedef struct cmf_masks_builder cmf_masks_builder;
cmf_status cmf_masks_builder_create(uint32_t n_layers, uint32_t intermediate, uint32_t n_heads,
                                    uint32_t n_experts, cmf_masks_builder **out, cmf_err *err);
cmf_status cmf_masks_builder_add(cmf_masks_builder *b, const char *name, const char *description,
                                 const uint8_t *ffn, const uint8_t *heads, const uint8_t *gates,
                                 const uint8_t *experts, const char *quality_json, cmf_err *err);
cmf_status cmf_masks_builder_set_default(cmf_masks_builder *b, const char *task_name,
                                         cmf_err *err);
cmf_status cmf_masks_builder_build(cmf_masks_builder *b, uint8_t **out, size_t *len,
                                   cmf_err *err);
void cmf_masks_builder_free(cmf_masks_builder *b);

/* converter.h */
bool cmf_convert_quant_from_name(const char *name, cmf_dtype *out);
typedef struct cmf_convert_progress {
    size_t tensors_done, tensors_total;
    uint64_t source_bytes_done, source_bytes_total;
    double seconds;
    bool final;
} cmf_convert_progress;
typedef void (*cmf_convert_progress_fn)(void *user, const cmf_convert_progress *p);
typedef void (*cmf_convert_fallback_fn)(void *user, const char *tensor, cmf_dtype wanted,
                                        cmf_dtype written);
typedef struct cmf_convert_opts {
    cmf_dtype quant;
    cmf_dtype embed_quant;
    cmf_dtype head_quant;
    bool has_embed_quant, has_head_quant;
    bool allow_q1;
    double vbit_mean_bits;
    uint64_t shard_max_bytes;
    unsigned threads;
    cmf_convert_progress_fn on_progress;
    cmf_convert_fallback_fn on_fallback;
    void *progress_user;
    const char *defrag_dir;
} cmf_convert_opts;
typedef struct cmf_convert_stats {
    size_t tensors, fallbacks;
    uint64_t source_bytes, output_bytes;
    double seconds;
} cmf_convert_stats;
void cmf_convert_opts_default(cmf_convert_opts *o);
cmf_status cmf_convert_hf(const char *model_dir, const char *out_path, const char *masks_dir,
                          const cmf_convert_opts *opts, cmf_convert_stats *stats, cmf_err *err);

/* tokenizer.h */
typedef struct cmf_tokenizer cmf_tokenizer;
cmf_status cmf_tokenizer_encode(const cmf_tokenizer *tok, const char *text, size_t len,
                                bool add_special_tokens, int32_t **ids, size_t *n, cmf_err *err);
cmf_status cmf_tokenizer_decode(const cmf_tokenizer *tok, const int32_t *ids, size_t n,
                                bool skip_special_tokens, char **text, size_t *len, cmf_err *err);
size_t cmf_tokenizer_vocab_size(const cmf_tokenizer *tok);
int32_t cmf_tokenizer_token_to_id(const cmf_tokenizer *tok, const char *token, size_t len);

/* engine.h */
typedef struct cortiq_model cortiq_model;
typedef struct cortiq_session cortiq_session;
bool cortiq_kv_type_from_name(const char *name, cortiq_kv_type *out);
uint32_t cortiq_model_vocab(const cortiq_model *m);
uint32_t cortiq_model_hidden(const cortiq_model *m);
uint64_t cortiq_model_token_macs(const cortiq_model *m);
uint32_t cortiq_model_max_context(const cortiq_model *m);
cmf_status cortiq_session_create(cortiq_model *m, uint32_t ctx, cortiq_session **out,
                                 cmf_err *err);
void cortiq_session_free(cortiq_session *s);
void cortiq_session_reset(cortiq_session *s);
const char *cortiq_model_default_task(const cortiq_model *m);
cmf_status cortiq_session_set_task(cortiq_session *s, const char *name, cmf_err *err);
const char *cortiq_session_task(const cortiq_session *s);
uint32_t cortiq_session_ctx(const cortiq_session *s);
cmf_status cortiq_session_eval(cortiq_session *s, const int32_t *tokens, size_t n,
                               float *all_logits, cmf_err *err);
cmf_status cortiq_session_eval_hidden(cortiq_session *s, const int32_t *tokens, size_t n,
                                      float *hidden, cmf_err *err);
typedef struct cortiq_sampler_params {
    float temperature;
    int top_k;
    float top_p;
    float min_p;
    float repeat_penalty;
    int repeat_last_n;
    uint64_t seed;
} cortiq_sampler_params;

/* runtime.h */
typedef struct cortiq_runtime cortiq_runtime;
typedef struct cortiq_skill_weight {
    const char *id;
    float weight;
} cortiq_skill_weight;
typedef struct cortiq_runtime_opts {
    unsigned threads;
    uint32_t ctx;
    cortiq_kv_type kv;
    cortiq_act_mode act;
    int no_huge_pages;
    int verify_tensors;
    const char *skill;
    const cortiq_skill_weight *blend;
    size_t n_blend;
    int batch_lanes;
} cortiq_runtime_opts;
cmf_status cortiq_runtime_open(const char *path, const cortiq_runtime_opts *opts,
                               cortiq_runtime **out, cmf_err *err);
void cortiq_runtime_free(cortiq_runtime *rt);
cortiq_model *cortiq_runtime_model(cortiq_runtime *rt);
cortiq_session *cortiq_runtime_session(cortiq_runtime *rt);
const cmf_tokenizer *cortiq_runtime_tokenizer(const cortiq_runtime *rt);
bool cortiq_runtime_has_template(const cortiq_runtime *rt);
typedef struct cortiq_generate_params {
    cortiq_sampler_params sampler;
    uint32_t max_tokens;
} cortiq_generate_params;
void cortiq_generate_defaults(cortiq_generate_params *p);
const char *cortiq_finish_name(cortiq_finish f);
typedef struct cortiq_generate_stats {
    size_t prompt_tokens, cached_tokens, generated_tokens;
    double prefill_seconds, decode_seconds;
    cortiq_finish finish;
} cortiq_generate_stats;
typedef int (*cortiq_text_fn)(void *user, const char *text, size_t len);
cmf_status cortiq_render_chat(cortiq_runtime *rt, const char *messages_json,
                              bool add_generation_prompt, char **out, cmf_err *err);
cmf_status cortiq_generate(cortiq_runtime *rt, const int32_t *prompt, size_t n_prompt,
                           const cortiq_generate_params *p, cortiq_text_fn on_text, void *user,
                           char **reply, cortiq_generate_stats *stats, cmf_err *err);
"""

# cmf_open flags (format.h)
OPEN_SKIP_META_HASH = 1 << 0
OPEN_VERIFY_TENSORS = 1 << 1
OPEN_NO_SHARDS = 1 << 2

# Live dtype ids of spec §3.1 (dtype.h).
DT_F32, DT_F16, DT_BF16 = 0, 1, 2

ffi = cffi.FFI()
ffi.cdef(CDEF)
ffi.cdef("void free(void *ptr);")


def _candidates():
    """Where libcortiq may be: $CORTIQ_LIB (the in-tree build, for the tests), the copy inside
    this package (a wheel), then the dynamic linker's search path (a `make install`)."""
    env = os.environ.get("CORTIQ_LIB")
    if env:
        yield env
        return
    here = Path(__file__).resolve().parent / "_lib"
    for name in ("libcortiq.so", "libcortiq.dylib"):
        if (here / name).exists():
            yield str(here / name)
    yield "libcortiq.so.0"
    yield "libcortiq.so"


def _load():
    errors = []
    for path in _candidates():
        try:
            return ffi.dlopen(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError("cortiq: cannot load libcortiq (" + "; ".join(errors) +
                      "); build it (cmake) and set CORTIQ_LIB, or pip install the package")


lib, LIB_PATH = _load()
libc = ffi.dlopen(None)


def new_err():
    return ffi.new("cmf_err *")


def take_string(ptr, length=None) -> str:
    """A malloc'd char* from the library as str (UTF-8, invalid bytes replaced), then freed."""
    if ptr == ffi.NULL:
        return ""
    try:
        raw = ffi.string(ptr) if length is None else ffi.unpack(ptr, length)
        return raw.decode("utf-8", "replace")
    finally:
        libc.free(ptr)


def c_str(ptr):
    """A library-owned NUL-terminated string as str, None for NULL."""
    if ptr == ffi.NULL:
        return None
    return ffi.string(ptr).decode("utf-8", "replace")
