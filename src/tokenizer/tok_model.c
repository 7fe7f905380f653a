/* tok_model — the three tokenizer.json models: BPE (byte-level or
 * character-level with byte fallback), WordPiece and Unigram.
 *
 * DESIGN: BPE works on token ids, never on strings.  A byte-level model maps
 * each raw byte straight to the id of its bytes_to_unicode character
 * (byte_id[256]), a character-level model looks each UTF-8 character up in
 * the vocab.  Merges are a hash table (left id, right id) -> (rank, merged
 * id).  Words up to SMALL_WORD symbols merge by scanning a rank array (fast
 * for the common short word); longer words use a binary heap of candidate
 * pairs with lazy invalidation, so a 100 kB word costs O(n log n).  Ties go
 * to the leftmost pair, as in HF.  Symbols that are not in the vocab (a
 * character-level model meeting an unknown character) keep their byte span
 * and become byte-fallback tokens (<0xXX>) or unk at the end.
 *
 * A per-thread word cache (direct-mapped, 32768 slots, 2 MB a thread)
 * remembers the ids of short pieces: prose and code repeat their words, and
 * a hit costs one hash and one memcmp instead of a merge loop whose pair
 * lookups miss the cache of an 8 MB merge table.  It is per thread so the
 * tokenizer stays read-only and lock-free; a slot is tagged with the
 * tokenizer's serial number, so a new tokenizer never sees stale entries.
 *
 * Unigram is a Viterbi pass over a byte trie of the vocab; WordPiece is
 * greedy longest-match-first, both as the tokenizers crate does them. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define SMALL_WORD 64

typedef struct sym {
    int32_t id;     /* vocab id, -1 = unknown character */
    uint32_t s, n;  /* byte span in the piece (for unknown chars) */
    int32_t prev, next;
} sym;

typedef struct heap_ent {
    int32_t rank;
    int32_t pos;   /* index of the left symbol */
    int32_t left, right; /* ids at push time, to detect stale entries */
} heap_ent;

typedef struct enc_state {
    sym *syms;        /* (cap) */
    size_t cap;
    heap_ent *heap;   /* (heap_cap) */
    size_t heap_n, heap_cap;
    bool last_unk;    /* fuse_unk: previous emitted id was unk */
    struct wc_slot *cache; /* (WC_SLOTS) this thread's word cache, or NULL */
} enc_state;

static int bpe_merge(const tok_tokenizer *t, enc_state *st, const char *p, size_t n, tok_ids *out);

static int emit(const tok_model *m, enc_state *st, int32_t id, tok_ids *out)
{
    if (id == m->unk_id && m->unk_id >= 0) {
        if (m->fuse_unk && st->last_unk) return 0;
        st->last_unk = true;
    } else {
        st->last_unk = false;
    }
    return tok_ids_push(out, id);
}

/* Emit an unknown span: byte fallback if every byte token exists, else unk. */
static int emit_unknown(const tok_model *m, enc_state *st, const char *p, size_t n, tok_ids *out)
{
    if (m->byte_fallback) {
        bool all = true;
        for (size_t i = 0; i < n; i++)
            if (m->byte_id[(unsigned char)p[i]] < 0) all = false;
        if (all) {
            for (size_t i = 0; i < n; i++)
                if (emit(m, st, m->byte_id[(unsigned char)p[i]], out)) return -1;
            return 0;
        }
    }
    if (m->unk_id >= 0) return emit(m, st, m->unk_id, out);
    return 0; /* no unk token: HF drops the piece */
}

static inline int32_t pair_rank(const tok_model *m, int32_t a, int32_t b, int32_t *merged)
{
    return tok_pairmap_get(&m->merges, a, b, merged);
}

static void heap_push(enc_state *st, heap_ent e)
{
    size_t i = st->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        heap_ent *q = &st->heap[p];
        if (q->rank < e.rank || (q->rank == e.rank && q->pos < e.pos)) break;
        st->heap[i] = *q;
        i = p;
    }
    st->heap[i] = e;
}

static heap_ent heap_pop(enc_state *st)
{
    heap_ent top = st->heap[0];
    heap_ent last = st->heap[--st->heap_n];
    size_t i = 0, n = st->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && (st->heap[c + 1].rank < st->heap[c].rank ||
                          (st->heap[c + 1].rank == st->heap[c].rank && st->heap[c + 1].pos < st->heap[c].pos)))
            c++;
        if (last.rank < st->heap[c].rank || (last.rank == st->heap[c].rank && last.pos < st->heap[c].pos)) break;
        st->heap[i] = st->heap[c];
        i = c;
    }
    st->heap[i] = last;
    return top;
}

static void try_push_pair(const tok_model *m, enc_state *st, int32_t i)
{
    int32_t j = st->syms[i].next;
    if (j < 0) return;
    int32_t merged = -1;
    int32_t r = pair_rank(m, st->syms[i].id, st->syms[j].id, &merged);
    if (r == INT32_MAX) return;
    heap_push(st, (heap_ent){r, i, st->syms[i].id, st->syms[j].id});
}

/* Merge n symbols (linked 0..n-1) in place. */
static void merge_heap(const tok_model *m, enc_state *st, size_t n)
{
    st->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) try_push_pair(m, st, (int32_t)i);
    while (st->heap_n) {
        heap_ent e = heap_pop(st);
        sym *a = &st->syms[e.pos];
        if (a->id != e.left || a->next < 0) continue; /* merged away or changed */
        sym *b = &st->syms[a->next];
        if (b->id != e.right) continue;
        int32_t merged = -1;
        if (pair_rank(m, a->id, b->id, &merged) != e.rank) continue;
        a->id = merged;
        a->n += b->n;
        b->id = INT32_MIN; /* dead */
        a->next = b->next;
        if (b->next >= 0) st->syms[b->next].prev = e.pos;
        if (a->prev >= 0) try_push_pair(m, st, a->prev);
        try_push_pair(m, st, e.pos);
    }
}

/* Merge n symbols stored densely (ids in syms[0..n)); returns the new count. */
static size_t merge_small(const tok_model *m, enc_state *st, size_t n)
{
    int32_t rank[SMALL_WORD], merged[SMALL_WORD];
    sym *s = st->syms;
    for (size_t i = 0; i + 1 < n; i++) rank[i] = pair_rank(m, s[i].id, s[i + 1].id, &merged[i]);
    while (n > 1) {
        int32_t best = INT32_MAX;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (rank[i] < best) { best = rank[i]; bi = i; }
        if (best == INT32_MAX) break;
        s[bi].id = merged[bi];
        s[bi].n += s[bi + 1].n;
        memmove(&s[bi + 1], &s[bi + 2], (n - bi - 2) * sizeof *s);
        if (bi + 1 < n - 1) {
            memmove(&rank[bi + 1], &rank[bi + 2], (n - bi - 3) * sizeof *rank);
            memmove(&merged[bi + 1], &merged[bi + 2], (n - bi - 3) * sizeof *merged);
        }
        n--;
        if (bi > 0) rank[bi - 1] = pair_rank(m, s[bi - 1].id, s[bi].id, &merged[bi - 1]);
        if (bi + 1 < n) rank[bi] = pair_rank(m, s[bi].id, s[bi + 1].id, &merged[bi]);
    }
    return n;
}

static int byte_cp_slow(unsigned b)
{
    /* GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves,
     * the others to 256 + their rank among the non-printable ones. */
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (int)b;
    int n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256 + n;
}

int tok_bytelevel_cp(unsigned b) { return byte_cp_slow(b); }
#define byte_cp(b) (m->bl_cp[(b)])

/* ---- per-thread word cache ------------------------------------------- */
#define WC_SLOTS 32768
#define WC_KEY 24
#define WC_IDS 6

typedef struct wc_slot {
    uint64_t hash;
    uint64_t serial;  /* tokenizer that filled it; 0 = empty */
    uint8_t klen, nids;
    char key[WC_KEY];
    int32_t ids[WC_IDS];
} wc_slot;

static pthread_key_t wc_key;
static pthread_once_t wc_once = PTHREAD_ONCE_INIT;
static int wc_key_ok;

static void wc_make_key(void) { wc_key_ok = pthread_key_create(&wc_key, free) == 0; }

static wc_slot *wc_get(void)
{
    pthread_once(&wc_once, wc_make_key);
    if (!wc_key_ok) return NULL;
    wc_slot *c = pthread_getspecific(wc_key);
    if (!c) {
        c = calloc(WC_SLOTS, sizeof *c);
        if (c && pthread_setspecific(wc_key, c)) { free(c); c = NULL; }
    }
    return c;
}

void tok_thread_cache_clear(void)
{
    pthread_once(&wc_once, wc_make_key);
    if (!wc_key_ok) return;
    wc_slot *c = pthread_getspecific(wc_key);
    if (c) memset(c, 0, WC_SLOTS * sizeof *c);
}

static int bpe_piece(const tok_tokenizer *t, enc_state *st, const char *p, size_t n, tok_ids *out)
{
    const tok_model *m = &t->model;
    if (!n) return 0;
    wc_slot *slot = NULL;
    uint64_t h = 0;
    if (n <= WC_KEY && st->cache) {
        h = tok_hash(p, n);
        slot = &st->cache[h & (WC_SLOTS - 1)];
        if (slot->serial == t->serial && slot->hash == h && slot->klen == n && !memcmp(slot->key, p, n)) {
            for (size_t i = 0; i < slot->nids; i++)
                if (emit(m, st, slot->ids[i], out)) return -1;
            return 0;
        }
    }
    size_t mark = out->n;
    if (bpe_merge(t, st, p, n, out)) return -1;
    size_t made = out->n - mark;
    if (slot && made <= WC_IDS) {
        for (size_t i = mark; i < out->n; i++)
            if (out->ids[i] == m->unk_id) return 0; /* unk output depends on neighbours (fuse_unk) */
        slot->serial = t->serial;
        slot->hash = h;
        slot->klen = (uint8_t)n;
        slot->nids = (uint8_t)made;
        memcpy(slot->key, p, n);
        if (made) memcpy(slot->ids, out->ids + mark, made * sizeof(int32_t));
    }
    return 0;
}

static int bpe_merge(const tok_tokenizer *t, enc_state *st, const char *p, size_t n, tok_ids *out)
{
    const tok_model *m = &t->model;
    if (m->ignore_merges) {
        int32_t id;
        if (m->byte_level) {
            tok_buf b = {0};
            for (size_t i = 0; i < n; i++) {
                char u[4];
                int l = tok_utf8_encode(byte_cp((unsigned char)p[i]), u);
                if (tok_buf_put(&b, u, (size_t)l)) { tok_buf_free(&b); return -1; }
            }
            id = tok_vocab_find(&t->vocab, b.p, b.n);
            tok_buf_free(&b);
        } else {
            id = tok_vocab_find(&t->vocab, p, n);
        }
        if (id >= 0) return emit(m, st, id, out);
    }
    if (st->cap < n + 1) {
        size_t cap = n + 64;
        sym *s = realloc(st->syms, cap * sizeof *s);
        if (!s) return -1;
        st->syms = s;
        st->cap = cap;
    }
    size_t k = 0;
    if (m->byte_level) {
        for (size_t i = 0; i < n; i++) {
            st->syms[k] = (sym){m->byte_id[(unsigned char)p[i]], (uint32_t)i, 1, (int32_t)k - 1, (int32_t)k + 1};
            k++;
        }
    } else {
        tok_buf key = {0};
        for (size_t i = 0; i < n;) {
            size_t l;
            tok_utf8_decode(p + i, &l);
            if (l > n - i) l = n - i;
            int32_t id;
            bool last = i + l == n;
            if ((m->cont_prefix_n && i > 0) || (m->eow_suffix_n && last)) {
                key.n = 0;
                if (i > 0 && tok_buf_put(&key, m->cont_prefix, m->cont_prefix_n)) goto oom;
                if (tok_buf_put(&key, p + i, l)) goto oom;
                if (last && tok_buf_put(&key, m->eow_suffix, m->eow_suffix_n)) goto oom;
                id = tok_vocab_find(&t->vocab, key.p, key.n);
            } else {
                id = tok_vocab_find(&t->vocab, p + i, l);
            }
            st->syms[k] = (sym){id, (uint32_t)i, (uint32_t)l, (int32_t)k - 1, (int32_t)k + 1};
            k++;
            i += l;
            continue;
        oom:
            tok_buf_free(&key);
            return -1;
        }
        tok_buf_free(&key);
    }
    st->syms[k - 1].next = -1;
    if (k <= SMALL_WORD) {
        k = merge_small(m, st, k);
        for (size_t i = 0; i < k; i++) {
            sym *s = &st->syms[i];
            int rc = s->id >= 0 ? emit(m, st, s->id, out) : emit_unknown(m, st, p + s->s, s->n, out);
            if (rc) return -1;
        }
        return 0;
    }
    if (st->heap_cap < 3 * k) { /* k - 1 initial pairs + at most 2 per merge */
        size_t cap = 3 * k + 64;
        heap_ent *h = realloc(st->heap, cap * sizeof *h);
        if (!h) return -1;
        st->heap = h;
        st->heap_cap = cap;
    }
    merge_heap(m, st, k);
    for (int32_t i = 0; i >= 0; i = st->syms[i].next) {
        sym *s = &st->syms[i];
        int rc = s->id >= 0 ? emit(m, st, s->id, out) : emit_unknown(m, st, p + s->s, s->n, out);
        if (rc) return -1;
    }
    return 0;
}

/* ---- WordPiece ------------------------------------------------------- */
static int wordpiece_piece(const tok_tokenizer *t, enc_state *st, const char *p, size_t n, tok_ids *out)
{
    const tok_model *m = &t->model;
    size_t nchars = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) nchars++;
    if (nchars > m->max_chars_per_word) return m->unk_id >= 0 ? emit(m, st, m->unk_id, out) : 0;
    size_t mark = out->n;
    tok_buf key = {0};
    size_t start = 0;
    while (start < n) {
        size_t end = n;
        int32_t found = -1;
        while (start < end) {
            key.n = 0;
            if (start > 0 && tok_buf_put(&key, m->cont_prefix, m->cont_prefix_n)) goto oom;
            if (tok_buf_put(&key, p + start, end - start)) goto oom;
            found = tok_vocab_find(&t->vocab, key.p, key.n);
            if (found >= 0) break;
            /* step back one character */
            end--;
            while (end > start && ((unsigned char)p[end] & 0xC0) == 0x80) end--;
        }
        if (found < 0) {
            out->n = mark;
            tok_buf_free(&key);
            return m->unk_id >= 0 ? emit(m, st, m->unk_id, out) : 0;
        }
        if (emit(m, st, found, out)) goto oom;
        start = end;
    }
    tok_buf_free(&key);
    return 0;
oom:
    tok_buf_free(&key);
    return -1;
}

/* ---- Unigram --------------------------------------------------------- */
typedef struct lat_ctx {
    const tok_model *m;
    double *best;     /* (n + 1) best score ending at byte i */
    int32_t *from;    /* (n + 1) start of the best last token */
    int32_t *tok;     /* (n + 1) id of the best last token (-1 = unk char) */
    size_t start;
    bool single;      /* a one-character token starts here */
    size_t char_len;
} lat_ctx;

static void lat_visit(void *vctx, int32_t id, size_t len)
{
    lat_ctx *c = vctx;
    size_t e = c->start + len;
    double sc = c->best[c->start] + c->m->scores[id];
    if (c->from[e] == INT32_MIN || sc > c->best[e]) {
        c->best[e] = sc;
        c->from[e] = (int32_t)c->start;
        c->tok[e] = id;
    }
    if (len == c->char_len) c->single = true;
}

static int unigram_piece(const tok_tokenizer *t, enc_state *st, const char *p, size_t n, tok_ids *out)
{
    const tok_model *m = &t->model;
    if (!n) return 0;
    lat_ctx c = {.m = m};
    c.best = malloc((n + 1) * sizeof *c.best);
    c.from = malloc((n + 1) * sizeof *c.from);
    c.tok = malloc((n + 1) * sizeof *c.tok);
    int32_t *path = malloc((n + 1) * sizeof *path);
    int rc = -1;
    if (!c.best || !c.from || !c.tok || !path) goto done;
    for (size_t i = 0; i <= n; i++) { c.from[i] = INT32_MIN; c.best[i] = 0; }
    c.from[0] = -1;
    for (size_t i = 0; i < n;) {
        size_t l;
        tok_utf8_decode(p + i, &l);
        if (l > n - i) l = n - i;
        if (c.from[i] != INT32_MIN) {
            c.start = i;
            c.single = false;
            c.char_len = l;
            tok_trie_prefixes(&m->utrie, p + i, n - i, lat_visit, &c);
            if (!c.single) {
                size_t e = i + l;
                double sc = c.best[i] + m->unk_score;
                if (c.from[e] == INT32_MIN || sc > c.best[e]) {
                    c.best[e] = sc;
                    c.from[e] = (int32_t)i;
                    c.tok[e] = -1;
                }
            }
        }
        i += l;
    }
    /* backtrack */
    size_t np = 0;
    for (int32_t e = (int32_t)n; e > 0; e = c.from[e]) path[np++] = e;
    rc = 0;
    for (size_t k = np; k-- > 0 && !rc;) {
        int32_t e = path[k];
        int32_t s = c.from[e];
        if (c.tok[e] >= 0 && c.tok[e] != m->unk_id) rc = emit(m, st, c.tok[e], out);
        else rc = emit_unknown(m, st, p + s, (size_t)(e - s), out);
    }
done:
    free(c.best);
    free(c.from);
    free(c.tok);
    free(path);
    return rc;
}

int tok_model_encode(const tok_tokenizer *t, const char *arena, const tok_pieces *pieces, tok_ids *out)
{
    enc_state st = {0};
    int rc = 0;
    if (t->model.kind == TOK_MODEL_BPE) st.cache = wc_get();
    for (size_t i = 0; i < pieces->n && !rc; i++) {
        const char *p = arena + pieces->v[i].off;
        size_t n = pieces->v[i].len;
        switch (t->model.kind) {
        case TOK_MODEL_BPE: rc = bpe_piece(t, &st, p, n, out); break;
        case TOK_MODEL_WORDPIECE: rc = wordpiece_piece(t, &st, p, n, out); break;
        case TOK_MODEL_UNIGRAM: rc = unigram_piece(t, &st, p, n, out); break;
        }
    }
    free(st.syms);
    free(st.heap);
    return rc;
}

void tok_model_free(tok_model *m)
{
    tok_pairmap_free(&m->merges);
    free(m->cont_prefix);
    free(m->eow_suffix);
    free(m->scores);
    tok_trie_free(&m->utrie);
}
