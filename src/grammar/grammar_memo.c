/* grammar_memo — sharing token classifications between DFA nodes and
 * between grammars.
 *
 * DESIGN: the stack-independent classification of a node (grammar_mask.c)
 * is computed per first byte b: the tokens starting with b form one block
 * of the sorted vocabulary, and their fate depends only on the stack set
 * after b — on its *structure*, not on which grammar or node it came from.
 * gm_set_hash numbers the nodes reachable from that set canonically (the
 * stacks' nodes in order, then breadth-first through byte edges, return
 * nodes and pushed rules' starts) and hashes the serialisation (flags,
 * chains, each node's accept bit, byte edges and references) with two
 * independent 64-bit hashes.  Equal serialisations walk identically, so
 * the block's result (accepted ranks, "depends" ranks) is stored once per
 * vocabulary and re-used: the JSON string-content node of every schema,
 * and the hundred near-identical nodes of an "any other key" trie, cost
 * one walk of each block between them.  The table lives in the vocabulary
 * (shared, long-lived), guarded by a mutex, bounded in bytes. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

#define MEMO_BUDGET ((size_t)512 << 20)
#define MAX_SER_NODES 4096

static uint32_t slot_of(uint64_t h1, int32_t b, uint32_t cap) { return (uint32_t)((h1 ^ (uint64_t)b * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1); }

const gv_memo *gv_memo_find(grammar_vocab *v, uint64_t h1, uint64_t h2, int32_t b)
{
    const gv_memo *r = NULL;
    pthread_mutex_lock(&v->memo_mu);
    if (v->memo_cap) {
        uint32_t j = slot_of(h1, b, v->memo_cap);
        while (v->memo[j]) {
            const gv_memo *e = v->memo[j];
            if (e->h1 == h1 && e->h2 == h2 && e->b == b) {
                r = e;
                break;
            }
            j = (j + 1) & (v->memo_cap - 1);
        }
    }
    pthread_mutex_unlock(&v->memo_mu);
    return r;
}

const gv_memo *gv_memo_put(grammar_vocab *v, uint64_t h1, uint64_t h2, int32_t b, const int32_t *acc, int32_t n_acc,
                           const int32_t *unc, int32_t n_unc)
{
    size_t bytes = sizeof(gv_memo) + ((size_t)n_acc + (size_t)n_unc) * sizeof(int32_t);
    const gv_memo *r = NULL;
    pthread_mutex_lock(&v->memo_mu);
    if (v->memo_bytes + bytes > MEMO_BUDGET) goto out;
    if ((v->memo_n + 1) * 2 > v->memo_cap) {
        uint32_t nc = v->memo_cap ? v->memo_cap * 2 : 4096;
        gv_memo **nt = calloc(nc, sizeof *nt);
        if (!nt) goto out;
        for (uint32_t i = 0; i < v->memo_cap; i++) {
            gv_memo *e = v->memo[i];
            if (!e) continue;
            uint32_t j = slot_of(e->h1, e->b, nc);
            while (nt[j]) j = (j + 1) & (nc - 1);
            nt[j] = e;
        }
        free(v->memo);
        v->memo = nt;
        v->memo_cap = nc;
    }
    uint32_t j = slot_of(h1, b, v->memo_cap);
    while (v->memo[j]) {
        const gv_memo *e = v->memo[j];
        if (e->h1 == h1 && e->h2 == h2 && e->b == b) {
            r = e; /* another thread got there first */
            goto out;
        }
        j = (j + 1) & (v->memo_cap - 1);
    }
    gv_memo *e = malloc(sizeof *e);
    int32_t *a = malloc(((size_t)n_acc + (size_t)n_unc + 1) * sizeof *a);
    if (!e || !a) {
        free(e);
        free(a);
        goto out;
    }
    e->h1 = h1;
    e->h2 = h2;
    e->b = b;
    e->n_acc = n_acc;
    e->n_unc = n_unc;
    e->acc = a;
    e->unc = a + n_acc;
    if (n_acc) memcpy(e->acc, acc, (size_t)n_acc * sizeof *acc);
    if (n_unc) memcpy(e->unc, unc, (size_t)n_unc * sizeof *unc);
    v->memo[j] = e;
    v->memo_n++;
    v->memo_bytes += bytes;
    r = e;
out:
    pthread_mutex_unlock(&v->memo_mu);
    return r;
}

void gv_memo_free(grammar_vocab *v)
{
    for (uint32_t i = 0; i < v->memo_cap; i++)
        if (v->memo[i]) {
            free(v->memo[i]->acc);
            free(v->memo[i]);
        }
    free(v->memo);
    v->memo = NULL;
    v->memo_cap = v->memo_n = 0;
}

/* Local number of node (assigned at first sight, in discovery order). */
static int32_t local_of(grammar_matcher *m, int32_t node)
{
    if (m->ser_stamp[node] == m->ser_gen) return m->ser_local[node];
    m->ser_stamp[node] = m->ser_gen;
    m->ser_local[node] = m->ser_n++;
    return m->ser_local[node];
}

/* Queue node for processing at the current level (cur) or the next. */
static int enqueue(gm_ibuf *q, int32_t node) { return gm_push(q, node); }

int gm_set_hash(grammar_matcher *m, const gm_ibuf *src, int32_t off, int32_t n, int fl, int32_t max_depth,
                uint64_t *h1, uint64_t *h2)
{
    const grammar *g = m->g;
    if (!m->ser_local) {
        m->ser_local = malloc((size_t)g->n_nodes * sizeof *m->ser_local);
        m->ser_stamp = calloc((size_t)g->n_nodes, sizeof *m->ser_stamp);
        m->ser_done = calloc((size_t)g->n_nodes, sizeof *m->ser_done);
        if (!m->ser_local || !m->ser_stamp || !m->ser_done) return -1;
    }
    if (++m->ser_gen == 0) {
        memset(m->ser_stamp, 0, (size_t)g->n_nodes * sizeof *m->ser_stamp);
        memset(m->ser_done, 0, (size_t)g->n_nodes * sizeof *m->ser_done);
        m->ser_gen = 1;
    }
    gm_ibuf *b = &m->ser_buf, *cur = &m->ser_queue, *next = &m->ser_next;
    b->n = cur->n = next->n = 0;
    m->ser_n = 0;
    int bad = gm_push(b, fl) < 0 || gm_push(b, max_depth) < 0;
    /* the stacks: their nodes are the roots, at byte depth 0 */
    for (int32_t i = 0; i < n && !bad; i++) {
        bad |= gm_push(b, -1) < 0;
        int32_t fr = src->p[off + i];
        for (; fr > GM_BOTTOM && !bad; fr = m->frames[fr].parent) {
            int32_t node = m->frames[fr].node;
            bad |= gm_push(b, local_of(m, node)) < 0 || enqueue(cur, node) < 0;
        }
        bad |= gm_push(b, fr == GM_BOTTOM ? -2 : -3) < 0;
    }
    /* level by level in byte depth: a reference's start is at the same
     * depth, its return node too if the rule may be empty, a byte edge's
     * target one deeper; nodes deeper than max_depth are never reached by
     * the walk of a token that short, so they are cut (named, not
     * described): sets that differ only there walk identically.  (A return
 * node is one deeper when its rule cannot be empty.) */
    for (int32_t d = 0; d <= max_depth && cur->n && !bad; d++) {
        for (int32_t qi = 0; qi < cur->n && !bad; qi++) {
            int32_t x = cur->p[qi];
            if (m->ser_done[x] == m->ser_gen) continue;
            m->ser_done[x] = m->ser_gen;
            if (m->ser_n > MAX_SER_NODES) return -1;
            const gr_node *nd = &g->nodes[x];
            bad |= gm_push(b, local_of(m, x)) < 0 || gm_push(b, nd->accept | nd->ne << 1 | nd->nr << 10) < 0;
            for (uint32_t k = 0; k < nd->ne && !bad; k++) {
                const gr_edge *e = &g->edges[nd->e_off + k];
                bad |= gm_push(b, e->lo | e->hi << 8) < 0 || gm_push(b, local_of(m, e->to)) < 0;
                if (m->ser_done[e->to] != m->ser_gen) bad |= enqueue(next, e->to) < 0;
            }
            for (uint32_t k = 0; k < nd->nr && !bad; k++) {
                const gr_ref *r = &g->refs[nd->r_off + k];
                int32_t st = g->rule_start[r->rule];
                bad |= gm_push(b, local_of(m, st)) < 0 || gm_push(b, local_of(m, r->to)) < 0;
                if (m->ser_done[st] != m->ser_gen) bad |= enqueue(cur, st) < 0;
                /* the return node: after at least one byte unless the rule may be empty */
                if (m->ser_done[r->to] != m->ser_gen) bad |= enqueue(g->nullable[r->rule] ? cur : next, r->to) < 0;
            }
        }
        bad |= gm_push(b, -4) < 0; /* end of a level */
        gm_ibuf t = *cur;
        *cur = *next;
        *next = t;
        next->n = 0;
    }
    if (bad) return -1;
    uint64_t a = 1469598103934665603ull, c = 0x243F6A8885A308D3ull;
    for (int32_t i = 0; i < b->n; i++) {
        uint64_t x = (uint32_t)b->p[i];
        a = (a ^ x) * 1099511628211ull;
        c = (c + x + 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
        c ^= c >> 31;
    }
    *h1 = a ^ (uint64_t)b->n << 40;
    *h2 = c;
    return 0;
}
