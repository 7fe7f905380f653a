/* test_spec_ngram — the n-gram draft trie (src/spec/spec_ngram.c) and the
 * drafter's per-request state and back-off (src/spec/spec.c), no model:
 *
 * - a repeated sequence drafts its own continuation (the chain);
 * - BFS takes the most recent continuation, PROB the most frequent, and
 *   a sequence inserted call by call as it grows counts each n-gram once;
 * - windows: nothing drafts below min_match_window, the longest window
 *   wins;
 * - breadth: a short match with a wide breadth spends the budget on
 *   siblings (a short chain), a long match goes deep;
 * - capacity: random workloads never exceed it, evict, and the latest
 *   sequence still drafts; the hash table survives many deletions;
 * - the SGLang parameter checks; the drafter's back-off (drafts that
 *   never come true stop being proposed, and are probed again). */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "spec/spec.h"
#include "spec/spec_ngram.h"

static spec_ngram *mk(spec_match_type mt, int64_t capacity)
{
    spec_ngram_params p;
    spec_ngram_params_init(&p);
    p.match_type = mt;
    p.capacity = capacity;
    char err[256];
    spec_ngram *t = spec_ngram_create(&p, err, sizeof err);
    if (!t) fail_msg("create: %s", err);
    return t;
}

static void test_repeat_chain(void **state)
{
    (void)state;
    spec_ngram *t = mk(SPEC_MATCH_BFS, 100000);
    int32_t seq[] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3};
    int64_t n = 11;
    assert_int_equal(spec_ngram_insert(t, seq, n, 0), 0);
    int32_t d[16];
    /* "1 2 3" was followed by "4 5 6 7 8 1 2 3" */
    int k = spec_ngram_draft(t, seq, n, d, 11);
    int32_t want[] = {4, 5, 6, 7, 8, 1, 2, 3};
    assert_int_equal(k, 8);
    assert_memory_equal(d, want, sizeof want);
    /* the budget bounds the chain */
    assert_int_equal(spec_ngram_draft(t, seq, n, d, 3), 3);
    assert_memory_equal(d, want, 3 * sizeof(int32_t));
    /* a context never seen: nothing */
    int32_t other[] = {9, 10, 11};
    assert_int_equal(spec_ngram_draft(t, other, 3, d, 11), 0);
    spec_ngram_destroy(t);
}

static void test_recency_vs_frequency(void **state)
{
    (void)state;
    int32_t a[] = {5, 6, 8}, b[] = {5, 6, 7, 9, 9, 9}, ctx[] = {40, 5, 6};
    for (int mt = 0; mt < 2; mt++) {
        spec_ngram *t = mk((spec_match_type)mt, 100000);
        /* "5 6 8" twice (two sequences), then "5 6 7 9 9 9" growing one token
         * per call with repeated calls at the same length: its paths are
         * walked again as it grows, but "5 6 7" must count once */
        assert_int_equal(spec_ngram_insert(t, a, 3, 0), 0);
        assert_int_equal(spec_ngram_insert(t, a, 3, 0), 0);
        int64_t seen = 0;
        for (int64_t len = 1; len <= 6; len++)
            for (int rep = 0; rep < 4; rep++) {
                assert_int_equal(spec_ngram_insert(t, b, len, seen), 0);
                seen = len;
            }
        int32_t d[4];
        assert_int_equal(spec_ngram_draft(t, ctx, 3, d, 1), 1);
        /* BFS: the most recent continuation (7); PROB: the most frequent (8) */
        assert_int_equal(d[0], mt == SPEC_MATCH_BFS ? 7 : 8);
        spec_ngram_destroy(t);
    }
}

static void test_windows(void **state)
{
    (void)state;
    spec_ngram_params p;
    spec_ngram_params_init(&p);
    p.min_match_window = 2;
    p.max_match_window = 4;
    p.max_trie_depth = 8;
    char err[256];
    spec_ngram *t = spec_ngram_create(&p, err, sizeof err);
    assert_non_null(t);
    int32_t s1[] = {1, 2, 3, 4, 50}, s2[] = {9, 4, 60};
    assert_int_equal(spec_ngram_insert(t, s1, 5, 0), 0);
    assert_int_equal(spec_ngram_insert(t, s2, 3, 0), 0);
    int32_t d[4];
    /* only "4" matches (one token < min window 2): nothing */
    int32_t c1[] = {7, 7, 4};
    assert_int_equal(spec_ngram_draft(t, c1, 3, d, 1), 0);
    /* "3 4" matches: 50 (the more recent "4 -> 60" is a 1-token match) */
    int32_t c2[] = {7, 3, 4};
    assert_int_equal(spec_ngram_draft(t, c2, 3, d, 1), 1);
    assert_int_equal(d[0], 50);
    /* "9 4" matches: 60 */
    int32_t c3[] = {1, 9, 4};
    assert_int_equal(spec_ngram_draft(t, c3, 3, d, 1), 1);
    assert_int_equal(d[0], 60);
    spec_ngram_destroy(t);
}

/* Breadth (BFS): a 1-token match starts with breadth ~ max_bfs and fills
 * the budget with siblings; a 12-token match has breadth 1 and goes deep. */
static void test_breadth(void **state)
{
    (void)state;
    spec_ngram *t = mk(SPEC_MATCH_BFS, 100000);
    /* many continuations of token 3 (short contexts), one long sequence */
    for (int i = 0; i < 10; i++) {
        int32_t s[] = {100 + i, 3, 200 + i, 300 + i, 400 + i};
        assert_int_equal(spec_ngram_insert(t, s, 5, 0), 0);
    }
    int32_t longseq[40];
    for (int i = 0; i < 40; i++) longseq[i] = 1000 + i % 20; /* period 20: "1000..1019" twice */
    assert_int_equal(spec_ngram_insert(t, longseq, 40, 0), 0);
    int32_t d[16];
    int32_t shortctx[] = {7, 3};
    int k = spec_ngram_draft(t, shortctx, 2, d, 11);
    /* breadth (12 - 1) * 0.75 + 1 = 9 at the first level (209 .. 201, most
     * recent first), then the budget of 11 has room for 309 and 308: the
     * chain is the first branch, 3 -> 209 -> 309 */
    assert_int_equal(k, 2);
    assert_int_equal(d[0], 209);
    assert_int_equal(d[1], 309);
    /* with breadth 1 everywhere the same context goes deep */
    spec_ngram_params p;
    spec_ngram_params_init(&p);
    p.max_bfs_breadth = 1;
    char err[256];
    spec_ngram *t1 = spec_ngram_create(&p, err, sizeof err);
    for (int i = 0; i < 10; i++) {
        int32_t s[] = {100 + i, 3, 200 + i, 300 + i, 400 + i};
        assert_int_equal(spec_ngram_insert(t1, s, 5, 0), 0);
    }
    /* the whole tree of the same draft: 9 children of the root (209 .. 201),
     * then 309 under 209 and 308 under 208 (BFS order, the budget of 11);
     * its first branch is the chain */
    {
        int32_t td[16], tp[16];
        int n = spec_ngram_draft_tree(t, NULL, shortctx, 2, td, tp, 11);
        assert_int_equal(n, 11);
        for (int i = 0; i < 9; i++) {
            assert_int_equal(td[i], 209 - i);
            assert_int_equal(tp[i], -1);
        }
        assert_int_equal(td[9], 309);
        assert_int_equal(tp[9], 0);
        assert_int_equal(td[10], 308);
        assert_int_equal(tp[10], 1);
        for (int i = 0; i < n; i++) assert_true(tp[i] >= -1 && tp[i] < i);
    }
    k = spec_ngram_draft(t1, shortctx, 2, d, 11);
    assert_int_equal(k, 3);
    assert_int_equal(d[2], 409);
    spec_ngram_destroy(t1);
    /* the long periodic context: a deep chain of its continuation */
    k = spec_ngram_draft(t, longseq, 30, d, 11);
    assert_int_equal(k, 11);
    for (int i = 0; i < 11; i++) assert_int_equal(d[i], 1000 + (30 + i) % 20);
    spec_ngram_destroy(t);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_capacity_eviction(void **state)
{
    (void)state;
    const int64_t caps[] = {19, 64, 1000};
    for (int c = 0; c < 3; c++) {
        spec_ngram *t = mk(SPEC_MATCH_BFS, caps[c]);
        uint64_t r = 88172645463325252ULL + (uint64_t)c;
        int32_t seq[64];
        for (int it = 0; it < 400; it++) {
            int n = 4 + (int)(rnd(&r) % 20);
            for (int i = 0; i < n; i++) seq[i] = (int32_t)(rnd(&r) % 50);
            /* grow it in pieces, as the drafter does */
            int64_t seen = 0;
            for (int64_t len = 1; len <= n; len += 1 + (int64_t)(rnd(&r) % 4)) {
                assert_int_equal(spec_ngram_insert(t, seq, len, seen), 0);
                seen = len;
            }
            assert_int_equal(spec_ngram_insert(t, seq, n, seen), 0);
            assert_true(spec_ngram_size(t) <= caps[c]);
            /* the newest sequence drafts its continuation (depth-limited,
             * unless eviction took it: only the tiny trie may) */
            int32_t d[16];
            int k = spec_ngram_draft(t, seq, 3, d, 1);
            if (caps[c] >= 1000) {
                assert_int_equal(k, 1);
                /* the most recent continuation of seq[0..3) is seq[3] unless
                 * seq[0..3) occurs again later in seq */
                bool again = false;
                for (int i = 1; i + 3 < n; i++) again |= !memcmp(seq + i, seq, 3 * sizeof(int32_t));
                if (!again) assert_int_equal(d[0], seq[3]);
            }
        }
        assert_true(spec_ngram_evictions(t) > 0);
        spec_ngram_destroy(t);
    }
}

/* The cursor (one lookup per open path per token) against the reference
 * insertion (every path re-walked from the root): the same n-grams with
 * the same counts; the cursor's anchors give the same drafts as looking
 * the windows up; under a small capacity it stays within it and drafts. */
static void test_cursor_matches_reference(void **state)
{
    (void)state;
    for (int mt = 0; mt < 2; mt++) {
        spec_ngram *ref = mk((spec_match_type)mt, 1000000), *cur = mk((spec_match_type)mt, 1000000);
        uint64_t r = 0x1234567ULL + (uint64_t)mt;
        enum { NSEQ = 12, LEN = 150 };
        static int32_t seqs[NSEQ][LEN];
        spec_ngram_cursor cs[NSEQ];
        int64_t seen[NSEQ], len[NSEQ];
        for (int q = 0; q < NSEQ; q++) {
            /* a small vocabulary and repeated phrases: many shared n-grams */
            for (int i = 0; i < LEN; i++)
                seqs[q][i] = (rnd(&r) % 3 == 0) ? (int32_t)(rnd(&r) % 12) : seqs[q][i >= 7 ? i - 7 : 0] + (i < 7 ? i : 0);
            assert_int_equal(spec_ngram_cursor_init(cur, &cs[q]), 0);
            seen[q] = 0;
            len[q] = 1 + (int64_t)(rnd(&r) % 20);
        }
        /* the sequences grow interleaved, a few tokens at a time */
        for (int round = 0; round < 60; round++)
            for (int q = 0; q < NSEQ; q++) {
                if (len[q] > LEN) continue;
                assert_int_equal(spec_ngram_insert(ref, seqs[q], len[q], seen[q]), 0);
                seen[q] = len[q];
                assert_int_equal(spec_ngram_advance(cur, &cs[q], seqs[q], len[q]), 0);
                int32_t d1[16], d2[16];
                int n1 = spec_ngram_draft(cur, seqs[q], len[q], d1, 11);
                int n2 = spec_ngram_draft_cursor(cur, &cs[q], seqs[q], len[q], d2, 11);
                assert_int_equal(n1, n2);
                assert_memory_equal(d1, d2, sizeof(int32_t) * (size_t)n1);
                len[q] += 1 + (int64_t)(rnd(&r) % 3);
            }
        assert_int_equal(spec_ngram_size(ref), spec_ngram_size(cur));
        /* every n-gram of every sequence: the same count */
        int checked = 0;
        for (int q = 0; q < NSEQ; q++)
            for (int64_t i = 0; i < seen[q]; i++)
                for (int n = 1; n <= 18 && i + n <= seen[q]; n++) {
                    uint32_t a = spec_ngram_freq(ref, seqs[q] + i, n), b = spec_ngram_freq(cur, seqs[q] + i, n);
                    if (a != b) fail_msg("seq %d pos %lld n %d: freq %u vs %u", q, (long long)i, n, a, b);
                    assert_true(a > 0);
                    checked++;
                }
        assert_true(checked > 1000);
        for (int q = 0; q < NSEQ; q++) spec_ngram_cursor_free(&cs[q]);
        spec_ngram_destroy(ref);
        spec_ngram_destroy(cur);
    }
    /* small capacity: evictions drop cursor paths; drafts still work */
    spec_ngram *t = mk(SPEC_MATCH_BFS, 200);
    uint64_t r = 99;
    spec_ngram_cursor c;
    assert_int_equal(spec_ngram_cursor_init(t, &c), 0);
    int32_t seq[3000];
    for (int i = 0; i < 3000; i++) seq[i] = i % 37 == 0 ? (int32_t)(rnd(&r) % 1000) : (int32_t)(i % 9);
    int drafted = 0;
    for (int64_t l = 1; l <= 3000; l++) {
        assert_int_equal(spec_ngram_advance(t, &c, seq, l), 0);
        assert_true(spec_ngram_size(t) <= 200);
        int32_t d[16];
        drafted += spec_ngram_draft_cursor(t, &c, seq, l, d, 4) > 0;
    }
    assert_true(spec_ngram_evictions(t) > 0);
    assert_true(drafted > 1000);
    spec_ngram_cursor_free(&c);
    spec_ngram_destroy(t);
}

static void test_params(void **state)
{
    (void)state;
    spec_ngram_params p;
    char err[256];
    spec_ngram_params_init(&p);
    assert_int_equal(spec_ngram_params_check(&p, err, sizeof err), 0);
    p.min_match_window = 5, p.max_match_window = 4;
    assert_int_equal(spec_ngram_params_check(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "--speculative-ngram-min-match-window-size (5)"));
    spec_ngram_params_init(&p);
    p.max_match_window = 18;
    assert_int_equal(spec_ngram_params_check(&p, err, sizeof err), -1);
    assert_non_null(strstr(err, "must be less than --speculative-ngram-max-trie-depth (18)"));
    spec_ngram_params_init(&p);
    p.min_bfs_breadth = 0;
    assert_int_equal(spec_ngram_params_check(&p, err, sizeof err), -1);
    spec_ngram_params_init(&p);
    p.min_bfs_breadth = 11;
    assert_int_equal(spec_ngram_params_check(&p, err, sizeof err), -1);
    spec_ngram_params_init(&p);
    p.capacity = 10;
    assert_int_equal(spec_ngram_params_check(&p, err, sizeof err), -1);
    assert_null(spec_ngram_create(&p, err, sizeof err));
    spec_ngram_params_init(&p);
    p.min_match_window = 0;
    assert_int_equal(spec_ngram_params_check(&p, err, sizeof err), -1);
}

/* The drafter on a sequence whose drafts never come true: after the
 * back-off it proposes on few calls only, and still probes. */
static void test_drafter_backoff(void **state)
{
    (void)state;
    spec_args a;
    spec_args_init(&a);
    a.algo = SPEC_ALGO_NGRAM;
    char err[256];
    spec_drafter *d = spec_drafter_create(&a, err, sizeof err);
    assert_non_null(d);
    /* request 1: "1 2 3 4" repeated, and it keeps repeating: drafts right */
    int32_t seq[600];
    int64_t len = 0;
    for (; len < 12; len++) seq[len] = 1 + (int32_t)(len % 4);
    int32_t dr[16];
    int proposed_calls = 0;
    for (int step = 0; step < 50; step++) {
        int n = spec_drafter_draft(d, 1, 0, seq, len, dr, 11);
        proposed_calls += n > 0;
        for (int k = 0; k < n; k++) assert_int_equal(dr[k], 1 + (int32_t)((len + k) % 4));
        /* the "model" accepts them all and adds one */
        for (int k = 0; k <= n && len < 600; k++, len++) seq[len] = 1 + (int32_t)(len % 4);
        if (len >= 590) break;
    }
    assert_true(proposed_calls > 0);
    spec_drafter_stats st;
    spec_drafter_get_stats(d, &st);
    assert_true(st.right > 0);
    assert_int_equal(st.skipped, 0);
    /* request 2: the same pattern in its prompt, then an output that never
     * follows it (drafts always wrong) */
    int32_t s2[2000];
    int64_t l2 = 0;
    for (; l2 < 12; l2++) s2[l2] = 1 + (int32_t)(l2 % 4);
    int calls = 0, with_draft = 0;
    for (int step = 0; step < 400; step++) {
        s2[l2] = 1 + (int32_t)(l2 % 4); /* keep the context matching ... */
        int n = spec_drafter_draft(d, 2, 0, s2, l2 + 1, dr, 11);
        calls++;
        with_draft += n > 0;
        /* ... but the next token is never the drafted one */
        s2[l2 + 1] = n > 0 ? dr[0] + 100 : 7;
        l2 += 2;
        if (l2 + 2 >= 2000) break;
    }
    spec_drafter_get_stats(d, &st);
    assert_true(st.skipped > 0);
    assert_true(with_draft > 3);            /* it probes again */
    assert_true(with_draft * 8 < calls);    /* but rarely */
    assert_int_equal(st.tracked, 2);
    spec_drafter_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeat_chain),      cmocka_unit_test(test_recency_vs_frequency),
        cmocka_unit_test(test_windows),           cmocka_unit_test(test_breadth),
        cmocka_unit_test(test_capacity_eviction), cmocka_unit_test(test_params),
        cmocka_unit_test(test_drafter_backoff),   cmocka_unit_test(test_cursor_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
