/* kv_radix — SGLang's radix prefix cache over KV pages.
 *
 * DESIGN
 * A radix tree whose edges are runs of token ids and whose nodes hold the
 * KV page ids of those tokens.  A new request walks the tree with its
 * prompt and reuses the pages of the longest cached prefix instead of
 * recomputing them.
 *
 *   root (lock_ref 1, never evicted)
 *    |-- [ns=NULL | 1 2 3 4 | 5 6 7 8]  pages {7, 2}      lock_ref 1
 *    |     |-- [9 9 9 9]                pages {4}         lock_ref 1  <- req A
 *    |     `-- [3 1 4 1 | 5 9 2 6]      pages {0, 11}     lock_ref 0  (leaf,
 *    |                                                       evictable)
 *    `-- [ns="salt-B" | 1 2 3 4]        pages {5}         lock_ref 0
 *           (same tokens, other isolation key: never shared)
 *
 * Page granularity.  With page_size P every node holds a whole number of
 * pages: its token run has a multiple-of-P length, and a match counts
 * only whole pages (a query is truncated to a multiple of P; two runs
 * agree page by page, a page that differs in any token is a miss).  A
 * node is split only at page boundaries.  With P = 1 pages are slots.
 *
 * Children are found by the FIRST PAGE of the child's run (P tokens) plus
 * the isolation key: each node has an open-addressing hash table (linear
 * probing, backward-shift deletion) keyed by a 64-bit hash of (ns, the
 * first page's first <= 8 tokens); a hit is confirmed by comparing the
 * whole first page.
 *
 * Isolation keys (a request's cache_salt, later its LoRA id) live on the
 * root's children only: a child of the root is keyed by (ns, first page),
 * so requests with different keys get disjoint subtrees, exactly as
 * SGLang's RadixKey.extra_key does.  NULL is "no key" and differs from "".
 *
 * lock_ref.  A request that uses a cached prefix locks the path from its
 * last matched node to the root (inc along the path); locked nodes are
 * never evicted.  Sizes are kept in tokens, as SGLang does:
 *   protected_size = tokens in nodes with lock_ref > 0
 *   evictable_size = tokens in nodes with lock_ref == 0
 * and free_tokens(pool) + evictable_size is what the scheduler can get.
 *
 * Eviction frees unreferenced LEAVES (no children, lock_ref 0), lowest
 * priority first, re-queuing a parent that becomes such a leaf, until the
 * requested number of tokens is freed.  Priorities, from a logical clock
 * that ticks once per match or insert call (deterministic, testable):
 *   lru: last_access            lfu: (hit_count, last_access)
 * A match touches (last_access = now, hit_count += 1) exactly the nodes of
 * the matched prefix; an insert touches the nodes it walks (hit_count only
 * when not chunked, so a chunked prefill does not inflate its own hits);
 * a split gives both halves the old node's stats.
 *
 * Disable mode (--disable-radix-cache): match returns nothing, insert
 * keeps nothing (prefix 0); the request helpers then free every page at
 * the end of a request.
 *
 * Checkpoint states (hybrid Mamba2 models, the scheduler's extra_buffer
 * strategy).  A node may hold one state id (a recurrent-state slot, ids
 * only: the tree never sees the state) that summarises the tokens from
 * the root through the node's end.  A recurrent model can resume only
 * where a state exists, so kv_radix_req_match_state matches up to the
 * deepest node on the path holding one.  A split keeps the state on the
 * lower half (the node whose end it describes).  States are dropped, and
 * given back through the free hook, when their node is evicted, on reset
 * and destroy, and by kv_radix_evict_states (LRU / LFU over the nodes
 * holding one, locked or not: a running request copied its state when it
 * was admitted; an unlocked leaf left without a state goes with it, and
 * its parents while they become such leaves).
 *
 *   [1 2 .. 256]--[257 .. 512]--[513 .. 600]     a request's path
 *        state 4       state 9      (none)        match 600 -> resume at
 *                                                 512 from state 9
 *
 * Ownership: the tree borrows the pool (destroy the tree first) and owns
 * its nodes and the pages inside them (a page handed to insert beyond the
 * returned prefix belongs to the tree from then on; eviction frees it to
 * the pool).  kv_radix_node pointers handed out stay valid while locked.
 * Scheduler thread only; no locking. */
#ifndef SGLC_KV_RADIX_H
#define SGLC_KV_RADIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/kv_pool.h"

typedef struct kv_radix kv_radix;
typedef struct kv_radix_node kv_radix_node;

typedef enum { KV_EVICT_LRU = 0, KV_EVICT_LFU = 1 } kv_evict_policy;

/* "lru" | "lfu" -> policy; -1 for anything else. */
int kv_evict_policy_parse(const char *name);
const char *kv_evict_policy_name(kv_evict_policy p);

kv_radix *kv_radix_create(kv_pool *pool, kv_evict_policy policy, bool disable);
/* Frees every node and gives the tree's pages back to the pool. */
void kv_radix_destroy(kv_radix *t);
/* Empty the tree (flush_cache), giving its pages back to the pool.
 * Refused (-1, logged) while any node is locked. */
int kv_radix_reset(kv_radix *t);

bool kv_radix_disabled(const kv_radix *t);
int kv_radix_page_size(const kv_radix *t);
kv_radix_node *kv_radix_root(kv_radix *t);
/* Parent of a node (NULL for the root); for the scheduler's dfs-weight
 * policy, which orders waiting requests by a walk of the tree. */
kv_radix_node *kv_radix_node_parent(const kv_radix_node *n);

/* ---- low level (SGLang's match_prefix / insert / inc,dec_lock_ref / evict) */

/* Longest cached prefix of tokens[0..n) under isolation key ns (NULL =
 * none), in whole pages.  Writes its page ids to pages_out (room for
 * n / page_size entries; may be NULL when only the length is wanted) and
 * the deepest matched node to *last_node (the root when nothing matched).
 * May split a node so that the match ends on a node boundary.  Touches
 * the matched nodes (LRU/LFU stats).  Returns the matched token count, a
 * multiple of page_size.  Does not lock: see kv_radix_lock. */
int64_t kv_radix_match(kv_radix *t, const char *ns, const int32_t *tokens, int64_t n,
                       int32_t *pages_out, kv_radix_node **last_node);

/* Insert tokens[0..n) with their pages[0..n / page_size) under ns.  n is
 * truncated down to a multiple of page_size.  Returns prefix_len: how many
 * leading tokens were already cached (their pages in `pages` were NOT
 * taken; whoever owns them decides: see the request helpers); the pages
 * of tokens [prefix_len, n) now belong to the tree.  chunked: an insert
 * from a chunked prefill (no hit counting).  Returns 0 when disabled. */
int64_t kv_radix_insert(kv_radix *t, const char *ns, const int32_t *tokens, const int32_t *pages,
                        int64_t n, bool chunked);

/* inc / dec lock_ref on node and every ancestor below the root; moves
 * tokens between evictable and protected.  No-ops on the root or when
 * disabled.  Unlocking a node whose lock_ref is 0 is a bug: logged and
 * ignored. */
void kv_radix_lock(kv_radix *t, kv_radix_node *node);
void kv_radix_unlock(kv_radix *t, kv_radix_node *node);

/* Evict unreferenced leaves by policy until at least n_tokens are freed
 * to the pool or nothing evictable is left.  Returns tokens freed. */
int64_t kv_radix_evict(kv_radix *t, int64_t n_tokens);

int64_t kv_radix_evictable_size(const kv_radix *t);
int64_t kv_radix_protected_size(const kv_radix *t);
/* What admission can count on: free pool tokens + evictable tokens
 * (SGLang's available_size). */
int64_t kv_radix_available_tokens(const kv_radix *t);
/* Tokens held by the tree: evictable + protected. */
int64_t kv_radix_total_size(const kv_radix *t);
int64_t kv_radix_n_nodes(const kv_radix *t);

/* Optional observer of evictions (tests, metrics, KV events): called once
 * per evicted node, before its pages go back to the pool, with the token
 * run from the root through that node (path[0..path_len)), the node's own
 * length (the last node_len tokens of path) and its pages. */
typedef void (*kv_radix_evict_cb)(void *ctx, const char *ns, const int32_t *path, int64_t path_len,
                                  int64_t node_len, const int32_t *pages);
void kv_radix_set_evict_cb(kv_radix *t, kv_radix_evict_cb cb, void *ctx);

/* ---- checkpoint states (hybrid models; see the DESIGN note) */

/* Called with each state id the tree drops (evict, reset, destroy,
 * kv_radix_evict_states). */
typedef void (*kv_radix_state_free_fn)(void *ctx, int32_t state);
void kv_radix_set_state_free(kv_radix *t, kv_radix_state_free_fn fn, void *ctx);
/* Attach state (>= 0) to node n (not the root): 0, the tree owns it now;
 * 1 when n already holds one (nothing changed: the caller keeps its id);
 * -1 bad arguments, disabled tree or out of memory (logged; caller keeps it). */
int kv_radix_node_set_state(kv_radix *t, kv_radix_node *n, int32_t state);
/* n's state id, or -1. */
int32_t kv_radix_node_state(const kv_radix_node *n);
/* Nodes holding a state. */
int64_t kv_radix_n_states(const kv_radix *t);
/* As kv_radix_match (touches the matched nodes), but returns the depth of
 * the deepest matched node holding a state (0: none), that node (*node,
 * the root when none) and its state (*state, -1 when none). */
int64_t kv_radix_match_state(kv_radix *t, const char *ns, const int32_t *tokens, int64_t n,
                             kv_radix_node **node, int32_t *state);
/* Drop up to n states, least recently used first (lfu: fewest hits),
 * skipping the node holding `keep` (-1: none); an unlocked leaf left
 * without a state is evicted with it, then its parents while they become
 * such leaves.  Returns the number of states dropped. */
int kv_radix_evict_states(kv_radix *t, int n, int32_t keep);

/* ---- request level (SGLang's cache_unfinished_req / cache_finished_req)
 *
 * A request's page table `pages` has kv_pool_pages_for(n_tokens) entries:
 *   [0, protected_len / P)   tree pages, locked through last_node
 *   [protected_len / P, ...) the request's own pages (it must free them or
 *                            hand them to the tree)
 * The scheduler calls, in order:
 *   kv_radix_req_match        at admission: reuse + lock the cached prefix,
 *                             then allocate the rest from the pool;
 *   kv_radix_req_cache_unfinished   after each chunk of a chunked prefill
 *                             (optional);
 *   kv_radix_req_cache_finished     when the request ends (finished,
 *                             aborted or retracted): afterwards it holds no
 *                             page and no lock. */
typedef struct kv_radix_req {
    const char *ns;            /* isolation key, borrowed; NULL = none */
    kv_radix_node *last_node;  /* locked by this request; NULL = holds no lock */
    int64_t protected_len;     /* tokens whose pages the tree owns (locked) */
} kv_radix_req;

/* Match tokens[0..n) (n / P pages room in pages_out), lock the match, set
 * req->last_node / protected_len.  req->ns must be set before.  Returns
 * the matched token count.  Call at most once, on a request holding no
 * lock. */
int64_t kv_radix_req_match(kv_radix *t, kv_radix_req *req, const int32_t *tokens, int64_t n,
                           int32_t *pages_out);

/* kv_radix_req_match for a recurrent model: reuse and lock the prefix up
 * to the deepest matched node that holds a state (pages_out gets its
 * pages; room for n / P), *state its state id (-1: nothing to resume,
 * returns 0).  Returns the reused token count. */
int64_t kv_radix_req_match_state(kv_radix *t, kv_radix_req *req, const int32_t *tokens, int64_t n,
                                 int32_t *pages_out, int32_t *state);

/* After prefilling tokens[0..n): insert the whole pages so far, free the
 * request's pages that duplicate cached ones, rewrite pages[] with the
 * tree's ids, move the lock to the new last node and raise
 * protected_len.  The partial last page (if any) stays the request's.
 * Returns 0, or -1 on a broken invariant or out of memory (logged): the
 * request's page table can no longer be trusted, abort the request
 * (cache_finished with insert = false; the pool refuses, and logs, any
 * page already given back). */
int kv_radix_req_cache_unfinished(kv_radix *t, kv_radix_req *req, const int32_t *tokens,
                                  int64_t n, int32_t *pages);

/* At the end of a request whose KV holds tokens[0..n) in pages[0..ceil(n/P)):
 * insert the whole pages (when `insert`; not in disable mode), free every
 * page the tree did not keep (duplicates, the partial tail page), release
 * the lock.  Returns 0, or -1 when the pool refused a free (logged). */
int kv_radix_req_cache_finished(kv_radix *t, kv_radix_req *req, const int32_t *tokens, int64_t n,
                                int32_t *pages, bool insert);

/* ---- checks */

/* SGLang's idle check: with no request running, every page must be free
 * or held by the tree, and nothing may be locked.  Returns 0, or -1 with
 * "KV cache pool leak detected! ..." written to err (err may be NULL). */
int kv_radix_check_leak(const kv_radix *t, char *err, size_t errlen);

/* Full structural check (tests, fuzzing; O(tree)): sizes match the nodes,
 * lock_ref of a parent >= each child's, runs are whole pages, child
 * tables find every child, the evictable-leaf set is exact, and no tree
 * page is free in the pool or present twice.  Returns 0 or -1 with a
 * message in err. */
int kv_radix_check(const kv_radix *t, char *err, size_t errlen);

/* Calls fn for every page the tree holds (tests: ownership accounting). */
void kv_radix_for_each_page(const kv_radix *t, void (*fn)(void *ctx, int32_t page), void *ctx);

#endif
