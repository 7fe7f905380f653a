/* tok_load — build a tok_tokenizer from tokenizer.json and the config files
 * of a Hugging Face model folder.
 *
 * DESIGN: jansson parses each document into a tree that lives only for the
 * duration of the load; everything kept is copied into the tokenizer's own
 * arrays and tables (tok_internal.h), then the tree is freed.  Every field
 * is validated: a wrong type or an unknown component becomes a one-line
 * error naming the JSON path, never a crash (the loader is fuzzed).
 *
 * What comes from where:
 *   tokenizer.json          model, normalizer, pre_tokenizer, post_processor,
 *                           decoder, added_tokens
 *   tokenizer_config.json   bos/eos/pad/unk tokens, add_bos_token /
 *                           add_eos_token (Llama/Gemma classes, as Python
 *                           transformers), clean_up_tokenization_spaces,
 *                           additional_special_tokens
 *   special_tokens_map.json bos/eos/pad/unk when tokenizer_config lacks them
 *   generation_config.json  eos_token_id (int or list), bos_token_id
 */
#include <errno.h>
#include <stdatomic.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/fileio.h"
#include "util/log.h"

typedef struct lctx {
    char *err;
    size_t errlen;
    /* fast path: model.vocab / model.merges read by tok_jsonscan from doc */
    const char *doc;
    tok_span vocab, merges;
    bool fast;
    bool fast_failed; /* the scanner rejected a span: retry with jansson */
} lctx;

__attribute__((format(printf, 2, 3))) static int fail(lctx *c, const char *fmt, ...)
{
    if (c->err && c->errlen && !c->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static bool jbool(json_t *o, const char *k, bool def)
{
    json_t *v = json_object_get(o, k);
    if (json_is_boolean(v)) return json_is_true(v);
    return def;
}

static char *dupn(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* {"String": s} or {"Regex": r} */
static int parse_pattern(lctx *c, json_t *pat, tok_regex *re, const char *where)
{
    json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
    char e[256] = "";
    if (json_is_string(s)) {
        if (tok_regex_compile(re, 0, json_string_value(s), json_string_length(s), e, sizeof e))
            return fail(c, "%s: out of memory", where);
        return 0;
    }
    if (json_is_string(r)) {
        if (tok_regex_compile(re, 1, json_string_value(r), json_string_length(r), e, sizeof e))
            return fail(c, "%s: %s", where, e);
        return 0;
    }
    return fail(c, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", where);
}

static const char *jtype(json_t *o)
{
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* ---- normalizers ------------------------------------------------------ */
static int parse_normalizer(lctx *c, json_t *j, tok_normalizer *nm, int depth)
{
    memset(nm, 0, sizeof *nm);
    const char *ty = jtype(j);
    if (!ty) return fail(c, "normalizer: missing \"type\"");
    if (depth > 16) return fail(c, "normalizer: nested too deeply");
    if (!strcmp(ty, "Sequence")) {
        nm->kind = TOK_NORM_SEQUENCE;
        json_t *arr = json_object_get(j, "normalizers");
        if (!json_is_array(arr)) return fail(c, "normalizer Sequence: \"normalizers\" must be an array");
        nm->children = calloc(json_array_size(arr) + 1, sizeof *nm->children);
        if (!nm->children) return fail(c, "out of memory");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            nm->n_children = i + 1;
            if (parse_normalizer(c, json_array_get(arr, i), &nm->children[i], depth + 1)) return -1;
        }
        return 0;
    }
    if (!strcmp(ty, "NFC")) { nm->kind = TOK_NORM_NFC; return 0; }
    if (!strcmp(ty, "NFD")) { nm->kind = TOK_NORM_NFD; return 0; }
    if (!strcmp(ty, "NFKC")) { nm->kind = TOK_NORM_NFKC; return 0; }
    if (!strcmp(ty, "NFKD")) { nm->kind = TOK_NORM_NFKD; return 0; }
    if (!strcmp(ty, "Lowercase")) { nm->kind = TOK_NORM_LOWERCASE; return 0; }
    if (!strcmp(ty, "StripAccents")) { nm->kind = TOK_NORM_STRIP_ACCENTS; return 0; }
    if (!strcmp(ty, "Prepend")) {
        nm->kind = TOK_NORM_PREPEND;
        json_t *p = json_object_get(j, "prepend");
        if (!json_is_string(p)) return fail(c, "normalizer Prepend: \"prepend\" must be a string");
        nm->str = dupn(json_string_value(p), json_string_length(p));
        nm->str_n = json_string_length(p);
        return nm->str ? 0 : fail(c, "out of memory");
    }
    if (!strcmp(ty, "Replace")) {
        nm->kind = TOK_NORM_REPLACE;
        json_t *ct = json_object_get(j, "content");
        if (!json_is_string(ct)) return fail(c, "normalizer Replace: \"content\" must be a string");
        nm->str = dupn(json_string_value(ct), json_string_length(ct));
        nm->str_n = json_string_length(ct);
        if (!nm->str) return fail(c, "out of memory");
        return parse_pattern(c, json_object_get(j, "pattern"), &nm->pattern, "normalizer Replace");
    }
    if (!strcmp(ty, "Strip")) {
        nm->kind = TOK_NORM_STRIP;
        nm->left = jbool(j, "strip_left", true);
        nm->right = jbool(j, "strip_right", true);
        return 0;
    }
    if (!strcmp(ty, "BertNormalizer")) {
        nm->kind = TOK_NORM_BERT;
        nm->clean_text = jbool(j, "clean_text", true);
        nm->chinese_chars = jbool(j, "handle_chinese_chars", true);
        nm->lowercase = jbool(j, "lowercase", true);
        json_t *sa = json_object_get(j, "strip_accents");
        nm->strip_accents = json_is_boolean(sa) ? json_is_true(sa) : -1;
        return 0;
    }
    return fail(c, "normalizer type \"%s\" is not supported", ty);
}

/* ---- pre-tokenizers --------------------------------------------------- */
int tok_pretok_bytelevel_regex(tok_pretok *pt, char *err, size_t errlen);

static int parse_behavior(lctx *c, json_t *j, tok_split_behavior *b)
{
    json_t *v = json_object_get(j, "behavior");
    if (!v) { *b = TOK_SPLIT_ISOLATED; return 0; }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (!strcmp(s, "Removed")) *b = TOK_SPLIT_REMOVED;
    else if (!strcmp(s, "Isolated")) *b = TOK_SPLIT_ISOLATED;
    else if (!strcmp(s, "MergedWithPrevious")) *b = TOK_SPLIT_MERGED_PREV;
    else if (!strcmp(s, "MergedWithNext")) *b = TOK_SPLIT_MERGED_NEXT;
    else if (!strcmp(s, "Contiguous")) *b = TOK_SPLIT_CONTIGUOUS;
    else return fail(c, "pre_tokenizer: unknown split behavior \"%s\"", s);
    return 0;
}

static int parse_metaspace_repl(lctx *c, json_t *j, char *repl, size_t *n)
{
    json_t *r = json_object_get(j, "replacement");
    const char *s = "\xE2\x96\x81"; /* U+2581 */
    size_t l = 3;
    if (json_is_string(r)) { s = json_string_value(r); l = json_string_length(r); }
    if (l == 0 || l > 4) return fail(c, "Metaspace: \"replacement\" must be one character");
    memcpy(repl, s, l);
    *n = l;
    return 0;
}

static int parse_prepend_scheme(json_t *j)
{
    json_t *ps = json_object_get(j, "prepend_scheme");
    if (json_is_string(ps)) {
        if (!strcmp(json_string_value(ps), "first")) return 1;
        if (!strcmp(json_string_value(ps), "never")) return 2;
        return 0;
    }
    return jbool(j, "add_prefix_space", true) ? 0 : 2;
}

static int parse_pretok(lctx *c, json_t *j, tok_pretok *pt, int depth)
{
    memset(pt, 0, sizeof *pt);
    const char *ty = jtype(j);
    char e[256] = "";
    if (!ty) return fail(c, "pre_tokenizer: missing \"type\"");
    if (depth > 16) return fail(c, "pre_tokenizer: nested too deeply");
    if (!strcmp(ty, "Sequence")) {
        pt->kind = TOK_PRE_SEQUENCE;
        json_t *arr = json_object_get(j, "pretokenizers");
        if (!json_is_array(arr)) return fail(c, "pre_tokenizer Sequence: \"pretokenizers\" must be an array");
        pt->children = calloc(json_array_size(arr) + 1, sizeof *pt->children);
        if (!pt->children) return fail(c, "out of memory");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            pt->n_children = i + 1;
            if (parse_pretok(c, json_array_get(arr, i), &pt->children[i], depth + 1)) return -1;
        }
        return 0;
    }
    if (!strcmp(ty, "ByteLevel")) {
        pt->kind = TOK_PRE_BYTELEVEL;
        pt->add_prefix_space = jbool(j, "add_prefix_space", true);
        pt->use_regex = jbool(j, "use_regex", true);
        if (pt->use_regex && tok_pretok_bytelevel_regex(pt, e, sizeof e)) return fail(c, "ByteLevel: %s", e);
        return 0;
    }
    if (!strcmp(ty, "Split")) {
        pt->kind = TOK_PRE_SPLIT;
        pt->invert = jbool(j, "invert", false);
        if (parse_behavior(c, j, &pt->behavior)) return -1;
        return parse_pattern(c, json_object_get(j, "pattern"), &pt->pattern, "pre_tokenizer Split");
    }
    if (!strcmp(ty, "Metaspace")) {
        pt->kind = TOK_PRE_METASPACE;
        pt->prepend_scheme = parse_prepend_scheme(j);
        pt->split = jbool(j, "split", true);
        return parse_metaspace_repl(c, j, pt->repl, &pt->repl_n);
    }
    if (!strcmp(ty, "Digits")) {
        pt->kind = TOK_PRE_DIGITS;
        pt->individual_digits = jbool(j, "individual_digits", false);
        return 0;
    }
    if (!strcmp(ty, "Punctuation")) {
        pt->kind = TOK_PRE_PUNCTUATION;
        return parse_behavior(c, j, &pt->behavior);
    }
    if (!strcmp(ty, "Whitespace")) {
        pt->kind = TOK_PRE_WHITESPACE;
        static const char re[] = "\\w+|[^\\w\\s]+";
        if (tok_regex_compile(&pt->pattern, 1, re, sizeof re - 1, e, sizeof e)) return fail(c, "Whitespace: %s", e);
        return 0;
    }
    if (!strcmp(ty, "WhitespaceSplit")) { pt->kind = TOK_PRE_WHITESPACE_SPLIT; return 0; }
    if (!strcmp(ty, "BertPreTokenizer")) { pt->kind = TOK_PRE_BERT; return 0; }
    return fail(c, "pre_tokenizer type \"%s\" is not supported", ty);
}

/* ---- decoders --------------------------------------------------------- */
static int set_str(lctx *c, char **dst, size_t *n, json_t *v, const char *def)
{
    const char *s = def;
    size_t l = def ? strlen(def) : 0;
    if (json_is_string(v)) { s = json_string_value(v); l = json_string_length(v); }
    else if (!def) return fail(c, "decoder: expected a string");
    *dst = dupn(s, l);
    *n = l;
    return *dst ? 0 : fail(c, "out of memory");
}

static int parse_decoder(lctx *c, json_t *j, tok_decoder *d, int depth)
{
    memset(d, 0, sizeof *d);
    const char *ty = jtype(j);
    if (!ty) return fail(c, "decoder: missing \"type\"");
    if (depth > 16) return fail(c, "decoder: nested too deeply");
    if (!strcmp(ty, "Sequence")) {
        d->kind = TOK_DEC_SEQUENCE;
        json_t *arr = json_object_get(j, "decoders");
        if (!json_is_array(arr)) return fail(c, "decoder Sequence: \"decoders\" must be an array");
        d->children = calloc(json_array_size(arr) + 1, sizeof *d->children);
        if (!d->children) return fail(c, "out of memory");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            d->n_children = i + 1;
            if (parse_decoder(c, json_array_get(arr, i), &d->children[i], depth + 1)) return -1;
        }
        return 0;
    }
    if (!strcmp(ty, "ByteLevel")) { d->kind = TOK_DEC_BYTELEVEL; return 0; }
    if (!strcmp(ty, "ByteFallback")) { d->kind = TOK_DEC_BYTEFALLBACK; return 0; }
    if (!strcmp(ty, "Fuse")) { d->kind = TOK_DEC_FUSE; return 0; }
    if (!strcmp(ty, "Strip")) {
        d->kind = TOK_DEC_STRIP;
        json_t *st = json_object_get(j, "start"), *sp = json_object_get(j, "stop");
        d->start = json_is_integer(st) ? (int)json_integer_value(st) : 0;
        d->stop = json_is_integer(sp) ? (int)json_integer_value(sp) : 0;
        if (d->start < 0 || d->stop < 0 || d->start > 1000000 || d->stop > 1000000)
            return fail(c, "decoder Strip: bad start/stop");
        return set_str(c, &d->str, &d->str_n, json_object_get(j, "content"), " ");
    }
    if (!strcmp(ty, "Replace")) {
        d->kind = TOK_DEC_REPLACE;
        if (set_str(c, &d->str, &d->str_n, json_object_get(j, "content"), NULL)) return -1;
        return parse_pattern(c, json_object_get(j, "pattern"), &d->pattern, "decoder Replace");
    }
    if (!strcmp(ty, "Metaspace")) {
        d->kind = TOK_DEC_METASPACE;
        char repl[8];
        size_t rn;
        if (parse_metaspace_repl(c, j, repl, &rn)) return -1;
        d->start = parse_prepend_scheme(j) != 2; /* strip the first token's leading space */
        char e[64];
        if (tok_regex_compile(&d->pattern, 0, repl, rn, e, sizeof e)) return fail(c, "out of memory");
        return 0;
    }
    if (!strcmp(ty, "WordPiece")) {
        d->kind = TOK_DEC_WORDPIECE;
        d->cleanup = jbool(j, "cleanup", true);
        return set_str(c, &d->str, &d->str_n, json_object_get(j, "prefix"), "##");
    }
    if (!strcmp(ty, "BPEDecoder")) {
        d->kind = TOK_DEC_BPE;
        return set_str(c, &d->str, &d->str_n, json_object_get(j, "suffix"), "</w>");
    }
    return fail(c, "decoder type \"%s\" is not supported", ty);
}

/* ---- model ------------------------------------------------------------ */
static int vocab_cb(void *ctx, const char *tok, size_t n, int32_t id)
{
    tok_tokenizer *t = ctx;
    if (id > 50000000) return -1;
    return tok_vocab_set(&t->vocab, id, tok, n);
}

static int parse_vocab_object(lctx *c, tok_tokenizer *t, json_t *vocab)
{
    if (c->fast) {
        if (tok_jsonscan_vocab(c->doc, c->vocab, vocab_cb, t)) { c->fast_failed = true; return -1; }
        return 0;
    }
    if (!json_is_object(vocab)) return fail(c, "model.vocab must be an object of token -> id");
    const char *key;
    size_t keylen;
    json_t *val;
    json_object_keylen_foreach(vocab, key, keylen, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) > 50000000)
            return fail(c, "model.vocab: id of \"%.40s\" must be an integer in [0, 5e7]", key);
        if (tok_vocab_set(&t->vocab, (int32_t)json_integer_value(val), key, keylen)) return fail(c, "out of memory");
    }
    return 0;
}

typedef struct merge_ctx {
    tok_tokenizer *t;
    tok_buf cat;
} merge_ctx;

/* Add merge number `index` (a, b); merges outside the vocab can never apply
 * and are skipped.  Returns -1 only when out of memory. */
static int add_merge(void *vctx, const char *a, size_t an, const char *b, size_t bn, size_t index)
{
    merge_ctx *m = vctx;
    tok_tokenizer *t = m->t;
    int32_t ia = tok_vocab_find(&t->vocab, a, an), ib = tok_vocab_find(&t->vocab, b, bn);
    if (ia < 0 || ib < 0) return 0;
    m->cat.n = 0;
    if (tok_buf_put(&m->cat, a, an) || tok_buf_put(&m->cat, b, bn)) return -1;
    int32_t im = tok_vocab_find(&t->vocab, m->cat.p, m->cat.n);
    if (im < 0) return 0;
    if (index > (size_t)TOK_PAIR_MAX_RANK) return -2;
    return tok_pairmap_put(&t->model.merges, ia, ib, (int32_t)index, im);
}

static int parse_merges(lctx *c, tok_tokenizer *t, json_t *merges)
{
    merge_ctx mc = {t, {0}};
    if (c->fast && c->merges.len) {
        int rc = tok_jsonscan_merges(c->doc, c->merges, add_merge, &mc);
        tok_buf_free(&mc.cat);
        if (rc) { c->fast_failed = true; return -1; } /* jansson path reports the reason */
        return 0;
    }
    if (!json_is_array(merges)) return fail(c, "model.merges must be an array");
    size_t n = json_array_size(merges);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t an, bn;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *sp = memchr(a, ' ', json_string_length(m));
            if (!sp) { tok_buf_free(&mc.cat); return fail(c, "model.merges[%zu]: \"%.40s\" has no space", i, a); }
            an = (size_t)(sp - a);
            b = sp + 1;
            const char *sp2 = memchr(b, ' ', json_string_length(m) - an - 1);
            bn = sp2 ? (size_t)(sp2 - b) : json_string_length(m) - an - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            an = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            bn = json_string_length(json_array_get(m, 1));
        } else {
            tok_buf_free(&mc.cat);
            return fail(c, "model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", i);
        }
        int rc = add_merge(&mc, a, an, b, bn, i);
        if (rc) {
            tok_buf_free(&mc.cat);
            return rc == -2 ? fail(c, "model.merges: over 16M merges or token ids over 1M are not supported")
                            : fail(c, "out of memory");
        }
    }
    tok_buf_free(&mc.cat);
    return 0;
}

static int32_t token_field_id(tok_tokenizer *t, json_t *v)
{
    if (json_is_string(v)) return tok_vocab_find(&t->vocab, json_string_value(v), json_string_length(v));
    return -1;
}

static int parse_model(lctx *c, tok_tokenizer *t, json_t *j)
{
    tok_model *m = &t->model;
    if (!json_is_object(j)) return fail(c, "tokenizer.json: \"model\" must be an object");
    const char *ty = jtype(j);
    json_t *vocab = json_object_get(j, "vocab");
    if (!ty) ty = json_object_get(j, "merges") ? "BPE" : json_is_array(vocab) ? "Unigram" : "WordPiece";
    m->unk_id = -1;
    for (int b = 0; b < 256; b++) { m->byte_id[b] = -1; m->bl_cp[b] = tok_bytelevel_cp((unsigned)b); }
    if (!strcmp(ty, "BPE")) {
        m->kind = TOK_MODEL_BPE;
        if (parse_vocab_object(c, t, vocab)) return -1;
        m->fuse_unk = jbool(j, "fuse_unk", false);
        m->byte_fallback = jbool(j, "byte_fallback", false);
        m->ignore_merges = jbool(j, "ignore_merges", false);
        json_t *cp = json_object_get(j, "continuing_subword_prefix"), *sx = json_object_get(j, "end_of_word_suffix");
        if (json_is_string(cp) && json_string_length(cp)) {
            m->cont_prefix = dupn(json_string_value(cp), json_string_length(cp));
            m->cont_prefix_n = json_string_length(cp);
        }
        if (json_is_string(sx) && json_string_length(sx)) {
            m->eow_suffix = dupn(json_string_value(sx), json_string_length(sx));
            m->eow_suffix_n = json_string_length(sx);
        }
        m->unk_id = token_field_id(t, json_object_get(j, "unk_token"));
        if (parse_merges(c, t, json_object_get(j, "merges"))) return -1;
        if (m->byte_fallback)
            for (int b = 0; b < 256; b++) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", b);
                m->byte_id[b] = tok_vocab_find(&t->vocab, name, 6);
            }
        return 0;
    }
    if (!strcmp(ty, "WordPiece")) {
        m->kind = TOK_MODEL_WORDPIECE;
        if (parse_vocab_object(c, t, vocab)) return -1;
        m->unk_id = token_field_id(t, json_object_get(j, "unk_token"));
        json_t *cp = json_object_get(j, "continuing_subword_prefix");
        const char *p = json_is_string(cp) ? json_string_value(cp) : "##";
        m->cont_prefix = dupn(p, strlen(p));
        m->cont_prefix_n = strlen(p);
        json_t *mx = json_object_get(j, "max_input_chars_per_word");
        m->max_chars_per_word = json_is_integer(mx) && json_integer_value(mx) > 0 ? (size_t)json_integer_value(mx) : 100;
        return 0;
    }
    if (!strcmp(ty, "Unigram")) {
        m->kind = TOK_MODEL_UNIGRAM;
        m->fuse_unk = true;
        m->byte_fallback = jbool(j, "byte_fallback", false);
        if (!json_is_array(vocab) || !json_array_size(vocab)) return fail(c, "Unigram: model.vocab must be a non-empty array");
        size_t n = json_array_size(vocab);
        m->scores = malloc(n * sizeof *m->scores);
        const char **keys = malloc(n * sizeof *keys);
        size_t *lens = malloc(n * sizeof *lens);
        if (!m->scores || !keys || !lens) { free(keys); free(lens); return fail(c, "out of memory"); }
        double min_score = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(vocab, i);
            json_t *p = json_array_get(e, 0), *s = json_array_get(e, 1);
            if (!json_is_string(p) || !json_is_number(s)) {
                free(keys); free(lens);
                return fail(c, "Unigram: model.vocab[%zu] must be [piece, score]", i);
            }
            if (tok_vocab_set(&t->vocab, (int32_t)i, json_string_value(p), json_string_length(p))) {
                free(keys); free(lens);
                return fail(c, "out of memory");
            }
            m->scores[i] = json_number_value(s);
            if (i == 0 || m->scores[i] < min_score) min_score = m->scores[i];
        }
        for (size_t i = 0; i < n; i++) {
            keys[i] = t->vocab.pool + t->vocab.ent[i].off;
            lens[i] = t->vocab.ent[i].len;
        }
        int rc = tok_trie_build(&m->utrie, keys, lens, n);
        free(keys);
        free(lens);
        if (rc) return fail(c, "out of memory");
        json_t *u = json_object_get(j, "unk_id");
        m->unk_score = min_score - 10.0;
        if (json_is_integer(u) && json_integer_value(u) >= 0 && (size_t)json_integer_value(u) < n) {
            m->unk_id = (int32_t)json_integer_value(u);
            m->scores[m->unk_id] = m->unk_score;
        }
        if (m->byte_fallback)
            for (int b = 0; b < 256; b++) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", b);
                m->byte_id[b] = tok_vocab_find(&t->vocab, name, 6);
            }
        return 0;
    }
    return fail(c, "model type \"%s\" is not supported", ty);
}

/* ---- post-processor --------------------------------------------------- */
static int ids_append(int32_t **v, size_t *n, int32_t id)
{
    int32_t *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p) return -1;
    p[(*n)++] = id;
    *v = p;
    return 0;
}

static int special_ids(lctx *c, tok_tokenizer *t, json_t *specials, json_t *name, int32_t **v, size_t *n)
{
    if (!json_is_string(name)) return fail(c, "post_processor: SpecialToken id must be a string");
    json_t *sp = json_object_get(specials, json_string_value(name));
    json_t *ids = json_object_get(sp, "ids");
    if (json_is_array(ids)) {
        for (size_t i = 0; i < json_array_size(ids); i++) {
            json_t *x = json_array_get(ids, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
                return fail(c, "post_processor: special token ids must be integers");
            if (ids_append(v, n, (int32_t)json_integer_value(x))) return fail(c, "out of memory");
        }
        return 0;
    }
    int32_t id = tok_vocab_find(&t->vocab, json_string_value(name), json_string_length(name));
    if (id < 0) return fail(c, "post_processor: special token \"%.40s\" is not in the vocabulary", json_string_value(name));
    return ids_append(v, n, id) ? fail(c, "out of memory") : 0;
}

static int parse_post(lctx *c, tok_tokenizer *t, json_t *j, int depth)
{
    tok_post *p = &t->post;
    const char *ty = jtype(j);
    if (!ty) return fail(c, "post_processor: missing \"type\"");
    if (depth > 16) return fail(c, "post_processor: nested too deeply");
    if (!strcmp(ty, "ByteLevel")) return 0;
    if (!strcmp(ty, "Sequence")) {
        json_t *arr = json_object_get(j, "processors");
        if (!json_is_array(arr)) return fail(c, "post_processor Sequence: \"processors\" must be an array");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            /* each wraps the result of the previous: pre grows at the front */
            int32_t *pre = p->pre_ids, *post = p->post_ids;
            size_t npre = p->n_pre, npost = p->n_post;
            p->pre_ids = p->post_ids = NULL;
            p->n_pre = p->n_post = 0;
            int rc = parse_post(c, t, json_array_get(arr, i), depth + 1);
            for (size_t k = 0; k < npre && !rc; k++) rc = ids_append(&p->pre_ids, &p->n_pre, pre[k]);
            int32_t *cpost = p->post_ids;
            size_t ncpost = p->n_post;
            p->post_ids = post;
            p->n_post = npost;
            for (size_t k = 0; k < ncpost && !rc; k++) rc = ids_append(&p->post_ids, &p->n_post, cpost[k]);
            free(pre);
            free(cpost);
            if (rc) return rc;
        }
        return 0;
    }
    if (!strcmp(ty, "TemplateProcessing")) {
        json_t *single = json_object_get(j, "single"), *specials = json_object_get(j, "special_tokens");
        if (!json_is_array(single)) return fail(c, "TemplateProcessing: \"single\" must be an array");
        bool after = false;
        for (size_t i = 0; i < json_array_size(single); i++) {
            json_t *it = json_array_get(single, i);
            json_t *st = json_object_get(it, "SpecialToken"), *sq = json_object_get(it, "Sequence");
            if (st) {
                if (after ? special_ids(c, t, specials, json_object_get(st, "id"), &p->post_ids, &p->n_post)
                          : special_ids(c, t, specials, json_object_get(st, "id"), &p->pre_ids, &p->n_pre))
                    return -1;
            } else if (sq) {
                after = true;
                p->has_a = true;
            } else {
                return fail(c, "TemplateProcessing: item %zu is neither SpecialToken nor Sequence", i);
            }
        }
        return 0;
    }
    if (!strcmp(ty, "BertProcessing") || !strcmp(ty, "RobertaProcessing")) {
        json_t *cls = json_object_get(j, "cls"), *sep = json_object_get(j, "sep");
        json_t *ci = json_array_get(cls, 1), *si = json_array_get(sep, 1);
        if (!json_is_integer(ci) || !json_is_integer(si)) return fail(c, "%s: cls/sep must be [token, id]", ty);
        if (ids_append(&p->pre_ids, &p->n_pre, (int32_t)json_integer_value(ci)) ||
            ids_append(&p->post_ids, &p->n_post, (int32_t)json_integer_value(si)))
            return fail(c, "out of memory");
        return 0;
    }
    return fail(c, "post_processor type \"%s\" is not supported", ty);
}

/* ---- configs ---------------------------------------------------------- */
/* A token field of tokenizer_config / special_tokens_map: "str" or {"content": "str"}. */
static json_t *token_content(json_t *v)
{
    if (json_is_string(v)) return v;
    if (json_is_object(v)) {
        json_t *c = json_object_get(v, "content");
        if (json_is_string(c)) return c;
    }
    return NULL;
}

static int32_t config_token_id(tok_tokenizer *t, json_t *cfg, json_t *smap, const char *key)
{
    json_t *v = token_content(json_object_get(cfg, key));
    if (!v) v = token_content(json_object_get(smap, key));
    if (!v) return -1;
    return tok_vocab_find(&t->vocab, json_string_value(v), json_string_length(v));
}

/* A token id from a config (integer or integral real); -1 if not one. */
static int32_t json_int(json_t *v)
{
    double d;
    if (json_is_integer(v)) d = (double)json_integer_value(v);
    else if (json_is_real(v)) d = json_real_value(v);
    else return -1;
    if (d < 0 || d > 50000000 || d != (double)(int32_t)d) return -1;
    return (int32_t)d;
}

static bool eos_has(tok_tokenizer *t, int32_t id)
{
    for (size_t i = 0; i < t->n_eos; i++)
        if (t->eos_ids[i] == id) return true;
    return false;
}

static int add_eos(tok_tokenizer *t, int32_t id)
{
    if (id < 0 || eos_has(t, id)) return 0;
    return ids_append(&t->eos_ids, &t->n_eos, id);
}

/* Config files may hold integers beyond 64 bits (model_max_length = 1e30),
 * which jansson rejects unless numbers decode as reals; ids read from them
 * go through json_int() below. */
static json_t *parse_doc(lctx *c, const char *s, size_t n, const char *name, bool ints_as_real)
{
    json_error_t je;
    json_t *j = json_loadb(s, n, JSON_ALLOW_NUL | (ints_as_real ? JSON_DECODE_INT_AS_REAL : 0), &je);
    if (!j) { fail(c, "%s: invalid JSON at line %d column %d: %s", name, je.line, je.column, je.text); return NULL; }
    if (!json_is_object(j)) { json_decref(j); fail(c, "%s: top level must be an object", name); return NULL; }
    return j;
}

static int apply_configs(lctx *c, tok_tokenizer *t, json_t *cfg, json_t *smap, json_t *gen)
{
    t->bos_id = config_token_id(t, cfg, smap, "bos_token");
    t->pad_id = config_token_id(t, cfg, smap, "pad_token");
    t->unk_id = config_token_id(t, cfg, smap, "unk_token");
    if (add_eos(t, config_token_id(t, cfg, smap, "eos_token"))) return fail(c, "out of memory");
    json_t *ge = json_object_get(gen, "eos_token_id");
    if (json_int(ge) >= 0 && add_eos(t, json_int(ge))) return fail(c, "out of memory");
    for (size_t i = 0; json_is_array(ge) && i < json_array_size(ge); i++)
        if (json_int(json_array_get(ge, i)) >= 0 && add_eos(t, json_int(json_array_get(ge, i))))
            return fail(c, "out of memory");
    json_t *gb = json_object_get(gen, "bos_token_id");
    if (t->bos_id < 0 && json_int(gb) >= 0) t->bos_id = json_int(gb);
    if (t->n_eos == 0 && t->model.kind == TOK_MODEL_BPE) { /* fall back to the post-processor's end token */
        if (t->post.n_post) add_eos(t, t->post.post_ids[t->post.n_post - 1]);
    }
    json_t *cu = json_object_get(cfg, "clean_up_tokenization_spaces");
    t->clean_up_spaces = json_is_boolean(cu) ? json_is_true(cu) : true;
    json_t *extra = json_object_get(cfg, "additional_special_tokens");
    if (!extra) extra = json_object_get(smap, "additional_special_tokens");
    for (size_t i = 0; json_is_array(extra) && i < json_array_size(extra); i++) {
        json_t *v = token_content(json_array_get(extra, i));
        if (!v) continue;
        int32_t id = tok_vocab_find(&t->vocab, json_string_value(v), json_string_length(v));
        if (id >= 0) t->is_special[id] = 1;
    }
    /* Python transformers' Llama/Gemma fast tokenizers rebuild the template
     * from add_bos_token / add_eos_token (update_post_processor). */
    json_t *cls = json_object_get(cfg, "tokenizer_class");
    static const char *rebuild[] = {"LlamaTokenizer", "LlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast",
                                    "CodeLlamaTokenizer", "CodeLlamaTokenizerFast"};
    bool match = false;
    for (size_t i = 0; json_is_string(cls) && i < sizeof rebuild / sizeof rebuild[0]; i++)
        if (!strcmp(json_string_value(cls), rebuild[i])) match = true;
    if (match) {
        bool ab = jbool(cfg, "add_bos_token", true), ae = jbool(cfg, "add_eos_token", false);
        int32_t eos = config_token_id(t, cfg, smap, "eos_token");
        free(t->post.pre_ids);
        free(t->post.post_ids);
        t->post.pre_ids = t->post.post_ids = NULL;
        t->post.n_pre = t->post.n_post = 0;
        if (ab && t->bos_id >= 0 && ids_append(&t->post.pre_ids, &t->post.n_pre, t->bos_id)) return fail(c, "out of memory");
        if (ae && eos >= 0 && ids_append(&t->post.post_ids, &t->post.n_post, eos)) return fail(c, "out of memory");
    }
    return 0;
}

/* ---- added tokens ----------------------------------------------------- */
static int parse_added(lctx *c, tok_tokenizer *t, json_t *arr)
{
    if (!arr || json_is_null(arr)) return 0;
    if (!json_is_array(arr)) return fail(c, "tokenizer.json: \"added_tokens\" must be an array");
    size_t n = json_array_size(arr);
    t->added = calloc(n + 1, sizeof *t->added);
    if (!t->added) return fail(c, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(arr, i);
        json_t *id = json_object_get(a, "id"), *ct = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > 50000000 || !json_is_string(ct))
            return fail(c, "added_tokens[%zu]: needs an integer \"id\" and a string \"content\"", i);
        tok_added *ad = &t->added[t->n_added++];
        ad->id = (int32_t)json_integer_value(id);
        ad->content_n = json_string_length(ct);
        ad->content = dupn(json_string_value(ct), ad->content_n);
        if (!ad->content) return fail(c, "out of memory");
        ad->special = jbool(a, "special", false);
        ad->lstrip = jbool(a, "lstrip", false);
        ad->rstrip = jbool(a, "rstrip", false);
        ad->single_word = jbool(a, "single_word", false);
        ad->normalized = jbool(a, "normalized", !ad->special);
        if (tok_vocab_set(&t->vocab, ad->id, ad->content, ad->content_n)) return fail(c, "out of memory");
    }
    return 0;
}

static int build_added(lctx *c, tok_tokenizer *t)
{
    size_t n = t->n_added;
    const char **raw = calloc(n + 1, sizeof *raw), **nrm = calloc(n + 1, sizeof *nrm);
    size_t *rawn = calloc(n + 1, sizeof *rawn), *nrmn = calloc(n + 1, sizeof *nrmn);
    t->norm_content = calloc(n + 1, sizeof *t->norm_content);
    t->norm_content_n = calloc(n + 1, sizeof *t->norm_content_n);
    int rc = -1;
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    if (!raw || !nrm || !rawn || !nrmn || !t->norm_content || !t->norm_content_n || !md) { fail(c, "out of memory"); goto done; }
    for (size_t i = 0; i < n; i++) {
        tok_added *ad = &t->added[i];
        if (ad->normalized && t->normalizer) {
            tok_buf b = {0};
            if (tok_normalize(t->normalizer, ad->content, ad->content_n, &b, md)) { tok_buf_free(&b); fail(c, "added token normalization failed"); goto done; }
            t->norm_content[i] = b.p ? b.p : dupn("", 0);
            t->norm_content_n[i] = b.n;
            nrm[i] = t->norm_content[i];
            nrmn[i] = b.n;
            t->any_norm = t->any_norm || b.n > 0;
        } else {
            raw[i] = ad->content;
            rawn[i] = ad->content_n;
            t->any_raw = t->any_raw || ad->content_n > 0;
        }
        if (!raw[i]) raw[i] = ""; /* empty keys are left out of the tries */
        if (!nrm[i]) nrm[i] = "";
    }
    if (tok_trie_build(&t->trie_raw, raw, rawn, n) || tok_trie_build(&t->trie_norm, nrm, nrmn, n)) {
        fail(c, "out of memory");
        goto done;
    }
    rc = 0;
done:
    pcre2_match_data_free(md);
    free(raw);
    free(nrm);
    free(rawn);
    free(nrmn);
    return rc;
}

static size_t estimate_memory(const tok_tokenizer *t)
{
    size_t m = sizeof *t;
    m += t->vocab.pool_cap + t->vocab.ent_cap * 8 + t->vocab.slot_cap * 8;
    m += t->model.merges.cap * sizeof(uint64_t) + t->model.merges.rank_cap * sizeof(int32_t);
    m += t->trie_raw.n_nodes * sizeof(tok_trie_node) + t->trie_raw.n_edges * sizeof(tok_trie_edge);
    m += t->trie_norm.n_nodes * sizeof(tok_trie_node) + t->trie_norm.n_edges * sizeof(tok_trie_edge);
    m += t->model.utrie.n_nodes * sizeof(tok_trie_node) + t->model.utrie.n_edges * sizeof(tok_trie_edge);
    if (t->model.scores) m += t->vocab.n * sizeof(double);
    m += t->vocab.n * 2;
    for (size_t i = 0; i < t->n_added; i++) m += sizeof(tok_added) + t->added[i].content_n + 1 + t->norm_content_n[i];
    return m;
}

static tok_tokenizer *load_json(const char *tokenizer_json, size_t len, const char *config_json,
                                const char *special_map_json, const char *gen_config_json, const tok_load_opts *opts,
                                char *err, size_t errlen, bool allow_fast, bool *fast_failed)
{
    lctx c = {err, errlen, .doc = tokenizer_json};
    if (err && errlen) err[0] = 0;
    json_t *tj = NULL, *cfg = NULL, *smap = NULL, *gen = NULL;
    char *reduced = NULL;
    tok_tokenizer *t = calloc(1, sizeof *t);
    if (!t) { fail(&c, "out of memory"); return NULL; }
    t->bos_id = t->pad_id = t->unk_id = -1;
    t->mode = opts ? opts->mode : TOK_MODE_AUTO;
    t->model.unk_id = -1;
    if (allow_fast && tok_jsonscan_find(tokenizer_json, len, &c.vocab, &c.merges) == 0) {
        /* jansson parses the document with the two big spans emptied */
        tok_span sp[2] = {c.vocab, c.merges};
        const char *rep[2] = {"{}", "[]"};
        int order[2] = {0, 1}, ns = c.merges.len ? 2 : 1;
        if (ns == 2 && c.merges.off < c.vocab.off) { order[0] = 1; order[1] = 0; }
        reduced = malloc(len + 8);
        if (!reduced) { fail(&c, "out of memory"); goto fail; }
        size_t r = 0, from = 0;
        for (int k = 0; k < ns; k++) {
            tok_span s = sp[order[k]];
            memcpy(reduced + r, tokenizer_json + from, s.off - from);
            r += s.off - from;
            memcpy(reduced + r, rep[order[k]], 2);
            r += 2;
            from = s.off + s.len;
        }
        memcpy(reduced + r, tokenizer_json + from, len - from);
        r += len - from;
        c.fast = true;
        if (!(tj = parse_doc(&c, reduced, r, "tokenizer.json", false))) goto fail;
    } else if (!(tj = parse_doc(&c, tokenizer_json, len, "tokenizer.json", false))) {
        goto fail;
    }
    if (config_json && !(cfg = parse_doc(&c, config_json, strlen(config_json), "tokenizer_config.json", true))) goto fail;
    if (special_map_json && !(smap = parse_doc(&c, special_map_json, strlen(special_map_json), "special_tokens_map.json", true))) goto fail;
    if (gen_config_json && !(gen = parse_doc(&c, gen_config_json, strlen(gen_config_json), "generation_config.json", true))) goto fail;

    json_t *nj = json_object_get(tj, "normalizer");
    if (nj && !json_is_null(nj)) {
        t->normalizer = calloc(1, sizeof *t->normalizer);
        if (!t->normalizer || parse_normalizer(&c, nj, t->normalizer, 0)) { fail(&c, "out of memory"); goto fail; }
    }
    json_t *pj = json_object_get(tj, "pre_tokenizer");
    if (pj && !json_is_null(pj)) {
        t->pretok = calloc(1, sizeof *t->pretok);
        if (!t->pretok || parse_pretok(&c, pj, t->pretok, 0)) { fail(&c, "out of memory"); goto fail; }
    }
    if (parse_model(&c, t, json_object_get(tj, "model"))) goto fail;
    if (t->model.kind == TOK_MODEL_BPE && tok_pretok_is_bytelevel(t->pretok)) {
        t->model.byte_level = true;
        for (int b = 0; b < 256; b++) {
            char u[4];
            int l = tok_utf8_encode(t->model.bl_cp[b], u);
            t->model.byte_id[b] = tok_vocab_find(&t->vocab, u, (size_t)l);
        }
    }
    if (parse_added(&c, t, json_object_get(tj, "added_tokens"))) goto fail;
    json_t *postj = json_object_get(tj, "post_processor");
    if (postj && !json_is_null(postj) && parse_post(&c, t, postj, 0)) goto fail;
    json_t *dj = json_object_get(tj, "decoder");
    if (dj && !json_is_null(dj)) {
        t->decoder = calloc(1, sizeof *t->decoder);
        if (!t->decoder || parse_decoder(&c, dj, t->decoder, 0)) { fail(&c, "out of memory"); goto fail; }
    }
    if (!t->vocab.n) { fail(&c, "tokenizer.json: empty vocabulary"); goto fail; }
    t->is_special = calloc(t->vocab.n, 1);
    t->is_added = calloc(t->vocab.n, 1);
    if (!t->is_special || !t->is_added) { fail(&c, "out of memory"); goto fail; }
    for (size_t i = 0; i < t->n_added; i++) {
        t->is_added[t->added[i].id] = 1;
        if (t->added[i].special) t->is_special[t->added[i].id] = 1;
    }
    if (build_added(&c, t)) goto fail;
    if (apply_configs(&c, t, cfg, smap, gen)) goto fail;
    t->mem_bytes = estimate_memory(t);
    static _Atomic uint64_t next_serial = 1;
    t->serial = next_serial++;
    json_decref(tj);
    json_decref(cfg);
    json_decref(smap);
    json_decref(gen);
    free(reduced);
    return t;
fail:
    *fast_failed = c.fast_failed;
    json_decref(tj);
    json_decref(cfg);
    json_decref(smap);
    json_decref(gen);
    free(reduced);
    tok_destroy(t);
    return NULL;
}

tok_tokenizer *tok_load_json(const char *tokenizer_json, size_t len, const char *config_json,
                             const char *special_map_json, const char *gen_config_json, const tok_load_opts *opts,
                             char *err, size_t errlen)
{
    bool fast_failed = false;
    bool allow_fast = !(opts && opts->no_fast_json);
    tok_tokenizer *t = load_json(tokenizer_json, len, config_json, special_map_json, gen_config_json, opts, err,
                                 errlen, allow_fast, &fast_failed);
    if (!t && fast_failed) /* the scanner refused a span: let jansson judge the whole file */
        t = load_json(tokenizer_json, len, config_json, special_map_json, gen_config_json, opts, err, errlen, false,
                      &fast_failed);
    return t;
}


tok_tokenizer *tok_load_dir(const char *dir, const tok_load_opts *opts, char *err, size_t errlen)
{
    char path[4096];
    size_t n = 0, dummy;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    char *tj = fileio_read(path, 0, &n);
    if (!tj) {
        if (err) snprintf(err, errlen, "cannot read %s: %s (sglc needs a Hugging Face tokenizer.json)", path, strerror(errno));
        return NULL;
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *cfg = fileio_read(path, 0, &dummy);
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    char *smap = fileio_read(path, 0, &dummy);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    char *gen = fileio_read(path, 0, &dummy);
    tok_tokenizer *t = tok_load_json(tj, n, cfg, smap, gen, opts, err, errlen);
    if (!t && err && errlen) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, errlen, "%s: %s", dir, tmp);
    }
    free(tj);
    free(cfg);
    free(smap);
    free(gen);
    return t;
}

void tok_destroy(tok_tokenizer *t)
{
    if (!t) return;
    tok_vocab_free(&t->vocab);
    tok_model_free(&t->model);
    tok_normalizer_free(t->normalizer);
    free(t->normalizer);
    tok_pretok_free(t->pretok);
    free(t->pretok);
    tok_post_free(&t->post);
    tok_decoder_free(t->decoder);
    free(t->decoder);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        if (t->norm_content) free(t->norm_content[i]);
    }
    free(t->added);
    free(t->norm_content);
    free(t->norm_content_n);
    tok_trie_free(&t->trie_raw);
    tok_trie_free(&t->trie_norm);
    free(t->is_special);
    free(t->is_added);
    free(t->eos_ids);
    free(t);
}
