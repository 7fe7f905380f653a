/* sched_kv — a request's pages and slots (layer 4, above sched_event). */
#ifndef SGLC_SCHED_KV_H
#define SGLC_SCHED_KV_H

#include "sched/sched_impl.h"

/* slots[p * P + k] = pages[p] * P + k for pages from_page .. n_pages - 1. */
void sched_kv_set_slots(sched *s, sreq *r, int64_t from_page);

/* Room in r's page table (and slot list) for n_pages pages; 0 or -1. */
int sched_kv_page_room(sched *s, sreq *r, int64_t n_pages);

/* Pages the pool can give after evicting the whole evictable tree. */
int64_t sched_kv_avail_pages(sched *s);

/* Make r's page table cover positions [0, upto) (evicting cached
 * prefixes as needed); 0 or -1 (no room: r unchanged). */
int sched_kv_alloc_upto(sched *s, sreq *r, int64_t upto);

/* Pages of r past what positions [0, upto) need go back to the pool (the
 * pages a rejected draft used).  Tree pages are never past kv_len. */
void sched_kv_trim(sched *s, sreq *r, int64_t upto);

/* Tree verification: the KV an accepted tree node computed at r's kv
 * position src serves position dst (dst < src, both past its locked tree
 * prefix).  Page size 1: the two pages (= slots) swap; larger pages: the
 * node's rows are copied to dst's slot (model_tree_copy_slot), which the
 * walk's increasing rows make safe (no later path node lives at dst). */
void sched_kv_move_page(sched *s, sreq *r, int64_t dst, int64_t src);

/* Give back r's KV: pages past its computed KV to the pool, the rest to
 * the radix tree (insert) or the pool; drops the lock. */
void sched_kv_release(sched *s, sreq *r, bool insert);

/* SGLang's cache_unfinished_req after a prefill (chunk or whole): r's
 * computed KV goes into the tree, shareable from the next step; r's slots
 * follow the pages the tree gave back.  0, or -1: the page table can no
 * longer be trusted (r->kv_broken set: release it without insert). */
int sched_kv_cache_prefill(sched *s, sreq *r);

/* Hybrid Mamba2 models (kv/mamba_state.h; the strategies in sched_kv.c).
 * Before the KV cache is made: check the mamba arguments, pick the
 * strategy (*track: the checkpoint interval, 0 = no_buffer), decide the
 * number of states (*n_states) and shrink *tokens to what the KV cache
 * keeps of the budget.  0, or -1 with err. */
int sched_kv_mamba_plan(model *m, const sched_args *a, dtype kdt, int64_t *tokens, int64_t *n_states,
                        int *track, char *err, size_t errlen);
/* After it: the states in s's KV cache, the slot pool, max_running capped,
 * the radix cache off (no_buffer) or checkpointing (logged).  0 or -1. */
int sched_kv_mamba_init(sched *s, int64_t n_states, int track);
/* After the tree is made: its dropped checkpoints go back to the pool. */
void sched_kv_mamba_attach(sched *s);
/* Admission: a state slot for r (evicting a tree checkpoint other than
 * src if the pool is empty); with prefix > 0, a copy of checkpoint src
 * (which must hold prefix tokens).  0, or -1 (no slot / bad checkpoint:
 * r unchanged). */
int sched_kv_mamba_take(sched *s, sreq *r, int32_t src, int64_t prefix);
/* Room for n sequences in s->eng.b_state / b_snap; 0 or -1. */
int sched_kv_mamba_reserve(sched *s, int n);
/* Assembly, sequence b (in order) covering positions (first, end]: a slot
 * for each multiple of the interval there (skipped when the pool has
 * none).  0 or -1 (out of memory). */
int sched_kv_mamba_snaps(sched *s, int b, int64_t first, int64_t end);
/* After the forward: each checkpoint's KV prefix into the tree, the slot
 * onto the node (or back to the pool).  Before process results (a request
 * may finish there). */
void sched_kv_mamba_commit(sched *s, bool with_decode);
/* The step failed: its checkpoint slots go back. */
void sched_kv_mamba_drop(sched *s);
/* Idle: free + tree checkpoints == every slot, else -1 with err. */
int sched_kv_mamba_check_leak(sched *s, char *err, size_t errlen);

#endif
