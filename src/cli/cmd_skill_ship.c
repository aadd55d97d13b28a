/* cmd_skill_ship.c - standalone skill files (spec §9.1): `cortiq skill export` cuts a skill out
 * against an exact base (feature bit SKILL_FILE, key base_dir_hash = hash64 of the base's
 * directory bytes, envelope 0x78); `cortiq skill apply` checks the key and lays the skill's
 * tensors over the base, writing a complete model. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "cli/cmd_skill.h"
#include "cortiq/writer.h"

static void export_usage(void) {
    printf(
        "usage: cortiq skill export FILE --id ID --base BASE.cmf -o SKILL.cmf [--name NAME]\n"
        "  Write a standalone skill file (spec 9.1): only the tensors the skill changes, under\n"
        "  their plain names, the mask catalog of FILE, and a registry record keyed to BASE:\n"
        "  base_dir_hash (hash64 of BASE's directory bytes), base_arch, provenance. Feature bit\n"
        "  6 (SKILL_FILE) is set: the file is not runnable until `cortiq skill apply`.\n"
        "  FILE either holds skill ID (its skill.ID.* tensors are cut; FILE's backbone must be\n"
        "  BASE's tensors byte for byte) or is a complete specialist (every tensor whose bytes\n"
        "  differ from BASE's is cut, as the reference implementation does).\n");
}

static void apply_usage(void) {
    printf("usage: cortiq skill apply BASE.cmf SKILL.cmf -o OUT.cmf [--force]\n"
           "  Attach a standalone skill file to its base (spec 9.1): refuse a base whose\n"
           "  directory hash is not the skill's base_dir_hash (--force overrides; the result is\n"
           "  out of spec), then write BASE with the skill's tensors in place of its own, the\n"
           "  skill's masks (else BASE's), BASE's tokenizer, and the skill's record without the\n"
           "  key: a complete model whose tensors are byte for byte the specialist's.\n"
           "  --force   apply even when the base's directory hash differs\n");
}

static char *header_with_skills(const cmf_header *h, json_t *records) {
    json_t *root = json_loadb(h->json, h->json_len, 0, NULL);
    if (!root) return NULL;
    json_object_set(root, "skills", records);
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    return text;
}

static json_t *record_json(const cmf_file *f, const char *id) {
    const cmf_header *h = cmf_file_header(f);
    json_t *root = json_loadb(h->json, h->json_len, 0, NULL);
    size_t k;
    json_t *rec, *out = NULL;
    json_array_foreach(json_object_get(root, "skills"), k, rec) {
        if (!strcmp(json_string_value(json_object_get(rec, "id")), id)) out = json_deep_copy(rec);
    }
    json_decref(root);
    return out;
}

static long layer_of(const char *name) {
    const char *p = "model.layers.";
    if (strncmp(name, p, strlen(p))) return -1;
    char *end;
    long l = strtol(name + strlen(p), &end, 10);
    return *end == '.' ? l : -1;
}

static void add_layer(json_t *layers, long l) {
    size_t k;
    json_t *v;
    if (l < 0) return;
    json_array_foreach(layers, k, v) {
        if (json_integer_value(v) == l) return;
        if (json_integer_value(v) > l) {
            json_array_insert_new(layers, k, json_integer(l));
            return;
        }
    }
    json_array_append_new(layers, json_integer(l));
}

int skill_export_main(int argc, char **argv) {
    const char *path = NULL, *id = NULL, *base_path = NULL, *out = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v;
        if (cli_is_help(s)) return export_usage(), CLI_EXIT_OK;
        if (s[0] != '-') {
            if (path) return cli_usage_error("skill export", "one FILE only");
            path = s;
            continue;
        }
        if (!cli_word_in(s, "--id --base -o --output --name"))
            return cli_usage_error("skill export", "unknown option '%s'", s);
        if (!(v = cli_opt_value("skill export", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!strcmp(s, "--id"))
            id = v;
        else if (!strcmp(s, "--base"))
            base_path = v;
        else if (!strcmp(s, "--name"))
            name = v;
        else
            out = v;
    }
    if (!path || !id || !base_path || !out)
        return cli_usage_error("skill export", "need FILE, --id ID, --base BASE.cmf and -o OUT");
    if (!skill_id_ok(id)) return cli_usage_error("skill export", "--id '%s': not a skill id", id);
    cmf_file *f = NULL, *base = NULL;
    int rc = cli_open_model(path, &f);
    if (!rc) rc = cli_open_model(base_path, &base);
    if (rc) {
        cmf_close(f);
        return rc;
    }
    cmf_err err;
    cmf_status st = CMF_OK;
    const cmf_header *h = cmf_file_header(f), *bh = cmf_file_header(base);
    json_t *rec = record_json(f, id);
    bool in_file = rec != NULL;
    if (!rec) rec = json_object(), json_object_set_new(rec, "id", json_string(id));
    json_t *layers = json_array();
    char prefix[96];
    snprintf(prefix, sizeof prefix, "skill.%s.", id);
    size_t plen = strlen(prefix), n = cmf_file_tensor_count(f), cut = 0;
    cmf_writer *w = NULL;
    st = cmf_writer_create(out, NULL, &w, &err);
    for (size_t i = 0; !st && i < n; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        const char *plain = NULL;
        if (in_file) {
            if (!strncmp(t->name, prefix, plen)) {
                plain = t->name + plen;
                if (!cmf_file_find(base, plain))
                    st = cmf_err_set(&err, CMF_E_INVALID_ARG, base_path,
                                     "skill tensor '%s' replaces '%s', which this base lacks",
                                     t->name, plain);
            } else if (strncmp(t->name, "skill.", 6)) {
                const cmf_tensor *b = cmf_file_find(base, t->name);
                if (!b || b->hash != t->hash || b->nbytes != t->nbytes)
                    st = cmf_err_set(&err, CMF_E_INVALID_ARG, path,
                                     "backbone tensor '%s' is not byte-identical in %s: the skill "
                                     "would not be keyed to the base it was made on",
                                     t->name, base_path);
            }
        } else if (strncmp(t->name, "skill.", 6)) {
            const cmf_tensor *b = cmf_file_find(base, t->name);
            if (!b)
                st = cmf_err_set(&err, CMF_E_INVALID_ARG, base_path,
                                 "tensor '%s' of the specialist is not in the base", t->name);
            else if (b->hash != t->hash || b->nbytes != t->nbytes || b->dtype != t->dtype)
                plain = t->name;
        }
        if (st || !plain) continue;
        st = cmf_writer_add_tensor_ref(w, plain, (cmf_dtype)t->dtype, t->ndim, t->shape, t->data,
                                       t->nbytes, &err);
        add_layer(layers, layer_of(plain));
        cut++;
    }
    if (!st && !cut)
        st = cmf_err_set(&err, CMF_E_INVALID_ARG, path,
                         in_file ? "skill '%s' has no tensors"
                                 : "no skill '%s' in the registry, "
                                   "and FILE equals BASE tensor for "
                                   "tensor: nothing to export",
                         id);
    if (!st) {
        char hash[17];
        snprintf(hash, sizeof hash, "%016llx",
                 (unsigned long long)cmf_file_envelope(base)->dir_hash);
        if (name) json_object_set_new(rec, "name", json_string(name));
        json_object_set(rec, "layers", layers);
        json_object_set_new(rec, "base_dir_hash", json_string(hash));
        if (bh->arch.arch_name)
            json_object_set_new(rec, "base_arch", json_string(bh->arch.arch_name));
        const cmf_masks *mk = cmf_file_masks(f);
        if (mk && mk->default_task) json_object_set_new(rec, "task", json_string(mk->default_task));
        json_t *prov = json_object();
        const char *slash = strrchr(path, '/');
        json_object_set_new(prov, "cut_from", json_string(slash ? slash + 1 : path));
        json_object_set_new(prov, "tensors", json_integer((json_int_t)cut));
        json_object_set_new(rec, "provenance", prov);
        json_t *records = json_array();
        json_array_append(records, rec);
        char *text = header_with_skills(h, records);
        json_decref(records);
        st = text ? cmf_writer_set_header(w, text, strlen(text), &err)
                  : (cmf_status)cmf_err_set(&err, CMF_E_NOMEM, out, "header");
        free(text);
    }
    size_t ml = 0;
    if (!st && cmf_file_envelope(f)->masks_off) {
        size_t all;
        const uint8_t *img = cmf_file_shard_bytes(f, 0, &all);
        ml = (size_t)cmf_file_envelope(f)->masks_len;
        st = cmf_writer_set_masks(w, img + cmf_file_envelope(f)->masks_off, ml, &err);
    }
    if (!st) st = cmf_writer_finish(w, &err);
    cmf_writer_free(w);
    json_decref(rec);
    json_decref(layers);
    uint64_t base_dir_hash = cmf_file_envelope(base)->dir_hash;
    cmf_close(f);
    cmf_close(base);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    printf("skill '%s': %zu tensor(s) -> %s (SKILL_FILE, base_dir_hash %016llx)\n", id, cut, out,
           (unsigned long long)base_dir_hash);
    return CLI_EXIT_OK;
}

int skill_apply_main(int argc, char **argv) {
    const char *base_path = NULL, *skill_path = NULL, *out = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v;
        if (cli_is_help(s)) return apply_usage(), CLI_EXIT_OK;
        if (!strcmp(s, "--force")) {
            force = 1;
        } else if (!strcmp(s, "-o") || !strcmp(s, "--output")) {
            if (!(v = cli_opt_value("skill apply", argc, argv, &i))) return CLI_EXIT_USAGE;
            out = v;
        } else if (s[0] == '-') {
            return cli_usage_error("skill apply", "unknown option '%s'", s);
        } else if (!base_path) {
            base_path = s;
        } else if (!skill_path) {
            skill_path = s;
        } else {
            return cli_usage_error("skill apply", "need BASE.cmf and SKILL.cmf only");
        }
    }
    if (!base_path || !skill_path || !out)
        return cli_usage_error("skill apply", "need BASE.cmf, SKILL.cmf and -o OUT.cmf");
    cmf_file *base = NULL, *sk = NULL;
    int rc = cli_open_model(base_path, &base);
    if (!rc) rc = cli_open_model(skill_path, &sk);
    if (rc) {
        cmf_close(base);
        return rc;
    }
    cmf_err err;
    cmf_status st = CMF_OK;
    const cmf_header *sh = cmf_file_header(sk), *bh = cmf_file_header(base);
    const cmf_skill *key = NULL;
    for (size_t i = 0; i < sh->n_skills && !key; i++)
        if (sh->skills[i].has_base_dir_hash) key = &sh->skills[i];
    uint64_t have = cmf_file_envelope(base)->dir_hash;
    if (!key)
        st = cmf_err_set(&err, CMF_E_INVALID_ARG, skill_path,
                         "no skill record with base_dir_hash: not a standalone skill file");
    else if (key->base_dir_hash != have && !force)
        st = cmf_err_set(&err, CMF_E_INVALID_ARG, base_path,
                         "directory hash %016llx, but skill '%s' was cut against %016llx (base "
                         "%s): a skill is a delta against exact bytes (spec 9.1); --force "
                         "overrides",
                         (unsigned long long)have, key->id, (unsigned long long)key->base_dir_hash,
                         key->base_arch ? key->base_arch : "?");
    else if (key->base_dir_hash != have)
        fprintf(stderr,
                "cortiq skill apply: warning: base directory hash %016llx is not the skill's key "
                "%016llx; applying because of --force (the result is out of spec)\n",
                (unsigned long long)have, (unsigned long long)key->base_dir_hash);
    size_t ns = cmf_file_tensor_count(sk), nb = cmf_file_tensor_count(base), replaced = 0;
    for (size_t i = 0; !st && i < ns; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(sk, i), *b = cmf_file_find(base, t->name);
        if (!b || b->ndim != t->ndim || memcmp(b->shape, t->shape, t->ndim * sizeof *t->shape))
            st = cmf_err_set(&err, CMF_E_INVALID_ARG, skill_path,
                             "tensor '%s' %s the base: a skill replaces tensors at their shape",
                             t->name, b ? "has another shape than in" : "is not in");
    }
    cmf_writer *w = NULL;
    if (!st) st = cmf_writer_create(out, NULL, &w, &err);
    for (size_t i = 0; !st && i < nb; i++) {
        const cmf_tensor *b = cmf_file_tensor_at(base, i), *t = cmf_file_find(sk, b->name);
        if (t)
            replaced++;
        else
            t = b;
        st = cmf_writer_add_tensor_ref(w, b->name, (cmf_dtype)t->dtype, t->ndim, t->shape, t->data,
                                       t->nbytes, &err);
    }
    if (!st) {
        json_t *records = json_array();
        json_t *broot = json_loadb(bh->json, bh->json_len, 0, NULL);
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(broot, "skills"), k, r) {
            if (strcmp(json_string_value(json_object_get(r, "id")), key->id))
                json_array_append(records, r);
        }
        json_decref(broot);
        json_t *carried = record_json(sk, key->id);
        json_object_del(carried, "base_dir_hash"); /* a complete model again, not a partial one */
        json_array_append_new(records, carried);
        char *text = header_with_skills(bh, records);
        json_decref(records);
        st = text ? cmf_writer_set_header(w, text, strlen(text), &err)
                  : (cmf_status)cmf_err_set(&err, CMF_E_NOMEM, out, "header");
        free(text);
    }
    const cmf_file *msrc = cmf_file_envelope(sk)->masks_off ? sk : base;
    if (!st && cmf_file_envelope(msrc)->masks_off) {
        size_t all;
        const uint8_t *img = cmf_file_shard_bytes(msrc, 0, &all);
        st = cmf_writer_set_masks(w, img + cmf_file_envelope(msrc)->masks_off,
                                  (size_t)cmf_file_envelope(msrc)->masks_len, &err);
    }
    size_t vlen = 0;
    const uint8_t *vocab = st ? NULL : cmf_file_vocab(base, &vlen);
    if (vocab) st = cmf_writer_set_vocab(w, vocab, vlen, &err);
    if (!st) st = cmf_writer_finish(w, &err);
    cmf_writer_free(w);
    if (!st) printf("applied skill '%s': %zu tensor(s) replaced -> %s\n", key->id, replaced, out);
    cmf_close(base);
    cmf_close(sk);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    return CLI_EXIT_OK;
}
