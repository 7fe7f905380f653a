/* test_grammar — the grammar engine (src/grammar/).
 *
 *  - EBNF and regex acceptance/rejection tables (byte walks);
 *  - compile errors (syntax, undefined rule, left recursion, too large);
 *  - regex -> EBNF text gives the same language as the regex itself;
 *  - masks: at every step of walking sample strings the cached mask, the
 *    uncached reference walk and a brute-force accept_token + rollback of
 *    every token agree, over a synthetic vocabulary with tokens that split
 *    UTF-8 characters and cross rule boundaries, and (when present) over
 *    the real Llama 3.1 / Qwen3 vocabularies;
 *  - rollback, end tokens, termination.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"
#include "tokenizer/tok_bytes.h"
#include "tokenizer/tokenizer.h"

static int walk_ok(const grammar *g, const char *s)
{
    grammar_matcher *m = grammar_matcher_new(g, NULL);
    assert_non_null(m);
    int ok = grammar_matcher_accept_bytes(m, s, strlen(s)) && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    return ok;
}

typedef struct gcase {
    const char *grammar;
    const char *yes[8];
    const char *no[8];
} gcase;

static const gcase ebnf_cases[] = {
    {"root ::= \"a\" | \"b\"", {"a", "b"}, {"", "ab", "c"}},
    {"root ::= [a-z]+ \"!\"", {"abc!", "z!"}, {"!", "abc", "aB!"}},
    {"root ::= x{2,3}\nx ::= \"ab\"", {"abab", "ababab"}, {"ab", "abababab"}},
    {"root ::= \"x\"{3}", {"xxx"}, {"xx", "xxxx"}},
    {"root ::= \"x\"{2,}", {"xx", "xxxxx"}, {"x"}},
    {"root ::= \"x\"{,2}", {"", "x", "xx"}, {"xxx"}},
    {"root ::= [^\"]* \"\\\"\"", {"\"", "héllo\"", "日本\""}, {"a\"b\""}},
    {"# comment\nroot ::= a b # trailing\na ::= \"1\"\nb ::= \"2\"\n  | \"3\"", {"12", "13"}, {"1", "14"}},
    {"root ::= \"\\x41\\u00e9\\U0001F600\\n\\t\\\\\"", {"A\xC3\xA9\xF0\x9F\x98\x80\n\t\\"}, {"A"}},
    {"root ::= [\\x00-\\x7F]", {"a", "\x7f"}, {"\xC3\xA9"}},
    {"root ::= .", {"a", "\xC3\xA9", "\xF0\x9F\x98\x80"}, {"", "ab", "\xC3", "\xFF"}},
    {"root ::= [^a]", {"b", "\xE6\x97\xA5"}, {"a", "\xED\xA0\x80"}},
    {"root ::= (\"a\" | \"b\")* \"c\"?", {"", "abab", "abc", "c"}, {"cc", "ca"}},
    {"root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [0-9]+ | list", {"[]", "[1,[2,[]],3]"}, {"[", "[1,]", "[[1]"}},
    {"root ::=\n  \"{\" ws\n  ( \"k\" ws )?\n  \"}\"\nws ::= [ \\t\\n]*", {"{}", "{ k }", "{\n}"}, {"{k", "{kk}"}},
    {"root ::= a\na ::= \"x\" a | \"\"", {"", "x", "xxxx"}, {"y"}},
    {"root ::= e\ne ::= t (\"+\" t)*\nt ::= [0-9] | \"(\" e \")\"", {"1+2", "(1+(2+3))"}, {"1+", "(1"}},
    {"root ::= 'single' [\\]]", {"single]"}, {"single["}},
    {"root ::= [\\[\\]\\-^]+", {"[]-^"}, {"a"}},
    {"root ::= n?\nn ::= \"\"", {""}, {"a"}},
};

static const gcase regex_cases[] = {
    {"abc", {"abc"}, {"ab", "abcd"}},
    {"^a+b?$", {"a", "aaab"}, {"b", ""}},
    {"[0-9]{3}-[0-9]{4}", {"555-1234"}, {"5551234", "55-1234"}},
    {"\\d+(\\.\\d+)?", {"3", "3.14"}, {"3.", ".5"}},
    {"(?:ab|cd)*", {"", "abcd", "cdab"}, {"abc"}},
    {"[^a-c]+", {"xyz", "日本"}, {"abc", "xa"}},
    {"\\w+@\\w+\\.com", {"me@ex.com"}, {"me@ex.org"}},
    {"a.c", {"abc", "a\xC3\xA9" "c"}, {"a\nc", "ac"}},
    {"\\s*x\\S", {"  xy", "xa"}, {"x ", "x"}},
    {"(?P<y>\\d{4})-(?<m>\\d\\d)", {"2024-01"}, {"24-01"}},
    {"a{2}b{1,}c{0,1}", {"aab", "aabbbc"}, {"ab", "aabcc"}},
    {"x+?y*?", {"x", "xxyy"}, {"y"}},
    {"\\u00e9\\x41\\n", {"\xC3\xA9" "A\n"}, {"eA\n"}},
    {"[\\d\\s]+", {"1 2", "\t3"}, {"a"}},
    {"[\\D]", {"a"}, {"1"}},
    {"a{x", {"a{x"}, {"ax"}},
    {"(true|false|null)", {"true", "null"}, {"tru"}},
    {"\\{\\}\\[\\]\\(\\)\\.\\*\\+\\?\\|\\\\\\/", {"{}[]().*+?|\\/"}, {""}},
};

static void check_table(const gcase *cases, size_t n, int regex)
{
    char err[256];
    for (size_t i = 0; i < n; i++) {
        const gcase *c = &cases[i];
        grammar *g = regex ? grammar_compile_regex(c->grammar, strlen(c->grammar), err, sizeof err)
                           : grammar_compile_ebnf(c->grammar, strlen(c->grammar), NULL, err, sizeof err);
        if (!g) fail_msg("case %zu (%s) does not compile: %s", i, c->grammar, err);
        for (int k = 0; k < 8 && c->yes[k]; k++)
            if (!walk_ok(g, c->yes[k])) fail_msg("case %zu (%s) rejects '%s'", i, c->grammar, c->yes[k]);
        for (int k = 0; k < 8 && c->no[k]; k++)
            if (walk_ok(g, c->no[k])) fail_msg("case %zu (%s) accepts '%s'", i, c->grammar, c->no[k]);
        /* the regex's EBNF text is the same language */
        if (regex) {
            strbuf b = {0};
            strbuf_puts(&b, "root ::= ");
            assert_int_equal(grammar_regex_to_ebnf(c->grammar, strlen(c->grammar), "r", &b, NULL, err, sizeof err), 0);
            char *txt = strbuf_take(&b);
            grammar *g2 = grammar_compile_ebnf(txt, strlen(txt), NULL, err, sizeof err);
            if (!g2) fail_msg("regex %s -> '%s' does not compile: %s", c->grammar, txt, err);
            for (int k = 0; k < 8 && c->yes[k]; k++) assert_true(walk_ok(g2, c->yes[k]));
            for (int k = 0; k < 8 && c->no[k]; k++) assert_false(walk_ok(g2, c->no[k]));
            grammar_free(g2);
            free(txt);
        }
        grammar_free(g);
    }
}

static void test_ebnf_table(void **s) { (void)s, check_table(ebnf_cases, sizeof ebnf_cases / sizeof *ebnf_cases, 0); }
static void test_regex_table(void **s) { (void)s, check_table(regex_cases, sizeof regex_cases / sizeof *regex_cases, 1); }

static void expect_error(const char *text, int regex, const char *needle)
{
    char err[512] = "";
    grammar *g = regex ? grammar_compile_regex(text, strlen(text), err, sizeof err)
                       : grammar_compile_ebnf(text, strlen(text), NULL, err, sizeof err);
    if (g) fail_msg("'%s' compiled, expected an error with '%s'", text, needle);
    if (!strstr(err, needle)) fail_msg("'%s': error '%s' lacks '%s'", text, err, needle);
}

static void test_errors(void **s)
{
    (void)s;
    expect_error("root ::= a", 0, "undefined rule 'a'");
    expect_error("rot ::= \"a\"", 0, "no rule named 'root'");
    expect_error("root ::= \"a", 0, "unterminated string");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", 0, "defined twice");
    expect_error("root ::= (\"a\"", 0, "expected ')'");
    expect_error("root ::= [b-a]", 0, "out of order");
    expect_error("root ::= \"\\q\"", 0, "unknown escape");
    expect_error("root ::= root \"a\" | \"b\"", 0, "left recursion");
    expect_error("root ::= a\na ::= b \"x\" | \"y\"\nb ::= c? a\nc ::= \"c\"", 0, "left recursion");
    expect_error("root ::= [^\\x00-\\U0010FFFF]", 0, "matches no string");
    expect_error("root ::= ((\"ab\"{1000}){1000}){1000}", 0, "too large");
    expect_error("root ::= \"a\" ::=", 0, "line 1");
    expect_error("(a", 1, "missing ')'");
    expect_error("a)", 1, "unbalanced");
    expect_error("(a)\\1", 1, "backreferences");
    expect_error("a(?=b)", 1, "lookahead");
    expect_error("\\bx", 1, "word boundaries");
    expect_error("*a", 1, "nothing to repeat");
    expect_error("a{3,1}", 1, "n < m");
    expect_error("[z-a]", 1, "out of order");
}

/* ---- masks ----------------------------------------------------------------- */

typedef struct tvocab {
    const char **tok;
    int32_t n;
} tvocab;

static const char *tv_bytes(void *ctx, int32_t id, size_t *len)
{
    tvocab *v = ctx;
    if (id >= v->n || !v->tok[id]) return NULL;
    *len = strlen(v->tok[id]);
    return v->tok[id];
}

/* Compare cached mask, reference walk and brute force at m's position. */
static void check_mask(grammar_matcher *m, const grammar_vocab *v)
{
    size_t w = grammar_mask_words(v);
    uint32_t *a = calloc(w, 4), *b = calloc(w, 4), *c = calloc(w, 4);
    grammar_matcher_fill_mask(m, a);
    gm_fill_mask_full(m, b);
    for (int32_t id = 0; id < grammar_vocab_size(v); id++) {
        if (grammar_matcher_accept_token(m, id)) {
            c[id >> 5] |= 1u << (id & 31);
            assert_int_equal(grammar_matcher_rollback(m, 1), 0);
        }
    }
    for (int32_t id = 0; id < grammar_vocab_size(v); id++) {
        int x = a[id >> 5] >> (id & 31) & 1, y = b[id >> 5] >> (id & 31) & 1, z = c[id >> 5] >> (id & 31) & 1;
        if (x != z || y != z) fail_msg("token %d: cached %d reference %d brute force %d", id, x, y, z);
    }
    free(a);
    free(b);
    free(c);
}

static const char *small_tok[] = {
    "<eos>", NULL /* special */, "a", "b", "ab", "\"", "\",", "\"}", "{", "}", "{\"", ":", ",", " ", "  ", "1", "12",
    "123", "\xC3", "\xA9", "\xC3\xA9", "\xE6\x97", "\xA5", "\xE6\x97\xA5", "\"a", "a\"", "a\",", "true", "tr", "ue",
    "null", "[", "]", "],", "\\", "\\n", "\\\"", "x", "\xFF", "\n", "\"\"", "\"}]", "key", "\":", "\": ", "{\"key",
    "1,", "1}", "-", ".5", "e", "\xF0\x9F", "\x98\x80", "\"\xC3", "\xA9\"",
};

static const char *json_grammar =
    "root ::= value\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\" ws\n"
    "member ::= string \":\" ws value\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt] )* \"\\\"\" ws\n"
    "number ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws ::= [ \\t\\n]*\n";

static void walk_checking(const grammar *g, const grammar_vocab *v, const char *text)
{
    grammar_matcher *m = grammar_matcher_new(g, v);
    assert_non_null(m);
    check_mask(m, v);
    for (size_t i = 0; text[i]; i++) {
        if (!grammar_matcher_accept_bytes(m, text + i, 1)) fail_msg("'%s' rejected at byte %zu", text, i);
        check_mask(m, v);
    }
    grammar_matcher_free(m);
}

static void test_masks_small(void **s)
{
    (void)s;
    tvocab tv = {small_tok, (int32_t)(sizeof small_tok / sizeof *small_tok)};
    int32_t eos = 0;
    grammar_vocab *v = grammar_vocab_new(tv.n, tv_bytes, &tv, &eos, 1);
    assert_non_null(v);
    char err[256];
    grammar *g = grammar_compile_ebnf(json_grammar, strlen(json_grammar), NULL, err, sizeof err);
    if (!g) fail_msg("%s", err);
    walk_checking(g, v, "{\"key\": [1, 12, \"a\xC3\xA9\xE6\x97\xA5\\n\", true, null, {}], \"b\":-1.5e3}");
    walk_checking(g, v, "[\"\xF0\x9F\x98\x80\"]");
    grammar_free(g);
    const char *re = "[a-c]{1,3}\"?(\xC3\xA9|\xE6\x97\xA5)*";
    g = grammar_compile_regex(re, strlen(re), err, sizeof err);
    assert_non_null(g);
    walk_checking(g, v, "ab\"\xC3\xA9\xE6\x97\xA5");
    grammar_free(g);
    grammar_vocab_free(v);
}

static void test_tokens_and_end(void **s)
{
    (void)s;
    tvocab tv = {small_tok, (int32_t)(sizeof small_tok / sizeof *small_tok)};
    int32_t eos = 0;
    grammar_vocab *v = grammar_vocab_new(tv.n, tv_bytes, &tv, &eos, 1);
    char err[256];
    const char *txt = "root ::= \"{\\\"\" [a-z]+ \"\\\"}\"";
    grammar *g = grammar_compile_ebnf(txt, strlen(txt), NULL, err, sizeof err);
    assert_non_null(g);
    grammar_matcher *m = grammar_matcher_new(g, v);
    size_t w = grammar_mask_words(v);
    uint32_t *mask = calloc(w, 4);
    /* special token (id 1) never, eos only at the end */
    assert_false(grammar_matcher_accept_token(m, 1));
    assert_false(grammar_matcher_accept_token(m, 0));
    assert_true(grammar_matcher_accept_token(m, 10)); /* {" */
    assert_true(grammar_matcher_accept_token(m, 42)); /* key */
    grammar_matcher_fill_mask(m, mask);
    assert_false(mask[0] & 1);
    assert_true(grammar_matcher_accept_token(m, 7)); /* "} : crosses the class into the literal */
    assert_true(grammar_matcher_can_end(m));
    grammar_matcher_fill_mask(m, mask);
    assert_true(mask[0] & 1);
    assert_int_equal(mask[0] & ~1u, 0);
    /* rollback two tokens, go another way */
    assert_int_equal(grammar_matcher_rollback(m, 2), 0);
    assert_false(grammar_matcher_can_end(m));
    assert_true(grammar_matcher_accept_token(m, 2)); /* a */
    assert_true(grammar_matcher_accept_token(m, 25)); /* a" */
    assert_true(grammar_matcher_accept_token(m, 9));  /* } */
    assert_true(grammar_matcher_accept_token(m, 0));  /* eos */
    assert_true(grammar_matcher_is_terminated(m));
    assert_false(grammar_matcher_accept_token(m, 2));
    assert_int_equal(grammar_matcher_rollback(m, 2), 0); /* eos and } */
    assert_false(grammar_matcher_is_terminated(m));
    assert_false(grammar_matcher_accept_token(m, 0));
    assert_true(grammar_matcher_accept_token(m, 9));
    assert_true(grammar_matcher_is_terminated(m)); /* nothing can follow: only eos */
    assert_int_equal(grammar_matcher_rollback(m, 99), -1);
    grammar_matcher_reset(m);
    assert_false(grammar_matcher_accept_token(m, 2));
    assert_true(grammar_matcher_accept_token(m, 45)); /* {"key */
    /* UTF-8 split: the class [a-z] rejects half an é */
    assert_false(grammar_matcher_accept_token(m, 18));
    free(mask);
    grammar_matcher_free(m);
    grammar_free(g);
    grammar_vocab_free(v);
}

static void test_apply_mask(void **s)
{
    (void)s;
    float lg[40];
    uint32_t mask[2] = {0x5, 0x80};
    for (int i = 0; i < 40; i++) lg[i] = 1.0f;
    grammar_apply_mask(lg, 40, mask);
    for (int i = 0; i < 40; i++) {
        int on = i == 0 || i == 2 || i == 39;
        if (on) assert_true(lg[i] == 1.0f);
        else assert_true(lg[i] < -1e30f);
    }
}

/* Real vocabularies: masks along a JSON text agree with brute force. */
static void real_vocab(const char *name)
{
    const char *shared = getenv("SGLC_SHARED");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/models/tokenizers/%s", shared ? shared : "../shared", name);
    if (access(dir, R_OK)) {
        skip();
        return;
    }
    char err[256];
    tok_load_opts lo = {0};
    tok_tokenizer *t = tok_load_dir(dir, &lo, err, sizeof err);
    if (!t) fail_msg("%s: %s", dir, err);
    tok_bytes_table *tb = tok_bytes_build(t);
    assert_non_null(tb);
    const int32_t *eos;
    size_t n_eos = tok_eos_ids(t, &eos);
    grammar_vocab *v = grammar_vocab_new(tok_bytes_vocab_size(tb), tok_bytes_get, tb, eos, n_eos);
    assert_non_null(v);
    /* the byte mapping: " {" is one token in both vocabularies */
    tok_ids ids = {0};
    const char *sample = "{\"a\": \"h\xC3\xA9llo w\"}";
    assert_int_equal(tok_encode(t, sample, strlen(sample), false, &ids), 0);
    grammar *g = grammar_compile_ebnf(json_grammar, strlen(json_grammar), NULL, err, sizeof err);
    assert_non_null(g);
    grammar_matcher *m = grammar_matcher_new(g, v);
    for (size_t i = 0; i < ids.n; i++) {
        if (i % 3 == 0) check_mask(m, v);
        if (!grammar_matcher_accept_token(m, ids.ids[i])) fail_msg("%s: token %zu (%d) rejected", name, i, ids.ids[i]);
    }
    assert_true(grammar_matcher_can_end(m));
    assert_true(n_eos > 0);
    assert_true(grammar_matcher_accept_token(m, eos[0]));
    grammar_matcher_free(m);
    grammar_free(g);
    tok_ids_free(&ids);
    grammar_vocab_free(v);
    tok_bytes_free(tb);
    tok_destroy(t);
}

static void test_real_llama3(void **s) { (void)s, real_vocab("llama3_1"); }
static void test_real_qwen3(void **s) { (void)s, real_vocab("qwen3"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ebnf_table),   cmocka_unit_test(test_regex_table),
        cmocka_unit_test(test_errors),       cmocka_unit_test(test_masks_small),
        cmocka_unit_test(test_tokens_and_end), cmocka_unit_test(test_apply_mask),
        cmocka_unit_test(test_real_llama3),  cmocka_unit_test(test_real_qwen3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
