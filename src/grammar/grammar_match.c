/* grammar_match — one request's position in a grammar: a pushdown
 * automaton with a set of stacks, walked one byte at a time.
 *
 * DESIGN: a stack is a chain of frames (DFA node, parent frame).  Frames
 * are hash-consed in the matcher's arena, so two equal stacks are one id
 * and the set never holds duplicates (an ambiguous grammar cannot blow the
 * set up).  The "top set" after each byte holds the frames whose node has
 * byte edges; the closure that builds it pushes referenced rules
 * (frame(start(R), frame(return node, parent))) and pops finished ones
 * (a frame at an accepting node continues as its parent).  Popping the
 * root frame sets GM_CAN_END; popping GM_BOTTOM (the stand-in parent of a
 * stack-independent walk, grammar_mask.c) sets GM_POPPED.  The compiler
 * rejects left recursion, so the closure is finite.
 *
 *      top set {f3, f5}        f3 = (string.node7, f2)    f2 = (obj.node4, f1)
 *                              f5 = (ws.node1, f4)        f1 = (root.node2, ROOT)
 *
 * Frames are released LIFO (an insertion log undoes hash-table slots in
 * reverse order, which linear probing allows), so the mask walk and a
 * rejected token leave nothing behind, and rollback is "truncate the
 * history and release frames to its mark". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

int gm_push(gm_ibuf *b, int32_t x)
{
    if (b->n == b->cap) {
        int32_t nc = b->cap ? b->cap * 2 : 64;
        int32_t *np = realloc(b->p, (size_t)nc * sizeof *np);
        if (!np) return -1;
        b->p = np;
        b->cap = nc;
    }
    b->p[b->n++] = x;
    return 0;
}

static uint32_t fhash(int32_t node, int32_t parent)
{
    uint64_t h = ((uint64_t)(uint32_t)node << 32 | (uint32_t)parent) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static int grow_slots(grammar_matcher *m)
{
    uint32_t nc = m->cap_slots ? m->cap_slots * 2 : 1024;
    uint32_t *ns = calloc(nc, sizeof *ns);
    if (!ns) return -1;
    /* re-insert in id order so LIFO deletion stays valid */
    for (int32_t id = 2; id < m->n_frames; id++) {
        uint32_t j = fhash(m->frames[id].node, m->frames[id].parent) & (nc - 1);
        while (ns[j]) j = (j + 1) & (nc - 1);
        ns[j] = (uint32_t)id;
        m->slot_log[id] = j;
    }
    free(m->slots);
    m->slots = ns;
    m->cap_slots = nc;
    return 0;
}

/* The frame (node, parent), made if new; -1 on OOM. */
int32_t gm_frame_get(grammar_matcher *m, int32_t node, int32_t parent)
{
    if ((uint32_t)(m->n_frames + 1) * 2 > m->cap_slots && grow_slots(m) < 0) return m->oom = 1, -1;
    uint32_t mask = m->cap_slots - 1, j = fhash(node, parent) & mask;
    while (m->slots[j]) {
        const gm_frame *f = &m->frames[m->slots[j]];
        if (f->node == node && f->parent == parent) return (int32_t)m->slots[j];
        j = (j + 1) & mask;
    }
    if (m->n_frames == m->cap_frames) {
        int32_t nc = m->cap_frames * 2;
        gm_frame *nf = realloc(m->frames, (size_t)nc * sizeof *nf);
        if (!nf) return m->oom = 1, -1;
        m->frames = nf;
        uint32_t *nst = realloc(m->stamp, (size_t)nc * sizeof *nst);
        if (!nst) return m->oom = 1, -1;
        memset(nst + m->cap_frames, 0, (size_t)(nc - m->cap_frames) * sizeof *nst);
        m->stamp = nst;
        uint32_t *nl = realloc(m->slot_log, (size_t)nc * sizeof *nl);
        if (!nl) return m->oom = 1, -1;
        m->slot_log = nl;
        m->cap_frames = nc;
    }
    int32_t id = m->n_frames++;
    m->frames[id].node = node;
    m->frames[id].parent = parent;
    m->stamp[id] = 0;
    m->slots[j] = (uint32_t)id;
    m->slot_log[id] = j;
    return id;
}

void gm_release(grammar_matcher *m, int32_t mark)
{
    while (m->n_frames > mark) {
        m->n_frames--;
        m->slots[m->slot_log[m->n_frames]] = 0;
    }
}

/* Close frame f into out: tops (frames with byte edges), pushes, pops.
 * Returns flags. */
static int close_frame(grammar_matcher *m, int32_t f0, gm_ibuf *out)
{
    const grammar *g = m->g;
    int flags = 0;
    m->work.n = 0;
    if (m->stamp[f0] == m->gen) return 0;
    m->stamp[f0] = m->gen;
    const gr_node *n0 = &g->nodes[m->frames[f0].node];
    if (!n0->nr && !n0->accept) { /* the common case: a plain position inside a rule */
        if (n0->ne && gm_push(out, f0) < 0) m->oom = 1;
        return 0;
    }
    if (gm_push(&m->work, f0) < 0) return m->oom = 1, 0;
    while (m->work.n) {
        int32_t f = m->work.p[--m->work.n];
        int32_t node = m->frames[f].node, parent = m->frames[f].parent;
        const gr_node *n = &g->nodes[node];
        if (n->ne && gm_push(out, f) < 0) return m->oom = 1, flags;
        for (uint32_t k = 0; k < n->nr; k++) {
            const gr_ref *r = &g->refs[n->r_off + k];
            int32_t ret = gm_frame_get(m, r->to, parent);
            if (ret < 0) return flags;
            int32_t child = gm_frame_get(m, g->rule_start[r->rule], ret);
            if (child < 0) return flags;
            if (m->stamp[child] != m->gen) {
                m->stamp[child] = m->gen;
                if (gm_push(&m->work, child) < 0) return m->oom = 1, flags;
            }
        }
        if (n->accept) {
            if (parent == GM_ROOT) flags |= GM_CAN_END;
            else if (parent == GM_BOTTOM) flags |= GM_POPPED;
            else if (m->stamp[parent] != m->gen) {
                m->stamp[parent] = m->gen;
                if (gm_push(&m->work, parent) < 0) return m->oom = 1, flags;
            }
        }
    }
    return flags;
}

static void new_gen(grammar_matcher *m)
{
    if (++m->gen == 0) {
        memset(m->stamp, 0, (size_t)m->cap_frames * sizeof *m->stamp);
        m->gen = 1;
    }
}

int gm_step(grammar_matcher *m, const gm_ibuf *src, int32_t off, int32_t n, uint8_t byte, gm_ibuf *out)
{
    const grammar *g = m->g;
    int flags = 0;
    new_gen(m);
    for (int32_t i = 0; i < n; i++) {
        /* src may be out: re-read its pointer after out grew */
        int32_t f = src->p[off + i];
        const gr_node *nd = &g->nodes[m->frames[f].node];
        const gr_edge *e = &g->edges[nd->e_off];
        for (uint32_t k = 0; k < nd->ne; k++) {
            if (byte < e[k].lo) break;
            if (byte <= e[k].hi) {
                int32_t nf = gm_frame_get(m, e[k].to, m->frames[f].parent);
                if (nf >= 0) flags |= close_frame(m, nf, out);
                break;
            }
        }
    }
    return flags;
}

int gm_start_set(grammar_matcher *m, int32_t node, int32_t parent, gm_ibuf *out)
{
    new_gen(m);
    int32_t f = gm_frame_get(m, node, parent);
    if (f < 0) return 0;
    return close_frame(m, f, out);
}

const gm_hist *gm_cur(const grammar_matcher *m) { return &m->hist[m->n_hist - 1]; }

/* ---- public API ----------------------------------------------------------- */

static int push_hist(grammar_matcher *m, int32_t off, int32_t n, int flags, int term)
{
    if (m->n_hist == m->cap_hist) {
        int32_t nc = m->cap_hist ? m->cap_hist * 2 : 64;
        gm_hist *nh = realloc(m->hist, (size_t)nc * sizeof *nh);
        if (!nh) return -1;
        m->hist = nh;
        m->cap_hist = nc;
    }
    gm_hist *h = &m->hist[m->n_hist++];
    h->tops_off = off;
    h->n_tops = n;
    h->flags = (uint8_t)flags;
    h->terminated = (uint8_t)term;
    h->frame_mark = m->n_frames;
    return 0;
}

static void start(grammar_matcher *m)
{
    m->n_hist = 0;
    m->committed.n = 0;
    gm_release(m, 2);
    int flags = gm_start_set(m, m->g->rule_start[m->g->root], GM_ROOT, &m->committed);
    if (push_hist(m, 0, m->committed.n, flags, 0) < 0) m->oom = 1;
}

grammar_matcher *grammar_matcher_new(const grammar *g, const grammar_vocab *v)
{
    grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = g;
    m->v = v;
    m->cap_frames = 1024;
    m->frames = malloc((size_t)m->cap_frames * sizeof *m->frames);
    m->stamp = calloc((size_t)m->cap_frames, sizeof *m->stamp);
    m->slot_log = malloc((size_t)m->cap_frames * sizeof *m->slot_log);
    if (!m->frames || !m->stamp || !m->slot_log) {
        grammar_matcher_free(m);
        return NULL;
    }
    m->n_frames = 2; /* GM_ROOT, GM_BOTTOM */
    m->frames[0].node = m->frames[1].node = -1;
    if (grow_slots(m) < 0) {
        grammar_matcher_free(m);
        return NULL;
    }
    start(m);
    if (m->oom) {
        grammar_matcher_free(m);
        return NULL;
    }
    return m;
}

void grammar_matcher_free(grammar_matcher *m)
{
    if (!m) return;
    free(m->frames);
    free(m->stamp);
    free(m->slots);
    free(m->slot_log);
    free(m->committed.p);
    free(m->hist);
    free(m->work.p);
    free(m->scratch.p);
    free(m->ser_local);
    free(m->ser_stamp);
    free(m->ser_done);
    free(m->ser_next.p);
    free(m->ser_buf.p);
    free(m->ser_queue.p);
    free(m);
}

void grammar_matcher_reset(grammar_matcher *m)
{
    m->oom = 0;
    start(m);
}

/* Walk bytes from the current state; on success the new top set is at the
 * end of committed and a history entry is pushed (term as given). */
static int advance(grammar_matcher *m, const uint8_t *s, size_t len)
{
    const gm_hist *h = gm_cur(m);
    if (h->terminated) return 0;
    int32_t mark = m->n_frames, cmark = m->committed.n;
    int32_t off = h->tops_off, n = h->n_tops;
    int flags = h->flags;
    for (size_t i = 0; i < len; i++) {
        int32_t noff = m->committed.n;
        flags = gm_step(m, &m->committed, off, n, s[i], &m->committed);
        /* intermediate sets are dropped by moving the new set down */
        int32_t nn = m->committed.n - noff;
        if (m->oom || (nn == 0 && !(flags & GM_CAN_END))) {
            m->committed.n = cmark;
            gm_release(m, mark);
            m->oom = 0;
            return 0;
        }
        if (noff != cmark) {
            memmove(m->committed.p + cmark, m->committed.p + noff, (size_t)nn * sizeof *m->committed.p);
            m->committed.n = cmark + nn;
        }
        off = cmark;
        n = nn;
    }
    if (push_hist(m, off, n, flags, 0) < 0) {
        m->committed.n = cmark;
        gm_release(m, mark);
        return 0;
    }
    return 1;
}

int gv_is_end(const grammar_vocab *v, int32_t id)
{
    for (size_t i = 0; i < v->n_end; i++)
        if (v->end_ids[i] == id) return 1;
    return 0;
}

int grammar_matcher_accept_token(grammar_matcher *m, int32_t id)
{
    const grammar_vocab *v = m->v;
    const gm_hist *h = gm_cur(m);
    if (!v || id < 0 || id >= v->size || h->terminated) return 0;
    if (gv_is_end(v, id)) {
        if (!(h->flags & GM_CAN_END)) return 0;
        if (push_hist(m, h->tops_off, h->n_tops, h->flags, 1) < 0) return 0;
        return 1;
    }
    int32_t r = v->id_rank[id];
    if (r < 0) return 0;
    return advance(m, v->blob + v->off[r], v->len[r]);
}

int grammar_matcher_accept_bytes(grammar_matcher *m, const char *bytes, size_t len)
{
    return advance(m, (const uint8_t *)bytes, len);
}

int grammar_matcher_can_end(const grammar_matcher *m) { return (gm_cur(m)->flags & GM_CAN_END) != 0; }

int grammar_matcher_is_terminated(const grammar_matcher *m)
{
    const gm_hist *h = gm_cur(m);
    return h->terminated || (h->n_tops == 0 && (h->flags & GM_CAN_END));
}

int grammar_matcher_rollback(grammar_matcher *m, int n)
{
    if (n < 0 || n > m->n_hist - 1) return -1;
    m->n_hist -= n;
    const gm_hist *h = gm_cur(m);
    m->committed.n = h->tops_off + h->n_tops;
    gm_release(m, h->frame_mark);
    return 0;
}

void grammar_apply_mask(float *logits, int32_t vocab, const uint32_t *mask)
{
    int32_t full = vocab / 32;
    for (int32_t w = 0; w < full; w++) {
        uint32_t b = mask[w];
        if (b == UINT32_MAX) continue;
        float *x = logits + (size_t)w * 32;
        if (!b) {
            for (int j = 0; j < 32; j++) x[j] = -__builtin_inff();
            continue;
        }
        for (uint32_t z = ~b; z; z &= z - 1) x[__builtin_ctz(z)] = -__builtin_inff();
    }
    for (int32_t i = full * 32; i < vocab; i++)
        if (!(mask[i >> 5] >> (i & 31) & 1)) logits[i] = -__builtin_inff();
}
