/* kv_pool — page allocator for the KV cache: ids only, no tensor memory.
 *
 * DESIGN
 * The model owns the KV tensors, shaped (n_layer, n_slots, kv_dim) or any
 * layout whose second-to-last index is a slot (one token's K/V row).  This
 * module hands out PAGES of `page_size` consecutive slots:
 *
 *     slot:  0 1 2 3 | 4 5 6 7 | 8 9 10 11 | ...      (page_size = 4)
 *     page:     0    |    1    |     2     | ...
 *
 *     page p covers slots [p * page_size, (p + 1) * page_size)
 *
 * A request's page table is a list of page ids; token i of a request lives
 * in slot pages[i / page_size] * page_size + i % page_size.
 *
 * Every page is in exactly one of three hands, and the scheduler's books
 * must always balance:
 *
 *     n_pages == free (this pool) + held by the radix tree + held by requests
 *
 * The pool tracks only the first; kv_radix tracks the second; the
 * scheduler the third.  kv_radix_check_leak() checks the sum at idle.
 *
 * Free pages sit on a LIFO stack (recently freed pages are reused first:
 * they are warm in cache).  A byte per page records free / in use so that
 * a double free or a free of a page never allocated is caught and refused
 * (logged, status -1) instead of silently corrupting the stack.
 *
 * Ownership: kv_pool_create allocates, kv_pool_destroy frees.  Single
 * owner thread (the scheduler); no locking. */
#ifndef SGLC_KV_POOL_H
#define SGLC_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kv_pool kv_pool;

/* A pool of n_pages pages of page_size slots each.  Returns NULL (logged)
 * on bad sizes (n_pages < 1, page_size < 1, n_pages * page_size > 2^31 - 1
 * so that a slot id fits int32) or out of memory. */
kv_pool *kv_pool_create(int64_t n_pages, int page_size);
void kv_pool_destroy(kv_pool *pool);

/* Allocate n pages into out[0..n).  All or nothing: returns 0, or -1 when
 * fewer than n pages are free (nothing is allocated then; not logged, it is
 * a normal scheduling state: evict from the radix tree or wait). */
int kv_pool_alloc(kv_pool *pool, int64_t n, int32_t *out);

/* Return n pages.  Every page must be currently allocated; a page id out
 * of range or already free makes the whole call fail with -1 (logged) and
 * nothing is freed. */
int kv_pool_free(kv_pool *pool, const int32_t *pages, int64_t n);

/* Give every page back (start-up / flush_cache).  The caller drops every
 * page table and the radix tree first. */
void kv_pool_reset(kv_pool *pool);

int64_t kv_pool_n_pages(const kv_pool *pool);
int64_t kv_pool_free_pages(const kv_pool *pool);
int kv_pool_page_size(const kv_pool *pool);
/* Capacity in tokens: n_pages * page_size (SGLang's max_total_num_tokens). */
int64_t kv_pool_capacity_tokens(const kv_pool *pool);
/* Free capacity in tokens: free_pages * page_size. */
int64_t kv_pool_free_tokens(const kv_pool *pool);
/* Whether page p is free; false for ids out of range. */
bool kv_pool_page_is_free(const kv_pool *pool, int32_t page);
/* Pages needed for n_tokens tokens: ceil(n_tokens / page_size). */
int64_t kv_pool_pages_for(const kv_pool *pool, int64_t n_tokens);

#endif
