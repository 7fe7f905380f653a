/* grammar_mask — the allowed-token bitset for a matcher's position.
 *
 * DESIGN: the walk.  Tokens are visited in byte order (grammar_vocab.c);
 * the parser's top set after each prefix length is kept per depth, so a
 * token re-uses the sets of the prefix it shares with the previous one and
 * only steps its own remaining bytes.  When a prefix kills every stack, all
 * following tokens with that prefix are settled without stepping (in a
 * full walk they are skipped by binary search).  Frames made by the walk
 * are released LIFO as depth unwinds.
 *
 * The cache (xgrammar's "context-independent tokens", computed lazily): a
 * top frame f = (node, parent) accepts a token either within node's rule
 * and what it pushes — independent of the stack below f — or only by
 * finishing the rule part way through the token, which depends on the
 * parents.  One walk from (node, GM_BOTTOM) per node and vocabulary sorts
 * every token into accepted / rejected / "depends" (GM_POPPED seen before
 * the token's end).  Per step the mask is then the OR of the cached
 * accepted bitsets of the top nodes plus a walk over only the "depends"
 * tokens from each real top frame.  Each top frame is responsible only
 * for tokens whose first byte it consumes itself (the closure already put
 * every pushed rule and every popped parent into the top set), so the
 * union over the tops is exactly the mask.  The cache hangs off the
 * grammar (keyed by the vocabulary's serial), shared by all its matchers;
 * entries are published under the grammar's mutex.  tests/unit/
 * test_grammar.c checks the cached mask against a brute-force
 * accept_token/rollback of every token. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

typedef struct walk {
    grammar_matcher *m;
    const grammar_vocab *v;
    int ci;          /* classify for the cache (else: plain mask) */
    uint32_t *mask;  /* accepted ids are set */
    gm_ibuf *unc;    /* ci: "depends" ranks */
    int32_t *doff, *dn, *dmark; /* (max_len + 1) per depth: top set, frame mark */
    uint8_t *dfl, *dcum;        /* flags at depth, GM_POPPED seen at depths 1..d */
} walk;

static void classify(walk *w, int32_t r, int32_t tl, int32_t D)
{
    if (D == tl && (w->dn[tl] > 0 || (w->dfl[tl] & (GM_CAN_END | GM_POPPED)))) {
        int32_t id = w->v->rank_id[r];
        w->mask[id >> 5] |= 1u << (id & 31);
        return;
    }
    if (!w->ci) return;
    int32_t d = D == tl ? tl - 1 : D;
    if (w->dcum[d] && gm_push(w->unc, r) < 0) w->m->oom = 1;
}

/* Walk the ranks list[0..count) (list NULL: every rank) from the top set
 * already in m->scratch[0..n0). */
static void run_walk(walk *w, const int32_t *list, int32_t count, int32_t n0)
{
    grammar_matcher *m = w->m;
    const grammar_vocab *v = w->v;
    gm_ibuf *sc = &m->scratch;
    w->doff[0] = 0;
    w->dn[0] = n0;
    w->dfl[0] = 0;
    w->dcum[0] = 0;
    w->dmark[0] = m->n_frames;
    int32_t valid = 0, dead = -1, prevlen = 0;
    const uint8_t *prev = NULL;
    for (int32_t idx = 0; idx < count;) {
        int32_t r = list ? list[idx] : idx;
        const uint8_t *tb = v->blob + v->off[r];
        int32_t tl = v->len[r];
        int32_t L = 0, lim = tl < prevlen ? tl : prevlen;
        while (L < lim && tb[L] == prev[L]) L++;
        if (dead >= 0 && L >= dead) {
            classify(w, r, tl, dead);
            idx++;
            if (!list && !(w->dfl[dead] & (GM_CAN_END | GM_POPPED)) && !(w->ci && w->dcum[dead])) {
                /* nothing with this prefix can be accepted or "depend": skip
                 * to the first rank whose first `dead` bytes differ */
                int32_t lo = idx, hi = v->n_tok;
                while (lo < hi) {
                    int32_t mid = lo + (hi - lo) / 2;
                    if (v->len[mid] >= dead && !memcmp(v->blob + v->off[mid], tb, (size_t)dead)) lo = mid + 1;
                    else hi = mid;
                }
                idx = lo;
            }
            continue;
        }
        int32_t k = L < valid ? L : valid;
        gm_release(m, w->dmark[k]);
        sc->n = w->doff[k] + w->dn[k];
        dead = -1;
        for (int32_t d = k; d < tl; d++) {
            w->doff[d + 1] = sc->n;
            int fl = gm_step(m, sc, w->doff[d], w->dn[d], tb[d], sc);
            w->dn[d + 1] = sc->n - w->doff[d + 1];
            w->dfl[d + 1] = (uint8_t)fl;
            w->dcum[d + 1] = w->dcum[d] | (uint8_t)(fl & GM_POPPED);
            w->dmark[d + 1] = m->n_frames;
            if (w->dn[d + 1] == 0) {
                dead = d + 1;
                break;
            }
        }
        valid = dead >= 0 ? dead : tl;
        classify(w, r, tl, valid);
        prev = tb;
        prevlen = tl;
        idx++;
    }
    gm_release(m, w->dmark[0]);
}

static int walk_init(walk *w, grammar_matcher *m, int ci, uint32_t *mask, gm_ibuf *unc)
{
    memset(w, 0, sizeof *w);
    w->m = m;
    w->v = m->v;
    w->ci = ci;
    w->mask = mask;
    w->unc = unc;
    size_t d = (size_t)m->v->max_len + 2;
    w->doff = malloc(d * sizeof *w->doff);
    w->dn = malloc(d * sizeof *w->dn);
    w->dmark = malloc(d * sizeof *w->dmark);
    w->dfl = malloc(d);
    w->dcum = malloc(d);
    if (!w->doff || !w->dn || !w->dmark || !w->dfl || !w->dcum) return -1;
    return 0;
}

static void walk_free(walk *w)
{
    free(w->doff);
    free(w->dn);
    free(w->dmark);
    free(w->dfl);
    free(w->dcum);
}

static void set_end(const grammar_matcher *m, uint32_t *mask)
{
    for (size_t i = 0; i < m->v->n_end; i++) {
        int32_t id = m->v->end_ids[i];
        if (id >= 0 && id < m->v->size) mask[id >> 5] |= 1u << (id & 31);
    }
}

void gm_fill_mask_full(grammar_matcher *m, uint32_t *mask)
{
    size_t words = grammar_mask_words(m->v);
    memset(mask, 0, words * sizeof *mask);
    const gm_hist *h = gm_cur(m);
    if (h->terminated) return;
    if (h->flags & GM_CAN_END) set_end(m, mask);
    walk w;
    if (walk_init(&w, m, 0, mask, NULL) == 0) {
        m->scratch.n = 0;
        for (int32_t i = 0; i < h->n_tops; i++) gm_push(&m->scratch, m->committed.p[h->tops_off + i]);
        run_walk(&w, NULL, m->v->n_tok, h->n_tops);
    }
    walk_free(&w);
}

/* ---- the cache ------------------------------------------------------------ */

static gr_cicache *cache_for(grammar_matcher *m)
{
    if (m->ci) return m->ci;
    grammar *g = (grammar *)m->g; /* the cache is the one mutable part, under g->mu */
    pthread_mutex_lock(&g->mu);
    gr_cicache *c = g->ci;
    while (c && c->vocab_serial != m->v->serial) c = c->next;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (c) c->per_node = calloc((size_t)g->n_nodes, sizeof *c->per_node);
        if (c && c->per_node) {
            c->vocab_serial = m->v->serial;
            c->next = g->ci;
            g->ci = c;
        } else {
            if (c) free(c);
            c = NULL;
        }
    }
    pthread_mutex_unlock(&g->mu);
    m->ci = c;
    return c;
}

static void ci_free(gr_ci *ci)
{
    if (!ci) return;
    free(ci->accept);
    free(ci->unc);
    free(ci);
}

void gr_ci_free_all(grammar *g)
{
    gr_cicache *c = g->ci;
    while (c) {
        gr_cicache *nx = c->next;
        for (int32_t i = 0; i < g->n_nodes; i++) ci_free(c->per_node[i]);
        free(c->per_node);
        free(c);
        c = nx;
    }
    g->ci = NULL;
}

static gr_ci *ci_get(grammar_matcher *m, gr_cicache *c, int32_t node)
{
    gr_ci *ci = __atomic_load_n(&c->per_node[node], __ATOMIC_ACQUIRE);
    if (ci) return ci;
    ci = calloc(1, sizeof *ci);
    if (!ci) return NULL;
    size_t words = grammar_mask_words(m->v);
    ci->accept = calloc(words, sizeof *ci->accept);
    gm_ibuf unc = {0};
    walk w;
    int ok = walk_init(&w, m, 1, ci->accept, &unc) == 0 && ci->accept;
    if (ok) {
        int32_t mark = m->n_frames;
        int32_t f = gm_frame_get(m, node, GM_BOTTOM);
        m->scratch.n = 0;
        ok = f >= 0 && gm_push(&m->scratch, f) == 0;
        if (ok) run_walk(&w, NULL, m->v->n_tok, 1);
        gm_release(m, mark);
        ok = ok && !m->oom;
    }
    walk_free(&w);
    if (!ok) {
        free(unc.p);
        ci_free(ci);
        m->oom = 0;
        return NULL;
    }
    ci->unc = (uint32_t *)unc.p;
    ci->n_unc = unc.n;
    grammar *g = (grammar *)m->g;
    pthread_mutex_lock(&g->mu);
    if (c->per_node[node]) {
        ci_free(ci);
        ci = c->per_node[node];
    } else __atomic_store_n(&c->per_node[node], ci, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g->mu);
    return ci;
}

void grammar_matcher_fill_mask(grammar_matcher *m, uint32_t *mask)
{
    size_t words = grammar_mask_words(m->v);
    const gm_hist *h = gm_cur(m);
    gr_cicache *c = cache_for(m);
    if (!c) {
        gm_fill_mask_full(m, mask);
        return;
    }
    memset(mask, 0, words * sizeof *mask);
    if (h->terminated) return;
    walk w;
    if (walk_init(&w, m, 0, mask, NULL) < 0) {
        walk_free(&w);
        gm_fill_mask_full(m, mask);
        return;
    }
    int32_t n_tops = h->n_tops, tops_off = h->tops_off;
    for (int32_t i = 0; i < n_tops; i++) {
        int32_t f = m->committed.p[tops_off + i];
        int32_t node = m->frames[f].node;
        gr_ci *ci = ci_get(m, c, node);
        if (!ci) {
            walk_free(&w);
            gm_fill_mask_full(m, mask);
            return;
        }
        /* the same node under another parent has the same accepted set */
        int dup = 0;
        for (int32_t j = 0; j < i && !dup; j++) dup = m->frames[m->committed.p[tops_off + j]].node == node;
        if (!dup)
            for (size_t k = 0; k < words; k++) mask[k] |= ci->accept[k];
        if (ci->n_unc) {
            m->scratch.n = 0;
            gm_push(&m->scratch, f);
            run_walk(&w, (const int32_t *)ci->unc, ci->n_unc, 1);
        }
    }
    walk_free(&w);
    if (h->flags & GM_CAN_END) set_end(m, mask);
}
