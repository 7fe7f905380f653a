/* spec_ngram — the n-gram draft trie; see spec_ngram.h for the design.
 *
 * Layout: nodes live in one growing array (index 0 is the root; NIL ends
 * a link); a node's children are found through one open-addressing hash
 * table keyed by (parent, token) and enumerated through a sibling list;
 * the global LRU list (lru_prev / lru_next) runs from the most recently
 * touched node (head) to the eviction candidate (tail).  Freed nodes go
 * on a free list threaded through sib_next. */
#include "spec/spec_ngram.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define MAX_BREADTH 64 /* children taken per expansion, at most (SGLang's defaults stay far below) */

typedef struct ng_node {
    int32_t token;
    uint32_t parent;
    uint32_t child;             /* first child (NIL none) */
    uint32_t sib_next, sib_prev;
    uint32_t lru_prev, lru_next;
    uint32_t freq;              /* insertions through this node */
    uint32_t gen;               /* bumped when the node is freed: a cursor's (node, gen) is stale after */
    uint64_t stamp;             /* clock at the last insertion through it */
} ng_node;

/* one node of the draft tree being built (index 0 = the sequence's last token) */
typedef struct tnode {
    int32_t token;
    int first, last, next;      /* children in creation order; sibling link */
} tnode;

typedef struct bfs_item {
    int pos;                    /* tree node */
    double breadth;
    uint32_t node;              /* trie node whose children extend pos */
} bfs_item;

typedef struct heap_item {
    double prob;
    int pos;
    uint32_t node;              /* a trie child: becomes a tree child of pos */
} heap_item;

struct spec_ngram {
    spec_ngram_params p;
    ng_node *nodes;             /* (cap_nodes) */
    uint32_t n_nodes, cap_nodes;/* slots handed out so far / allocated */
    uint32_t free_head;
    int64_t used;               /* nodes in the trie, root excluded */
    uint32_t lru_head, lru_tail;
    uint32_t *ht;               /* (ht_cap) node index or NIL; key (parent, token) */
    uint64_t ht_cap, ht_n;
    uint64_t clock;
    int64_t evictions;
    uint32_t *path;             /* (max_trie_depth) insertion scratch */
    tnode *tree;                /* (cap_tree) draft-build scratch */
    int cap_tree;
    bfs_item *queue;            /* (cap_tree + 1) */
    heap_item *heap;            /* (cap_heap) */
    int cap_heap;
};

void spec_ngram_params_init(spec_ngram_params *p)
{
    *p = (spec_ngram_params){.min_match_window = 1,
                             .max_match_window = 12,
                             .min_bfs_breadth = 1,
                             .max_bfs_breadth = 10,
                             .match_type = SPEC_MATCH_BFS,
                             .max_trie_depth = 18,
                             .capacity = 10000000};
}

int spec_ngram_params_check(const spec_ngram_params *p, char *err, size_t errlen)
{
    if (p->max_trie_depth <= 1) {
        snprintf(err, errlen, "--speculative-ngram-max-trie-depth must be greater than 1 (got %d)", p->max_trie_depth);
        return -1;
    }
    if (p->min_match_window <= 0) {
        snprintf(err, errlen, "--speculative-ngram-min-match-window-size must be greater than 0 (got %d)",
                 p->min_match_window);
        return -1;
    }
    if (p->min_match_window > p->max_match_window) {
        snprintf(err, errlen,
                 "--speculative-ngram-min-match-window-size (%d) must be less than or equal to "
                 "--speculative-ngram-max-match-window-size (%d)",
                 p->min_match_window, p->max_match_window);
        return -1;
    }
    if (p->max_match_window >= p->max_trie_depth) {
        snprintf(err, errlen,
                 "--speculative-ngram-max-match-window-size (%d) must be less than "
                 "--speculative-ngram-max-trie-depth (%d)",
                 p->max_match_window, p->max_trie_depth);
        return -1;
    }
    if (p->min_bfs_breadth <= 0) {
        snprintf(err, errlen, "--speculative-ngram-min-bfs-breadth must be greater than 0 (got %d)",
                 p->min_bfs_breadth);
        return -1;
    }
    if (p->min_bfs_breadth > p->max_bfs_breadth) {
        snprintf(err, errlen,
                 "--speculative-ngram-min-bfs-breadth (%d) must be less than or equal to "
                 "--speculative-ngram-max-bfs-breadth (%d)",
                 p->min_bfs_breadth, p->max_bfs_breadth);
        return -1;
    }
    if (p->max_bfs_breadth > MAX_BREADTH) {
        snprintf(err, errlen, "--speculative-ngram-max-bfs-breadth must be at most %d (got %d)", MAX_BREADTH,
                 p->max_bfs_breadth);
        return -1;
    }
    if (p->capacity <= p->max_trie_depth || p->capacity >= (int64_t)NIL - 1) {
        snprintf(err, errlen,
                 "--speculative-ngram-capacity must be greater than --speculative-ngram-max-trie-depth (%d) and "
                 "below %u (got %lld)",
                 p->max_trie_depth, NIL - 1, (long long)p->capacity);
        return -1;
    }
    return 0;
}

/* ---- hash table over (parent, token) ------------------------------------- */

static uint64_t key_hash(uint32_t parent, int32_t token)
{
    uint64_t x = ((uint64_t)parent << 32) ^ (uint32_t)token;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint32_t ht_find(const spec_ngram *t, uint32_t parent, int32_t token)
{
    uint64_t mask = t->ht_cap - 1, i = key_hash(parent, token) & mask;
    for (;;) {
        uint32_t v = t->ht[i];
        if (v == NIL) return NIL;
        if (t->nodes[v].parent == parent && t->nodes[v].token == token) return v;
        i = (i + 1) & mask;
    }
}

static void ht_put(spec_ngram *t, uint32_t node)
{
    uint64_t mask = t->ht_cap - 1, i = key_hash(t->nodes[node].parent, t->nodes[node].token) & mask;
    while (t->ht[i] != NIL) i = (i + 1) & mask;
    t->ht[i] = node;
    t->ht_n++;
}

static int ht_grow(spec_ngram *t)
{
    uint64_t nc = t->ht_cap * 2;
    uint32_t *old = t->ht, *nh = malloc(sizeof(uint32_t) * nc);
    if (!nh) return -1;
    memset(nh, 0xff, sizeof(uint32_t) * nc);
    uint64_t oc = t->ht_cap;
    t->ht = nh;
    t->ht_cap = nc;
    t->ht_n = 0;
    for (uint64_t i = 0; i < oc; i++)
        if (old[i] != NIL) ht_put(t, old[i]);
    free(old);
    return 0;
}

/* Backward-shift deletion (linear probing keeps no tombstones). */
static void ht_del(spec_ngram *t, uint32_t node)
{
    uint64_t mask = t->ht_cap - 1, i = key_hash(t->nodes[node].parent, t->nodes[node].token) & mask;
    while (t->ht[i] != node) i = (i + 1) & mask;
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        uint32_t v = t->ht[j];
        if (v == NIL) break;
        uint64_t k = key_hash(t->nodes[v].parent, t->nodes[v].token) & mask;
        /* v may move to the hole at i unless its home k lies cyclically in (i, j] */
        bool in_range = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (!in_range) {
            t->ht[i] = v;
            i = j;
        }
    }
    t->ht[i] = NIL;
    t->ht_n--;
}

/* ---- node storage, LRU -------------------------------------------------- */

static void lru_unlink(spec_ngram *t, uint32_t x)
{
    ng_node *n = &t->nodes[x];
    if (n->lru_prev != NIL) t->nodes[n->lru_prev].lru_next = n->lru_next;
    else t->lru_head = n->lru_next;
    if (n->lru_next != NIL) t->nodes[n->lru_next].lru_prev = n->lru_prev;
    else t->lru_tail = n->lru_prev;
    n->lru_prev = n->lru_next = NIL;
}

static void lru_push_front(spec_ngram *t, uint32_t x)
{
    ng_node *n = &t->nodes[x];
    n->lru_prev = NIL;
    n->lru_next = t->lru_head;
    if (t->lru_head != NIL) t->nodes[t->lru_head].lru_prev = x;
    t->lru_head = x;
    if (t->lru_tail == NIL) t->lru_tail = x;
}

static uint32_t node_alloc(spec_ngram *t)
{
    if (t->free_head != NIL) {
        uint32_t x = t->free_head;
        t->free_head = t->nodes[x].sib_next;
        return x;
    }
    if (t->n_nodes == t->cap_nodes) {
        uint64_t nc = (uint64_t)t->cap_nodes * 2;
        if (nc > (uint64_t)t->p.capacity + 1) nc = (uint64_t)t->p.capacity + 1;
        if (nc <= t->cap_nodes) return NIL;
        ng_node *a = realloc(t->nodes, sizeof(ng_node) * nc);
        if (!a) return NIL;
        t->nodes = a;
        t->cap_nodes = (uint32_t)nc;
    }
    t->nodes[t->n_nodes].gen = 0;
    return t->n_nodes++;
}

/* Evict the least recently touched leaf.  The LRU tail is a leaf when
 * every touched path was moved whole (spec_ngram_insert); a cursor moves
 * only the node it touched, so a tail that still has children goes back
 * to the head (a second chance) and the next is tried. */
static int evict_one(spec_ngram *t)
{
    uint32_t x = t->lru_tail;
    for (int64_t tries = 0; x != NIL && t->nodes[x].child != NIL; tries++) {
        if (tries > t->used) return -1; /* cannot happen: a non-empty trie has a leaf */
        lru_unlink(t, x);
        lru_push_front(t, x);
        x = t->lru_tail;
    }
    if (x == NIL) return -1;
    ng_node *n = &t->nodes[x];
    lru_unlink(t, x);
    if (n->sib_prev != NIL) t->nodes[n->sib_prev].sib_next = n->sib_next;
    else t->nodes[n->parent].child = n->sib_next;
    if (n->sib_next != NIL) t->nodes[n->sib_next].sib_prev = n->sib_prev;
    ht_del(t, x);
    n->gen++;
    n->sib_next = t->free_head;
    t->free_head = x;
    t->used--;
    t->evictions++;
    return 0;
}

spec_ngram *spec_ngram_create(const spec_ngram_params *p, char *err, size_t errlen)
{
    if (spec_ngram_params_check(p, err, errlen)) return NULL;
    spec_ngram *t = calloc(1, sizeof *t);
    if (!t) goto oom;
    t->p = *p;
    t->cap_nodes = 1024;
    if ((int64_t)t->cap_nodes > p->capacity + 1) t->cap_nodes = (uint32_t)(p->capacity + 1);
    t->nodes = malloc(sizeof(ng_node) * t->cap_nodes);
    t->ht_cap = 2048;
    t->ht = malloc(sizeof(uint32_t) * t->ht_cap);
    t->path = malloc(sizeof(uint32_t) * (size_t)p->max_trie_depth);
    if (!t->nodes || !t->ht || !t->path) goto oom;
    memset(t->ht, 0xff, sizeof(uint32_t) * t->ht_cap);
    t->n_nodes = 1; /* the root */
    t->nodes[0] = (ng_node){.token = -1, .parent = NIL, .child = NIL, .sib_next = NIL, .sib_prev = NIL,
                            .lru_prev = NIL, .lru_next = NIL};
    t->free_head = t->lru_head = t->lru_tail = NIL;
    return t;
oom:
    snprintf(err, errlen, "out of memory for the n-gram trie");
    spec_ngram_destroy(t);
    return NULL;
}

void spec_ngram_destroy(spec_ngram *t)
{
    if (!t) return;
    free(t->nodes);
    free(t->ht);
    free(t->path);
    free(t->tree);
    free(t->queue);
    free(t->heap);
    free(t);
}

int64_t spec_ngram_size(const spec_ngram *t) { return t->used; }
int64_t spec_ngram_evictions(const spec_ngram *t) { return t->evictions; }

/* ---- insertion ------------------------------------------------------------ */

/* A new child of parent for token (freq 1, at the LRU head); NIL when out
 * of memory.  The caller made room (capacity) first. */
static uint32_t node_new(spec_ngram *t, uint32_t parent, int32_t token)
{
    if ((t->ht_n + 1) * 2 > t->ht_cap && ht_grow(t)) return NIL;
    uint32_t c = node_alloc(t);
    if (c == NIL) return NIL;
    ng_node *nn = &t->nodes[c];
    uint32_t gen = nn->gen; /* node_alloc: 0 for a fresh slot, kept (bumped at free) for a reused one */
    *nn = (ng_node){.token = token, .parent = parent, .child = NIL, .sib_next = NIL, .sib_prev = NIL,
                    .lru_prev = NIL, .lru_next = NIL, .freq = 1, .gen = gen};
    /* link as the parent's first child (order is irrelevant: top_children ranks) */
    uint32_t f = t->nodes[parent].child;
    if (f != NIL) {
        nn->sib_next = f;
        t->nodes[f].sib_prev = c;
    }
    t->nodes[parent].child = c;
    ht_put(t, c);
    lru_push_front(t, c);
    t->used++;
    return c;
}

/* Insert path seq[0..n), counting only depths >= counted. */
static int insert_path(spec_ngram *t, const int32_t *seq, int n, int counted)
{
    int64_t room = t->p.capacity - t->used;
    for (int64_t k = n - room; k > 0; k--)
        if (evict_one(t)) return -1;
    uint32_t cur = 0;
    int d = 0;
    for (; d < n; d++) {
        uint32_t c = ht_find(t, cur, seq[d]);
        if (c == NIL) {
            if ((t->ht_n + 1) * 2 > t->ht_cap && ht_grow(t)) break;
            c = node_new(t, cur, seq[d]);
            if (c == NIL) break;
        } else if (d >= counted) {
            t->nodes[c].freq++;
        }
        t->nodes[c].stamp = ++t->clock;
        t->path[d] = c;
        cur = c;
    }
    /* deepest first to the LRU head: ancestors end up before descendants */
    for (int k = d - 1; k >= 0; k--) {
        lru_unlink(t, t->path[k]);
        lru_push_front(t, t->path[k]);
    }
    return d == n ? 0 : -1;
}

int spec_ngram_insert(spec_ngram *t, const int32_t *seq, int64_t len, int64_t seen)
{
    int64_t D = t->p.max_trie_depth;
    if (seen < 0) seen = 0;
    if (seen > len) seen = len;
    int64_t from = seen - D + 1;
    if (from < 0) from = 0;
    for (int64_t i = from; i < len; i++) {
        int64_t end = i + D < len ? i + D : len;
        int64_t old = (i + D < seen ? i + D : seen) - i;
        if (old < 0) old = 0;
        if (old >= end - i) continue; /* nothing new on this path */
        if (insert_path(t, seq + i, (int)(end - i), (int)old)) return -1;
    }
    return 0;
}

/* ---- cursors --------------------------------------------------------------- */

int spec_ngram_cursor_init(const spec_ngram *t, spec_ngram_cursor *c)
{
    int D = t->p.max_trie_depth;
    c->node = malloc(sizeof(uint32_t) * (size_t)D);
    c->gen = malloc(sizeof(uint32_t) * (size_t)D);
    c->len = 0;
    if (!c->node || !c->gen) {
        spec_ngram_cursor_free(c);
        return -1;
    }
    for (int i = 0; i < D; i++) c->node[i] = NIL, c->gen[i] = 0;
    return 0;
}

void spec_ngram_cursor_free(spec_ngram_cursor *c)
{
    free(c->node);
    free(c->gen);
    c->node = c->gen = NULL;
    c->len = 0;
}

static bool ref_ok(const spec_ngram *t, uint32_t x, uint32_t gen) { return x != NIL && t->nodes[x].gen == gen; }

int spec_ngram_advance(spec_ngram *t, spec_ngram_cursor *c, const int32_t *seq, int64_t len)
{
    int64_t D = t->p.max_trie_depth;
    if (len < c->len) { /* cannot happen (sequences only grow): start over */
        for (int64_t i = 0; i < D; i++) c->node[i] = NIL;
        c->len = 0;
    }
    for (int64_t p = c->len; p < len; p++) {
        int64_t lo = p - D + 1 < 0 ? 0 : p - D + 1;
        /* room for one new node per path first: no eviction inside the loop */
        for (int64_t k = (p - lo + 1) - (t->p.capacity - t->used); k > 0; k--)
            if (evict_one(t)) return -1;
        int32_t tok = seq[p];
        for (int64_t i = lo; i <= p; i++) {
            int64_t r = i % D;
            uint32_t parent = 0;
            if (i < p) {
                if (!ref_ok(t, c->node[r], c->gen[r])) {
                    c->node[r] = NIL; /* its end was evicted: this path is dropped */
                    continue;
                }
                parent = c->node[r];
            }
            uint32_t ch = ht_find(t, parent, tok);
            if (ch == NIL) ch = node_new(t, parent, tok);
            else t->nodes[ch].freq++;
            if (ch == NIL) {
                c->node[r] = NIL;
                continue;
            }
            t->nodes[ch].stamp = ++t->clock;
            c->node[r] = ch;
            c->gen[r] = t->nodes[ch].gen;
            lru_unlink(t, ch); /* to the LRU head (its ancestors get a second chance at eviction) */
            lru_push_front(t, ch);
        }
    }
    c->len = len;
    return 0;
}

uint32_t spec_ngram_freq(const spec_ngram *t, const int32_t *path, int n)
{
    uint32_t cur = 0;
    for (int i = 0; i < n && cur != NIL; i++) cur = ht_find(t, cur, path[i]);
    return cur == NIL || n == 0 ? 0 : t->nodes[cur].freq;
}

/* ---- drafting ------------------------------------------------------------- */

static int tree_reserve(spec_ngram *t, int n)
{
    if (n <= t->cap_tree) return 0;
    tnode *a = realloc(t->tree, sizeof(tnode) * (size_t)n);
    if (!a) return -1;
    t->tree = a;
    bfs_item *q = realloc(t->queue, sizeof(bfs_item) * (size_t)(n + 1));
    if (!q) return -1;
    t->queue = q;
    t->cap_tree = n;
    return 0;
}

/* The tree child of pos with this token, else a new one (-1 when the
 * budget of n_tree nodes is spent). */
static int tree_child(spec_ngram *t, int pos, int32_t token, int *n_tree, int budget)
{
    for (int c = t->tree[pos].first; c >= 0; c = t->tree[c].next)
        if (t->tree[c].token == token) return c;
    if (*n_tree > budget) return -1;
    int c = (*n_tree)++;
    t->tree[c] = (tnode){.token = token, .first = -1, .last = -1, .next = -1};
    if (t->tree[pos].last < 0) t->tree[pos].first = c;
    else t->tree[t->tree[pos].last].next = c;
    t->tree[pos].last = c;
    return c;
}

/* The top-k children of trie node x, best first: by recency (BFS) or by
 * freq, ties by recency (PROB).  Returns how many (<= k). */
static int top_children(const spec_ngram *t, uint32_t x, int k, bool by_freq, uint32_t *out)
{
    int n = 0;
    for (uint32_t c = t->nodes[x].child; c != NIL; c = t->nodes[c].sib_next) {
        const ng_node *cn = &t->nodes[c];
        int i = n < k ? n++ : k;
        /* insertion: shift worse entries down */
        while (i > 0) {
            const ng_node *o = &t->nodes[out[i - 1]];
            bool better = by_freq ? (cn->freq > o->freq || (cn->freq == o->freq && cn->stamp > o->stamp))
                                  : cn->stamp > o->stamp;
            if (!better) break;
            if (i < k) out[i] = out[i - 1];
            i--;
        }
        if (i < k) out[i] = c;
    }
    return n;
}

static int heap_push(spec_ngram *t, int *n, heap_item it)
{
    if (*n == t->cap_heap) {
        int nc = t->cap_heap ? t->cap_heap * 2 : 64;
        heap_item *a = realloc(t->heap, sizeof(heap_item) * (size_t)nc);
        if (!a) return -1;
        t->heap = a;
        t->cap_heap = nc;
    }
    int i = (*n)++;
    while (i > 0 && t->heap[(i - 1) / 2].prob < it.prob) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = it;
    return 0;
}

static heap_item heap_pop(spec_ngram *t, int *n)
{
    heap_item top = t->heap[0], last = t->heap[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && t->heap[c + 1].prob > t->heap[c].prob) c++;
        if (t->heap[c].prob <= last.prob) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (*n > 0) t->heap[i] = last;
    return top;
}

static int add_children(spec_ngram *t, int *nh, int pos, uint32_t x, double prob)
{
    uint32_t kids[MAX_BREADTH];
    int k = top_children(t, x, t->p.max_bfs_breadth, true, kids);
    double sum = 0;
    for (int i = 0; i < k; i++) sum += (double)t->nodes[kids[i]].freq;
    if (sum <= 0) sum = 1.0;
    for (int i = 0; i < k; i++)
        if (heap_push(t, nh, (heap_item){.prob = (double)t->nodes[kids[i]].freq / sum * prob, .pos = pos, .node = kids[i]}))
            return -1;
    return 0;
}

static int draft_impl(spec_ngram *t, const spec_ngram_cursor *cu, const int32_t *seq, int64_t len, int32_t *draft,
                      int32_t *parent, int max_draft)
{
    if (max_draft <= 0 || len <= 0) return 0;
    if (tree_reserve(t, max_draft + 1)) return 0;
    const spec_ngram_params *p = &t->p;
    /* anchors: the longest windows first */
    uint32_t anchor[256];
    int depth[256], n_anchor = 0;
    int wmax = (int)(len < p->max_match_window ? len : p->max_match_window);
    for (int w = wmax; w >= p->min_match_window && n_anchor < 256; w--) {
        uint32_t cur = NIL;
        if (cu && cu->len == len) { /* the path from position len - w ends at the window's node */
            int64_t r = (len - w) % p->max_trie_depth;
            if (ref_ok(t, cu->node[r], cu->gen[r])) cur = cu->node[r];
        }
        if (cur == NIL) {
            cur = 0;
            for (int64_t i = len - w; i < len && cur != NIL; i++) cur = ht_find(t, cur, seq[i]);
        }
        if (cur != NIL && t->nodes[cur].child != NIL) {
            anchor[n_anchor] = cur;
            depth[n_anchor++] = w;
        }
    }
    if (!n_anchor) return 0;
    t->tree[0] = (tnode){.token = seq[len - 1], .first = -1, .last = -1, .next = -1};
    int n_tree = 1, budget = max_draft;
    if (p->match_type == SPEC_MATCH_BFS) {
        double scale = (double)(p->max_bfs_breadth - p->min_bfs_breadth) /
                       (double)(p->max_match_window - p->min_match_window + 1);
        for (int a = 0; a < n_anchor && n_tree <= budget; a++) {
            int qh = 0, qt = 0;
            t->queue[qt++] = (bfs_item){0, (p->max_match_window - depth[a]) * scale + p->min_bfs_breadth, anchor[a]};
            while (qh < qt && n_tree <= budget) {
                bfs_item it = t->queue[qh++];
                int b = (int)it.breadth;
                if (b < 1) b = 1;
                if (b > MAX_BREADTH) b = MAX_BREADTH;
                uint32_t kids[MAX_BREADTH];
                int k = top_children(t, it.node, b, false, kids);
                for (int i = 0; i < k && n_tree <= budget; i++) {
                    int pos = tree_child(t, it.pos, t->nodes[kids[i]].token, &n_tree, budget);
                    if (pos < 0) break;
                    if (qt <= t->cap_tree) t->queue[qt++] = (bfs_item){pos, it.breadth - scale, kids[i]};
                }
            }
        }
    } else {
        int nh = 0;
        long guard = 16L * (budget + 1) * (p->max_bfs_breadth + 1) * (n_anchor + 1);
        for (int a = 0; a < n_anchor && n_tree <= budget; a++) {
            if (add_children(t, &nh, 0, anchor[a], 1.0)) break;
            while (nh > 0 && n_tree <= budget && guard-- > 0) {
                heap_item it = heap_pop(t, &nh);
                int pos = tree_child(t, it.pos, t->nodes[it.node].token, &n_tree, budget);
                if (pos < 0) break;
                if (add_children(t, &nh, pos, it.node, it.prob)) break;
            }
        }
    }
    if (parent) { /* the whole tree, in build order (a parent before its children) */
        for (int pos = 0; pos < n_tree; pos++)
            for (int c = t->tree[pos].first; c >= 0; c = t->tree[c].next) parent[c - 1] = pos - 1;
        for (int c = 1; c < n_tree; c++) draft[c - 1] = t->tree[c].token;
        return n_tree - 1;
    }
    /* the chain: the first-added child at every level */
    int n = 0;
    for (int pos = t->tree[0].first; pos >= 0 && n < max_draft; pos = t->tree[pos].first) draft[n++] = t->tree[pos].token;
    return n;
}

int spec_ngram_draft(spec_ngram *t, const int32_t *seq, int64_t len, int32_t *draft, int max_draft)
{
    return draft_impl(t, NULL, seq, len, draft, NULL, max_draft);
}

int spec_ngram_draft_cursor(spec_ngram *t, const spec_ngram_cursor *c, const int32_t *seq, int64_t len,
                            int32_t *draft, int max_draft)
{
    return draft_impl(t, c, seq, len, draft, NULL, max_draft);
}

int spec_ngram_draft_tree(spec_ngram *t, const spec_ngram_cursor *c, const int32_t *seq, int64_t len, int32_t *draft,
                          int32_t *parent, int max_draft)
{
    return draft_impl(t, c, seq, len, draft, parent, max_draft);
}
