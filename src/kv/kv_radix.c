/* kv_radix — see kv_radix.h for the design and the diagram.
 *
 * Node memory: one allocation per node holds its token run followed by
 * its page ids, [tokens (n) | pages (n / P)].  A split moves the tail of
 * that buffer down in place and gives the new parent a fresh buffer.
 * Walks are iterative (a long chain of nodes must not overflow the C
 * stack). */
#include "kv/kv_radix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct kv_radix_node {
    kv_radix_node *parent;   /* borrowed; NULL for the root */
    int32_t *tokens;         /* (n_tokens) owned, same allocation as pages */
    int32_t *pages;          /* (n_tokens / page_size) page ids, inside tokens' buffer */
    int64_t n_tokens;
    int32_t lock_ref;
    uint64_t last_access;    /* logical clock of the last touch */
    uint64_t hit_count;      /* LFU */
    uint64_t ns_hash;        /* hash of the isolation key of this subtree */
    uint64_t key_hash;       /* hash(ns, first page): slot key in parent's table */
    char *ns;                /* owned; set on children of the root only (NULL = no key) */
    kv_radix_node **tab;     /* (tab_cap) child table, open addressing; owned; NULL if never had children */
    uint32_t tab_cap;        /* power of two or 0 */
    uint32_t n_children;
    int64_t leaf_idx;        /* index in kv_radix.leaves, -1 when not an evictable leaf */
    int32_t state;           /* checkpoint state id at this node's end (hybrid models), -1 none */
    int64_t state_idx;       /* index in kv_radix.stated, -1 when state < 0 */
};

struct kv_radix {
    kv_pool *pool;           /* borrowed */
    int page_size;
    kv_evict_policy policy;
    bool disable;
    kv_radix_node *root;     /* owned */
    uint64_t clock;
    int64_t evictable;       /* tokens in unlocked nodes */
    int64_t protected_;      /* tokens in locked nodes */
    int64_t n_nodes;         /* excluding the root */
    kv_radix_node **leaves;  /* (leaves_cap) evictable leaves, unordered; owned array */
    int64_t n_leaves, leaves_cap;
    kv_radix_node **heap;    /* (heap_cap) eviction scratch; owned */
    int64_t heap_cap;
    int32_t *path;           /* (path_cap) scratch for the eviction callback; owned */
    int64_t path_cap;
    kv_radix_evict_cb cb;
    void *cb_ctx;
    kv_radix_node **stated;  /* (stated_cap) nodes holding a state, unordered; owned array */
    int64_t n_stated, stated_cap;
    kv_radix_state_free_fn state_free; /* gives a dropped state back (its owner's pool) */
    void *state_ctx;
};

/* ------------------------------------------------------------ hashing */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t ns_hash_of(const char *ns)
{
    if (!ns) return 0;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *s = (const unsigned char *)ns; *s; s++) h = (h ^ *s) * 0x100000001b3ULL;
    return mix64(h) | 1; /* never 0, which is "no key" */
}

/* Hash of a child key: the isolation key and the first page's tokens (at
 * most its first 8: siblings that agree on 8 tokens but differ later in
 * the page just share a probe sequence; lookups always confirm by
 * comparing the whole page). */
static uint64_t key_hash_of(uint64_t ns_hash, const int32_t *tok, int P)
{
    uint64_t h = ns_hash ^ 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < P && i < 8; i++) h = mix64(h + (uint32_t)tok[i]);
    return h;
}

static bool ns_equal(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

/* ------------------------------------------------------------ child table */

static kv_radix_node *tab_find(const kv_radix_node *node, uint64_t h, const char *ns,
                               const int32_t *first, int P, bool at_root)
{
    if (!node->tab) return NULL;
    uint32_t mask = node->tab_cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        kv_radix_node *c = node->tab[i];
        if (!c) return NULL;
        if (c->key_hash == h && memcmp(c->tokens, first, (size_t)P * sizeof *first) == 0 &&
            (!at_root || ns_equal(c->ns, ns)))
            return c;
    }
}

static void tab_place(kv_radix_node **tab, uint32_t cap, kv_radix_node *c)
{
    uint32_t mask = cap - 1, i = (uint32_t)c->key_hash & mask;
    while (tab[i]) i = (i + 1) & mask;
    tab[i] = c;
}

static int tab_insert(kv_radix_node *node, kv_radix_node *c)
{
    if ((node->n_children + 1) * 2 > node->tab_cap) {
        uint32_t cap = node->tab_cap ? node->tab_cap * 2 : 4;
        kv_radix_node **tab = calloc(cap, sizeof *tab);
        if (!tab) return -1;
        for (uint32_t i = 0; i < node->tab_cap; i++)
            if (node->tab[i]) tab_place(tab, cap, node->tab[i]);
        free(node->tab);
        node->tab = tab;
        node->tab_cap = cap;
    }
    tab_place(node->tab, node->tab_cap, c);
    node->n_children++;
    return 0;
}

static uint32_t tab_slot_of(const kv_radix_node *node, const kv_radix_node *c)
{
    uint32_t mask = node->tab_cap - 1;
    uint32_t i = (uint32_t)c->key_hash & mask;
    while (node->tab[i] != c) {
        SGLC_ASSERT(node->tab[i] != NULL);
        i = (i + 1) & mask;
    }
    return i;
}

/* Linear probing deletion by backward shift: no tombstones. */
static void tab_remove(kv_radix_node *node, kv_radix_node *c)
{
    uint32_t mask = node->tab_cap - 1;
    uint32_t hole = tab_slot_of(node, c);
    node->tab[hole] = NULL;
    for (uint32_t k = (hole + 1) & mask; node->tab[k]; k = (k + 1) & mask) {
        uint32_t home = (uint32_t)node->tab[k]->key_hash & mask;
        if (((k - home) & mask) >= ((k - hole) & mask)) {
            node->tab[hole] = node->tab[k];
            node->tab[k] = NULL;
            hole = k;
        }
    }
    node->n_children--;
}

/* ------------------------------------------------------------ leaves */

static void leaves_add(kv_radix *t, kv_radix_node *n)
{
    if (t->n_leaves == t->leaves_cap) {
        int64_t cap = t->leaves_cap ? t->leaves_cap * 2 : 64;
        kv_radix_node **a = realloc(t->leaves, (size_t)cap * sizeof *a);
        SGLC_ASSERT(a != NULL); /* a few pointers; failing here means the process is lost */
        t->leaves = a;
        t->leaves_cap = cap;
    }
    n->leaf_idx = t->n_leaves;
    t->leaves[t->n_leaves++] = n;
}

static void leaves_del(kv_radix *t, kv_radix_node *n)
{
    kv_radix_node *last = t->leaves[--t->n_leaves];
    t->leaves[n->leaf_idx] = last;
    last->leaf_idx = n->leaf_idx;
    n->leaf_idx = -1;
}

static void update_leaf(kv_radix *t, kv_radix_node *n)
{
    bool want = n != t->root && n->lock_ref == 0 && n->n_children == 0;
    if (want && n->leaf_idx < 0) leaves_add(t, n);
    else if (!want && n->leaf_idx >= 0) leaves_del(t, n);
}

/* ------------------------------------------------------------ states */

static int stated_add(kv_radix *t, kv_radix_node *n)
{
    if (t->n_stated == t->stated_cap) {
        int64_t cap = t->stated_cap ? t->stated_cap * 2 : 16;
        kv_radix_node **a = realloc(t->stated, (size_t)cap * sizeof *a);
        if (!a) return -1;
        t->stated = a;
        t->stated_cap = cap;
    }
    n->state_idx = t->n_stated;
    t->stated[t->n_stated++] = n;
    return 0;
}

/* Drop n's state (if any), giving it back through the free hook. */
static void drop_state(kv_radix *t, kv_radix_node *n)
{
    if (n->state < 0) return;
    kv_radix_node *last = t->stated[--t->n_stated];
    t->stated[n->state_idx] = last;
    last->state_idx = n->state_idx;
    n->state_idx = -1;
    int32_t id = n->state;
    n->state = -1;
    if (t->state_free) t->state_free(t->state_ctx, id);
}

/* ------------------------------------------------------------ nodes */

static kv_radix_node *node_new(int64_t n_tokens, int P)
{
    kv_radix_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    size_t words = (size_t)n_tokens + (size_t)(n_tokens / P);
    n->tokens = malloc((words ? words : 1) * sizeof(int32_t));
    if (!n->tokens) {
        free(n);
        return NULL;
    }
    n->pages = n->tokens + n_tokens;
    n->n_tokens = n_tokens;
    n->leaf_idx = -1;
    n->state = -1;
    n->state_idx = -1;
    return n;
}

static void node_free(kv_radix_node *n)
{
    free(n->tokens);
    free(n->tab);
    free(n->ns);
    free(n);
}

/* Split `c` after m tokens (0 < m < len, a page multiple):
 *   parent -> c[0..len)   becomes   parent -> nn[0..m) -> c[m..len)
 * nn takes c's place in the parent's table (same first page, same key),
 * c's lock and stats.  Returns nn, or NULL when out of memory (tree
 * unchanged). */
static kv_radix_node *split(kv_radix *t, kv_radix_node *c, int64_t m)
{
    int P = t->page_size;
    kv_radix_node *nn = node_new(m, P);
    if (!nn) return NULL;
    nn->tab = calloc(4, sizeof *nn->tab); /* allocate before touching c: failure leaves c intact */
    if (!nn->tab) {
        node_free(nn);
        return NULL;
    }
    nn->tab_cap = 4;
    memcpy(nn->tokens, c->tokens, (size_t)m * sizeof(int32_t));
    memcpy(nn->pages, c->pages, (size_t)(m / P) * sizeof(int32_t));
    nn->parent = c->parent;
    nn->lock_ref = c->lock_ref;
    nn->last_access = c->last_access;
    nn->hit_count = c->hit_count;
    nn->ns_hash = c->ns_hash;
    nn->key_hash = c->key_hash;
    nn->ns = c->ns;
    c->ns = NULL;
    c->parent->tab[tab_slot_of(c->parent, c)] = nn;

    /* Shift c's buffer: [tok(len) | pg(len/P)] -> [tok[m..) | pg[m/P..)]. */
    int64_t len = c->n_tokens, rest = len - m;
    memmove(c->tokens, c->tokens + m, (size_t)rest * sizeof(int32_t));
    memmove(c->tokens + rest, c->pages + m / P, (size_t)(rest / P) * sizeof(int32_t));
    c->pages = c->tokens + rest;
    c->n_tokens = rest;
    c->parent = nn;
    c->key_hash = key_hash_of(c->ns_hash, c->tokens, P);
    tab_place(nn->tab, nn->tab_cap, c);
    nn->n_children = 1;
    t->n_nodes++;
    return nn;
}

/* ------------------------------------------------------------ public */

int kv_evict_policy_parse(const char *name)
{
    if (!name) return -1;
    if (strcmp(name, "lru") == 0) return KV_EVICT_LRU;
    if (strcmp(name, "lfu") == 0) return KV_EVICT_LFU;
    return -1;
}

const char *kv_evict_policy_name(kv_evict_policy p) { return p == KV_EVICT_LFU ? "lfu" : "lru"; }

kv_radix *kv_radix_create(kv_pool *pool, kv_evict_policy policy, bool disable)
{
    if (!pool || (policy != KV_EVICT_LRU && policy != KV_EVICT_LFU)) {
        log_error("bad arguments (pool=%p policy=%d)", (void *)pool, (int)policy);
        return NULL;
    }
    kv_radix *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->pool = pool;
    t->page_size = kv_pool_page_size(pool);
    t->policy = policy;
    t->disable = disable;
    t->root = node_new(0, t->page_size);
    if (!t->root) {
        free(t);
        return NULL;
    }
    t->root->lock_ref = 1;
    return t;
}

/* Free every node below the root and give their pages back to the pool.
 * Iterative with an explicit stack of at most n_nodes entries: O(nodes),
 * also for a root with 10^5 children. */
static void free_subtrees(kv_radix *t)
{
    kv_radix_node *root = t->root;
    kv_radix_node **stack = malloc((size_t)(t->n_nodes > 0 ? t->n_nodes : 1) * sizeof *stack);
    if (!stack) { /* fall back: one leaf at a time, slow but needs no memory */
        while (root->n_children) {
            kv_radix_node *n = root;
            while (n->n_children) {
                uint32_t i = 0;
                while (!n->tab[i]) i++;
                n = n->tab[i];
            }
            if (kv_pool_free(t->pool, n->pages, n->n_tokens / t->page_size) != 0)
                log_error("tree held pages the pool does not consider in use");
            drop_state(t, n);
            tab_remove(n->parent, n);
            node_free(n);
        }
    } else {
        int64_t sp = 0;
        for (uint32_t i = 0; i < root->tab_cap; i++)
            if (root->tab[i]) stack[sp++] = root->tab[i];
        while (sp > 0) {
            kv_radix_node *n = stack[--sp];
            for (uint32_t i = 0; i < n->tab_cap; i++)
                if (n->tab[i]) stack[sp++] = n->tab[i];
            if (kv_pool_free(t->pool, n->pages, n->n_tokens / t->page_size) != 0)
                log_error("tree held pages the pool does not consider in use");
            drop_state(t, n);
            node_free(n);
        }
        free(stack);
        if (root->tab) memset(root->tab, 0, root->tab_cap * sizeof *root->tab);
        root->n_children = 0;
    }
    t->evictable = t->protected_ = 0;
    t->n_nodes = 0;
    t->n_leaves = 0;
}

void kv_radix_destroy(kv_radix *t)
{
    if (!t) return;
    if (t->protected_ > 0) log_error("destroying the radix tree with %lld locked tokens", (long long)t->protected_);
    free_subtrees(t);
    node_free(t->root);
    free(t->leaves);
    free(t->heap);
    free(t->path);
    free(t->stated);
    free(t);
}

int kv_radix_reset(kv_radix *t)
{
    if (t->protected_ > 0) {
        log_error("cannot flush the radix cache: %lld tokens are locked by running requests",
                  (long long)t->protected_);
        return -1;
    }
    free_subtrees(t);
    return 0;
}

bool kv_radix_disabled(const kv_radix *t) { return t->disable; }
int kv_radix_page_size(const kv_radix *t) { return t->page_size; }
kv_radix_node *kv_radix_root(kv_radix *t) { return t->root; }

kv_radix_node *kv_radix_node_parent(const kv_radix_node *n) { return n ? n->parent : NULL; }
int64_t kv_radix_evictable_size(const kv_radix *t) { return t->evictable; }
int64_t kv_radix_protected_size(const kv_radix *t) { return t->protected_; }
int64_t kv_radix_total_size(const kv_radix *t) { return t->evictable + t->protected_; }
int64_t kv_radix_available_tokens(const kv_radix *t) { return kv_pool_free_tokens(t->pool) + t->evictable; }
int64_t kv_radix_n_nodes(const kv_radix *t) { return t->n_nodes; }

void kv_radix_set_evict_cb(kv_radix *t, kv_radix_evict_cb cb, void *ctx)
{
    t->cb = cb;
    t->cb_ctx = ctx;
}

/* How many tokens of run a[0..alen) and b[0..blen) agree in whole pages:
 * the first differing token, rounded down to a page boundary.  Compares
 * 8 tokens at a time (a fixed-size memcmp compiles to two loads). */
static int64_t page_prefix(const int32_t *a, int64_t alen, const int32_t *b, int64_t blen, int P)
{
    int64_t lim = alen < blen ? alen : blen, i = 0;
    lim = lim / P * P;
    while (i + 8 <= lim && memcmp(a + i, b + i, 8 * sizeof(int32_t)) == 0) i += 8;
    while (i < lim && a[i] == b[i]) i++;
    return i / P * P;
}

static int64_t match_impl(kv_radix *t, const char *ns, const int32_t *tokens, int64_t n,
                          int32_t *pages_out, kv_radix_node **last_node, bool count_hit)
{
    uint64_t now = ++t->clock;
    int P = t->page_size;
    kv_radix_node *node = t->root;
    int64_t pos = 0;
    if (!t->disable && tokens && n >= P) {
        n = n / P * P;
        uint64_t nsh = ns_hash_of(ns);
        while (pos < n) {
            uint64_t h = key_hash_of(nsh, tokens + pos, P);
            kv_radix_node *c = tab_find(node, h, ns, tokens + pos, P, node == t->root);
            if (!c) break;
            int64_t m = page_prefix(c->tokens, c->n_tokens, tokens + pos, n - pos, P);
            bool partial = m < c->n_tokens;
            if (partial) {
                kv_radix_node *nn = split(t, c, m);
                if (!nn) { /* out of memory: report what fully matched so far */
                    log_error("out of memory splitting a radix node");
                    break;
                }
                c = nn;
            }
            c->last_access = now;
            if (count_hit) c->hit_count++;
            if (pages_out) memcpy(pages_out + pos / P, c->pages, (size_t)(m / P) * sizeof(int32_t));
            pos += m;
            node = c;
            if (partial) break;
        }
    }
    if (last_node) *last_node = node;
    return pos;
}

int64_t kv_radix_match(kv_radix *t, const char *ns, const int32_t *tokens, int64_t n,
                       int32_t *pages_out, kv_radix_node **last_node)
{
    return match_impl(t, ns, tokens, n, pages_out, last_node, true);
}

int64_t kv_radix_insert(kv_radix *t, const char *ns, const int32_t *tokens, const int32_t *pages,
                        int64_t n, bool chunked)
{
    uint64_t now = ++t->clock;
    int P = t->page_size;
    if (t->disable || !tokens || n < P) return 0;
    n = n / P * P;
    uint64_t nsh = ns_hash_of(ns);
    kv_radix_node *node = t->root;
    int64_t pos = 0;
    while (pos < n) {
        uint64_t h = key_hash_of(nsh, tokens + pos, P);
        kv_radix_node *c = tab_find(node, h, ns, tokens + pos, P, node == t->root);
        if (!c) break;
        int64_t m = page_prefix(c->tokens, c->n_tokens, tokens + pos, n - pos, P);
        if (m < c->n_tokens) {
            kv_radix_node *nn = split(t, c, m);
            if (!nn) { /* claim everything cached: the caller frees its pages, nothing leaks */
                log_error("out of memory splitting a radix node; %lld tokens not cached",
                          (long long)(n - pos));
                return n;
            }
            c = nn;
        }
        c->last_access = now;
        if (!chunked) c->hit_count++;
        pos += m;
        node = c;
    }
    if (pos < n) {
        kv_radix_node *leaf = node_new(n - pos, P);
        if (!leaf || (node == t->root && ns && !(leaf->ns = strdup(ns)))) {
            if (leaf) node_free(leaf);
            log_error("out of memory adding a radix node; %lld tokens not cached", (long long)(n - pos));
            return n; /* the caller frees the pages as duplicates: nothing leaks */
        }
        memcpy(leaf->tokens, tokens + pos, (size_t)(n - pos) * sizeof(int32_t));
        memcpy(leaf->pages, pages + pos / P, (size_t)((n - pos) / P) * sizeof(int32_t));
        leaf->parent = node;
        leaf->ns_hash = nsh;
        leaf->key_hash = key_hash_of(nsh, leaf->tokens, P);
        leaf->last_access = now;
        if (tab_insert(node, leaf) != 0) {
            node_free(leaf);
            log_error("out of memory adding a radix node; %lld tokens not cached", (long long)(n - pos));
            return n;
        }
        t->evictable += n - pos;
        t->n_nodes++;
        update_leaf(t, node);
        update_leaf(t, leaf);
    }
    return pos;
}

void kv_radix_lock(kv_radix *t, kv_radix_node *node)
{
    if (t->disable || !node) return;
    for (; node != t->root; node = node->parent) {
        if (node->lock_ref == 0) {
            t->evictable -= node->n_tokens;
            t->protected_ += node->n_tokens;
        }
        node->lock_ref++;
        update_leaf(t, node);
    }
}

void kv_radix_unlock(kv_radix *t, kv_radix_node *node)
{
    if (t->disable || !node) return;
    for (kv_radix_node *n = node; n != t->root; n = n->parent)
        if (n->lock_ref <= 0) {
            log_error("unlock of an unlocked radix node (lock_ref %d): ignored", n->lock_ref);
            return;
        }
    for (; node != t->root; node = node->parent) {
        if (node->lock_ref == 1) {
            t->evictable += node->n_tokens;
            t->protected_ -= node->n_tokens;
        }
        node->lock_ref--;
        update_leaf(t, node);
    }
}

/* Eviction order: true when a should go before b. */
static bool evict_before(const kv_radix *t, const kv_radix_node *a, const kv_radix_node *b)
{
    if (t->policy == KV_EVICT_LFU && a->hit_count != b->hit_count) return a->hit_count < b->hit_count;
    return a->last_access < b->last_access;
}

static void heap_sift_down(const kv_radix *t, kv_radix_node **h, int64_t n, int64_t i)
{
    while (true) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && evict_before(t, h[l], h[m])) m = l;
        if (r < n && evict_before(t, h[r], h[m])) m = r;
        if (m == i) return;
        kv_radix_node *x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
}

static void heap_sift_up(const kv_radix *t, kv_radix_node **h, int64_t i)
{
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!evict_before(t, h[i], h[p])) return;
        kv_radix_node *x = h[i];
        h[i] = h[p];
        h[p] = x;
        i = p;
    }
}

static void report_eviction(kv_radix *t, kv_radix_node *x)
{
    int64_t len = 0;
    const kv_radix_node *d1 = x;
    for (const kv_radix_node *n = x; n != t->root; n = n->parent) {
        len += n->n_tokens;
        if (n->parent == t->root) d1 = n;
    }
    if (len > t->path_cap) {
        int32_t *p = realloc(t->path, (size_t)len * sizeof *p);
        if (!p) {
            log_error("out of memory reporting an eviction");
            return;
        }
        t->path = p;
        t->path_cap = len;
    }
    int64_t end = len;
    for (const kv_radix_node *n = x; n != t->root; n = n->parent) {
        end -= n->n_tokens;
        memcpy(t->path + end, n->tokens, (size_t)n->n_tokens * sizeof(int32_t));
    }
    t->cb(t->cb_ctx, d1->ns, t->path, len, x->n_tokens, x->pages);
}

/* Remove the evictable leaf x: its pages back to the pool, its state
 * through the free hook.  Returns its parent (leaf status updated). */
static kv_radix_node *evict_leaf(kv_radix *t, kv_radix_node *x)
{
    if (t->cb) report_eviction(t, x);
    if (kv_pool_free(t->pool, x->pages, x->n_tokens / t->page_size) != 0)
        log_error("evicted radix node held pages the pool does not consider in use");
    kv_radix_node *p = x->parent;
    tab_remove(p, x);
    t->evictable -= x->n_tokens;
    leaves_del(t, x);
    drop_state(t, x);
    node_free(x);
    t->n_nodes--;
    update_leaf(t, p);
    return p;
}

int64_t kv_radix_evict(kv_radix *t, int64_t n_tokens)
{
    if (t->disable || n_tokens <= 0 || t->n_leaves == 0) return 0;
    /* The heap holds at most every leaf plus parents that become leaves:
     * bounded by the node count. */
    if (t->heap_cap < t->n_nodes) {
        kv_radix_node **h = realloc(t->heap, (size_t)t->n_nodes * sizeof *h);
        if (!h) {
            log_error("out of memory for the eviction heap");
            return 0;
        }
        t->heap = h;
        t->heap_cap = t->n_nodes;
    }
    kv_radix_node **h = t->heap;
    int64_t hn = t->n_leaves;
    memcpy(h, t->leaves, (size_t)hn * sizeof *h);
    for (int64_t i = hn / 2 - 1; i >= 0; i--) heap_sift_down(t, h, hn, i);

    int64_t freed = 0;
    while (freed < n_tokens && hn > 0) {
        kv_radix_node *x = h[0];
        h[0] = h[--hn];
        heap_sift_down(t, h, hn, 0);
        freed += x->n_tokens;
        kv_radix_node *p = evict_leaf(t, x);
        if (p->leaf_idx >= 0) {
            h[hn++] = p;
            heap_sift_up(t, h, hn - 1);
        }
    }
    return freed;
}

/* ------------------------------------------------------------ states (hybrid models) */

void kv_radix_set_state_free(kv_radix *t, kv_radix_state_free_fn fn, void *ctx)
{
    t->state_free = fn;
    t->state_ctx = ctx;
}

int32_t kv_radix_node_state(const kv_radix_node *n) { return n ? n->state : -1; }
int64_t kv_radix_n_states(const kv_radix *t) { return t->n_stated; }

int kv_radix_node_set_state(kv_radix *t, kv_radix_node *n, int32_t state)
{
    if (!n || n == t->root || state < 0 || t->disable) return -1;
    if (n->state >= 0) return 1;
    n->state = state;
    if (stated_add(t, n)) {
        n->state = -1;
        log_error("out of memory recording a radix checkpoint state");
        return -1;
    }
    return 0;
}

/* The deepest node holding a state on the path root .. last, whose end
 * is at depth `depth` (last's): its depth and the node (root: 0). */
static int64_t deepest_state(kv_radix *t, kv_radix_node *last, int64_t depth, kv_radix_node **node)
{
    kv_radix_node *n = last;
    while (n != t->root && n->state < 0) {
        depth -= n->n_tokens;
        n = n->parent;
    }
    *node = n;
    return depth;
}

int64_t kv_radix_match_state(kv_radix *t, const char *ns, const int32_t *tokens, int64_t n,
                             kv_radix_node **node, int32_t *state)
{
    kv_radix_node *last = NULL, *sn = NULL;
    int64_t m = kv_radix_match(t, ns, tokens, n, NULL, &last);
    int64_t d = deepest_state(t, last, m, &sn);
    if (node) *node = sn;
    if (state) *state = sn->state;
    return d;
}

int64_t kv_radix_req_match_state(kv_radix *t, kv_radix_req *req, const int32_t *tokens, int64_t n,
                                 int32_t *pages_out, int32_t *state)
{
    kv_radix_node *last = NULL, *sn = NULL;
    int64_t m = kv_radix_match(t, req->ns, tokens, n, pages_out, &last);
    int64_t d = deepest_state(t, last, m, &sn);
    kv_radix_lock(t, sn);
    req->last_node = sn;
    req->protected_len = d;
    if (state) *state = sn->state;
    return d;
}

int kv_radix_evict_states(kv_radix *t, int n, int32_t keep)
{
    int dropped = 0;
    while (dropped < n) {
        kv_radix_node *x = NULL;
        for (int64_t i = 0; i < t->n_stated; i++) {
            kv_radix_node *c = t->stated[i];
            if (c->state != keep && (!x || evict_before(t, c, x))) x = c;
        }
        if (!x) break;
        drop_state(t, x);
        dropped++;
        /* a leaf without a state is KV nothing can resume from: it goes
         * too, and so do parents that become such leaves */
        while (x != t->root && x->leaf_idx >= 0 && x->state < 0) x = evict_leaf(t, x);
    }
    return dropped;
}

/* ------------------------------------------------------------ request level */

static int free_range(kv_radix *t, const int32_t *pages, int64_t from, int64_t to)
{
    if (to <= from) return 0;
    return kv_pool_free(t->pool, pages + from, to - from);
}

int64_t kv_radix_req_match(kv_radix *t, kv_radix_req *req, const int32_t *tokens, int64_t n,
                           int32_t *pages_out)
{
    kv_radix_node *last = NULL;
    int64_t m = kv_radix_match(t, req->ns, tokens, n, pages_out, &last);
    kv_radix_lock(t, last);
    req->last_node = last;
    req->protected_len = m;
    return m;
}

int kv_radix_req_cache_unfinished(kv_radix *t, kv_radix_req *req, const int32_t *tokens,
                                  int64_t n, int32_t *pages)
{
    if (t->disable) return 0;
    int P = t->page_size;
    int64_t aligned = n / P * P;
    if (aligned < req->protected_len) {
        log_error("request KV (%lld tokens) shorter than its cached prefix (%lld)", (long long)n,
                  (long long)req->protected_len);
        return -1;
    }
    int64_t prefix = kv_radix_insert(t, req->ns, tokens, pages, aligned, true);
    if (prefix < req->protected_len) {
        log_error("insert found %lld cached tokens but the request locks %lld", (long long)prefix,
                  (long long)req->protected_len);
        return -1;
    }
    if (free_range(t, pages, req->protected_len / P, prefix / P) != 0) return -1;
    kv_radix_node *last = NULL;
    int64_t m = match_impl(t, req->ns, tokens, aligned, pages, &last, false);
    if (m != aligned) {
        log_error("re-match after insert found %lld of %lld tokens", (long long)m, (long long)aligned);
        return -1;
    }
    kv_radix_lock(t, last);
    if (req->last_node) kv_radix_unlock(t, req->last_node);
    req->last_node = last;
    req->protected_len = aligned;
    return 0;
}

int kv_radix_req_cache_finished(kv_radix *t, kv_radix_req *req, const int32_t *tokens, int64_t n,
                                int32_t *pages, bool insert)
{
    int P = t->page_size;
    int64_t aligned = n / P * P, n_pages = (n + P - 1) / P;
    int rc = 0;
    if (n < req->protected_len) {
        log_error("request KV (%lld tokens) shorter than its cached prefix (%lld)", (long long)n,
                  (long long)req->protected_len);
        return -1;
    }
    int64_t own = req->protected_len / P; /* first page the request owns */
    if (!t->disable) {
        /* insert: duplicates [protected, prefix) go back, [prefix, aligned)
         * are now the tree's; no insert: [protected, aligned) go back */
        int64_t upto = aligned;
        if (insert) {
            upto = kv_radix_insert(t, req->ns, tokens, pages, aligned, false);
            if (upto < req->protected_len) {
                log_error("insert found %lld cached tokens but the request locks %lld",
                          (long long)upto, (long long)req->protected_len);
                rc = -1;
            }
        }
        if (free_range(t, pages, own, upto / P) != 0) rc = -1;
    }
    /* the rest: in disable mode everything, else the partial tail page */
    int64_t from = t->disable ? 0 : aligned / P;
    if (free_range(t, pages, from, n_pages) != 0) rc = -1;
    if (req->last_node) kv_radix_unlock(t, req->last_node);
    req->last_node = NULL;
    req->protected_len = 0;
    return rc;
}

/* ------------------------------------------------------------ checks */

int kv_radix_check_leak(const kv_radix *t, char *err, size_t errlen)
{
    int64_t cap = kv_pool_capacity_tokens(t->pool);
    int64_t avail = kv_pool_free_tokens(t->pool) + t->evictable;
    if (avail == cap && t->protected_ == 0) return 0;
    if (err && errlen)
        snprintf(err, errlen,
                 "KV cache pool leak detected! diff=%lld (pool available %lld + tree evictable %lld "
                 "tokens, protected_size=%lld, max_total_num_tokens=%lld)",
                 (long long)(avail - cap), (long long)kv_pool_free_tokens(t->pool),
                 (long long)t->evictable, (long long)t->protected_, (long long)cap);
    return -1;
}

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
            rc = -1;                                       \
            goto out;                                      \
        }                                                  \
    } while (0)

int kv_radix_check(const kv_radix *t, char *err, size_t errlen)
{
    int rc = 0, P = t->page_size;
    int64_t n_pages = kv_pool_n_pages(t->pool);
    uint8_t *seen = calloc((size_t)n_pages, 1);
    int64_t cap = 64, sp = 0;
    const kv_radix_node **stack = malloc((size_t)cap * sizeof *stack);
    int64_t evictable = 0, protected_ = 0, nodes = 0, leaves = 0, states = 0;
    CHECK(seen && stack, "out of memory");
    CHECK(t->root->lock_ref == 1 && t->root->n_tokens == 0 && t->root->leaf_idx < 0, "root corrupted");
    stack[sp++] = t->root;
    while (sp > 0) {
        const kv_radix_node *n = stack[--sp];
        uint32_t kids = 0;
        for (uint32_t i = 0; i < n->tab_cap; i++) {
            const kv_radix_node *c = n->tab[i];
            if (!c) continue;
            kids++;
            nodes++;
            CHECK(c->parent == n, "child's parent pointer is wrong");
            CHECK(c->n_tokens > 0 && c->n_tokens % P == 0, "node length %lld is not a positive multiple of page_size %d",
                  (long long)c->n_tokens, P);
            CHECK(c->pages == c->tokens + c->n_tokens, "node pages pointer is wrong");
            CHECK(c->lock_ref >= 0, "negative lock_ref");
            CHECK(n == t->root || n->lock_ref >= c->lock_ref, "parent lock_ref %d < child lock_ref %d",
                  n->lock_ref, c->lock_ref);
            CHECK(n == t->root || c->ns == NULL, "isolation key below depth 1");
            CHECK(c->ns_hash == (n == t->root ? ns_hash_of(c->ns) : n->ns_hash), "ns hash is wrong");
            CHECK(c->key_hash == key_hash_of(c->ns_hash, c->tokens, P), "key hash is stale");
            CHECK(tab_find(n, c->key_hash, c->ns, c->tokens, P, n == t->root) == c,
                  "child not found by its first page");
            if (c->lock_ref > 0) protected_ += c->n_tokens;
            else evictable += c->n_tokens;
            bool leaf = c->lock_ref == 0 && c->n_children == 0;
            CHECK(leaf == (c->leaf_idx >= 0), "evictable-leaf flag wrong (lock_ref %d, children %u)",
                  c->lock_ref, c->n_children);
            if (leaf) {
                leaves++;
                CHECK(c->leaf_idx < t->n_leaves && t->leaves[c->leaf_idx] == c, "leaf index wrong");
            }
            if (c->state >= 0) {
                states++;
                CHECK(c->state_idx >= 0 && c->state_idx < t->n_stated && t->stated[c->state_idx] == c,
                      "state index wrong");
            } else {
                CHECK(c->state_idx < 0, "a node without a state is listed as holding one");
            }
            for (int64_t k = 0; k < c->n_tokens / P; k++) {
                int32_t pg = c->pages[k];
                CHECK(pg >= 0 && pg < n_pages, "page id %d out of range", pg);
                CHECK(!seen[pg], "page %d held twice by the tree", pg);
                CHECK(!kv_pool_page_is_free(t->pool, pg), "tree page %d is free in the pool", pg);
                seen[pg] = 1;
            }
            if (sp == cap) {
                cap *= 2;
                const kv_radix_node **s = realloc(stack, (size_t)cap * sizeof *s);
                CHECK(s, "out of memory");
                stack = s;
            }
            stack[sp++] = c;
        }
        CHECK(kids == n->n_children, "child count %u but table holds %u", n->n_children, kids);
        CHECK(n->tab_cap == 0 || n->n_children * 2 <= n->tab_cap, "child table overfull");
    }
    CHECK(nodes == t->n_nodes, "node count %lld, tree says %lld", (long long)nodes, (long long)t->n_nodes);
    CHECK(leaves == t->n_leaves, "evictable leaves %lld, list has %lld", (long long)leaves, (long long)t->n_leaves);
    CHECK(states == t->n_stated, "nodes with states %lld, list has %lld", (long long)states, (long long)t->n_stated);
    CHECK(t->root->state < 0, "the root holds a state");
    CHECK(evictable == t->evictable, "evictable_size %lld, nodes sum to %lld", (long long)t->evictable,
          (long long)evictable);
    CHECK(protected_ == t->protected_, "protected_size %lld, nodes sum to %lld", (long long)t->protected_,
          (long long)protected_);
out:
    free(seen);
    free(stack);
    return rc;
}

void kv_radix_for_each_page(const kv_radix *t, void (*fn)(void *ctx, int32_t page), void *ctx)
{
    int64_t cap = 64, sp = 0;
    const kv_radix_node **stack = malloc((size_t)cap * sizeof *stack);
    if (!stack) return;
    stack[sp++] = t->root;
    while (sp > 0) {
        const kv_radix_node *n = stack[--sp];
        for (int64_t k = 0; k < n->n_tokens / t->page_size; k++) fn(ctx, n->pages[k]);
        for (uint32_t i = 0; i < n->tab_cap; i++) {
            if (!n->tab[i]) continue;
            if (sp == cap) {
                cap *= 2;
                const kv_radix_node **s = realloc(stack, (size_t)cap * sizeof *s);
                if (!s) {
                    free(stack);
                    return;
                }
                stack = s;
            }
            stack[sp++] = n->tab[i];
        }
    }
    free(stack);
}
