/* grammar_stag — structural_tag JSON -> EBNF (grammar_structural_tag_to_ebnf,
 * declared in grammar_serve.h), both of SGLang's forms:
 *
 *   legacy   {"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
 *             "triggers": [...]}
 *            = triggered_tags over tags {begin, json_schema content, end}
 *   format   {"type": "structural_tag", "format": F}, F one of xgrammar's
 *            formats (learned from xgrammar's structural_tag.py / .cc;
 *            the code is ours):
 *     const_string {value}            that text
 *     json_schema {json_schema}       JSON of the schema (object or bool)
 *     grammar {grammar}               an EBNF (start rule root)
 *     regex {pattern}                 the regex (excludes: refused)
 *     any_text {excludes?}            any text without the excluded strings
 *     sequence {elements}             one after the other
 *     or {elements}                   one of them
 *     tag {begin, content, end}       begin, content, end (end: a string or
 *                                     a list of strings, one of them)
 *     triggered_tags {triggers, tags, at_least_one?, stop_after_first?,
 *                     excludes?}      free text; a trigger starts the tag
 *                                     whose begin it prefixes; then free
 *                                     text again (or the end: stop_after_first)
 *     tags_with_separator {tags, separator, at_least_one?, stop_after_first?}
 *                                     tags separated by the separator, nothing else
 *   A format without "type" is recognised by its fields (tag first), as
 *   xgrammar does.  qwen_xml_parameter is refused by name.
 *
 * DESIGN
 *   "Unlimited" formats (any_text, triggered_tags, tags_with_separator; a
 *   sequence whose last element is one; an or of them) have no end of
 *   their own: inside a tag the tag's end strings become theirs (the text
 *   runs until one of them, which is consumed; the tag then writes no end
 *   of its own); at the top the output may end anywhere (EOS).  As in
 *   xgrammar, only the last element of a sequence may be unlimited, and
 *   an or is all unlimited or all limited.
 *
 *   Free text (any_text, triggered_tags) is an Aho-Corasick automaton over
 *   code points of its strings: triggers (dispatch to the tag), end
 *   strings (stop) and excludes (dead).  A state acts when some string
 *   ends there (the longest, excludes first, then ends).  EBNF cannot
 *   loop through rules without growing the matcher's stack, so the text is
 *   cut at every return to the automaton's root:
 *     F    ::= ( [^A0] | a F-e<go(0,a)> ... )* F-t0
 *     F-eS ::= [^AS] | a F-e<go(S,a)> | a <dispatch> ...   back at the root
 *     F-tS ::= a F-t<go(S,a)> | a (an end string) | "" (EOS allowed) ...
 *   A<S> is the set of characters that leave state S for another state
 *   than the root; every other character returns to the root.  e-rules
 *   are the excursions that return to the root (a tag dispatched inside
 *   the loop returns there too), t-rules the last one.  That is exact: a
 *   text splits into its root visits one way.  The stack grows only while
 *   a partial match lasts.
 *
 *   JSON schemas are compiled strict (no keys beyond the properties), as
 *   xgrammar's structural tag compiles them (strict_mode defaults to
 *   true), with the server's whitespace options.  Rule names: st<N> per
 *   format, js<N>- / gr<N>- prefixes for the rules of a schema / grammar,
 *   ft<N>-e<S> / -t<S> for free text.  Bounds: 64 levels of formats,
 *   4,096 code points of strings per free text, 65,536 automaton edges. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_serve.h"
#include "util/errmsg.h"

#define STAG_MAX_DEPTH 64
#define STAG_MAX_CPS 4096
#define STAG_MAX_EDGES 65536

typedef struct {
    strbuf *out;                 /* rules are appended here */
    grammar_json_opts o;         /* for json_schema contents (strict) */
    int n;                       /* rule counter */
    int depth;
    char *err;
    size_t errlen;
} sctx;

/* the end strings an unlimited format must finish with (a tag's) */
typedef struct {
    const char **s;
    const size_t *n;
    int k;                       /* 0: none (the output may end anywhere) */
} ends_t;

/* ---- EBNF text helpers ------------------------------------------------- */

static void put_lit(strbuf *b, const char *s, size_t n)
{
    strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') strbuf_printf(b, "\\%c", c);
        else if (c == '\n') strbuf_puts(b, "\\n");
        else if (c == '\r') strbuf_puts(b, "\\r");
        else if (c == '\t') strbuf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) strbuf_printf(b, "\\x%02X", c);
        else strbuf_put(b, (const char *)&c, 1);
    }
    strbuf_put(b, "\"", 1);
}

/* a code point inside [...] or as a literal */
static void put_cp_class(strbuf *b, uint32_t c)
{
    if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-') strbuf_printf(b, "\\%c", (int)c);
    else if (c < 0x20 || c == 0x7f) strbuf_printf(b, "\\x%02X", (unsigned)c);
    else if (c < 0x80) strbuf_printf(b, "%c", (int)c);
    else strbuf_printf(b, "\\U%08X", (unsigned)c);
}

static void put_cp_lit(strbuf *b, uint32_t c)
{
    if (c == '"' || c == '\\') strbuf_printf(b, "\"\\%c\"", (int)c);
    else if (c < 0x20 || c == 0x7f) strbuf_printf(b, "\"\\x%02X\"", (unsigned)c);
    else if (c < 0x80) strbuf_printf(b, "\"%c\"", (int)c);
    else strbuf_printf(b, "\"\\U%08X\"", (unsigned)c);
}

/* One code point of UTF-8 text (jansson strings are valid UTF-8). */
static uint32_t u8_next(const char *s, size_t n, size_t *i)
{
    unsigned char c = (unsigned char)s[*i];
    int l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (*i + (size_t)l > n) l = 1;
    uint32_t cp = l == 1 ? c : l == 2 ? c & 0x1F : l == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < l; k++) cp = cp << 6 | ((unsigned char)s[*i + k] & 0x3F);
    *i += (size_t)l;
    return cp;
}

static int fail(sctx *c, const char *msg)
{
    errmsg_set(c->err, c->errlen, "structural_tag: %s", msg);
    return -1;
}

/* "(e1 | e2)" for the non-empty end strings; nothing when there are none */
static void put_ends(strbuf *b, const ends_t *e)
{
    int k = 0;
    for (int i = 0; i < e->k; i++) k += e->n[i] > 0;
    if (!k) return;
    strbuf_puts(b, " (");
    for (int i = 0, f = 1; i < e->k; i++) {
        if (!e->n[i]) continue;
        strbuf_puts(b, f ? " " : " | ");
        f = 0;
        put_lit(b, e->s[i], e->n[i]);
    }
    strbuf_puts(b, " )");
}

/* ---- free text: the Aho-Corasick automaton ----------------------------- */

enum { PAT_DISPATCH, PAT_STOP, PAT_EXCLUDE };

typedef struct {
    const char *s;
    size_t n;
    int kind;
    int rule;                    /* PAT_DISPATCH: the rule number of the tag rest */
} fpat;

typedef struct {
    int n_nodes, n_alpha;
    uint32_t *alpha;             /* sorted code points */
    int *child;                  /* [node * n_alpha + a]: trie child or -1 */
    int *go;                     /* full transition */
    int *fail, *term, *out, *depth;
} acm;

static void acm_free(acm *m)
{
    free(m->alpha), free(m->child), free(m->go), free(m->fail), free(m->term), free(m->out), free(m->depth);
}

static int alpha_idx(const acm *m, uint32_t c)
{
    int lo = 0, hi = m->n_alpha - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (m->alpha[mid] == c) return mid;
        if (m->alpha[mid] < c) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int rank_of(const fpat *p, int t) { return t < 0 ? -1 : p[t].kind == PAT_EXCLUDE ? 2 : p[t].kind == PAT_STOP; }

static int acm_build(sctx *c, acm *m, const fpat *p, int np)
{
    memset(m, 0, sizeof *m);
    size_t total = 0;
    for (int i = 0; i < np; i++) {
        for (size_t j = 0; j < p[i].n;) u8_next(p[i].s, p[i].n, &j), total++;
    }
    if (total > STAG_MAX_CPS) return fail(c, "the trigger / end / exclude strings of one text are too long");
    m->alpha = malloc((total + 1) * sizeof *m->alpha);
    if (!m->alpha) return fail(c, "out of memory");
    for (int i = 0; i < np; i++)
        for (size_t j = 0; j < p[i].n;) m->alpha[m->n_alpha++] = u8_next(p[i].s, p[i].n, &j);
    qsort(m->alpha, (size_t)m->n_alpha, sizeof *m->alpha, cmp_u32);
    int k = 0;
    for (int i = 0; i < m->n_alpha; i++)
        if (!k || m->alpha[k - 1] != m->alpha[i]) m->alpha[k++] = m->alpha[i];
    m->n_alpha = k;
    size_t maxn = total + 1;
    if (maxn * (size_t)(m->n_alpha ? m->n_alpha : 1) > STAG_MAX_EDGES)
        return fail(c, "the trigger / end / exclude strings of one text are too many");
    size_t cells = maxn * (size_t)(m->n_alpha ? m->n_alpha : 1);
    m->child = malloc(cells * sizeof(int)), m->go = malloc(cells * sizeof(int));
    m->fail = calloc(maxn, sizeof(int)), m->term = malloc(maxn * sizeof(int));
    m->out = malloc(maxn * sizeof(int)), m->depth = calloc(maxn, sizeof(int));
    if (!m->child || !m->go || !m->fail || !m->term || !m->out || !m->depth) return fail(c, "out of memory");
    for (size_t i = 0; i < cells; i++) m->child[i] = -1;
    m->n_nodes = 1;
    m->term[0] = -1;
    for (int i = 0; i < np; i++) {
        int s = 0;
        for (size_t j = 0; j < p[i].n;) {
            int a = alpha_idx(m, u8_next(p[i].s, p[i].n, &j));
            int *ch = &m->child[(size_t)s * m->n_alpha + a];
            if (*ch < 0) {
                *ch = m->n_nodes++;
                m->term[*ch] = -1;
                m->depth[*ch] = m->depth[s] + 1;
            }
            s = *ch;
        }
        if (rank_of(p, i) > rank_of(p, m->term[s])) m->term[s] = i; /* duplicates: excludes win */
    }
    /* breadth-first: fail links, full transitions, outputs */
    int *q = malloc((size_t)m->n_nodes * sizeof *q);
    if (!q) return fail(c, "out of memory");
    int qh = 0, qt = 0;
    q[qt++] = 0;
    m->out[0] = -1;
    while (qh < qt) {
        int s = q[qh++];
        if (s) {
            int f = m->out[m->fail[s]], t = m->term[s];
            m->out[s] = rank_of(p, f) > rank_of(p, t) ? f : t;
        }
        for (int a = 0; a < m->n_alpha; a++) {
            int ch = m->child[(size_t)s * m->n_alpha + a];
            int fg = s ? m->go[(size_t)m->fail[s] * m->n_alpha + a] : 0;
            if (ch >= 0) {
                m->fail[ch] = s ? fg : 0;
                m->go[(size_t)s * m->n_alpha + a] = ch;
                q[qt++] = ch;
            } else {
                m->go[(size_t)s * m->n_alpha + a] = fg;
            }
        }
    }
    free(q);
    return 0;
}

/* Free text as rules ft<id>...; the text's rule is ft<id>.  loop: a
 * dispatched tag returns to free text (else the text ends after it, then
 * one of the ends); eos: the text may end anywhere (no end strings). */
static int emit_free(sctx *c, int id, const fpat *p, int np, bool loop, const ends_t *ends)
{
    bool eos = true;
    for (int i = 0; i < ends->k; i++) eos &= ends->n[i] == 0;
    acm m;
    int rc = -1;
    bool *reach = NULL, *prod = NULL;
    if (acm_build(c, &m, p, np)) goto out;
    int N = m.n_nodes, A = m.n_alpha;
    reach = calloc((size_t)N, 1), prod = calloc((size_t)N, 1);
    if (!reach || !prod) {
        fail(c, "out of memory");
        goto out;
    }
    /* live states: reached from the root through states where nothing acted */
    reach[0] = true;
    for (bool ch = true; ch;) {
        ch = false;
        for (int s = 0; s < N; s++) {
            if (!reach[s]) continue;
            for (int a = 0; a < A; a++) {
                int t = m.go[(size_t)s * A + a];
                if (m.out[t] < 0 && !reach[t]) reach[t] = ch = true;
            }
        }
    }
    /* t-rules that can finish */
    for (bool ch = true; ch;) {
        ch = false;
        for (int s = 0; s < N; s++) {
            if (!reach[s] || prod[s]) continue;
            bool ok = eos;
            for (int a = 0; a < A && !ok; a++) {
                int t = m.go[(size_t)s * A + a], o = m.out[t];
                if (t == 0) continue;
                if (o < 0) ok = prod[t];
                else ok = p[o].kind == PAT_STOP || (p[o].kind == PAT_DISPATCH && !loop);
            }
            if (ok) prod[s] = ch = true;
        }
    }
    if (!prod[0]) {
        fail(c, "a text can never end (its end strings are excluded or unreachable)");
        goto out;
    }
    strbuf *b = c->out;
    for (int s = 0; s < N; s++) {
        if (!reach[s]) continue;
        /* e-rule (the root's is inlined in the loop) */
        if (s) strbuf_printf(b, "ft%d-e%d ::= ", id, s);
        else strbuf_printf(b, "ft%d ::= (", id);
        int nl = 0;
        for (int a = 0; a < A; a++) nl += m.go[(size_t)s * A + a] != 0;
        if (nl) {
            strbuf_puts(b, " [^");
            for (int a = 0; a < A; a++)
                if (m.go[(size_t)s * A + a] != 0) put_cp_class(b, m.alpha[a]);
            strbuf_puts(b, "]");
        } else {
            strbuf_puts(b, " .");
        }
        for (int a = 0; a < A; a++) {
            int t = m.go[(size_t)s * A + a], o = m.out[t];
            if (t == 0) continue;
            if (o < 0) {
                strbuf_puts(b, " | ");
                put_cp_lit(b, m.alpha[a]);
                strbuf_printf(b, " ft%d-e%d", id, t);
            } else if (p[o].kind == PAT_DISPATCH && loop) {
                strbuf_puts(b, " | ");
                put_cp_lit(b, m.alpha[a]);
                strbuf_printf(b, " st%d", p[o].rule);
            }
        }
        if (s) strbuf_puts(b, "\n");
        else strbuf_printf(b, " )* ft%d-t0\n", id);
        if (!prod[s]) continue;
        /* t-rule */
        strbuf_printf(b, "ft%d-t%d ::= ", id, s);
        bool first = true;
        if (eos) strbuf_puts(b, "\"\""), first = false;
        for (int a = 0; a < A; a++) {
            int t = m.go[(size_t)s * A + a], o = m.out[t];
            if (t == 0) continue;
            if (o < 0 && !prod[t]) continue;
            if (o >= 0 && !(p[o].kind == PAT_STOP || (p[o].kind == PAT_DISPATCH && !loop))) continue;
            if (!first) strbuf_puts(b, " | ");
            first = false;
            put_cp_lit(b, m.alpha[a]);
            if (o < 0) strbuf_printf(b, " ft%d-t%d", id, t);
            else if (p[o].kind == PAT_DISPATCH) {
                strbuf_printf(b, " st%d", p[o].rule);
                put_ends(b, ends);
            }
        }
        strbuf_puts(b, "\n");
    }
    rc = 0;
out:
    free(reach);
    free(prod);
    acm_free(&m);
    return rc;
}

/* ---- formats ----------------------------------------------------------- */

static int emit(sctx *c, json_t *f, const ends_t *ends);

static const char *ftype(json_t *f)
{
    const char *t = json_string_value(json_object_get(f, "type"));
    if (t) return t;
    if (json_object_get(f, "begin") && json_object_get(f, "content") && json_object_get(f, "end")) return "tag";
    if (json_object_get(f, "value")) return "const_string";
    if (json_object_get(f, "json_schema")) return "json_schema";
    if (json_object_get(f, "triggers")) return "triggered_tags";
    if (json_object_get(f, "separator")) return "tags_with_separator";
    if (json_object_get(f, "elements")) return "sequence";
    if (!json_object_size(f)) return "any_text";
    return NULL;
}

/* -1 error, 0 limited, 1 unlimited */
static int unlimited(sctx *c, json_t *f, int depth)
{
    if (depth > STAG_MAX_DEPTH) return fail(c, "formats nested too deeply");
    if (!json_is_object(f)) return fail(c, "a format must be an object");
    const char *t = ftype(f);
    if (!t) return 0; /* emit reports it */
    if (!strcmp(t, "any_text") || !strcmp(t, "triggered_tags") || !strcmp(t, "tags_with_separator")) return 1;
    json_t *el = json_object_get(f, "elements");
    if (!json_is_array(el) || !json_array_size(el)) return 0;
    if (!strcmp(t, "sequence")) return unlimited(c, json_array_get(el, json_array_size(el) - 1), depth + 1);
    if (!strcmp(t, "or")) {
        int any = 0, all = 1;
        for (size_t i = 0; i < json_array_size(el); i++) {
            int u = unlimited(c, json_array_get(el, i), depth + 1);
            if (u < 0) return -1;
            any |= u, all &= u;
        }
        if (any && !all) return fail(c, "an 'or' format mixes unlimited elements (any_text, triggered_tags, "
                                        "tags_with_separator) with limited ones");
        return any;
    }
    return 0;
}

static int str_list(sctx *c, json_t *v, const char *what, bool allow_empty_str, const char ***s, size_t **n, int *k)
{
    *s = NULL, *n = NULL, *k = 0;
    if (!v) return 0;
    if (!json_is_array(v)) {
        errmsg_set(c->err, c->errlen, "structural_tag: '%s' must be a list of strings", what);
        return -1;
    }
    size_t m = json_array_size(v);
    *s = calloc(m + 1, sizeof **s), *n = calloc(m + 1, sizeof **n);
    if (!*s || !*n) return fail(c, "out of memory");
    for (size_t i = 0; i < m; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || (!allow_empty_str && !json_string_length(e))) {
            errmsg_set(c->err, c->errlen, "structural_tag: '%s' must hold %sstrings", what,
                       allow_empty_str ? "" : "non-empty ");
            return -1;
        }
        (*s)[i] = json_string_value(e), (*n)[i] = json_string_length(e);
    }
    *k = (int)m;
    return 0;
}

static bool get_flag(sctx *c, json_t *f, const char *k, bool *v)
{
    json_t *x = json_object_get(f, k);
    *v = false;
    if (!x) return true;
    if (!json_is_boolean(x)) {
        errmsg_set(c->err, c->errlen, "structural_tag: '%s' must be a boolean", k);
        return false;
    }
    *v = json_is_true(x);
    return true;
}

/* A tag {begin, content, end} as rule st<id> = begin content end; with
 * rest non-NULL also *rest = a rule without the first skip bytes of begin
 * (the trigger), sharing the content.  Returns id or -1. */
static int emit_tag(sctx *c, json_t *f, size_t skip, int *rest)
{
    json_t *bg = json_object_get(f, "begin"), *ct = json_object_get(f, "content"), *en = json_object_get(f, "end");
    if (!json_is_object(f)) return fail(c, "a tag must be an object");
    const char *ty = json_string_value(json_object_get(f, "type"));
    if (ty && strcmp(ty, "tag")) return fail(c, "a tag's type must be \"tag\"");
    if (!json_is_string(bg)) return fail(c, "a tag's 'begin' must be a string");
    if (!ct) return fail(c, "a tag needs a 'content'");
    const char *one[1];
    size_t onen[1];
    ends_t e = {0};
    const char **es = NULL;
    size_t *en_n = NULL;
    int rc = -1;
    if (json_is_string(en)) {
        one[0] = json_string_value(en), onen[0] = json_string_length(en);
        e = (ends_t){one, onen, 1};
    } else if (json_is_array(en) && json_array_size(en)) {
        if (str_list(c, en, "end", true, &es, &en_n, &e.k)) goto out;
        e.s = es, e.n = en_n;
    } else {
        fail(c, "a tag's 'end' must be a string or a non-empty list of strings");
        goto out;
    }
    int u = unlimited(c, ct, c->depth);
    if (u < 0) goto out;
    int cid;
    if (u) {
        bool any = false;
        for (int i = 0; i < e.k; i++) any |= e.n[i] > 0;
        if (!any) {
            fail(c, "a tag whose content is unlimited (any_text, triggered_tags ...) needs a non-empty end");
            goto out;
        }
        cid = emit(c, ct, &e);
    } else {
        ends_t none = {0};
        cid = emit(c, ct, &none);
    }
    if (cid < 0) goto out;
    size_t bl = json_string_length(bg);
    for (int k = 0; k < (rest ? 2 : 1); k++) {
        size_t sk = k ? skip : 0;
        int id = c->n++;
        strbuf_printf(c->out, "st%d ::= ", id);
        if (sk < bl) put_lit(c->out, json_string_value(bg) + sk, bl - sk);
        strbuf_printf(c->out, " st%d", cid);
        if (!u) put_ends(c->out, &e);
        strbuf_puts(c->out, "\n");
        if (k) *rest = id;
        else rc = id;
    }
out:
    free(es);
    free(en_n);
    return rc;
}

static int emit_triggered(sctx *c, json_t *f, const ends_t *ends)
{
    const char **tr = NULL, **ex = NULL;
    size_t *trn = NULL, *exn = NULL;
    int ntr = 0, nex = 0, rc = -1;
    int *tag_ids = NULL, *tag_rest = NULL;
    fpat *p = NULL;
    json_t *tags = json_object_get(f, "tags");
    bool alo, saf;
    if (!get_flag(c, f, "at_least_one", &alo) || !get_flag(c, f, "stop_after_first", &saf)) goto out;
    if (str_list(c, json_object_get(f, "triggers"), "triggers", false, &tr, &trn, &ntr)) goto out;
    if (str_list(c, json_object_get(f, "excludes"), "excludes", false, &ex, &exn, &nex)) goto out;
    if (!ntr) {
        fail(c, "'triggers' must be a non-empty list of strings");
        goto out;
    }
    if (!json_is_array(tags) || !json_array_size(tags)) {
        fail(c, "'tags' must be a non-empty list of tags");
        goto out;
    }
    size_t nt = json_array_size(tags);
    tag_ids = calloc(nt, sizeof *tag_ids), tag_rest = calloc(nt, sizeof *tag_rest);
    p = calloc(nt + (size_t)ntr + (size_t)nex + (size_t)ends->k + 1, sizeof *p);
    if (!tag_ids || !tag_rest || !p) {
        fail(c, "out of memory");
        goto out;
    }
    int np = 0;
    /* each trigger dispatches to the union of its tags' rests */
    int *trig_of = calloc(nt, sizeof *trig_of);
    if (!trig_of) {
        fail(c, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nt; i++) {
        json_t *tg = json_array_get(tags, i);
        const char *b = json_string_value(json_object_get(tg, "begin"));
        size_t bl = json_string_length(json_object_get(tg, "begin"));
        int m = -1;
        for (int k = 0; k < ntr && b; k++) {
            if (bl >= trn[k] && !memcmp(b, tr[k], trn[k])) {
                if (m >= 0) {
                    free(trig_of);
                    errmsg_set(c->err, c->errlen, "structural_tag: the begin '%s' of tag %zu starts with two triggers",
                               b, i);
                    goto out;
                }
                m = k;
            }
        }
        if (b && m < 0) {
            free(trig_of);
            errmsg_set(c->err, c->errlen, "structural_tag: the begin '%s' of tag %zu starts with no trigger", b, i);
            goto out;
        }
        trig_of[i] = m;
        if ((tag_ids[i] = emit_tag(c, tg, m >= 0 ? trn[m] : 0, &tag_rest[i])) < 0) {
            free(trig_of);
            goto out;
        }
    }
    for (int k = 0; k < ntr; k++) {
        int any = 0;
        for (size_t i = 0; i < nt; i++) any += trig_of[i] == k;
        if (!any) { /* a trigger no tag starts with: it may not appear */
            p[np++] = (fpat){tr[k], trn[k], PAT_EXCLUDE, 0};
            continue;
        }
        int id = c->n++;
        any = 0;
        strbuf_printf(c->out, "st%d ::=", id);
        for (size_t i = 0; i < nt; i++)
            if (trig_of[i] == k) strbuf_printf(c->out, "%s st%d", any++ ? " |" : "", tag_rest[i]);
        strbuf_puts(c->out, "\n");
        p[np++] = (fpat){tr[k], trn[k], PAT_DISPATCH, id};
    }
    free(trig_of);
    for (int k = 0; k < nex; k++) p[np++] = (fpat){ex[k], exn[k], PAT_EXCLUDE, 0};
    for (int k = 0; k < ends->k; k++)
        if (ends->n[k]) p[np++] = (fpat){ends->s[k], ends->n[k], PAT_STOP, 0};
    int id = c->n++;
    if (alo && saf) {
        strbuf_printf(c->out, "st%d ::= (", id);
        for (size_t i = 0; i < nt; i++) strbuf_printf(c->out, "%s st%d", i ? " |" : "", tag_ids[i]);
        strbuf_puts(c->out, " )");
        put_ends(c->out, ends);
        strbuf_puts(c->out, "\n");
    } else {
        int fid = c->n++;
        if (emit_free(c, fid, p, np, !saf, ends)) goto out;
        strbuf_printf(c->out, "st%d ::= ", id);
        if (alo) {
            strbuf_puts(c->out, "(");
            for (size_t i = 0; i < nt; i++) strbuf_printf(c->out, "%s st%d", i ? " |" : "", tag_ids[i]);
            strbuf_puts(c->out, " ) ");
        }
        strbuf_printf(c->out, "ft%d\n", fid);
    }
    rc = id;
out:
    free(tr), free(trn), free(ex), free(exn), free(tag_ids), free(tag_rest), free(p);
    return rc;
}

static int emit_sep(sctx *c, json_t *f, const ends_t *ends)
{
    json_t *tags = json_object_get(f, "tags"), *sep = json_object_get(f, "separator");
    bool alo, saf;
    if (!get_flag(c, f, "at_least_one", &alo) || !get_flag(c, f, "stop_after_first", &saf)) return -1;
    if (!json_is_array(tags) || !json_array_size(tags)) return fail(c, "'tags' must be a non-empty list of tags");
    if (!json_is_string(sep)) return fail(c, "'separator' must be a string");
    size_t nt = json_array_size(tags);
    int *ids = calloc(nt, sizeof *ids);
    if (!ids) return fail(c, "out of memory");
    for (size_t i = 0; i < nt; i++)
        if ((ids[i] = emit_tag(c, json_array_get(tags, i), 0, NULL)) < 0) {
            free(ids);
            return -1;
        }
    int all = c->n++;
    strbuf_printf(c->out, "st%d ::=", all);
    for (size_t i = 0; i < nt; i++) strbuf_printf(c->out, "%s st%d", i ? " |" : "", ids[i]);
    strbuf_puts(c->out, "\n");
    free(ids);
    bool sep_is_end = false;
    for (int i = 0; i < ends->k; i++)
        sep_is_end |= ends->n[i] && ends->n[i] == json_string_length(sep) && !memcmp(ends->s[i], json_string_value(sep), ends->n[i]);
    int id = c->n++;
    strbuf_printf(c->out, "st%d ::= ( st%d", id, all);
    if (!(saf || sep_is_end)) {
        strbuf_puts(c->out, " ( ");
        put_lit(c->out, json_string_value(sep), json_string_length(sep));
        strbuf_printf(c->out, " st%d )*", all);
    }
    strbuf_puts(c->out, " )");
    if (!alo) strbuf_puts(c->out, "?");
    put_ends(c->out, ends);
    strbuf_puts(c->out, "\n");
    return id;
}

/* Emit format f; returns its rule number (rule st<N>) or -1.  ends: the
 * end strings f must finish with when it is unlimited inside a tag. */
static int emit(sctx *c, json_t *f, const ends_t *ends)
{
    if (++c->depth > STAG_MAX_DEPTH) {
        c->depth--;
        return fail(c, "formats nested too deeply");
    }
    int rc = -1;
    const char *t = json_is_object(f) ? ftype(f) : NULL;
    if (!json_is_object(f)) {
        fail(c, "a format must be an object");
    } else if (!t) {
        fail(c, "a format needs a 'type'");
    } else if (!strcmp(t, "const_string")) {
        json_t *v = json_object_get(f, "value");
        if (!json_is_string(v) || !json_string_length(v)) fail(c, "const_string needs a non-empty string 'value'");
        else {
            rc = c->n++;
            strbuf_printf(c->out, "st%d ::= ", rc);
            put_lit(c->out, json_string_value(v), json_string_length(v));
            strbuf_puts(c->out, "\n");
        }
    } else if (!strcmp(t, "json_schema")) {
        json_t *s = json_object_get(f, "json_schema");
        if (!json_is_object(s) && !json_is_boolean(s)) {
            fail(c, "json_schema needs a 'json_schema' that is an object or a boolean");
        } else {
            char *txt = json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY);
            strbuf sch = {0};
            char e2[512];
            int id = c->n++;
            if (!txt) fail(c, "out of memory");
            else if (grammar_schema_to_ebnf(txt, strlen(txt), &c->o, &sch, e2, sizeof e2) || sch.oom)
                errmsg_set(c->err, c->errlen, "structural_tag: a json_schema: %s", sch.oom ? "out of memory" : e2);
            else {
                char pre[32];
                snprintf(pre, sizeof pre, "js%d-", id);
                strbuf_printf(c->out, "st%d ::= js%d-root\n", id, id);
                grammar_ebnf_prefix_rules(sch.p ? sch.p : "", sch.len, pre, c->out);
                strbuf_puts(c->out, "\n");
                rc = id;
            }
            free(txt);
            free(sch.p);
        }
    } else if (!strcmp(t, "grammar")) {
        json_t *g = json_object_get(f, "grammar");
        if (!json_is_string(g) || !json_string_length(g)) fail(c, "grammar needs a non-empty string 'grammar'");
        else {
            int id = c->n++;
            char pre[32];
            snprintf(pre, sizeof pre, "gr%d-", id);
            strbuf_printf(c->out, "st%d ::= gr%d-root\n", id, id);
            grammar_ebnf_prefix_rules(json_string_value(g), json_string_length(g), pre, c->out);
            strbuf_puts(c->out, "\n");
            rc = id;
        }
    } else if (!strcmp(t, "regex")) {
        json_t *pt = json_object_get(f, "pattern"), *ex = json_object_get(f, "excludes");
        strbuf re = {0};
        char e2[512];
        if (!json_is_string(pt) || !json_string_length(pt)) fail(c, "regex needs a non-empty string 'pattern'");
        else if (json_is_array(ex) && json_array_size(ex)) fail(c, "regex 'excludes' is not supported");
        else if (grammar_regex_to_ebnf(json_string_value(pt), json_string_length(pt), "", &re, NULL, e2, sizeof e2) ||
                 re.oom)
            errmsg_set(c->err, c->errlen, "structural_tag: a regex: %s", re.oom ? "out of memory" : e2);
        else {
            rc = c->n++;
            strbuf_printf(c->out, "st%d ::= ", rc);
            strbuf_put(c->out, re.p ? re.p : "\"\"", re.p ? re.len : 2);
            strbuf_puts(c->out, "\n");
        }
        free(re.p);
    } else if (!strcmp(t, "any_text")) {
        const char **ex = NULL;
        size_t *exn = NULL;
        int nex = 0;
        if (!str_list(c, json_object_get(f, "excludes"), "excludes", false, &ex, &exn, &nex)) {
            fpat *p = calloc((size_t)nex + (size_t)ends->k + 1, sizeof *p);
            int np = 0;
            if (!p) fail(c, "out of memory");
            else {
                for (int k = 0; k < nex; k++) p[np++] = (fpat){ex[k], exn[k], PAT_EXCLUDE, 0};
                for (int k = 0; k < ends->k; k++)
                    if (ends->n[k]) p[np++] = (fpat){ends->s[k], ends->n[k], PAT_STOP, 0};
                int id = c->n++, fid = c->n++;
                if (!np) {
                    strbuf_printf(c->out, "st%d ::= .*\n", id);
                    rc = id;
                } else if (!emit_free(c, fid, p, np, false, ends)) {
                    strbuf_printf(c->out, "st%d ::= ft%d\n", id, fid);
                    rc = id;
                }
                free(p);
            }
        }
        free(ex), free(exn);
    } else if (!strcmp(t, "sequence") || !strcmp(t, "or")) {
        json_t *el = json_object_get(f, "elements");
        bool seq = !strcmp(t, "sequence");
        size_t ne = json_is_array(el) ? json_array_size(el) : 0;
        int *ids = ne ? calloc(ne, sizeof *ids) : NULL;
        ends_t none = {0};
        if (!ne) errmsg_set(c->err, c->errlen, "structural_tag: %s needs a non-empty list 'elements'", t);
        else if (!ids) fail(c, "out of memory");
        else if (unlimited(c, f, c->depth) >= 0) {
            size_t i = 0;
            for (; i < ne; i++) {
                json_t *x = json_array_get(el, i);
                if (seq && i + 1 < ne) {
                    int u = unlimited(c, x, c->depth);
                    if (u) {
                        if (u > 0)
                            errmsg_set(c->err, c->errlen,
                                       "structural_tag: only the last element of a sequence may be unlimited "
                                       "(element %zu is any_text, triggered_tags or tags_with_separator)", i);
                        break;
                    }
                    ids[i] = emit(c, x, &none);
                } else {
                    ids[i] = emit(c, x, ends);
                }
                if (ids[i] < 0) break;
            }
            if (i == ne) {
                rc = c->n++;
                strbuf_printf(c->out, "st%d ::=", rc);
                for (i = 0; i < ne; i++) strbuf_printf(c->out, "%s st%d", !seq && i ? " |" : "", ids[i]);
                strbuf_puts(c->out, "\n");
            }
        }
        free(ids);
    } else if (!strcmp(t, "tag")) {
        rc = emit_tag(c, f, 0, NULL);
    } else if (!strcmp(t, "triggered_tags")) {
        rc = emit_triggered(c, f, ends);
    } else if (!strcmp(t, "tags_with_separator")) {
        rc = emit_sep(c, f, ends);
    } else if (!strcmp(t, "qwen_xml_parameter")) {
        fail(c, "the qwen_xml_parameter format is not supported");
    } else {
        errmsg_set(c->err, c->errlen, "structural_tag: unknown format type '%s'", t);
    }
    c->depth--;
    if (rc >= 0 && c->out->oom) return fail(c, "out of memory");
    return rc;
}

/* SGLang's legacy form as a triggered_tags format (new object). */
static json_t *from_legacy(sctx *c, json_t *root)
{
    json_t *structs = json_object_get(root, "structures"), *trigs = json_object_get(root, "triggers");
    if (!json_is_array(structs) || !json_array_size(structs)) {
        fail(c, "'structures' must be a non-empty list");
        return NULL;
    }
    if (!json_is_array(trigs) || !json_array_size(trigs)) {
        fail(c, "'triggers' must be a non-empty list of strings");
        return NULL;
    }
    json_t *tags = json_array();
    for (size_t i = 0; i < json_array_size(structs); i++) {
        json_t *st = json_array_get(structs, i);
        json_t *bg = json_object_get(st, "begin"), *en = json_object_get(st, "end");
        json_t *sc = json_object_get(st, "schema");
        if (!json_is_object(st) || !json_is_string(bg) || !json_is_string(en)) {
            json_decref(tags);
            errmsg_set(c->err, c->errlen, "structural_tag: structure %zu needs string 'begin' and 'end'", i);
            return NULL;
        }
        json_t *js = sc && !json_is_null(sc) ? json_incref(sc) : json_object();
        json_array_append_new(tags, json_pack("{s:s,s:O,s:{s:s,s:o},s:O}", "type", "tag", "begin", bg, "content",
                                              "type", "json_schema", "json_schema", js, "end", en));
    }
    return json_pack("{s:s,s:O,s:o}", "type", "triggered_tags", "triggers", trigs, "tags", tags);
}

int grammar_structural_tag_to_ebnf(const char *json, size_t len, const grammar_json_opts *o, strbuf *out,
                                   char *err, size_t errlen)
{
    sctx c = {.o = *o, .err = err, .errlen = errlen};
    c.o.strict = 1;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!json_is_object(root)) {
        errmsg_set(err, errlen, "structural_tag: %s", root ? "expected a JSON object" : je.text);
        json_decref(root);
        return -1;
    }
    json_t *ty = json_object_get(root, "type");
    json_t *fmt = json_object_get(root, "format");
    if (ty && (!json_is_string(ty) || strcmp(json_string_value(ty), "structural_tag"))) {
        json_decref(root);
        errmsg_set(err, errlen, "structural_tag: the type must be \"structural_tag\"");
        return -1;
    }
    json_t *own = NULL;
    if (!fmt) fmt = own = from_legacy(&c, root);
    strbuf b = {0};
    c.out = &b;
    int rc = -1;
    if (fmt) {
        ends_t none = {0};
        int id = emit(&c, fmt, &none);
        if (id >= 0) {
            strbuf_printf(&b, "root ::= st%d\n", id);
            if (b.oom) errmsg_set(err, errlen, "out of memory");
            else {
                strbuf_put(out, b.p, b.len);
                rc = out->oom ? -1 : 0;
            }
        }
    }
    free(b.p);
    json_decref(own);
    json_decref(root);
    return rc;
}
