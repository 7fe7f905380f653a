/* cli_bserve — SSE answer parsing and ShareGPT loading for bench-serving.
 *
 * DESIGN: see cli_bserve.h.  Lines end at "\n" (a trailing "\r" is dropped);
 * only `data:` lines matter, everything else (comments, `event:`, blank
 * separators) is skipped, as SGLang's client does.  A line longer than
 * 64 MiB is treated as an allocation failure. */
#include "cli/cli_bserve.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_BSERVE_MAX_LINE ((size_t)64 << 20)

void cli_bserve_stream_init(cli_bserve_stream *s, cli_bserve_backend b, double t_start)
{
    memset(s, 0, sizeof *s);
    s->backend = b;
    s->t_start = t_start;
    s->ttft = -1.0;
    s->completion_tokens = -1;
    s->prompt_tokens = -1;
}

void cli_bserve_stream_free(cli_bserve_stream *s)
{
    free(s->itl);
    free(s->text);
    free(s->error);
    free(s->line);
    memset(s, 0, sizeof *s);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static void set_text(cli_bserve_stream *s, const char *t, size_t n, bool append)
{
    size_t base = append ? s->text_len : 0;
    if (!grow((void **)&s->text, &s->text_cap, base + n + 1, 1)) {
        s->oom = true;
        return;
    }
    memcpy(s->text + base, t, n);
    s->text_len = base + n;
    s->text[s->text_len] = '\0';
}

/* A chunk carrying k >= 1 new tokens arrived at t. */
static void record(cli_bserve_stream *s, int64_t k, double t)
{
    s->chunks++;
    if (s->ttft < 0) {
        s->ttft = t - s->t_start;
    } else {
        if (k < 1) k = 1;
        if (k > ((int64_t)1 << 20)) k = (int64_t)1 << 20; /* a hostile count cannot blow up memory */
        if (!grow((void **)&s->itl, &s->cap_itl, s->n_itl + (size_t)k, sizeof(double))) {
            s->oom = true;
            return;
        }
        double g = (t - s->t_last) / (double)k;
        for (int64_t i = 0; i < k; i++) s->itl[s->n_itl++] = g;
    }
    s->t_last = t;
}

static void set_error(cli_bserve_stream *s, json_t *e)
{
    if (s->error) return;
    const char *m = NULL;
    if (json_is_string(e)) m = json_string_value(e);
    else if (json_is_object(e) && json_is_string(json_object_get(e, "message")))
        m = json_string_value(json_object_get(e, "message"));
    char *txt = m ? NULL : json_dumps(e, JSON_COMPACT);
    s->error = strdup(m ? m : txt ? txt : "error event in the stream");
    free(txt);
    if (!s->error) s->oom = true;
}

static void usage_of(cli_bserve_stream *s, json_t *u)
{
    if (!json_is_object(u)) return;
    json_t *c = json_object_get(u, "completion_tokens"), *p = json_object_get(u, "prompt_tokens");
    if (json_is_integer(c)) s->completion_tokens = json_integer_value(c);
    if (json_is_integer(p)) s->prompt_tokens = json_integer_value(p);
}

static void event(cli_bserve_stream *s, const char *d, size_t n, double t)
{
    while (n && (*d == ' ' || *d == '\t')) d++, n--;
    if (n == 6 && !memcmp(d, "[DONE]", 6)) {
        s->done = true;
        return;
    }
    json_t *o = json_loadb(d, n, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return;
    }
    json_t *e = json_object_get(o, "error");
    if (e && !json_is_null(e)) {
        set_error(s, e);
        json_decref(o);
        return;
    }
    if (s->backend == CLI_BSERVE_SGLANG) {
        json_t *txt = json_object_get(o, "text"), *meta = json_object_get(o, "meta_info");
        int64_t prev = s->completion_tokens > 0 ? s->completion_tokens : 0, k = 0;
        json_t *ct = json_is_object(meta) ? json_object_get(meta, "completion_tokens") : NULL;
        json_t *pt = json_is_object(meta) ? json_object_get(meta, "prompt_tokens") : NULL;
        if (json_is_integer(pt)) s->prompt_tokens = json_integer_value(pt);
        bool changed = json_is_string(txt) &&
                       (json_string_length(txt) != s->text_len ||
                        (s->text_len && memcmp(json_string_value(txt), s->text, s->text_len)));
        if (json_is_integer(ct)) {
            k = json_integer_value(ct) - prev;
            if (json_integer_value(ct) > prev) s->completion_tokens = json_integer_value(ct);
            if (s->completion_tokens < 0) s->completion_tokens = 0;
        } else if (changed) {
            k = 1;
        }
        if (changed) set_text(s, json_string_value(txt), json_string_length(txt), false);
        if (k > 0) record(s, k, t);
    } else {
        usage_of(s, json_object_get(o, "usage"));
        json_t *ch = json_object_get(o, "choices");
        json_t *c0 = json_is_array(ch) ? json_array_get(ch, 0) : NULL;
        json_t *txt = NULL;
        if (json_is_object(c0)) {
            if (s->backend == CLI_BSERVE_OAI) txt = json_object_get(c0, "text");
            else {
                json_t *delta = json_object_get(c0, "delta");
                txt = json_is_object(delta) ? json_object_get(delta, "content") : NULL;
            }
        }
        if (json_is_string(txt) && json_string_length(txt) > 0) {
            set_text(s, json_string_value(txt), json_string_length(txt), true);
            record(s, 1, t);
        }
    }
    json_decref(o);
}

static void line(cli_bserve_stream *s, const char *l, size_t n, double t)
{
    if (n && l[n - 1] == '\r') n--;
    if (n >= 5 && !memcmp(l, "data:", 5)) event(s, l + 5, n - 5, t);
}

void cli_bserve_stream_feed(cli_bserve_stream *s, const char *data, size_t n, double t)
{
    while (n) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (s->line_len + take > CLI_BSERVE_MAX_LINE) {
            s->oom = true;
            s->line_len = 0;
        } else if (nl && s->line_len == 0) {
            line(s, data, take, t); /* whole line in this feed: no copy */
        } else {
            if (!grow((void **)&s->line, &s->line_cap, s->line_len + take + 1, 1)) {
                s->oom = true;
                return;
            }
            memcpy(s->line + s->line_len, data, take);
            s->line_len += take;
            if (nl) {
                line(s, s->line, s->line_len, t);
                s->line_len = 0;
            }
        }
        if (!nl) return;
        data += take + 1;
        n -= take + 1;
    }
}

void cli_bserve_stream_finish(cli_bserve_stream *s, double t)
{
    if (s->line_len) line(s, s->line, s->line_len, t);
    s->line_len = 0;
}

void cli_bserve_convs_free(cli_bserve_conv *c, size_t n)
{
    if (!c) return;
    for (size_t i = 0; i < n; i++) {
        free(c[i].prompt);
        free(c[i].completion);
    }
    free(c);
}

int cli_bserve_sharegpt_parse(const char *json, size_t len, cli_bserve_conv **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root) {
        snprintf(err, errlen, "not JSON (line %d: %s)", je.line, je.text);
        return -1;
    }
    if (!json_is_array(root)) {
        json_decref(root);
        snprintf(err, errlen, "a ShareGPT file is a JSON array of {\"conversations\": [...]} objects");
        return -1;
    }
    size_t cnt = json_array_size(root), k = 0;
    cli_bserve_conv *c = calloc(cnt ? cnt : 1, sizeof *c);
    if (!c) {
        json_decref(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < cnt; i++) {
        json_t *conv = json_object_get(json_array_get(root, i), "conversations");
        if (!json_is_array(conv) || json_array_size(conv) < 2) continue;
        json_t *p = json_object_get(json_array_get(conv, 0), "value");
        json_t *q = json_object_get(json_array_get(conv, 1), "value");
        if (!json_is_string(p) || !json_is_string(q)) continue;
        c[k].prompt = strndup(json_string_value(p), json_string_length(p));
        c[k].completion = strndup(json_string_value(q), json_string_length(q));
        if (!c[k].prompt || !c[k].completion) {
            cli_bserve_convs_free(c, k + 1);
            json_decref(root);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        k++;
    }
    json_decref(root);
    *out = c;
    *n = k;
    return 0;
}
