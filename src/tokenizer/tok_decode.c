/* tok_decode — ids to text: the decoder chain (ByteLevel, ByteFallback,
 * Fuse, Strip, Replace, Metaspace, WordPiece, BPEDecoder, Sequence), HF's
 * clean_up_tokenization, and the incremental (streaming) detokenizer.
 *
 * DESIGN: a decoder maps a list of token strings to a list of strings, as in
 * the tokenizers crate.  The list is one buffer plus spans (tok_strs); each
 * stage writes a fresh list.  Invalid UTF-8 from byte tokens becomes U+FFFD
 * (one per maximal invalid subsequence, as String::from_utf8_lossy and
 * transformers.js), so output is always valid.
 *
 * Streaming (tok_stream) follows SGLang's detokenizer: decode a window
 * ids[prefix..] and emit what it adds beyond the text of the context tokens
 * ids[prefix..read], holding back text that is not final yet: trailing
 * U+FFFD (an unfinished character) and, when clean_up_tokenization_spaces is
 * on, a space near the end that a following token may delete. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/log.h"

typedef struct tok_strs {
    tok_buf buf;
    tok_piece *v; /* (n) spans of buf */
    size_t n, cap;
} tok_strs;

static int strs_push(tok_strs *l, const char *s, size_t n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        tok_piece *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    size_t off = l->buf.n;
    if (tok_buf_put(&l->buf, s, n)) return -1;
    l->v[l->n].off = (uint32_t)off;
    l->v[l->n].len = (uint32_t)n;
    l->n++;
    return 0;
}

/* Start a new string at the end of the list and return its index; text is
 * then appended with strs_append. */
static int strs_open(tok_strs *l)
{
    if (strs_push(l, "", 0)) return -1;
    return 0;
}

static int strs_append(tok_strs *l, const char *s, size_t n)
{
    if (tok_buf_put(&l->buf, s, n)) return -1;
    l->v[l->n - 1].len += (uint32_t)n;
    return 0;
}

static void strs_free(tok_strs *l)
{
    tok_buf_free(&l->buf);
    free(l->v);
    memset(l, 0, sizeof *l);
}

#define STR(l, i) ((l)->buf.p + (l)->v[i].off)
#define LEN(l, i) ((size_t)(l)->v[i].len)

static int byte_table[324]; /* bytes_to_unicode inverse: code point -> byte, -1 = none */
static pthread_once_t byte_table_once = PTHREAD_ONCE_INIT;

static void byte_table_init(void)
{
    for (int i = 0; i < 324; i++) byte_table[i] = -1;
    for (unsigned b = 0; b < 256; b++) byte_table[tok_bytelevel_cp(b)] = (int)b;
}

static int byte_of_cp(int32_t cp)
{
    pthread_once(&byte_table_once, byte_table_init);
    return cp >= 0 && cp < 324 ? byte_table[cp] : -1;
}

static int dec_bytelevel(const tok_tokenizer *t, const uint8_t *added, const tok_strs *in, tok_strs *out)
{
    (void)t;
    tok_buf raw = {0};
    int rc = -1;
    size_t i = 0;
    while (i < in->n) {
        if (added && added[i]) {
            if (strs_push(out, STR(in, i), LEN(in, i))) goto done;
            i++;
            continue;
        }
        raw.n = 0;
        for (; i < in->n && !(added && added[i]); i++) {
            const char *s = STR(in, i);
            size_t n = LEN(in, i);
            for (size_t k = 0; k < n;) {
                size_t l = tok_utf8_valid_len((const unsigned char *)s + k, n - k);
                if (!l) l = 1;
                int32_t cp = l == 1 ? (unsigned char)s[k] : tok_utf8_decode(s + k, &l);
                int b = byte_of_cp(cp);
                if (b >= 0) { if (tok_buf_putc(&raw, (char)b)) goto done; }
                else if (tok_buf_put(&raw, s + k, l)) goto done;
                k += l;
            }
        }
        if (strs_open(out)) goto done;
        tok_buf clean = {0};
        if (tok_utf8_sanitize(&clean, raw.p ? raw.p : "", raw.n) || strs_append(out, clean.p ? clean.p : "", clean.n)) {
            tok_buf_free(&clean);
            goto done;
        }
        tok_buf_free(&clean);
    }
    rc = 0;
done:
    tok_buf_free(&raw);
    return rc;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int flush_bytes(tok_buf *bytes, tok_strs *out)
{
    if (!bytes->n) return 0;
    /* invalid UTF-8 -> U+FFFD per maximal subpart (transformers.js, which
     * our fixtures follow; the Rust crate writes one per byte).  This rule
     * also keeps decode(prefix) a prefix of decode(all) up to trailing
     * U+FFFD, which streaming relies on. */
    tok_buf clean = {0};
    int rc = tok_utf8_sanitize(&clean, bytes->p, bytes->n);
    if (!rc) rc = strs_push(out, clean.p ? clean.p : "", clean.n);
    tok_buf_free(&clean);
    bytes->n = 0;
    return rc;
}

static int dec_bytefallback(const tok_strs *in, tok_strs *out)
{
    tok_buf bytes = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = STR(in, i);
        size_t n = LEN(in, i);
        int hi, lo;
        if (n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && (hi = hexval(s[3])) >= 0 && (lo = hexval(s[4])) >= 0) {
            rc = tok_buf_putc(&bytes, (char)(hi * 16 + lo));
            continue;
        }
        rc = flush_bytes(&bytes, out);
        if (!rc) rc = strs_push(out, s, n);
    }
    if (!rc) rc = flush_bytes(&bytes, out);
    tok_buf_free(&bytes);
    return rc;
}

static int replace_all(const char *s, size_t n, const tok_regex *re, const char *with, size_t with_n,
                       tok_buf *out, pcre2_match_data *md)
{
    size_t pos = 0, search = 0;
    while (search <= n) {
        size_t ms, me;
        int r = tok_regex_next(re, s, n, search, md, &ms, &me);
        if (r < 0) return -1;
        if (r == 0) break;
        if (tok_buf_put(out, s + pos, ms - pos) || tok_buf_put(out, with, with_n)) return -1;
        pos = me;
        if (me == ms) {
            if (me >= n) break;
            size_t l = tok_utf8_valid_len((const unsigned char *)s + me, n - me);
            if (!l) l = 1;
            if (tok_buf_put(out, s + me, l)) return -1;
            pos = me + l;
        }
        search = pos;
    }
    return tok_buf_put(out, s + pos, n - pos);
}

static int cleanup(tok_buf *b);

static int run_decoder(const tok_tokenizer *t, const tok_decoder *d, const uint8_t *added, tok_strs *in,
                       tok_strs *out, pcre2_match_data *md)
{
    out->n = 0;
    out->buf.n = 0;
    switch (d->kind) {
    case TOK_DEC_SEQUENCE: {
        tok_strs a = {0};
        size_t orig_n = in->n;
        for (size_t i = 0; i < in->n; i++)
            if (strs_push(&a, STR(in, i), LEN(in, i))) { strs_free(&a); return -1; }
        for (size_t c = 0; c < d->n_children; c++) {
            /* the added-token mask describes the list while it is 1:1 */
            const uint8_t *mask = a.n == orig_n ? added : NULL;
            if (run_decoder(t, &d->children[c], mask, &a, out, md)) { strs_free(&a); return -1; }
            tok_strs tmp = a;
            a = *out;
            *out = tmp;
        }
        strs_free(out);
        *out = a;
        return 0;
    }
    case TOK_DEC_BYTELEVEL: return dec_bytelevel(t, added, in, out);
    case TOK_DEC_BYTEFALLBACK: return dec_bytefallback(in, out);
    case TOK_DEC_FUSE:
        if (strs_open(out)) return -1;
        for (size_t i = 0; i < in->n; i++)
            if (strs_append(out, STR(in, i), LEN(in, i))) return -1;
        return 0;
    case TOK_DEC_STRIP:
        for (size_t i = 0; i < in->n; i++) {
            const char *s = STR(in, i);
            size_t b = 0, e = LEN(in, i);
            for (int k = 0; k < d->start && e - b >= d->str_n && !memcmp(s + b, d->str, d->str_n); k++) b += d->str_n;
            for (int k = 0; k < d->stop && e - b >= d->str_n && !memcmp(s + e - d->str_n, d->str, d->str_n); k++)
                e -= d->str_n;
            if (strs_push(out, s + b, e - b)) return -1;
        }
        return 0;
    case TOK_DEC_REPLACE:
        for (size_t i = 0; i < in->n; i++) {
            tok_buf r = {0};
            if (replace_all(STR(in, i), LEN(in, i), &d->pattern, d->str, d->str_n, &r, md) ||
                strs_push(out, r.p ? r.p : "", r.n)) {
                tok_buf_free(&r);
                return -1;
            }
            tok_buf_free(&r);
        }
        return 0;
    case TOK_DEC_METASPACE:
        for (size_t i = 0; i < in->n; i++) {
            tok_buf r = {0};
            if (replace_all(STR(in, i), LEN(in, i), &d->pattern, " ", 1, &r, md)) { tok_buf_free(&r); return -1; }
            size_t skip = (i == 0 && d->start && r.n && r.p[0] == ' ') ? 1 : 0;
            int rc = strs_push(out, r.p ? r.p + skip : "", r.n - skip);
            tok_buf_free(&r);
            if (rc) return -1;
        }
        return 0;
    case TOK_DEC_WORDPIECE:
        for (size_t i = 0; i < in->n; i++) {
            const char *s = STR(in, i);
            size_t n = LEN(in, i);
            if (strs_open(out)) return -1;
            if (i != 0) {
                if (d->str_n && n >= d->str_n && !memcmp(s, d->str, d->str_n)) { s += d->str_n; n -= d->str_n; }
                else if (strs_append(out, " ", 1)) return -1;
            }
            if (strs_append(out, s, n)) return -1;
            if (d->cleanup) { /* per token, as the crate and transformers.js */
                tok_buf tb = {0};
                size_t start = out->v[out->n - 1].off, len = out->v[out->n - 1].len;
                if (tok_buf_put(&tb, out->buf.p + start, len)) return -1;
                cleanup(&tb);
                out->buf.n = start;
                out->v[out->n - 1].len = 0;
                int rc = strs_append(out, tb.p, tb.n);
                tok_buf_free(&tb);
                if (rc) return -1;
            }
        }
        return 0;
    case TOK_DEC_BPE:
        for (size_t i = 0; i < in->n; i++) {
            tok_buf r = {0};
            tok_regex lit = {.literal = true, .lit = d->str, .lit_n = d->str_n};
            const char *with = i + 1 == in->n ? "" : " ";
            if (replace_all(STR(in, i), LEN(in, i), &lit, with, strlen(with), &r, md) ||
                strs_push(out, r.p ? r.p : "", r.n)) {
                tok_buf_free(&r);
                return -1;
            }
            tok_buf_free(&r);
        }
        return 0;
    }
    return -1;
}

static bool decoder_has_wordpiece_cleanup(const tok_decoder *d)
{
    if (!d) return false;
    if (d->kind == TOK_DEC_WORDPIECE && d->cleanup) return true;
    for (size_t i = 0; i < d->n_children; i++)
        if (decoder_has_wordpiece_cleanup(&d->children[i])) return true;
    return false;
}

/* HF's clean_up_tokenization, pass by pass in its order. */
static int cleanup(tok_buf *b)
{
    static const char *from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
    static const char *to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
    for (size_t k = 0; k < sizeof from / sizeof from[0]; k++) {
        size_t fl = strlen(from[k]), tl = strlen(to[k]), w = 0;
        for (size_t r = 0; r < b->n;) {
            if (r + fl <= b->n && !memcmp(b->p + r, from[k], fl)) {
                memmove(b->p + w, to[k], tl);
                w += tl;
                r += fl;
            } else {
                b->p[w++] = b->p[r++];
            }
        }
        b->n = w;
        if (b->cap) b->p[w] = 0;
    }
    return 0;
}

/* Decode a run of token strings through the decoder (or join with " " when
 * there is none, as HF), appending to out. */
static int decode_tokens(const tok_tokenizer *t, tok_strs *toks, const uint8_t *added, tok_buf *out,
                         pcre2_match_data *md)
{
    if (!t->decoder) {
        for (size_t i = 0; i < toks->n; i++) {
            if (i && tok_buf_putc(out, ' ')) return -1;
            if (tok_buf_put(out, STR(toks, i), LEN(toks, i))) return -1;
        }
        return 0;
    }
    tok_strs res = {0};
    int rc = run_decoder(t, t->decoder, added, toks, &res, md);
    for (size_t i = 0; i < res.n && !rc; i++) rc = tok_buf_put(out, STR(&res, i), LEN(&res, i));
    strs_free(&res);
    return rc;
}

static int decode_impl(const tok_tokenizer *t, const int32_t *ids, size_t n, const tok_decode_opts *o,
                       tok_buf *out)
{
    tok_strs toks = {0};
    uint8_t *added = malloc(n + 1);
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    int rc = -1;
    if (!added || !md) goto done;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (size_t)id >= t->vocab.n || t->vocab.ent[id].off == UINT32_MAX) {
            log_error("token id %d is not in the vocabulary (size %zu)", id, t->vocab.n);
            goto done;
        }
        if (o->skip_special_tokens && t->is_special[id]) continue;
        if (strs_push(&toks, t->vocab.pool + t->vocab.ent[id].off, t->vocab.ent[id].len)) goto done;
        added[k++] = t->is_added[id];
    }
    if (t->mode == TOK_MODE_SLOW) {
        /* slow tokenizer: decode the runs between added tokens separately
         * and join the pieces with " " when spaces_between_special_tokens */
        bool first = true;
        for (size_t i = 0; i < toks.n;) {
            if (!first && o->spaces_between_special_tokens && tok_buf_putc(out, ' ')) goto done;
            first = false;
            if (added[i]) {
                if (tok_buf_put(out, STR(&toks, i), LEN(&toks, i))) goto done;
                i++;
                continue;
            }
            tok_strs run = {0};
            size_t j = i;
            for (; j < toks.n && !added[j]; j++)
                if (strs_push(&run, STR(&toks, j), LEN(&toks, j))) { strs_free(&run); goto done; }
            int r = decode_tokens(t, &run, NULL, out, md);
            strs_free(&run);
            if (r) goto done;
            i = j;
        }
    } else if (decode_tokens(t, &toks, added, out, md)) {
        goto done;
    }
    if (t->model.eow_suffix_n) {
        tok_buf r = {0};
        tok_regex lit = {.literal = true, .lit = t->model.eow_suffix, .lit_n = t->model.eow_suffix_n};
        if (replace_all(out->p ? out->p : "", out->n, &lit, " ", 1, &r, md)) { tok_buf_free(&r); goto done; }
        tok_buf_free(out);
        *out = r;
        if (o->skip_special_tokens) { /* trim, as transformers.js */
            size_t b = 0, e = out->n;
            while (b < e && out->p[b] == ' ') b++;
            while (e > b && out->p[e - 1] == ' ') e--;
            memmove(out->p, out->p + b, e - b);
            out->n = e - b;
        }
    }
    if (t->clean_up_spaces) cleanup(out);
    if (tok_buf_put(out, "", 0)) goto done;
    rc = 0;
done:
    strs_free(&toks);
    free(added);
    pcre2_match_data_free(md);
    return rc;
}

int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, const tok_decode_opts *opts, char **out,
               size_t *out_len)
{
    tok_decode_opts o = opts ? *opts : (tok_decode_opts){0};
    tok_buf b = {0};
    *out = NULL;
    if (decode_impl(t, ids, n, &o, &b)) {
        tok_buf_free(&b);
        return -1;
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return 0;
}

void tok_decoder_free(tok_decoder *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n_children; i++) tok_decoder_free(&d->children[i]);
    free(d->children);
    free(d->str);
    tok_regex_free(&d->pattern);
}

/* ---- streaming -------------------------------------------------------- */
struct tok_stream {
    const tok_tokenizer *t; /* borrowed */
    tok_decode_opts opts;
    tok_ids ids;            /* every id fed so far */
    size_t prefix, read;    /* window ids[prefix..], context ids[prefix..read] */
    size_t emitted;         /* bytes of decode(ids[prefix..]) already emitted */
};

tok_stream *tok_stream_create(const tok_tokenizer *t, const tok_decode_opts *opts)
{
    tok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->t = t;
    if (opts) s->opts = *opts;
    return s;
}

void tok_stream_destroy(tok_stream *s)
{
    if (!s) return;
    tok_ids_free(&s->ids);
    free(s);
}

/* Bytes of d[0..n) that are final: drop trailing U+FFFD (maybe an unfinished
 * character) and, with cleanup on, anything from a space in the last four
 * bytes (" n't" is the longest pattern). */
static size_t final_len(const tok_stream *s, const char *d, size_t n)
{
    while (n >= 3 && !memcmp(d + n - 3, "\xEF\xBF\xBD", 3)) n -= 3;
    if (s->t->clean_up_spaces || decoder_has_wordpiece_cleanup(s->t->decoder)) {
        size_t lo = n > 4 ? n - 4 : 0;
        for (size_t i = lo; i < n; i++)
            if (d[i] == ' ') { n = i; break; }
    }
    if (s->t->model.eow_suffix_n)
        while (n && d[n - 1] == ' ') n--;
    return n;
}

static int stream_step(tok_stream *s, bool finish, char **out, size_t *out_len, char **held, size_t *held_len)
{
    tok_buf res = {0};
    char *d = NULL;
    size_t dn = 0;
    *out = NULL;
    if (held) *held = NULL;
    const int32_t *window = s->ids.ids ? s->ids.ids + s->prefix : NULL; /* no ids yet: NULL, n = 0 */
    if (tok_decode(s->t, window, s->ids.n - s->prefix, &s->opts, &d, &dn)) return -1;
    size_t fin = finish ? dn : final_len(s, d, dn);
    if (fin > s->emitted && tok_buf_put(&res, d + s->emitted, fin - s->emitted)) { free(d); return -1; }
    if (fin > s->emitted) s->emitted = fin;
    if (held) { /* the decoded text not final yet: d[emitted..dn) */
        size_t hn = dn > s->emitted ? dn - s->emitted : 0;
        *held = malloc(hn + 1);
        if (!*held) {
            free(d);
            tok_buf_free(&res);
            return -1;
        }
        if (hn) memcpy(*held, d + s->emitted, hn);
        (*held)[hn] = 0;
        if (held_len) *held_len = hn;
    }
    if (fin == dn && !finish) {
        /* Everything is out: slide the window.  The new context is the last
         * token that decodes to something (a skipped special token would
         * let Strip / Metaspace treat the next token as the first one),
         * through the end. */
        size_t p = s->ids.n;
        while (p > s->read) {
            int32_t id = s->ids.ids[p - 1];
            if (!(s->opts.skip_special_tokens && s->t->is_special[id])) break;
            p--;
        }
        if (p > s->read) {
            p--;
            size_t ctx_len = 0;
            char *c = NULL;
            if (tok_decode(s->t, s->ids.ids + p, s->ids.n - p, &s->opts, &c, &ctx_len)) {
                free(d);
                tok_buf_free(&res);
                if (held) free(*held), *held = NULL;
                return -1;
            }
            free(c);
            s->prefix = p;
            s->read = s->ids.n;
            s->emitted = ctx_len;
        }
    }
    free(d);
    if (tok_buf_put(&res, "", 0)) {
        if (held) free(*held), *held = NULL;
        return -1;
    }
    *out = res.p;
    if (out_len) *out_len = res.n;
    return 0;
}

int tok_stream_push(tok_stream *s, const int32_t *ids, size_t n, char **out, size_t *out_len)
{
    return tok_stream_push_held(s, ids, n, out, out_len, NULL, NULL);
}

int tok_stream_push_held(tok_stream *s, const int32_t *ids, size_t n, char **out, size_t *out_len, char **held,
                         size_t *held_len)
{
    if (held) *held = NULL;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (size_t)id >= s->t->vocab.n || s->t->vocab.ent[id].off == UINT32_MAX) {
            log_error("token id %d is not in the vocabulary", id);
            *out = NULL;
            return -1;
        }
        if (tok_ids_push(&s->ids, id)) return -1;
    }
    return stream_step(s, false, out, out_len, held, held_len);
}

int tok_stream_finish(tok_stream *s, char **out, size_t *out_len)
{
    return stream_step(s, true, out, out_len, NULL, NULL);
}
