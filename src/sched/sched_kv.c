/* sched_kv — KV bookkeeping of one request: its page table and slot list
 * (see the diagram in sched_impl.h), allocation with eviction, release
 * into the radix tree or the pool.
 *
 * DESIGN
 * Layer 4 (sched_impl.h "Layers"): includes sched_util.  The radix tree
 * and the page pool are the only owners of pages; a request holds a
 * locked tree prefix (rr) plus pages of its own, and every page goes back
 * through sched_kv_release.  Hybrid Mamba2 models' state slots (live
 * states and extra_buffer checkpoints) are at the end of the file. */
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
    if (r->kv.holds_mamba) { /* the live state goes back (its checkpoints are in the tree already) */
        if (mamba_state_free(s->eng.mpool, r->kv.mamba_slot))
            log_error("request %s: could not free its Mamba state", r->who.rid);
        r->kv.holds_mamba = false;
    }
    if (!r->kv.holds_kv) return;
    /* extra_buffer: the tree got this request's KV up to each checkpoint as
     * it was made (sched_kv_mamba_commit); KV past the last one cannot be
     * resumed (no state there), so it goes back to the pool */
    if (s->lim.mtrack) insert = false;
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
    const int64_t P = s->lim.P;
    if (dst == src || dst < 0 || src < 0 || dst >= r->kv.n_pages * P || src >= r->kv.n_pages * P) {
        log_error("request %s: a tree node's KV cannot move from %" PRId64 " to %" PRId64, r->who.rid, src, dst);
        r->kv.kv_broken = true; /* its KV is not cached at release */
        return;
    }
    if (P > 1) { /* a page holds other positions: copy the node's rows into place */
        if (model_tree_copy_slot(s->eng.m, s->eng.kv, r->kv.slots[dst], r->kv.slots[src])) r->kv.kv_broken = true;
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
    if (kv_radix_disabled(s->eng.tree) || s->lim.mtrack) return 0; /* extra_buffer: at checkpoints only */
    if (kv_radix_req_cache_unfinished(s->eng.tree, &r->kv.rr, r->tok.seq, r->kv.kv_len, r->kv.pages)) {
        r->kv.kv_broken = true; /* kv_radix.h: the page table is no longer trustworthy */
        return -1;
    }
    sched_kv_set_slots(s, r, 0);
    return 0;
}

/* ---- hybrid Mamba2 models: state slots and checkpoints ----------------------
 *
 * no_buffer: one state slot per running request, the radix cache off (a
 * state summarises its whole prefix; a cached prefix cannot be resumed).
 *
 * extra_buffer (SGLang's strategy, learned from its mamba_radix_cache.py
 * and the scheduler's track-interval logic): every forward that carries a
 * request across a multiple of --mamba-track-interval T (prefill rows or a
 * decode token) copies the request's state there into a checkpoint slot
 * (model_batch.seq_snap; the slots are taken at assembly, evicting the
 * least recently used tree checkpoint when the pool is empty, or the
 * checkpoint is skipped).  Right after the forward (sched_kv_mamba_commit)
 * the request's KV up to each checkpoint goes into the radix tree and the
 * node ending there takes the slot (kv_radix_node_set_state); a node that
 * already has one keeps it and the new slot goes back.  Admission matches
 * up to the deepest node holding a state (kv_radix_req_match_state),
 * copies that state into the request's own slot and prefills the rest.
 * KV past a request's last checkpoint is never cached (nothing could
 * resume from it).  Every slot is in exactly one hand:
 *     n_states == free + live (one per admitted request) + tree states
 *                 + this step's checkpoints (between assembly and commit)
 * and the idle leak check holds the first three to it.
 *
 * Sizing: the pool is sized as before (--max-mamba-cache-size, else the
 * memory ratio; --max-running-requests no longer sizes it) and, as
 * SGLang's _calculate_mamba_ratio without the overlap scheduler (3 + 1
 * slots per running request), max_running_requests <= n_states / 4. */

#define MAMBA_SLOTS_PER_RUNNING 4

int sched_kv_mamba_plan(model *m, const sched_args *a, dtype kdt, int64_t *tokens, int64_t *n_states,
                        int *track, char *err, size_t errlen)
{
    if (a->mamba_ssm_dtype != DTYPE_F32 && a->mamba_ssm_dtype != DTYPE_BF16) {
        snprintf(err, errlen, "--mamba-ssm-dtype: only float32 and bfloat16 SSM states are supported on CPU");
        return -1;
    }
    const int T = a->mamba_track_interval, P = a->page_size > 0 ? a->page_size : 1;
    *track = 0;
    if (a->mamba_strategy == SCHED_MAMBA_EXTRA_BUFFER) {
        if (T < 1 || T % P) {
            snprintf(err, errlen, "--mamba-track-interval %d must be a positive multiple of --page-size %d "
                     "(checkpoints are page-aligned radix nodes)", T, P);
            return -1;
        }
        if (a->disable_radix_cache)
            log_info("--mamba-scheduler-strategy extra_buffer with --disable-radix-cache: no state checkpoints");
        else *track = T;
    } else if (a->mamba_strategy == SCHED_MAMBA_AUTO && !a->disable_radix_cache) {
        if (T >= 1 && T % P == 0) *track = T;
        else log_info("--mamba-scheduler-strategy auto: no_buffer, --mamba-track-interval %d is not a positive "
                      "multiple of --page-size %d", T, P);
    }
    const double r = a->mamba_full_memory_ratio > 0 ? a->mamba_full_memory_ratio : 0.9;
    const size_t sb = model_mamba_state_bytes(m, (dtype)a->mamba_ssm_dtype);
    const double pt = (double)model_kv_token_bytes(m, kdt), kv_bytes = (double)*tokens * pt;
    /* with checkpoints the pool is not one state per running request (SGLang sizes it from the
     * budget too when the radix cache is on) */
    const int64_t mr = *track ? 0 : a->max_running_requests;
    double left;
    int64_t n;
    if (a->max_total_tokens > 0) { /* the KV cache is fixed: the states come beside it */
        n = mamba_state_count(a->max_mamba_cache_size, mr, kv_bytes * (1.0 + r), r, sb, &left);
    } else { /* one budget for both, split by the ratio (SGLang's handle_max_mamba_cache) */
        n = mamba_state_count(a->max_mamba_cache_size, mr, kv_bytes, r, sb, &left);
        *tokens = (int64_t)(left / pt);
    }
    if (n > 1 << 20) n = 1 << 20;
    if (n < 1) {
        snprintf(err, errlen, "not enough memory for one Mamba state (%.1f MiB); set --max-mamba-cache-size, "
                 "--max-running-requests or raise --mem-fraction-static", sb / 1048576.0);
        return -1;
    }
    *n_states = n;
    /* under --tp-size / --pp-size: one rank's (its heads, its stage's Mamba layers; model_mamba_state_bytes) */
    log_info("Mamba cache: %" PRId64 " states x %.2f MiB (%zu bytes, SSM %s) = %.2f GiB%s%s", n, sb / 1048576.0, sb,
             dtype_name((dtype)a->mamba_ssm_dtype), (double)n * (double)sb / 1073741824.0,
             model_tp_size(m) > 1 ? " per rank" : "",
             a->max_mamba_cache_size > 0 ? " (--max-mamba-cache-size)"
             : mr > 0 ? " (--max-running-requests)" : "");
    return 0;
}

/* The tree drops a checkpoint: its slot goes back to the pool. */
static void tree_state_free(void *ctx, int32_t id)
{
    if (mamba_state_free((mamba_state_pool *)ctx, id)) log_error("the radix tree dropped a foreign Mamba state %d", id);
}

int sched_kv_mamba_init(sched *s, int64_t n_states, int track)
{
    if (model_kv_set_mamba_states(s->eng.m, s->eng.kv, (int)n_states, (dtype)s->a.mamba_ssm_dtype)) return -1;
    s->eng.mpool = mamba_state_pool_create((int)n_states);
    if (!s->eng.mpool) return -1;
    s->lim.mtrack = track;
    if (track) {
        int64_t cap = n_states / MAMBA_SLOTS_PER_RUNNING > 0 ? n_states / MAMBA_SLOTS_PER_RUNNING : 1;
        if (s->lim.max_running > cap) s->lim.max_running = (int)cap;
        log_info("radix cache for %s with Mamba state checkpoints every %d tokens "
                 "(--mamba-scheduler-strategy extra_buffer): %" PRId64 " state slots, "
                 "max_running_requests %d", s->eng.c->architecture, track, n_states, s->lim.max_running);
        return 0;
    }
    if (s->lim.max_running > n_states) s->lim.max_running = (int)n_states;
    if (!s->a.disable_radix_cache)
        log_info("radix cache disabled for %s: a Mamba state summarises its whole prefix, so a cached "
                 "prefix cannot be resumed without state checkpoints (--mamba-scheduler-strategy "
                 "no_buffer; extra_buffer keeps checkpoints)", s->eng.c->architecture);
    s->a.disable_radix_cache = true;
    return 0;
}

void sched_kv_mamba_attach(sched *s)
{
    if (s->eng.mpool && s->eng.tree) kv_radix_set_state_free(s->eng.tree, tree_state_free, s->eng.mpool);
}

/* A free slot, evicting the least recently used tree checkpoint (not
 * `keep`) when none is; -1 when the pool has none left. */
static int32_t state_slot(sched *s, int32_t keep)
{
    int32_t id = mamba_state_alloc(s->eng.mpool);
    if (id < 0 && s->lim.mtrack && kv_radix_evict_states(s->eng.tree, 1, keep) > 0) id = mamba_state_alloc(s->eng.mpool);
    return id;
}

int sched_kv_mamba_take(sched *s, sreq *r, int32_t src, int64_t prefix)
{
    if (r->kv.holds_mamba) return 0;
    int32_t id = state_slot(s, src);
    if (id < 0) return -1;
    if (prefix > 0) { /* resume the cached prefix from its checkpoint's copy */
        if (src < 0 || model_kv_mamba_len(s->eng.kv, src) != prefix || model_kv_mamba_copy(s->eng.kv, id, src)) {
            log_error("request %s: the checkpoint of its %" PRId64 "-token cached prefix (state %d) is unusable",
                      r->who.rid, prefix, src);
            mamba_state_free(s->eng.mpool, id);
            return -1;
        }
    }
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
    int32_t *o = realloc(s->eng.b_snap, sizeof(int32_t) * (size_t)(n + 1));
    if (!o) return -1;
    s->eng.b_snap = o;
    s->eng.cap_state = n;
    return 0;
}

int sched_kv_mamba_snaps(sched *s, int b, int64_t first, int64_t end)
{
    s->eng.b_snap[b] = s->eng.n_snap;
    const int T = s->lim.mtrack;
    if (!T) return 0;
    for (int64_t c = (first / T + 1) * T; c <= end; c += T) {
        if (s->eng.n_snap == s->eng.cap_snap) {
            int nc = s->eng.cap_snap ? s->eng.cap_snap * 2 : 16;
            int32_t *p = realloc(s->eng.b_snap_pos, sizeof(int32_t) * (size_t)nc);
            if (!p) return -1;
            s->eng.b_snap_pos = p;
            p = realloc(s->eng.b_snap_slot, sizeof(int32_t) * (size_t)nc);
            if (!p) return -1;
            s->eng.b_snap_slot = p;
            s->eng.cap_snap = nc;
        }
        int32_t id = state_slot(s, -1);
        if (id < 0) {
            log_debug("no Mamba state slot for a checkpoint at %" PRId64 ": skipped", c);
            continue;
        }
        s->eng.b_snap_pos[s->eng.n_snap] = (int32_t)c;
        s->eng.b_snap_slot[s->eng.n_snap++] = id;
    }
    return 0;
}

void sched_kv_mamba_drop(sched *s)
{
    for (int k = 0; k < s->eng.n_snap; k++) mamba_state_free(s->eng.mpool, s->eng.b_snap_slot[k]);
    s->eng.n_snap = 0;
}

/* Checkpoints k0..k1 of r (positions increasing) into the tree. */
static void commit_req(sched *s, sreq *r, int k0, int k1)
{
    for (int k = k0; k < k1; k++) {
        int32_t id = s->eng.b_snap_slot[k];
        int64_t c = s->eng.b_snap_pos[k];
        bool kept = false;
        if (r->kv.holds_kv && !r->kv.kv_broken && c >= r->kv.rr.protected_len) {
            if (kv_radix_req_cache_unfinished(s->eng.tree, &r->kv.rr, r->tok.seq, c, r->kv.pages)) {
                r->kv.kv_broken = true; /* kv_radix.h: the page table is no longer trustworthy */
                log_error("request %s: caching its KV up to checkpoint %" PRId64 " failed", r->who.rid, c);
            } else {
                sched_kv_set_slots(s, r, 0);
                kept = kv_radix_node_set_state(s->eng.tree, r->kv.rr.last_node, id) == 0;
            }
        }
        if (!kept && mamba_state_free(s->eng.mpool, id))
            log_error("request %s: could not free checkpoint state %d", r->who.rid, id);
    }
}

void sched_kv_mamba_commit(sched *s, bool with_decode)
{
    if (!s->eng.n_snap) return;
    int n_seq = s->buf.n_batch + (with_decode ? s->q.n_running : 0);
    for (int b = 0; b < n_seq; b++) {
        sreq *r = b < s->buf.n_batch ? s->buf.batch[b] : s->q.running[b - s->buf.n_batch];
        int k1 = b + 1 < n_seq ? s->eng.b_snap[b + 1] : s->eng.n_snap;
        commit_req(s, r, s->eng.b_snap[b], k1);
    }
    s->eng.n_snap = 0;
}

int sched_kv_mamba_check_leak(sched *s, char *err, size_t errlen)
{
    if (!s->eng.mpool) return 0;
    int64_t held = kv_radix_n_states(s->eng.tree), fr = mamba_state_n_free(s->eng.mpool), n = mamba_state_n_total(s->eng.mpool);
    if (fr + held == n) return 0;
    snprintf(err, errlen, "Mamba state pool leak detected! diff=%" PRId64 " (free %" PRId64 " + radix tree checkpoints %"
             PRId64 ", states=%" PRId64 ")", fr + held - n, fr, held, n);
    return -1;
}
