/* kv_model — a naive reference for kv_radix and a byte-driven scheduler
 * simulation that checks the tree against it after every step.
 *
 * Shared by tests/unit/test_kv.c (bytes from a seeded PRNG) and
 * tests/fuzz/fuzz_radix.c (bytes from libFuzzer).  Header-only (static
 * functions) so that each binary compiles its own copy.
 *
 * The reference knows nothing of trees: it is a flat list of cached PAGES,
 * each remembered with its isolation key and the FULL token prefix that
 * ends with it, plus the page id and LRU/LFU stats.  A match is "the
 * longest run of pages j = 0, 1, ... whose full prefix is in the list".
 * Because a radix node is always touched as a whole (the tree splits
 * first), page-level stats equal node-level stats, so the reference can
 * also judge every eviction the tree reports: it must be an unlocked
 * leaf, its pages must agree, and no other unlocked leaf may have a lower
 * (hit_count,) last_access.
 *
 * The simulation runs requests like the scheduler will: admit (match +
 * lock), extend by chunks (allocating pages, evicting when short), cache
 * unfinished chunks, finish (insert or not), probe matches, evict, reset.
 * After each step it checks: kv_radix_check(); match results and page ids
 * equal the reference; evictable/protected sizes equal the reference's;
 * every page has exactly one owner (pool free list, tree, or one request)
 * and the three counts sum to the pool's size. */
#ifndef SGLC_TESTS_KV_MODEL_H
#define SGLC_TESTS_KV_MODEL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_pool.h"
#include "kv/kv_radix.h"

#define KVM_MAX_TOK 64
#define KVM_MAX_REQ 6
#define KVM_MAX_ENT 4096
#define KVM_N_TPL 8

static const char *const kvm_ns_names[3] = {NULL, "a", "b"};

typedef struct {
    int ns;                      /* index into kvm_ns_names */
    int32_t tok[KVM_MAX_TOK];    /* full prefix ending with this page */
    int len;                     /* (j + 1) * P */
    int32_t page;
    uint64_t tick, hits;
} kvm_ent;

typedef struct {
    bool live;
    int ns;
    int32_t tok[KVM_MAX_TOK];
    int n_tok;                   /* tokens known (prompt + generated) */
    int n_kv;                    /* tokens with KV (pages allocated) */
    int32_t pages[KVM_MAX_TOK];  /* ceil(n_kv / P) */
    kv_radix_req rr;
} kvm_req;

typedef struct {
    /* input */
    const uint8_t *data;
    size_t len, pos;
    /* system under test */
    kv_pool *pool;
    kv_radix *tree;
    int P;
    kv_evict_policy policy;
    bool disable;
    /* reference */
    kvm_ent *ent;                /* (KVM_MAX_ENT) */
    int n_ent;
    uint64_t clock;
    kvm_req req[KVM_MAX_REQ];
    int32_t tpl[KVM_N_TPL][KVM_MAX_TOK];
    int tpl_len[KVM_N_TPL];
    /* eviction bookkeeping during one kv_radix_evict call */
    int64_t evicted_in_call, last_node_len;
    /* failure */
    char err[512];
    bool failed;
    uint8_t *owner;              /* (n_pages) scratch for ownership */
    int64_t n_ops;
    /* coverage counters (the unit test asserts they are not zero) */
    int64_t st_hit_tokens, st_evicted_nodes, st_retracts, st_finished;
} kvm;

static void kvm_fail(kvm *m, const char *fmt, ...)
{
    if (m->failed) return;
    m->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
}

static unsigned kvm_byte(kvm *m) { return m->pos < m->len ? m->data[m->pos++] : 0; }

/* ---------------------------------------------------------------- reference */

static int kvm_find(const kvm *m, int ns, const int32_t *tok, int len)
{
    for (int i = 0; i < m->n_ent; i++) {
        const kvm_ent *e = &m->ent[i];
        if (e->ns == ns && e->len == len && memcmp(e->tok, tok, (size_t)len * sizeof *tok) == 0) return i;
    }
    return -1;
}

static int kvm_ref_match(kvm *m, int ns, const int32_t *tok, int n, int32_t *pages, bool hit)
{
    uint64_t now = ++m->clock;
    if (m->disable) return 0;
    int P = m->P, got = 0;
    for (int j = 0; (j + 1) * P <= n; j++) {
        int i = kvm_find(m, ns, tok, (j + 1) * P);
        if (i < 0) break;
        m->ent[i].tick = now;
        if (hit) m->ent[i].hits++;
        if (pages) pages[j] = m->ent[i].page;
        got = (j + 1) * P;
    }
    return got;
}

static int kvm_ref_insert(kvm *m, int ns, const int32_t *tok, const int32_t *pages, int n, bool chunked)
{
    uint64_t now = ++m->clock;
    if (m->disable) return 0;
    int P = m->P, prefix = 0;
    bool missing = false;
    for (int j = 0; (j + 1) * P <= n; j++) {
        int i = missing ? -1 : kvm_find(m, ns, tok, (j + 1) * P);
        if (i >= 0) {
            m->ent[i].tick = now;
            if (!chunked) m->ent[i].hits++;
            prefix = (j + 1) * P;
            continue;
        }
        missing = true;
        if (m->n_ent == KVM_MAX_ENT) {
            kvm_fail(m, "reference full");
            return prefix;
        }
        kvm_ent *e = &m->ent[m->n_ent++];
        e->ns = ns;
        e->len = (j + 1) * P;
        memcpy(e->tok, tok, (size_t)e->len * sizeof *tok);
        e->page = pages[j];
        e->tick = now;
        e->hits = 0;
    }
    return prefix;
}

static bool kvm_locked(const kvm *m, const kvm_ent *e)
{
    for (int r = 0; r < KVM_MAX_REQ; r++) {
        const kvm_req *q = &m->req[r];
        if (q->live && q->ns == e->ns && q->rr.protected_len >= e->len &&
            memcmp(q->tok, e->tok, (size_t)e->len * sizeof *e->tok) == 0)
            return true;
    }
    return false;
}

static bool kvm_has_child(const kvm *m, const kvm_ent *e)
{
    for (int i = 0; i < m->n_ent; i++) {
        const kvm_ent *c = &m->ent[i];
        if (c->ns == e->ns && c->len == e->len + m->P && memcmp(c->tok, e->tok, (size_t)e->len * sizeof *e->tok) == 0)
            return true;
    }
    return false;
}

static bool kvm_before(const kvm *m, const kvm_ent *a, const kvm_ent *b)
{
    if (m->policy == KV_EVICT_LFU && a->hits != b->hits) return a->hits < b->hits;
    return a->tick < b->tick;
}

static int kvm_ns_index(const char *ns)
{
    if (!ns) return 0;
    return strcmp(ns, "a") == 0 ? 1 : strcmp(ns, "b") == 0 ? 2 : -1;
}

/* The tree reports one evicted node: judge it, then forget its pages. */
static void kvm_on_evict(void *ctx, const char *ns, const int32_t *path, int64_t path_len,
                         int64_t node_len, const int32_t *pages)
{
    kvm *m = ctx;
    int P = m->P, nsi = kvm_ns_index(ns);
    if (nsi < 0 || path_len > KVM_MAX_TOK || node_len <= 0 || node_len > path_len || node_len % P) {
        kvm_fail(m, "evict callback: bad arguments (ns=%s path_len=%lld node_len=%lld)", ns ? ns : "(null)",
                 (long long)path_len, (long long)node_len);
        return;
    }
    int first = (int)(path_len - node_len) / P, last = (int)path_len / P - 1;
    int idx[KVM_MAX_TOK] = {0};
    for (int j = first; j <= last; j++) {
        int i = kvm_find(m, nsi, path, (j + 1) * P);
        if (i < 0) {
            kvm_fail(m, "tree evicted a page the reference does not hold (prefix len %d)", (j + 1) * P);
            return;
        }
        if (m->ent[i].page != pages[j - first]) {
            kvm_fail(m, "evicted page id %d, reference has %d", pages[j - first], m->ent[i].page);
            return;
        }
        if (kvm_locked(m, &m->ent[i])) {
            kvm_fail(m, "tree evicted a locked page (prefix len %d)", (j + 1) * P);
            return;
        }
        if (kv_pool_page_is_free(m->pool, pages[j - first])) {
            kvm_fail(m, "evicted page %d is already free", pages[j - first]);
            return;
        }
        idx[j - first] = i;
    }
    const kvm_ent *tail = &m->ent[idx[last - first]];
    for (int j = first; j < last; j++)
        if (m->ent[idx[j - first]].tick != tail->tick || m->ent[idx[j - first]].hits != tail->hits) {
            kvm_fail(m, "pages of one evicted node have different stats");
            return;
        }
    if (kvm_has_child(m, tail)) {
        kvm_fail(m, "tree evicted a node that still has cached children");
        return;
    }
    /* No other unlocked leaf page may come strictly before it. */
    for (int i = 0; i < m->n_ent; i++) {
        const kvm_ent *e = &m->ent[i];
        if (e == tail || kvm_locked(m, e) || kvm_has_child(m, e)) continue;
        if (kvm_before(m, e, tail)) {
            kvm_fail(m, "%s order broken: evicted (hits %llu, tick %llu) while (hits %llu, tick %llu) waits",
                     kv_evict_policy_name(m->policy), (unsigned long long)tail->hits,
                     (unsigned long long)tail->tick, (unsigned long long)e->hits, (unsigned long long)e->tick);
            return;
        }
    }
    /* forget the node's pages (highest index first keeps idx valid) */
    for (int k = last - first; k >= 0; k--) {
        int hi = -1, hk = -1;
        for (int q = 0; q <= last - first; q++)
            if (idx[q] > hi) hi = idx[q], hk = q;
        m->ent[hi] = m->ent[--m->n_ent];
        idx[hk] = -1;
        for (int q = 0; q <= last - first; q++)
            if (idx[q] == m->n_ent) idx[q] = hi;
    }
    m->evicted_in_call += node_len;
    m->st_evicted_nodes++;
    m->last_node_len = node_len;
}

/* ---------------------------------------------------------------- checks */

static void kvm_check(kvm *m, const char *after)
{
    if (m->failed) return;
    char err[256];
    if (kv_radix_check(m->tree, err, sizeof err) != 0) {
        kvm_fail(m, "after %s: kv_radix_check: %s", after, err);
        return;
    }
    int64_t locked = 0;
    for (int i = 0; i < m->n_ent; i++) locked += kvm_locked(m, &m->ent[i]);
    int64_t prot = locked * m->P, evic = (int64_t)(m->n_ent - locked) * m->P;
    if (kv_radix_protected_size(m->tree) != prot || kv_radix_evictable_size(m->tree) != evic) {
        kvm_fail(m, "after %s: sizes tree (evictable %lld, protected %lld) vs reference (%lld, %lld)", after,
                 (long long)kv_radix_evictable_size(m->tree), (long long)kv_radix_protected_size(m->tree),
                 (long long)evic, (long long)prot);
        return;
    }
    /* ownership: every page exactly once */
    int64_t np = kv_pool_n_pages(m->pool);
    memset(m->owner, 0, (size_t)np);
    int64_t n_free = 0, n_tree = 0, n_req = 0;
    for (int64_t p = 0; p < np; p++)
        if (kv_pool_page_is_free(m->pool, (int32_t)p)) m->owner[p]++, n_free++;
    for (int i = 0; i < m->n_ent; i++) {
        int32_t p = m->ent[i].page;
        if (p < 0 || p >= np) {
            kvm_fail(m, "after %s: reference page %d out of range", after, p);
            return;
        }
        m->owner[p]++;
        n_tree++;
    }
    for (int r = 0; r < KVM_MAX_REQ; r++) {
        const kvm_req *q = &m->req[r];
        if (!q->live) continue;
        int own0 = (int)(q->rr.protected_len / m->P), npg = (q->n_kv + m->P - 1) / m->P;
        for (int j = 0; j < own0; j++) {
            int i = kvm_find(m, q->ns, q->tok, (j + 1) * m->P);
            if (i < 0 || m->ent[i].page != q->pages[j]) {
                kvm_fail(m, "after %s: request %d page %d (%d) is not the tree's page for its prefix", after, r, j,
                         q->pages[j]);
                return;
            }
        }
        for (int j = own0; j < npg; j++) {
            if (q->pages[j] < 0 || q->pages[j] >= np) {
                kvm_fail(m, "after %s: request page out of range", after);
                return;
            }
            m->owner[q->pages[j]]++;
            n_req++;
        }
    }
    for (int64_t p = 0; p < np; p++)
        if (m->owner[p] != 1) {
            kvm_fail(m, "after %s: page %lld has %d owners (free %d)", after, (long long)p, m->owner[p],
                     kv_pool_page_is_free(m->pool, (int32_t)p));
            return;
        }
    if (n_free + n_tree + n_req != np || kv_radix_total_size(m->tree) != n_tree * m->P) {
        kvm_fail(m, "after %s: free %lld + tree %lld + requests %lld != %lld pages", after, (long long)n_free,
                 (long long)n_tree, (long long)n_req, (long long)np);
        return;
    }
}

/* ---------------------------------------------------------------- steps */

/* Get n pages for a request, evicting from the tree when the pool is
 * short (as the scheduler does).  false when even eviction cannot help. */
static bool kvm_alloc(kvm *m, int n, int32_t *out)
{
    if (kv_pool_alloc(m->pool, n, out) == 0) return true;
    int64_t short_tok = (n - kv_pool_free_pages(m->pool)) * m->P;
    int64_t evic_before = kv_radix_evictable_size(m->tree);
    m->evicted_in_call = 0;
    m->last_node_len = 0;
    int64_t got = kv_radix_evict(m->tree, short_tok);
    if (got != m->evicted_in_call && !m->failed)
        kvm_fail(m, "evict returned %lld, callback saw %lld", (long long)got, (long long)m->evicted_in_call);
    int64_t want = short_tok < evic_before ? short_tok : evic_before;
    if (!m->disable && (got < want || (got - m->last_node_len >= short_tok && got > 0)))
        kvm_fail(m, "evict(%lld) freed %lld with %lld evictable", (long long)short_tok, (long long)got,
                 (long long)evic_before);
    return kv_pool_alloc(m->pool, n, out) == 0;
}

static void kvm_new_tokens(kvm *m, int32_t *tok, int n_have, int n_want)
{
    for (int i = n_have; i < n_want; i++) tok[i] = (int32_t)(kvm_byte(m) % 3);
}

static void kvm_step_admit(kvm *m, int r)
{
    kvm_req *q = &m->req[r];
    unsigned b = kvm_byte(m);
    q->ns = (int)(b % 3);
    int t = (int)((b >> 2) % KVM_N_TPL);
    int plen = (int)(kvm_byte(m) % (KVM_MAX_TOK + 1));
    if (plen > m->tpl_len[t]) plen = m->tpl_len[t];
    int len = 1 + (int)(kvm_byte(m) % (KVM_MAX_TOK / 2));
    if (len < plen) len = plen;
    memcpy(q->tok, m->tpl[t], (size_t)plen * sizeof *q->tok);
    kvm_new_tokens(m, q->tok, plen, len);
    q->n_tok = len;
    q->rr = (kv_radix_req){.ns = kvm_ns_names[q->ns]};
    int32_t ref_pages[KVM_MAX_TOK];
    int ref = kvm_ref_match(m, q->ns, q->tok, len, ref_pages, true);
    int64_t got = kv_radix_req_match(m->tree, &q->rr, q->tok, len, q->pages);
    q->live = true;
    q->n_kv = (int)got;
    m->st_hit_tokens += got;
    if (got != ref) {
        kvm_fail(m, "match length %lld, reference %d (P=%d)", (long long)got, ref, m->P);
        return;
    }
    for (int j = 0; j < ref / m->P; j++)
        if (q->pages[j] != ref_pages[j]) {
            kvm_fail(m, "match page %d is %d, reference %d", j, q->pages[j], ref_pages[j]);
            return;
        }
    memcpy(m->tpl[t], q->tok, (size_t)len * sizeof *q->tok);
    m->tpl_len[t] = len;
}

/* cache_finished mirrored on the reference. */
static void kvm_step_finish(kvm *m, int r, bool insert)
{
    kvm_req *q = &m->req[r];
    if (insert && !m->disable) kvm_ref_insert(m, q->ns, q->tok, q->pages, q->n_kv / m->P * m->P, false);
    /* the reference keeps the request "live" during the call so that its
     * lock still counts; drop it afterwards */
    if (kv_radix_req_cache_finished(m->tree, &q->rr, q->tok, q->n_kv, q->pages, insert) != 0)
        kvm_fail(m, "cache_finished failed");
    q->live = false;
    m->st_finished++;
}

static void kvm_step_extend(kvm *m, int r)
{
    kvm_req *q = &m->req[r];
    int k = 1 + (int)(kvm_byte(m) % 17);
    if (q->n_kv + k > KVM_MAX_TOK) k = KVM_MAX_TOK - q->n_kv;
    if (k <= 0) {
        kvm_step_finish(m, r, true);
        return;
    }
    if (q->n_kv + k > q->n_tok) { /* decode: tokens appear as they are generated */
        kvm_new_tokens(m, q->tok, q->n_tok, q->n_kv + k);
        q->n_tok = q->n_kv + k;
    }
    int have = (q->n_kv + m->P - 1) / m->P, need = (q->n_kv + k + m->P - 1) / m->P;
    if (need > have && !kvm_alloc(m, need - have, q->pages + have)) {
        /* out of memory: retract (free everything, keep nothing new) */
        m->st_retracts++;
        kvm_step_finish(m, r, false);
        return;
    }
    q->n_kv += k;
}

static void kvm_step_unfinished(kvm *m, int r)
{
    kvm_req *q = &m->req[r];
    if (m->disable) {
        if (kv_radix_req_cache_unfinished(m->tree, &q->rr, q->tok, q->n_kv, q->pages) != 0)
            kvm_fail(m, "cache_unfinished failed (disabled)");
        return;
    }
    int aligned = q->n_kv / m->P * m->P;
    int prefix = kvm_ref_insert(m, q->ns, q->tok, q->pages, aligned, true);
    int32_t ref_pages[KVM_MAX_TOK];
    int rm = kvm_ref_match(m, q->ns, q->tok, aligned, ref_pages, false);
    (void)prefix;
    if (kv_radix_req_cache_unfinished(m->tree, &q->rr, q->tok, q->n_kv, q->pages) != 0) {
        kvm_fail(m, "cache_unfinished failed");
        return;
    }
    if (rm != aligned || q->rr.protected_len != aligned) {
        kvm_fail(m, "cache_unfinished: protected %lld, reference %d of %d", (long long)q->rr.protected_len, rm,
                 aligned);
        return;
    }
    for (int j = 0; j < aligned / m->P; j++)
        if (q->pages[j] != ref_pages[j]) {
            kvm_fail(m, "cache_unfinished: page %d is %d, reference %d", j, q->pages[j], ref_pages[j]);
            return;
        }
}

static void kvm_step_probe(kvm *m)
{
    unsigned b = kvm_byte(m);
    int ns = (int)(b % 3), t = (int)((b >> 2) % KVM_N_TPL);
    int32_t tok[KVM_MAX_TOK], pg[KVM_MAX_TOK], ref_pg[KVM_MAX_TOK];
    int n = (int)(kvm_byte(m) % (KVM_MAX_TOK + 1));
    if (n > m->tpl_len[t]) n = m->tpl_len[t];
    memcpy(tok, m->tpl[t], (size_t)n * sizeof *tok);
    if (kvm_byte(m) & 1) kvm_new_tokens(m, tok, n / 2, n);
    int ref = kvm_ref_match(m, ns, tok, n, ref_pg, true);
    kv_radix_node *last = NULL;
    int64_t got = kv_radix_match(m->tree, kvm_ns_names[ns], tok, n, pg, &last);
    if (got != ref || !last) {
        kvm_fail(m, "probe match %lld, reference %d", (long long)got, ref);
        return;
    }
    for (int j = 0; j < ref / m->P; j++)
        if (pg[j] != ref_pg[j]) {
            kvm_fail(m, "probe page %d is %d, reference %d", j, pg[j], ref_pg[j]);
            return;
        }
}

static void kvm_step_evict(kvm *m)
{
    int64_t want = (int64_t)(kvm_byte(m) % 40);
    int64_t evic_before = kv_radix_evictable_size(m->tree);
    m->evicted_in_call = 0;
    m->last_node_len = 0;
    int64_t got = kv_radix_evict(m->tree, want);
    if (got != m->evicted_in_call) kvm_fail(m, "evict returned %lld, callback saw %lld", (long long)got,
                                            (long long)m->evicted_in_call);
    int64_t need = want < evic_before ? want : evic_before;
    if (got < need || (got > 0 && got - m->last_node_len >= want))
        kvm_fail(m, "evict(%lld) freed %lld with %lld evictable", (long long)want, (long long)got,
                 (long long)evic_before);
}

/* Run the simulation over data[0..len).  Returns 0, or -1 with the reason
 * in m->err (the caller prints it). */
static int kvm_run(kvm *m, const uint8_t *data, size_t len, int P, kv_evict_policy policy, bool disable,
                   int64_t n_pages)
{
    memset(m, 0, sizeof *m);
    m->data = data;
    m->len = len;
    m->P = P;
    m->policy = policy;
    m->disable = disable;
    m->pool = kv_pool_create(n_pages, P);
    m->tree = m->pool ? kv_radix_create(m->pool, policy, disable) : NULL;
    m->ent = calloc(KVM_MAX_ENT, sizeof *m->ent);
    m->owner = calloc((size_t)n_pages, 1);
    if (!m->tree || !m->ent || !m->owner) {
        kvm_fail(m, "setup failed");
        goto done;
    }
    kv_radix_set_evict_cb(m->tree, kvm_on_evict, m);
    while (m->pos < m->len && !m->failed) {
        unsigned op = kvm_byte(m);
        int r = (int)((op >> 4) % KVM_MAX_REQ);
        kvm_req *q = &m->req[r];
        const char *what = "?";
        switch (op % 8) {
        case 0:
        case 1:
            what = "admit";
            if (q->live) kvm_step_extend(m, r);
            else kvm_step_admit(m, r);
            break;
        case 2:
        case 3:
            what = "extend";
            if (q->live) kvm_step_extend(m, r);
            break;
        case 4:
            what = "unfinished";
            if (q->live) kvm_step_unfinished(m, r);
            break;
        case 5:
            what = "finish";
            if (q->live) kvm_step_finish(m, r, (op >> 3) & 1);
            break;
        case 6:
            what = "probe";
            kvm_step_probe(m);
            break;
        case 7:
            what = "evict";
            if ((op >> 3) == 31) {
                bool any = false;
                for (int i = 0; i < KVM_MAX_REQ; i++) any |= m->req[i].live;
                if (!any) {
                    what = "reset";
                    if (kv_radix_reset(m->tree) != 0) kvm_fail(m, "reset refused with no locks");
                    m->n_ent = 0;
                }
            } else {
                kvm_step_evict(m);
            }
            break;
        }
        m->n_ops++;
        kvm_check(m, what);
    }
    /* drain: finish everything, then the idle leak check must pass */
    for (int r = 0; r < KVM_MAX_REQ && !m->failed; r++)
        if (m->req[r].live) {
            kvm_step_finish(m, r, true);
            kvm_check(m, "drain");
        }
    if (!m->failed) {
        char err[256];
        if (kv_radix_check_leak(m->tree, err, sizeof err) != 0) kvm_fail(m, "at idle: %s", err);
    }
done:
    if (m->tree) kv_radix_destroy(m->tree);
    if (m->pool && !m->failed && kv_pool_free_pages(m->pool) != n_pages)
        kvm_fail(m, "destroy did not return every page (%lld of %lld free)", (long long)kv_pool_free_pages(m->pool),
                 (long long)n_pages);
    kv_pool_destroy(m->pool);
    free(m->ent);
    free(m->owner);
    return m->failed ? -1 : 0;
}

#endif
