/* tok_jsonscan — a strict, allocation-free scanner for the two large members
 * of tokenizer.json: model.vocab ({"token": id, ...}) and model.merges
 * (["a b", ...] or [["a", "b"], ...]).
 *
 * DESIGN / why this exists: jansson builds a tree node per value and reads
 * the text a character at a time; on Qwen3's 11 MB tokenizer.json it takes
 * ~620 ms to parse and ~220 ms to free (measured, docs/notes/tok.md), while
 * the load budget is 150 ms.  Nearly all of those bytes are the vocab and
 * merges, which have a fixed, simple shape.  So the loader (tok_load.c)
 * uses this scanner to find those two spans, lets jansson parse the rest of
 * the document with the spans replaced by {} and [], and streams the spans
 * through the callbacks below.  Anything this scanner does not accept with
 * certainty (odd shapes, duplicate keys, bad escapes, invalid UTF-8, a
 * non-integer id) makes the loader fall back to jansson for the whole
 * document, so behaviour on unusual files is jansson's.  Fuzzed by
 * tests/fuzz/fuzz_tokenizer_json.c. */
#include <string.h>

#include "tokenizer/tok_internal.h"

#define MAX_DEPTH 128

static const char *ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static int hex4(const char *p, const char *e, unsigned *out)
{
    if (e - p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}

/* Decode the JSON string at p (which must be '"') into out (cleared first)
 * when out != NULL.  Returns the position after the closing quote, or NULL
 * if the string is not valid JSON with valid UTF-8. */
static const char *scan_string(const char *p, const char *e, tok_buf *out)
{
    if (p >= e || *p != '"') return NULL;
    p++;
    if (out) out->n = 0;
    for (;;) {
        const char *q = p;
        while (q < e && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20 && !((unsigned char)*q & 0x80)) q++;
        if (out && q > p && tok_buf_put(out, p, (size_t)(q - p))) return NULL;
        p = q;
        if (p >= e) return NULL;
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            if (out && tok_buf_put(out, "", 0)) return NULL;
            return p + 1;
        }
        if (c < 0x20) return NULL;
        if (c & 0x80) {
            size_t l = tok_utf8_valid_len((const unsigned char *)p, (size_t)(e - p));
            if (!l) return NULL;
            if (out && tok_buf_put(out, p, l)) return NULL;
            p += l;
            continue;
        }
        /* escape */
        if (e - p < 2) return NULL;
        char x = p[1];
        char one;
        switch (x) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': {
            unsigned u;
            if (hex4(p + 2, e, &u)) return NULL;
            p += 6;
            int32_t cp = (int32_t)u;
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned lo;
                if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, e, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return NULL; /* lone surrogate: jansson rejects it too */
                cp = 0x10000 + (int32_t)(((u - 0xD800) << 10) | (lo - 0xDC00));
                p += 6;
            } else if (u >= 0xDC00 && u <= 0xDFFF) {
                return NULL;
            }
            /* U+0000 is allowed: tokens are length-delimited here (jansson
             * refuses it in object keys, so only this path loads such files) */
            if (out) {
                char b[4];
                int l = tok_utf8_encode(cp, b);
                if (tok_buf_put(out, b, (size_t)l)) return NULL;
            }
            continue;
        }
        default: return NULL;
        }
        if (out && tok_buf_put(out, &one, 1)) return NULL;
        p += 2;
    }
}

/* Position after the JSON value at p, or NULL. */
static const char *skip_value(const char *p, const char *e, int depth)
{
    p = ws(p, e);
    if (p >= e || depth > MAX_DEPTH) return NULL;
    char c = *p;
    if (c == '"') return scan_string(p, e, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p = ws(p + 1, e);
        if (p < e && *p == close) return p + 1;
        for (;;) {
            if (c == '{') {
                p = scan_string(ws(p, e), e, NULL);
                if (!p) return NULL;
                p = ws(p, e);
                if (p >= e || *p != ':') return NULL;
                p++;
            }
            p = skip_value(p, e, depth + 1);
            if (!p) return NULL;
            p = ws(p, e);
            if (p >= e) return NULL;
            if (*p == close) return p + 1;
            if (*p != ',') return NULL;
            p++;
        }
    }
    /* literal or number: the characters that can make one up */
    const char *q = p;
    while (q < e && (strchr("0123456789+-.eE", *q) || (*q >= 'a' && *q <= 'z')) && *q) q++;
    return q > p ? q : NULL;
}

/* Iterate the members of the object at p; fn gets the decoded key and the
 * value's span.  Returns the position after the object or NULL. */
typedef int (*member_fn)(void *ctx, const char *key, size_t klen, const char *v, const char *ve);

static const char *each_member(const char *p, const char *e, tok_buf *kb, member_fn fn, void *ctx)
{
    p = ws(p, e);
    if (p >= e || *p != '{') return NULL;
    p = ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        p = scan_string(ws(p, e), e, kb);
        if (!p) return NULL;
        p = ws(p, e);
        if (p >= e || *p != ':') return NULL;
        const char *v = ws(p + 1, e);
        const char *ve = skip_value(v, e, 1);
        if (!ve) return NULL;
        if (fn && fn(ctx, kb->p, kb->n, v, ve)) return NULL;
        p = ws(ve, e);
        if (p >= e) return NULL;
        if (*p == '}') return p + 1;
        if (*p != ',') return NULL;
        p++;
    }
}

typedef struct find_ctx {
    const char *model, *model_e;
    const char *vocab, *vocab_e, *merges, *merges_e;
    int n_model, n_vocab, n_merges;
} find_ctx;

static int top_member(void *vctx, const char *k, size_t kl, const char *v, const char *ve)
{
    find_ctx *c = vctx;
    if (kl == 5 && !memcmp(k, "model", 5)) { c->model = v; c->model_e = ve; c->n_model++; }
    return 0;
}

static int model_member(void *vctx, const char *k, size_t kl, const char *v, const char *ve)
{
    find_ctx *c = vctx;
    if (kl == 5 && !memcmp(k, "vocab", 5)) { c->vocab = v; c->vocab_e = ve; c->n_vocab++; }
    if (kl == 6 && !memcmp(k, "merges", 6)) { c->merges = v; c->merges_e = ve; c->n_merges++; }
    return 0;
}

int tok_jsonscan_find(const char *doc, size_t n, tok_span *vocab, tok_span *merges)
{
    const char *e = doc + n;
    find_ctx c = {0};
    tok_buf kb = {0};
    const char *end = each_member(doc, e, &kb, top_member, &c);
    if (end && ws(end, e) != e) end = NULL; /* trailing garbage */
    if (end && c.n_model == 1 && *c.model == '{') end = each_member(c.model, c.model_e, &kb, model_member, &c);
    tok_buf_free(&kb);
    if (!end || c.n_model != 1 || c.n_vocab != 1 || c.n_merges > 1 || *c.vocab != '{') return -1;
    if (c.n_merges && *c.merges != '[') return -1;
    vocab->off = (size_t)(c.vocab - doc);
    vocab->len = (size_t)(c.vocab_e - c.vocab);
    merges->off = c.n_merges ? (size_t)(c.merges - doc) : 0;
    merges->len = c.n_merges ? (size_t)(c.merges_e - c.merges) : 0;
    return 0;
}

typedef struct vocab_ctx {
    int (*fn)(void *ctx, const char *tok, size_t n, int32_t id);
    void *ctx;
} vocab_ctx;

static int vocab_member(void *vctx, const char *k, size_t kl, const char *v, const char *ve)
{
    vocab_ctx *c = vctx;
    /* a non-negative integer without leading zeros, at most 8 digits */
    size_t len = (size_t)(ve - v);
    if (len == 0 || len > 8 || (v[0] == '0' && len > 1)) return -1;
    int32_t id = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        id = id * 10 + (v[i] - '0');
    }
    return c->fn(c->ctx, k, kl, id);
}

int tok_jsonscan_vocab(const char *doc, tok_span s, int (*fn)(void *ctx, const char *tok, size_t n, int32_t id),
                       void *ctx)
{
    tok_buf kb = {0};
    vocab_ctx c = {fn, ctx};
    const char *e = doc + s.off + s.len;
    const char *end = each_member(doc + s.off, e, &kb, vocab_member, &c);
    tok_buf_free(&kb);
    return end == e ? 0 : -1;
}

int tok_jsonscan_merges(const char *doc, tok_span s,
                        int (*fn)(void *ctx, const char *a, size_t an, const char *b, size_t bn, size_t index),
                        void *ctx)
{
    const char *p = doc + s.off, *e = doc + s.off + s.len;
    tok_buf a = {0}, b = {0};
    int rc = -1;
    size_t index = 0;
    if (p >= e || *p != '[') goto done;
    p = ws(p + 1, e);
    if (p < e && *p == ']') { rc = (p + 1 == e) ? 0 : -1; goto done; }
    for (;;) {
        p = ws(p, e);
        if (p >= e) goto done;
        if (*p == '"') {
            p = scan_string(p, e, &a);
            if (!p) goto done;
            char *sp = memchr(a.p, ' ', a.n);
            if (!sp) goto done;
            size_t an = (size_t)(sp - a.p);
            const char *bs = sp + 1;
            const char *sp2 = memchr(bs, ' ', a.n - an - 1);
            size_t bn = sp2 ? (size_t)(sp2 - bs) : a.n - an - 1;
            if (fn(ctx, a.p, an, bs, bn, index)) goto done;
        } else if (*p == '[') {
            p = scan_string(ws(p + 1, e), e, &a);
            if (!p) goto done;
            p = ws(p, e);
            if (p >= e || *p != ',') goto done;
            p = scan_string(ws(p + 1, e), e, &b);
            if (!p) goto done;
            p = ws(p, e);
            if (p >= e || *p != ']') goto done;
            p++;
            if (fn(ctx, a.p, a.n, b.p, b.n, index)) goto done;
        } else {
            goto done;
        }
        index++;
        p = ws(p, e);
        if (p >= e) goto done;
        if (*p == ']') { rc = (p + 1 == e) ? 0 : -1; goto done; }
        if (*p != ',') goto done;
        p++;
    }
done:
    tok_buf_free(&a);
    tok_buf_free(&b);
    return rc;
}
