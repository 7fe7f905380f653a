/* api_reasoning — see api_reasoning.h. */
#include "api/api_reasoning.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const api_reasoning_spec detectors[] = {
    {"deepseek-r1", "<think>", "</think>", NULL, true, API_THINK_ALWAYS, false},
    {"deepseek-v3", "<think>", "</think>", "<tool_call>", false, API_THINK_EXPLICIT_THINKING, false},
    /* SGLang's Glm45Detector: <tool_call> also ends the reasoning; enable_thinking switches it */
    {"glm45", "<think>", "</think>", "<tool_call>", false, API_THINK_ENABLE_THINKING, false},
    {"gpt-oss", "<|channel|>analysis<|message|>", "<|end|>", NULL, true, API_THINK_ALWAYS, true},
    {"kimi", "\xe2\x97\x81think\xe2\x96\xb7", "\xe2\x97\x81/think\xe2\x96\xb7", NULL, false, API_THINK_ALWAYS, false},
    {"qwen3", "<think>", "</think>", "<tool_call>", false, API_THINK_ENABLE_THINKING, false},
    {"qwen3-thinking", "<think>", "</think>", "<tool_call>", true, API_THINK_ENABLE_THINKING, false},
    {"step3", "<think>", "</think>", NULL, true, API_THINK_ALWAYS, false},
};

const api_reasoning_spec *api_reasoning_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof detectors / sizeof detectors[0]; i++)
        if (!strcasecmp(name, detectors[i].name)) return &detectors[i];
    return NULL;
}

bool api_reasoning_enabled(const api_reasoning_spec *d, int enable_thinking, int thinking)
{
    switch (d->mode) {
    case API_THINK_ENABLE_THINKING: return enable_thinking != 0;
    case API_THINK_EXPLICIT_THINKING: return thinking == 1;
    default: return true;
    }
}

typedef enum { ST_HEAD, ST_REASON, ST_CONTENT } rstate;

typedef struct rparser {
    const api_reasoning_spec *d;
    bool stream;                 /* stream_reasoning */
    rstate st;
    bool reason_begun;           /* a reasoning byte was passed (leading start tags are over) */
    char *buf;                   /* (len) owned: held back */
    size_t len, cap;
    char *acc;                   /* (acc_len) owned: reasoning held (stream false) */
    size_t acc_len, acc_cap;
} rparser;

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

/* Is s[0..n) a proper prefix of tag? */
static bool proper_prefix(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    return n < tl && !memcmp(s, tag, n);
}

/* The length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *s, size_t n, const char *tag)
{
    if (!tag) return 0;
    size_t tl = strlen(tag);
    for (size_t k = n < tl - 1 ? n : tl - 1; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

static const char *find(const char *s, size_t n, const char *tag)
{
    if (!tag) return NULL;
    size_t tl = strlen(tag);
    for (size_t i = 0; i + tl <= n; i++)
        if (!memcmp(s + i, tag, tl)) return s + i;
    return NULL;
}

/* Reasoning bytes out: streamed as a piece, or held in acc. */
static int reason_out(rparser *p, const char *s, size_t n, api_pieces *out)
{
    if (!n) return 0;
    p->reason_begun = true;
    if (p->stream) return api_pieces_add(out, API_PIECE_REASONING, s, n, 0);
    if (grow(&p->acc, &p->acc_cap, p->acc_len + n)) return -1;
    memcpy(p->acc + p->acc_len, s, n);
    p->acc_len += n;
    return 0;
}

static int reason_flush(rparser *p, api_pieces *out)
{
    int rc = p->acc_len ? api_pieces_add(out, API_PIECE_REASONING, p->acc, p->acc_len, 0) : 0;
    p->acc_len = 0;
    return rc;
}

static void consume(rparser *p, size_t n)
{
    memmove(p->buf, p->buf + n, p->len - n);
    p->len -= n;
}

/* Run the state machine over the held bytes.  final: nothing more comes. */
static int step(rparser *p, bool final, api_pieces *out)
{
    const api_reasoning_spec *d = p->d;
    size_t sl = strlen(d->start), el = strlen(d->end);
    for (;;) {
        if (p->st == ST_CONTENT) {
            int rc = p->len ? api_pieces_add(out, API_PIECE_CONTENT, p->buf, p->len, 0) : 0;
            p->len = 0;
            return rc;
        }
        if (!p->reason_begun) {
            /* the head: leading start tags are dropped */
            if (!final && proper_prefix(p->buf, p->len, d->start)) return 0;
            if (p->len >= sl && !memcmp(p->buf, d->start, sl)) {
                consume(p, sl);
                p->st = ST_REASON;
                continue;
            }
            if (p->st == ST_HEAD) {
                if (!p->len && !final) return 0;
                p->st = d->force ? ST_REASON : ST_CONTENT;
                if (p->st == ST_CONTENT) continue;
            }
            if (!p->len) {
                if (final) return reason_flush(p, out);
                return 0;
            }
        }
        /* inside the reasoning */
        const char *e = find(p->buf, p->len, d->end), *t = find(p->buf, p->len, d->tool_start);
        if (e || t) {
            bool at_end = e && (!t || e <= t);
            size_t at = (size_t)((at_end ? e : t) - p->buf);
            if (reason_out(p, p->buf, at, out) || reason_flush(p, out)) return -1;
            p->reason_begun = true;
            consume(p, at + (at_end ? el : 0)); /* the tool-call tag stays content */
            p->st = ST_CONTENT;
            continue;
        }
        size_t keep = 0;
        if (!final) {
            size_t k1 = partial_suffix(p->buf, p->len, d->end), k2 = partial_suffix(p->buf, p->len, d->tool_start);
            keep = k1 > k2 ? k1 : k2;
        }
        if (reason_out(p, p->buf, p->len - keep, out)) return -1;
        consume(p, p->len - keep);
        return final ? reason_flush(p, out) : 0;
    }
}

static int rp_feed(api_output_parser *self, const char *text, size_t len, bool final, api_pieces *out)
{
    rparser *p = self->state;
    if (grow(&p->buf, &p->cap, p->len + len + 1)) return -1;
    if (len) memcpy(p->buf + p->len, text, len);
    p->len += len;
    return step(p, final, out);
}

static void rp_destroy(api_output_parser *self)
{
    rparser *p = self->state;
    if (p) free(p->buf), free(p->acc), free(p);
    free(self);
}

api_output_parser *api_reasoning_parser_new(const api_reasoning_spec *d, bool stream_reasoning)
{
    if (d->harmony) return api_reasoning_harmony_new(d, stream_reasoning);
    api_output_parser *o = calloc(1, sizeof *o);
    rparser *p = calloc(1, sizeof *p);
    if (!o || !p) {
        free(o), free(p);
        return NULL;
    }
    p->d = d;
    p->stream = stream_reasoning;
    o->name = d->name;
    o->state = p;
    o->feed = rp_feed;
    o->destroy = rp_destroy;
    return o;
}

int api_reasoning_separate(const api_reasoning_spec *d, const char *text, size_t len, char **text_out,
                           char **reasoning_out)
{
    *text_out = *reasoning_out = NULL;
    api_output_parser *o = api_reasoning_parser_new(d, true);
    if (!o) return -1;
    api_pieces ps = {0};
    int rc = o->feed(o, text, len, true, &ps);
    o->destroy(o);
    if (!rc) {
        *text_out = api_pieces_join(&ps, API_PIECE_CONTENT);
        *reasoning_out = api_pieces_join(&ps, API_PIECE_REASONING);
    }
    api_pieces_free(&ps);
    if (rc || !*text_out || !*reasoning_out) {
        free(*text_out), free(*reasoning_out);
        *text_out = *reasoning_out = NULL;
        return -1;
    }
    return 0;
}
