/* test_grammar_close — grammar_close.c: the fewest bytes that complete a
 * grammar from a matcher's position, and the budget-narrowed mask.
 * Distances are checked against values worked out by hand from each
 * grammar; the mask against a brute-force accept of every token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grammar/grammar.h"

static grammar *compile(const char *text)
{
    char err[256];
    grammar *g = grammar_compile_ebnf(text, strlen(text), NULL, err, sizeof err);
    if (!g) fail_msg("compile: %s", err);
    return g;
}

static int32_t dist_after(const grammar *g, const char *prefix)
{
    grammar_matcher *m = grammar_matcher_new(g, NULL);
    assert_non_null(m);
    if (*prefix) assert_true(grammar_matcher_accept_bytes(m, prefix, strlen(prefix)));
    int32_t d = grammar_matcher_min_bytes_to_end(m);
    grammar_matcher_free(m);
    return d;
}

static void test_distances(void **state)
{
    (void)state;
    grammar *g = compile("root ::= \"abc\" | \"x\" [0-9]+ \"yz\"");
    assert_int_equal(dist_after(g, ""), 3);     /* "abc" beats "x0yz" */
    assert_int_equal(dist_after(g, "x"), 3);    /* a digit, then "yz" */
    assert_int_equal(dist_after(g, "x12"), 2);  /* "yz" */
    assert_int_equal(dist_after(g, "ab"), 1);
    assert_int_equal(dist_after(g, "abc"), 0);  /* may end */
    grammar_free(g);
    /* references count at their rule's shortest length; recursion */
    g = compile("root ::= obj\nobj ::= \"{\" ws ( pair ( \",\" ws pair )* )? \"}\"\n"
                "pair ::= \"\\\"\" [a-z]+ \"\\\":\" obj\nws ::= [ ]*");
    assert_int_equal(dist_after(g, ""), 2);          /* {} */
    assert_int_equal(dist_after(g, "{\"k"), 5);      /* ":{}} */
    assert_int_equal(dist_after(g, "{\"k\":{\"a\":{"), 3); /* }}} */
    grammar_free(g);
    /* a grammar that cannot end from here: never, since nothing completes */
    g = compile("root ::= \"a\" root | \"b\"");
    assert_int_equal(dist_after(g, "aaa"), 1);
    grammar_free(g);
}

typedef struct tvocab {
    const char *tok[16];
    int n;
} tvocab;

static const char *tv_bytes(void *ctx, int32_t id, size_t *len)
{
    tvocab *v = ctx;
    if (id >= v->n || !v->tok[id]) return NULL;
    *len = strlen(v->tok[id]);
    return v->tok[id];
}

static void test_budget_mask(void **state)
{
    (void)state;
    /* JSON-ish: an array of words; whitespace unbounded */
    grammar *g = compile("root ::= \"[\" ws ( w ( \",\" ws w )* )? ws \"]\"\nw ::= [a-z]+\nws ::= [ ]*");
    tvocab tv = {{"[", "]", ",", " ", "    ", "a", "abc", "abcdefgh", "[]", "eos"}, 10};
    int32_t eos = 9;
    grammar_vocab *v = grammar_vocab_new(tv.n, tv_bytes, &tv, &eos, 1);
    grammar_matcher *m = grammar_matcher_new(g, v);
    assert_non_null(m);
    assert_true(grammar_matcher_accept_token(m, 0)); /* "[" */
    assert_true(grammar_matcher_accept_token(m, 6)); /* "abc" */
    assert_int_equal(grammar_matcher_min_bytes_to_end(m), 1); /* "]" */
    size_t words = grammar_mask_words(v);
    uint32_t plain[1] = {0}, within[1] = {0};
    assert_int_equal(words, 1);
    grammar_matcher_fill_mask(m, plain);
    /* plenty of budget: nothing removed */
    grammar_matcher_fill_mask_within(m, within, 50);
    assert_int_equal(within[0], plain[0]);
    /* budget 2: after this token at most 1 byte may remain */
    grammar_matcher_fill_mask_within(m, within, 2);
    for (int id = 0; id < tv.n; id++) {
        int in_plain = (plain[0] >> id) & 1, in_within = (within[0] >> id) & 1;
        if (!in_plain) {
            assert_false(in_within);
            continue;
        }
        /* brute force: accept, the rest must fit in 1 byte */
        int want = 0;
        if (grammar_matcher_accept_token(m, id)) {
            int32_t rest = grammar_matcher_min_bytes_to_end(m);
            want = rest >= 0 && rest <= 1;
            grammar_matcher_rollback(m, 1);
        }
        if (want != in_within) fail_msg("token %d '%s': within %d, want %d", id, tv.tok[id], in_within, want);
    }
    assert_true((within[0] >> 1) & 1);  /* "]" closes */
    assert_true((within[0] >> 5) & 1);  /* "a" keeps 1 byte ("]") */
    assert_false((within[0] >> 2) & 1); /* "," needs a word and "]" after it */
    /* budget 1: only what ends now */
    grammar_matcher_fill_mask_within(m, within, 1);
    assert_int_equal(within[0], 1u << 1);
    grammar_matcher_free(m);
    grammar_vocab_free(v);
    grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distances),
        cmocka_unit_test(test_budget_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
