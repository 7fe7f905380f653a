/* quantize_tok — see quantize_tok.h. */
#include "cli/quantize_tok.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "util/fileio.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static json_t *load_json(const char *dir, const char *name)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return json_load_file(p, 0, NULL);
}

/* a tokenizer_config.json token entry: "text" or {"content": "text"} */
static const char *tc_token(json_t *tc, const char *key)
{
    json_t *v = json_object_get(tc, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int find_tok(char **toks, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (toks[i] && !strcmp(toks[i], s)) return i;
    return -1;
}

/* the pre-tokenizer name llama.cpp knows for a ByteLevel vocabulary's split regex */
static const char *pre_name(json_t *pre)
{
    char *s = json_dumps(pre, JSON_COMPACT);
    const char *name = "default";
    if (s) {
        if (strstr(s, "\\\\p{N}{1,3}") && strstr(s, "\xe4\xb8\x80")) name = "deepseek-v3"; /* + a CJK split */
        else if (strstr(s, "\\\\p{N}{1,3}")) name = "llama-bpe";
        else if (strstr(s, "(?i:'s|'t|'re|'ve|'m|'ll|'d)") && strstr(s, "\\\\p{N}|")) name = "qwen2";
        else if (strstr(s, "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+")) name = "gpt-2";
    }
    free(s);
    return name;
}

static int has_type(json_t *node, const char *type)
{
    char *s = json_dumps(node, JSON_COMPACT);
    char want[96];
    snprintf(want, sizeof want, "\"type\":\"%s\"", type);
    int r = s && strstr(s, want);
    free(s);
    return r;
}

static int chat_template(gguf_writer *w, const char *dir, json_t *tc)
{
    json_t *ct = json_object_get(tc, "chat_template");
    if (json_is_string(ct)) return gguf_writer_str(w, "tokenizer.chat_template", json_string_value(ct));
    if (json_is_array(ct)) { /* [{"name", "template"}]: the "default" one */
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            json_t *nm = json_object_get(e, "name"), *t = json_object_get(e, "template");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), "default") && json_is_string(t))
                return gguf_writer_str(w, "tokenizer.chat_template", json_string_value(t));
        }
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    size_t len;
    char *text = fileio_read(p, 16u << 20, &len);
    if (!text) return 0;
    int rc = gguf_writer_str(w, "tokenizer.chat_template", text);
    free(text);
    return rc;
}

int quantize_tok_vocab_size(const char *dir)
{
    json_t *tj = load_json(dir, "tokenizer.json");
    if (!tj) return -1;
    json_int_t mx = -1;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(tj, "model"), "vocab"), k, v)
        if (json_is_integer(v) && json_integer_value(v) > mx) mx = json_integer_value(v);
    size_t i;
    json_array_foreach(json_object_get(tj, "added_tokens"), i, v) {
        json_t *id = json_object_get(v, "id");
        if (json_is_integer(id) && json_integer_value(id) > mx) mx = json_integer_value(id);
    }
    json_decref(tj);
    return mx >= 0 && mx < (1 << 24) ? (int)mx + 1 : -1;
}

int quantize_tok_meta(gguf_writer *w, const char *dir, const model_config *c, char *err, size_t errlen)
{
    json_t *tj = load_json(dir, "tokenizer.json"), *tc = load_json(dir, "tokenizer_config.json");
    int n = c->vocab_size, rc = -1;
    char **toks = calloc((size_t)n, sizeof *toks);
    int32_t *types = calloc((size_t)n, sizeof *types);
    float *scores = calloc((size_t)n, sizeof *scores);
    const char **merges = NULL;
    size_t n_merges = 0;
    char **merge_owned = NULL;
    if (!toks || !types || !scores) {
        errmsg_set(err, errlen, "out of memory");
        goto out;
    }
    if (!tj) { /* no tokenizer: ids only */
        if (c->bos_token_id >= 0 && gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_token_id)) goto oom;
        if (c->n_eos > 0 && gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_token_ids[0])) goto oom;
        rc = chat_template(w, dir, tc) ? -1 : 0;
        if (rc) errmsg_set(err, errlen, "out of memory");
        goto out;
    }
    json_t *model = json_object_get(tj, "model");
    json_t *mt = json_object_get(model, "type");
    if (!json_is_string(mt) || strcmp(json_string_value(mt), "BPE")) {
        errmsg_set(err, errlen, "%s/tokenizer.json: tokenizer model %s: only BPE is converted to GGUF", dir,
                   json_is_string(mt) ? json_string_value(mt) : "(none)");
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(model, "vocab"), k, v) {
        json_int_t id = json_integer_value(v);
        if (json_is_integer(v) && id >= 0 && id < n && !toks[id]) {
            toks[id] = strdup(k);
            types[id] = TT_NORMAL;
        }
    }
    size_t i;
    json_t *at;
    json_array_foreach(json_object_get(tj, "added_tokens"), i, at) {
        json_t *jid = json_object_get(at, "id"), *jc = json_object_get(at, "content");
        json_int_t id = json_integer_value(jid);
        if (!json_is_integer(jid) || !json_is_string(jc) || id < 0 || id >= n) continue;
        free(toks[id]);
        toks[id] = strdup(json_string_value(jc));
        types[id] = json_is_true(json_object_get(at, "special")) ? TT_CONTROL : TT_USER_DEFINED;
    }
    for (int t = 0; t < n; t++)
        if (!toks[t]) {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%d]", t);
            toks[t] = strdup(pad);
            types[t] = TT_UNUSED;
        }
    for (int t = 0; t < n; t++)
        if (!toks[t]) goto oom;
    json_t *jm = json_object_get(model, "merges");
    n_merges = json_array_size(jm);
    merges = calloc(n_merges + 1, sizeof *merges);
    merge_owned = calloc(n_merges + 1, sizeof *merge_owned);
    if (!merges || !merge_owned) goto oom;
    json_array_foreach(jm, i, v) {
        if (json_is_string(v)) {
            merges[i] = json_string_value(v);
        } else if (json_is_array(v) && json_array_size(v) == 2) {
            const char *a = json_string_value(json_array_get(v, 0)), *b = json_string_value(json_array_get(v, 1));
            if (!a || !b) goto bad_merge;
            size_t la = strlen(a), lb = strlen(b);
            if (!(merge_owned[i] = malloc(la + lb + 2))) goto oom;
            memcpy(merge_owned[i], a, la);
            merge_owned[i][la] = ' ';
            memcpy(merge_owned[i] + la + 1, b, lb + 1);
            merges[i] = merge_owned[i];
        } else {
bad_merge:
            errmsg_set(err, errlen, "%s/tokenizer.json: merge %zu is neither \"a b\" nor [a, b]", dir, i);
            goto out;
        }
    }
    json_t *pre = json_object_get(tj, "pre_tokenizer");
    int r = 0;
    if (has_type(pre, "ByteLevel")) {
        r |= gguf_writer_str(w, "tokenizer.ggml.model", "gpt2");
        r |= gguf_writer_str(w, "tokenizer.ggml.pre", pre_name(pre));
        r |= gguf_writer_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n);
        r |= gguf_writer_arr(w, "tokenizer.ggml.token_type", GGUF_T_INT32, types, (uint64_t)n);
        r |= gguf_writer_arr_str(w, "tokenizer.ggml.merges", merges, n_merges);
    } else {
        json_t *norm = json_object_get(tj, "normalizer");
        if (!has_type(norm, "Prepend") || !json_is_true(json_object_get(model, "byte_fallback"))) {
            errmsg_set(err, errlen, "%s/tokenizer.json: a BPE tokenizer that is neither byte-level nor "
                       "SentencePiece-style (Prepend normalizer + byte fallback) is not converted", dir);
            goto out;
        }
        /* scores: -(rank of the first merge making the token) */
        for (int t = 0; t < n; t++) scores[t] = types[t] == TT_NORMAL ? (strlen(toks[t]) > 1 ? -1e6f : 0.0f) : 0.0f;
        for (size_t m = n_merges; m-- > 0;) {
            const char *sp = strchr(merges[m], ' ');
            if (!sp) continue;
            size_t la = (size_t)(sp - merges[m]);
            char *cat = malloc(strlen(merges[m]) + 1);
            if (!cat) goto oom;
            memcpy(cat, merges[m], la);
            strcpy(cat + la, sp + 1);
            json_t *id = json_object_get(json_object_get(model, "vocab"), cat);
            free(cat);
            if (json_is_integer(id) && json_integer_value(id) >= 0 && json_integer_value(id) < n)
                scores[json_integer_value(id)] = -(float)m;
        }
        const char *unk = json_string_value(json_object_get(model, "unk_token"));
        if (!unk) unk = tc_token(tc, "unk_token");
        for (int t = 0; t < n; t++) {
            const char *s = toks[t];
            if (strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>') types[t] = TT_BYTE;
            if (unk && !strcmp(s, unk)) types[t] = TT_UNKNOWN;
        }
        r |= gguf_writer_str(w, "tokenizer.ggml.model", "llama");
        r |= gguf_writer_str(w, "tokenizer.ggml.pre", "default");
        r |= gguf_writer_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n);
        r |= gguf_writer_arr(w, "tokenizer.ggml.scores", GGUF_T_FLOAT32, scores, (uint64_t)n);
        r |= gguf_writer_arr(w, "tokenizer.ggml.token_type", GGUF_T_INT32, types, (uint64_t)n);
        r |= gguf_writer_bool(w, "tokenizer.ggml.add_space_prefix", 1);
    }
    int bos = find_tok(toks, n, tc_token(tc, "bos_token"));
    int eos = find_tok(toks, n, tc_token(tc, "eos_token"));
    int unk_id = find_tok(toks, n, tc_token(tc, "unk_token"));
    int pad = find_tok(toks, n, tc_token(tc, "pad_token"));
    if (bos < 0) bos = c->bos_token_id;
    if (eos < 0 && c->n_eos > 0) eos = c->eos_token_ids[0];
    if (bos >= 0) r |= gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0) r |= gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (unk_id >= 0) r |= gguf_writer_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk_id);
    if (pad >= 0) r |= gguf_writer_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)pad);
    json_t *ab = json_object_get(tc, "add_bos_token");
    int add_bos;
    if (json_is_boolean(ab)) {
        add_bos = json_is_true(ab);
    } else { /* the post-processor's template names the bos token */
        char *pp = json_dumps(json_object_get(tj, "post_processor"), JSON_COMPACT);
        json_t *bs = bos >= 0 ? json_string(toks[bos]) : NULL;
        char *q = bs ? json_dumps(bs, JSON_ENCODE_ANY) : NULL;
        add_bos = pp && q && strstr(pp, q);
        free(pp), free(q);
        json_decref(bs);
    }
    r |= gguf_writer_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    r |= gguf_writer_bool(w, "tokenizer.ggml.add_eos_token", json_is_true(json_object_get(tc, "add_eos_token")));
    r |= chat_template(w, dir, tc);
    if (r) goto oom;
    rc = 0;
    goto out;
oom:
    errmsg_set(err, errlen, "out of memory (tokenizer metadata)");
out:
    for (int t = 0; toks && t < n; t++) free(toks[t]);
    for (size_t m = 0; merge_owned && m < n_merges; m++) free(merge_owned[m]);
    free(toks), free(types), free(scores), free(merges), free(merge_owned);
    json_decref(tj);
    json_decref(tc);
    return rc;
}
