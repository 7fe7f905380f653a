/* api_toolcall — see api_toolcall.h.  This file: the format table, the
 * parser object (feed / destroy), the helpers the state machines share
 * (held bytes, normal text, call pieces, JSON prefixes), the whole-text
 * parse and the tool_choice schema.  The machines: api_toolcall_fmt.c. */
#include "api/api_toolcall_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the formats ----------------------------------------------------------------------- */

#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

/* DeepSeek V3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> */
static const tc_framed fr_dsv3 = {DS_CALLS_BEGIN, DS_CALL_BEGIN, DS_CALLS_END, "function" DS_SEP, "\n", "```json",
                                  DS_CALL_END};
/* DeepSeek V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> */
static const tc_framed fr_dsv31 = {DS_CALLS_BEGIN, DS_CALL_BEGIN, DS_CALLS_END, NULL, DS_SEP, NULL, DS_CALL_END};
/* Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGS<|tool_call_end|>...<|tool_calls_section_end|> */
static const tc_framed fr_kimi = {"<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_calls_section_end|>",
                                  NULL, "<|tool_call_argument_begin|>", NULL, "<|tool_call_end|>"};
/* gpt-oss (harmony): <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|> */
static const tc_framed fr_gptoss = {"<|channel|>commentary to=", NULL, NULL, NULL, "<|message|>", NULL, "<|call|>"};
static const char *const drop_gptoss[] = {"<|start|>assistant", "<|channel|>final<|message|>",
                                          "<|channel|>commentary<|message|>", "<|end|>", "<|return|>", NULL};

static const api_toolcall_format formats[] = {
    {"hermes", TCF_HERMES, NULL, NULL, NULL, NULL},
    {"qwen", TCF_HERMES, NULL, NULL, NULL, NULL},
    {"qwen25", TCF_HERMES, NULL, NULL, NULL, NULL},
    {"llama3", TCF_LLAMA3, NULL, NULL, NULL, NULL},
    {"mistral", TCF_MISTRAL, NULL, NULL, NULL, NULL},
    {"json_array", TCF_JSON_ARRAY, NULL, NULL, NULL, NULL},
    {"deepseekv3", TCF_FRAMED, &fr_dsv3, NULL, NULL, NULL},
    {"deepseekv31", TCF_FRAMED, &fr_dsv31, NULL, NULL, NULL},
    {"kimi_k2", TCF_FRAMED, &fr_kimi, NULL, NULL, NULL},
    /* without the gpt-oss reasoning parser the analysis channel is dropped (SGLang's detector ignores it) */
    {"gpt-oss", TCF_FRAMED, &fr_gptoss, drop_gptoss, "<|channel|>analysis<|message|>", "<|end|>"},
    {"qwen3_coder", TCF_QWEN3_CODER, NULL, NULL, NULL, NULL},
    {"glm45", TCF_GLM45, NULL, NULL, NULL, NULL},
    {"glm", TCF_GLM45, NULL, NULL, NULL, NULL},
    {"pythonic", TCF_PYTHONIC, NULL, NULL, NULL, NULL},
};

const api_toolcall_format *api_toolcall_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (!strcasecmp(name, formats[i].name)) return &formats[i];
    return NULL;
}

const char *api_toolcall_format_name(const api_toolcall_format *f) { return f->name; }

/* ---- small helpers ------------------------------------------------------------------------ */

static int grow(char **b, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    char *g = realloc(*b, nc);
    if (!g) return -1;
    *b = g, *cap = nc;
    return 0;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

const char *tc_find(const char *hay, size_t n, const char *needle)
{
    size_t l = strlen(needle);
    if (!l || l > n) return NULL;
    for (size_t i = 0; i + l <= n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, l)) return hay + i;
    return NULL;
}

size_t tc_partial(const char *s, size_t n, const char *lit)
{
    size_t tl = strlen(lit);
    for (size_t k = n < tl - 1 ? n : tl - 1; k > 0; k--)
        if (!memcmp(s + n - k, lit, k)) return k;
    return 0;
}

/* The length of a valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t l = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!l || l > n || (l == 2 && c < 0xc2) || (l == 4 && c > 0xf4)) return 0;
    for (size_t k = 1; k < l; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    if (l == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))) return 0;
    if (l == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))) return 0;
    return l;
}

char *tc_json_quote(const char *s, size_t n)
{
    /* a JSON string literal; bytes that are not UTF-8 become U+FFFD */
    size_t cap = n * 6 + 3, o = 0;
    char *r = malloc(cap);
    if (!r) return NULL;
    r[o++] = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            r[o++] = '\\', r[o++] = (char)c, i++;
        } else if (c < 0x20) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (e) memcpy(r + o, e, 2), o += 2;
            else o += (size_t)snprintf(r + o, 7, "\\u%04x", c);
            i++;
        } else {
            size_t l = utf8_len((const unsigned char *)s + i, n - i);
            if (l) {
                memcpy(r + o, s + i, l), o += l, i += l;
            } else {
                memcpy(r + o, "\xef\xbf\xbd", 3), o += 3, i++;
            }
        }
    }
    r[o++] = '"';
    r[o] = 0;
    return r;
}

/* ---- emission ------------------------------------------------------------------------------- */

static int text_out(tc_parser *p, const char *s, size_t n)
{
    if (!n) return 0;
    return api_pieces_add(p->out, API_PIECE_CONTENT, s, n, 0);
}

int tc_text(tc_parser *p, const char *s, size_t n)
{
    if (p->strip_lead) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return 0;
        p->strip_lead = false;
    }
    size_t k = n;
    while (k && is_ws(s[k - 1])) k--;
    if (k) {
        if (text_out(p, p->ws, p->ws_len) || text_out(p, s, k)) return -1;
        p->ws_len = 0;
        p->head = false;
    }
    if (n > k) {
        if (grow(&p->ws, &p->ws_cap, p->ws_len + n - k + 1)) return -1;
        memcpy(p->ws + p->ws_len, s + k, n - k);
        p->ws_len += n - k;
    }
    return 0;
}

/* Is name among the tools (or are there no tools to check against)? */
static bool name_known(const tc_parser *p, const char *name)
{
    if (!p->tools || !json_array_size(p->tools)) return true;
    return api_toolcall_tool(p->tools, name) != NULL;
}

int tc_call_begin(tc_parser *p, const char *name, size_t n)
{
    free(p->name);
    p->name = malloc(n + 1);
    if (!p->name) return -1;
    memcpy(p->name, name, n);
    p->name[n] = 0;
    p->ws_len = 0; /* the whitespace before a call is dropped */
    p->head = false;
    p->any_call = p->in_call = true;
    p->skip = !n || memchr(name, 0, n) || !name_known(p, p->name);
    p->args_any = p->args_str_done = false;
    p->args_sent = 0;
    p->n_params = 0;
    if (p->skip) return 0;
    return api_pieces_add(p->out, API_PIECE_TOOL_NAME, name, n, p->index);
}

int tc_call_args(tc_parser *p, const char *s, size_t n)
{
    if (!n) return 0;
    p->args_any = true;
    if (p->skip) return 0;
    return api_pieces_add(p->out, API_PIECE_TOOL_CALL, s, n, p->index);
}

int tc_call_end(tc_parser *p)
{
    if (!p->in_call) return 0;
    if (!p->args_any && tc_call_args(p, "{}", 2)) return -1;
    if (!p->skip) p->index++;
    p->in_call = p->skip = false;
    p->strip_lead = true;
    free(p->name), p->name = NULL;
    free(p->key), p->key = NULL;
    return 0;
}

int tc_give_back(tc_parser *p, int text_state)
{
    const char *m = p->marker ? p->marker : "";
    p->marker = NULL;
    p->st = text_state;
    p->head = false;
    return tc_text(p, m, strlen(m));
}

static int scan(tc_parser *p, const char *const *markers, int n_markers, bool final, int *which, bool emit)
{
    const char *s = tc_data(p);
    size_t n = tc_avail(p);
    const char *best = NULL;
    int bi = -1;
    for (int k = 0; k < n_markers; k++) {
        size_t lim = best ? (size_t)(best - s) + strlen(markers[k]) : n;
        const char *at = tc_find(s, lim < n ? lim : n, markers[k]);
        if (at && (!best || at < best)) best = at, bi = k;
    }
    if (best) {
        size_t at = (size_t)(best - s);
        if (emit && tc_text(p, s, at)) return -1;
        tc_consume(p, at + strlen(markers[bi]));
        *which = bi;
        return 1;
    }
    size_t keep = 0;
    if (!final)
        for (int k = 0; k < n_markers; k++) {
            size_t q = tc_partial(s, n, markers[k]);
            if (q > keep) keep = q;
        }
    if (emit && tc_text(p, s, n - keep)) return -1;
    tc_consume(p, n - keep);
    return 0;
}

int tc_scan_text(tc_parser *p, const char *const *markers, int n_markers, bool final, int *which)
{
    return scan(p, markers, n_markers, final, which, true);
}

int tc_seek(tc_parser *p, const char *const *markers, int n_markers, bool final, int *which)
{
    return scan(p, markers, n_markers, final, which, false);
}

int tc_skip_ws(tc_parser *p)
{
    const char *s = tc_data(p);
    size_t n = tc_avail(p), i = 0;
    while (i < n && is_ws(s[i])) i++;
    tc_consume(p, i);
    return i < n;
}

int tc_expect(tc_parser *p, const char *lit, bool final)
{
    const char *s = tc_data(p);
    size_t n = tc_avail(p), i = 0, l = strlen(lit);
    while (i < n && is_ws(s[i])) i++;
    if (i == n) return final ? -1 : 0;
    if (n - i >= l) {
        if (memcmp(s + i, lit, l)) return -1;
        tc_consume(p, i + l);
        return 1;
    }
    return !memcmp(s + i, lit, n - i) && !final ? 0 : -1;
}

/* ---- JSON prefixes ----------------------------------------------------------------------------- */

#define JS_MAX_DEPTH 128

static void js_ws(const char *s, size_t n, size_t *i)
{
    while (*i < n && is_ws(s[*i])) (*i)++;
}

static int js_string(const char *s, size_t n, size_t *i)
{
    size_t k = *i + 1;
    while (k < n) {
        unsigned char c = (unsigned char)s[k];
        if (c == '"') {
            *i = k + 1;
            return 1;
        }
        if (c < 0x20) {
            *i = k;
            return -1;
        }
        if (c == '\\') {
            if (k + 1 >= n) break;
            char e = s[k + 1];
            if (e == 'u') {
                for (int h = 0; h < 4; h++) {
                    if (k + 2 + (size_t)h >= n) {
                        *i = n;
                        return 0;
                    }
                    char x = s[k + 2 + h];
                    if (!((x >= '0' && x <= '9') || (x >= 'a' && x <= 'f') || (x >= 'A' && x <= 'F'))) {
                        *i = k + 2 + (size_t)h; /* the bad byte: an error is never before bytes already passed */
                        return -1;
                    }
                }
                k += 6;
                continue;
            }
            if (!e || !strchr("\"\\/bfnrt", e)) {
                *i = k + 1;
                return -1;
            }
            k += 2;
            continue;
        }
        k++;
    }
    *i = n;
    return 0;
}

static int js_number(const char *s, size_t n, size_t *i, bool final)
{
    size_t k = *i;
    if (k < n && s[k] == '-') k++;
    size_t d0 = k;
    while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    if (k == n) goto end;
    if (k == d0) goto bad;
    if (s[k] == '.') {
        size_t f0 = ++k;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        if (k == n) goto end;
        if (k == f0) goto bad;
    }
    if (s[k] == 'e' || s[k] == 'E') {
        k++;
        if (k < n && (s[k] == '+' || s[k] == '-')) k++;
        size_t e0 = k;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        if (k == n) goto end;
        if (k == e0) goto bad;
    }
    *i = k;
    return 1;
end:
    /* the input ends inside the number: complete only at final, when it has digits */
    if (final && k > d0 && s[k - 1] >= '0' && s[k - 1] <= '9') {
        *i = k;
        return 1;
    }
    *i = n;
    return final ? -1 : 0;
bad:
    *i = k;
    return -1;
}

static int js_lit(const char *s, size_t n, size_t *i, const char *lit)
{
    size_t l = strlen(lit), k = 0;
    while (k < l && *i + k < n) {
        if (s[*i + k] != lit[k]) {
            *i += k;
            return -1;
        }
        k++;
    }
    if (k < l) {
        *i = n;
        return 0;
    }
    *i += l;
    return 1;
}

static int js_val(const char *s, size_t n, size_t *i, bool final, int depth)
{
    js_ws(s, n, i);
    if (*i >= n) return 0;
    char c = s[*i];
    if (c == '"') return js_string(s, n, i);
    if (c == 't') return js_lit(s, n, i, "true");
    if (c == 'f') return js_lit(s, n, i, "false");
    if (c == 'n') return js_lit(s, n, i, "null");
    if (c == '-' || (c >= '0' && c <= '9')) return js_number(s, n, i, final);
    if (c != '{' && c != '[') return -1;
    if (depth >= JS_MAX_DEPTH) return -1;
    bool obj = c == '{';
    (*i)++;
    js_ws(s, n, i);
    if (*i >= n) return 0;
    if (s[*i] == (obj ? '}' : ']')) {
        (*i)++;
        return 1;
    }
    for (;;) {
        if (obj) {
            js_ws(s, n, i);
            if (*i >= n) return 0;
            if (s[*i] != '"') return -1;
            int r = js_string(s, n, i);
            if (r <= 0) return r;
            js_ws(s, n, i);
            if (*i >= n) return 0;
            if (s[*i] != ':') return -1;
            (*i)++;
        }
        int r = js_val(s, n, i, final, depth + 1);
        if (r <= 0) return r;
        js_ws(s, n, i);
        if (*i >= n) return 0;
        if (s[*i] == ',') {
            (*i)++;
            continue;
        }
        if (s[*i] == (obj ? '}' : ']')) {
            (*i)++;
            return 1;
        }
        return -1;
    }
}

int tc_json_value(const char *s, size_t n, size_t *i, bool final) { return js_val(s, n, i, final, 0); }

/* Is the raw JSON key s[a, b) (quotes included) one of the words? */
static bool key_is(const char *s, size_t a, size_t b, const char *w)
{
    size_t l = strlen(w);
    return b - a == l + 2 && !memcmp(s + a + 1, w, l);
}

void tc_scan_wrap(const char *s, size_t n, bool final, size_t resume, tc_wrap *w)
{
    memset(w, 0, sizeof *w);
    size_t i = resume;
    bool have_args = resume > 0;
    if (!resume) {
        js_ws(s, n, &i);
        if (i >= n) return;
        if (s[i] != '{') {
            w->st = -1, w->end = i;
            return;
        }
        i++;
        js_ws(s, n, &i);
        if (i >= n) return;
        if (s[i] == '}') {
            w->st = 1, w->end = i + 1;
            return;
        }
    } else {
        goto after_value;
    }
    for (;;) {
        js_ws(s, n, &i);
        if (i >= n) return;
        if (s[i] != '"') goto bad;
        size_t ka = i;
        int r = js_string(s, n, &i);
        if (r < 0) goto bad;
        if (r == 0) return;
        size_t kb = i;
        js_ws(s, n, &i);
        if (i >= n) return;
        if (s[i] != ':') goto bad;
        i++;
        js_ws(s, n, &i);
        if (i >= n) return;
        size_t vs = i;
        if (!have_args && (key_is(s, ka, kb, "arguments") || key_is(s, ka, kb, "parameters"))) {
            w->at_args = true, w->as = vs;
            return;
        }
        bool is_name = !w->name_done && !w->ns && key_is(s, ka, kb, "name");
        if (is_name && s[vs] != '"') goto bad;
        r = js_val(s, n, &i, final, 1);
        if (is_name) {
            w->ns = vs;
            if (r == 1) w->name_done = true, w->ne = i;
        }
        if (r < 0) goto bad;
        if (r == 0) return;
    after_value:
        js_ws(s, n, &i);
        if (i >= n) return;
        if (s[i] == ',') {
            i++;
            continue;
        }
        if (s[i] == '}') {
            w->st = 1, w->end = i + 1;
            return;
        }
        goto bad;
    }
bad:
    w->st = -1, w->end = i;
}

/* ---- tool lookups and XML values ------------------------------------------------------------------- */

const json_t *api_toolcall_tool(const json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach((json_t *)tools, i, t)
    {
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) fn = t;
        json_t *nm = json_object_get(fn, "name");
        if (json_is_string(nm) && !strcmp(json_string_value(nm), name)) return fn;
    }
    return NULL;
}

const char *tc_param_type(const tc_parser *p, const char *param)
{
    if (!p->tools || !p->name || !param) return NULL;
    const json_t *fn = api_toolcall_tool(p->tools, p->name);
    json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
    json_t *ps = json_object_get(props, param);
    if (!json_is_object(ps)) return NULL;
    json_t *t = json_object_get(ps, "type");
    if (json_is_string(t)) return json_string_value(t);
    if (json_is_array(t)) { /* ["integer", "null"]: the first that is not null */
        size_t i;
        json_t *e;
        json_array_foreach(t, i, e) if (json_is_string(e) && strcmp(json_string_value(e), "null")) return json_string_value(e);
    }
    if (json_object_get(ps, "properties")) return "object";
    if (json_object_get(ps, "items")) return "array";
    return "string"; /* in the schema without a type (anyOf, enum...): kept as text */
}

char *tc_xml_value(const char *v, size_t n, const char *type, bool guess)
{
    if (type && !strcmp(type, "string")) return tc_json_quote(v, n);
    if (type || guess) {
        size_t a = 0, b = n;
        while (a < b && is_ws(v[a])) a++;
        while (b > a && is_ws(v[b - 1])) b--;
        if (type && !strcmp(type, "boolean")) {
            if (b - a == 4 && !strncasecmp(v + a, "true", 4)) return strdup("true");
            if (b - a == 5 && !strncasecmp(v + a, "false", 5)) return strdup("false");
        }
        size_t i = a;
        if (b > a && tc_json_value(v, b, &i, true) == 1 && i == b) {
            /* guessing: a bare word that happens to be JSON stays text only when it is a string */
            char *r = malloc(b - a + 1);
            if (!r) return NULL;
            memcpy(r, v + a, b - a);
            r[b - a] = 0;
            return r;
        }
    }
    return tc_json_quote(v, n);
}

/* ---- the parser object ---------------------------------------------------------------------------- */

static int tp_feed(api_output_parser *self, const char *text, size_t len, bool final, api_pieces *out)
{
    tc_parser *p = self->state;
    if (p->off) { /* compact */
        memmove(p->buf, p->buf + p->off, p->len - p->off);
        p->len -= p->off;
        p->off = 0;
    }
    if (grow(&p->buf, &p->cap, p->len + len + 1)) return -1;
    if (len) memcpy(p->buf + p->len, text, len);
    p->len += len;
    p->buf[p->len] = 0;
    p->out = out;
    tc_step_fn step = tc_step_of(p->f);
    int rc;
    for (int guard = 0; (rc = step(p, final)) == 1; guard++)
        if (guard > 100000000) return -1; /* cannot happen: every step consumes or changes state */
    if (rc < 0) return -1;
    if (final) {
        if (tc_call_end(p)) return -1;
        if (!p->any_call && p->ws_len && text_out(p, p->ws, p->ws_len)) return -1;
        p->ws_len = 0;
    }
    p->out = NULL;
    return 0;
}

static void tp_destroy(api_output_parser *self)
{
    tc_parser *p = self->state;
    if (p) {
        json_decref(p->tools);
        free(p->buf), free(p->ws), free(p->name), free(p->key), free(p);
    }
    free(self);
}

api_output_parser *api_toolcall_parser_new(const api_toolcall_format *f, const json_t *tools)
{
    api_output_parser *o = calloc(1, sizeof *o);
    tc_parser *p = calloc(1, sizeof *p);
    if (!o || !p) {
        free(o), free(p);
        return NULL;
    }
    p->f = f;
    p->tools = json_is_array(tools) ? json_incref((json_t *)tools) : NULL;
    p->head = true;
    o->name = f->name;
    o->state = p;
    o->feed = tp_feed;
    o->destroy = tp_destroy;
    return o;
}

int api_toolcall_collect(const api_pieces *ps, char **normal, json_t **calls)
{
    *normal = api_pieces_join(ps, API_PIECE_CONTENT);
    *calls = json_array();
    char **args = NULL;
    int n = 0, rc = *normal && *calls ? 0 : -1;
    for (int i = 0; !rc && i < ps->n; i++) {
        const api_piece *pc = &ps->v[i];
        if (pc->kind == API_PIECE_TOOL_NAME) {
            char **g = realloc(args, sizeof *g * (size_t)(n + 1));
            if (!g) {
                rc = -1;
                break;
            }
            args = g;
            args[n++] = NULL;
            json_array_append_new(*calls, json_pack("{s:i,s:s%,s:s}", "tool_index", pc->index, "name", pc->text,
                                                    pc->len, "parameters", ""));
        } else if (pc->kind == API_PIECE_TOOL_CALL) {
            int k = -1; /* the call of this index */
            for (int c = 0; c < n; c++)
                if (json_integer_value(json_object_get(json_array_get(*calls, (size_t)c), "tool_index")) == pc->index)
                    k = c;
            if (k < 0) continue;
            size_t ol = args[k] ? strlen(args[k]) : 0;
            char *g = realloc(args[k], ol + pc->len + 1);
            if (!g) {
                rc = -1;
                break;
            }
            memcpy(g + ol, pc->text, pc->len);
            g[ol + pc->len] = 0;
            args[k] = g;
        }
    }
    for (int c = 0; c < n; c++) {
        if (!rc)
            json_object_set_new(json_array_get(*calls, (size_t)c), "parameters", json_string(args[c] ? args[c] : ""));
        free(args[c]);
    }
    free(args);
    if (rc) {
        free(*normal), *normal = NULL;
        json_decref(*calls), *calls = NULL;
    }
    return rc;
}

int api_toolcall_parse(const api_toolcall_format *f, const json_t *tools, const char *text, size_t len,
                       char **normal, json_t **calls)
{
    *normal = NULL, *calls = NULL;
    api_output_parser *o = api_toolcall_parser_new(f, tools);
    if (!o) return -1;
    api_pieces ps = {0};
    int rc = o->feed(o, text, len, true, &ps);
    o->destroy(o);
    if (!rc) rc = api_toolcall_collect(&ps, normal, calls);
    api_pieces_free(&ps);
    return rc;
}

/* ---- tool_choice schema ------------------------------------------------------------------------------ */

static json_t *tool_item_schema(const json_t *fn)
{
    json_t *params = json_object_get(fn, "parameters");
    json_t *nm = json_object_get(fn, "name");
    /* "type": "object" stated: without it JSON Schema lets an item be any
     * value (properties only constrain objects) */
    return json_pack("{s:s,s:{s:{s:s,s:[O]},s:o},s:[s,s]}", "type", "object", "properties", "name", "type", "string",
                     "enum", nm, "parameters",
                     json_is_object(params) ? json_incref(params)
                                            : json_pack("{s:s,s:{}}", "type", "object", "properties"),
                     "required", "name", "parameters");
}

json_t *api_toolcall_schema(const json_t *tools, const char *named, bool parallel)
{
    json_t *items;
    if (named) {
        const json_t *fn = api_toolcall_tool(tools, named);
        if (!fn) return NULL;
        items = tool_item_schema(fn);
    } else {
        json_t *any = json_array();
        size_t i;
        json_t *t;
        json_array_foreach((json_t *)tools, i, t)
        {
            json_t *fn = json_object_get(t, "function");
            if (!json_is_object(fn)) fn = t;
            if (json_is_string(json_object_get(fn, "name"))) json_array_append_new(any, tool_item_schema(fn));
        }
        if (!json_array_size(any)) {
            json_decref(any);
            return NULL;
        }
        items = json_pack("{s:s,s:o}", "type", "object", "anyOf", any);
    }
    json_t *s = json_pack("{s:s,s:i,s:o}", "type", "array", "minItems", 1, "items", items);
    if (s && !parallel) json_object_set_new(s, "maxItems", json_integer(1));
    return s;
}

/* ---- tool_choice auto with strict tools: the structural tag -------------------------------------- */

json_t *api_toolcall_structural_tag(const api_toolcall_format *f, const json_t *tools)
{
    /* begin = pre + name + post, then the arguments (JSON), then end */
    const char *pre, *post, *end, *trigger;
    const char *n = f->name;
    if (f->family == TCF_HERMES) pre = "<tool_call>\n{\"name\": \"", post = "\", \"arguments\": ", end = "}\n</tool_call>", trigger = "<tool_call>";
    else if (f->family == TCF_LLAMA3) pre = "<|python_tag|>{\"name\": \"", post = "\", \"parameters\": ", end = "}", trigger = "<|python_tag|>";
    else if (f->family == TCF_MISTRAL) pre = "[TOOL_CALLS] [{\"name\": \"", post = "\", \"arguments\": ", end = "}]", trigger = "[TOOL_CALLS]";
    else if (!strcmp(n, "deepseekv3")) pre = DS_CALL_BEGIN "function" DS_SEP, post = "\n```json\n", end = "\n```" DS_CALL_END, trigger = DS_CALL_BEGIN;
    else if (!strcmp(n, "deepseekv31")) pre = DS_CALL_BEGIN, post = DS_SEP, end = DS_CALL_END, trigger = DS_CALL_BEGIN;
    else if (!strcmp(n, "kimi_k2")) pre = "<|tool_call_begin|>functions.", post = ":0<|tool_call_argument_begin|>", end = "<|tool_call_end|>", trigger = "<|tool_call_begin|>";
    else return NULL;
    json_t *structs = json_array();
    size_t i;
    json_t *t;
    json_array_foreach((json_t *)tools, i, t)
    {
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) fn = t;
        json_t *nm = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
        if (!json_is_string(nm)) continue;
        size_t bl = strlen(pre) + json_string_length(nm) + strlen(post) + 1;
        char *begin = malloc(bl);
        if (!begin) {
            json_decref(structs);
            return NULL;
        }
        snprintf(begin, bl, "%s%s%s", pre, json_string_value(nm), post);
        bool strict = json_is_true(json_object_get(fn, "strict"));
        json_array_append_new(structs, json_pack("{s:s,s:o,s:s}", "begin", begin, "schema",
                                                 strict && json_is_object(params) ? json_incref(params) : json_object(),
                                                 "end", end));
        free(begin);
    }
    return json_pack("{s:s,s:o,s:[s]}", "type", "structural_tag", "structures", structs, "triggers", trigger);
}
