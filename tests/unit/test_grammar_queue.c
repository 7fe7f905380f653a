/* test_grammar_queue — the grammar cache (keys, LRU under a byte bound,
 * references outliving eviction, cached failures) and the grammar queue
 * (compiles off the caller's thread, cache hits done at once, failures,
 * abandoned jobs skipped, notify, destroy with jobs queued).  The values
 * are plain strings from a fake compile function: the queue and cache
 * never call the grammar engine. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "grammar/grammar_cache.h"
#include "grammar/grammar_queue.h"
#include "util/timeutil.h"

static atomic_int n_freed, n_compiled, n_notified;

static void free_str(void *v)
{
    atomic_fetch_add(&n_freed, 1);
    free(v);
}

static grammar_key K(grammar_kind kind, const char *t, uint32_t opts)
{
    grammar_key k = {kind, t, strlen(t), opts};
    return k;
}

static void test_cache_keys_and_hits(void **state)
{
    (void)state;
    atomic_store(&n_freed, 0);
    grammar_cache *c = grammar_cache_create(1 << 20, free_str);
    assert_non_null(c);
    grammar_key a = K(GRAMMAR_KIND_JSON, "{\"type\":\"object\"}", 0);
    assert_null(grammar_cache_get(c, &a));
    grammar_entry *e = grammar_cache_put(c, &a, strdup("A"), 10, NULL);
    assert_non_null(e);
    assert_string_equal(grammar_entry_value(e), "A");
    assert_string_equal(grammar_entry_error(e), "");
    grammar_entry_release(e);
    /* same text, other kind / options: other keys */
    grammar_key b = K(GRAMMAR_KIND_REGEX, "{\"type\":\"object\"}", 0);
    grammar_key s = K(GRAMMAR_KIND_JSON, "{\"type\":\"object\"}", GRAMMAR_OPT_STRICT);
    assert_null(grammar_cache_get(c, &b));
    assert_null(grammar_cache_get(c, &s));
    e = grammar_cache_get(c, &a);
    assert_non_null(e);
    assert_string_equal(grammar_entry_value(e), "A");
    grammar_entry_release(e);
    /* a second put of a present key returns the present entry, frees the new value */
    e = grammar_cache_put(c, &a, strdup("A2"), 10, NULL);
    assert_string_equal(grammar_entry_value(e), "A");
    assert_int_equal(atomic_load(&n_freed), 1);
    grammar_entry_release(e);
    /* failures are cached with their reason */
    grammar_key bad = K(GRAMMAR_KIND_EBNF, "root ::= ", 0);
    e = grammar_cache_put(c, &bad, NULL, 0, "expected an expression at 1:10");
    assert_null(grammar_entry_value(e));
    assert_string_equal(grammar_entry_error(e), "expected an expression at 1:10");
    grammar_entry_release(e);
    e = grammar_cache_get(c, &bad);
    assert_non_null(e);
    assert_string_equal(grammar_entry_error(e), "expected an expression at 1:10");
    grammar_entry_release(e);
    grammar_cache_stats st;
    grammar_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 3);
    /* many keys: the table grows and every key is still found */
    char buf[64];
    for (int i = 0; i < 500; i++) {
        snprintf(buf, sizeof buf, "re%d", i);
        grammar_key k = K(GRAMMAR_KIND_REGEX, buf, 0);
        grammar_entry_release(grammar_cache_put(c, &k, strdup(buf), 1, NULL));
    }
    for (int i = 0; i < 500; i++) {
        snprintf(buf, sizeof buf, "re%d", i);
        grammar_key k = K(GRAMMAR_KIND_REGEX, buf, 0);
        e = grammar_cache_get(c, &k);
        assert_non_null(e);
        assert_string_equal(grammar_entry_value(e), buf);
        grammar_entry_release(e);
    }
    grammar_cache_clear(c);
    grammar_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(atomic_load(&n_freed), 1 + 1 + 500);
    grammar_cache_destroy(c);
}

static void test_cache_lru_bound(void **state)
{
    (void)state;
    atomic_store(&n_freed, 0);
    /* each entry: 1000 value bytes + key + the entry header; room for 3 */
    grammar_cache *c = grammar_cache_create(3 * 1200, free_str);
    grammar_key k1 = K(GRAMMAR_KIND_REGEX, "a", 0), k2 = K(GRAMMAR_KIND_REGEX, "b", 0),
                k3 = K(GRAMMAR_KIND_REGEX, "c", 0), k4 = K(GRAMMAR_KIND_REGEX, "d", 0);
    grammar_entry_release(grammar_cache_put(c, &k1, strdup("1"), 1000, NULL));
    grammar_entry_release(grammar_cache_put(c, &k2, strdup("2"), 1000, NULL));
    grammar_entry_release(grammar_cache_put(c, &k3, strdup("3"), 1000, NULL));
    /* touch k1: k2 is now the least recently used */
    grammar_entry *held = grammar_cache_get(c, &k1);
    grammar_entry *h2 = grammar_cache_get(c, &k2); /* hold k2 ... */
    grammar_entry_release(grammar_cache_get(c, &k1)); /* ... but touch k1 after it */
    grammar_entry_release(grammar_cache_get(c, &k3));
    /* order now (recent first): k3 k1 k2 -> inserting k4 evicts k2 */
    grammar_entry_release(grammar_cache_put(c, &k4, strdup("4"), 1000, NULL));
    grammar_entry *e = grammar_cache_get(c, &k2);
    assert_null(e);
    /* evicted but still referenced: alive, not freed */
    assert_int_equal(atomic_load(&n_freed), 0);
    assert_string_equal(grammar_entry_value(h2), "2");
    grammar_entry_release(h2);
    assert_int_equal(atomic_load(&n_freed), 1);
    grammar_cache_stats st;
    grammar_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.evictions, 1);
    assert_true(st.bytes <= st.max_bytes);
    /* one entry larger than the whole bound: kept alone */
    grammar_key big = K(GRAMMAR_KIND_EBNF, "big", 0);
    grammar_entry_release(grammar_cache_put(c, &big, strdup("B"), 100000, NULL));
    grammar_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 1);
    e = grammar_cache_get(c, &big);
    assert_non_null(e);
    grammar_entry_release(e);
    assert_string_equal(grammar_entry_value(held), "1"); /* k1 evicted, still held */
    grammar_cache_destroy(c);
    assert_int_equal(atomic_load(&n_freed), 4); /* 2, 3, 4, big; k1 still held */
    grammar_entry_release(held);
    assert_int_equal(atomic_load(&n_freed), 5);
}

/* fake compile: "bad..." fails, "slow..." sleeps 200 ms, else the value
 * is the text with the thread it ran on noted */
static pthread_t caller_thread;
static atomic_bool ran_elsewhere;

static void *fake_compile(void *ctx, const grammar_key *k, size_t *bytes, char *err, size_t errlen)
{
    (void)ctx;
    atomic_fetch_add(&n_compiled, 1);
    if (!pthread_equal(pthread_self(), caller_thread)) atomic_store(&ran_elsewhere, true);
    if (!strncmp(k->text, "slow", 4)) usleep(200000);
    if (!strncmp(k->text, "bad", 3)) {
        snprintf(err, errlen, "cannot compile '%.*s'", (int)k->len, k->text);
        return NULL;
    }
    *bytes = k->len;
    return strndup(k->text, k->len);
}

static void notified(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&n_notified, 1);
}

static void wait_done(grammar_job *j)
{
    double t0 = time_now_sec();
    while (!grammar_job_done(j) && time_now_sec() - t0 < 10) usleep(1000);
    assert_true(grammar_job_done(j));
}

static void test_queue(void **state)
{
    (void)state;
    atomic_store(&n_freed, 0);
    atomic_store(&n_compiled, 0);
    atomic_store(&n_notified, 0);
    caller_thread = pthread_self();
    grammar_queue_opts o = {.n_threads = 1, .compile = fake_compile, .free_value = free_str};
    grammar_queue *q = grammar_queue_create(&o);
    assert_non_null(q);
    grammar_queue_set_notify(q, notified, NULL);
    grammar_key a = K(GRAMMAR_KIND_REGEX, "[a-z]+", 0);
    grammar_job *j = grammar_queue_submit(q, &a);
    assert_non_null(j);
    wait_done(j);
    assert_true(atomic_load(&ran_elsewhere));
    assert_string_equal(grammar_entry_value(grammar_job_entry(j)), "[a-z]+");
    grammar_entry *keep = grammar_entry_ref(grammar_job_entry(j));
    grammar_job_release(j);
    assert_string_equal(grammar_entry_value(keep), "[a-z]+");
    grammar_entry_release(keep);
    /* the same key again: a cache hit, done at submit, no compile */
    j = grammar_queue_submit(q, &a);
    assert_true(grammar_job_done(j));
    assert_int_equal(atomic_load(&n_compiled), 1);
    grammar_job_release(j);
    /* a failure, then the same bad key: cached failure, no second compile */
    grammar_key bad = K(GRAMMAR_KIND_JSON, "bad schema", 0);
    j = grammar_queue_submit(q, &bad);
    wait_done(j);
    assert_null(grammar_entry_value(grammar_job_entry(j)));
    assert_string_equal(grammar_entry_error(grammar_job_entry(j)), "cannot compile 'bad schema'");
    grammar_job_release(j);
    j = grammar_queue_submit(q, &bad);
    assert_true(grammar_job_done(j));
    assert_string_equal(grammar_entry_error(grammar_job_entry(j)), "cannot compile 'bad schema'");
    grammar_job_release(j);
    assert_int_equal(atomic_load(&n_compiled), 2);
    assert_int_equal(atomic_load(&n_notified), 2);
    /* a slow job holds the thread; a job queued behind it and abandoned
     * is skipped; a third one behind it runs; submit never waits */
    grammar_key slow = K(GRAMMAR_KIND_EBNF, "slow grammar", 0);
    grammar_key gone = K(GRAMMAR_KIND_EBNF, "abandoned", 0);
    grammar_key next = K(GRAMMAR_KIND_EBNF, "next", 0);
    double t0 = time_now_sec();
    grammar_job *js = grammar_queue_submit(q, &slow);
    grammar_job *jg = grammar_queue_submit(q, &gone);
    grammar_job *jn = grammar_queue_submit(q, &next);
    assert_true(time_now_sec() - t0 < 0.1);
    assert_false(grammar_job_done(jn));
    assert_true(grammar_queue_pending(q) >= 2);
    grammar_job_release(jg);
    wait_done(js);
    wait_done(jn);
    assert_string_equal(grammar_entry_value(grammar_job_entry(jn)), "next");
    grammar_job_release(js);
    grammar_job_release(jn);
    assert_int_equal(atomic_load(&n_compiled), 4); /* slow + next; "abandoned" never compiled */
    grammar_cache_stats st;
    grammar_cache_get_stats(grammar_queue_cache(q), &st);
    assert_int_equal(st.entries, 4); /* [a-z]+, bad, slow, next */
    /* destroy while jobs are queued behind a slow one: they end as failures */
    grammar_key slow2 = K(GRAMMAR_KIND_EBNF, "slow two", 0);
    grammar_key q1 = K(GRAMMAR_KIND_EBNF, "queued", 0);
    grammar_job *j1 = grammar_queue_submit(q, &slow2);
    usleep(20000); /* let the worker take slow2 */
    grammar_job *j2 = grammar_queue_submit(q, &q1);
    grammar_entry *e2 = NULL;
    grammar_queue_destroy(q);
    assert_true(grammar_job_done(j1));
    assert_true(grammar_job_done(j2));
    e2 = grammar_job_entry(j2);
    assert_non_null(e2);
    assert_string_equal(grammar_entry_error(e2), "the grammar queue was stopped");
    grammar_job_release(j1);
    grammar_job_release(j2);
    /* every compiled value freed once everything is released */
    assert_int_equal(atomic_load(&n_freed), 4);
}

/* many threads submitting the same few keys at once: every job ends with
 * the right value, each key is cached once */
static grammar_queue *g_q;

static void *submitter(void *arg)
{
    intptr_t t = (intptr_t)arg;
    char buf[32];
    for (int i = 0; i < 200; i++) {
        snprintf(buf, sizeof buf, "k%d", (int)((i + t) % 7));
        grammar_key k = K(GRAMMAR_KIND_REGEX, buf, 0);
        grammar_job *j = grammar_queue_submit(g_q, &k);
        if (!j) return (void *)1;
        while (!grammar_job_done(j)) usleep(100);
        const char *v = grammar_entry_value(grammar_job_entry(j));
        int ok = v && !strcmp(v, buf);
        grammar_job_release(j);
        if (!ok) return (void *)1;
    }
    return NULL;
}

static void test_queue_threads(void **state)
{
    (void)state;
    atomic_store(&n_freed, 0);
    atomic_store(&n_compiled, 0);
    caller_thread = pthread_self();
    grammar_queue_opts o = {.n_threads = 2, .compile = fake_compile, .free_value = free_str};
    g_q = grammar_queue_create(&o);
    assert_non_null(g_q);
    pthread_t th[4];
    for (intptr_t i = 0; i < 4; i++) pthread_create(&th[i], NULL, submitter, (void *)i);
    for (int i = 0; i < 4; i++) {
        void *rv = NULL;
        pthread_join(th[i], &rv);
        assert_null(rv);
    }
    grammar_cache_stats st;
    grammar_cache_get_stats(grammar_queue_cache(g_q), &st);
    assert_int_equal(st.entries, 7);
    grammar_queue_destroy(g_q);
    /* duplicate compiles (two jobs of one key racing) lose to the cached
     * one and are freed at once; at the end all values are freed */
    assert_int_equal(atomic_load(&n_freed), atomic_load(&n_compiled));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_keys_and_hits),
        cmocka_unit_test(test_cache_lru_bound),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_queue_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
