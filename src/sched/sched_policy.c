/* sched_policy — order of the waiting queue (SGLang's SchedulePolicy).
 *
 * DESIGN
 *   fcfs        queue order (arrival; retracted requests re-enter at the end)
 *   lpm         longest cached prefix first (radix match, no lock)
 *   dfs-weight  walk the radix tree depth-first, heavier subtrees (more
 *               waiting requests under them) first, so that requests
 *               sharing a prefix are admitted together
 *   lof         longest max_new_tokens first
 *   random      shuffle
 * The cache-aware policies (lpm, dfs-weight) cost a tree match per waiting
 * request; like SGLang they fall back to fcfs when more than 128 wait.
 * With --enable-priority-scheduling the priority is the primary key
 * (higher values first, or lower with --schedule-low-priority-values-first)
 * and the policy order breaks ties.  Sorting is stable: ties keep queue
 * order.
 *
 * Layer 2 (sched_impl.h "Layers"): includes sched_util only. */
#include <stdlib.h>
#include <string.h>

#include "sched/sched_policy.h"

#include "sched/sched_util.h"
#include "util/log.h"

#define SCHED_CACHE_AWARE_MAX_QUEUE 128

/* qsort is not stable: every key ends with the current rank (order). */
static void rank_current(sched *s)
{
    for (int i = 0; i < s->q.n_waiting; i++) s->q.waiting[i]->pol.order = i;
}

static int cmp_lpm(const void *a, const void *b)
{
    const sreq *x = *(sreq *const *)a, *y = *(sreq *const *)b;
    if (x->pol.est_prefix != y->pol.est_prefix) return x->pol.est_prefix > y->pol.est_prefix ? -1 : 1;
    return (x->pol.order > y->pol.order) - (x->pol.order < y->pol.order);
}

static int cmp_lof(const void *a, const void *b)
{
    const sreq *x = *(sreq *const *)a, *y = *(sreq *const *)b;
    int64_t rx = x->tok.max_new - (x->tok.len - x->tok.n_input), ry = y->tok.max_new - (y->tok.len - y->tok.n_input);
    if (rx != ry) return rx > ry ? -1 : 1;
    return (x->pol.order > y->pol.order) - (x->pol.order < y->pol.order);
}

static int cmp_prio(const void *a, const void *b)
{
    const sreq *x = *(sreq *const *)a, *y = *(sreq *const *)b;
    if (x->pol.prio_key != y->pol.prio_key) return x->pol.prio_key < y->pol.prio_key ? -1 : 1;
    return (x->pol.order > y->pol.order) - (x->pol.order < y->pol.order);
}

static void match_all(sched *s)
{
    for (int i = 0; i < s->q.n_waiting; i++) {
        sreq *r = s->q.waiting[i];
        r->pol.est_node = NULL;
        r->pol.est_prefix = s->lim.mtrack /* hybrid Mamba2: resumable only from a checkpoint */
                                ? kv_radix_match_state(s->eng.tree, r->kv.cache_salt, r->tok.seq, r->tok.len - 1, &r->pol.est_node, NULL)
                                : kv_radix_match(s->eng.tree, r->kv.cache_salt, r->tok.seq, r->tok.len - 1, NULL, &r->pol.est_node);
    }
}

/* ---- dfs-weight ----------------------------------------------------------
 * Nodes on the paths from the waiting requests' matched nodes to the root,
 * in a small open-addressing table keyed by pointer. */
typedef struct {
    kv_radix_node *node;
    int parent;      /* index, -1 for the root */
    int64_t weight;  /* waiting requests in the subtree */
    int64_t first;   /* smallest rank of a request in the subtree (tie-break) */
    int *kids;       /* owned */
    int n_kids, cap_kids;
} dnode;

typedef struct {
    dnode *v;
    int n, cap;
    int *tab;
    int tab_cap;
} dtree;

static int dtree_find(dtree *d, kv_radix_node *node, bool add)
{
    uint64_t h = (uint64_t)(uintptr_t)node * 0x9E3779B97F4A7C15ull;
    for (int k = (int)(h >> 40) & (d->tab_cap - 1);; k = (k + 1) & (d->tab_cap - 1)) {
        if (d->tab[k] < 0) {
            if (!add) return -1;
            if (d->n == d->cap) return -2;
            d->tab[k] = d->n;
            d->v[d->n] = (dnode){.node = node, .parent = -1, .first = INT64_MAX};
            return d->n++;
        }
        if (d->v[d->tab[k]].node == node) return d->tab[k];
    }
}

static void dfs_emit(sched *s, dtree *d, int i, sreq **out, int *n_out)
{
    dnode *x = &d->v[i];
    /* children: heavier first, then earlier request */
    for (int a = 1; a < x->n_kids; a++) {
        int k = x->kids[a], b = a - 1;
        while (b >= 0) {
            dnode *p = &d->v[x->kids[b]], *q = &d->v[k];
            if (p->weight > q->weight || (p->weight == q->weight && p->first <= q->first)) break;
            x->kids[b + 1] = x->kids[b];
            b--;
        }
        x->kids[b + 1] = k;
    }
    for (int a = 0; a < x->n_kids; a++) dfs_emit(s, d, x->kids[a], out, n_out);
    for (int r = 0; r < s->q.n_waiting; r++)
        if (s->q.waiting[r]->pol.est_node == x->node) out[(*n_out)++] = s->q.waiting[r];
}

static int order_dfs_weight(sched *s)
{
    int n = s->q.n_waiting, rc = -1;
    /* a path has at most (len / P) + 1 nodes; bound the table by the sum */
    int64_t bound = 1;
    for (int i = 0; i < n; i++) bound += s->q.waiting[i]->pol.est_prefix / s->lim.P + 1;
    if (bound > (1 << 22)) return -1;
    dtree d = {0};
    d.cap = (int)bound;
    d.tab_cap = 16;
    while (d.tab_cap < 2 * d.cap) d.tab_cap <<= 1;
    d.v = calloc((size_t)d.cap, sizeof *d.v);
    d.tab = malloc(sizeof(int) * (size_t)d.tab_cap);
    sreq **out = malloc(sizeof(sreq *) * (size_t)n);
    if (!d.v || !d.tab || !out) goto done;
    memset(d.tab, 0xff, sizeof(int) * (size_t)d.tab_cap);
    kv_radix_node *root = kv_radix_root(s->eng.tree);
    if (dtree_find(&d, root, true) != 0) goto done;
    for (int i = 0; i < n; i++) {
        sreq *r = s->q.waiting[i];
        int child = -1;
        for (kv_radix_node *nd = r->pol.est_node ? r->pol.est_node : root; nd; nd = kv_radix_node_parent(nd)) {
            int existed = dtree_find(&d, nd, false);
            int k = existed >= 0 ? existed : dtree_find(&d, nd, true);
            if (k < 0) goto done;
            dnode *x = &d.v[k];
            x->weight++;
            if (i < x->first) x->first = i;
            if (child >= 0 && d.v[child].parent < 0) {
                d.v[child].parent = k;
                if (x->n_kids == x->cap_kids) {
                    int nc = x->cap_kids ? 2 * x->cap_kids : 4;
                    int *g = realloc(x->kids, sizeof(int) * (size_t)nc);
                    if (!g) goto done;
                    x->kids = g;
                    x->cap_kids = nc;
                }
                x->kids[x->n_kids++] = child;
            }
            if (existed >= 0 && nd != r->pol.est_node) {
                /* the rest of the path is known: only the weights remain */
                for (int p = d.v[k].parent; p >= 0; p = d.v[p].parent) {
                    d.v[p].weight++;
                    if (i < d.v[p].first) d.v[p].first = i;
                }
                break;
            }
            child = k;
        }
    }
    int n_out = 0;
    dfs_emit(s, &d, 0, out, &n_out);
    if (n_out != n) {
        log_error("dfs-weight ordered %d of %d requests", n_out, n);
        goto done;
    }
    memcpy(s->q.waiting, out, sizeof(sreq *) * (size_t)n);
    rc = 0;
done:
    if (d.v)
        for (int i = 0; i < d.n; i++) free(d.v[i].kids);
    free(d.v);
    free(d.tab);
    free(out);
    return rc;
}

void sched_policy_order(sched *s)
{
    int n = s->q.n_waiting;
    if (n == 0) return;
    sched_policy p = s->a.schedule_policy;
    bool cache_aware = p == SCHED_POLICY_LPM || p == SCHED_POLICY_DFS_WEIGHT;
    if (cache_aware && (n > SCHED_CACHE_AWARE_MAX_QUEUE || kv_radix_disabled(s->eng.tree)))
        p = SCHED_POLICY_FCFS;
    rank_current(s);
    switch (p) {
    case SCHED_POLICY_FCFS:
        break;
    case SCHED_POLICY_LPM:
        match_all(s);
        qsort(s->q.waiting, (size_t)n, sizeof(sreq *), cmp_lpm);
        break;
    case SCHED_POLICY_DFS_WEIGHT:
        match_all(s);
        if (order_dfs_weight(s)) log_warn("dfs-weight ordering failed; keeping fcfs order");
        break;
    case SCHED_POLICY_LOF:
        qsort(s->q.waiting, (size_t)n, sizeof(sreq *), cmp_lof);
        break;
    case SCHED_POLICY_RANDOM:
        /* in.rng is shared with sched_submit (other threads): draw under in.mu */
        pthread_mutex_lock(&s->in.mu);
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(sched_rand(&s->in.rng) % (uint64_t)(i + 1));
            sreq *t = s->q.waiting[i];
            s->q.waiting[i] = s->q.waiting[j];
            s->q.waiting[j] = t;
        }
        pthread_mutex_unlock(&s->in.mu);
        break;
    }
    if (s->a.enable_priority_scheduling) {
        rank_current(s);
        for (int i = 0; i < n; i++) {
            sreq *r = s->q.waiting[i];
            r->pol.prio_key = s->a.schedule_low_priority_values_first ? r->pol.priority
                                                                      : ~r->pol.priority; /* ~p = -p-1: no overflow */
        }
        qsort(s->q.waiting, (size_t)n, sizeof(sreq *), cmp_prio);
    }
}
