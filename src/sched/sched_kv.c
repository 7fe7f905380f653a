/* sched_kv — KV bookkeeping of one request: its page table and slot list
 * (see the diagram in sched_impl.h), allocation with eviction, release
 * into the radix tree or the pool.
 *
 * DESIGN
 * Layer 4 (sched_impl.h "Layers"): includes sched_util.  The radix tree
 * and the page pool are the only owners of pages; a request holds a
 * locked tree prefix (rr) plus pages of its own, and every page goes back
 * through sched_kv_release. */
#include "sched/sched_kv.h"

#include <inttypes.h>
#include <stdlib.h>

#include "sched/sched_util.h"
#include "util/log.h"

/* ---- KV bookkeeping -------------------------------------------------------- */

void sched_kv_set_slots(sched *s, sreq *r, int64_t from_page)
{
    int P = s->lim.P;
    for (int64_t p = from_page; p < r->kv.n_pages; p++)
        for (int k = 0; k < P; k++) r->kv.slots[p * P + k] = r->kv.pages[p] * P + k;
}

int sched_kv_page_room(sched *s, sreq *r, int64_t n_pages)
{
    int64_t c = r->kv.pages_cap;
    if (sched_grow((void **)&r->kv.pages, &c, n_pages, sizeof(int32_t))) return -1;
    if (c != r->kv.pages_cap) {
        int32_t *g = realloc(r->kv.slots, sizeof(int32_t) * (size_t)(c * s->lim.P));
        if (!g) return -1;
        r->kv.slots = g;
        r->kv.pages_cap = c;
    }
    return 0;
}

/* Pages the pool can give after evicting the whole evictable tree. */
int64_t sched_kv_avail_pages(sched *s)
{
    return kv_pool_free_pages(s->eng.pool) + kv_radix_evictable_size(s->eng.tree) / s->lim.P;
}

/* Get n pages from the pool, evicting cached prefixes as needed. */
static int take_pages(sched *s, int64_t n, int32_t *out)
{
    if (n <= 0) return 0;
    int64_t fp = kv_pool_free_pages(s->eng.pool);
    if (fp < n) kv_radix_evict(s->eng.tree, (n - fp) * s->lim.P);
    return kv_pool_alloc(s->eng.pool, n, out);
}

/* Make r's page table cover positions [0, upto). */
int sched_kv_alloc_upto(sched *s, sreq *r, int64_t upto)
{
    int64_t need = kv_pool_pages_for(s->eng.pool, upto);
    if (need <= r->kv.n_pages) return 0;
    if (sched_kv_page_room(s, r, need)) return -1;
    if (take_pages(s, need - r->kv.n_pages, r->kv.pages + r->kv.n_pages)) return -1;
    int64_t from = r->kv.n_pages;
    r->kv.n_pages = need;
    sched_kv_set_slots(s, r, from);
    return 0;
}

/* Give back r's KV: pages past its computed KV to the pool, the rest to
 * the radix tree (insert) or the pool; drops the lock.  r holds nothing
 * afterwards. */
void sched_kv_release(sched *s, sreq *r, bool insert)
{
    if (!r->kv.holds_kv) return;
    int64_t keep = kv_pool_pages_for(s->eng.pool, r->kv.kv_len);
    if (r->kv.n_pages > keep) {
        if (kv_pool_free(s->eng.pool, r->kv.pages + keep, r->kv.n_pages - keep))
            log_error("request %s: could not free %" PRId64 " pages", r->who.rid, r->kv.n_pages - keep);
        r->kv.n_pages = keep;
    }
    if (kv_radix_req_cache_finished(s->eng.tree, &r->kv.rr, r->tok.seq, r->kv.kv_len, r->kv.pages, insert && !r->kv.kv_broken))
        log_error("request %s: releasing its KV failed", r->who.rid);
    r->kv.n_pages = 0;
    r->kv.kv_len = 0;
    r->kv.holds_kv = false;
}

void sched_kv_trim(sched *s, sreq *r, int64_t upto)
{
    int64_t keep = kv_pool_pages_for(s->eng.pool, upto);
    if (r->kv.n_pages <= keep) return;
    if (kv_pool_free(s->eng.pool, r->kv.pages + keep, r->kv.n_pages - keep))
        log_error("request %s: could not free %" PRId64 " pages", r->who.rid, r->kv.n_pages - keep);
    r->kv.n_pages = keep;
}

int sched_kv_cache_prefill(sched *s, sreq *r)
{
    if (kv_radix_disabled(s->eng.tree)) return 0;
    if (kv_radix_req_cache_unfinished(s->eng.tree, &r->kv.rr, r->tok.seq, r->kv.kv_len, r->kv.pages)) {
        r->kv.kv_broken = true; /* kv_radix.h: the page table is no longer trustworthy */
        return -1;
    }
    sched_kv_set_slots(s, r, 0);
    return 0;
}
