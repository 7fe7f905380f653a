/* tok_util — buffers, UTF-8, hashing, the vocab map, the merge map, the byte
 * trie and the PCRE2 wrapper used by every tokenizer stage.
 *
 * DESIGN: hash tables are open addressing with linear probing and power of
 * two capacity kept under 50% load, so a lookup is one or two cache lines.
 * The vocab map stores no keys of its own: a slot holds (hash, id) and the
 * key is the vocab string of that id in the pool.  Regexes are compiled with
 * UTF + UCP and JIT; `\s`/`\S` are rewritten to White_Space (what Oniguruma,
 * used by HF tokenizers, and transformers.js mean by \s; PCRE2's UCP \s
 * leaves out U+0085). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/log.h"

/* ---- buffers ---------------------------------------------------------- */
int tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int tok_buf_put(tok_buf *b, const void *s, size_t n)
{
    if (tok_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int tok_buf_putc(tok_buf *b, char c) { return tok_buf_put(b, &c, 1); }

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---- UTF-8 ------------------------------------------------------------ */
size_t tok_utf8_valid_len(const unsigned char *s, size_t n)
{
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3) return 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
        if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80) return 0;
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4) return 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        return 4;
    }
    return 0;
}

int32_t tok_utf8_decode(const char *s, size_t *len)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) { *len = 1; return u[0]; }
    if (u[0] < 0xE0) { *len = 2; return ((u[0] & 0x1F) << 6) | (u[1] & 0x3F); }
    if (u[0] < 0xF0) { *len = 3; return ((u[0] & 0x0F) << 12) | ((u[1] & 0x3F) << 6) | (u[2] & 0x3F); }
    *len = 4;
    return ((u[0] & 0x07) << 18) | ((u[1] & 0x3F) << 12) | ((u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}

int tok_utf8_encode(int32_t cp, char out[4])
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the maximal subpart of an ill-formed sequence starting at s
 * (WHATWG decoder: a lead byte followed by as many valid continuation bytes
 * as it allows, stopping at the first byte that cannot continue). */
static size_t utf8_bad_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 1;
    size_t i = 1;
    while (i <= need && i < n) {
        unsigned d = s[i];
        if (d < lo || d > hi) break;
        lo = 0x80; hi = 0xBF;
        i++;
    }
    return i;
}

int tok_utf8_sanitize(tok_buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    if (tok_buf_reserve(b, n)) return -1;
    while (i < n) {
        if (u[i] < 0x80) { i++; continue; }
        size_t l = tok_utf8_valid_len(u + i, n - i);
        if (l) { i += l; continue; }
        if (tok_buf_put(b, s + run, i - run)) return -1;
        if (tok_buf_put(b, "\xEF\xBF\xBD", 3)) return -1;
        i += utf8_bad_len(u + i, n - i);
        run = i;
    }
    return tok_buf_put(b, s + run, n - run);
}

bool tok_is_white_space(int32_t cp)
{
    if (cp >= 0x09 && cp <= 0x0D) return true;
    switch (cp) {
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F:
    case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* ---- hashing ---------------------------------------------------------- */
uint64_t tok_hash(const void *s, size_t n)
{
    /* FNV-1a over 8-byte words then a final mix: fast for short tokens. */
    const unsigned char *p = s;
    uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* ---- vocab ------------------------------------------------------------ */
static int vocab_grow_ids(tok_vocab *v, size_t n)
{
    if (n <= v->n) return 0;
    size_t cap = v->ent_cap ? v->ent_cap : 1024;
    while (cap < n) cap *= 2;
    if (cap != v->ent_cap) {
        struct tok_vocab_ent *e = realloc(v->ent, cap * sizeof *e);
        if (!e) return -1;
        v->ent = e;
        v->ent_cap = cap;
    }
    for (size_t i = v->n; i < n; i++) { v->ent[i].off = UINT32_MAX; v->ent[i].len = 0; }
    v->n = n;
    return 0;
}

static void slots_insert(uint64_t *slots, size_t cap, uint32_t h32, int32_t id)
{
    size_t i = h32 & (cap - 1);
    while (slots[i]) i = (i + 1) & (cap - 1);
    slots[i] = ((uint64_t)h32 << 32) | (uint32_t)(id + 1);
}

static int vocab_rehash(tok_vocab *v, size_t cap)
{
    uint64_t *s = calloc(cap, sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < v->slot_cap; i++)
        if (v->slots[i]) slots_insert(s, cap, (uint32_t)(v->slots[i] >> 32), (int32_t)(uint32_t)v->slots[i] - 1);
    free(v->slots);
    v->slots = s;
    v->slot_cap = cap;
    return 0;
}

static bool vocab_key_eq(const tok_vocab *v, int32_t id, const char *s, size_t n)
{
    struct tok_vocab_ent e = v->ent[id];
    if (e.len != n || e.off == UINT32_MAX) return false;
    const char *k = v->pool + e.off;
    for (size_t i = 0; i < n; i++) /* tokens are short: no call into memcmp */
        if (k[i] != s[i]) return false;
    return true;
}

int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t n)
{
    if (!v->slot_cap) return -1;
    uint32_t h32 = (uint32_t)tok_hash(s, n);
    size_t i = h32 & (v->slot_cap - 1);
    for (;;) {
        uint64_t e = v->slots[i];
        if (!e) return -1;
        if ((uint32_t)(e >> 32) == h32) {
            int32_t id = (int32_t)(uint32_t)e - 1;
            if (vocab_key_eq(v, id, s, n)) return id;
        }
        i = (i + 1) & (v->slot_cap - 1);
    }
}

/* Remove the slot that maps to id (used when an id gets new content). */
static void vocab_unlink(tok_vocab *v, int32_t id)
{
    if (!v->slot_cap || v->ent[id].off == UINT32_MAX) return;
    const char *s = v->pool + v->ent[id].off;
    uint32_t h32 = (uint32_t)tok_hash(s, v->ent[id].len);
    size_t i = h32 & (v->slot_cap - 1);
    while (v->slots[i]) {
        if ((int32_t)(uint32_t)v->slots[i] - 1 == id) break;
        i = (i + 1) & (v->slot_cap - 1);
    }
    if (!v->slots[i]) return;
    /* backward-shift deletion for linear probing */
    size_t j = i;
    v->slots[i] = 0;
    for (;;) {
        j = (j + 1) & (v->slot_cap - 1);
        if (!v->slots[j]) break;
        size_t home = (uint32_t)(v->slots[j] >> 32) & (v->slot_cap - 1);
        bool move = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (move) {
            v->slots[i] = v->slots[j];
            v->slots[j] = 0;
            i = j;
        }
    }
    v->slot_used--;
}

int tok_vocab_reserve(tok_vocab *v, size_t n_entries, size_t pool_bytes)
{
    size_t cap = 1024;
    while (cap < 2 * n_entries) cap *= 2;
    if (cap > v->slot_cap && vocab_rehash(v, cap)) return -1;
    if (pool_bytes > v->pool_cap && pool_bytes < UINT32_MAX) {
        char *p = realloc(v->pool, pool_bytes);
        if (!p) return -1;
        v->pool = p;
        v->pool_cap = pool_bytes;
    }
    return 0;
}

int tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n)
{
    if (id < 0 || n >= UINT32_MAX / 2) return -1;
    if (vocab_grow_ids(v, (size_t)id + 1)) return -1;
    if ((v->slot_used + 1) * 2 > v->slot_cap)
        if (vocab_rehash(v, v->slot_cap ? v->slot_cap * 2 : 1024)) return -1;
    /* One probe finds either the string (another id has it) or the free
     * slot where it goes.  Another id with the same string loses the lookup
     * (HF: the last write to the map wins; callers insert in HF's order). */
    uint32_t h32 = (uint32_t)tok_hash(s, n);
    size_t i = h32 & (v->slot_cap - 1);
    int32_t old = -1;
    for (;; i = (i + 1) & (v->slot_cap - 1)) {
        uint64_t e = v->slots[i];
        if (!e) break;
        if ((uint32_t)(e >> 32) == h32 && vocab_key_eq(v, (int32_t)(uint32_t)e - 1, s, n)) {
            old = (int32_t)(uint32_t)e - 1;
            break;
        }
    }
    if (old == id) return 0;
    bool fresh = old < 0 && v->ent[id].off == UINT32_MAX;
    if (!fresh) { /* rare: re-point an existing string or id, then re-probe */
        if (old >= 0) vocab_unlink(v, old);
        vocab_unlink(v, id);
        i = h32 & (v->slot_cap - 1);
        while (v->slots[i]) i = (i + 1) & (v->slot_cap - 1);
    }
    if (v->pool_n + n + 1 > v->pool_cap) {
        size_t cap = v->pool_cap ? v->pool_cap : 4096;
        while (cap < v->pool_n + n + 1) cap *= 2;
        if (cap > UINT32_MAX) return -1;
        char *p = realloc(v->pool, cap);
        if (!p) return -1;
        v->pool = p;
        v->pool_cap = cap;
    }
    memcpy(v->pool + v->pool_n, s, n);
    v->pool[v->pool_n + n] = 0;
    v->ent[id].off = (uint32_t)v->pool_n;
    v->ent[id].len = (uint32_t)n;
    v->pool_n += n + 1;
    v->slots[i] = ((uint64_t)h32 << 32) | (uint32_t)(id + 1);
    v->slot_used++;
    return 0;
}

void tok_vocab_free(tok_vocab *v)
{
    free(v->pool);
    free(v->ent);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

/* ---- merges ----------------------------------------------------------- */
static inline size_t pair_home(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 24) & (cap - 1); /* same as tok_pairmap_get */
}

static int pairmap_rehash(tok_pairmap *m, size_t cap)
{
    uint64_t *s = malloc(cap * sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < cap; i++) s[i] = TOK_PAIR_EMPTY;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i] == TOK_PAIR_EMPTY) continue;
        size_t j = pair_home(m->slots[i] >> 24, cap);
        while (s[j] != TOK_PAIR_EMPTY) j = (j + 1) & (cap - 1);
        s[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = s;
    m->cap = cap;
    return 0;
}

int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    if ((uint32_t)a >= TOK_PAIR_MAX_ID || (uint32_t)b >= TOK_PAIR_MAX_ID || (uint32_t)rank >= TOK_PAIR_MAX_RANK)
        return -2;
    if ((m->used + 1) * 2 > m->cap)
        if (pairmap_rehash(m, m->cap ? m->cap * 2 : 1024)) return -1;
    if ((size_t)rank >= m->rank_cap) {
        size_t cap = m->rank_cap ? m->rank_cap : 1024;
        while (cap <= (size_t)rank) cap *= 2;
        int32_t *r = realloc(m->merged_of_rank, cap * sizeof *r);
        if (!r) return -1;
        m->merged_of_rank = r;
        m->rank_cap = cap;
    }
    uint64_t key = ((uint64_t)(uint32_t)a << 20) | (uint32_t)b;
    size_t j = pair_home(key, m->cap);
    while (m->slots[j] != TOK_PAIR_EMPTY) {
        if ((m->slots[j] >> 24) == key) return 0; /* first (lowest rank) merge wins */
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = (key << 24) | (uint32_t)rank;
    m->merged_of_rank[rank] = merged;
    m->used++;
    return 0;
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->slots);
    free(m->merged_of_rank);
    memset(m, 0, sizeof *m);
}

/* ---- trie ------------------------------------------------------------- */
typedef struct trie_key {
    const char *s;
    size_t n;
    int32_t value;
} trie_key;

static int trie_key_cmp(const void *a, const void *b)
{
    const trie_key *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->value < y->value ? -1 : (x->value > y->value);
}

/* Build the node for keys[lo..hi) which share their first `depth` bytes. */
static int trie_build_rec(tok_trie *t, const trie_key *k, size_t lo, size_t hi, size_t depth,
                          uint32_t node, size_t *edge_cap, size_t *node_cap)
{
    /* keys of exactly `depth` bytes end here; with duplicates the last one
     * given (highest value) wins, as a later map insertion would */
    while (lo < hi && k[lo].n == depth) {
        t->nodes[node].value = k[lo].value;
        lo++;
    }
    /* count distinct next bytes */
    size_t n_children = 0;
    for (size_t i = lo; i < hi; i++)
        if (i == lo || (unsigned char)k[i].s[depth] != (unsigned char)k[i - 1].s[depth]) n_children++;
    if (!n_children) return 0;
    if (t->n_edges + n_children > *edge_cap) {
        size_t cap = *edge_cap * 2 + n_children;
        tok_trie_edge *e = realloc(t->edges, cap * sizeof *e);
        if (!e) return -1;
        t->edges = e;
        *edge_cap = cap;
    }
    uint32_t first = (uint32_t)t->n_edges;
    t->nodes[node].first_edge = first;
    t->nodes[node].n_edges = (uint16_t)n_children;
    t->n_edges += n_children;
    size_t e = 0, i = lo;
    while (i < hi) {
        unsigned char byte = (unsigned char)k[i].s[depth];
        size_t j = i;
        while (j < hi && (unsigned char)k[j].s[depth] == byte) j++;
        if (t->n_nodes + 1 > *node_cap) {
            size_t cap = *node_cap * 2 + 1;
            tok_trie_node *nn = realloc(t->nodes, cap * sizeof *nn);
            if (!nn) return -1;
            t->nodes = nn;
            *node_cap = cap;
        }
        uint32_t child = (uint32_t)t->n_nodes++;
        t->nodes[child].first_edge = 0;
        t->nodes[child].n_edges = 0;
        t->nodes[child].value = -1;
        t->edges[first + e].byte = byte;
        t->edges[first + e].child = child;
        e++;
        if (trie_build_rec(t, k, i, j, depth + 1, child, edge_cap, node_cap)) return -1;
        i = j;
    }
    return 0;
}

int tok_trie_build(tok_trie *t, const char *const *keys, const size_t *lens, size_t n)
{
    memset(t, 0, sizeof *t);
    trie_key *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!lens[i]) continue; /* empty keys never match */
        k[m].s = keys[i];
        k[m].n = lens[i];
        k[m].value = (int32_t)i;
        t->first_byte[(unsigned char)keys[i][0]] = 1;
        m++;
    }
    qsort(k, m, sizeof *k, trie_key_cmp);
    size_t node_cap = 64, edge_cap = 64;
    t->nodes = malloc(node_cap * sizeof *t->nodes);
    t->edges = malloc(edge_cap * sizeof *t->edges);
    if (!t->nodes || !t->edges) { free(k); tok_trie_free(t); return -1; }
    t->n_nodes = 1;
    t->nodes[0].first_edge = 0;
    t->nodes[0].n_edges = 0;
    t->nodes[0].value = -1;
    int rc = trie_build_rec(t, k, 0, m, 0, 0, &edge_cap, &node_cap);
    free(k);
    if (rc) tok_trie_free(t);
    return rc;
}

static inline int64_t trie_child(const tok_trie *t, uint32_t node, unsigned char byte)
{
    const tok_trie_node *nd = &t->nodes[node];
    size_t lo = nd->first_edge, hi = lo + nd->n_edges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->edges[mid].byte < byte) lo = mid + 1;
        else hi = mid;
    }
    if (lo < (size_t)nd->first_edge + nd->n_edges && t->edges[lo].byte == byte) return t->edges[lo].child;
    return -1;
}

int32_t tok_trie_longest(const tok_trie *t, const char *s, size_t n, size_t *mlen)
{
    if (!t->n_nodes || !n || !t->first_byte[(unsigned char)s[0]]) return -1;
    uint32_t node = 0;
    int32_t best = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t c = trie_child(t, node, (unsigned char)s[i]);
        if (c < 0) break;
        node = (uint32_t)c;
        if (t->nodes[node].value >= 0) { best = t->nodes[node].value; *mlen = i + 1; }
    }
    return best;
}

void tok_trie_prefixes(const tok_trie *t, const char *s, size_t n,
                       void (*fn)(void *ctx, int32_t value, size_t len), void *ctx)
{
    if (!t->n_nodes) return;
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t c = trie_child(t, node, (unsigned char)s[i]);
        if (c < 0) return;
        node = (uint32_t)c;
        if (t->nodes[node].value >= 0) fn(ctx, t->nodes[node].value, i + 1);
    }
}

void tok_trie_free(tok_trie *t)
{
    free(t->nodes);
    free(t->edges);
    memset(t, 0, sizeof *t);
}

/* ---- regex ------------------------------------------------------------ */
/* Rewrite \s and \S (outside \Q..\E) to the White_Space property. */
static int rewrite_pattern(const char *p, size_t n, tok_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\' && i + 1 < n) {
            char c = p[i + 1];
            if (c == 's') { if (tok_buf_put(out, "\\p{White_Space}", 15)) return -1; i++; continue; }
            if (c == 'S') { if (tok_buf_put(out, "\\P{White_Space}", 15)) return -1; i++; continue; }
            if (tok_buf_put(out, p + i, 2)) return -1;
            i++;
            continue;
        }
        if (tok_buf_putc(out, p[i])) return -1;
    }
    return 0;
}

int tok_regex_compile(tok_regex *r, int kind, const char *pat, size_t n, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (kind == 0) {
        r->literal = true;
        r->lit = malloc(n + 1);
        if (!r->lit) return -1;
        memcpy(r->lit, pat, n);
        r->lit[n] = 0;
        r->lit_n = n;
        return 0;
    }
    tok_buf b = {0};
    if (rewrite_pattern(pat, n, &b)) { tok_buf_free(&b); return -1; }
    int ec;
    PCRE2_SIZE eo;
    r->code = pcre2_compile((PCRE2_SPTR)(b.p ? b.p : ""), b.n, PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C,
                            &ec, &eo, NULL);
    tok_buf_free(&b);
    if (!r->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        if (err) snprintf(err, errlen, "bad regex at offset %zu: %s", (size_t)eo, (char *)msg);
        return -1;
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE); /* best effort: falls back to the interpreter */
    return 0;
}

int tok_regex_next(const tok_regex *r, const char *s, size_t n, size_t start, pcre2_match_data *md,
                   size_t *ms, size_t *me)
{
    if (r->literal) {
        if (!r->lit_n || start >= n) return 0;
        const char *f = memmem(s + start, n - start, r->lit, r->lit_n);
        if (!f) return 0;
        *ms = (size_t)(f - s);
        *me = *ms + r->lit_n;
        return 1;
    }
    if (!r->code || start > n) return 0;
    int rc = pcre2_match(r->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        log_error("regex match failed (%d)", rc);
        return -1;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

void tok_regex_free(tok_regex *r)
{
    if (r->code) pcre2_code_free(r->code);
    free(r->lit);
    memset(r, 0, sizeof *r);
}
