/* grammar_mask — the allowed-token bitset for a matcher's position.
 *
 * DESIGN: the walk.  Tokens are visited in byte order (grammar_vocab.c);
 * the parser's top set after each prefix length is kept per depth, so a
 * token re-uses the sets of the prefix it shares with the previous one and
 * only steps its own remaining bytes.  When a prefix kills every stack, all
 * following tokens with that prefix are settled without stepping (in a
 * full walk they are skipped by binary search).  Frames made by the walk
 * are released LIFO as depth unwinds.  The identity cache: the set at the
 * walk's start depth (the anchor) is remembered per byte: a byte that
 * steps the anchor to exactly itself (same hash-consed frames, same order
 * — a JSON string's plain characters) is stepped once per walk; later
 * tokens alias the anchor's slice of the scratch instead of calling
 * gm_step, so the long all-plain tokens of a string classification cost
 * a flag test per byte.  tests/unit/test_grammar_fast.c checks it against
 * brute force on random states.
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
    uint32_t *mask;  /* accepted ids are set (when acc is NULL) */
    gm_ibuf *acc;    /* else accepted ranks are appended here */
    gm_ibuf *unc;    /* ci: "depends" ranks */
    int32_t *doff, *dn, *dmark; /* (max_len + 1) per depth: top set, frame mark */
    uint8_t *dfl, *dcum;        /* flags at depth, GM_POPPED seen at depths 1..d */
    uint8_t *disa;              /* the set at depth is the anchor (the start depth's set) */
    uint64_t idk[4], idno[4];   /* bytes known to step the anchor to itself / not */
    uint8_t idfl[256];          /* the flags of those steps */
} walk;

static void classify(walk *w, int32_t r, int32_t tl, int32_t D)
{
    if (D == tl && (w->dn[tl] > 0 || (w->dfl[tl] & (GM_CAN_END | GM_POPPED)))) {
        if (w->acc) {
            if (gm_push(w->acc, r) < 0) w->m->oom = 1;
            return;
        }
        int32_t id = w->v->rank_id[r];
        w->mask[id >> 5] |= 1u << (id & 31);
        return;
    }
    if (!w->ci) return;
    int32_t d = D == tl ? tl - 1 : D;
    if (w->dcum[d] && gm_push(w->unc, r) < 0) w->m->oom = 1;
}

/* Walk the ranks list[idx0..count) (list NULL: the ranks idx0..count)
 * from the top set already in m->scratch[0..n0).  start 1: every token
 * shares its first byte and the depth-1 set is already in w (doff/dn/dfl/
 * dcum/dmark[1], scratch), so the walk goes on from there. */
static void run_walk(walk *w, const int32_t *list, int32_t idx0, int32_t count, int32_t n0, int start)
{
    grammar_matcher *m = w->m;
    const grammar_vocab *v = w->v;
    gm_ibuf *sc = &m->scratch;
    w->doff[0] = 0;
    w->dn[0] = n0;
    w->dfl[0] = 0;
    w->dcum[0] = 0;
    if (!start) w->dmark[0] = m->n_frames;
    /* the identity cache: the set at the start depth is the anchor; a
     * byte that steps it to itself (a string's plain characters) is
     * stepped once per walk, later tokens alias the set */
    memset(w->idk, 0, sizeof w->idk);
    memset(w->idno, 0, sizeof w->idno);
    w->disa[0] = !start;
    w->disa[1] = (uint8_t)(start != 0);
    int32_t valid = 0, dead = -1, prevlen = 0;
    const uint8_t *prev = NULL;
    if (start && idx0 < count) {
        int32_t r0 = list ? list[idx0] : idx0;
        prev = v->blob + v->off[r0];
        prevlen = v->len[r0];
        valid = 1;
        if (w->dn[1] == 0) dead = 1;
    }
    for (int32_t idx = idx0; idx < count;) {
        int32_t r = list ? list[idx] : idx;
        const uint8_t *tb = v->blob + v->off[r];
        int32_t tl = v->len[r];
        /* the shared prefix only matters up to the depth computed */
        int32_t L = 0, lim = tl < prevlen ? tl : prevlen;
        if (lim > valid) lim = valid;
        while (L < lim && tb[L] == prev[L]) L++;
        if (dead >= 0 && L >= dead) {
            /* a block of tokens sharing the dead prefix: find its end by
             * binary search, settle it without stepping */
            int32_t lo = idx + 1, hi = count;
            while (lo < hi) {
                int32_t mid = lo + (hi - lo) / 2, rm = list ? list[mid] : mid;
                if (v->len[rm] >= dead && !memcmp(v->blob + v->off[rm], tb, (size_t)dead)) lo = mid + 1;
                else hi = mid;
            }
            if ((w->dfl[dead] & (GM_CAN_END | GM_POPPED)) || (w->ci && w->dcum[dead])) {
                for (; idx < lo; idx++) {
                    int32_t rr = list ? list[idx] : idx;
                    classify(w, rr, v->len[rr], dead);
                }
            } else idx = lo;
            continue;
        }
        int32_t k = L < valid ? L : valid;
        gm_release(m, w->dmark[k]);
        sc->n = w->doff[k] + w->dn[k];
        dead = -1;
        for (int32_t d = k; d < tl; d++) {
            uint8_t c = tb[d];
            int fl;
            if (w->disa[d] && (w->idk[c >> 6] >> (c & 63) & 1)) {
                /* the anchor set steps to itself on c: alias it */
                w->doff[d + 1] = w->doff[d];
                w->dn[d + 1] = w->dn[d];
                w->disa[d + 1] = 1;
                fl = w->idfl[c];
            } else {
                w->doff[d + 1] = sc->n;
                fl = gm_step(m, sc, w->doff[d], w->dn[d], c, sc);
                w->dn[d + 1] = sc->n - w->doff[d + 1];
                w->disa[d + 1] = 0;
                if (w->disa[d] && !(w->idno[c >> 6] >> (c & 63) & 1)) {
                    /* first time c is stepped from the anchor: remember
                     * whether the set came back unchanged (same frames,
                     * same order; frames are hash-consed, so this is a
                     * property of the set's contents) */
                    if (w->dn[d + 1] == w->dn[d] &&
                        !memcmp(sc->p + w->doff[d + 1], sc->p + w->doff[d], (size_t)w->dn[d] * sizeof *sc->p)) {
                        w->idk[c >> 6] |= 1ull << (c & 63);
                        w->idfl[c] = (uint8_t)fl;
                        sc->n = w->doff[d + 1];
                        w->doff[d + 1] = w->doff[d];
                        w->disa[d + 1] = 1;
                    } else
                        w->idno[c >> 6] |= 1ull << (c & 63);
                }
            }
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
    w->disa = calloc(d, 1);
    if (!w->doff || !w->dn || !w->dmark || !w->dfl || !w->dcum || !w->disa) return -1;
    return 0;
}

static void walk_free(walk *w)
{
    free(w->doff);
    free(w->dn);
    free(w->dmark);
    free(w->dfl);
    free(w->dcum);
    free(w->disa);
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
        run_walk(&w, NULL, 0, m->v->n_tok, h->n_tops, 0);
    }
    walk_free(&w);
}

/* ---- the cache ------------------------------------------------------------ */

static int cmp_rank_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static gr_cicache *cache_for(grammar_matcher *m)
{
    if (m->ci) return m->ci;
    grammar *g = (grammar *)m->g; /* the cache is the one mutable part, under g->mu */
    pthread_mutex_lock(&g->mu);
    gr_cicache *c = g->ci;
    while (c && c->vocab_serial != m->v->serial) c = c->next;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (c) {
            c->cap = 1024;
            c->tab = calloc(c->cap, sizeof *c->tab);
        }
        if (c && c->tab) {
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
        for (uint32_t i = 0; i < c->cap; i++) ci_free(c->tab[i]);
        free(c->tab);
        free(c);
        c = nx;
    }
    g->ci = NULL;
}

static uint32_t key_slot(const int32_t *k, uint32_t cap)
{
    uint64_t h = 0;
    for (int i = 0; i < GR_CI_DEPTH; i++) h = (h ^ (uint32_t)k[i]) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & (cap - 1);
}

/* Look key up (g->mu held). */
static gr_ci *tab_find(gr_cicache *c, const int32_t *k)
{
    for (uint32_t j = key_slot(k, c->cap); c->tab[j]; j = (j + 1) & (c->cap - 1))
        if (!memcmp(c->tab[j]->key, k, sizeof c->tab[j]->key)) return c->tab[j];
    return NULL;
}

/* Insert ci (g->mu held, key absent); 0 or -1. */
static int tab_put(gr_cicache *c, gr_ci *ci)
{
    if ((c->n + 1) * 2 > c->cap) {
        uint32_t nc = c->cap * 2;
        gr_ci **nt = calloc(nc, sizeof *nt);
        if (!nt) return -1;
        for (uint32_t i = 0; i < c->cap; i++)
            if (c->tab[i]) {
                uint32_t j = key_slot(c->tab[i]->key, nc);
                while (nt[j]) j = (j + 1) & (nc - 1);
                nt[j] = c->tab[i];
            }
        free(c->tab);
        c->tab = nt;
        c->cap = nc;
    }
    uint32_t j = key_slot(ci->key, c->cap);
    while (c->tab[j]) j = (j + 1) & (c->cap - 1);
    c->tab[j] = ci;
    c->n++;
    return 0;
}

/* The cached classification for top frame top: keyed by the nodes of the
 * top GR_CI_DEPTH frames of its stack (-1 where the stack ends at the
 * root sooner).  The walk starts from a copy of that chain whose bottom is
 * GM_BOTTOM (or GM_ROOT when the whole stack fits), so a token is "depends"
 * only if it finishes all of those frames part way through: one frame of
 * context would leave every token " x" undecided at a whitespace rule's
 * end, as that rule alone may finish after the space. */
static gr_ci *ci_get(grammar_matcher *m, gr_cicache *c, int32_t top)
{
    int32_t key[GR_CI_DEPTH], chain[GR_CI_DEPTH], nk = 0, fr = top;
    for (; nk < GR_CI_DEPTH && fr > GM_BOTTOM; fr = m->frames[fr].parent) key[nk] = chain[nk] = m->frames[fr].node, nk++;
    int to_root = fr == GM_ROOT;
    for (int i = nk; i < GR_CI_DEPTH; i++) key[i] = -1;
    if (!to_root && nk == GR_CI_DEPTH) key[GR_CI_DEPTH - 1] = -2 - key[GR_CI_DEPTH - 1]; /* bottom not root */
    grammar *gm = (grammar *)m->g;
    pthread_mutex_lock(&gm->mu);
    gr_ci *ci = tab_find(c, key);
    pthread_mutex_unlock(&gm->mu);
    if (ci) return ci;
    ci = calloc(1, sizeof *ci);
    if (!ci) return NULL;
    memcpy(ci->key, key, sizeof key);
    size_t words = grammar_mask_words(m->v);
    ci->accept = calloc(words, sizeof *ci->accept);
    gm_ibuf unc = {0}, bacc = {0}, bunc = {0};
    gm_ibuf keys[8] = {{0}};
    uint64_t kh1[8], kh2[8];
    int khashed[8], nkeys = 0;
    walk w;
    int ok = walk_init(&w, m, 1, ci->accept, NULL) == 0 && ci->accept;
    const grammar_vocab *v = m->v;
    int32_t mark = m->n_frames;
    int32_t f = to_root ? GM_ROOT : GM_BOTTOM;
    for (int i = nk - 1; ok && i >= 0; i--) {
        f = gm_frame_get(m, chain[i], f);
        ok = f >= 0;
    }
    /* the whole classification of a structurally equal chain (another
     * grammar's JSON string, say) is shared too: key 512 */
    uint64_t w1 = 0, w2 = 0;
    int whole = 0;
    if (ok) {
        m->scratch.n = 0;
        gm_push(&m->scratch, f);
        whole = gm_set_hash(m, &m->scratch, 0, 1, 0, v->max_len, &w1, &w2) == 0;
        const gv_memo *e = whole ? gv_memo_find((grammar_vocab *)v, w1, w2, 512) : NULL;
        if (e && (size_t)e->n_acc == words) {
            memcpy(ci->accept, e->acc, words * sizeof *ci->accept);
            for (int32_t i = 0; ok && i < e->n_unc; i++)
                if (gm_push(&unc, e->unc[i]) < 0) ok = 0;
            whole = 0;
            goto done_blocks;
        }
    }
    /* block by block (tokens sharing a first byte), re-using the shared
     * classification of a structurally equal stack set (grammar_memo.c) */
    for (int p = 0; ok && p < 512; p++) {
        int b = p >> 1;
        const int32_t *plist = v->part_ranks + v->part_off[p];
        int32_t pn = v->part_off[p + 1] - v->part_off[p];
        if (!pn) continue;
        m->scratch.n = 0;
        gm_push(&m->scratch, f);
        w.dmark[0] = m->n_frames;
        w.doff[1] = 1;
        int fl = gm_step(m, &m->scratch, 0, 1, (uint8_t)b, &m->scratch);
        w.dn[1] = m->scratch.n - 1;
        w.dfl[1] = (uint8_t)fl;
        w.dcum[1] = (uint8_t)(fl & GM_POPPED);
        w.dmark[1] = m->n_frames;
        if (m->oom) ok = 0;
        if (!ok || (w.dn[1] == 0 && !(fl & (GM_POPPED | GM_CAN_END)))) {
            gm_release(m, w.dmark[0]);
            continue; /* the whole block is rejected */
        }
        uint64_t h1 = 0, h2 = 0;
        const gv_memo *e = NULL;
        /* most bytes of a class lead to the same set: hash it once (the
         * set is named by its stacks' node chains, fixed within this
         * grammar) */
        gm_ibuf *ck = &keys[nkeys < 8 ? nkeys : 7];
        ck->n = 0;
        gm_push(ck, fl);
        gm_push(ck, v->part_max[p]);
        for (int32_t i = 0; i < w.dn[1]; i++) {
            for (int32_t fr = m->scratch.p[1 + i]; fr > GM_BOTTOM; fr = m->frames[fr].parent) gm_push(ck, m->frames[fr].node);
            gm_push(ck, -1);
        }
        int hashed = -1;
        for (int k = 0; k < nkeys && k < 7; k++)
            if (keys[k].n == ck->n && !memcmp(keys[k].p, ck->p, (size_t)ck->n * sizeof *ck->p)) {
                hashed = khashed[k], h1 = kh1[k], h2 = kh2[k];
                break;
            }
        if (hashed < 0) {
            hashed = gm_set_hash(m, &m->scratch, 1, w.dn[1], fl, v->part_max[p] - 1, &h1, &h2) == 0;
            int slot = nkeys < 8 ? nkeys++ : 7;
            khashed[slot] = hashed, kh1[slot] = h1, kh2[slot] = h2;
        }
        if (hashed) e = gv_memo_find((grammar_vocab *)v, h1, h2, p);
        const int32_t *acc, *uncr;
        int32_t n_acc, n_unc;
        if (e) {
            acc = e->acc, n_acc = e->n_acc, uncr = e->unc, n_unc = e->n_unc;
        } else {
            bacc.n = bunc.n = 0;
            w.acc = &bacc;
            w.unc = &bunc;
            run_walk(&w, plist, 0, pn, 1, 1);
            w.acc = NULL;
            if (m->oom) ok = 0;
            if (ok && hashed) e = gv_memo_put((grammar_vocab *)v, h1, h2, p, bacc.p, bacc.n, bunc.p, bunc.n);
            acc = bacc.p, n_acc = bacc.n, uncr = bunc.p, n_unc = bunc.n;
        }
        gm_release(m, w.dmark[0]);
        for (int32_t i = 0; ok && i < n_acc; i++) {
            int32_t id = v->rank_id[acc[i]];
            ci->accept[id >> 5] |= 1u << (id & 31);
        }
        for (int32_t i = 0; ok && i < n_unc; i++)
            if (gm_push(&unc, uncr[i]) < 0) ok = 0;
    }
    if (ok && whole)
        gv_memo_put((grammar_vocab *)v, w1, w2, 512, (const int32_t *)ci->accept, (int32_t)words, unc.p, unc.n);
done_blocks:
    gm_release(m, mark);
    ok = ok && !m->oom;
    walk_free(&w);
    free(bacc.p);
    free(bunc.p);
    for (int k = 0; k < 8; k++) free(keys[k].p);
    if (!ok) {
        free(unc.p);
        ci_free(ci);
        m->oom = 0;
        return NULL;
    }
    /* the parts of a block interleave in rank order: the runtime walk
     * needs the list sorted (shared prefixes adjacent) */
    if (unc.n > 1) qsort(unc.p, (size_t)unc.n, sizeof *unc.p, cmp_rank_i32);
    ci->unc = (uint32_t *)unc.p;
    ci->n_unc = unc.n;
    grammar *g = (grammar *)m->g;
    pthread_mutex_lock(&g->mu);
    gr_ci *old = tab_find(c, key);
    if (old) {
        ci_free(ci);
        ci = old;
    } else if (tab_put(c, ci) < 0) {
        ci_free(ci);
        ci = NULL;
    } else
        __atomic_add_fetch(&g->ci_bytes, sizeof *ci + words * sizeof *ci->accept + (size_t)ci->n_unc * sizeof *ci->unc,
                           __ATOMIC_RELAXED);
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
    const gr_ci *seen[64];
    for (int32_t i = 0; i < n_tops; i++) {
        int32_t f = m->committed.p[tops_off + i];
        gr_ci *ci = ci_get(m, c, f);
        if (!ci) {
            walk_free(&w);
            gm_fill_mask_full(m, mask);
            return;
        }
        /* tops with the same context share one accepted set: OR it once */
        int dup = 0;
        for (int32_t j = 0; j < i && j < 64 && !dup; j++) dup = seen[j] == ci;
        if (i < 64) seen[i] = ci;
        if (!dup)
            for (size_t k = 0; k < words; k++) mask[k] |= ci->accept[k];
        if (ci->n_unc) {
            m->scratch.n = 0;
            gm_push(&m->scratch, f);
            run_walk(&w, (const int32_t *)ci->unc, 0, ci->n_unc, 1, 0);
        }
    }
    walk_free(&w);
    if (h->flags & GM_CAN_END) set_end(m, mask);
}
