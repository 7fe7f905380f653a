/* grammar_fsm — AST -> per-rule DFA over bytes and rule references.
 *
 * DESIGN: each rule reachable from the root becomes a Thompson NFA whose
 * edges are epsilon, a byte range, or "push rule R" (a rule reference);
 * char classes become UTF-8 byte-sequence alternatives (so [^"] matches
 * whole characters, one byte at a time).  Subset construction makes it
 * deterministic over both kinds of symbol: from a node at most one edge
 * takes a given byte and at most one edge pushes a given rule.  Then:
 *
 *   - unproductive nodes (no way to finish the rule) and references to
 *     rules that match nothing are trimmed, so every live node can still
 *     reach an end: the matcher may treat "has a top" as "alive";
 *   - left recursion (a rule reaching itself through references without
 *     consuming a byte, possibly via nullable rules) is rejected with the
 *     cycle named: the matcher is a pushdown automaton with a set of
 *     stacks, which would grow without bound on it.
 *
 * Work is bounded: NFA states, DFA nodes and subset-construction steps
 * have caps, so a hostile grammar ({1000000} nested) fails with "too
 * large" instead of eating memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

#define MAX_NFA (1 << 21)
#define MAX_DFA (1 << 19)
#define MAX_WORK (1L << 27)

typedef struct nedge {
    int32_t to, next;
    int32_t rule;    /* -1: eps or range */
    int16_t lo, hi;  /* -1: eps */
} nedge;

typedef struct nfa {
    int32_t *head; /* (n_states) first edge or -1 */
    int32_t n_states, cap_states;
    nedge *e;
    int32_t n_e, cap_e;
    int failed; /* 1 too large, 2 oom */
} nfa;

static int32_t nfa_state(nfa *f)
{
    if (f->failed) return -1;
    if (f->n_states >= MAX_NFA) {
        f->failed = 1;
        return -1;
    }
    if (f->n_states == f->cap_states) {
        int32_t nc = f->cap_states ? f->cap_states * 2 : 256;
        int32_t *nh = realloc(f->head, (size_t)nc * sizeof *nh);
        if (!nh) {
            f->failed = 2;
            return -1;
        }
        f->head = nh;
        f->cap_states = nc;
    }
    f->head[f->n_states] = -1;
    return f->n_states++;
}

static void nfa_edge(nfa *f, int32_t from, int32_t to, int lo, int hi, int32_t rule)
{
    if (f->failed || from < 0 || to < 0) return;
    if (f->n_e == f->cap_e) {
        int32_t nc = f->cap_e ? f->cap_e * 2 : 512;
        if (nc > 4 * MAX_NFA) {
            f->failed = 1;
            return;
        }
        nedge *ne = realloc(f->e, (size_t)nc * sizeof *ne);
        if (!ne) {
            f->failed = 2;
            return;
        }
        f->e = ne;
        f->cap_e = nc;
    }
    nedge *x = &f->e[f->n_e];
    x->to = to;
    x->lo = (int16_t)lo;
    x->hi = (int16_t)hi;
    x->rule = rule;
    x->next = f->head[from];
    f->head[from] = f->n_e++;
}

#define EPS(f, a, b) nfa_edge((f), (a), (b), -1, -1, -1)

/* Byte-range sequences of the UTF-8 encodings of code points lo..hi, each
 * added as a chain s -> ... -> e. */
static void utf8_range(nfa *f, int32_t s, int32_t e, uint32_t lo, uint32_t hi)
{
    static const uint32_t lim[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int k = 0; k < 3; k++)
        if (lo <= lim[k] && hi > lim[k]) {
            utf8_range(f, s, e, lo, lim[k]);
            utf8_range(f, s, e, lim[k] + 1, hi);
            return;
        }
    int n = lo <= 0x7F ? 1 : lo <= 0x7FF ? 2 : lo <= 0xFFFF ? 3 : 4;
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_range(f, s, e, lo, lo | m);
                utf8_range(f, s, e, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                utf8_range(f, s, e, lo, (hi & ~m) - 1);
                utf8_range(f, s, e, hi & ~m, hi);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    ga_utf8_encode(lo, a);
    ga_utf8_encode(hi, b);
    int32_t cur = s;
    for (int i = 0; i < n; i++) {
        int32_t nx = i == n - 1 ? e : nfa_state(f);
        nfa_edge(f, cur, nx, a[i], b[i], -1);
        cur = nx;
    }
}

/* Thompson fragment of node id: *s -> ... -> *e.  0 or -1. */
static int build(const ga_ast *a, nfa *f, int32_t id, int32_t *s, int32_t *e, int depth)
{
    if (depth > 2000) {
        f->failed = 1;
        return -1;
    }
    const ga_node *n = &a->nodes[id];
    *s = nfa_state(f);
    *e = nfa_state(f);
    if (f->failed) return -1;
    switch (n->kind) {
    case GA_EMPTY:
        EPS(f, *s, *e);
        break;
    case GA_LIT: {
        int32_t cur = *s;
        for (int32_t i = 0; i < n->b; i++) {
            int32_t nx = i == n->b - 1 ? *e : nfa_state(f);
            uint8_t b = a->bytes[n->a + i];
            nfa_edge(f, cur, nx, b, b, -1);
            cur = nx;
        }
        break;
    }
    case GA_CLASS:
        for (int32_t i = 0; i < n->b; i++)
            utf8_range(f, *s, *e, a->ranges[2 * (n->a + i)], a->ranges[2 * (n->a + i) + 1]);
        break;
    case GA_REF:
        nfa_edge(f, *s, *e, 0, 0, n->a);
        break;
    case GA_SEQ: {
        int32_t cur = *s;
        for (int32_t i = 0; i < n->nkids; i++) {
            int32_t ks, ke;
            if (build(a, f, a->kids[n->kid_off + i], &ks, &ke, depth + 1) < 0) return -1;
            EPS(f, cur, ks);
            cur = ke;
        }
        EPS(f, cur, *e);
        break;
    }
    case GA_ALT:
        for (int32_t i = 0; i < n->nkids; i++) {
            int32_t ks, ke;
            if (build(a, f, a->kids[n->kid_off + i], &ks, &ke, depth + 1) < 0) return -1;
            EPS(f, *s, ks);
            EPS(f, ke, *e);
        }
        break;
    case GA_REP: {
        int32_t kid = a->kids[n->kid_off], cur = *s, ks, ke;
        for (int32_t i = 0; i < n->a; i++) {
            if (build(a, f, kid, &ks, &ke, depth + 1) < 0) return -1;
            EPS(f, cur, ks);
            cur = ke;
        }
        if (n->b < 0) {
            if (build(a, f, kid, &ks, &ke, depth + 1) < 0) return -1;
            EPS(f, cur, ks);
            EPS(f, ke, cur);
            EPS(f, cur, *e);
        } else {
            for (int32_t i = n->a; i < n->b; i++) {
                if (build(a, f, kid, &ks, &ke, depth + 1) < 0) return -1;
                EPS(f, cur, ks);
                EPS(f, cur, *e);
                cur = ke;
            }
            EPS(f, cur, *e);
        }
        break;
    }
    }
    return f->failed ? -1 : 0;
}

/* ---- subset construction ------------------------------------------------- */

typedef struct dfa {
    /* sets of NFA states per DFA node of the rule being built */
    int32_t *pool;
    size_t n_pool, cap_pool;
    size_t *set_off; /* (n_sets + 1) */
    int32_t n_sets, cap_sets;
    int32_t *ht;     /* (cap_ht) local set index + 1 */
    int32_t cap_ht;
    uint32_t *stamp; /* (nfa states) */
    uint32_t gen;
    int32_t *stack, *tmp;
    size_t cap_tmp;
    long work;
    int failed;
} dfa;

typedef struct gb {
    gr_node *nodes;
    int32_t n_nodes, cap_nodes;
    gr_edge *edges;
    int32_t n_edges, cap_edges;
    gr_ref *refs;
    int32_t n_refs, cap_refs;
    int failed;
} gb;

#define GBGROW(p, n, cap)                                                                          \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            int32_t nc_ = (cap) ? (cap) * 2 : 256;                                                 \
            void *np_ = realloc((p), (size_t)nc_ * sizeof *(p));                                   \
            if (!np_) {                                                                            \
                b->failed = 2;                                                                     \
                return -1;                                                                         \
            }                                                                                      \
            (p) = np_;                                                                             \
            (cap) = nc_;                                                                           \
        }                                                                                          \
    } while (0)

static int cmp_i32(const void *x, const void *y)
{
    int32_t p = *(const int32_t *)x, q = *(const int32_t *)y;
    return p < q ? -1 : p > q;
}

static uint32_t hash_set(const int32_t *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint32_t)s[i]) * 16777619u;
    return h;
}

/* Epsilon closure of seeds[0..n) into d->tmp (sorted); returns its size. */
static size_t closure(const nfa *f, dfa *d, const int32_t *seeds, size_t n)
{
    if (++d->gen == 0) {
        memset(d->stamp, 0, (size_t)f->n_states * sizeof *d->stamp);
        d->gen = 1;
    }
    size_t sp = 0, out = 0;
    for (size_t i = 0; i < n; i++)
        if (d->stamp[seeds[i]] != d->gen) {
            d->stamp[seeds[i]] = d->gen;
            d->stack[sp++] = seeds[i];
        }
    while (sp) {
        int32_t x = d->stack[--sp];
        d->tmp[out++] = x;
        for (int32_t k = f->head[x]; k >= 0; k = f->e[k].next)
            if (f->e[k].lo < 0 && f->e[k].rule < 0 && d->stamp[f->e[k].to] != d->gen) {
                d->stamp[f->e[k].to] = d->gen;
                d->stack[sp++] = f->e[k].to;
            }
    }
    d->work += (long)out;
    qsort(d->tmp, out, sizeof *d->tmp, cmp_i32);
    return out;
}

/* Local index of the set in d->tmp[0..n), adding it if new; -1 on failure. */
static int32_t set_id(dfa *d, size_t n)
{
    uint32_t h = hash_set(d->tmp, n);
    if ((d->n_sets + 1) * 2 > d->cap_ht) {
        int32_t nc = d->cap_ht ? d->cap_ht * 2 : 1024;
        int32_t *nh = calloc((size_t)nc, sizeof *nh);
        if (!nh) return d->failed = 2, -1;
        for (int32_t i = 0; i < d->n_sets; i++) {
            size_t o = d->set_off[i], l = d->set_off[i + 1] - o;
            uint32_t j = hash_set(d->pool + o, l) & (uint32_t)(nc - 1);
            while (nh[j]) j = (j + 1) & (uint32_t)(nc - 1);
            nh[j] = i + 1;
        }
        free(d->ht);
        d->ht = nh;
        d->cap_ht = nc;
    }
    uint32_t j = h & (uint32_t)(d->cap_ht - 1);
    while (d->ht[j]) {
        int32_t i = d->ht[j] - 1;
        size_t o = d->set_off[i], l = d->set_off[i + 1] - o;
        if (l == n && !memcmp(d->pool + o, d->tmp, n * sizeof *d->tmp)) return i;
        j = (j + 1) & (uint32_t)(d->cap_ht - 1);
    }
    if (d->n_sets + 2 > d->cap_sets) {
        int32_t nc = d->cap_sets ? d->cap_sets * 2 : 256;
        size_t *no = realloc(d->set_off, (size_t)nc * sizeof *no);
        if (!no) return d->failed = 2, -1;
        d->set_off = no;
        d->cap_sets = nc;
    }
    if (d->n_pool + n > d->cap_pool) {
        size_t nc = d->cap_pool ? d->cap_pool * 2 : 4096;
        while (nc < d->n_pool + n) nc *= 2;
        int32_t *np = realloc(d->pool, nc * sizeof *np);
        if (!np) return d->failed = 2, -1;
        d->pool = np;
        d->cap_pool = nc;
    }
    memcpy(d->pool + d->n_pool, d->tmp, n * sizeof *d->tmp);
    d->set_off[d->n_sets] = d->n_pool;
    d->n_pool += n;
    d->set_off[d->n_sets + 1] = d->n_pool;
    d->ht[j] = d->n_sets + 1;
    return d->n_sets++;
}

typedef struct tedge {
    int32_t key, to; /* byte edges: key = lo | hi << 8 ; ref edges: key = rule */
} tedge;

static int cmp_key(const void *x, const void *y)
{
    const tedge *p = x, *q = y;
    return p->key < q->key ? -1 : p->key > q->key;
}

/* Build rule r's DFA from fragment (s, e) into b; returns its start node. */
static int32_t subset(const nfa *f, dfa *d, gb *b, int32_t rule, int32_t s, int32_t e)
{
    d->n_sets = 0;
    d->n_pool = 0;
    if (d->cap_ht) memset(d->ht, 0, (size_t)d->cap_ht * sizeof *d->ht);
    int32_t base = b->n_nodes;
    size_t n = closure(f, d, &s, 1);
    if (set_id(d, n) < 0) return -1;
    tedge *te = NULL;
    size_t n_te = 0, cap_te = 0;
    int32_t *cuts = NULL, *seeds = NULL;
    size_t cap_cuts = 0, cap_seeds = 0;
    for (int32_t cur = 0; cur < d->n_sets; cur++) {
        if (d->n_sets > MAX_DFA || b->n_nodes >= MAX_DFA || d->work > MAX_WORK) {
            d->failed = 1;
            break;
        }
        if (b->n_nodes == b->cap_nodes) {
            int32_t nc = b->cap_nodes ? b->cap_nodes * 2 : 256;
            gr_node *nn = realloc(b->nodes, (size_t)nc * sizeof *nn);
            if (!nn) {
                d->failed = 2;
                break;
            }
            b->nodes = nn;
            b->cap_nodes = nc;
        }
        gr_node *node = &b->nodes[b->n_nodes++];
        memset(node, 0, sizeof *node);
        node->rule = rule;
        node->e_off = (uint32_t)b->n_edges;
        node->r_off = (uint32_t)b->n_refs;
        /* collect this set's outgoing symbol edges */
        n_te = 0;
        size_t so = d->set_off[cur], sl = d->set_off[cur + 1] - so;
        for (size_t i = 0; i < sl; i++) {
            int32_t x = d->pool[so + i];
            if (x == e) node->accept = 1;
            for (int32_t k = f->head[x]; k >= 0; k = f->e[k].next) {
                const nedge *ed = &f->e[k];
                if (ed->lo < 0 && ed->rule < 0) continue;
                if (n_te == cap_te) {
                    cap_te = cap_te ? cap_te * 2 : 64;
                    tedge *nt = realloc(te, cap_te * sizeof *nt);
                    if (!nt) {
                        d->failed = 2;
                        goto out;
                    }
                    te = nt;
                }
                te[n_te].key = ed->rule >= 0 ? -1 - ed->rule : (ed->lo | ed->hi << 8);
                te[n_te].to = ed->to;
                n_te++;
            }
        }
        d->work += (long)n_te;
        if (cap_seeds < n_te + 1) {
            cap_seeds = n_te + 64;
            int32_t *ns = realloc(seeds, cap_seeds * sizeof *ns);
            if (!ns) {
                d->failed = 2;
                goto out;
            }
            seeds = ns;
        }
        if (cap_cuts < 2 * n_te + 2) {
            cap_cuts = 2 * n_te + 64;
            int32_t *nc = realloc(cuts, cap_cuts * sizeof *nc);
            if (!nc) {
                d->failed = 2;
                goto out;
            }
            cuts = nc;
        }
        /* byte edges: split at every boundary, union the targets */
        size_t nc = 0;
        for (size_t i = 0; i < n_te; i++)
            if (te[i].key >= 0) {
                cuts[nc++] = te[i].key & 0xFF;
                cuts[nc++] = (te[i].key >> 8) + 1;
            }
        qsort(cuts, nc, sizeof *cuts, cmp_i32);
        size_t u = 0;
        for (size_t i = 0; i < nc; i++)
            if (!u || cuts[u - 1] != cuts[i]) cuts[u++] = cuts[i];
        for (size_t c = 0; c + 1 < u; c++) {
            int lo = cuts[c], hi = cuts[c + 1] - 1;
            size_t ns = 0;
            for (size_t i = 0; i < n_te; i++)
                if (te[i].key >= 0 && (te[i].key & 0xFF) <= lo && (te[i].key >> 8) >= hi) seeds[ns++] = te[i].to;
            d->work += (long)n_te;
            if (!ns) continue;
            size_t cn = closure(f, d, seeds, ns);
            int32_t t = set_id(d, cn);
            if (t < 0) goto out;
            node = &b->nodes[b->n_nodes - 1];
            gr_edge *last = b->n_edges > (int32_t)node->e_off ? &b->edges[b->n_edges - 1] : NULL;
            if (last && last->to == base + t && last->hi + 1 == lo) {
                last->hi = (uint8_t)hi;
                continue;
            }
            if (b->n_edges == b->cap_edges) {
                int32_t ncap = b->cap_edges ? b->cap_edges * 2 : 256;
                gr_edge *ne = realloc(b->edges, (size_t)ncap * sizeof *ne);
                if (!ne) {
                    d->failed = 2;
                    goto out;
                }
                b->edges = ne;
                b->cap_edges = ncap;
            }
            b->edges[b->n_edges].lo = (uint8_t)lo;
            b->edges[b->n_edges].hi = (uint8_t)hi;
            b->edges[b->n_edges].to = base + t;
            b->n_edges++;
        }
        /* rule references: group by rule */
        if (n_te) qsort(te, n_te, sizeof *te, cmp_key);
        for (size_t i = 0; i < n_te && te[i].key < 0;) {
            size_t j = i, ns = 0;
            while (j < n_te && te[j].key == te[i].key) seeds[ns++] = te[j++].to;
            size_t cn = closure(f, d, seeds, ns);
            int32_t t = set_id(d, cn);
            if (t < 0) goto out;
            if (b->n_refs == b->cap_refs) {
                int32_t ncap = b->cap_refs ? b->cap_refs * 2 : 256;
                gr_ref *nr = realloc(b->refs, (size_t)ncap * sizeof *nr);
                if (!nr) {
                    d->failed = 2;
                    goto out;
                }
                b->refs = nr;
                b->cap_refs = ncap;
            }
            b->refs[b->n_refs].rule = -1 - te[i].key;
            b->refs[b->n_refs].to = base + t;
            b->n_refs++;
            i = j;
        }
        node = &b->nodes[b->n_nodes - 1];
        node->ne = (uint16_t)(b->n_edges - (int32_t)node->e_off);
        node->nr = (uint16_t)(b->n_refs - (int32_t)node->r_off);
        if (b->n_edges - (int32_t)node->e_off > 256 || b->n_refs - (int32_t)node->r_off > 65535) {
            d->failed = 1;
            goto out;
        }
    }
out:
    free(te);
    free(cuts);
    free(seeds);
    return d->failed ? -1 : base;
}

/* ---- analysis ------------------------------------------------------------ */

/* Mark productive nodes; drop edges into unproductive ones. */
static void trim(gb *b, int32_t *rule_start, int32_t n_rules)
{
    uint8_t *prod = calloc((size_t)b->n_nodes, 1);
    uint8_t *rprod = calloc((size_t)n_rules, 1);
    if (!prod || !rprod) {
        free(prod);
        free(rprod);
        b->failed = 2;
        return;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t i = b->n_nodes - 1; i >= 0; i--) {
            if (prod[i]) continue;
            const gr_node *n = &b->nodes[i];
            int p = n->accept;
            for (uint32_t k = 0; !p && k < n->ne; k++) p = prod[b->edges[n->e_off + k].to];
            for (uint32_t k = 0; !p && k < n->nr; k++) {
                const gr_ref *r = &b->refs[n->r_off + k];
                p = rprod[r->rule] && prod[r->to];
            }
            if (p) {
                prod[i] = 1;
                changed = 1;
                if (i == rule_start[n->rule]) rprod[n->rule] = 1;
            }
        }
    }
    /* compact edge lists in place (each node's edges stay contiguous) */
    int32_t ne = 0, nr = 0;
    for (int32_t i = 0; i < b->n_nodes; i++) {
        gr_node *n = &b->nodes[i];
        uint32_t eo = n->e_off, ro = n->r_off;
        uint16_t cne = n->ne, cnr = n->nr;
        n->e_off = (uint32_t)ne;
        n->r_off = (uint32_t)nr;
        for (uint32_t k = 0; k < cne; k++)
            if (prod[b->edges[eo + k].to]) b->edges[ne++] = b->edges[eo + k];
        for (uint32_t k = 0; k < cnr; k++) {
            gr_ref r = b->refs[ro + k];
            if (rprod[r.rule] && prod[r.to]) b->refs[nr++] = r;
        }
        n->ne = (uint16_t)(ne - (int32_t)n->e_off);
        n->nr = (uint16_t)(nr - (int32_t)n->r_off);
    }
    b->n_edges = ne;
    b->n_refs = nr;
    for (int32_t r = 0; r < n_rules; r++)
        if (rule_start[r] >= 0 && !rprod[r]) rule_start[r] = -1;
    free(prod);
    free(rprod);
}

/* Nodes of rule r reachable from its start through references to nullable
 * rules only (no byte): into list; returns count.  mark: scratch. */
static int32_t eps_reach(const gb *b, const int32_t *rule_start, const uint8_t *nullable, int32_t r,
                         int32_t *list, uint32_t *mark, uint32_t gen)
{
    int32_t n = 0;
    list[n++] = rule_start[r];
    mark[rule_start[r]] = gen;
    for (int32_t i = 0; i < n; i++) {
        const gr_node *x = &b->nodes[list[i]];
        for (uint32_t k = 0; k < x->nr; k++) {
            const gr_ref *ref = &b->refs[x->r_off + k];
            if (nullable[ref->rule] && mark[ref->to] != gen) {
                mark[ref->to] = gen;
                list[n++] = ref->to;
            }
        }
    }
    return n;
}

/* Reject left recursion.  0, or -1 with err naming the cycle. */
static int check_left_rec(gb *b, const int32_t *rule_start, int32_t n_rules, char **names, char *err,
                          size_t errlen)
{
    int ret = -1;
    uint8_t *nullable = calloc((size_t)n_rules, 1);
    int32_t *list = malloc((size_t)b->n_nodes * sizeof *list);
    uint32_t *mark = calloc((size_t)b->n_nodes, sizeof *mark);
    int32_t *adj_off = calloc((size_t)n_rules + 1, sizeof *adj_off);
    int32_t *adj = NULL, n_adj = 0, cap_adj = 0;
    int32_t *color = calloc((size_t)n_rules, sizeof *color), *from = malloc((size_t)n_rules * sizeof *from);
    int32_t *stk = malloc(((size_t)n_rules + 1) * sizeof *stk), *it = malloc(((size_t)n_rules + 1) * sizeof *it);
    if (!nullable || !list || !mark || !adj_off || !color || !from || !stk || !it) goto done;
    uint32_t gen = 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t r = 0; r < n_rules; r++) {
            if (nullable[r] || rule_start[r] < 0) continue;
            int32_t n = eps_reach(b, rule_start, nullable, r, list, mark, ++gen);
            for (int32_t i = 0; i < n; i++)
                if (b->nodes[list[i]].accept) {
                    nullable[r] = 1;
                    changed = 1;
                    break;
                }
        }
    }
    for (int32_t r = 0; r < n_rules; r++) {
        adj_off[r] = n_adj;
        if (rule_start[r] < 0) continue;
        int32_t n = eps_reach(b, rule_start, nullable, r, list, mark, ++gen);
        for (int32_t i = 0; i < n; i++) {
            const gr_node *x = &b->nodes[list[i]];
            for (uint32_t k = 0; k < x->nr; k++) {
                if (n_adj == cap_adj) {
                    cap_adj = cap_adj ? cap_adj * 2 : 256;
                    int32_t *na = realloc(adj, (size_t)cap_adj * sizeof *na);
                    if (!na) goto done;
                    adj = na;
                }
                adj[n_adj++] = b->refs[x->r_off + k].rule;
            }
        }
    }
    adj_off[n_rules] = n_adj;
    /* iterative DFS for a cycle */
    for (int32_t r0 = 0; r0 < n_rules; r0++) {
        if (color[r0]) continue;
        int32_t sp = 0;
        stk[sp] = r0;
        it[sp] = adj_off[r0];
        color[r0] = 1;
        from[r0] = -1;
        while (sp >= 0) {
            int32_t r = stk[sp];
            if (it[sp] == adj_off[r + 1]) {
                color[r] = 2;
                sp--;
                continue;
            }
            int32_t t = adj[it[sp]++];
            if (color[t] == 1) {
                /* cycle t -> ... -> r -> t */
                char path[256] = "";
                size_t pl = 0;
                int32_t chain[8], nch = 0;
                for (int32_t x = r; x >= 0 && x != t && nch < 7; x = from[x]) chain[nch++] = x;
                pl += (size_t)snprintf(path + pl, sizeof path - pl, "%.40s", names[t]);
                for (int32_t k = nch - 1; k >= 0 && pl < sizeof path; k--)
                    pl += (size_t)snprintf(path + pl, sizeof path - pl, " -> %.40s", names[chain[k]]);
                if (pl < sizeof path) snprintf(path + pl, sizeof path - pl, " -> %.40s", names[t]);
                snprintf(err, errlen,
                         "left recursion: rule '%.60s' can reach itself without consuming input (%s); "
                         "rewrite it right-recursive (e.g. a ::= b a?)",
                         names[t], path);
                goto done;
            }
            if (!color[t]) {
                color[t] = 1;
                from[t] = r;
                sp++;
                stk[sp] = t;
                it[sp] = adj_off[t];
            }
        }
    }
    ret = 0;
done:
    if (ret < 0 && err && !err[0]) snprintf(err, errlen, "out of memory");
    free(nullable);
    free(list);
    free(mark);
    free(adj_off);
    free(adj);
    free(color);
    free(from);
    free(stk);
    free(it);
    return ret;
}

grammar *gr_build(ga_ast *a, const char *root, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    if (a->oom) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (int32_t r = 0; r < a->n_rules; r++)
        if (a->rules[r].body < 0) {
            snprintf(err, errlen, "undefined rule '%.100s' (line %d)", a->rules[r].name, a->rules[r].line);
            return NULL;
        }
    int32_t root_id = -1;
    for (int32_t r = 0; r < a->n_rules; r++)
        if (!strcmp(a->rules[r].name, root)) root_id = r;
    if (root_id < 0) {
        snprintf(err, errlen, "no rule named '%.100s' (the start rule)", root);
        return NULL;
    }
    nfa f = {0};
    dfa d = {0};
    gb b = {0};
    grammar *g = NULL;
    int32_t n_rules = a->n_rules;
    int32_t *rule_start = malloc((size_t)n_rules * sizeof *rule_start);
    int32_t *rs = malloc((size_t)n_rules * sizeof *rs), *re = malloc((size_t)n_rules * sizeof *re);
    uint8_t *reach = calloc((size_t)n_rules, 1);
    int32_t *queue = malloc((size_t)n_rules * sizeof *queue);
    if (!rule_start || !rs || !re || !reach || !queue) goto oom;
    /* NFA for every rule reachable from the root */
    int32_t qn = 0;
    queue[qn++] = root_id;
    reach[root_id] = 1;
    for (int32_t qi = 0; qi < qn; qi++) {
        int32_t r = queue[qi], e0 = f.n_e;
        if (build(a, &f, a->rules[r].body, &rs[r], &re[r], 0) < 0) break;
        for (int32_t k = e0; k < f.n_e; k++)
            if (f.e[k].rule >= 0 && !reach[f.e[k].rule]) {
                reach[f.e[k].rule] = 1;
                queue[qn++] = f.e[k].rule;
            }
    }
    if (f.failed == 1) {
        snprintf(err, errlen, "grammar too large (over %d automaton states; a large {m,n} repetition?)", MAX_NFA);
        goto fail;
    }
    if (f.failed) goto oom;
    d.stamp = calloc((size_t)f.n_states + 1, sizeof *d.stamp);
    d.stack = malloc(((size_t)f.n_states + 1) * sizeof *d.stack);
    d.tmp = malloc(((size_t)f.n_states + 1) * sizeof *d.tmp);
    if (!d.stamp || !d.stack || !d.tmp) goto oom;
    for (int32_t r = 0; r < n_rules; r++) rule_start[r] = -1;
    for (int32_t qi = 0; qi < qn; qi++) {
        int32_t r = queue[qi];
        rule_start[r] = subset(&f, &d, &b, r, rs[r], re[r]);
        if (rule_start[r] < 0) break;
    }
    if (d.failed == 1) {
        snprintf(err, errlen, "grammar too large (determinizing it exceeds %d states)", MAX_DFA);
        goto fail;
    }
    if (d.failed) goto oom;
    trim(&b, rule_start, n_rules);
    if (b.failed) goto oom;
    if (rule_start[root_id] < 0) {
        snprintf(err, errlen, "the grammar matches no string");
        goto fail;
    }
    char **names = calloc((size_t)n_rules, sizeof *names);
    if (!names) goto oom;
    for (int32_t r = 0; r < n_rules; r++) names[r] = a->rules[r].name;
    int lr = check_left_rec(&b, rule_start, n_rules, names, err, errlen);
    free(names);
    if (lr < 0) goto fail;
    g = calloc(1, sizeof *g);
    if (!g) goto oom;
    g->nodes = b.nodes;
    g->n_nodes = b.n_nodes;
    g->edges = b.edges;
    g->n_edges = b.n_edges;
    g->refs = b.refs;
    g->n_refs = b.n_refs;
    memset(&b, 0, sizeof b);
    g->rule_start = rule_start;
    rule_start = NULL;
    g->n_rules = n_rules;
    g->root = root_id;
    g->rule_names = calloc((size_t)n_rules, sizeof *g->rule_names);
    if (!g->rule_names) goto oom;
    for (int32_t r = 0; r < n_rules; r++) {
        g->rule_names[r] = a->rules[r].name;
        a->rules[r].name = NULL;
    }
    g->bytes = sizeof *g + (size_t)g->n_nodes * sizeof *g->nodes + (size_t)g->n_edges * sizeof *g->edges +
               (size_t)g->n_refs * sizeof *g->refs + (size_t)n_rules * 48;
    pthread_mutex_init(&g->mu, NULL);
    goto done;
oom:
    snprintf(err, errlen, "out of memory compiling the grammar");
fail:
    if (g) {
        free(g->nodes);
        free(g->edges);
        free(g->refs);
        free(g->rule_start);
        free(g->rule_names);
        free(g);
        g = NULL;
    }
done:
    free(f.head);
    free(f.e);
    free(d.pool);
    free(d.set_off);
    free(d.ht);
    free(d.stamp);
    free(d.stack);
    free(d.tmp);
    free(b.nodes);
    free(b.edges);
    free(b.refs);
    free(rule_start);
    free(rs);
    free(re);
    free(reach);
    free(queue);
    return g;
}

void grammar_free(grammar *g)
{
    if (!g) return;
    gr_ci_free_all(g);
    pthread_mutex_destroy(&g->mu);
    free(g->nodes);
    free(g->edges);
    free(g->refs);
    free(g->rule_start);
    free(g->close_dist);
    if (g->rule_names)
        for (int32_t r = 0; r < g->n_rules; r++) free(g->rule_names[r]);
    free(g->rule_names);
    free(g);
}

size_t grammar_bytes(const grammar *g) { return g ? g->bytes : 0; }

grammar *grammar_compile_ebnf(const char *text, size_t len, const char *root, char *err, size_t errlen)
{
    ga_ast a = {0};
    if (err && errlen) err[0] = 0;
    grammar *g = NULL;
    if (ga_parse_ebnf(&a, text, len, err, errlen) == 0) g = gr_build(&a, root ? root : "root", err, errlen);
    ga_free(&a);
    return g;
}
