/* api_toolcall_fmt — the formats' state machines (api_toolcall.h).
 *
 * DESIGN: each step looks at the held bytes (tc_data) from the current
 * state, consumes what the bytes settle and returns 1 to step again, or 0
 * to wait for more input.  A decision is taken only on bytes that settle
 * it whatever follows (at final: on what there is), so the machines give
 * the same pieces for every split of the input.  The members of a JSON
 * wrapper object around the arguments are rescanned at each step
 * (tc_scan_wrap: short); the arguments value itself goes once through the
 * push validator (tc_jpush, api_toolcall_json.c), so a long argument
 * streamed in many chunks costs its length, not length x chunks.
 *
 * Formats (SGLang's detectors, python/sglang/srt/function_call/):
 *   hermes, qwen, qwen25  <tool_call>\n{"name": N, "arguments": A}\n</tool_call> (repeated)
 *   llama3         [<|python_tag|>]{"name": N, "parameters": A}; {...}  (a JSON object
 *                  heading the output counts without the tag)
 *   mistral        [TOOL_CALLS] [{"name": N, "arguments": A}, ...]  or  [TOOL_CALLS]N[ARGS]A
 *   json_array     [{"name": N, "parameters": A}, ...] heading the output (tool_choice
 *                  required / named, SGLang's JsonArrayParser)
 *   deepseekv3     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\nA\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *   deepseekv31    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>A<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *   kimi_k2        <|tool_calls_section_begin|><|tool_call_begin|>functions.N:I<|tool_call_argument_begin|>A<|tool_call_end|>...<|tool_calls_section_end|>
 *   gpt-oss        <|channel|>commentary to=functions.N <|constrain|>json<|message|>A<|call|>
 *                  (the harmony frame markers of the final channel are dropped from the text)
 *   qwen3_coder    <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>...</function>\n</tool_call>
 *   glm45          <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...</tool_call>
 *   pythonic       [N(k=v, ...), ...]  (Python literals; <|python_start|>/<|python_end|> dropped)
 * XML values are typed by the tool's schema (string: as is; other
 * types: the JSON value when it parses); without a schema entry
 * qwen3_coder keeps the text, glm45 takes the JSON value when it parses. */
#include "api/api_toolcall_impl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    S_TEXT = 0,
    S_OBJ,        /* after a marker: a JSON object must follow */
    S_WRAP,       /* inside {"name", "arguments"} */
    S_HERMES_END, /* </tool_call> */
    S_HERMES_SKIP, /* a broken call body: dropped up to </tool_call> */
    S_LL_SEP,     /* llama3: ';' between calls */
    S_LL_NEXT,    /* llama3: after ';' */
    S_MI_HEAD,    /* mistral: after [TOOL_CALLS] */
    S_MI_NAME,    /* mistral: N[ARGS] */
    S_ARR_FIRST,  /* after '[': the first object */
    S_ARR_ELEM,   /* after ',': the next object */
    S_ARR_NEXT,   /* after an object: ',' or ']' */
    S_JARGS,      /* raw JSON arguments at the head, then p->after */
    S_FR_SECTION, /* framed: between calls */
    S_FR_NAMEPRE,
    S_FR_NAME,
    S_FR_ARGSPRE,
    S_FR_AFTER,   /* framed: up to the call's end marker */
    S_FR_SKIP,    /* framed: inside a dropped region, up to its close */
    S_Q_FUNC,
    S_Q_NAME,
    S_Q_BODY,
    S_Q_PNAME,
    S_Q_PVAL,
    S_Q_END,
    S_G_NAME,
    S_G_BODY,
    S_G_KEY,
    S_G_WAITV,
    S_G_VAL,
    S_P_CALL,
    S_P_ARGS,
    S_P_NEXT,
    S_P_SKIP,
    S_P_END,
};

#define NAME_MAX_LEN 512

static bool ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool ident0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool ident(char c) { return ident0(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; }

/* A growing string. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *g = realloc(b->s, nc);
        if (!g) {
            b->oom = true;
            return;
        }
        b->s = g, b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* Find term within the first `limit` bytes (the term may end past it):
 * 1 with *at, 0 not yet (wait), -1 not there (over the limit, or final). */
static int find_within(const tc_parser *p, const char *term, size_t limit, bool final, size_t *at)
{
    const char *s = tc_data(p);
    size_t n = tc_avail(p), tl = strlen(term), span = n < limit + tl ? n : limit + tl;
    const char *f = tc_find(s, span, term);
    if (f) {
        *at = (size_t)(f - s);
        return 1;
    }
    return final || n >= limit + tl ? -1 : 0;
}

/* A name from the text: trimmed, cut at whitespace or '<', a leading
 * "functions." and a trailing ":<digits>" (kimi's call id) removed. */
static int begin_named(tc_parser *p, const char *s, size_t n)
{
    size_t a = 0;
    while (a < n && ws(s[a])) a++;
    size_t b = a;
    while (b < n && !ws(s[b]) && s[b] != '<') b++;
    if (b - a > 10 && !memcmp(s + a, "functions.", 10)) a += 10;
    size_t c = b;
    while (c > a && s[c - 1] >= '0' && s[c - 1] <= '9') c--;
    if (c < b && c > a && s[c - 1] == ':') b = c - 1;
    return tc_call_begin(p, s + a, b - a);
}

/* Send the arguments value s[vs, upto) not sent yet; a JSON string value
 * (arguments given as a string) is sent decoded once complete. */
static int args_stream(tc_parser *p, const char *s, size_t vs, size_t upto, bool done)
{
    if (upto <= vs) return 0;
    if (s[vs] == '"') {
        if (!done || p->args_str_done) return 0;
        p->args_str_done = true;
        json_t *j = json_loadb(s + vs, upto - vs, JSON_DECODE_ANY, NULL);
        int rc = json_is_string(j) ? tc_call_args(p, json_string_value(j), json_string_length(j)) : 0;
        json_decref(j);
        return rc;
    }
    if (upto > vs + p->args_sent) {
        if (tc_call_args(p, s + vs + p->args_sent, upto - vs - p->args_sent)) return -1;
        p->args_sent = upto - vs;
    }
    return 0;
}

/* ---- the JSON wrapper object and raw JSON arguments ---- */

/* Leave S_WRAP / S_JARGS for state st (after consuming n bytes). */
static int json_leave(tc_parser *p, size_t n, int st)
{
    tc_consume(p, n);
    p->wphase = 0;
    p->st = st;
    return 1;
}

static int wrap_give_back(tc_parser *p)
{
    p->wphase = 0;
    return tc_give_back(p, S_TEXT) ? -1 : 1;
}

/* The wrapper object at the head of the held bytes, in three phases:
 * the members before the arguments (rescanned: short), the arguments
 * value (fed once to the push validator, its bytes streamed as they are
 * validated), the members after it (rescanned from its end). */
static int st_wrap(tc_parser *p, bool final)
{
    const char *s = tc_data(p);
    size_t n = tc_avail(p);
    tc_wrap w;
    if (p->wphase != 1) {
        tc_scan_wrap(s, n, final, p->wphase == 2 ? p->w_ae : 0, &w);
        if (!p->in_call && w.name_done) {
            json_t *nm = json_loadb(s + w.ns, w.ne - w.ns, JSON_DECODE_ANY, NULL);
            int rc = json_is_string(nm) ? tc_call_begin(p, json_string_value(nm), json_string_length(nm)) : 0;
            json_decref(nm);
            if (rc) return -1;
            /* arguments that came before the name */
            if (p->in_call && p->wphase == 2 && args_stream(p, s, p->w_as, p->w_ae, true)) return -1;
        }
        if (w.at_args && p->wphase == 0) {
            p->wphase = 1;
            p->w_as = p->w_pushed = w.as;
            tc_jpush_init(&p->jp);
        } else {
            if (w.st == 0 && !final) return 0;
            if (!p->in_call) return wrap_give_back(p);
            if (tc_call_end(p)) return -1;
            return json_leave(p, w.st == 0 ? n : w.end, p->after);
        }
    }
    /* phase 1: the arguments value */
    size_t used;
    int r = tc_jpush_feed(&p->jp, s + p->w_pushed, n - p->w_pushed, final, &used);
    p->w_pushed += used;
    if (p->in_call && args_stream(p, s, p->w_as, p->w_pushed, r == 1)) return -1;
    if (r == 1) {
        p->w_ae = p->w_pushed;
        p->wphase = 2;
        return 1;
    }
    if (r == 0 && !final) return 0;
    /* invalid, or cut short: a begun call keeps what was sent; hermes drops
     * the rest of a broken body up to its </tool_call> */
    if (!p->in_call) return wrap_give_back(p);
    if (tc_call_end(p)) return -1;
    return json_leave(p, r == 0 ? n : p->w_pushed, p->after == S_HERMES_END && r < 0 ? S_HERMES_SKIP : p->after);
}

/* Raw JSON arguments at the head (framed formats, mistral's [ARGS]). */
static int st_jargs(tc_parser *p, bool final)
{
    if (p->wphase == 0) {
        if (!tc_skip_ws(p)) {
            if (!final) return 0;
            if (tc_call_end(p)) return -1;
            return json_leave(p, 0, p->after);
        }
        p->wphase = 1;
        p->w_as = p->w_pushed = 0;
        tc_jpush_init(&p->jp);
    }
    const char *s = tc_data(p);
    size_t n = tc_avail(p), used;
    int r = tc_jpush_feed(&p->jp, s + p->w_pushed, n - p->w_pushed, final, &used);
    p->w_pushed += used;
    if (args_stream(p, s, 0, p->w_pushed, r == 1)) return -1;
    if (r == 0 && !final) return 0;
    if (tc_call_end(p)) return -1;
    return json_leave(p, r == 0 ? n : p->w_pushed, p->after);
}

/* After a marker: whitespace, then the object (else the marker is text). */
static int st_obj(tc_parser *p, bool final, bool give_back)
{
    const char *s = tc_data(p);
    size_t n = tc_avail(p), i = 0;
    while (i < n && ws(s[i])) i++;
    if (i == n && !final) return 0;
    if (i < n && s[i] == '{') {
        tc_consume(p, i);
        p->st = S_WRAP;
        return 1;
    }
    if (give_back) return tc_give_back(p, S_TEXT) ? -1 : 1;
    p->st = S_TEXT;
    return 1;
}

/* ---- the families ---- */

static int step_hermes(tc_parser *p, bool final)
{
    static const char *const m[] = {"<tool_call>"};
    int which, r;
    switch (p->st) {
    case S_TEXT:
        if ((r = tc_scan_text(p, m, 1, final, &which)) <= 0) return r;
        p->marker = m[0], p->after = S_HERMES_END, p->st = S_OBJ;
        return 1;
    case S_OBJ: return st_obj(p, final, true);
    case S_WRAP: return st_wrap(p, final);
    case S_HERMES_END:
        if ((r = tc_expect(p, "</tool_call>", final)) == 0) return 0;
        p->st = S_TEXT;
        return 1;
    case S_HERMES_SKIP: {
        static const char *const e[] = {"</tool_call>"};
        if ((r = tc_seek(p, e, 1, final, &which)) < 0) return -1;
        if (r == 0 && !final) return 0;
        p->st = S_TEXT;
        return 1;
    }
    }
    return -1;
}

static int step_llama3(tc_parser *p, bool final)
{
    static const char *const m[] = {"<|python_tag|>"};
    int which, r;
    switch (p->st) {
    case S_TEXT:
        if (p->head) { /* a JSON object heading the output is a call */
            const char *s = tc_data(p);
            size_t n = tc_avail(p), i = 0;
            while (i < n && ws(s[i])) i++;
            if (i == n) {
                if (tc_text(p, s, n)) return -1;
                tc_consume(p, n);
                return 0;
            }
            if (s[i] == '{') {
                if (tc_text(p, s, i)) return -1;
                tc_consume(p, i);
                p->marker = "", p->after = S_LL_SEP, p->st = S_WRAP, p->head = false;
                return 1;
            }
            p->head = false;
        }
        if ((r = tc_scan_text(p, m, 1, final, &which)) <= 0) return r;
        p->marker = m[0], p->after = S_LL_SEP, p->st = S_OBJ;
        return 1;
    case S_OBJ: return st_obj(p, final, true);
    case S_WRAP: return st_wrap(p, final);
    case S_LL_SEP:
        if ((r = tc_expect(p, ";", final)) == 0) return 0;
        p->st = r > 0 ? S_LL_NEXT : S_TEXT;
        return 1;
    case S_LL_NEXT:
        if ((r = tc_expect(p, m[0], final)) == 0) return 0;
        if (r > 0) {
            p->marker = m[0], p->st = S_OBJ;
            return 1;
        }
        p->marker = ";";
        p->st = tc_skip_ws(p) && tc_data(p)[0] == '{' ? S_WRAP : S_TEXT;
        return 1;
    }
    return -1;
}

/* mistral and json_array */
static int step_array(tc_parser *p, bool final)
{
    static const char *const m[] = {"[TOOL_CALLS]"};
    bool mistral = p->f->family == TCF_MISTRAL;
    int which, r;
    switch (p->st) {
    case S_TEXT:
        if (!mistral) {
            if (p->head) {
                const char *s = tc_data(p);
                size_t n = tc_avail(p), i = 0;
                while (i < n && ws(s[i])) i++;
                if (i == n) {
                    if (tc_text(p, s, n)) return -1;
                    tc_consume(p, n);
                    return 0;
                }
                p->head = false;
                if (s[i] == '[') {
                    if (tc_text(p, s, i)) return -1;
                    tc_consume(p, i + 1);
                    p->marker = "[", p->after = S_ARR_NEXT, p->st = S_ARR_FIRST;
                    return 1;
                }
            }
            return tc_scan_text(p, m, 0, final, &which);
        }
        if ((r = tc_scan_text(p, m, 1, final, &which)) <= 0) return r;
        p->marker = m[0], p->st = S_MI_HEAD;
        return 1;
    case S_MI_HEAD:
        if (!tc_skip_ws(p)) {
            if (!final) return 0;
            return tc_give_back(p, S_TEXT) ? -1 : 1;
        }
        if (tc_data(p)[0] == '[') {
            tc_consume(p, 1);
            p->marker = "[TOOL_CALLS] [", p->after = S_ARR_NEXT, p->st = S_ARR_FIRST;
            return 1;
        }
        p->st = S_MI_NAME;
        return 1;
    case S_MI_NAME: {
        size_t at;
        if ((r = find_within(p, "[ARGS]", NAME_MAX_LEN, final, &at)) == 0) return 0;
        if (r < 0) return tc_give_back(p, S_TEXT) ? -1 : 1;
        if (begin_named(p, tc_data(p), at)) return -1;
        tc_consume(p, at + 6);
        p->after = S_TEXT, p->st = S_JARGS;
        return 1;
    }
    case S_JARGS: return st_jargs(p, final);
    case S_ARR_FIRST: return st_obj(p, final, true);
    case S_ARR_ELEM: return st_obj(p, final, false);
    case S_WRAP: return st_wrap(p, final);
    case S_ARR_NEXT:
        if (!tc_skip_ws(p)) {
            if (!final) return 0;
            p->st = S_TEXT;
            return 1;
        }
        if (tc_data(p)[0] == ',') {
            tc_consume(p, 1);
            p->st = S_ARR_ELEM;
            return 1;
        }
        if (tc_data(p)[0] == ']') tc_consume(p, 1);
        p->st = S_TEXT;
        return 1;
    }
    return -1;
}

static int step_framed(tc_parser *p, bool final)
{
    const tc_framed *fr = p->f->fr;
    const char *m[8];
    int nm = 0, which, r;
    m[nm++] = fr->open;
    m[nm++] = fr->call ? fr->call : fr->open; /* a call without its section opener counts too */
    m[nm++] = p->f->skip_open ? p->f->skip_open : fr->open;
    for (int k = 0; p->f->drop && p->f->drop[k] && nm < 8; k++) m[nm++] = p->f->drop[k];
    switch (p->st) {
    case S_TEXT:
        if ((r = tc_scan_text(p, m, nm, final, &which)) <= 0) return r;
        if (which == 2 && p->f->skip_open) {
            p->st = S_FR_SKIP;
            return 1;
        }
        if (which > 2) return 1; /* a dropped frame marker */
        p->marker = m[which];
        p->st = which == 0 && fr->call ? S_FR_SECTION : S_FR_NAMEPRE;
        return 1;
    case S_FR_SECTION: {
        const char *sm[2] = {fr->call, fr->close};
        if ((r = tc_seek(p, sm, 2, final, &which)) <= 0) {
            if (r == 0 && final) p->st = S_TEXT;
            return r < 0 ? -1 : final;
        }
        p->marker = fr->call;
        p->st = which == 0 ? S_FR_NAMEPRE : S_TEXT;
        return 1;
    }
    case S_FR_NAMEPRE:
        if (fr->name_pre && (r = tc_expect(p, fr->name_pre, final)) == 0) return 0;
        p->st = S_FR_NAME;
        return 1;
    case S_FR_NAME: {
        size_t at;
        if ((r = find_within(p, fr->name_end, NAME_MAX_LEN, final, &at)) == 0) return 0;
        if (r < 0) return tc_give_back(p, S_TEXT) ? -1 : 1;
        if (begin_named(p, tc_data(p), at)) return -1;
        tc_consume(p, at + strlen(fr->name_end));
        p->st = S_FR_ARGSPRE;
        return 1;
    }
    case S_FR_ARGSPRE:
        if (fr->args_pre && (r = tc_expect(p, fr->args_pre, final)) == 0) return 0;
        p->after = S_FR_AFTER, p->st = S_JARGS;
        return 1;
    case S_JARGS: return st_jargs(p, final);
    case S_FR_SKIP: {
        const char *em[1] = {p->f->skip_close};
        if ((r = tc_seek(p, em, 1, final, &which)) < 0) return -1;
        if (r == 0 && !final) return 0;
        p->st = S_TEXT;
        return 1;
    }
    case S_FR_AFTER: {
        const char *em[1] = {fr->call_end};
        if ((r = tc_seek(p, em, 1, final, &which)) < 0) return -1;
        if (r == 0 && !final) return 0;
        p->st = r && fr->call ? S_FR_SECTION : S_TEXT;
        return 1;
    }
    }
    return -1;
}

/* One XML parameter: "{" or ", " + "key": value. */
static int xml_param(tc_parser *p, const char *v, size_t n, bool strip_nl, bool guess)
{
    if (strip_nl) {
        if (n && v[0] == '\n') v++, n--;
        if (n && v[n - 1] == '\n') n--;
    }
    const char *key = p->key ? p->key : "";
    /* qwen3_coder (SGLang's _convert_param_value): "null" is null whatever the type */
    bool null = strip_nl && n == 4 && !strncasecmp(v, "null", 4);
    char *kq = tc_json_quote(key, strlen(key)), *vq = null ? strdup("null") : tc_xml_value(v, n, tc_param_type(p, key), guess);
    sbuf b = {0};
    sb_puts(&b, p->n_params ? ", " : "{");
    if (kq) sb_puts(&b, kq);
    sb_puts(&b, ": ");
    if (vq) sb_puts(&b, vq);
    int rc = !kq || !vq || b.oom ? -1 : tc_call_args(p, b.s, b.n);
    p->n_params++;
    free(kq), free(vq), free(b.s);
    free(p->key), p->key = NULL;
    return rc;
}

static int xml_close(tc_parser *p)
{
    if (p->n_params && tc_call_args(p, "}", 1)) return -1;
    return tc_call_end(p);
}

/* key text up to term (trimmed) into p->key: 1, 0 wait, -1 none */
static int xml_key(tc_parser *p, const char *term, bool final)
{
    size_t at;
    int r = find_within(p, term, NAME_MAX_LEN, final, &at);
    if (r <= 0) return r;
    const char *s = tc_data(p);
    size_t a = 0, b = at;
    while (a < b && ws(s[a])) a++;
    while (b > a && ws(s[b - 1])) b--;
    free(p->key);
    if (!(p->key = malloc(b - a + 1))) return -2;
    memcpy(p->key, s + a, b - a);
    p->key[b - a] = 0;
    tc_consume(p, at + strlen(term));
    return 1;
}

static int step_qwen3_coder(tc_parser *p, bool final)
{
    static const char *const m[] = {"<tool_call>"};
    static const char *const body[] = {"<parameter=", "</function>", "</tool_call>"};
    static const char *const vend[] = {"</parameter>", "<parameter=", "</function>", "</tool_call>"};
    int which, r;
    size_t at;
    switch (p->st) {
    case S_TEXT:
        if ((r = tc_scan_text(p, m, 1, final, &which)) <= 0) return r;
        p->marker = m[0], p->st = S_Q_FUNC;
        return 1;
    case S_Q_FUNC:
        if ((r = tc_expect(p, "<function=", final)) == 0) return 0;
        if (r < 0) return tc_give_back(p, S_TEXT) ? -1 : 1;
        p->st = S_Q_NAME;
        return 1;
    case S_Q_NAME:
        if ((r = find_within(p, ">", NAME_MAX_LEN, final, &at)) == 0) return 0;
        if (r < 0) return tc_give_back(p, S_TEXT) ? -1 : 1;
        if (begin_named(p, tc_data(p), at)) return -1;
        tc_consume(p, at + 1);
        p->st = S_Q_BODY;
        return 1;
    case S_Q_BODY:
        if ((r = tc_seek(p, body, 3, final, &which)) < 0) return -1;
        if (r == 0) {
            if (!final) return 0;
            if (xml_close(p)) return -1;
            p->st = S_TEXT;
            return 1;
        }
        if (which == 0) {
            p->st = S_Q_PNAME;
            return 1;
        }
        if (xml_close(p)) return -1;
        p->st = which == 1 ? S_Q_END : S_TEXT;
        return 1;
    case S_Q_PNAME:
        if ((r = xml_key(p, ">", final)) == 0) return 0;
        if (r == -2) return -1;
        p->st = r > 0 ? S_Q_PVAL : S_Q_BODY;
        p->scanned = 0;
        return 1;
    case S_Q_PVAL: {
        const char *s = tc_data(p);
        size_t n = tc_avail(p), best = n, from = p->scanned > 16 ? p->scanned - 16 : 0;
        int bi = -1;
        for (int k = 0; k < 4; k++) { /* only where a marker can start that was not searched before */
            size_t lim = best < n ? best + strlen(vend[k]) : n;
            if (lim > n) lim = n;
            const char *f = lim > from ? tc_find(s + from, lim - from, vend[k]) : NULL;
            if (f && (size_t)(f - s) < best) best = (size_t)(f - s), bi = k;
        }
        if (bi < 0 && !final) {
            p->scanned = n;
            return 0;
        }
        if (xml_param(p, s, best, true, false)) return -1;
        tc_consume(p, best + (bi == 0 ? strlen(vend[0]) : 0));
        p->st = S_Q_BODY;
        return 1;
    }
    case S_Q_END:
        if ((r = tc_expect(p, "</tool_call>", final)) == 0) return 0;
        p->st = S_TEXT;
        return 1;
    }
    return -1;
}

static int step_glm45(tc_parser *p, bool final)
{
    static const char *const m[] = {"<tool_call>"};
    static const char *const body[] = {"<arg_key>", "</tool_call>"};
    static const char *const wv[] = {"<arg_value>", "<arg_key>", "</tool_call>"};
    int which, r;
    switch (p->st) {
    case S_TEXT:
        if ((r = tc_scan_text(p, m, 1, final, &which)) <= 0) return r;
        p->marker = m[0], p->st = S_G_NAME;
        return 1;
    case S_G_NAME: {
        const char *s = tc_data(p);
        size_t n = tc_avail(p), best = n;
        static const char *const ends[] = {"\n", "<arg_key>", "</tool_call>"};
        for (int k = 0; k < 3; k++) {
            const char *f = tc_find(s, n, ends[k]);
            if (f && (size_t)(f - s) < best) best = (size_t)(f - s);
        }
        if (best > NAME_MAX_LEN || (best == n && final)) return tc_give_back(p, S_TEXT) ? -1 : 1;
        if (best == n) return n > NAME_MAX_LEN ? (tc_give_back(p, S_TEXT) ? -1 : 1) : 0;
        if (begin_named(p, s, best)) return -1;
        tc_consume(p, best + (s[best] == '\n'));
        p->st = S_G_BODY;
        return 1;
    }
    case S_G_BODY:
        if ((r = tc_seek(p, body, 2, final, &which)) < 0) return -1;
        if (r == 0) {
            if (!final) return 0;
            if (xml_close(p)) return -1;
            p->st = S_TEXT;
            return 1;
        }
        if (which == 0) {
            p->st = S_G_KEY;
            return 1;
        }
        if (xml_close(p)) return -1;
        p->st = S_TEXT;
        return 1;
    case S_G_KEY:
        if ((r = xml_key(p, "</arg_key>", final)) == 0) return 0;
        if (r == -2) return -1;
        p->st = r > 0 ? S_G_WAITV : S_G_BODY;
        return 1;
    case S_G_WAITV:
        if ((r = tc_seek(p, wv, 3, final, &which)) < 0) return -1;
        if (r == 0) {
            if (!final) return 0;
            if (xml_close(p)) return -1;
            p->st = S_TEXT;
            return 1;
        }
        if (which == 0) p->st = S_G_VAL, p->scanned = 0;
        else if (which == 1) p->st = S_G_KEY;
        else {
            if (xml_close(p)) return -1;
            p->st = S_TEXT;
        }
        return 1;
    case S_G_VAL: {
        const char *s = tc_data(p);
        size_t n = tc_avail(p), from = p->scanned > 16 ? p->scanned - 16 : 0;
        const char *f = tc_find(s + from, n - from, "</arg_value>");
        if (!f && !final) {
            p->scanned = n;
            return 0;
        }
        size_t at = f ? (size_t)(f - s) : n;
        if (xml_param(p, s, at, false, true)) return -1;
        tc_consume(p, at + (f ? 12 : 0));
        p->st = S_G_BODY;
        return 1;
    }
    }
    return -1;
}

/* ---- pythonic ---- */

#define PY_MAX_DEPTH 64

/* A Python literal at s[*i] as JSON into o: 1, 0 (ran out), -1. */
static int py_val(const char *s, size_t n, size_t *i, bool final, int depth, sbuf *o)
{
    while (*i < n && ws(s[*i])) (*i)++;
    if (*i >= n) return 0;
    char c = s[*i];
    if (c == '"' || c == '\'') {
        sbuf raw = {0};
        size_t k = *i + 1;
        for (;;) {
            if (k >= n) {
                free(raw.s);
                return 0;
            }
            char d = s[k];
            if (d == c) break;
            if (d == '\\') {
                if (k + 1 >= n) {
                    free(raw.s);
                    return 0;
                }
                char e = s[k + 1], x = e;
                if (e == 'n') x = '\n';
                else if (e == 't') x = '\t';
                else if (e == 'r') x = '\r';
                else if (e == '0') x = 0;
                sb_put(&raw, &x, 1);
                k += 2;
                continue;
            }
            sb_put(&raw, &d, 1);
            k++;
        }
        char *q = tc_json_quote(raw.s ? raw.s : "", raw.n);
        if (q) sb_puts(o, q);
        else o->oom = true;
        free(q), free(raw.s);
        *i = k + 1;
        return 1;
    }
    if (ident0(c)) {
        size_t k = *i;
        while (k < n && ident(s[k])) k++;
        if (k == n && !final) return 0;
        size_t l = k - *i;
        const char *w = s + *i;
        if (l == 4 && !memcmp(w, "True", 4)) sb_puts(o, "true");
        else if (l == 5 && !memcmp(w, "False", 5)) sb_puts(o, "false");
        else if (l == 4 && !memcmp(w, "None", 4)) sb_puts(o, "null");
        else return -1;
        *i = k;
        return 1;
    }
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
        size_t k = *i + (c == '+');
        size_t st = k;
        int r = tc_json_value(s, n, &k, final);
        if (r <= 0) {
            *i = k;
            return r;
        }
        sb_put(o, s + st, k - st);
        *i = k;
        return 1;
    }
    if (c != '[' && c != '(' && c != '{') return -1;
    if (depth >= PY_MAX_DEPTH) return -1;
    char close = c == '[' ? ']' : c == '(' ? ')' : '}';
    bool obj = c == '{';
    sb_puts(o, obj ? "{" : "[");
    (*i)++;
    for (bool first = true;; first = false) {
        while (*i < n && ws(s[*i])) (*i)++;
        if (*i >= n) return 0;
        if (s[*i] == close) { /* also after a trailing comma */
            (*i)++;
            sb_puts(o, obj ? "}" : "]");
            return 1;
        }
        if (!first) sb_puts(o, ", ");
        if (obj) {
            sbuf k = {0};
            int r = py_val(s, n, i, final, depth + 1, &k);
            if (r <= 0) {
                free(k.s);
                return r;
            }
            if (k.s && k.s[0] == '"') sb_put(o, k.s, k.n);
            else { /* a non-string key: its text as a string */
                char *q = tc_json_quote(k.s ? k.s : "", k.n);
                if (q) sb_puts(o, q);
                free(q);
            }
            free(k.s);
            while (*i < n && ws(s[*i])) (*i)++;
            if (*i >= n) return 0;
            if (s[*i] != ':') return -1;
            (*i)++;
            sb_puts(o, ": ");
        }
        int r = py_val(s, n, i, final, depth + 1, o);
        if (r <= 0) return r;
        while (*i < n && ws(s[*i])) (*i)++;
        if (*i >= n) return 0;
        if (s[*i] == ',') (*i)++;
        else if (s[*i] != close) return -1;
    }
}

/* k=v, ... ) at the head (after '('): 1 with the JSON object in o and
 * *end after ')', 0 ran out, -1 invalid. */
static int py_kwargs(const char *s, size_t n, bool final, size_t *end, sbuf *o)
{
    size_t i = 0;
    sb_puts(o, "{");
    for (bool first = true;; first = false) {
        while (i < n && ws(s[i])) i++;
        if (i >= n) return 0;
        if (s[i] == ')') {
            *end = i + 1;
            sb_puts(o, "}");
            return 1;
        }
        if (!ident0(s[i])) return -1;
        size_t k0 = i;
        while (i < n && (ident0(s[i]) || (s[i] >= '0' && s[i] <= '9'))) i++;
        if (i >= n) return 0;
        char *kq = tc_json_quote(s + k0, i - k0);
        if (!first) sb_puts(o, ", ");
        if (kq) sb_puts(o, kq);
        free(kq);
        sb_puts(o, ": ");
        while (i < n && ws(s[i])) i++;
        if (i >= n) return 0;
        if (s[i] != '=') return -1;
        i++;
        int r = py_val(s, n, &i, final, 0, o);
        if (r <= 0) return r;
        while (i < n && ws(s[i])) i++;
        if (i >= n) return 0;
        if (s[i] == ',') i++;
        else if (s[i] != ')') return -1;
    }
}

/* "name(" at the head, after whitespace: 1 with the name span, 0 wait, -1 no. */
static int py_head(const char *s, size_t n, bool final, size_t *na, size_t *nb, size_t *after)
{
    size_t i = 0;
    while (i < n && ws(s[i])) i++;
    if (i >= n) return final ? -1 : 0;
    if (!ident0(s[i])) return -1;
    *na = i;
    while (i < n && ident(s[i])) i++;
    *nb = i;
    if (i - *na > NAME_MAX_LEN) return -1;
    while (i < n && ws(s[i])) i++;
    if (i >= n) return final ? -1 : 0;
    if (s[i] != '(') return -1;
    *after = i + 1;
    return 1;
}

static int step_pythonic(tc_parser *p, bool final)
{
    static const char *const m[] = {"<|python_start|>", "["};
    int which, r;
    size_t na, nb, after;
    switch (p->st) {
    case S_TEXT:
        if ((r = tc_scan_text(p, m, 2, final, &which)) <= 0) return r;
        if (which == 0) return 1; /* dropped */
        r = py_head(tc_data(p), tc_avail(p), final, &na, &nb, &after);
        if (r == 0) {
            p->off -= 1; /* hold the '[' until the head decides */
            return 0;
        }
        if (r < 0) return tc_text(p, "[", 1) ? -1 : 1;
        p->marker = "[", p->st = S_P_CALL;
        return 1;
    case S_P_CALL:
        r = py_head(tc_data(p), tc_avail(p), final, &na, &nb, &after);
        if (r == 0) return 0;
        if (r < 0) {
            if (!p->any_call) return tc_give_back(p, S_TEXT) ? -1 : 1;
            p->st = S_P_SKIP;
            return 1;
        }
        if (tc_call_begin(p, tc_data(p) + na, nb - na)) return -1;
        tc_consume(p, after);
        p->st = S_P_ARGS;
        return 1;
    case S_P_ARGS: {
        sbuf o = {0};
        size_t end = 0;
        r = py_kwargs(tc_data(p), tc_avail(p), final, &end, &o);
        if (o.oom) r = -2;
        if (r == 1 && tc_call_args(p, o.s, o.n)) r = -2;
        free(o.s);
        if (r == -2) return -1;
        if (r == 0 && !final) return 0;
        if (tc_call_end(p)) return -1;
        if (r == 1) {
            tc_consume(p, end);
            p->st = S_P_NEXT;
        } else {
            p->st = r == 0 ? S_TEXT : S_P_SKIP;
            if (r == 0) tc_consume(p, tc_avail(p));
        }
        return 1;
    }
    case S_P_NEXT:
        if (!tc_skip_ws(p)) {
            if (!final) return 0;
            p->st = S_TEXT;
            return 1;
        }
        if (tc_data(p)[0] == ',') {
            tc_consume(p, 1);
            p->st = S_P_CALL;
            return 1;
        }
        if (tc_data(p)[0] == ']') {
            tc_consume(p, 1);
            p->st = S_P_END;
            return 1;
        }
        p->st = S_TEXT;
        return 1;
    case S_P_SKIP: {
        static const char *const e[] = {"]"};
        if ((r = tc_seek(p, e, 1, final, &which)) < 0) return -1;
        if (r == 0 && !final) return 0;
        p->st = r ? S_P_END : S_TEXT;
        return 1;
    }
    case S_P_END:
        if ((r = tc_expect(p, "<|python_end|>", final)) == 0) return 0;
        p->st = S_TEXT;
        return 1;
    }
    return -1;
}

tc_step_fn tc_step_of(const api_toolcall_format *f)
{
    switch (f->family) {
    case TCF_HERMES: return step_hermes;
    case TCF_LLAMA3: return step_llama3;
    case TCF_MISTRAL:
    case TCF_JSON_ARRAY: return step_array;
    case TCF_FRAMED: return step_framed;
    case TCF_QWEN3_CODER: return step_qwen3_coder;
    case TCF_GLM45: return step_glm45;
    case TCF_PYTHONIC: return step_pythonic;
    }
    return step_hermes;
}
