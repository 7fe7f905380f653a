/* grammar_cache — see grammar_cache.h.  A chained hash table (FNV-1a
 * over kind, options and text; doubled when the load passes 1) plus an
 * intrusive doubly linked LRU list, under one mutex; reference counts
 * are atomic so a release never takes the lock. */
#include "grammar/grammar_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct grammar_entry {
    atomic_int refs;
    grammar_kind kind;
    uint32_t opts;
    uint64_t hash;
    char *text;                  /* (len + 1) owned */
    size_t len;
    void *value;                 /* owned: freed by free_value with the last reference */
    void (*free_value)(void *);
    char *err;                   /* owned; "" for a compiled entry */
    size_t bytes;                /* counted against the bound */
    bool in_cache;               /* linked in the table and the LRU (under the cache's mutex) */
    struct grammar_entry *chain; /* hash chain */
    struct grammar_entry *prev, *next; /* LRU: prev = more recent */
};

struct grammar_cache {
    pthread_mutex_t mu;
    grammar_entry **buckets;     /* (n_buckets) */
    size_t n_buckets;
    grammar_entry *head, *tail;  /* LRU: head = most recent */
    void (*free_value)(void *);
    grammar_cache_stats st;
};

const char *grammar_kind_name(grammar_kind k)
{
    static const char *const names[] = {"json", "regex", "ebnf", "structural_tag"};
    return (unsigned)k < GRAMMAR_KIND_COUNT ? names[k] : "unknown";
}

static uint64_t key_hash(const grammar_key *k)
{
    uint64_t h = 1469598103934665603ull;
    h = (h ^ (uint64_t)k->kind) * 1099511628211ull;
    h = (h ^ (uint64_t)k->opts) * 1099511628211ull;
    for (size_t i = 0; i < k->len; i++) h = (h ^ (unsigned char)k->text[i]) * 1099511628211ull;
    return h;
}

static bool key_eq(const grammar_entry *e, const grammar_key *k, uint64_t h)
{
    return e->hash == h && e->kind == k->kind && e->opts == k->opts && e->len == k->len &&
           !memcmp(e->text, k->text, k->len);
}

grammar_cache *grammar_cache_create(size_t max_bytes, void (*free_value)(void *value))
{
    grammar_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_buckets = 64;
    c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->free_value = free_value;
    c->st.max_bytes = max_bytes ? (int64_t)max_bytes : (int64_t)64 << 20;
    return c;
}

static void entry_free(grammar_entry *e)
{
    if (e->value && e->free_value) e->free_value(e->value);
    free(e->text);
    free(e->err);
    free(e);
}

grammar_entry *grammar_entry_ref(grammar_entry *e)
{
    if (e) atomic_fetch_add(&e->refs, 1);
    return e;
}

void grammar_entry_release(grammar_entry *e)
{
    if (e && atomic_fetch_sub(&e->refs, 1) == 1) entry_free(e);
}

void *grammar_entry_value(const grammar_entry *e) { return e ? e->value : NULL; }
const char *grammar_entry_error(const grammar_entry *e) { return e && e->err ? e->err : ""; }

/* ---- under c->mu ---------------------------------------------------------- */

static void lru_unlink(grammar_cache *c, grammar_entry *e)
{
    if (e->prev) e->prev->next = e->next;
    else c->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(grammar_cache *c, grammar_entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head) c->head->prev = e;
    c->head = e;
    if (!c->tail) c->tail = e;
}

/* Unlink e from the table and the LRU and drop the cache's reference
 * (the caller keeps any reference it holds; release happens after the
 * lock in grammar_entry_release's atomic). */
static grammar_entry *remove_entry(grammar_cache *c, grammar_entry *e)
{
    grammar_entry **pp = &c->buckets[e->hash % c->n_buckets];
    while (*pp && *pp != e) pp = &(*pp)->chain;
    if (*pp) *pp = e->chain;
    e->chain = NULL;
    lru_unlink(c, e);
    e->in_cache = false;
    c->st.entries--;
    c->st.bytes -= (int64_t)e->bytes;
    return e; /* the cache's reference, for the caller to release */
}

static void grow_table(grammar_cache *c)
{
    size_t nb = c->n_buckets * 2;
    grammar_entry **b = calloc(nb, sizeof *b);
    if (!b) return; /* longer chains, still correct */
    for (size_t i = 0; i < c->n_buckets; i++)
        for (grammar_entry *e = c->buckets[i], *n; e; e = n) {
            n = e->chain;
            e->chain = b[e->hash % nb];
            b[e->hash % nb] = e;
        }
    free(c->buckets);
    c->buckets = b;
    c->n_buckets = nb;
}

static grammar_entry *find(grammar_cache *c, const grammar_key *k, uint64_t h)
{
    for (grammar_entry *e = c->buckets[h % c->n_buckets]; e; e = e->chain)
        if (key_eq(e, k, h)) return e;
    return NULL;
}

/* ---- the API -------------------------------------------------------------- */

grammar_entry *grammar_cache_get(grammar_cache *c, const grammar_key *key)
{
    uint64_t h = key_hash(key);
    pthread_mutex_lock(&c->mu);
    grammar_entry *e = find(c, key, h);
    if (e) {
        lru_unlink(c, e);
        lru_push_front(c, e);
        grammar_entry_ref(e);
        c->st.hits++;
    } else {
        c->st.misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return e;
}

grammar_entry *grammar_cache_put(grammar_cache *c, const grammar_key *key, void *value, size_t bytes,
                                 const char *err)
{
    uint64_t h = key_hash(key);
    grammar_entry *e = calloc(1, sizeof *e);
    if (e) {
        e->text = malloc(key->len + 1);
        e->err = strdup(value ? "" : err ? err : "unknown error");
    }
    if (!e || !e->text || !e->err) {
        log_error("out of memory caching a grammar");
        if (e) free(e->text), free(e->err), free(e);
        if (value && c->free_value) c->free_value(value);
        return NULL;
    }
    memcpy(e->text, key->text, key->len);
    e->text[key->len] = 0;
    e->len = key->len;
    e->kind = key->kind;
    e->opts = key->opts;
    e->hash = h;
    e->value = value;
    e->free_value = c->free_value;
    e->bytes = (value ? bytes : strlen(e->err)) + key->len + sizeof *e;
    atomic_init(&e->refs, 2); /* the cache's and the caller's */
    grammar_entry *evicted = NULL; /* chained through ->chain after removal */
    pthread_mutex_lock(&c->mu);
    grammar_entry *old = find(c, key, h);
    if (old) { /* a concurrent compile of the same key won */
        lru_unlink(c, old);
        lru_push_front(c, old);
        grammar_entry_ref(old);
        pthread_mutex_unlock(&c->mu);
        entry_free(e);
        return old;
    }
    if ((size_t)c->st.entries + 1 > c->n_buckets) grow_table(c);
    e->chain = c->buckets[h % c->n_buckets];
    c->buckets[h % c->n_buckets] = e;
    lru_push_front(c, e);
    e->in_cache = true;
    c->st.entries++;
    c->st.bytes += (int64_t)e->bytes;
    c->st.inserts++;
    while (c->st.bytes > c->st.max_bytes && c->tail && c->tail != e) {
        grammar_entry *v = remove_entry(c, c->tail);
        c->st.evictions++;
        v->chain = evicted;
        evicted = v;
    }
    pthread_mutex_unlock(&c->mu);
    while (evicted) {
        grammar_entry *n = evicted->chain;
        grammar_entry_release(evicted);
        evicted = n;
    }
    return e;
}

void grammar_cache_clear(grammar_cache *c)
{
    grammar_entry *all = NULL;
    pthread_mutex_lock(&c->mu);
    while (c->head) {
        grammar_entry *v = remove_entry(c, c->head);
        v->chain = all;
        all = v;
    }
    pthread_mutex_unlock(&c->mu);
    while (all) {
        grammar_entry *n = all->chain;
        grammar_entry_release(all);
        all = n;
    }
}

void grammar_cache_get_stats(grammar_cache *c, grammar_cache_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

void grammar_cache_destroy(grammar_cache *c)
{
    if (!c) return;
    grammar_cache_clear(c);
    pthread_mutex_destroy(&c->mu);
    free(c->buckets);
    free(c);
}
