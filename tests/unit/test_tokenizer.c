/* test_tokenizer — the tokenizer module.
 *
 * Two tiers:
 *  - self-contained unit tests on small tokenizer.json documents written
 *    here (WordPiece, Unigram, split behaviours, added-token flags, errors,
 *    UTF-8 sanitising, streaming);
 *  - the Hugging Face exactness test: when SGLC_TOK_FIXTURES names a folder
 *    of <name>.jsonl fixtures (tests/js/gen_tokenizer_fixtures.mjs, run by
 *    tests/scripts/test_tokenizer_hf.sh), every string is encoded with and
 *    without special tokens, decoded with skip_special_tokens both ways and
 *    streamed id by id, and all of it must equal HF's output.
 */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static tok_tokenizer *load_inline(const char *json, const char *cfg)
{
    char err[256] = "";
    tok_tokenizer *t = tok_load_json(json, strlen(json), cfg, NULL, NULL, NULL, err, sizeof err);
    if (!t) fprintf(stderr, "load failed: %s\n", err);
    return t;
}

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

/* ---- small synthetic tokenizers --------------------------------------- */
static const char *WORDPIECE_JSON =
    "{\"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true},"
    " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
    " \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 3], \"cls\": [\"[CLS]\", 2]},"
    " \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},"
    " \"added_tokens\": [{\"id\": 0, \"content\": \"[UNK]\", \"special\": true},"
    "   {\"id\": 2, \"content\": \"[CLS]\", \"special\": true}, {\"id\": 3, \"content\": \"[SEP]\", \"special\": true}],"
    " \"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\","
    "   \"vocab\": {\"[UNK]\": 0, \"[PAD]\": 1, \"[CLS]\": 2, \"[SEP]\": 3, \"hello\": 4, \"world\": 5,"
    "   \"un\": 6, \"##aff\": 7, \"##able\": 8, \",\": 9, \"!\": 10, \"cafe\": 11, \"中\": 12}}}";

static void test_wordpiece(void **state)
{
    (void)state;
    tok_tokenizer *t = load_inline(WORDPIECE_JSON, NULL);
    assert_non_null(t);
    expect_ids(t, "Hello, WORLD!", true, (int32_t[]){2, 4, 9, 5, 10, 3}, 6);
    expect_ids(t, "unaffable", false, (int32_t[]){6, 7, 8}, 3);
    expect_ids(t, "Café中x", false, (int32_t[]){11, 12, 0}, 3); /* accents stripped, CJK isolated, unknown word */
    expect_decode(t, (int32_t[]){2, 4, 9, 5, 10, 3}, 6, true, "hello, world!");
    expect_decode(t, (int32_t[]){6, 7, 8}, 3, false, "unaffable");
    tok_destroy(t);
}

static const char *UNIGRAM_JSON =
    "{\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\","
    "   \"prepend_scheme\": \"always\", \"split\": true},"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}},"
    "   {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], \"special_tokens\": {\"</s>\": {\"id\": \"</s>\", \"ids\": [1]}}},"
    " \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"always\"},"
    " \"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}, {\"id\": 1, \"content\": \"</s>\", \"special\": true}],"
    " \"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"</s>\", 0],"
    "   [\"\\u2581\", -2], [\"\\u2581he\", -3], [\"llo\", -3], [\"\\u2581hello\", -4], [\"h\", -5], [\"e\", -5],"
    "   [\"l\", -5], [\"o\", -5], [\"\\u2581w\", -4], [\"or\", -3], [\"ld\", -3], [\"\\u2581world\", -9]]}}";

static void test_unigram(void **state)
{
    (void)state;
    tok_tokenizer *t = load_inline(UNIGRAM_JSON, NULL);
    assert_non_null(t);
    /* "▁hello" (-4) beats "▁he"+"llo" (-6); "▁w"+"or"+"ld" (-10) loses to "▁world" (-9) */
    expect_ids(t, "hello world", true, (int32_t[]){5, 13, 1}, 3);
    /* unknown chars fuse into one unk */
    expect_ids(t, "hexyz", false, (int32_t[]){3, 0}, 2);
    expect_decode(t, (int32_t[]){5, 13, 1}, 3, true, "hello world");
    tok_destroy(t);
}

/* A tiny character BPE with every pre-tokenizer behaviour reachable. */
static const char *BPE_FMT =
    "{\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \"-\"},"
    "   \"behavior\": \"%s\", \"invert\": false},"
    " \"post_processor\": null, \"decoder\": {\"type\": \"Fuse\"},"
    " \"added_tokens\": [{\"id\": 6, \"content\": \"<x>\", \"special\": false, \"lstrip\": true, \"rstrip\": true,"
    "   \"normalized\": false}],"
    " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"-\": 2, \"ab\": 3, \"a-\": 4, \"-b\": 5, \" \": 7, \"--\": 8},"
    "   \"merges\": [\"a b\", \"a -\", \"- b\", \"- -\"]}}";

static void check_behavior(const char *behavior, const char *text, const int32_t *want, size_t n)
{
    char json[2048];
    snprintf(json, sizeof json, BPE_FMT, behavior);
    tok_tokenizer *t = load_inline(json, NULL);
    assert_non_null(t);
    expect_ids(t, text, false, want, n);
    tok_destroy(t);
}

static void test_split_behaviors(void **state)
{
    (void)state;
    /* "a-b": no split would give "a-" "b" (merge a- ranks before -b) */
    check_behavior("Isolated", "a-b", (int32_t[]){0, 2, 1}, 3);
    check_behavior("Removed", "a-b", (int32_t[]){0, 1}, 2);
    check_behavior("MergedWithPrevious", "a-b", (int32_t[]){4, 1}, 2);
    check_behavior("MergedWithNext", "a-b", (int32_t[]){0, 5}, 2);
    check_behavior("Contiguous", "a--b", (int32_t[]){0, 8, 1}, 3);
    check_behavior("Isolated", "a--b", (int32_t[]){0, 2, 2, 1}, 4);
    /* lstrip/rstrip eat the spaces around an added token */
    check_behavior("Isolated", "ab  <x>  ab", (int32_t[]){3, 6, 3}, 3);
}

static void test_bad_json(void **state)
{
    (void)state;
    char err[256];
    const char *bad[] = {
        "", "{", "[]", "{\"model\": 3}", "{\"model\": {\"type\": \"Nope\", \"vocab\": {}}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}}",
        ("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
         "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}}}"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        tok_tokenizer *t = tok_load_json(bad[i], strlen(bad[i]), NULL, NULL, NULL, NULL, err, sizeof err);
        assert_null(t);
        assert_true(strlen(err) > 0);
    }
    err[0] = 0;
    assert_null(tok_load_dir("/nonexistent-dir", NULL, err, sizeof err));
    assert_non_null(strstr(err, "tokenizer.json"));
}

/* The fast vocab/merges scanner and the plain jansson path must build the
 * same tokenizer (real files from ../shared; skipped without them). */
static void test_fast_json_equals_jansson(void **state)
{
    (void)state;
    const char *shared = getenv("SGLC_SHARED");
    if (!shared) shared = "../shared";
    const char *dirs[] = {"models/TinyStories-656K", "models/tokenizers/llama2", "models/tokenizers/mistral-chatml"};
    int done = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char path[4096], err[512];
        snprintf(path, sizeof path, "%s/%s", shared, dirs[d]);
        tok_load_opts slow = {.no_fast_json = true};
        tok_tokenizer *a = tok_load_dir(path, NULL, err, sizeof err);
        if (!a) continue;
        tok_tokenizer *b = tok_load_dir(path, &slow, err, sizeof err);
        assert_non_null(b);
        assert_int_equal(tok_vocab_size(a), tok_vocab_size(b));
        for (int32_t id = 0; id < (int32_t)tok_vocab_size(a); id++) {
            size_t la = 0, lb = 0;
            const char *sa = tok_id_to_token(a, id, &la), *sb = tok_id_to_token(b, id, &lb);
            assert_true((sa == NULL) == (sb == NULL));
            if (sa) { assert_int_equal(la, lb); assert_memory_equal(sa, sb, la); }
        }
        assert_int_equal(a->model.merges.used, b->model.merges.used);
        for (size_t i = 0; i < b->model.merges.cap; i++) {
            uint64_t e = b->model.merges.slots[i];
            if (e == TOK_PAIR_EMPTY) continue;
            int32_t l = (int32_t)(e >> 44), r = (int32_t)((e >> 24) & TOK_PAIR_MAX_ID);
            int32_t ma = -1, mb = -1;
            int32_t ra = tok_pairmap_get(&a->model.merges, l, r, &ma), rb = tok_pairmap_get(&b->model.merges, l, r, &mb);
            assert_int_equal(ra, rb);
            assert_int_equal(ma, mb);
        }
        tok_destroy(a);
        tok_destroy(b);
        done++;
    }
    if (!done) skip();
}

/* Bad documents the fast scanner must hand over to jansson's verdict. */
static void test_fast_json_fallback(void **state)
{
    (void)state;
    char err[256];
    const char *docs[] = {
        /* duplicate model key: jansson keeps the last one */
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"x\": 0}, \"merges\": []},"
        " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}}",
        /* escaped tokens and pair merges */
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\\u0061\": 0, \"b\": 1, \"a\\u0062\": 2}, \"merges\": [[\"a\", \"b\"]]}}",
    };
    for (size_t i = 0; i < 2; i++) {
        tok_tokenizer *t = tok_load_json(docs[i], strlen(docs[i]), NULL, NULL, NULL, NULL, err, sizeof err);
        assert_non_null(t);
        expect_ids(t, "ab", false, (int32_t[]){2}, 1);
        tok_destroy(t);
    }
    const char *bad = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 01}, \"merges\": []}}";
    err[0] = 0;
    assert_null(tok_load_json(bad, strlen(bad), NULL, NULL, NULL, NULL, err, sizeof err));
    assert_true(strlen(err) > 0);
}

/* One tokenizer shared by several threads (each with its own word cache)
 * gives the same ids as a single thread. */
typedef struct mt_arg {
    tok_tokenizer *t[2];
    const char *const *texts;
    size_t n_texts;
    const tok_ids *want[2];
    int bad;
} mt_arg;

static void *mt_worker(void *p)
{
    mt_arg *a = p;
    for (int round = 0; round < 20; round++)
        for (size_t i = 0; i < a->n_texts; i++)
            for (int k = 0; k < 2; k++) { /* alternate tokenizers: the word cache must not mix them */
                tok_ids ids = {0};
                const tok_ids *w = &a->want[k][i];
                if (tok_encode(a->t[k], a->texts[i], strlen(a->texts[i]), true, &ids) || ids.n != w->n ||
                    (ids.n && memcmp(ids.ids, w->ids, ids.n * sizeof *ids.ids)))
                    a->bad++;
                tok_ids_free(&ids);
            }
    return NULL;
}

static void test_threads_share_tokenizer(void **state)
{
    (void)state;
    tok_tokenizer *t = load_inline(WORDPIECE_JSON, NULL);
    char json[2048];
    snprintf(json, sizeof json, BPE_FMT, "Isolated");
    tok_tokenizer *t2 = load_inline(json, NULL);
    assert_non_null(t);
    assert_non_null(t2);
    static const char *const texts[] = {"Hello, WORLD!", "unaffable hello", "ab-ab  <x>  a--b", "Café中x, world"};
    enum { NT = sizeof texts / sizeof texts[0] };
    tok_ids want[NT], want2[NT];
    for (size_t i = 0; i < NT; i++) {
        memset(&want[i], 0, sizeof want[i]);
        memset(&want2[i], 0, sizeof want2[i]);
        assert_int_equal(tok_encode(t, texts[i], strlen(texts[i]), true, &want[i]), 0);
        assert_int_equal(tok_encode(t2, texts[i], strlen(texts[i]), true, &want2[i]), 0);
    }
    pthread_t th[4];
    mt_arg args[4];
    for (int k = 0; k < 4; k++) {
        args[k] = (mt_arg){{t, t2}, texts, NT, {want, want2}, 0};
        assert_int_equal(pthread_create(&th[k], NULL, mt_worker, &args[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        assert_int_equal(args[k].bad, 0);
    }
    for (size_t i = 0; i < NT; i++) { tok_ids_free(&want[i]); tok_ids_free(&want2[i]); }
    tok_destroy(t);
    tok_destroy(t2);
}

/* ---- Hugging Face fixtures -------------------------------------------- */
static int hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

static bool ids_equal(const tok_ids *got, json_t *want)
{
    if (!json_is_array(want) || json_array_size(want) != got->n) return false;
    for (size_t i = 0; i < got->n; i++)
        if (json_integer_value(json_array_get(want, i)) != got->ids[i]) return false;
    return true;
}

static void print_ids(const char *label, const tok_ids *v)
{
    fprintf(stderr, "    %s:", label);
    for (size_t i = 0; i < v->n && i < 40; i++) fprintf(stderr, " %d", v->ids[i]);
    fprintf(stderr, "\n");
}

/* Stream ids one at a time; the concatenation must stay a prefix of the full
 * decode of the ids so far, be valid UTF-8, and equal it after finish. */
static bool stream_ok(tok_tokenizer *t, const tok_ids *ids, bool skip, char **why)
{
    tok_decode_opts o = {.skip_special_tokens = skip};
    tok_stream *s = tok_stream_create(t, &o);
    size_t cap = 1024, n = 0;
    char *acc = malloc(cap);
    bool ok = true;
    for (size_t i = 0; i < ids->n && ok; i++) {
        char *piece = NULL, *full = NULL;
        size_t pl = 0, fl = 0;
        if (tok_stream_push(s, &ids->ids[i], 1, &piece, &pl) || tok_decode(t, ids->ids, i + 1, &o, &full, &fl)) {
            ok = false;
            *why = "stream/decode error";
        } else {
            while (n + pl + 1 > cap) acc = realloc(acc, cap *= 2);
            memcpy(acc + n, piece, pl);
            n += pl;
            if (n > fl || memcmp(acc, full, n) != 0) {
                static char msg[600];
                snprintf(msg, sizeof msg, "step %zu (id %d): stream '%.*s' vs full '%.200s'", i, ids->ids[i],
                         (int)(n < 200 ? n : 200), acc, full);
                ok = false;
                *why = msg;
            }
        }
        free(piece);
        free(full);
    }
    if (ok) {
        char *piece = NULL, *full = NULL;
        size_t pl = 0, fl = 0;
        tok_stream_finish(s, &piece, &pl);
        tok_decode(t, ids->ids, ids->n, &o, &full, &fl);
        while (n + pl + 1 > cap) acc = realloc(acc, cap *= 2);
        memcpy(acc + n, piece, pl);
        n += pl;
        if (n != fl || memcmp(acc, full, n) != 0) { ok = false; *why = "stream != full decode at the end"; }
        free(piece);
        free(full);
    }
    free(acc);
    tok_stream_destroy(s);
    return ok;
}

static int check_fixture(const char *model_dir, const char *fixture, bool stream_all)
{
    char err[512];
    tok_tokenizer *t = tok_load_dir(model_dir, NULL, err, sizeof err);
    if (!t) { fprintf(stderr, "cannot load %s: %s\n", model_dir, err); return 1; }
    FILE *f = fopen(fixture, "r");
    if (!f) { tok_destroy(t); return 1; }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    size_t n_skip = 0;
    size_t n = 0, bad_ids = 0, bad_ids0 = 0, bad_dec = 0, bad_skip = 0, bad_stream = 0, shown = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je);
        if (!j) { fprintf(stderr, "bad fixture line: %s\n", je.text); bad_ids++; continue; }
        if (json_object_get(j, "skip")) { /* documented transformers.js divergence (see the generator) */
            n_skip++;
            json_decref(j);
            n++;
            continue;
        }
        const char *hex = json_string_value(json_object_get(j, "hex"));
        size_t bn = strlen(hex) / 2;
        char *bytes = malloc(bn + 1);
        for (size_t i = 0; i < bn; i++) bytes[i] = (char)(hexval(hex[2 * i]) * 16 + hexval(hex[2 * i + 1]));
        tok_ids ids = {0}, ids0 = {0};
        tok_encode(t, bytes, bn, true, &ids);
        tok_encode(t, bytes, bn, false, &ids0);
        bool e1 = ids_equal(&ids, json_object_get(j, "ids")), e0 = ids_equal(&ids0, json_object_get(j, "ids0"));
        char *d = NULL, *ds = NULL;
        size_t dl = 0, dsl = 0;
        tok_decode_opts o0 = {0}, o1 = {.skip_special_tokens = true};
        /* decode HF's ids, so a decode check does not depend on encode */
        json_t *hj = json_object_get(j, "ids");
        tok_ids hids = {0};
        for (size_t i = 0; i < json_array_size(hj); i++) tok_ids_push(&hids, (int32_t)json_integer_value(json_array_get(hj, i)));
        tok_decode(t, hids.ids, hids.n, &o0, &d, &dl);
        tok_decode(t, hids.ids, hids.n, &o1, &ds, &dsl);
        json_t *wd = json_object_get(j, "dec"), *wds = json_object_get(j, "dec_skip");
        bool okd = d && json_string_length(wd) == dl && !memcmp(json_string_value(wd), d, dl);
        bool okds = ds && json_string_length(wds) == dsl && !memcmp(json_string_value(wds), ds, dsl);
        char *why = "";
        bool oks = true;
        if (stream_all || n % 7 == 0) oks = stream_ok(t, &hids, false, &why) && stream_ok(t, &hids, true, &why);
        bad_ids += !e1;
        bad_ids0 += !e0;
        bad_dec += !okd;
        bad_skip += !okds;
        bad_stream += !oks;
        if ((!e1 || !e0 || !okd || !okds || !oks) && shown < 8) {
            shown++;
            fprintf(stderr, "  [%zu] hex=%.120s\n", n, hex);
            if (!e1) { print_ids("sglc ids", &ids); fprintf(stderr, "    hf   ids: %.300s\n", json_dumps(json_object_get(j, "ids"), JSON_COMPACT)); }
            if (!e0) print_ids("sglc ids0 (no special)", &ids0);
            if (!okd) fprintf(stderr, "    decode: sglc '%.200s' hf '%.200s'\n", d ? d : "(null)", json_string_value(wd));
            if (!okds) fprintf(stderr, "    decode skip: sglc '%.200s' hf '%.200s'\n", ds ? ds : "(null)", json_string_value(wds));
            if (!oks) fprintf(stderr, "    stream: %s\n", why);
        }
        free(d);
        free(ds);
        tok_ids_free(&hids);
        tok_ids_free(&ids);
        tok_ids_free(&ids0);
        free(bytes);
        json_decref(j);
        n++;
    }
    free(line);
    fclose(f);
    tok_destroy(t);
    fprintf(stderr, "%s: %zu strings (%zu not compared: JS divergence); mismatches: ids %zu, ids(no special) %zu, "
            "decode %zu, decode(skip) %zu, stream %zu\n",
            fixture, n, n_skip, bad_ids, bad_ids0, bad_dec, bad_skip, bad_stream);
    return n == 0 || bad_ids || bad_ids0 || bad_dec || bad_skip || bad_stream;
}

static void test_hf_fixtures(void **state)
{
    (void)state;
    const char *dir = getenv("SGLC_TOK_FIXTURES");
    if (!dir) skip();
    const char *shared = getenv("SGLC_SHARED");
    if (!shared) shared = "../shared";
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int failures = 0, files = 0;
    bool stream_all = getenv("SGLC_TOK_STREAM_ALL") != NULL;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".jsonl")) continue;
        char name[256], fixture[4096], model[4096];
        snprintf(name, sizeof name, "%.*s", (int)(l - 6), e->d_name);
        snprintf(fixture, sizeof fixture, "%s/%s", dir, e->d_name);
        snprintf(model, sizeof model, "%s/models/tokenizers/%s", shared, name);
        if (access(model, F_OK) != 0) snprintf(model, sizeof model, "%s/models/%s", shared, name);
        if (access(model, F_OK) != 0 && getenv("SGLC_TOK_EXTRA"))
            snprintf(model, sizeof model, "%s/%s", getenv("SGLC_TOK_EXTRA"), name);
        failures += check_fixture(model, fixture, stream_all);
        files++;
    }
    closedir(d);
    assert_true(files > 0);
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wordpiece),
        cmocka_unit_test(test_unigram),
        cmocka_unit_test(test_split_behaviors),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_fast_json_equals_jansson),
        cmocka_unit_test(test_fast_json_fallback),
        cmocka_unit_test(test_threads_share_tokenizer),
        cmocka_unit_test(test_hf_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
