/* grammar_vocab — a tokenizer's vocabulary as the mask walk needs it.
 *
 * DESIGN: every token with bytes (special, unused and empty tokens are
 * left out; the end ids are kept aside) is copied into one blob and
 * sorted by its bytes, so tokens sharing a prefix are neighbours: the mask
 * walk (grammar_mask.c) reuses the parser state of the shared prefix and
 * skips a whole block of neighbours when a prefix dies, as a trie would,
 * without building one.  Read-only after creation; shared by threads. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

static uint64_t next_serial = 1;

static int cmp_rank(const void *x, const void *y, void *ctx)
{
    const grammar_vocab *v = ctx;
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    /* before sorting, rank_id holds indices into the unsorted off/len */
    size_t la = v->len[a], lb = v->len[b];
    int c = memcmp(v->blob + v->off[a], v->blob + v->off[b], la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return a < b ? -1 : a > b;
}

grammar_vocab *grammar_vocab_new(int32_t vocab_size, grammar_token_bytes_fn token_bytes, void *ctx,
                                 const int32_t *end_ids, size_t n_end)
{
    if (vocab_size <= 0) return NULL;
    grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->size = vocab_size;
    v->serial = __atomic_fetch_add(&next_serial, 1, __ATOMIC_RELAXED);
    v->id_rank = malloc((size_t)vocab_size * sizeof *v->id_rank);
    int32_t *ids = malloc((size_t)vocab_size * sizeof *ids);
    uint32_t *off = malloc((size_t)vocab_size * sizeof *off);
    uint16_t *len = malloc((size_t)vocab_size * sizeof *len);
    v->end_ids = malloc((n_end ? n_end : 1) * sizeof *v->end_ids);
    size_t cap = 1 << 20, used = 0;
    uint8_t *blob = malloc(cap);
    if (!v->id_rank || !ids || !off || !len || !v->end_ids || !blob) goto fail;
    for (size_t i = 0; i < n_end; i++) v->end_ids[i] = end_ids[i];
    v->n_end = n_end;
    int32_t n = 0;
    for (int32_t id = 0; id < vocab_size; id++) {
        v->id_rank[id] = -1;
        int is_end = 0;
        for (size_t i = 0; i < n_end; i++)
            if (end_ids[i] == id) is_end = 1;
        if (is_end) continue;
        size_t l = 0;
        const char *b = token_bytes(ctx, id, &l);
        if (!b || l == 0 || l > 65535) continue;
        if (used + l > cap) {
            while (used + l > cap) cap *= 2;
            uint8_t *nb = realloc(blob, cap);
            if (!nb) goto fail;
            blob = nb;
        }
        memcpy(blob + used, b, l);
        off[n] = (uint32_t)used;
        len[n] = (uint16_t)l;
        ids[n] = id;
        used += l;
        n++;
    }
    /* sort indices 0..n by bytes, then lay out rank order */
    v->blob = blob;
    v->off = off;
    v->len = len;
    int32_t *idx = malloc(((size_t)n + 1) * sizeof *idx);
    uint32_t *soff = malloc(((size_t)n + 1) * sizeof *soff);
    uint16_t *slen = malloc(((size_t)n + 1) * sizeof *slen);
    int32_t *rid = malloc(((size_t)n + 1) * sizeof *rid);
    if (!idx || !soff || !slen || !rid) {
        free(idx);
        free(soff);
        free(slen);
        free(rid);
        goto fail;
    }
    for (int32_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_rank, v);
    int32_t maxl = 0;
    for (int32_t r = 0; r < n; r++) {
        soff[r] = off[idx[r]];
        slen[r] = len[idx[r]];
        rid[r] = ids[idx[r]];
        v->id_rank[rid[r]] = r;
        if (slen[r] > maxl) maxl = slen[r];
    }
    free(idx);
    free(off);
    free(len);
    free(ids);
    v->off = soff;
    v->len = slen;
    v->rank_id = rid;
    v->n_tok = n;
    v->max_len = maxl;
    return v;
fail:
    free(ids);
    free(off);
    free(len);
    free(blob);
    v->off = NULL;
    v->len = NULL;
    v->blob = NULL;
    grammar_vocab_free(v);
    return NULL;
}

void grammar_vocab_free(grammar_vocab *v)
{
    if (!v) return;
    free(v->rank_id);
    free(v->off);
    free(v->len);
    free(v->blob);
    free(v->end_ids);
    free(v->id_rank);
    free(v);
}

int32_t grammar_vocab_size(const grammar_vocab *v) { return v->size; }

size_t grammar_mask_words(const grammar_vocab *v) { return ((size_t)v->size + 31) / 32; }
