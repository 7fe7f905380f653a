/* kv_pool — see kv_pool.h for the design. */
#include "kv/kv_pool.h"

#include <stdlib.h>

#include "util/log.h"

enum { PAGE_USED = 0, PAGE_FREE = 1 };

struct kv_pool {
    int64_t n_pages;
    int page_size;
    int64_t n_free;   /* entries in use on the free stack */
    int32_t *stack;   /* (n_pages) free page ids; top is stack[n_free - 1]; owned */
    uint8_t *state;   /* (n_pages) PAGE_USED / PAGE_FREE; owned */
};

kv_pool *kv_pool_create(int64_t n_pages, int page_size)
{
    if (n_pages < 1 || page_size < 1 || n_pages > INT32_MAX / page_size) {
        log_error("bad pool size: n_pages=%lld page_size=%d (need n_pages >= 1, page_size >= 1, "
                  "n_pages * page_size < 2^31)",
                  (long long)n_pages, page_size);
        return NULL;
    }
    kv_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_pages = n_pages;
    p->page_size = page_size;
    p->stack = malloc((size_t)n_pages * sizeof *p->stack);
    p->state = malloc((size_t)n_pages);
    if (!p->stack || !p->state) {
        log_error("out of memory for %lld pages", (long long)n_pages);
        kv_pool_destroy(p);
        return NULL;
    }
    kv_pool_reset(p);
    return p;
}

void kv_pool_destroy(kv_pool *pool)
{
    if (!pool) return;
    free(pool->stack);
    free(pool->state);
    free(pool);
}

void kv_pool_reset(kv_pool *pool)
{
    /* Page 0 on top, so a fresh pool hands out 0, 1, 2, ... in order. */
    for (int64_t i = 0; i < pool->n_pages; i++) {
        pool->stack[i] = (int32_t)(pool->n_pages - 1 - i);
        pool->state[i] = PAGE_FREE;
    }
    pool->n_free = pool->n_pages;
}

int kv_pool_alloc(kv_pool *pool, int64_t n, int32_t *out)
{
    if (n < 0 || n > pool->n_free) return -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t pg = pool->stack[--pool->n_free];
        pool->state[pg] = PAGE_USED;
        out[i] = pg;
    }
    return 0;
}

int kv_pool_free(kv_pool *pool, const int32_t *pages, int64_t n)
{
    if (n < 0) return -1;
    /* Validate first so that a bad call leaves the pool untouched.  Mark as
     * we go to catch a page listed twice in the same call, then undo. */
    int64_t i;
    for (i = 0; i < n; i++) {
        int32_t pg = pages[i];
        if (pg < 0 || pg >= pool->n_pages || pool->state[pg] != PAGE_USED) break;
        pool->state[pg] = PAGE_FREE;
    }
    if (i < n) {
        int32_t bad = pages[i];
        for (int64_t j = 0; j < i; j++) pool->state[pages[j]] = PAGE_USED;
        if (bad < 0 || bad >= pool->n_pages)
            log_error("page id %d out of range [0, %lld)", bad, (long long)pool->n_pages);
        else
            log_error("double free of KV page %d", bad);
        return -1;
    }
    for (i = 0; i < n; i++) pool->stack[pool->n_free++] = pages[i];
    return 0;
}

int64_t kv_pool_n_pages(const kv_pool *pool) { return pool->n_pages; }
int64_t kv_pool_free_pages(const kv_pool *pool) { return pool->n_free; }
int kv_pool_page_size(const kv_pool *pool) { return pool->page_size; }
int64_t kv_pool_capacity_tokens(const kv_pool *pool) { return pool->n_pages * pool->page_size; }
int64_t kv_pool_free_tokens(const kv_pool *pool) { return pool->n_free * pool->page_size; }

bool kv_pool_page_is_free(const kv_pool *pool, int32_t page)
{
    return page >= 0 && page < pool->n_pages && pool->state[page] == PAGE_FREE;
}

int64_t kv_pool_pages_for(const kv_pool *pool, int64_t n_tokens)
{
    return (n_tokens + pool->page_size - 1) / pool->page_size;
}
