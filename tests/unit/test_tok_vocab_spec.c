/* test_tok_vocab_spec — tokenizers from GGUF-style vocabularies.
 *
 * Two tiers:
 *  - small specs written here: SentencePiece BPE with scores (merges
 *    derived, byte fallback, prefix space, BOS), byte-level BPE with merges
 *    and the GPT-2 pre-tokenizer, duplicates, bad ids, unknown names;
 *  - the real tokenizers under ../shared/models/tokenizers: each folder's
 *    tokenizer.json is turned into the spec llama.cpp's converter
 *    (convert_hf_to_gguf.py) would write into a GGUF file — token strings
 *    in id order, token types, merges (gpt2) or scores (llama: from
 *    tokenizer.model where the folder has one, else rebuilt from the merge
 *    ranks), special ids, add_bos/add_eos, add_space_prefix — and the
 *    tokenizer loaded from it must give the ids and decodes of tok_load_dir
 *    on the same folder (which test_tokenizer checks against Hugging Face)
 *    for every string of a corpus: a generated one here, plus the shared
 *    corpus (tests/js/corpus.mjs) when SGLC_TOK_CORPUS names a file of hex
 *    lines (tests/scripts/test_tok_vocab_spec.sh writes it).
 */
#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tokenizer/tok_vocab_spec.h"
#include "tokenizer/tokenizer.h"
#include "util/fileio.h"
#include "util/log.h"

static void expect_ids(tok_tokenizer *t, const char *text, bool special, const int32_t *want, size_t n)
{
    tok_ids ids = {0};
    assert_int_equal(tok_encode(t, text, strlen(text), special, &ids), 0);
    if (ids.n != n) {
        fprintf(stderr, "'%s': got %zu ids:", text, ids.n);
        for (size_t i = 0; i < ids.n; i++) fprintf(stderr, " %d", ids.ids[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(ids.n, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids.ids[i], want[i]);
    tok_ids_free(&ids);
}

static void expect_decode(tok_tokenizer *t, const int32_t *ids, size_t n, bool skip, const char *want)
{
    char *s = NULL;
    tok_decode_opts o = {.skip_special_tokens = skip};
    assert_int_equal(tok_decode(t, ids, n, &o, &s, NULL), 0);
    assert_string_equal(s, want);
    free(s);
}

/* ---- a small SentencePiece vocabulary --------------------------------- */
/* ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces. */
#define SPM_BASE 259
static const char *SPM_PIECES[] = {"▁", "a", "b", "c", "▁a", "ab", "▁ab", "bc", "▁abc", "<|im_start|>", "x y"};
static const float SPM_SCORES[] = {-100, -101, -102, -103, -1, -2, -3, -4, -5, 0, 0};
static const int32_t SPM_TYPES[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 4};
#define SPM_N (SPM_BASE + sizeof SPM_PIECES / sizeof SPM_PIECES[0])

typedef struct spm_fixture {
    char *tok[SPM_N];
    float scores[SPM_N];
    int32_t types[SPM_N];
    tok_vocab_spec spec;
} spm_fixture;

static void spm_init(spm_fixture *f)
{
    memset(f, 0, sizeof *f);
    f->tok[0] = strdup("<unk>");
    f->tok[1] = strdup("<s>");
    f->tok[2] = strdup("</s>");
    f->types[0] = TOK_TYPE_UNKNOWN;
    f->types[1] = f->types[2] = TOK_TYPE_CONTROL;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        f->tok[3 + b] = strdup(name);
        f->types[3 + b] = TOK_TYPE_BYTE;
    }
    for (size_t i = 0; i < sizeof SPM_PIECES / sizeof SPM_PIECES[0]; i++) {
        f->tok[SPM_BASE + i] = strdup(SPM_PIECES[i]);
        f->scores[SPM_BASE + i] = SPM_SCORES[i];
        f->types[SPM_BASE + i] = SPM_TYPES[i];
    }
    f->spec = (tok_vocab_spec){.model = "llama", .n_tokens = SPM_N, .tokens = (const char *const *)f->tok,
                               .scores = f->scores, .token_types = f->types, .bos_id = 1, .eos_id = 2, .unk_id = 0,
                               .pad_id = -1, .eot_id = -1, .eom_id = -1, .add_bos = -1, .add_eos = -1,
                               .add_space_prefix = -1};
}

static void spm_free(spm_fixture *f)
{
    for (size_t i = 0; i < SPM_N; i++) free(f->tok[i]);
}

#define P(k) (SPM_BASE + (k)) /* id of SPM_PIECES[k] */

static void test_spm_small(void **state)
{
    (void)state;
    spm_fixture f;
    spm_init(&f);
    char err[256];
    tok_tokenizer *t = tok_load_vocab_spec(&f.spec, err, sizeof err);
    if (!t) fprintf(stderr, "%s\n", err);
    assert_non_null(t);
    /* "▁abc": ▁+a (rank 0), ▁a+b (3), ▁ab+c (6).  add_bos defaults to on
     * for SentencePiece, and the prefix space too. */
    expect_ids(t, "abc", true, (int32_t[]){1, P(8)}, 2);
    expect_ids(t, "ab", false, (int32_t[]){P(6)}, 1);
    expect_ids(t, "b c", false, (int32_t[]){P(0), P(2), P(0), P(3)}, 4);
    /* unknown character: byte fallback (é = C3 A9) */
    expect_ids(t, "é", false, (int32_t[]){P(0), 3 + 0xC3, 3 + 0xA9}, 3);
    /* control token split out (the text after it gets its own "▁", as
     * Llama 2's legacy tokenizer.json does); the user-defined "x y" is
     * Hugging Face's "x▁y" again */
    expect_ids(t, "<|im_start|>a", false, (int32_t[]){P(9), P(4)}, 2);
    expect_ids(t, "x\xE2\x96\x81y", false, (int32_t[]){P(10)}, 1);
    expect_decode(t, (int32_t[]){1, P(6), P(3), 3 + 0xC3, 3 + 0xA9}, 5, false, "<s> abcé");
    expect_decode(t, (int32_t[]){1, P(6), P(3)}, 3, true, "abc");
    assert_int_equal(tok_bos_id(t), 1);
    assert_int_equal(tok_eos_id(t), 2);
    assert_true(tok_add_bos(t));
    assert_true(tok_is_special(t, P(9)));
    assert_false(tok_is_special(t, P(10)));
    tok_destroy(t);

    /* no prefix space, no BOS, EOS appended */
    f.spec.add_space_prefix = 0;
    f.spec.add_bos = 0;
    f.spec.add_eos = 1;
    t = tok_load_vocab_spec(&f.spec, err, sizeof err);
    assert_non_null(t);
    expect_ids(t, "ab", true, (int32_t[]){P(5), 2}, 2);
    expect_ids(t, " ab", true, (int32_t[]){P(6), 2}, 2);
    expect_decode(t, (int32_t[]){P(6), P(3)}, 2, false, " abc");
    tok_destroy(t);
    spm_free(&f);
}

static void test_derive_merges(void **state)
{
    (void)state;
    spm_fixture f;
    spm_init(&f);
    int32_t *pairs = NULL;
    size_t n = 0;
    char err[128];
    assert_int_equal(tok_vocab_spec_derive_merges(&f.spec, &pairs, &n, err, sizeof err), 0);
    /* by score: ▁a(-1): ▁+a; ab(-2): a+b; ▁ab(-3): ▁+ab, ▁a+b; bc(-4): b+c;
     * ▁abc(-5): ▁+abc? no (abc absent), ▁a+bc, ▁ab+c */
    int32_t want[] = {P(0), P(1), P(1), P(2), P(0), P(5), P(4), P(2), P(2), P(3), P(4), P(7), P(6), P(3)};
    assert_int_equal(n, sizeof want / sizeof want[0] / 2);
    for (size_t i = 0; i < 2 * n; i++) assert_int_equal(pairs[i], want[i]);
    free(pairs);
    /* without scores: by id */
    f.spec.scores = NULL;
    assert_int_equal(tok_vocab_spec_derive_merges(&f.spec, &pairs, &n, err, sizeof err), 0);
    assert_int_equal(n, 7);
    assert_int_equal(pairs[0], P(0)); /* ▁a first (lowest id among merged pieces) */
    assert_int_equal(pairs[1], P(1));
    free(pairs);
    spm_free(&f);
}

/* ---- a small byte-level BPE vocabulary -------------------------------- */
static int bl_cp(int b) /* GPT-2 bytes_to_unicode */
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) n++;
    return 256 + n;
}

static void put_cp(char *o, int cp)
{
    if (cp < 0x80) { o[0] = (char)cp; o[1] = 0; }
    else { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); o[2] = 0; }
}

static void test_gpt2_small(void **state)
{
    (void)state;
    /* ids 0..255: byte chars; 256 "Ġh", 257 "Ġhe", 258 "ll", 259 "Ġhell", 260 "o", ...
     * merges: Ġ h, Ġh e, l l, Ġhe ll; then 261 <|endoftext|> (control),
     * 262 the same string as 258 (a duplicate), 263 <think> (user-defined) */
    char *tok[264];
    int32_t types[264];
    for (int b = 0; b < 256; b++) {
        tok[b] = calloc(4, 1);
        put_cp(tok[b], bl_cp(b));
        types[b] = 1;
    }
    const char *more[] = {"Ġh", "Ġhe", "ll", "Ġhell", "Ġhello", "<|endoftext|>", "ll", "<think>"};
    for (int i = 0; i < 8; i++) { tok[256 + i] = strdup(more[i]); types[256 + i] = 1; }
    types[261] = TOK_TYPE_CONTROL;
    types[263] = TOK_TYPE_USER_DEFINED;
    const char *merges[] = {"Ġ h", "Ġh e", "l l", "Ġhe ll", "Ġhell o"};
    tok_vocab_spec s = {.model = "gpt2", .pre = "gpt-2", .n_tokens = 264, .tokens = (const char *const *)tok,
                        .token_types = types, .n_merges = 5, .merges = merges, .bos_id = 261, .eos_id = 261,
                        .unk_id = -1, .pad_id = 9999, .eot_id = -1, .eom_id = -1, .add_bos = -1, .add_eos = -1,
                        .add_space_prefix = -1};
    char err[256];
    tok_tokenizer *t = tok_load_vocab_spec(&s, err, sizeof err);
    if (!t) fprintf(stderr, "%s\n", err);
    assert_non_null(t);
    /* "hello hello": GPT-2 regex gives "hello", " hello"; h e l l o has no
     * merges but l l; " hello" merges all the way. No BOS by default. */
    expect_ids(t, "hello hello", true, (int32_t[]){'h', 'e', 258, 'o', 260}, 5);
    expect_ids(t, "<think><|endoftext|>", true, (int32_t[]){263, 261}, 2);
    expect_decode(t, (int32_t[]){'h', 'e', 262, 'o', 260, 261}, 6, false, "hello hello<|endoftext|>");
    expect_decode(t, (int32_t[]){260, 261, 263}, 3, true, " hello<think>");
    assert_int_equal(tok_token_to_id(t, "ll", 2), 258); /* the first id keeps the lookup */
    assert_int_equal(tok_pad_id(t), -1);                /* out of range: ignored */
    assert_false(tok_add_bos(t));
    tok_destroy(t);

    /* Llama 3 pre-tokenizer: BOS by default, ignore_merges */
    s.pre = "llama-bpe";
    t = tok_load_vocab_spec(&s, err, sizeof err);
    assert_non_null(t);
    assert_true(tok_add_bos(t));
    expect_ids(t, " hello", true, (int32_t[]){261, 260}, 2);
    tok_destroy(t);

    /* every pre-tokenizer name loads (its regexes compile) and encodes text
     * back to the same bytes */
    static const char *PRES[] = {NULL, "default", "gpt-2", "phi-2", "llama3", "llama-v3", "llama-bpe", "smaug-bpe", "dbrx", "qwen2",
                                 "deepseek-r1-qwen", "qwen35", "deepseek-v3", "gpt-4o", "llama4", "tekken",
                                 "starcoder", "refact", "smollm"};
    static const char text[] = "Hello, World! it's 12345 \xE4\xBD\xA0\xE5\xA5\xBD  \n\tx\xF0\x9F\x98\x80";
    s.pad_id = -1;
    for (size_t k = 0; k < sizeof PRES / sizeof PRES[0]; k++) {
        s.pre = PRES[k];
        assert_true(tok_vocab_spec_pre_supported(PRES[k]));
        t = tok_load_vocab_spec(&s, err, sizeof err);
        if (!t) fprintf(stderr, "%s: %s\n", PRES[k] ? PRES[k] : "(null)", err);
        assert_non_null(t);
        tok_ids ids = {0};
        assert_int_equal(tok_encode(t, text, sizeof text - 1, false, &ids), 0);
        char *dec = NULL;
        tok_decode_opts o = {0};
        assert_int_equal(tok_decode(t, ids.ids, ids.n, &o, &dec, NULL), 0);
        assert_string_equal(dec, text);
        free(dec);
        tok_ids_free(&ids);
        tok_destroy(t);
    }
    assert_false(tok_vocab_spec_pre_supported("chatglm-bpe"));
    for (int i = 0; i < 264; i++) free(tok[i]);
}

static void test_errors(void **state)
{
    (void)state;
    spm_fixture f;
    spm_init(&f);
    char err[512];
    tok_vocab_spec s = f.spec;
    s.model = "bert";
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    assert_non_null(strstr(err, "\"bert\""));
    s.model = "gpt2";
    s.pre = "no-such-pre";
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    assert_non_null(strstr(err, "\"no-such-pre\""));
    assert_non_null(strstr(err, "llama-bpe")); /* lists what it knows */
    s = f.spec;
    s.model = NULL;
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    assert_true(err[0] != 0);
    s = f.spec;
    s.n_tokens = 0;
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    assert_non_null(strstr(err, "no tokens"));
    s = f.spec;
    s.tokens = NULL;
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    s = f.spec;
    s.n_tokens = (size_t)1 << 40;
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    assert_non_null(strstr(err, "limit"));
    s = f.spec;
    s.n_merges = 3;
    s.merges = NULL;
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    s = f.spec;
    const char *bad_merges[] = {"▁a", "a b"};
    s.n_merges = 2;
    s.merges = bad_merges;
    assert_null(tok_load_vocab_spec(&s, err, sizeof err));
    assert_non_null(strstr(err, "merge 0"));
    /* bad special ids are ignored, invalid UTF-8 becomes U+FFFD */
    s = f.spec;
    s.bos_id = 1 << 30;
    s.eos_id = -7;
    s.unk_id = (int32_t)SPM_N;
    free(f.tok[SPM_BASE + 10]);
    f.tok[SPM_BASE + 10] = strdup("\xff\xfe");
    log_set_level(LOG_ERROR);
    tok_tokenizer *t = tok_load_vocab_spec(&s, err, sizeof err);
    log_set_level(LOG_WARNING);
    assert_non_null(t);
    assert_int_equal(tok_bos_id(t), -1);
    assert_int_equal(tok_eos_id(t), -1);
    assert_false(tok_add_bos(t));
    expect_decode(t, (int32_t[]){SPM_BASE + 10}, 1, false, "\xEF\xBF\xBD\xEF\xBF\xBD");
    tok_destroy(t);
    spm_free(&f);
}

/* ---- converter emulation ----------------------------------------------- */
typedef struct conv {
    char **tok;
    size_t *lens;
    float *scores;
    int32_t *types;
    char **merges;
    size_t n, n_merges;
    tok_vocab_spec spec;
    char **hf_merges; /* (n_hf_merges) tokenizer.json merges as "a b" (llama: to compare with the derived ones) */
    size_t n_hf_merges;
} conv;

static void conv_free(conv *c)
{
    for (size_t i = 0; i < c->n; i++) free(c->tok[i]);
    for (size_t i = 0; i < c->n_merges; i++) free(c->merges[i]);
    for (size_t i = 0; i < c->n_hf_merges; i++) free(c->hf_merges[i]);
    free(c->tok);
    free(c->lens);
    free(c->scores);
    free(c->types);
    free(c->merges);
    free(c->hf_merges);
    memset(c, 0, sizeof *c);
}

/* convert_hf_to_gguf.py's does_token_look_special */
static bool looks_special(const char *s)
{
    size_t n = strlen(s);
    if (!strcmp(s, "<pad>") || !strcmp(s, "<mask>") || !strcmp(s, "<2mass>") || !strcmp(s, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>")) return true;
    if (n >= 8 && !strncmp(s, "<\xEF\xBD\x9C", 4) && !strcmp(s + n - 4, "\xEF\xBD\x9C>")) return true;
    if (n >= 8 && !strncmp(s, "<unused", 7) && s[n - 1] == '>') return true;
    return false;
}

static char *replace_all(const char *s, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    char *o = malloc(strlen(s) * (tl > fl ? tl : 1) + 1);
    for (const char *p = s; *p;) {
        if (!strncmp(p, from, fl)) { memcpy(o + n, to, tl); n += tl; p += fl; }
        else o[n++] = *p++;
    }
    o[n] = 0;
    return o;
}

static const char *token_text(json_t *v)
{
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content"))) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

/* tokenizer.model (protobuf ModelProto): pieces (field 1) with score (2) and type (3). */
static uint64_t pb_varint(const unsigned char *b, size_t n, size_t *i)
{
    uint64_t r = 0;
    for (int s = 0; *i < n && s < 64; s += 7) {
        unsigned char c = b[(*i)++];
        r |= (uint64_t)(c & 0x7F) << s;
        if (c < 0x80) break;
    }
    return r;
}

static int read_sp_scores(const char *path, conv *c)
{
    size_t n = 0;
    unsigned char *b = (unsigned char *)fileio_read(path, 0, &n);
    if (!b) return -1;
    size_t i = 0, id = 0;
    while (i < n) {
        uint64_t key = pb_varint(b, n, &i);
        unsigned wt = key & 7, field = (unsigned)(key >> 3);
        if (wt == 0) { pb_varint(b, n, &i); continue; }
        if (wt == 5) { i += 4; continue; }
        if (wt == 1) { i += 8; continue; }
        size_t l = (size_t)pb_varint(b, n, &i);
        if (field == 1 && id < c->n) {
            size_t j = i, e = i + l;
            while (j < e) {
                uint64_t k2 = pb_varint(b, e, &j);
                unsigned w2 = k2 & 7, f2 = (unsigned)(k2 >> 3);
                if (w2 == 5 && f2 == 2) { memcpy(&c->scores[id], b + j, 4); j += 4; }
                else if (w2 == 5) j += 4;
                else if (w2 == 0) pb_varint(b, e, &j);
                else if (w2 == 1) j += 8;
                else { size_t l2 = (size_t)pb_varint(b, e, &j); j += l2; }
            }
            id++;
        }
        i += l;
    }
    free(b);
    return id > 0 ? 0 : -1;
}

static int32_t find_id(json_t *vocab, json_t *added, const char *s)
{
    if (!s) return -1;
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        if (!strcmp(json_string_value(json_object_get(a, "content")), s)) return (int32_t)json_integer_value(json_object_get(a, "id"));
    }
    json_t *v = json_object_get(vocab, s);
    return json_is_integer(v) ? (int32_t)json_integer_value(v) : -1;
}

static bool is_byte_piece(const char *s)
{
    regex_t re;
    regcomp(&re, "^<0x[0-9A-Fa-f]{2}>$", REG_EXTENDED | REG_NOSUB);
    bool m = regexec(&re, s, 0, NULL, 0) == 0;
    regfree(&re);
    return m;
}

/* Build the spec llama.cpp's converter would write for folder dir. */
static int conv_build(conv *c, const char *dir, const char *pre)
{
    memset(c, 0, sizeof *c);
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    json_error_t je;
    json_t *tj = json_load_file(path, 0, &je);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
    if (!tj || !cfg) { json_decref(tj); json_decref(cfg); return -1; }
    json_t *model = json_object_get(tj, "model"), *vocab = json_object_get(model, "vocab");
    json_t *added = json_object_get(tj, "added_tokens"), *jm = json_object_get(model, "merges");
    bool spm = json_is_true(json_object_get(model, "byte_fallback"));
    size_t n = 0;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) if ((size_t)json_integer_value(val) + 1 > n) n = (size_t)json_integer_value(val) + 1;
    for (size_t i = 0; i < json_array_size(added); i++) {
        size_t id = (size_t)json_integer_value(json_object_get(json_array_get(added, i), "id"));
        if (id + 1 > n) n = id + 1;
    }
    c->n = n;
    c->tok = calloc(n, sizeof *c->tok);
    c->lens = calloc(n, sizeof *c->lens);
    c->scores = calloc(n, sizeof *c->scores);
    c->types = calloc(n, sizeof *c->types);
    json_object_foreach(vocab, key, val) {
        size_t id = (size_t)json_integer_value(val);
        c->tok[id] = strdup(key);
        c->types[id] = spm && is_byte_piece(key) ? TOK_TYPE_BYTE : TOK_TYPE_NORMAL;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        size_t id = (size_t)json_integer_value(json_object_get(a, "id"));
        const char *content = json_string_value(json_object_get(a, "content"));
        free(c->tok[id]);
        if (json_is_true(json_object_get(a, "special")) || looks_special(content)) {
            c->tok[id] = strdup(content);
            c->types[id] = TOK_TYPE_CONTROL;
        } else {
            c->tok[id] = replace_all(content, "\xE2\x96\x81", " "); /* "pre-normalize user-defined spaces" */
            c->types[id] = TOK_TYPE_USER_DEFINED;
        }
        c->scores[id] = -1000.0f;
    }
    for (size_t i = 0; i < n; i++) {
        if (c->tok[i]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%zu]", i);
        c->tok[i] = strdup(pad);
        c->types[i] = TOK_TYPE_UNUSED;
    }
    for (size_t i = 0; i < n; i++) c->lens[i] = strlen(c->tok[i]);
    /* merges as "a b" */
    size_t nm = json_array_size(jm);
    char **ms = calloc(nm + 1, sizeof *ms);
    for (size_t i = 0; i < nm; i++) {
        json_t *m = json_array_get(jm, i);
        if (json_is_string(m)) ms[i] = strdup(json_string_value(m));
        else {
            const char *a = json_string_value(json_array_get(m, 0)), *b = json_string_value(json_array_get(m, 1));
            ms[i] = malloc(strlen(a) + strlen(b) + 2);
            sprintf(ms[i], "%s %s", a, b);
        }
    }
    if (spm) {
        c->hf_merges = ms;
        c->n_hf_merges = nm;
        snprintf(path, sizeof path, "%s/tokenizer.model", dir);
        if (access(path, R_OK) != 0 || read_sp_scores(path, c) != 0) {
            /* no tokenizer.model: a SentencePiece BPE score per piece that
             * orders the pieces as tokenizer.json's merge list does (the
             * rank of the first merge that makes it) */
            for (size_t i = 0; i < n; i++)
                if (c->types[i] == TOK_TYPE_NORMAL) c->scores[i] = -(float)(nm + i);
            for (size_t r = nm; r-- > 0;) {
                char *sp = strchr(ms[r], ' ');
                *sp = 0;
                char *cat = malloc(strlen(ms[r]) + strlen(sp + 1) + 1);
                sprintf(cat, "%s%s", ms[r], sp + 1);
                *sp = ' ';
                json_t *v = json_object_get(vocab, cat);
                if (json_is_integer(v) && c->types[json_integer_value(v)] == TOK_TYPE_NORMAL)
                    c->scores[json_integer_value(v)] = -(float)r;
                free(cat);
            }
        } else {
            for (size_t i = 0; i < json_array_size(added); i++) /* the converter's override */
                c->scores[json_integer_value(json_object_get(json_array_get(added, i), "id"))] = -1000.0f;
        }
    } else {
        c->merges = ms;
        c->n_merges = nm;
    }
    /* special ids and flags, as gguf-py's SpecialVocab reads them */
    int32_t bos = find_id(vocab, added, token_text(json_object_get(cfg, "bos_token")));
    int32_t eos = find_id(vocab, added, token_text(json_object_get(cfg, "eos_token")));
    int32_t unk = find_id(vocab, added, token_text(json_object_get(cfg, "unk_token")));
    int32_t pad = find_id(vocab, added, token_text(json_object_get(cfg, "pad_token")));
    json_t *ab = json_object_get(cfg, "add_bos_token"), *ae = json_object_get(cfg, "add_eos_token");
    int add_bos = json_is_boolean(ab) ? json_is_true(ab) : -1, add_eos = json_is_boolean(ae) ? json_is_true(ae) : -1;
    if (add_bos < 0) { /* from the post-processor's template */
        const char *dump = json_dumps(json_object_get(tj, "post_processor"), JSON_COMPACT);
        add_bos = dump && strstr(dump, "\"single\":[{\"SpecialToken\"") ? 1 : 0;
        free((void *)dump);
    }
    int add_space_prefix = -1;
    if (spm) {
        char *dump = json_dumps(json_object_get(tj, "normalizer"), JSON_COMPACT);
        add_space_prefix = dump && strstr(dump, "\"Prepend\"") ? 1 : 0;
        free(dump);
    }
    c->spec = (tok_vocab_spec){.model = spm ? "llama" : "gpt2", .pre = spm ? NULL : pre, .n_tokens = n,
                               .tokens = (const char *const *)c->tok, .token_lens = c->lens,
                               .scores = spm ? c->scores : NULL, .token_types = c->types, .n_merges = c->n_merges,
                               .merges = (const char *const *)c->merges, .bos_id = bos, .eos_id = eos,
                               .unk_id = unk, .pad_id = pad, .eot_id = -1, .eom_id = -1, .add_bos = add_bos,
                               .add_eos = add_eos, .add_space_prefix = add_space_prefix};
    json_decref(tj);
    json_decref(cfg);
    return 0;
}

/* ---- corpus ------------------------------------------------------------ */
typedef struct corpus {
    char **s;
    size_t *n;
    size_t count, cap;
} corpus;

static void corpus_add(corpus *c, const char *s, size_t n)
{
    if (c->count == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 1024;
        c->s = realloc(c->s, c->cap * sizeof *c->s);
        c->n = realloc(c->n, c->cap * sizeof *c->n);
    }
    c->s[c->count] = malloc(n + 1);
    memcpy(c->s[c->count], s, n);
    c->s[c->count][n] = 0;
    c->n[c->count++] = n;
}

static uint32_t rng(uint64_t *st)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*st >> 33);
}

static const char *PARTS[] = {
    "the", "Hello", " world", "Once upon a time", " there was", "don't", " I'm", " they'll", "HELLO", "naïve",
    "café", " résumé", "12345", " 3.14159", "2026-12-02", "$19.99", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ",
    "def foo(x):\n    return x ** 2\n", "for (int i = 0; i < n; i++) {", "{\"key\": [1, 2]}", "<div class=\"a\">",
    "你好，世界", "こんにちは", "カタカナ", "안녕하세요", "Привет мир", "Γειά σου", "مرحبا", "नमस्ते", "สวัสดี", "שלום",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "e\xCC\x81", "ﬁ", "①", "ｆｕｌｌ", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\x8B",
    "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>",
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<think>", "</think>", "<tool_call>", "<|fim_prefix|>",
    "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<mask>", "<unused0>", "[multimodal]",
    "\xE2\x96\x81", "\xE2\x96\x81\xE2\x96\x81x", "supercalifragilistic", "antidisestablishmentarianism", "'s", "'LL",
    "!!!", "...", "?!", "—", "«quoted»", "\xFF", "a\xC3", "\xE4\xBD", "0000000000", "aaaaaaaaaaaaaaaa",
};

static void corpus_generate(corpus *c, size_t count)
{
    static const char *fixed[] = {"", " ", "a", " a", "a ", "Hello world", " Hello  world ", "  leading", "trailing  ",
                                  "\n\n\n", "                                ", "<s>Hello</s>", "<s> <s>"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) corpus_add(c, fixed[i], strlen(fixed[i]));
    uint64_t st = 42;
    size_t np = sizeof PARTS / sizeof PARTS[0];
    char buf[4096];
    while (c->count < count) {
        size_t n = 0, k = 1 + rng(&st) % 12;
        for (size_t j = 0; j < k; j++) {
            const char *p = PARTS[rng(&st) % np];
            size_t l = strlen(p);
            if (n + l + 2 >= sizeof buf) break;
            if (j && rng(&st) % 3 == 0) buf[n++] = ' ';
            memcpy(buf + n, p, l);
            n += l;
        }
        corpus_add(c, buf, n);
    }
}

static int hexv(char ch) { return ch <= '9' ? ch - '0' : (ch | 32) - 'a' + 10; }

static void corpus_read_hex(corpus *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        size_t bn = (size_t)len / 2;
        char *b = malloc(bn + 1);
        for (size_t i = 0; i < bn; i++) b[i] = (char)(hexv(line[2 * i]) * 16 + hexv(line[2 * i + 1]));
        corpus_add(c, b, bn);
        free(b);
    }
    free(line);
    fclose(f);
}

static void corpus_free(corpus *c)
{
    for (size_t i = 0; i < c->count; i++) free(c->s[i]);
    free(c->s);
    free(c->n);
}

/* ---- the comparison ---------------------------------------------------- */
static bool same_ids(const tok_ids *a, const tok_ids *b)
{
    return a->n == b->n && (!a->n || !memcmp(a->ids, b->ids, a->n * sizeof *a->ids));
}

static bool any_special_differs(const tok_tokenizer *a, const tok_tokenizer *b, const tok_ids *ids)
{
    for (size_t i = 0; i < ids->n; i++)
        if (tok_is_special(a, ids->ids[i]) != tok_is_special(b, ids->ids[i])) return true;
    return false;
}

typedef struct cmp_result {
    size_t strings, bad_ids, bad_ids0, bad_dec, bad_dec_skip, skip_by_special_flag;
} cmp_result;

static cmp_result compare(tok_tokenizer *hf, tok_tokenizer *gg, const corpus *cp, const char *name)
{
    cmp_result r = {0};
    size_t shown = 0;
    for (size_t i = 0; i < cp->count; i++) {
        tok_ids a = {0}, b = {0}, a0 = {0}, b0 = {0};
        tok_encode(hf, cp->s[i], cp->n[i], true, &a);
        tok_encode(gg, cp->s[i], cp->n[i], true, &b);
        tok_encode(hf, cp->s[i], cp->n[i], false, &a0);
        tok_encode(gg, cp->s[i], cp->n[i], false, &b0);
        bool e1 = same_ids(&a, &b), e0 = same_ids(&a0, &b0);
        char *da = NULL, *db = NULL, *sa = NULL, *sb = NULL;
        size_t dal = 0, dbl = 0, sal = 0, sbl = 0;
        tok_decode_opts o0 = {0}, o1 = {.skip_special_tokens = true};
        tok_decode(hf, a.ids, a.n, &o0, &da, &dal);
        tok_decode(gg, a.ids, a.n, &o0, &db, &dbl);
        tok_decode(hf, a.ids, a.n, &o1, &sa, &sal);
        tok_decode(gg, a.ids, a.n, &o1, &sb, &sbl);
        bool ed = da && db && dal == dbl && !memcmp(da, db, dal);
        bool es = sa && sb && sal == sbl && !memcmp(sa, sb, sal);
        r.strings++;
        r.bad_ids += !e1;
        r.bad_ids0 += !e0;
        r.bad_dec += !ed;
        if (!es && any_special_differs(hf, gg, &a)) r.skip_by_special_flag++;
        else r.bad_dec_skip += !es;
        if ((!e1 || !e0 || !ed) && shown++ < 5) {
            fprintf(stderr, "  %s [%zu] '%.80s'\n    hf:", name, i, cp->s[i]);
            for (size_t k = 0; k < a.n && k < 24; k++) fprintf(stderr, " %d", a.ids[k]);
            fprintf(stderr, "\n    gg:");
            for (size_t k = 0; k < b.n && k < 24; k++) fprintf(stderr, " %d", b.ids[k]);
            fprintf(stderr, "\n");
            if (!ed) fprintf(stderr, "    decode hf '%.80s' gg '%.80s'\n", da ? da : "?", db ? db : "?");
        }
        free(da);
        free(db);
        free(sa);
        free(sb);
        tok_ids_free(&a);
        tok_ids_free(&b);
        tok_ids_free(&a0);
        tok_ids_free(&b0);
    }
    return r;
}

static int merges_match(conv *c)
{
    int32_t *pairs = NULL;
    size_t n = 0;
    char err[256];
    if (tok_vocab_spec_derive_merges(&c->spec, &pairs, &n, err, sizeof err)) return -1;
    size_t same = 0, first_diff = n;
    for (size_t i = 0; i < n && i < c->n_hf_merges; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s %s", c->tok[pairs[2 * i]], c->tok[pairs[2 * i + 1]]);
        if (!strcmp(buf, c->hf_merges[i])) same++;
        else if (first_diff == n) first_diff = i;
    }
    fprintf(stderr, "    derived merges: %zu, tokenizer.json: %zu, same position: %zu (first difference at %zu)\n", n,
            c->n_hf_merges, same, first_diff);
    free(pairs);
    return n == c->n_hf_merges && same == n ? 1 : 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_real_tokenizers(void **state)
{
    (void)state;
    const char *shared = getenv("SGLC_SHARED");
    if (!shared) shared = "../shared";
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/models/tokenizers/qwen3/tokenizer.json", shared);
    if (access(probe, R_OK) != 0) skip();
    static const struct { const char *dir, *pre; } MODELS[] = {
        {"llama3_1", "llama-bpe"}, {"qwen3", "qwen2"}, {"deepseek_v3", "deepseek-v3"},
        {"llama2", NULL}, {"mistral-chatml", NULL}, {"gemma3", NULL},
    };
    corpus cp = {0};
    const char *cf = getenv("SGLC_TOK_CORPUS");
    if (cf) corpus_read_hex(&cp, cf);
    corpus_generate(&cp, cp.count + 500);
    int failures = 0;
    for (size_t m = 0; m < sizeof MODELS / sizeof MODELS[0]; m++) {
        char dir[4096], err[512];
        snprintf(dir, sizeof dir, "%s/models/tokenizers/%s", shared, MODELS[m].dir);
        double t0 = now_ms();
        tok_tokenizer *hf = tok_load_dir(dir, NULL, err, sizeof err);
        double t1 = now_ms();
        if (!hf) { fprintf(stderr, "%s: %s\n", dir, err); failures++; continue; }
        conv c;
        assert_int_equal(conv_build(&c, dir, MODELS[m].pre), 0);
        double t2 = now_ms();
        tok_tokenizer *gg = tok_load_vocab_spec(&c.spec, err, sizeof err);
        double t3 = now_ms();
        if (gg) fprintf(stderr, "%s: load tok_load_dir %.0f ms, tok_load_vocab_spec %.0f ms\n", MODELS[m].dir, t1 - t0, t3 - t2);
        if (!gg) { fprintf(stderr, "%s (spec): %s\n", MODELS[m].dir, err); failures++; tok_destroy(hf); conv_free(&c); continue; }
        cmp_result r = compare(hf, gg, &cp, MODELS[m].dir);
        bool specials_ok = tok_bos_id(hf) == tok_bos_id(gg) && tok_eos_id(hf) == tok_eos_id(gg) &&
                           tok_pad_id(hf) == tok_pad_id(gg) && tok_add_bos(hf) == tok_add_bos(gg) &&
                           tok_vocab_size(hf) == tok_vocab_size(gg);
        fprintf(stderr, "%s (%s): %zu strings; mismatches: ids %zu, ids(no special) %zu, decode %zu, decode(skip) %zu "
                "(+%zu where a token's special flag differs); bos/eos/pad/add_bos/vocab %s\n",
                MODELS[m].dir, c.spec.model, r.strings, r.bad_ids, r.bad_ids0, r.bad_dec, r.bad_dec_skip,
                r.skip_by_special_flag, specials_ok ? "same" : "DIFFER");
        if (!specials_ok)
            fprintf(stderr, "    bos %d/%d eos %d/%d pad %d/%d add_bos %d/%d vocab %zu/%zu\n", tok_bos_id(hf), tok_bos_id(gg),
                    tok_eos_id(hf), tok_eos_id(gg), tok_pad_id(hf), tok_pad_id(gg), tok_add_bos(hf), tok_add_bos(gg),
                    tok_vocab_size(hf), tok_vocab_size(gg));
        int mm = c.spec.scores ? merges_match(&c) : 1;
        if (!strcmp(MODELS[m].dir, "mistral-chatml") && mm != 1) {
            fprintf(stderr, "    mistral-chatml: merges derived from tokenizer.model's scores differ from tokenizer.json's\n");
            failures++;
        }
        failures += r.bad_ids || r.bad_ids0 || r.bad_dec || r.bad_dec_skip || !specials_ok;
        tok_destroy(gg);
        tok_destroy(hf);
        conv_free(&c);
    }
    corpus_free(&cp);
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_small),
        cmocka_unit_test(test_derive_merges),
        cmocka_unit_test(test_gpt2_small),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_real_tokenizers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
