/* api_reasoning_harmony — the gpt-oss reasoning parser (harmony channels),
 * see api_reasoning.h.
 *
 * DESIGN: two states over the held bytes.  OUT (between messages): text
 * up to the next <|start|> or <|channel|> is content; <|start|> + the
 * role up to <|channel|> is dropped; after <|channel|> the header is
 * read up to <|message|> (at most HDR_MAX bytes, else it is content).
 * BODY: up to <|end|>, <|return|> or <|call|>, by channel: analysis ->
 * reasoning, final / commentary -> content, a message with a recipient
 * (" to=") -> content with its header and <|call|> kept, raw, for the
 * gpt-oss tool-call parser.  A tail that may begin a marker is held until
 * the next delta decides it, so any split gives the pieces of the whole
 * text. */
#include "api/api_reasoning.h"

#include <stdlib.h>
#include <string.h>

#define HDR_MAX 512

static const char M_START[] = "<|start|>", M_CHANNEL[] = "<|channel|>", M_MESSAGE[] = "<|message|>";
static const char *const M_ENDS[] = {"<|end|>", "<|return|>", "<|call|>"};

typedef enum { CH_CONTENT = 0, CH_REASONING, CH_TOOL } hchan;

typedef struct hparser {
    bool stream;                 /* stream_reasoning */
    bool in_body;
    hchan chan;
    char *buf;                   /* (len) owned: held back */
    size_t len, cap;
    char *acc;                   /* (acc_len) owned: reasoning held (stream false) */
    size_t acc_len, acc_cap;
} hparser;

static int grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    char *q = realloc(*p, nc);
    if (!q) return -1;
    *p = q, *cap = nc;
    return 0;
}

static const char *find(const char *s, size_t n, const char *t)
{
    size_t l = strlen(t);
    for (size_t i = 0; i + l <= n; i++)
        if (!memcmp(s + i, t, l)) return s + i;
    return NULL;
}

/* longest suffix of s[0..n) that is a proper prefix of t */
static size_t partial(const char *s, size_t n, const char *t)
{
    size_t l = strlen(t);
    for (size_t k = n < l - 1 ? n : l - 1; k > 0; k--)
        if (!memcmp(s + n - k, t, k)) return k;
    return 0;
}

static void consume(hparser *p, size_t n)
{
    memmove(p->buf, p->buf + n, p->len - n);
    p->len -= n;
}

static int out(hparser *p, hchan c, const char *s, size_t n, api_pieces *o)
{
    if (!n) return 0;
    if (c != CH_REASONING) return api_pieces_add(o, API_PIECE_CONTENT, s, n, 0);
    if (p->stream) return api_pieces_add(o, API_PIECE_REASONING, s, n, 0);
    if (grow(&p->acc, &p->acc_cap, p->acc_len + n)) return -1;
    memcpy(p->acc + p->acc_len, s, n);
    p->acc_len += n;
    return 0;
}

static int flush_reasoning(hparser *p, api_pieces *o)
{
    int rc = p->acc_len ? api_pieces_add(o, API_PIECE_REASONING, p->acc, p->acc_len, 0) : 0;
    p->acc_len = 0;
    return rc;
}

static int step(hparser *p, bool final, api_pieces *o)
{
    for (;;) {
        if (p->in_body) {
            const char *best = NULL;
            int bi = -1;
            for (int k = 0; k < 3; k++) {
                const char *f = find(p->buf, p->len, M_ENDS[k]);
                if (f && (!best || f < best)) best = f, bi = k;
            }
            if (best) {
                size_t at = (size_t)(best - p->buf), el = strlen(M_ENDS[bi]);
                if (out(p, p->chan, p->buf, at, o)) return -1;
                if (p->chan == CH_TOOL && out(p, CH_TOOL, best, el, o)) return -1;
                if (p->chan == CH_REASONING && flush_reasoning(p, o)) return -1;
                consume(p, at + el);
                p->in_body = false;
                continue;
            }
            size_t keep = 0;
            if (!final)
                for (int k = 0; k < 3; k++) {
                    size_t q = partial(p->buf, p->len, M_ENDS[k]);
                    if (q > keep) keep = q;
                }
            if (out(p, p->chan, p->buf, p->len - keep, o)) return -1;
            consume(p, p->len - keep);
            return final ? flush_reasoning(p, o) : 0;
        }
        /* between messages */
        const char *st = find(p->buf, p->len, M_START), *ch = find(p->buf, p->len, M_CHANNEL);
        const char *m = st && (!ch || st < ch) ? st : ch;
        if (!m) {
            size_t keep = final ? 0 : partial(p->buf, p->len, M_START);
            size_t k2 = final ? 0 : partial(p->buf, p->len, M_CHANNEL);
            if (k2 > keep) keep = k2;
            if (out(p, CH_CONTENT, p->buf, p->len - keep, o)) return -1;
            consume(p, p->len - keep);
            return 0;
        }
        size_t at = (size_t)(m - p->buf);
        if (out(p, CH_CONTENT, p->buf, at, o)) return -1;
        consume(p, at);
        if (m == st) { /* <|start|>ROLE: dropped up to <|channel|> */
            const char *c2 = find(p->buf, p->len < HDR_MAX ? p->len : HDR_MAX, M_CHANNEL);
            if (c2) {
                consume(p, (size_t)(c2 - p->buf));
                continue;
            }
            if (!final && p->len < HDR_MAX) return 0;
            if (out(p, CH_CONTENT, p->buf, strlen(M_START), o)) return -1; /* not a header: text */
            consume(p, strlen(M_START));
            continue;
        }
        /* <|channel|>HEADER<|message|> */
        const char *msg = find(p->buf, p->len < HDR_MAX ? p->len : HDR_MAX, M_MESSAGE);
        if (!msg) {
            if (!final && p->len < HDR_MAX) return 0;
            if (out(p, CH_CONTENT, p->buf, strlen(M_CHANNEL), o)) return -1;
            consume(p, strlen(M_CHANNEL));
            continue;
        }
        size_t hl = (size_t)(msg - p->buf) + strlen(M_MESSAGE);
        const char *h = p->buf + strlen(M_CHANNEL);
        size_t hn = (size_t)(msg - h);
        if (find(h, hn, " to=") || find(h, hn, "to=") == h) {
            p->chan = CH_TOOL;
            if (out(p, CH_TOOL, p->buf, hl, o)) return -1;
        } else {
            p->chan = hn >= 8 && !memcmp(h, "analysis", 8) ? CH_REASONING : CH_CONTENT;
        }
        consume(p, hl);
        p->in_body = true;
    }
}

static int hp_feed(api_output_parser *self, const char *text, size_t len, bool final, api_pieces *o)
{
    hparser *p = self->state;
    if (grow(&p->buf, &p->cap, p->len + len + 1)) return -1;
    if (len) memcpy(p->buf + p->len, text, len);
    p->len += len;
    return step(p, final, o);
}

static void hp_destroy(api_output_parser *self)
{
    hparser *p = self->state;
    if (p) free(p->buf), free(p->acc), free(p);
    free(self);
}

api_output_parser *api_reasoning_harmony_new(const api_reasoning_spec *d, bool stream_reasoning)
{
    api_output_parser *o = calloc(1, sizeof *o);
    hparser *p = calloc(1, sizeof *p);
    if (!o || !p) {
        free(o), free(p);
        return NULL;
    }
    p->stream = stream_reasoning;
    o->name = d->name;
    o->state = p;
    o->feed = hp_feed;
    o->destroy = hp_destroy;
    return o;
}
