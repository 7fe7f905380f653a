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
#include <stdio.h>
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
    if (r->kv.holds_mamba) { /* a recurrent state is never cached: its slot goes back */
        if (mamba_state_free(s->eng.mpool, r->kv.mamba_slot))
            log_error("request %s: could not free its Mamba state", r->who.rid);
        r->kv.holds_mamba = false;
    }
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

void sched_kv_move_page(sched *s, sreq *r, int64_t dst, int64_t src)
{
    if (s->lim.P != 1 || dst == src || dst >= r->kv.n_pages || src >= r->kv.n_pages) {
        log_error("request %s: a tree node's KV cannot move from %" PRId64 " to %" PRId64, r->who.rid, src, dst);
        r->kv.kv_broken = true; /* its KV is not cached at release */
        return;
    }
    int32_t t = r->kv.pages[dst];
    r->kv.pages[dst] = r->kv.pages[src];
    r->kv.pages[src] = t;
    r->kv.slots[dst] = r->kv.pages[dst];
    r->kv.slots[src] = r->kv.pages[src];
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

/* ---- hybrid Mamba2 models: state slots ------------------------------------- */

int sched_kv_mamba_plan(model *m, const sched_args *a, dtype kdt, int64_t *tokens, int64_t *n_states,
                        char *err, size_t errlen)
{
    if (a->mamba_ssm_dtype != DTYPE_F32 && a->mamba_ssm_dtype != DTYPE_BF16) {
        snprintf(err, errlen, "--mamba-ssm-dtype: only float32 and bfloat16 SSM states are supported on CPU");
        return -1;
    }
    if (a->mamba_extra_buffer) {
        snprintf(err, errlen, "--mamba-scheduler-strategy extra_buffer (state checkpoints every "
                 "--mamba-track-interval tokens for prefix caching) is not supported yet; use auto or no_buffer");
        return -1;
    }
    const double r = a->mamba_full_memory_ratio > 0 ? a->mamba_full_memory_ratio : 0.9;
    const size_t sb = model_mamba_state_bytes(m, (dtype)a->mamba_ssm_dtype);
    const double pt = (double)model_kv_token_bytes(m, kdt), kv_bytes = (double)*tokens * pt;
    double left;
    int64_t n;
    if (a->max_total_tokens > 0) { /* the KV cache is fixed: the states come beside it */
        n = mamba_state_count(a->max_mamba_cache_size, a->max_running_requests, kv_bytes * (1.0 + r), r, sb, &left);
    } else { /* one budget for both, split by the ratio (SGLang's handle_max_mamba_cache) */
        n = mamba_state_count(a->max_mamba_cache_size, a->max_running_requests, kv_bytes, r, sb, &left);
        *tokens = (int64_t)(left / pt);
    }
    if (n > 1 << 20) n = 1 << 20;
    if (n < 1) {
        snprintf(err, errlen, "not enough memory for one Mamba state (%.1f MiB); set --max-mamba-cache-size, "
                 "--max-running-requests or raise --mem-fraction-static", sb / 1048576.0);
        return -1;
    }
    *n_states = n;
    log_info("Mamba cache: %" PRId64 " states x %.2f MiB (SSM %s) = %.2f GiB%s", n, sb / 1048576.0,
             dtype_name((dtype)a->mamba_ssm_dtype), (double)n * (double)sb / 1073741824.0,
             a->max_mamba_cache_size > 0 ? " (--max-mamba-cache-size)"
             : a->max_running_requests > 0 ? " (--max-running-requests)" : "");
    return 0;
}

int sched_kv_mamba_init(sched *s, int64_t n_states)
{
    if (model_kv_set_mamba_states(s->eng.m, s->eng.kv, (int)n_states, (dtype)s->a.mamba_ssm_dtype)) return -1;
    s->eng.mpool = mamba_state_pool_create((int)n_states);
    if (!s->eng.mpool) return -1;
    if (s->lim.max_running > n_states) s->lim.max_running = (int)n_states;
    if (!s->a.disable_radix_cache)
        log_info("radix cache disabled for %s: a Mamba state summarises its whole prefix, so a cached "
                 "prefix cannot be resumed without state checkpoints (--mamba-scheduler-strategy "
                 "extra_buffer, not supported yet)", s->eng.c->architecture);
    s->a.disable_radix_cache = true;
    return 0;
}

int sched_kv_mamba_take(sched *s, sreq *r)
{
    if (r->kv.holds_mamba) return 0;
    int32_t id = mamba_state_alloc(s->eng.mpool);
    if (id < 0) return -1;
    r->kv.mamba_slot = id;
    r->kv.holds_mamba = true;
    return 0;
}

int sched_kv_mamba_reserve(sched *s, int n)
{
    if (n <= s->eng.cap_state) return 0;
    int32_t *g = realloc(s->eng.b_state, sizeof(int32_t) * (size_t)n);
    if (!g) return -1;
    s->eng.b_state = g;
    s->eng.cap_state = n;
    return 0;
}
