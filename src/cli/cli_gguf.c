/* cli_gguf — see cli_gguf.h. */
#include "cli/cli_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "util/log.h"
#if defined(__has_include)
#if __has_include("tokenizer/tok_vocab_spec.h")
#include "tokenizer/tok_vocab_spec.h"
#define CLI_GGUF_HAVE_SPEC 1
#endif
#endif

static int id_of(const gguf_file *g, const char *key)
{
    int64_t v;
    return gguf_get_int(g, key, &v, NULL, 0) > 0 && v >= 0 && v < (1ll << 31) ? (int)v : -1;
}

static char *dup_str(gguf_str s)
{
    char *c = malloc(s.len + 1);
    if (c) {
        memcpy(c, s.s, s.len);
        c[s.len] = 0;
    }
    return c;
}

#ifdef CLI_GGUF_HAVE_SPEC
/* the tokenizer.ggml.* arrays as a spec; the string pointers borrow g */
static tok_tokenizer *load_spec(const gguf_file *g, char *err, size_t errlen)
{
    tok_vocab_spec s;
    memset(&s, 0, sizeof s);
    const gguf_kv *toks = gguf_find_kv(g, "tokenizer.ggml.tokens");
    const gguf_kv *merges = gguf_find_kv(g, "tokenizer.ggml.merges");
    const gguf_kv *scores = gguf_find_kv(g, "tokenizer.ggml.scores");
    const gguf_kv *types = gguf_find_kv(g, "tokenizer.ggml.token_type");
    gguf_str model = {0}, pre = {0};
    if (gguf_get_str(g, "tokenizer.ggml.model", &model, err, errlen) <= 0 || !toks ||
        toks->v.type != GGUF_T_ARRAY || toks->v.arr_type != GGUF_T_STRING) {
        snprintf(err, errlen, "no tokenizer.ggml.model / tokenizer.ggml.tokens");
        return NULL;
    }
    uint64_t n = toks->v.n, nm = merges && merges->v.arr_type == GGUF_T_STRING ? merges->v.n : 0;
    char *mname = dup_str(model), *pname = gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL, 0) > 0 ? dup_str(pre) : NULL;
    const char **tp = calloc(n + 1, sizeof *tp), **mp = calloc(nm + 1, sizeof *mp);
    size_t *tl = calloc(n + 1, sizeof *tl), *ml = calloc(nm + 1, sizeof *ml);
    float *sc = scores && scores->v.n == n && scores->v.arr_type == GGUF_T_FLOAT32 ? calloc(n + 1, sizeof *sc) : NULL;
    int32_t *ty = types && types->v.n == n && types->v.arr_data ? calloc(n + 1, sizeof *ty) : NULL;
    tok_tokenizer *t = NULL;
    if (!mname || !tp || !mp || !tl || !ml || (scores && scores->v.n == n && !sc) || (types && types->v.n == n && types->v.arr_data && !ty)) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) tp[i] = toks->v.strs[i].s, tl[i] = (size_t)toks->v.strs[i].len;
    for (uint64_t i = 0; i < nm; i++) mp[i] = merges->v.strs[i].s, ml[i] = (size_t)merges->v.strs[i].len;
    for (uint64_t i = 0; sc && i < n; i++) sc[i] = (float)gguf_arr_float(&scores->v, i);
    for (uint64_t i = 0; ty && i < n; i++) ty[i] = (int32_t)gguf_arr_int(&types->v, i);
    s.model = mname;
    s.pre = pname;
    s.n_tokens = (size_t)n;
    s.tokens = tp;
    s.token_lens = tl;
    s.scores = sc;
    s.token_types = ty;
    s.n_merges = (size_t)nm;
    s.merges = mp;
    s.merge_lens = ml;
    s.bos_id = id_of(g, "tokenizer.ggml.bos_token_id");
    s.eos_id = id_of(g, "tokenizer.ggml.eos_token_id");
    s.unk_id = id_of(g, "tokenizer.ggml.unknown_token_id");
    s.pad_id = id_of(g, "tokenizer.ggml.padding_token_id");
    s.eot_id = id_of(g, "tokenizer.ggml.eot_token_id");
    s.eom_id = id_of(g, "tokenizer.ggml.eom_token_id");
    int64_t b;
    s.add_bos = gguf_get_int(g, "tokenizer.ggml.add_bos_token", &b, NULL, 0) > 0 ? (int)b : -1;
    s.add_eos = gguf_get_int(g, "tokenizer.ggml.add_eos_token", &b, NULL, 0) > 0 ? (int)b : -1;
    s.add_space_prefix = gguf_get_int(g, "tokenizer.ggml.add_space_prefix", &b, NULL, 0) > 0 ? (int)b : -1;
    t = tok_load_vocab_spec(&s, err, errlen);
out:
    free(mname), free(pname), free(tp), free(mp), free(tl), free(ml), free(sc), free(ty);
    return t;
}
#endif

int cli_tokenizer_load_gguf(const char *path, bool required, tok_tokenizer **out)
{
    *out = NULL;
    char err[1024];
#ifdef CLI_GGUF_HAVE_SPEC
    gguf_file g;
    if (gguf_open(&g, path, err, sizeof err)) {
        fprintf(stderr, "error: tokenizer: %s\n", err);
        return -1;
    }
    int has_vocab = gguf_find_kv(&g, "tokenizer.ggml.tokens") != NULL;
    if (has_vocab) *out = load_spec(&g, err, sizeof err);
    else snprintf(err, sizeof err, "the file has no tokenizer.ggml.tokens");
    gguf_close(&g);
    if (*out) return 0;
    if (!required && !has_vocab) return 0;
    fprintf(stderr, "error: tokenizer of %s: %s (--tokenizer-path DIR overrides)\n", path, err);
    return -1;
#else
    (void)err;
    if (!required) {
        log_warn("%s: reading the tokenizer from a GGUF file is not supported yet; ids in, ids out "
                 "(pass --tokenizer-path DIR with a Hugging Face tokenizer for text)", path);
        return 0;
    }
    fprintf(stderr, "error: %s: reading the tokenizer from a GGUF file is not supported yet; pass "
                    "--tokenizer-path DIR (a Hugging Face tokenizer folder)\n", path);
    return -1;
#endif
}

int cli_gguf_chat_load(tmpl_chat *c, const char *path, const char *override, char **err)
{
    char e[1024];
    gguf_file g;
    if (gguf_open(&g, path, e, sizeof e)) {
        *err = strdup(e);
        return -1;
    }
    gguf_str ct = {0};
    char *src = NULL;
    if (!override) {
        if (gguf_get_str(&g, "tokenizer.chat_template", &ct, NULL, 0) <= 0) {
            gguf_close(&g);
            *err = strdup("no chat template (tokenizer.chat_template)");
            return -1;
        }
        if (!(src = dup_str(ct))) {
            gguf_close(&g);
            *err = strdup("out of memory");
            return -1;
        }
    }
    int rc = tmpl_chat_load(c, NULL, override ? override : src, NULL, err);
    free(src);
    if (rc == 0) {
        /* special tokens as strings, from the vocabulary */
        static const struct { const char *key, *name; } sp[] = {
            {"tokenizer.ggml.bos_token_id", "bos_token"}, {"tokenizer.ggml.eos_token_id", "eos_token"},
            {"tokenizer.ggml.unknown_token_id", "unk_token"}, {"tokenizer.ggml.padding_token_id", "pad_token"},
        };
        const gguf_kv *toks = gguf_find_kv(&g, "tokenizer.ggml.tokens");
        for (size_t i = 0; toks && toks->v.arr_type == GGUF_T_STRING && i < sizeof sp / sizeof sp[0]; i++) {
            int id = id_of(&g, sp[i].key);
            if (id < 0 || (uint64_t)id >= toks->v.n) continue;
            json_object_set_new(c->special, sp[i].name,
                                json_stringn(toks->v.strs[id].s, (size_t)toks->v.strs[id].len));
        }
    }
    gguf_close(&g);
    return rc;
}
