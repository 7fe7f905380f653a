/* test_kv — page pool, radix prefix cache (targeted cases), and a
 * randomized differential run against the naive reference in
 * tests/kv_model.h for page sizes 1, 4, 16, both eviction policies and
 * disable mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../kv_model.h"
#include "kv/kv_pool.h"
#include "kv/kv_radix.h"
#include "util/log.h"

static void assert_tree_ok(const kv_radix *t)
{
    char err[256];
    int rc = kv_radix_check(t, err, sizeof err);
    if (rc != 0) fail_msg("kv_radix_check: %s", err);
}

/* ------------------------------------------------------------ pool */

static void test_pool_basics(void **state)
{
    (void)state;
    kv_pool *p = kv_pool_create(8, 4);
    assert_non_null(p);
    assert_int_equal(kv_pool_capacity_tokens(p), 32);
    assert_int_equal(kv_pool_free_pages(p), 8);
    assert_int_equal(kv_pool_pages_for(p, 0), 0);
    assert_int_equal(kv_pool_pages_for(p, 5), 2);
    int32_t a[8];
    assert_int_equal(kv_pool_alloc(p, 3, a), 0);
    assert_int_equal(a[0], 0);
    assert_int_equal(a[1], 1);
    assert_int_equal(a[2], 2);
    assert_int_equal(kv_pool_free_tokens(p), 20);
    /* all or nothing */
    int32_t b[8];
    assert_int_equal(kv_pool_alloc(p, 6, b), -1);
    assert_int_equal(kv_pool_free_pages(p), 5);
    assert_false(kv_pool_page_is_free(p, 1));
    assert_true(kv_pool_page_is_free(p, 7));
    assert_false(kv_pool_page_is_free(p, 8));
    assert_int_equal(kv_pool_free(p, a + 1, 1), 0);
    assert_true(kv_pool_page_is_free(p, 1));
    /* double free (also within one call) and out-of-range ids are refused
     * and leave the pool untouched */
    log_set_level(LOG_CRITICAL);
    assert_int_equal(kv_pool_free(p, a + 1, 1), -1);
    int32_t dup[2] = {0, 0};
    assert_int_equal(kv_pool_free(p, dup, 2), -1);
    assert_false(kv_pool_page_is_free(p, 0));
    int32_t bad[2] = {2, 99};
    assert_int_equal(kv_pool_free(p, bad, 2), -1);
    assert_false(kv_pool_page_is_free(p, 2));
    log_set_level(LOG_INFO);
    assert_int_equal(kv_pool_free_pages(p), 6);
    /* LIFO: the page freed last comes back first */
    int32_t c;
    assert_int_equal(kv_pool_alloc(p, 1, &c), 0);
    assert_int_equal(c, 1);
    kv_pool_reset(p);
    assert_int_equal(kv_pool_free_pages(p), 8);
    kv_pool_destroy(p);
    log_set_level(LOG_CRITICAL);
    assert_null(kv_pool_create(0, 4));
    assert_null(kv_pool_create(4, 0));
    assert_null(kv_pool_create((int64_t)1 << 40, 16));
    log_set_level(LOG_INFO);
}

/* ------------------------------------------------------------ radix */

typedef struct {
    kv_pool *pool;
    kv_radix *t;
} fix;

static fix mk(int64_t n_pages, int P, kv_evict_policy pol, bool disable)
{
    fix f;
    f.pool = kv_pool_create(n_pages, P);
    f.t = kv_radix_create(f.pool, pol, disable);
    assert_non_null(f.t);
    return f;
}

static void rm(fix *f)
{
    kv_radix_destroy(f->t);
    assert_int_equal(kv_pool_free_pages(f->pool), kv_pool_n_pages(f->pool));
    kv_pool_destroy(f->pool);
}

/* Run a whole request: match, allocate the rest, finish with insert.
 * Returns the matched length. */
static int64_t run_req(fix *f, const char *ns, const int32_t *tok, int64_t n)
{
    kv_radix_req rr = {.ns = ns};
    int32_t pages[256];
    int64_t m = kv_radix_req_match(f->t, &rr, tok, n, pages);
    int P = kv_pool_page_size(f->pool);
    int64_t have = m / P, need = kv_pool_pages_for(f->pool, n);
    if (need > have) {
        if (kv_pool_alloc(f->pool, need - have, pages + have) != 0) {
            kv_radix_evict(f->t, (need - have - kv_pool_free_pages(f->pool)) * P);
            assert_int_equal(kv_pool_alloc(f->pool, need - have, pages + have), 0);
        }
    }
    assert_int_equal(kv_radix_req_cache_finished(f->t, &rr, tok, n, pages, true), 0);
    assert_null(rr.last_node);
    assert_tree_ok(f->t);
    return m;
}

static void test_radix_page1(void **state)
{
    (void)state;
    fix f = mk(64, 1, KV_EVICT_LRU, false);
    int32_t a[] = {1, 2, 3, 4, 5}, b[] = {1, 2, 3, 9}, c[] = {7};
    assert_int_equal(run_req(&f, NULL, a, 5), 0);
    assert_int_equal(kv_radix_total_size(f.t), 5);
    assert_int_equal(run_req(&f, NULL, b, 4), 3); /* splits [1..5] at 3 */
    assert_int_equal(kv_radix_n_nodes(f.t), 3);
    assert_int_equal(kv_radix_total_size(f.t), 6);
    assert_int_equal(run_req(&f, NULL, c, 1), 0);
    int32_t pg[8];
    kv_radix_node *last;
    assert_int_equal(kv_radix_match(f.t, NULL, a, 5, pg, &last), 5);
    assert_int_equal(kv_radix_match(f.t, NULL, a, 2, pg, &last), 2); /* splits again */
    assert_int_equal(kv_radix_n_nodes(f.t), 5);
    assert_tree_ok(f.t);
    /* the same request again matches everything and frees its duplicate */
    int64_t free_before = kv_pool_free_pages(f.pool);
    assert_int_equal(run_req(&f, NULL, a, 5), 5);
    assert_int_equal(kv_pool_free_pages(f.pool), free_before);
    char err[256];
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), 0);
    rm(&f);
}

static void test_radix_paged_match(void **state)
{
    (void)state;
    fix f = mk(64, 4, KV_EVICT_LRU, false);
    int32_t a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 9};
    assert_int_equal(run_req(&f, NULL, a, 10), 0);
    /* only whole pages are cached: 8 tokens; the tail page was freed */
    assert_int_equal(kv_radix_total_size(f.t), 8);
    assert_int_equal(kv_pool_free_pages(f.pool), 62);
    int32_t q[10] = {1, 2, 3, 4, 5, 6, 7, 0, 9, 9};
    int32_t pg[4];
    kv_radix_node *last;
    /* page 2 differs in its last token: a whole-page miss */
    assert_int_equal(kv_radix_match(f.t, NULL, q, 10, pg, &last), 4);
    /* a query shorter than a page matches nothing */
    assert_int_equal(kv_radix_match(f.t, NULL, a, 3, pg, &last), 0);
    assert_ptr_equal(last, kv_radix_root(f.t));
    /* 7 tokens -> truncated to 4 */
    assert_int_equal(kv_radix_match(f.t, NULL, a, 7, pg, &last), 4);
    assert_int_equal(kv_radix_match(f.t, NULL, a, 8, pg, &last), 8);
    assert_tree_ok(f.t);
    rm(&f);
}

static void test_radix_isolation(void **state)
{
    (void)state;
    fix f = mk(64, 2, KV_EVICT_LRU, false);
    int32_t a[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(run_req(&f, NULL, a, 6), 0);
    assert_int_equal(run_req(&f, "salt-1", a, 6), 0); /* same tokens, other key: no reuse */
    assert_int_equal(run_req(&f, "", a, 6), 0);       /* "" is a key of its own */
    assert_int_equal(run_req(&f, "salt-1", a, 6), 6);
    assert_int_equal(run_req(&f, NULL, a, 4), 4);
    assert_int_equal(kv_radix_total_size(f.t), 18);
    int32_t pg1[3], pg2[3];
    kv_radix_node *l1, *l2;
    assert_int_equal(kv_radix_match(f.t, NULL, a, 6, pg1, &l1), 6);
    assert_int_equal(kv_radix_match(f.t, "salt-1", a, 6, pg2, &l2), 6);
    for (int i = 0; i < 3; i++) assert_int_not_equal(pg1[i], pg2[i]);
    assert_ptr_not_equal(l1, l2);
    rm(&f);
}

static void test_radix_lock_protects(void **state)
{
    (void)state;
    fix f = mk(16, 1, KV_EVICT_LRU, false);
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    run_req(&f, NULL, a, 4);
    run_req(&f, NULL, b, 4);
    kv_radix_req rr = {.ns = NULL};
    int32_t pg[4];
    assert_int_equal(kv_radix_req_match(f.t, &rr, a, 4, pg), 4);
    assert_int_equal(kv_radix_protected_size(f.t), 4);
    assert_int_equal(kv_radix_evictable_size(f.t), 4);
    assert_int_equal(kv_radix_available_tokens(f.t), 16 - 4);
    /* ask for everything: only the unlocked 4 go */
    assert_int_equal(kv_radix_evict(f.t, 100), 4);
    assert_int_equal(kv_radix_match(f.t, NULL, b, 4, pg, NULL), 0);
    assert_int_equal(kv_radix_match(f.t, NULL, a, 4, pg, NULL), 4);
    char err[256];
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), -1); /* a request still runs */
    log_set_level(LOG_CRITICAL);
    assert_int_equal(kv_radix_reset(f.t), -1); /* flush refused while locked */
    log_set_level(LOG_INFO);
    assert_int_equal(kv_radix_req_cache_finished(f.t, &rr, a, 4, pg, true), 0);
    assert_int_equal(kv_radix_protected_size(f.t), 0);
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), 0);
    assert_int_equal(kv_radix_evict(f.t, 1), 4);
    assert_int_equal(kv_radix_total_size(f.t), 0);
    rm(&f);
}

static void test_radix_lru_order(void **state)
{
    (void)state;
    fix f = mk(32, 1, KV_EVICT_LRU, false);
    int32_t a[2] = {1, 1}, b[2] = {2, 2}, c[2] = {3, 3};
    run_req(&f, NULL, a, 2);
    run_req(&f, NULL, b, 2);
    run_req(&f, NULL, c, 2);
    kv_radix_match(f.t, NULL, a, 2, NULL, NULL); /* a is now the most recent */
    assert_int_equal(kv_radix_evict(f.t, 1), 2);  /* b goes */
    assert_int_equal(kv_radix_match(f.t, NULL, b, 2, NULL, NULL), 0);
    assert_int_equal(kv_radix_evict(f.t, 2), 2); /* then c */
    assert_int_equal(kv_radix_match(f.t, NULL, c, 2, NULL, NULL), 0);
    assert_int_equal(kv_radix_match(f.t, NULL, a, 2, NULL, NULL), 2);
    rm(&f);
}

static void test_radix_lfu_order(void **state)
{
    (void)state;
    fix f = mk(32, 1, KV_EVICT_LFU, false);
    int32_t a[2] = {1, 1}, b[2] = {2, 2}, c[2] = {3, 3};
    run_req(&f, NULL, a, 2);
    run_req(&f, NULL, b, 2);
    run_req(&f, NULL, c, 2);
    for (int i = 0; i < 3; i++) kv_radix_match(f.t, NULL, a, 2, NULL, NULL);
    kv_radix_match(f.t, NULL, b, 2, NULL, NULL);
    kv_radix_match(f.t, NULL, c, 2, NULL, NULL);
    kv_radix_match(f.t, NULL, c, 2, NULL, NULL);
    /* hits: a 3, b 1, c 2, a used longest ago of all but still kept */
    assert_int_equal(kv_radix_evict(f.t, 1), 2);
    assert_int_equal(kv_radix_match(f.t, NULL, b, 2, NULL, NULL), 0);
    assert_int_equal(kv_radix_evict(f.t, 1), 2);
    assert_int_equal(kv_radix_match(f.t, NULL, c, 2, NULL, NULL), 0);
    assert_int_equal(kv_radix_match(f.t, NULL, a, 2, NULL, NULL), 2);
    rm(&f);
}

/* Eviction climbs: when a leaf goes, its parent may become the next leaf. */
static void test_radix_evict_parent_chain(void **state)
{
    (void)state;
    fix f = mk(32, 1, KV_EVICT_LRU, false);
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 7, 7}, z[1] = {9};
    run_req(&f, NULL, a, 4);
    run_req(&f, NULL, b, 4); /* [1 2] -> {[3 4], [7 7]} */
    run_req(&f, NULL, z, 1);
    assert_int_equal(kv_radix_n_nodes(f.t), 4);
    /* 6 tokens wanted: [3 4] (oldest leaf) 2, then [7 7] 2 (parent [1 2] is
     * re-queued with an older stamp than z, so it goes next), then [1 2] 2 */
    assert_int_equal(kv_radix_evict(f.t, 6), 6);
    assert_int_equal(kv_radix_n_nodes(f.t), 1);
    assert_int_equal(kv_radix_match(f.t, NULL, z, 1, NULL, NULL), 1);
    assert_tree_ok(f.t);
    rm(&f);
}

static void test_radix_disable(void **state)
{
    (void)state;
    fix f = mk(16, 2, KV_EVICT_LRU, true);
    int32_t a[5] = {1, 2, 3, 4, 5};
    assert_int_equal(run_req(&f, NULL, a, 5), 0);
    assert_int_equal(run_req(&f, NULL, a, 5), 0);
    assert_int_equal(kv_radix_total_size(f.t), 0);
    assert_int_equal(kv_pool_free_pages(f.pool), 16); /* everything freed at the end */
    assert_int_equal(kv_radix_evict(f.t, 10), 0);
    int32_t pg[3];
    kv_radix_node *last;
    assert_int_equal(kv_radix_insert(f.t, NULL, a, pg, 4, false), 0);
    assert_int_equal(kv_radix_match(f.t, NULL, a, 4, pg, &last), 0);
    rm(&f);
}

/* Chunked prefill with page_size 4: 10-token prompt prefilled 6 + 4. */
static void test_radix_chunked(void **state)
{
    (void)state;
    fix f = mk(32, 4, KV_EVICT_LRU, false);
    int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int32_t pages[3];
    kv_radix_req rr = {.ns = NULL};
    assert_int_equal(kv_radix_req_match(f.t, &rr, tok, 10, pages), 0);
    assert_int_equal(kv_pool_alloc(f.pool, 2, pages), 0); /* chunk 1: 6 tokens */
    assert_int_equal(kv_radix_req_cache_unfinished(f.t, &rr, tok, 6, pages), 0);
    assert_int_equal(rr.protected_len, 4);
    assert_int_equal(kv_radix_protected_size(f.t), 4);
    /* a second request sees the first page already */
    int32_t pg2[2];
    assert_int_equal(kv_radix_match(f.t, NULL, tok, 10, pg2, NULL), 4);
    assert_int_equal(pg2[0], pages[0]);
    assert_int_equal(kv_pool_alloc(f.pool, 1, pages + 2), 0); /* chunk 2: to 10 */
    assert_int_equal(kv_radix_req_cache_unfinished(f.t, &rr, tok, 10, pages), 0);
    assert_int_equal(rr.protected_len, 8);
    assert_int_equal(kv_radix_req_cache_finished(f.t, &rr, tok, 10, pages, true), 0);
    assert_int_equal(kv_radix_total_size(f.t), 8);
    assert_int_equal(kv_pool_free_pages(f.pool), 30);
    char err[256];
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), 0);
    assert_tree_ok(f.t);
    rm(&f);
}

/* Two requests prefill the same prompt at once: the second to finish
 * finds its pages duplicated and must give them back. */
static void test_radix_duplicate_insert(void **state)
{
    (void)state;
    fix f = mk(16, 2, KV_EVICT_LRU, false);
    int32_t tok[6] = {4, 4, 5, 5, 6, 6};
    int32_t p1[3], p2[3];
    kv_radix_req r1 = {0}, r2 = {0};
    assert_int_equal(kv_radix_req_match(f.t, &r1, tok, 6, p1), 0);
    assert_int_equal(kv_radix_req_match(f.t, &r2, tok, 6, p2), 0);
    assert_int_equal(kv_pool_alloc(f.pool, 3, p1), 0);
    assert_int_equal(kv_pool_alloc(f.pool, 3, p2), 0);
    assert_int_equal(kv_radix_req_cache_finished(f.t, &r1, tok, 6, p1, true), 0);
    assert_int_equal(kv_radix_req_cache_finished(f.t, &r2, tok, 6, p2, true), 0);
    assert_int_equal(kv_radix_total_size(f.t), 6);
    assert_int_equal(kv_pool_free_pages(f.pool), 13);
    assert_int_equal(kv_pool_page_is_free(f.pool, p2[0]), true);
    assert_int_equal(kv_pool_page_is_free(f.pool, p1[0]), false);
    rm(&f);
}

typedef struct {
    int calls;
    char ns[16];
    int64_t path_len, node_len;
} evict_seen;

static void on_evict(void *ctx, const char *ns, const int32_t *path, int64_t path_len, int64_t node_len,
                     const int32_t *pages)
{
    evict_seen *e = ctx;
    e->calls++;
    snprintf(e->ns, sizeof e->ns, "%s", ns ? ns : "(none)");
    e->path_len = path_len;
    e->node_len = node_len;
    (void)path;
    (void)pages;
}

/* Retraction: the request gives back its own pages without caching them;
 * the cached prefix it reused stays in the tree, unlocked. */
static void test_radix_retract(void **state)
{
    (void)state;
    fix f = mk(16, 2, KV_EVICT_LRU, false);
    int32_t sys[4] = {1, 2, 3, 4}, tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    run_req(&f, "k", sys, 4);
    kv_radix_req rr = {.ns = "k"};
    int32_t pages[5];
    assert_int_equal(kv_radix_req_match(f.t, &rr, tok, 9, pages), 4);
    assert_int_equal(kv_pool_alloc(f.pool, 3, pages + 2), 0);
    assert_int_equal(kv_pool_free_pages(f.pool), 16 - 2 - 3);
    assert_int_equal(kv_radix_req_cache_finished(f.t, &rr, tok, 9, pages, false), 0);
    assert_int_equal(kv_pool_free_pages(f.pool), 14);
    assert_int_equal(kv_radix_total_size(f.t), 4);
    assert_int_equal(kv_radix_protected_size(f.t), 0);
    char err[256];
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), 0);
    /* the eviction observer sees the isolation key and the whole path */
    evict_seen seen = {0};
    kv_radix_set_evict_cb(f.t, on_evict, &seen);
    assert_int_equal(kv_radix_evict(f.t, 1), 4);
    assert_int_equal(seen.calls, 1);
    assert_string_equal(seen.ns, "k");
    assert_int_equal(seen.path_len, 4);
    assert_int_equal(seen.node_len, 4);
    rm(&f);
}

/* ------------------------------------------------------------ checkpoint states */

typedef struct {
    int freed[16];
    int n;
} freed_states;

static void on_state_free(void *ctx, int32_t id)
{
    freed_states *f = ctx;
    assert_true(f->n < 16);
    f->freed[f->n++] = id;
}

/* A request of n tokens that checkpoints at positions ck[0..nck) with
 * states ids[], as the scheduler's extra_buffer strategy does: KV into the
 * tree up to each checkpoint, the state onto the node ending there, the
 * rest of the KV freed at the end.  Returns the resumed prefix. */
static int64_t ckpt_req(fix *f, const int32_t *tok, int64_t n, const int64_t *ck, const int32_t *ids, int nck,
                        int32_t *src)
{
    kv_radix_req rr = {.ns = NULL};
    int32_t pages[64];
    int P = kv_pool_page_size(f->pool);
    int64_t m = kv_radix_req_match_state(f->t, &rr, tok, n, pages, src);
    assert_int_equal(m % P, 0);
    assert_int_equal(rr.protected_len, m);
    int64_t have = m / P, need = kv_pool_pages_for(f->pool, n);
    assert_int_equal(kv_pool_alloc(f->pool, need - have, pages + have), 0);
    for (int k = 0; k < nck; k++) {
        assert_int_equal(kv_radix_req_cache_unfinished(f->t, &rr, tok, ck[k], pages), 0);
        assert_int_equal(kv_radix_node_state(rr.last_node), -1);
        assert_int_equal(kv_radix_node_set_state(f->t, rr.last_node, ids[k]), 0);
        assert_int_equal(kv_radix_node_set_state(f->t, rr.last_node, 99), 1); /* one per node */
        assert_tree_ok(f->t);
    }
    assert_int_equal(kv_radix_req_cache_finished(f->t, &rr, tok, n, pages, false), 0);
    assert_tree_ok(f->t);
    return m;
}

static void test_radix_states(void **state)
{
    (void)state;
    fix f = mk(32, 2, KV_EVICT_LRU, false);
    freed_states fr = {0};
    kv_radix_set_state_free(f.t, on_state_free, &fr);
    int32_t a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int32_t b[10] = {1, 2, 3, 4, 5, 6, 50, 51, 52, 53};
    int64_t ck[2] = {4, 8};
    int32_t ids[2] = {100, 101}, src = 7;
    assert_int_equal(ckpt_req(&f, a, 12, ck, ids, 2, &src), 0);
    assert_int_equal(src, -1);
    /* KV past the last checkpoint went back: the tree keeps 8 tokens, 2 states */
    assert_int_equal(kv_radix_total_size(f.t), 8);
    assert_int_equal(kv_radix_n_states(f.t), 2);
    assert_int_equal(kv_pool_free_pages(f.pool), 32 - 4);
    /* b matches 6 tokens of KV but resumes only from the state at 4 */
    kv_radix_node *nd = NULL;
    int32_t st = -2;
    assert_int_equal(kv_radix_match(f.t, NULL, b, 10, NULL, &nd), 6); /* splits [5..8] at 6 */
    assert_int_equal(kv_radix_match_state(f.t, NULL, b, 10, &nd, &st), 4);
    assert_int_equal(st, 100);
    assert_int_equal(kv_radix_node_state(nd), 100);
    /* the split kept state 101 on the lower half: a still resumes at 8 */
    assert_int_equal(kv_radix_match_state(f.t, NULL, a, 11, &nd, &st), 8);
    assert_int_equal(st, 101);
    assert_int_equal(kv_radix_match_state(f.t, NULL, a, 7, &nd, &st), 4); /* deepest <= the match */
    assert_int_equal(kv_radix_match_state(f.t, NULL, a, 3, &nd, &st), 0);
    assert_int_equal(st, -1);
    assert_ptr_equal(nd, kv_radix_root(f.t));
    assert_int_equal(kv_radix_node_set_state(f.t, kv_radix_root(f.t), 5), -1);
    assert_tree_ok(f.t);
    /* LRU: state 100 ([1 2 | 3 4], split by the last match) was touched
     * after 101; dropping one state takes 101, and the stateless leaves
     * [7 8] and [5 6] go with it */
    assert_int_equal(kv_radix_evict_states(f.t, 1, -1), 1);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.freed[0], 101);
    assert_int_equal(kv_radix_total_size(f.t), 4);
    assert_int_equal(kv_radix_n_nodes(f.t), 2);
    assert_int_equal(kv_pool_free_pages(f.pool), 32 - 2);
    assert_int_equal(kv_radix_evict_states(f.t, 1, 100), 0); /* keep */
    assert_tree_ok(f.t);
    /* a request resuming at 4 locks [1..4]; its state can still be dropped
     * (the request copied it at admission), the locked KV stays */
    kv_radix_req rr = {.ns = NULL};
    int32_t pages[8];
    assert_int_equal(kv_radix_req_match_state(f.t, &rr, b, 10, pages, &st), 4);
    assert_int_equal(st, 100);
    assert_int_equal(kv_radix_evict_states(f.t, 4, -1), 1);
    assert_int_equal(fr.freed[1], 100);
    assert_int_equal(kv_radix_protected_size(f.t), 4);
    assert_int_equal(kv_radix_n_states(f.t), 0);
    assert_int_equal(kv_radix_req_cache_finished(f.t, &rr, b, 4, pages, false), 0);
    assert_int_equal(kv_radix_req_match_state(f.t, &rr, b, 10, pages, &st), 0); /* nothing to resume */
    assert_int_equal(kv_radix_req_cache_finished(f.t, &rr, b, 0, pages, false), 0);
    assert_tree_ok(f.t);
    /* KV eviction of a leaf with a state, reset and destroy give states back */
    int64_t ck2[1] = {6};
    int32_t ids2[1] = {102}, ids3[1] = {103};
    ckpt_req(&f, b, 10, ck2, ids2, 1, &src);
    assert_int_equal(kv_radix_evict(f.t, 100), 6);
    assert_int_equal(fr.n, 3);
    assert_int_equal(fr.freed[2], 102);
    ckpt_req(&f, a, 12, ck2, ids3, 1, &src);
    assert_int_equal(kv_radix_reset(f.t), 0);
    assert_int_equal(fr.freed[3], 103);
    ckpt_req(&f, a, 12, ck, ids, 2, &src);
    assert_int_equal(kv_radix_n_states(f.t), 2);
    char err[256];
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), 0);
    rm(&f);
    assert_int_equal(fr.n, 6);
}

static void test_radix_leak_detected(void **state)
{
    (void)state;
    fix f = mk(8, 1, KV_EVICT_LRU, false);
    int32_t lost;
    assert_int_equal(kv_pool_alloc(f.pool, 1, &lost), 0); /* a page nobody will free */
    char err[256];
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), -1);
    assert_non_null(strstr(err, "KV cache pool leak detected!"));
    assert_non_null(strstr(err, "diff=-1"));
    assert_int_equal(kv_pool_free(f.pool, &lost, 1), 0);
    assert_int_equal(kv_radix_check_leak(f.t, err, sizeof err), 0);
    rm(&f);
}

/* Many children under one node: exercises table growth and
 * backward-shift deletion. */
static void test_radix_wide(void **state)
{
    (void)state;
    fix f = mk(2048, 1, KV_EVICT_LRU, false);
    for (int i = 0; i < 500; i++) {
        int32_t tok[3] = {0, i, i * 7};
        run_req(&f, NULL, tok, 3);
    }
    assert_int_equal(kv_radix_n_nodes(f.t), 501);
    assert_int_equal(kv_radix_evict(f.t, 600), 600);
    assert_tree_ok(f.t);
    for (int i = 0; i < 500; i++) {
        int32_t tok[3] = {0, i, i * 7};
        int64_t m = kv_radix_match(f.t, NULL, tok, 3, NULL, NULL);
        assert_true(m == 3 || m == 1);
    }
    assert_tree_ok(f.t);
    rm(&f);
}

static void test_policy_parse(void **state)
{
    (void)state;
    assert_int_equal(kv_evict_policy_parse("lru"), KV_EVICT_LRU);
    assert_int_equal(kv_evict_policy_parse("lfu"), KV_EVICT_LFU);
    assert_int_equal(kv_evict_policy_parse("LRU"), -1);
    assert_int_equal(kv_evict_policy_parse(NULL), -1);
}

/* ------------------------------------------------------------ differential */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void run_differential(int P, kv_evict_policy pol, bool disable, int64_t n_pages, int seeds, size_t n_bytes)
{
    uint8_t *buf = malloc(n_bytes);
    kvm *m = malloc(sizeof *m);
    assert_non_null(buf);
    assert_non_null(m);
    int64_t hits = 0, evicted = 0, finished = 0;
    for (int s = 0; s < seeds; s++) {
        uint64_t st = 0x1234 + (uint64_t)s * 7919 + (uint64_t)P * 131 + (uint64_t)pol;
        for (size_t i = 0; i < n_bytes; i++) buf[i] = (uint8_t)rng_next(&st);
        if (kvm_run(m, buf, n_bytes, P, pol, disable, n_pages) != 0)
            fail_msg("P=%d policy=%s disable=%d seed=%d op=%lld: %s", P, kv_evict_policy_name(pol), disable, s,
                     (long long)m->n_ops, m->err);
        hits += m->st_hit_tokens;
        evicted += m->st_evicted_nodes;
        finished += m->st_finished;
    }
    /* the run must have exercised reuse, eviction and completion */
    assert_true(finished > 0);
    if (!disable) {
        assert_true(hits > 0);
        assert_true(evicted > 0);
    }
    free(m);
    free(buf);
}

static void test_differential_p1(void **state)
{
    (void)state;
    run_differential(1, KV_EVICT_LRU, false, 96, 12, 3000);
    run_differential(1, KV_EVICT_LFU, false, 96, 12, 3000);
}

static void test_differential_p4(void **state)
{
    (void)state;
    run_differential(4, KV_EVICT_LRU, false, 32, 12, 3000);
    run_differential(4, KV_EVICT_LFU, false, 32, 12, 3000);
}

static void test_differential_p16(void **state)
{
    (void)state;
    run_differential(16, KV_EVICT_LRU, false, 12, 12, 3000);
    run_differential(16, KV_EVICT_LFU, false, 12, 12, 3000);
}

static void test_differential_disabled(void **state)
{
    (void)state;
    run_differential(1, KV_EVICT_LRU, true, 64, 4, 2000);
    run_differential(4, KV_EVICT_LRU, true, 32, 4, 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_basics),
        cmocka_unit_test(test_radix_page1),
        cmocka_unit_test(test_radix_paged_match),
        cmocka_unit_test(test_radix_isolation),
        cmocka_unit_test(test_radix_lock_protects),
        cmocka_unit_test(test_radix_lru_order),
        cmocka_unit_test(test_radix_lfu_order),
        cmocka_unit_test(test_radix_evict_parent_chain),
        cmocka_unit_test(test_radix_disable),
        cmocka_unit_test(test_radix_chunked),
        cmocka_unit_test(test_radix_duplicate_insert),
        cmocka_unit_test(test_radix_retract),
        cmocka_unit_test(test_radix_states),
        cmocka_unit_test(test_radix_leak_detected),
        cmocka_unit_test(test_radix_wide),
        cmocka_unit_test(test_policy_parse),
        cmocka_unit_test(test_differential_p1),
        cmocka_unit_test(test_differential_p4),
        cmocka_unit_test(test_differential_p16),
        cmocka_unit_test(test_differential_disabled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
