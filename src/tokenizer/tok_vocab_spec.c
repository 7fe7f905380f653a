/* tok_vocab_spec — tokenizer.json from a GGUF-style vocabulary, then
 * tok_load_json.
 *
 * DESIGN: rather than a second construction path for the internal tables,
 * the spec is rewritten as the tokenizer.json the Hugging Face model ships
 * (what llama.cpp's converter read to make the GGUF file), so that every
 * component and every check is the one tok_load.c already has and the
 * Hugging Face exactness tests cover:
 *
 *   spec.tokens ──sanitize, first id wins──> model.vocab
 *   spec.merges (gpt2) | merges derived from scores (llama) ──> model.merges
 *   token types 2/3/4 ──> added_tokens (special for 2/3)
 *   pre name ──> normalizer + pre_tokenizer (table below)
 *   "llama" ──> Prepend/Replace "▁" normalizer, byte fallback, Replace/
 *               ByteFallback/Fuse/Strip decoder (Llama 2's tokenizer.json)
 *
 * After tok_load_json the special ids, the BOS/EOS template and the
 * cleanup flag are set on the tokenizer directly (they are ids in the spec,
 * not strings, and two tokens may share a string).  Ids whose string
 * repeats an earlier token's are left out of the JSON (a JSON object cannot
 * hold a key twice) and put into the vocabulary afterwards, so they decode
 * while the lookup keeps the first id, as llama.cpp's does.
 *
 * The document for a 262k-token vocabulary is ~10 MB and lives only during
 * the call.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_vocab_spec.h"
#include "util/log.h"

#define SPEC_MAX_TOKENS 16000000u   /* the merge table holds ids < 2^20; the vocab far more */

__attribute__((format(printf, 3, 4))) static int spec_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen && !err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- pre-tokenizers by name -------------------------------------------
 * Each family is the normalizer + pre_tokenizer of the Hugging Face
 * tokenizer.json that llama.cpp's converter recognised under those names
 * (convert_hf_to_gguf.py hashes the tokenizer to pick the name).  Regexes
 * are the tokenizer.json ones, not llama.cpp's rewrites for its own
 * regex engine. */
#define RX_LLAMA3 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN35 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_O200K_WORDS "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
#define RX_O200K_WORDS2 "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
#define RX_CONTR "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
#define RX_GPT4O RX_O200K_WORDS RX_CONTR "|" RX_O200K_WORDS2 RX_CONTR "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_TEKKEN RX_O200K_WORDS "|" RX_O200K_WORDS2 "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_DSV3_DIGITS "\\p{N}{1,3}"
/* [一-龥぀-ゟ゠-ヿ]+ */
#define RX_DSV3_CJK "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+"
#define RX_DSV3_MAIN "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

typedef enum pre_shape {
    PRE_SPLITS,          /* Split(regex) ... then ByteLevel(use_regex false) */
    PRE_BYTELEVEL,       /* ByteLevel(use_regex true): GPT-2's regex */
    PRE_DIGITS_BYTELEVEL /* Digits(individual) then ByteLevel(use_regex true): StarCoder */
} pre_shape;

typedef struct pre_family {
    const char *names[8];  /* NULL-terminated */
    pre_shape shape;
    const char *regex[4];  /* PRE_SPLITS: Split patterns in order, NULL-terminated */
    int nfc;               /* NFC normalizer (Qwen2's tokenizer.json) */
    int ignore_merges;     /* model.ignore_merges (Llama 3, Tekken) */
    int clean_spaces;      /* clean_up_tokenization_spaces (llama.cpp's clean_spaces) */
    int add_bos;           /* default add_bos when the spec does not say */
} pre_family;

static const pre_family PRE_FAMILIES[] = {
    {{"llama3", "llama-v3", "llama-bpe", NULL}, PRE_SPLITS, {RX_LLAMA3, NULL}, 0, 1, 1, 1},
    {{"smaug-bpe", "dbrx", NULL}, PRE_SPLITS, {RX_LLAMA3, NULL}, 0, 0, 1, 0}, /* cl100k's regex, as Llama 3's */
    {{"qwen2", "deepseek-r1-qwen", NULL}, PRE_SPLITS, {RX_QWEN2, NULL}, 1, 0, 0, 0},
    {{"qwen35", NULL}, PRE_SPLITS, {RX_QWEN35, NULL}, 1, 0, 0, 0},
    {{"deepseek-v3", NULL}, PRE_SPLITS, {RX_DSV3_DIGITS, RX_DSV3_CJK, RX_DSV3_MAIN, NULL}, 0, 0, 0, 0},
    {{"gpt-4o", "llama4", NULL}, PRE_SPLITS, {RX_GPT4O, NULL}, 0, 0, 0, 0},
    {{"tekken", NULL}, PRE_SPLITS, {RX_TEKKEN, NULL}, 0, 1, 0, 1},
    {{"default", "gpt-2", "phi-2", NULL}, PRE_BYTELEVEL, {NULL}, 0, 0, 1, 0},
    {{"starcoder", "refact", NULL}, PRE_DIGITS_BYTELEVEL, {NULL}, 0, 0, 1, 0},
    {{"smollm", NULL}, PRE_DIGITS_BYTELEVEL, {NULL}, 0, 0, 0, 0},
};

static const pre_family *find_pre(const char *pre)
{
    if (!pre || !pre[0]) pre = "default";
    for (size_t f = 0; f < sizeof PRE_FAMILIES / sizeof PRE_FAMILIES[0]; f++)
        for (size_t k = 0; PRE_FAMILIES[f].names[k]; k++)
            if (!strcmp(PRE_FAMILIES[f].names[k], pre)) return &PRE_FAMILIES[f];
    return NULL;
}

int tok_vocab_spec_pre_supported(const char *pre) { return find_pre(pre) != NULL; }

static void pre_names(char *out, size_t n)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t f = 0; f < sizeof PRE_FAMILIES / sizeof PRE_FAMILIES[0]; f++)
        for (size_t k = 0; PRE_FAMILIES[f].names[k] && o + 1 < n; k++) {
            int w = snprintf(out + o, n - o, "%s%s", o ? ", " : "", PRE_FAMILIES[f].names[k]);
            if (w < 0) break;
            o += (size_t)w < n - o ? (size_t)w : n - o - 1;
        }
}

/* ---- JSON text -------------------------------------------------------- */
/* Append s[0..n) (valid UTF-8) as a JSON string. */
static int jw_str(tok_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (tok_buf_putc(b, '"')) return -1;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (tok_buf_put(b, s + run, i - run)) return -1;
        char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (c == '"' || c == '\\') { e[1] = (char)c; if (tok_buf_put(b, e, 2)) return -1; }
        else if (tok_buf_put(b, e, 6)) return -1;
        run = i + 1;
    }
    if (tok_buf_put(b, s + run, n - run)) return -1;
    return tok_buf_putc(b, '"');
}

static int jw_lit(tok_buf *b, const char *s) { return tok_buf_put(b, s, strlen(s)); }

static int jw_fmt(tok_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jw_fmt(tok_buf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof tmp) return -1;
    return tok_buf_put(b, tmp, (size_t)w);
}

/* ---- the spec, checked and normalised --------------------------------- */
typedef struct spec_tokens {
    tok_buf pool;          /* sanitized token strings, back to back */
    size_t *off, *len;     /* (n) span of token i in pool */
    int32_t *type;         /* (n) token type, unknown values -> NORMAL */
    int32_t *first;        /* (n) first id with the same string (== i when i is the first) */
    tok_vocab lookup;      /* string -> first id */
    size_t n;
} spec_tokens;

static void spec_tokens_free(spec_tokens *st)
{
    tok_buf_free(&st->pool);
    free(st->off);
    free(st->len);
    free(st->type);
    free(st->first);
    tok_vocab_free(&st->lookup);
    memset(st, 0, sizeof *st);
}

static const char *tok_str(const spec_tokens *st, size_t i, size_t *n)
{
    *n = st->len[i];
    return st->pool.p ? st->pool.p + st->off[i] : ""; /* every token empty: no pool */
}

/* Copy and check the token arrays: strings sanitized to UTF-8 (U+FFFD for
 * bad bytes, as a Hugging Face vocabulary can only hold text), types
 * clamped, duplicates resolved to their first id.  For SentencePiece the
 * converter wrote user-defined pieces with " " for "▁" ("pre-normalized");
 * the piece is "▁" again here, as in the model's vocabulary, so that merges
 * reach it and a raw space never matches it as an added token (Hugging
 * Face's added token holds "▁" and is not normalized). */
static int spec_tokens_init(spec_tokens *st, const tok_vocab_spec *s, char *err, size_t errlen)
{
    bool spm = s->model && !strcmp(s->model, "llama");
    memset(st, 0, sizeof *st);
    if (!s->n_tokens) return spec_fail(err, errlen, "GGUF vocabulary: no tokens");
    if (s->n_tokens > SPEC_MAX_TOKENS)
        return spec_fail(err, errlen, "GGUF vocabulary: %zu tokens is over the limit of %u", s->n_tokens, SPEC_MAX_TOKENS);
    if (!s->tokens) return spec_fail(err, errlen, "GGUF vocabulary: token strings missing");
    size_t n = s->n_tokens;
    st->n = n;
    st->off = malloc(n * sizeof *st->off);
    st->len = malloc(n * sizeof *st->len);
    st->type = malloc(n * sizeof *st->type);
    st->first = malloc(n * sizeof *st->first);
    if (!st->off || !st->len || !st->type || !st->first || tok_vocab_reserve(&st->lookup, n, 0))
        return spec_fail(err, errlen, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *p = s->tokens[i];
        size_t l = s->token_lens ? s->token_lens[i] : (p ? strlen(p) : 0);
        if (!p && l) return spec_fail(err, errlen, "GGUF vocabulary: token %zu is NULL", i);
        if (l > 65536) return spec_fail(err, errlen, "GGUF vocabulary: token %zu is %zu bytes long", i, l);
        int32_t ty = s->token_types ? s->token_types[i] : TOK_TYPE_NORMAL;
        st->type[i] = ty >= TOK_TYPE_NORMAL && ty <= TOK_TYPE_BYTE ? ty : TOK_TYPE_NORMAL;
        st->off[i] = st->pool.n;
        if (spm && st->type[i] == TOK_TYPE_USER_DEFINED && l && memchr(p, ' ', l)) {
            for (size_t k = 0, run = 0; k <= l; k++) {
                if (k < l && p[k] != ' ') continue;
                if (tok_utf8_sanitize(&st->pool, p + run, k - run) || (k < l && tok_buf_put(&st->pool, "\xE2\x96\x81", 3)))
                    return spec_fail(err, errlen, "out of memory");
                run = k + 1;
            }
        } else if (l && tok_utf8_sanitize(&st->pool, p, l)) {
            return spec_fail(err, errlen, "out of memory");
        }
        st->len[i] = st->pool.n - st->off[i];
        if (st->pool.n > UINT32_MAX / 2) return spec_fail(err, errlen, "GGUF vocabulary: token strings too large");
    }
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *p = tok_str(st, i, &l);
        int32_t f = tok_vocab_find(&st->lookup, p, l);
        if (f < 0) {
            if (tok_vocab_set(&st->lookup, (int32_t)i, p, l)) return spec_fail(err, errlen, "out of memory");
            f = (int32_t)i;
        }
        st->first[i] = f;
    }
    return 0;
}

static int32_t spec_id(const tok_vocab_spec *s, int32_t id, const char *what)
{
    if (id < 0) return -1;
    if ((size_t)id >= s->n_tokens) {
        log_warn("GGUF vocabulary: %s %d is out of range (%zu tokens); ignored", what, id, s->n_tokens);
        return -1;
    }
    return id;
}

/* ---- merges from scores ----------------------------------------------- */
typedef struct dmerge {
    int user;              /* 1: the piece is user-defined */
    uint32_t lchars, rchars; /* characters in the two parts (user-defined pieces only) */
    float score;
    int32_t piece, left, right;
} dmerge;

/* Hugging Face's converter sorts by (score, len(left), len(right)),
 * highest first; user-defined pieces all have the same score there, so
 * the lengths order them (the longest runs of "\n", "▁", "\t" first).
 * Normal pieces have distinct scores; within a piece the parts' ids order
 * the splits, as the tokenizer.json files of Llama 2 and Mistral have it. */
static int dmerge_cmp(const void *pa, const void *pb)
{
    const dmerge *a = pa, *b = pb;
    if (a->user != b->user) return a->user ? -1 : 1;
    if (a->user && a->lchars != b->lchars) return a->lchars > b->lchars ? -1 : 1;
    if (a->user && a->rchars != b->rchars) return a->rchars > b->rchars ? -1 : 1;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->piece != b->piece) return a->piece < b->piece ? -1 : 1;
    if (a->left != b->left) return a->left < b->left ? -1 : 1;
    return (a->right > b->right) - (a->right < b->right);
}

static uint32_t utf8_chars(const char *s, size_t n)
{
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static bool merge_eligible(const spec_tokens *st, int32_t id)
{
    return st->first[id] == id && (st->type[id] == TOK_TYPE_NORMAL || st->type[id] == TOK_TYPE_USER_DEFINED);
}

static int derive_merges(const spec_tokens *st, const tok_vocab_spec *s, dmerge **out, size_t *n_out, char *err,
                         size_t errlen)
{
    size_t n = 0, cap = 0;
    dmerge *v = NULL;
    for (size_t i = 0; i < st->n; i++) {
        if (!merge_eligible(st, (int32_t)i)) continue;
        size_t l;
        const char *p = tok_str(st, i, &l);
        float score = s->scores ? s->scores[i] : -(float)i;
        if (isnan(score)) score = -INFINITY;
        for (size_t k = 1; k < l; k++) {
            if (((unsigned char)p[k] & 0xC0) == 0x80) continue; /* not a character boundary */
            int32_t a = tok_vocab_find(&st->lookup, p, k);
            if (a < 0 || !merge_eligible(st, a)) continue;
            int32_t b = tok_vocab_find(&st->lookup, p + k, l - k);
            if (b < 0 || !merge_eligible(st, b)) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 4096;
                dmerge *nv = realloc(v, cap * sizeof *nv);
                if (!nv) { free(v); return spec_fail(err, errlen, "out of memory"); }
                v = nv;
            }
            bool user = st->type[i] == TOK_TYPE_USER_DEFINED;
            v[n++] = (dmerge){user, user ? utf8_chars(p, k) : 0, user ? utf8_chars(p + k, l - k) : 0, score,
                              (int32_t)i, a, b};
        }
    }
    if (n) qsort(v, n, sizeof *v, dmerge_cmp);
    *out = v;
    *n_out = n;
    return 0;
}

int tok_vocab_spec_derive_merges(const tok_vocab_spec *s, int32_t **pairs, size_t *n, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    *pairs = NULL;
    *n = 0;
    if (!s) return spec_fail(err, errlen, "no vocabulary spec");
    spec_tokens st;
    dmerge *v = NULL;
    size_t nm = 0;
    int rc = spec_tokens_init(&st, s, err, errlen);
    if (!rc) rc = derive_merges(&st, s, &v, &nm, err, errlen);
    if (!rc && nm) {
        *pairs = malloc(2 * nm * sizeof **pairs);
        if (!*pairs) rc = spec_fail(err, errlen, "out of memory");
        for (size_t i = 0; !rc && i < nm; i++) {
            (*pairs)[2 * i] = v[i].left;
            (*pairs)[2 * i + 1] = v[i].right;
        }
        if (!rc) *n = nm;
    }
    free(v);
    spec_tokens_free(&st);
    return rc;
}

/* ---- the document ----------------------------------------------------- */
static int write_pretok(tok_buf *b, const pre_family *f)
{
    int rc = jw_lit(b, "\"pre_tokenizer\":");
    if (f->shape == PRE_BYTELEVEL)
        return rc | jw_lit(b, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}");
    rc |= jw_lit(b, "{\"type\":\"Sequence\",\"pretokenizers\":[");
    if (f->shape == PRE_DIGITS_BYTELEVEL) {
        rc |= jw_lit(b, "{\"type\":\"Digits\",\"individual_digits\":true},"
                        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}]}");
        return rc;
    }
    for (size_t k = 0; f->regex[k]; k++) {
        rc |= jw_lit(b, "{\"type\":\"Split\",\"pattern\":{\"Regex\":");
        rc |= jw_str(b, f->regex[k], strlen(f->regex[k]));
        rc |= jw_lit(b, "},\"behavior\":\"Isolated\",\"invert\":false},");
    }
    rc |= jw_lit(b, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}");
    return rc;
}

static int write_vocab(tok_buf *b, const spec_tokens *st)
{
    int rc = jw_lit(b, "\"vocab\":{");
    bool any = false;
    for (size_t i = 0; i < st->n && !rc; i++) {
        if (st->first[i] != (int32_t)i) continue;
        size_t l;
        const char *p = tok_str(st, i, &l);
        if (any) rc |= tok_buf_putc(b, ',');
        rc |= jw_str(b, p, l);
        rc |= jw_fmt(b, ":%zu", i);
        any = true;
    }
    return rc | tok_buf_putc(b, '}');
}

/* gpt2 merges: the spec's "a b" strings as they are (tok_load splits them);
 * an entry that is NULL is an error. */
static int write_given_merges(tok_buf *b, const tok_vocab_spec *s, char *err, size_t errlen)
{
    int rc = jw_lit(b, "\"merges\":[");
    tok_buf tmp = {0};
    for (size_t i = 0; i < s->n_merges && !rc; i++) {
        const char *m = s->merges[i];
        size_t l = s->merge_lens ? s->merge_lens[i] : (m ? strlen(m) : 0);
        if (!m) { tok_buf_free(&tmp); return spec_fail(err, errlen, "GGUF vocabulary: merge %zu is NULL", i); }
        tmp.n = 0;
        if (tok_utf8_sanitize(&tmp, m, l)) rc = -1;
        if (!memchr(tmp.p ? tmp.p : "", ' ', tmp.n)) { /* tok_load would reject the file: say which merge */
            tok_buf_free(&tmp);
            return spec_fail(err, errlen, "GGUF vocabulary: merge %zu (\"%.40s\") has no space", i, m);
        }
        if (i) rc |= tok_buf_putc(b, ',');
        rc |= jw_str(b, tmp.p, tmp.n);
    }
    tok_buf_free(&tmp);
    if (rc) return spec_fail(err, errlen, "out of memory");
    return tok_buf_putc(b, ']') ? spec_fail(err, errlen, "out of memory") : 0;
}

/* Control/unknown -> special added token; user-defined -> added token
 * (neither normalized: their text is matched in the raw input). */
static int write_added(tok_buf *b, const spec_tokens *st, bool spm)
{
    int rc = jw_lit(b, "\"added_tokens\":[");
    bool any = false;
    for (size_t i = 0; i < st->n && !rc; i++) {
        int32_t ty = st->type[i];
        if (ty != TOK_TYPE_CONTROL && ty != TOK_TYPE_USER_DEFINED && !(spm && ty == TOK_TYPE_UNKNOWN)) continue;
        size_t l;
        const char *p = tok_str(st, i, &l);
        if (!l) continue;
        if (any) rc |= tok_buf_putc(b, ',');
        rc |= jw_fmt(b, "{\"id\":%zu,\"content\":", i);
        rc |= jw_str(b, p, l);
        rc |= jw_fmt(b, ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":%s}",
                     ty == TOK_TYPE_USER_DEFINED ? "false" : "true");
        any = true;
    }
    return rc | tok_buf_putc(b, ']');
}

static int build_doc(tok_buf *b, const tok_vocab_spec *s, const spec_tokens *st, bool spm, const pre_family *f,
                     int add_space_prefix, char *err, size_t errlen)
{
    int rc = jw_lit(b, "{\"version\":\"1.0\",");
    rc |= write_added(b, st, spm);
    rc |= tok_buf_putc(b, ',');
    if (spm) {
        rc |= jw_lit(b, add_space_prefix
                            ? "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xE2\x96\x81\"},"
                              "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"}]},"
                            : "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"},");
        rc |= jw_lit(b, "\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                        "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xE2\x96\x81\"},\"content\":\" \"},"
                        "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}");
        if (add_space_prefix) rc |= jw_lit(b, ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}");
        rc |= jw_lit(b, "]},\"model\":{\"type\":\"BPE\",\"fuse_unk\":true,\"byte_fallback\":true,");
    } else {
        rc |= jw_lit(b, f->nfc ? "\"normalizer\":{\"type\":\"NFC\"}," : "\"normalizer\":null,");
        rc |= write_pretok(b, f);
        rc |= jw_lit(b, ",\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                        "\"trim_offsets\":true,\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"byte_fallback\":false,");
        rc |= jw_lit(b, f->ignore_merges ? "\"ignore_merges\":true," : "\"ignore_merges\":false,");
    }
    rc |= write_vocab(b, st);
    rc |= tok_buf_putc(b, ',');
    if (rc) return spec_fail(err, errlen, "out of memory");
    if (s->n_merges && s->merges) rc = write_given_merges(b, s, err, errlen);
    else rc = jw_lit(b, "\"merges\":[]") ? spec_fail(err, errlen, "out of memory") : 0; /* derived ones: put_derived */
    if (rc) return -1;
    return jw_lit(b, "}}") ? spec_fail(err, errlen, "out of memory") : 0;
}

/* ---- after tok_load_json ---------------------------------------------- */
/* Derived merges go straight into the merge table: their parts and pieces
 * are ids already (every one the first of its string, so the loader's ids),
 * and 500k merges through JSON text cost seconds of string lookups. */
static int put_derived(tok_tokenizer *t, const dmerge *v, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        if (i > (size_t)TOK_PAIR_MAX_RANK)
            return spec_fail(err, errlen, "GGUF vocabulary: over 16M merges are not supported");
        int rc = tok_pairmap_put(&t->model.merges, v[i].left, v[i].right, (int32_t)i, v[i].piece);
        if (rc == -2) return spec_fail(err, errlen, "GGUF vocabulary: token ids over 1M cannot be merged");
        if (rc) return spec_fail(err, errlen, "out of memory");
    }
    t->mem_bytes += t->model.merges.cap * sizeof(uint64_t) + t->model.merges.rank_cap * sizeof(int32_t);
    return 0;
}

static int grow_flags(tok_tokenizer *t, size_t old_n)
{
    if (t->vocab.n <= old_n) return 0;
    uint8_t *sp = realloc(t->is_special, t->vocab.n), *ad = realloc(t->is_added, t->vocab.n);
    if (sp) t->is_special = sp;
    if (ad) t->is_added = ad;
    if (!sp || !ad) return -1;
    memset(t->is_special + old_n, 0, t->vocab.n - old_n);
    memset(t->is_added + old_n, 0, t->vocab.n - old_n);
    return 0;
}

/* Ids left out of the JSON (their string repeats an earlier id's) get their
 * entry; the lookup goes back to the first id, as llama.cpp's text_to_token
 * keeps the first. */
static int add_duplicates(tok_tokenizer *t, const spec_tokens *st)
{
    size_t old_n = t->vocab.n;
    for (size_t i = 0; i < st->n; i++) {
        int32_t first = st->first[i];
        if (first == (int32_t)i) continue;
        if (i < t->vocab.n && t->vocab.ent[i].off != UINT32_MAX) continue; /* an added token took the id */
        size_t l;
        const char *p = tok_str(st, i, &l); /* points into st's pool, not the vocab's */
        if (tok_vocab_set(&t->vocab, (int32_t)i, p, l)) return -1;
        const struct tok_vocab_ent *fe = &t->vocab.ent[first];
        if (fe->off != UINT32_MAX && fe->len == l && !memcmp(t->vocab.pool + fe->off, p, l) &&
            tok_vocab_set(&t->vocab, first, p, l))
            return -1;
    }
    return grow_flags(t, old_n);
}

static int ids_push(int32_t **v, size_t *n, int32_t id)
{
    for (size_t i = 0; i < *n; i++)
        if ((*v)[i] == id) return 0;
    int32_t *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p) return -1;
    p[(*n)++] = id;
    *v = p;
    return 0;
}

static int apply_specials(tok_tokenizer *t, const tok_vocab_spec *s, const spec_tokens *st, bool spm,
                          const pre_family *f)
{
    int32_t bos = spec_id(s, s->bos_id, "bos_id"), eos = spec_id(s, s->eos_id, "eos_id");
    int32_t unk = spec_id(s, s->unk_id, "unk_id"), pad = spec_id(s, s->pad_id, "pad_id");
    int32_t eot = spec_id(s, s->eot_id, "eot_id"), eom = spec_id(s, s->eom_id, "eom_id");
    if (unk < 0 && spm)
        for (size_t i = 0; i < st->n && unk < 0; i++)
            if (st->type[i] == TOK_TYPE_UNKNOWN) unk = (int32_t)i;
    t->bos_id = bos;
    t->pad_id = pad;
    t->unk_id = unk;
    if (spm) t->model.unk_id = unk;
    free(t->eos_ids);
    t->eos_ids = NULL;
    t->n_eos = 0;
    if ((eos >= 0 && ids_push(&t->eos_ids, &t->n_eos, eos)) || (eot >= 0 && ids_push(&t->eos_ids, &t->n_eos, eot)) ||
        (eom >= 0 && ids_push(&t->eos_ids, &t->n_eos, eom)))
        return -1;
    int add_bos = s->add_bos >= 0 ? s->add_bos != 0 : (spm ? 1 : f->add_bos);
    int add_eos = s->add_eos > 0;
    tok_post_free(&t->post);
    memset(&t->post, 0, sizeof t->post);
    t->post.kind = TOK_POST_TEMPLATE;
    t->post.has_a = true;
    if (add_bos && bos < 0) log_warn("GGUF vocabulary: add_bos_token is set but there is no BOS token");
    if (add_eos && eos < 0) log_warn("GGUF vocabulary: add_eos_token is set but there is no EOS token");
    if (add_bos && bos >= 0 && ids_push(&t->post.pre_ids, &t->post.n_pre, bos)) return -1;
    if (add_eos && eos >= 0 && ids_push(&t->post.post_ids, &t->post.n_post, eos)) return -1;
    t->clean_up_spaces = spm ? false : f->clean_spaces != 0;
    return 0;
}

tok_tokenizer *tok_load_vocab_spec(const tok_vocab_spec *s, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    if (!s) { spec_fail(err, errlen, "no vocabulary spec"); return NULL; }
    if (!s->model) { spec_fail(err, errlen, "GGUF vocabulary: tokenizer.ggml.model is missing"); return NULL; }
    bool spm = !strcmp(s->model, "llama");
    const pre_family *f = NULL;
    if (!spm) {
        if (strcmp(s->model, "gpt2")) {
            spec_fail(err, errlen, "GGUF tokenizer model \"%.60s\" is not supported (sglc reads \"gpt2\" and \"llama\")",
                      s->model);
            return NULL;
        }
        f = find_pre(s->pre);
        if (!f) {
            char names[512];
            pre_names(names, sizeof names);
            spec_fail(err, errlen, "GGUF pre-tokenizer \"%.60s\" is not supported (sglc knows: %s)", s->pre, names);
            return NULL;
        }
    }
    if (s->n_merges && !s->merges) { spec_fail(err, errlen, "GGUF vocabulary: %zu merges but no array", s->n_merges); return NULL; }
    spec_tokens st;
    tok_buf doc = {0};
    tok_tokenizer *t = NULL;
    dmerge *dm = NULL;
    size_t n_dm = 0;
    if (spec_tokens_init(&st, s, err, errlen)) goto done;
    if (spm && !s->n_merges && derive_merges(&st, s, &dm, &n_dm, err, errlen)) goto done;
    int add_space_prefix = s->add_space_prefix >= 0 ? s->add_space_prefix != 0 : 1;
    if (build_doc(&doc, s, &st, spm, f, add_space_prefix, err, errlen)) goto done;
    char lerr[512] = "";
    t = tok_load_json(doc.p, doc.n, NULL, NULL, NULL, NULL, lerr, sizeof lerr);
    if (!t) { spec_fail(err, errlen, "GGUF vocabulary: %s", lerr); goto done; }
    if (put_derived(t, dm, n_dm, err, errlen) ||
        ((add_duplicates(t, &st) || apply_specials(t, s, &st, spm, f)) && spec_fail(err, errlen, "out of memory"))) {
        tok_destroy(t);
        t = NULL;
    }
done:
    free(dm);
    tok_buf_free(&doc);
    spec_tokens_free(&st);
    return t;
}
