/* tok_encode — text to ids: added-token splitting, normalizer,
 * pre-tokenizer, model, post-processor; plus the lookup functions.
 *
 * DESIGN: the order is Hugging Face's:
 *
 *   text --sanitize--> valid UTF-8
 *        --split on non-normalized added tokens (longest match, trie)-->
 *   sections: [text][<added>][text]...   (lstrip/rstrip trim neighbours)
 *   each text section --normalizer--> --split on normalized added tokens-->
 *   each text subsection --pre-tokenizer--> pieces --model--> ids
 *   then the post-processor's ids around the whole (add_special_tokens).
 *
 * All scratch (arena, piece lists, PCRE2 match data) lives in one
 * enc_ctx for the call, so a tokenizer can be shared between threads. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"
#include "util/log.h"

void tok_ids_free(tok_ids *v)
{
    free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

int tok_ids_push(tok_ids *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->ids, cap * sizeof *p);
        if (!p) return -1;
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return 0;
}

typedef struct seg {
    size_t s, e;   /* span in the source string */
    int32_t added; /* index in t->added, or -1 for text */
} seg;

typedef struct segs {
    seg *v;
    size_t n, cap;
} segs;

static int segs_push(segs *g, size_t s, size_t e, int32_t added)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        seg *v = realloc(g->v, cap * sizeof *v);
        if (!v) return -1;
        g->v = v;
        g->cap = cap;
    }
    g->v[g->n++] = (seg){s, e, added};
    return 0;
}

static bool is_word_char(int32_t cp)
{
    if (cp == '_') return true;
    utf8proc_category_t c = utf8proc_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

static int32_t cp_before(const char *s, size_t i)
{
    if (i == 0) return -1;
    size_t j = i - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
    size_t l;
    return tok_utf8_decode(s + j, &l);
}

/* Split s[0..n) on the added tokens of trie; lstrip/rstrip applied by
 * shrinking neighbouring text segments. */
static int split_added(const tok_tokenizer *t, const tok_trie *trie, const char *s, size_t n, segs *out)
{
    out->n = 0;
    size_t gap = 0;
    for (size_t i = 0; i < n;) {
        if (!trie->first_byte[(unsigned char)s[i]]) { i++; continue; }
        size_t ml = 0;
        int32_t a = tok_trie_longest(trie, s + i, n - i, &ml);
        if (a < 0) { i++; continue; }
        const tok_added *ad = &t->added[a];
        if (ad->single_word) {
            int32_t before = cp_before(s, i);
            size_t l = 0;
            int32_t after = i + ml < n ? tok_utf8_decode(s + i + ml, &l) : -1;
            if ((before >= 0 && is_word_char(before)) || (after >= 0 && is_word_char(after))) { i++; continue; }
        }
        if (segs_push(out, gap, i, -1) || segs_push(out, i, i + ml, a)) return -1;
        i += ml;
        gap = i;
    }
    if (segs_push(out, gap, n, -1)) return -1;
    /* lstrip / rstrip: trim the whitespace of the text next to the token */
    for (size_t k = 0; k < out->n; k++) {
        if (out->v[k].added < 0) continue;
        const tok_added *ad = &t->added[out->v[k].added];
        if (ad->lstrip && k > 0) {
            seg *g = &out->v[k - 1];
            while (g->e > g->s) {
                size_t j = g->e - 1;
                while (j > g->s && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
                size_t l;
                if (!tok_is_white_space(tok_utf8_decode(s + j, &l))) break;
                g->e = j;
            }
        }
        if (ad->rstrip && k + 1 < out->n) {
            seg *g = &out->v[k + 1];
            while (g->s < g->e) {
                size_t l;
                if (!tok_is_white_space(tok_utf8_decode(s + g->s, &l))) break;
                g->s += l;
            }
        }
    }
    return 0;
}

typedef struct enc_ctx {
    pcre2_match_data *md;
    tok_buf norm;      /* normalized section */
    tok_buf arena;     /* pre-tokenizer arena */
    tok_pieces in, out;
    segs sub;
} enc_ctx;

/* Pre-tokenize and model one text subsection. */
static int encode_text(const tok_tokenizer *t, enc_ctx *c, const char *s, size_t n, bool first, tok_ids *ids)
{
    if (!n) return 0;
    c->arena.n = 0;
    if (tok_buf_put(&c->arena, s, n)) return -1;
    c->in.n = 0;
    if (tok_pieces_push(&c->in, 0, n)) return -1;
    const tok_pieces *pieces = &c->in;
    if (t->pretok) {
        if (tok_pretokenize(t->pretok, &c->arena, &c->in, &c->out, first, c->md)) return -1;
        pieces = &c->out;
    }
    return tok_model_encode(t, c->arena.p, pieces, ids);
}

static int encode_section(const tok_tokenizer *t, enc_ctx *c, const char *s, size_t n, bool first, tok_ids *ids)
{
    if (!n) return 0;
    const char *ns = s;
    size_t nn = n;
    if (t->normalizer) {
        if (tok_normalize(t->normalizer, s, n, &c->norm, c->md)) return -1;
        ns = c->norm.p;
        nn = c->norm.n;
    }
    if (!t->any_norm) return encode_text(t, c, ns, nn, first, ids);
    /* c->norm may be reused below: keep our own copy */
    char *copy = malloc(nn + 1);
    if (!copy) return -1;
    memcpy(copy, ns, nn);
    if (split_added(t, &t->trie_norm, copy, nn, &c->sub)) { free(copy); return -1; }
    segs sub = c->sub;
    c->sub = (segs){0};
    int rc = 0;
    for (size_t k = 0; k < sub.n && !rc; k++) {
        seg *g = &sub.v[k];
        if (g->added >= 0) rc = tok_ids_push(ids, t->added[g->added].id);
        else rc = encode_text(t, c, copy + g->s, g->e - g->s, first, ids);
    }
    free(sub.v);
    free(copy);
    return rc;
}

int tok_encode(const tok_tokenizer *t, const char *text, size_t len, bool add_special_tokens, tok_ids *out)
{
    enc_ctx c = {0};
    tok_buf src = {0};
    segs top = {0};
    int rc = -1;
    c.md = pcre2_match_data_create(4, NULL);
    if (!c.md) return -1;
    if (tok_utf8_sanitize(&src, text ? text : "", text ? len : 0)) goto done;
    if (!src.p && tok_buf_put(&src, "", 0)) goto done;
    if (add_special_tokens)
        for (size_t i = 0; i < t->post.n_pre; i++)
            if (tok_ids_push(out, t->post.pre_ids[i])) goto done;
    if (t->any_raw) {
        if (split_added(t, &t->trie_raw, src.p, src.n, &top)) goto done;
    } else if (segs_push(&top, 0, src.n, -1)) {
        goto done;
    }
    for (size_t k = 0; k < top.n; k++) {
        seg *g = &top.v[k];
        if (g->added >= 0) {
            if (tok_ids_push(out, t->added[g->added].id)) goto done;
        } else if (encode_section(t, &c, src.p + g->s, g->e - g->s, k == 0, out)) {
            goto done;
        }
    }
    if (add_special_tokens)
        for (size_t i = 0; i < t->post.n_post; i++)
            if (tok_ids_push(out, t->post.post_ids[i])) goto done;
    rc = 0;
done:
    pcre2_match_data_free(c.md);
    tok_buf_free(&c.norm);
    tok_buf_free(&c.arena);
    free(c.in.v);
    free(c.out.v);
    free(c.sub.v);
    free(top.v);
    tok_buf_free(&src);
    return rc;
}

/* ---- lookups ---------------------------------------------------------- */
size_t tok_vocab_size(const tok_tokenizer *t) { return t->vocab.n; }
int32_t tok_bos_id(const tok_tokenizer *t) { return t->bos_id; }
int32_t tok_eos_id(const tok_tokenizer *t) { return t->n_eos ? t->eos_ids[0] : -1; }
int32_t tok_pad_id(const tok_tokenizer *t) { return t->pad_id; }
tok_mode tok_get_mode(const tok_tokenizer *t) { return t->mode; }
size_t tok_memory_bytes(const tok_tokenizer *t) { return t->mem_bytes; }

size_t tok_eos_ids(const tok_tokenizer *t, const int32_t **ids)
{
    *ids = t->eos_ids;
    return t->n_eos;
}

bool tok_add_bos(const tok_tokenizer *t)
{
    return t->bos_id >= 0 && t->post.n_pre > 0 && t->post.pre_ids[0] == t->bos_id;
}

int32_t tok_token_to_id(const tok_tokenizer *t, const char *token, size_t len)
{
    return tok_vocab_find(&t->vocab, token, len);
}

const char *tok_id_to_token(const tok_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= t->vocab.n || t->vocab.ent[id].off == UINT32_MAX) return NULL;
    if (len) *len = t->vocab.ent[id].len;
    return t->vocab.pool + t->vocab.ent[id].off;
}

bool tok_is_special(const tok_tokenizer *t, int32_t id)
{
    return id >= 0 && (size_t)id < t->vocab.n && t->is_special[id];
}

void tok_post_free(tok_post *p)
{
    for (size_t i = 0; i < p->n_children; i++) tok_post_free(&p->children[i]);
    free(p->children);
    free(p->pre_ids);
    free(p->post_ids);
    memset(p, 0, sizeof *p);
}
