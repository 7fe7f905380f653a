/* test_grammar_fast — the mask walk's fast paths against brute force.
 *
 * grammar_mask.c steps a byte from the walk's anchor set once and aliases
 * the set for later tokens when the byte maps it to itself (the plain
 * characters of a JSON string).  Here, on random states reached by seeded
 * random walks (each step takes a random token the brute force allows),
 * the cached mask and the uncached walk must equal a brute-force
 * accept_token + rollback of every token: over a synthetic vocabulary rich
 * in long string-content tokens, quotes and escapes in the middle of
 * tokens, split UTF-8, and (when present) over the real Llama 3.1
 * vocabulary.
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

static const char *toks[] = {
    "<eos>", NULL, "a", "b", "ab", "abc", "abcd", "abcde", "abcdef", "aaaaaaaaaaaaaaaa", "aaaa\"", "aaaa\",",
    "aaaa\"}", "aa\"aa", "ab\\nab", "ab\\\"ab", "\\", "\\n", "\\u", "\\u00e9", "00", "e9", "\"", "\",", "\"}", "\"]",
    "{", "}", "[", "]", "{\"", "\":", "\": ", ":", ",", ", ", " ", "  ", "   \"", "\n", "1", "12", "123", "-", ".",
    ".5", "e", "E+", "true", "false", "null", "tr", "ue", "\xC3", "\xA9", "\xC3\xA9", "a\xC3", "\xA9z", "\xE6\x97",
    "\xA5", "\xE6\x97\xA5", "\xF0\x9F", "\x98\x80", "\xFF", "\x01", "\"\"", "\"a\"", "\"ab\": \"cd\"", "name",
    "\"name\"", "\"name\": \"", "x\"}]", "zzzzzzzzzzzzzzzzzzzzzzzz\"", "a b c d e f g h", "abc, def",
    /* alike byte by byte until an escape, then not */
    "a\\nb", "a\\zb", "ab\\\"c", "ab\\qc", "b\\u00", "b\\uzz",
};

static const char *grammars[] = {
    /* JSON */
    "root ::= value\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\" ws\n"
    "member ::= string \":\" ws value\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws ::= [ \\t\\n]*\n",
    /* an object with a fixed key, a bounded string and a string array */
    "root ::= \"{\\\"name\\\": \" str \", \\\"tags\\\": [\" (str (\", \" str)*)? \"]}\"\n"
    "str ::= \"\\\"\" [a-z \\u00e9\\u65e5]{0,12} \"\\\"\"\n",
    /* strings nested deeper than the cache's context */
    "root ::= \"[\" a (\",\" a)* \"]\"\na ::= b\nb ::= c\nc ::= \"\\\"\" [^\"\\\\]* \"\\\"\" | [0-9]+\n",
    /* one string rule (bounded and unbounded content) in several
     * surrounding contexts three frames deep, two of them (through w)
     * equal in their top two frames and different in the third */
    "root ::= \"[\" v (\",\" \" \"? v)* \"]\" | (\"{\" w \"}\" | \":\" w \"]\")+\nw ::= s\n"
    "v ::= p | q | \"{\" kv (\", \" kv)* \"}\"\n"
    "p ::= s \"}\" | s \",\" s\nq ::= s \": \" s \"]\"?\nkv ::= s \": \" (s | \"12\")\n"
    "s ::= \"\\\"\" ([a-z \\u00e9]{2,6} | \"n\" jc*) \"\\\"\"\njc ::= [^\"\\\\] | \"\\\\\" [\"n]\n",
};

static void brute(grammar_matcher *m, const grammar_vocab *v, uint32_t *c, size_t w)
{
    memset(c, 0, w * 4);
    for (int32_t id = 0; id < grammar_vocab_size(v); id++)
        if (grammar_matcher_accept_token(m, id)) {
            c[id >> 5] |= 1u << (id & 31);
            assert_int_equal(grammar_matcher_rollback(m, 1), 0);
        }
}

/* Seeded random walks of up to steps tokens; masks checked every
 * `every` steps; returns how many masks were compared. */
static int random_walks(const grammar *g, const grammar_vocab *v, int walks, int steps, int every, unsigned seed)
{
    size_t w = grammar_mask_words(v);
    uint32_t *a = calloc(w, 4), *b = calloc(w, 4), *c = calloc(w, 4);
    assert_true(a && b && c);
    int compared = 0;
    for (int k = 0; k < walks; k++) {
        grammar_matcher *m = grammar_matcher_new(g, v);
        assert_non_null(m);
        for (int s = 0; s < steps && !grammar_matcher_is_terminated(m); s++) {
            brute(m, v, c, w);
            if (s % every == 0) {
                grammar_matcher_fill_mask(m, a);
                gm_fill_mask_full(m, b);
                for (int32_t id = 0; id < grammar_vocab_size(v); id++) {
                    int x = a[id >> 5] >> (id & 31) & 1, y = b[id >> 5] >> (id & 31) & 1, z = c[id >> 5] >> (id & 31) & 1;
                    if (x != z || y != z)
                        fail_msg("walk %d step %d token %d: cached %d walk %d brute force %d", k, s, id, x, y, z);
                }
                compared++;
            }
            int32_t n = 0, pick = -1;
            for (size_t i = 0; i < w; i++) n += __builtin_popcount(c[i]);
            if (!n) break;
            seed = seed * 1103515245u + 12345u;
            int32_t kth = (int32_t)((seed >> 8) % (uint32_t)n);
            for (int32_t id = 0; id < grammar_vocab_size(v) && pick < 0; id++)
                if (c[id >> 5] >> (id & 31) & 1 && kth-- == 0) pick = id;
            assert_true(pick >= 0);
            assert_true(grammar_matcher_accept_token(m, pick));
        }
        grammar_matcher_free(m);
    }
    free(a);
    free(b);
    free(c);
    return compared;
}

static void test_random_states_small(void **s)
{
    (void)s;
    tvocab tv = {toks, (int32_t)(sizeof toks / sizeof *toks)};
    int32_t eos = 0;
    grammar_vocab *v = grammar_vocab_new(tv.n, tv_bytes, &tv, &eos, 1);
    assert_non_null(v);
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++) {
        char err[256];
        grammar *g = grammar_compile_ebnf(grammars[i], strlen(grammars[i]), NULL, err, sizeof err);
        if (!g) fail_msg("grammar %zu: %s", i, err);
        assert_true(random_walks(g, v, 12, 60, 1, 7u + (unsigned)i) > 100);
        grammar_free(g);
    }
    grammar_vocab_free(v);
}

static void test_random_states_llama3(void **s)
{
    (void)s;
    const char *shared = getenv("SGLC_SHARED");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/models/tokenizers/llama3_1", shared ? shared : "../shared");
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
    for (size_t i = 0; i < 2; i++) {
        grammar *g = grammar_compile_ebnf(grammars[i], strlen(grammars[i]), NULL, err, sizeof err);
        if (!g) fail_msg("grammar %zu: %s", i, err);
        assert_true(random_walks(g, v, 2, 12, 3, 99u + (unsigned)i) >= 2);
        grammar_free(g);
    }
    grammar_vocab_free(v);
    tok_bytes_free(tb);
    tok_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_states_small),
        cmocka_unit_test(test_random_states_llama3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
