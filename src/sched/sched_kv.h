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

/* Tree verification (page size 1): swap the pages (= slots) of r's kv
 * positions dst and src, both past its locked tree prefix, so the KV an
 * accepted tree node computed at src serves position dst. */
void sched_kv_move_page(sched *s, sreq *r, int64_t dst, int64_t src);

/* Give back r's KV: pages past its computed KV to the pool, the rest to
 * the radix tree (insert) or the pool; drops the lock. */
void sched_kv_release(sched *s, sreq *r, bool insert);

/* SGLang's cache_unfinished_req after a prefill (chunk or whole): r's
 * computed KV goes into the tree, shareable from the next step; r's slots
 * follow the pages the tree gave back.  0, or -1: the page table can no
 * longer be trusted (r->kv_broken set: release it without insert). */
int sched_kv_cache_prefill(sched *s, sreq *r);

/* Hybrid Mamba2 models (kv/mamba_state.h).  Before the KV cache is made:
 * check the mamba arguments, decide the number of states (*n_states) and
 * shrink *tokens to what the KV cache keeps of the budget.  0, or -1 with
 * err. */
int sched_kv_mamba_plan(model *m, const sched_args *a, dtype kdt, int64_t *tokens, int64_t *n_states,
                        char *err, size_t errlen);
/* After it: the states in s's KV cache, the slot pool, max_running capped,
 * the radix cache off (logged).  0 or -1 (out of memory). */
int sched_kv_mamba_init(sched *s, int64_t n_states);
/* Admission: a state slot for r; 0, or -1 when none is free. */
int sched_kv_mamba_take(sched *s, sreq *r);
/* Room for n sequences in s->eng.b_state; 0 or -1. */
int sched_kv_mamba_reserve(sched *s, int n);

#endif
