/* grammar_json_str — JSON Schema strings: format, pattern, minLength /
 * maxLength, and the regex translator they need.
 *
 * DESIGN: a JSON Schema `pattern` constrains the *decoded* string, but the
 * grammar generates the JSON text, so the regex is translated here rather
 * than with the generic grammar_regex_to_ebnf: a literal `"` becomes the
 * two characters \" , a class that holds `"`, `\` or control characters
 * gets those as escape sequences, and everything else is one code point.
 * Each character has one encoding (no \u escapes are generated), which
 * accepts fewer texts than a lenient reader would but never a wrong one.
 * A pattern is searched, not anchored (ECMA-262 semantics): an
 * alternative without ^ may be preceded by any characters, one without $
 * followed by any.  Unsupported regex parts (lookaround, backreferences,
 * \b, \p{..}, anchors in the middle, inline flags) are an error naming
 * them.
 *
 * Formats are exact RFC 3339 / RFC 4291 / RFC 4122 grammars where the
 * validators are exact (date with month lengths and leap years; time
 * with offsets, no leap second; ipv4 without leading zeros; ipv6 with
 * every :: form; uuid), and a safe subset elsewhere (email:
 * dot-atoms@labels; hostname: labels of 1..63, no total-length check; uri:
 * scheme://host[:port][/path][?query][#fragment]).  Unknown formats are
 * annotations and ignored.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_json_internal.h"

/* ---- character sets ---------------------------------------------------- */

#define CSET_MAX 1024
typedef struct cset {
    uint32_t lo[CSET_MAX], hi[CSET_MAX];
    int n;
    bool over; /* too many ranges */
} cset;

static void cs_add(cset *s, uint32_t lo, uint32_t hi)
{
    if (s->n >= CSET_MAX) { s->over = true; return; }
    s->lo[s->n] = lo, s->hi[s->n] = hi, s->n++;
}

static void cs_norm(cset *s)
{
    /* insertion sort by lo, then merge overlaps */
    for (int i = 1; i < s->n; i++) {
        uint32_t l = s->lo[i], h = s->hi[i];
        int j = i;
        while (j > 0 && s->lo[j - 1] > l) s->lo[j] = s->lo[j - 1], s->hi[j] = s->hi[j - 1], j--;
        s->lo[j] = l, s->hi[j] = h;
    }
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        if (m > 0 && s->lo[i] <= s->hi[m - 1] + 1) {
            if (s->hi[i] > s->hi[m - 1]) s->hi[m - 1] = s->hi[i];
        } else s->lo[m] = s->lo[i], s->hi[m] = s->hi[i], m++;
    }
    s->n = m;
}

static void cs_negate(cset *s)
{
    cs_norm(s);
    cset t = {.n = 0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->lo[i] > next) cs_add(&t, next, s->lo[i] - 1);
        next = s->hi[i] + 1;
    }
    if (next <= 0x10FFFF) cs_add(&t, next, 0x10FFFF);
    *s = t;
}

static bool cs_has(const cset *s, uint32_t cp)
{
    for (int i = 0; i < s->n; i++)
        if (cp >= s->lo[i] && cp <= s->hi[i]) return true;
    return false;
}

static void put_cp_class(strbuf *b, uint32_t cp)
{
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) strbuf_printf(b, "%c", (char)cp);
    else if (cp < 0x80) strbuf_printf(b, "\\x%02X", cp);
    else if (cp < 0x10000) strbuf_printf(b, "\\u%04X", cp);
    else strbuf_printf(b, "\\U%08X", cp);
}

static void put_utf8(strbuf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)),
        u[3] = (char)(0x80 | (cp & 63)), n = 4;
    strbuf_put(b, u, n);
}

/* One code point as it appears in the output: in JSON string content
 * (escaped) or raw. */
static void put_cp(strbuf *b, uint32_t cp, bool json)
{
    strbuf t = {0};
    if (json && (cp == '"' || cp == '\\')) strbuf_printf(&t, "\\%c", (char)cp);
    else if (json && cp < 0x20) {
        const char *e = cp == '\n' ? "\\n" : cp == '\t' ? "\\t" : cp == '\r' ? "\\r" : cp == 8 ? "\\b" : cp == 12 ? "\\f" : NULL;
        if (e) strbuf_puts(&t, e);
        else strbuf_printf(&t, "\\u%04x", cp);
    } else put_utf8(&t, cp);
    gjs_put_lit(b, t.p ? t.p : "", t.len);
    free(t.p);
}

/* A set as a GBNF expression (appended, parenthesized).  false = empty. */
static bool put_set(strbuf *b, cset *s, bool json)
{
    cs_norm(s);
    strbuf cls = {0}, alts = {0};
    int nalt = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = s->lo[i], hi = s->hi[i];
        /* cut out what JSON must escape, and surrogates */
        uint32_t cuts[][2] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
        uint32_t segs[8][2];
        int ns = 1;
        segs[0][0] = lo, segs[0][1] = hi;
        for (int k = 0; k < 4; k++) {
            if (!json && k < 3) continue;
            int nn = 0;
            uint32_t out[8][2];
            for (int q = 0; q < ns; q++) {
                uint32_t a = segs[q][0], z = segs[q][1];
                if (z < cuts[k][0] || a > cuts[k][1]) { out[nn][0] = a, out[nn][1] = z, nn++; continue; }
                if (a < cuts[k][0]) out[nn][0] = a, out[nn][1] = cuts[k][0] - 1, nn++;
                if (z > cuts[k][1]) out[nn][0] = cuts[k][1] + 1, out[nn][1] = z, nn++;
            }
            memcpy(segs, out, sizeof out);
            ns = nn;
        }
        for (int q = 0; q < ns; q++) {
            put_cp_class(&cls, segs[q][0]);
            if (segs[q][1] > segs[q][0]) strbuf_puts(&cls, "-"), put_cp_class(&cls, segs[q][1]);
        }
    }
    if (json) {
        bool all_ctl = true;
        for (uint32_t ch = 0; ch < 0x20; ch++)
            if (!cs_has(s, ch)) all_ctl = false;
        uint32_t sp[2] = {'"', '\\'};
        for (int k = 0; k < 2; k++)
            if (cs_has(s, sp[k])) strbuf_puts(&alts, nalt++ ? " | " : ""), put_cp(&alts, sp[k], true);
        if (all_ctl) strbuf_printf(&alts, "%s\"\\\\u00\" [01] [0-9a-fA-F]", nalt++ ? " | " : "");
        else
            for (uint32_t ch = 0; ch < 0x20; ch++)
                if (cs_has(s, ch)) strbuf_puts(&alts, nalt++ ? " | " : ""), put_cp(&alts, ch, true);
    }
    bool any = cls.len || nalt;
    if (any) {
        strbuf_puts(b, "(");
        if (cls.len) strbuf_printf(b, "[%s]", cls.p);
        if (nalt) strbuf_printf(b, "%s%s", cls.len ? " | " : "", alts.p);
        strbuf_puts(b, ")");
    }
    free(cls.p), free(alts.p);
    return any;
}

/* ---- the regex parser -------------------------------------------------- */

typedef struct rx {
    gjs *c;
    const char *p, *end;
    bool json;
    int depth;
} rx;

static int rx_fail(rx *r, const char *what)
{
    return gjs_fail(r->c, "pattern: %s is not supported (at offset %ld)", what, (long)(r->end - r->p));
}

static uint32_t rx_utf8(rx *r)
{
    unsigned char ch = (unsigned char)*r->p++;
    if (ch < 0x80) return ch;
    int n = ch >= 0xF0 ? 3 : ch >= 0xE0 ? 2 : 1;
    uint32_t cp = ch & (0x3F >> n);
    for (int i = 0; i < n && r->p < r->end; i++) cp = cp << 6 | ((unsigned char)*r->p++ & 0x3F);
    return cp;
}

static int hexd(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static void set_class(cset *s, char k)
{
    switch (k) {
    case 'd': cs_add(s, '0', '9'); break;
    case 'w': cs_add(s, '0', '9'), cs_add(s, 'a', 'z'), cs_add(s, 'A', 'Z'), cs_add(s, '_', '_'); break;
    case 's':
        cs_add(s, 9, 13), cs_add(s, ' ', ' '), cs_add(s, 0xA0, 0xA0), cs_add(s, 0x1680, 0x1680), cs_add(s, 0x2000, 0x200A);
        cs_add(s, 0x2028, 0x2029), cs_add(s, 0x202F, 0x202F), cs_add(s, 0x205F, 0x205F), cs_add(s, 0x3000, 0x3000);
        cs_add(s, 0xFEFF, 0xFEFF);
        break;
    }
}

/* An escape after '\' (in_class: inside [...]): either a code point
 * (*cp, returns 0) or a class added to s (returns 1); -1 on error. */
static int rx_escape(rx *r, bool in_class, uint32_t *cp, cset *s)
{
    if (r->p >= r->end) return rx_fail(r, "a trailing backslash");
    char e = *r->p++;
    switch (e) {
    case 'd': case 'w': case 's': set_class(s, e); return 1;
    case 'D': case 'W': case 'S': {
        cset t = {.n = 0};
        set_class(&t, (char)(e + 32));
        cs_negate(&t);
        for (int i = 0; i < t.n; i++) cs_add(s, t.lo[i], t.hi[i]);
        return 1;
    }
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case '0': *cp = 0; return 0;
    case 'b':
        if (in_class) { *cp = 8; return 0; }
        return rx_fail(r, "\\b (word boundary)");
    case 'B': return rx_fail(r, "\\B");
    case 'p': case 'P': return rx_fail(r, "\\p{...} (Unicode properties)");
    case 'c':
        if (r->p < r->end && ((*r->p | 32) >= 'a' && (*r->p | 32) <= 'z')) { *cp = (uint32_t)(*r->p++ & 31); return 0; }
        *cp = '\\';
        r->p--;
        return 0;
    case 'x':
        if (r->end - r->p >= 2 && hexd(r->p[0]) >= 0 && hexd(r->p[1]) >= 0) {
            *cp = (uint32_t)(hexd(r->p[0]) * 16 + hexd(r->p[1]));
            r->p += 2;
            return 0;
        }
        *cp = 'x';
        return 0;
    case 'u':
        if (r->p < r->end && *r->p == '{') {
            uint32_t v = 0;
            const char *q = r->p + 1;
            while (q < r->end && hexd(*q) >= 0 && v <= 0x10FFFF) v = v * 16 + (uint32_t)hexd(*q++);
            if (q < r->end && *q == '}' && v <= 0x10FFFF) { r->p = q + 1; *cp = v; return 0; }
        }
        if (r->end - r->p >= 4 && hexd(r->p[0]) >= 0 && hexd(r->p[1]) >= 0 && hexd(r->p[2]) >= 0 && hexd(r->p[3]) >= 0) {
            *cp = (uint32_t)(hexd(r->p[0]) << 12 | hexd(r->p[1]) << 8 | hexd(r->p[2]) << 4 | hexd(r->p[3]));
            r->p += 4;
            return 0;
        }
        *cp = 'u';
        return 0;
    default:
        if (e >= '1' && e <= '9' && !in_class) return rx_fail(r, "a backreference");
        r->p--;
        *cp = rx_utf8(r);
        return 0;
    }
}

static int rx_class(rx *r, strbuf *out)
{
    cset s = {.n = 0};
    bool neg = false;
    if (r->p < r->end && *r->p == '^') neg = true, r->p++;
    bool first = true;
    while (r->p < r->end && (*r->p != ']' || (first && false))) {
        first = false;
        uint32_t lo;
        if (*r->p == '\\') {
            r->p++;
            int k = rx_escape(r, true, &lo, &s);
            if (k < 0) return -1;
            if (k == 1) continue;
        } else if (*r->p == '[' && r->p + 1 < r->end && r->p[1] == ':') {
            return rx_fail(r, "a POSIX class [:...:]");
        } else lo = rx_utf8(r);
        uint32_t hi = lo;
        if (r->end - r->p >= 2 && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                cset dummy = {.n = 0};
                int k = rx_escape(r, true, &hi, &dummy);
                if (k < 0) return -1;
                if (k == 1) { cs_add(&s, lo, lo), cs_add(&s, '-', '-'); for (int i = 0; i < dummy.n; i++) cs_add(&s, dummy.lo[i], dummy.hi[i]); continue; }
            } else hi = rx_utf8(r);
            if (hi < lo) return rx_fail(r, "a reversed class range");
        }
        cs_add(&s, lo, hi);
    }
    if (r->p >= r->end) return gjs_fail(r->c, "pattern: unterminated [");
    r->p++;
    if (s.over) return gjs_fail(r->c, "pattern: character class too large");
    if (neg) cs_negate(&s);
    if (!put_set(out, &s, r->json)) return gjs_fail(r->c, "pattern: a class that matches nothing");
    return 0;
}

static int rx_alt(rx *r, strbuf *out, bool top, bool *anch_s, bool *anch_e);

static int rx_atom(rx *r, strbuf *out)
{
    char ch = *r->p;
    if (ch == '(') {
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            r->p++;
            if (r->p < r->end && *r->p == ':') r->p++;
            else if (r->p < r->end && (*r->p == '=' || *r->p == '!')) return rx_fail(r, "lookahead");
            else if (r->p + 1 < r->end && *r->p == '<' && (r->p[1] == '=' || r->p[1] == '!')) return rx_fail(r, "lookbehind");
            else if (r->p < r->end && (*r->p == '<' || *r->p == 'P')) {
                while (r->p < r->end && *r->p != '>') r->p++;
                if (r->p >= r->end) return gjs_fail(r->c, "pattern: unterminated group name");
                r->p++;
            } else return rx_fail(r, "an inline flag group (?...)");
        }
        if (++r->depth > 100) return gjs_fail(r->c, "pattern: groups nested too deep");
        strbuf_puts(out, "(");
        if (rx_alt(r, out, false, NULL, NULL)) return -1;
        r->depth--;
        if (r->p >= r->end || *r->p != ')') return gjs_fail(r->c, "pattern: unbalanced (");
        r->p++;
        strbuf_puts(out, ")");
        return 0;
    }
    if (ch == '[') { r->p++; return rx_class(r, out); }
    if (ch == '.') {
        r->p++;
        cset s = {.n = 0};
        cs_add(&s, '\n', '\n'), cs_add(&s, '\r', '\r'), cs_add(&s, 0x2028, 0x2029);
        cs_negate(&s);
        put_set(out, &s, r->json);
        return 0;
    }
    if (ch == '^' || ch == '$') return rx_fail(r, "an anchor inside the pattern");
    if (ch == '*' || ch == '+' || ch == '?') return gjs_fail(r->c, "pattern: nothing to repeat");
    if (ch == ')') return gjs_fail(r->c, "pattern: unbalanced )");
    uint32_t cp;
    if (ch == '\\') {
        r->p++;
        cset s = {.n = 0};
        int k = rx_escape(r, false, &cp, &s);
        if (k < 0) return -1;
        if (k == 1) { put_set(out, &s, r->json); return 0; }
    } else cp = rx_utf8(r);
    put_cp(out, cp, r->json);
    return 0;
}

/* {n}, {n,}, {n,m} at r->p: 1 parsed, 0 not a quantifier (a literal {). */
static int rx_braces(rx *r, long *lo, long *hi)
{
    const char *q = r->p + 1;
    long a = 0, b;
    if (q >= r->end || *q < '0' || *q > '9') return 0;
    for (; q < r->end && *q >= '0' && *q <= '9'; q++)
        if (a < 1000000) a = a * 10 + (*q - '0');
    b = a;
    if (q < r->end && *q == ',') {
        q++;
        if (q < r->end && *q == '}') b = -1;
        else {
            b = 0;
            if (q >= r->end || *q < '0' || *q > '9') return 0;
            for (; q < r->end && *q >= '0' && *q <= '9'; q++)
                if (b < 1000000) b = b * 10 + (*q - '0');
        }
    }
    if (q >= r->end || *q != '}') return 0;
    r->p = q + 1;
    *lo = a, *hi = b;
    return 1;
}

static int rx_concat(rx *r, strbuf *out, bool top, bool *anch_s, bool *anch_e)
{
    bool any = false;
    if (top && r->p < r->end && *r->p == '^') r->p++, *anch_s = true;
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (top && *r->p == '$' && (r->p + 1 == r->end || r->p[1] == '|')) { r->p++, *anch_e = true; break; }
        strbuf atom = {0};
        if (rx_atom(r, &atom)) { free(atom.p); return -1; }
        if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{')) {
            long lo = 0, hi = -1;
            char q = *r->p;
            if (q == '{') {
                if (!rx_braces(r, &lo, &hi)) { strbuf_printf(out, "%s%s", any ? " " : "", atom.p); free(atom.p); any = true; continue; }
                if (lo > GJS_MAX_REPEAT || hi > GJS_MAX_REPEAT) { free(atom.p); return gjs_fail(r->c, "pattern: repetition count over %d", GJS_MAX_REPEAT); }
                if (hi >= 0 && hi < lo) { free(atom.p); return gjs_fail(r->c, "pattern: {m,n} with n < m"); }
            } else r->p++;
            if (r->p < r->end && (*r->p == '?' || *r->p == '+')) r->p++; /* lazy / possessive: same language */
            strbuf_printf(out, "%s(%s)", any ? " " : "", atom.p);
            if (q == '*' || q == '+' || q == '?') strbuf_printf(out, "%c", q);
            else if (hi < 0) strbuf_printf(out, "{%ld,}", lo);
            else if (hi == lo) strbuf_printf(out, "{%ld}", lo);
            else strbuf_printf(out, "{%ld,%ld}", lo, hi);
        } else strbuf_printf(out, "%s%s", any ? " " : "", atom.p);
        free(atom.p);
        any = true;
        if (out->len > GJS_MAX_OUT) return gjs_fail(r->c, "pattern: grammar too large");
    }
    if (!any) strbuf_puts(out, "\"\"");
    return 0;
}

/* Alternatives; at the top level each may carry its own ^ / $ and is
 * wrapped for search semantics when json (patterns). */
static int rx_alt(rx *r, strbuf *out, bool top, bool *anch_s, bool *anch_e)
{
    bool n = false;
    strbuf_puts(out, "(");
    for (;;) {
        bool s = false, e = false;
        strbuf one = {0};
        if (rx_concat(r, &one, top, &s, &e)) { free(one.p); return -1; }
        if (n) strbuf_puts(out, " | ");
        if (top && r->json && !s) strbuf_puts(out, "jchar* ");
        strbuf_puts(out, one.p ? one.p : "\"\"");
        if (top && r->json && !e) strbuf_puts(out, " jchar*");
        free(one.p);
        n = true;
        if (r->p < r->end && *r->p == '|') { r->p++; continue; }
        break;
    }
    strbuf_puts(out, ")");
    (void)anch_s, (void)anch_e;
    return 0;
}

int gjs_regex_ebnf(gjs *c, const char *re, bool json, strbuf *out)
{
    rx r = {.c = c, .p = re, .end = re + strlen(re), .json = json};
    if (json) gjs_basic(c, "jchar");
    if (rx_alt(&r, out, true, NULL, NULL)) return -1;
    if (r.p != r.end) return gjs_fail(c, "pattern: unbalanced )");
    if (out->oom) return gjs_fail(c, "out of memory");
    return c->failed ? -1 : 0;
}

const char *gjs_pattern_string(gjs *c, const char *re)
{
    strbuf b = {0};
    strbuf_puts(&b, "\"\\\"\" ");
    if (gjs_regex_ebnf(c, re, true, &b)) { free(b.p); return NULL; }
    strbuf_puts(&b, " \"\\\"\"");
    const char *r = gjs_rule(c, "pat", b.p);
    free(b.p);
    return r;
}

/* ---- formats ----------------------------------------------------------- */

static const char *fmt_rule(gjs *c, const char *f)
{
#define R(hint, body) gjs_rule(c, hint, body)
    char b[1024];
    if (!strcmp(f, "date") || !strcmp(f, "date-time")) {
        const char *y = R("year", "[1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9]");
        const char *md = R("md", "(\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | (\"0\" [469] | "
                                 "\"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])");
        const char *leap = R("leap", "[0-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | "
                                     "[13579] [26]) \"00\"");
        if (!y || !md || !leap) return NULL;
        snprintf(b, sizeof b, "%s \"-\" %s | %s \"-02-29\"", y, md, leap);
        const char *date = R("date", b);
        if (!strcmp(f, "date") || !date) return date;
    }
    if (!strcmp(f, "time") || !strcmp(f, "date-time")) {
        const char *t = R("time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]+)? (\"Z\" | [+-] "
                                  "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])");
        if (!strcmp(f, "time") || !t) return t;
        const char *d = fmt_rule(c, "date");
        if (!d) return NULL;
        snprintf(b, sizeof b, "%s \"T\" %s", d, t);
        return R("datetime", b);
    }
    if (!strcmp(f, "uuid"))
        return R("uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}");
    if (!strcmp(f, "ipv4") || !strcmp(f, "ipv6")) {
        const char *o = R("octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]");
        if (!o) return NULL;
        snprintf(b, sizeof b, "%s \".\" %s \".\" %s \".\" %s", o, o, o, o);
        const char *v4 = R("ipv4", b);
        if (!strcmp(f, "ipv4") || !v4) return v4;
        const char *h = R("h16", "[0-9a-fA-F]{1,4}");
        if (!h) return NULL;
        snprintf(b, sizeof b, "%s \":\" %s | %s", h, h, v4);
        const char *ls = R("ls32", b);
        if (!ls) return NULL;
        snprintf(b, sizeof b,
                 "(%s \":\"){6} %s | \"::\" (%s \":\"){5} %s | %s? \"::\" (%s \":\"){4} %s | ((%s \":\")? %s)? \"::\" (%s "
                 "\":\"){3} %s | ((%s \":\"){0,2} %s)? \"::\" (%s \":\"){2} %s | ((%s \":\"){0,3} %s)? \"::\" %s \":\" %s | "
                 "((%s \":\"){0,4} %s)? \"::\" %s | ((%s \":\"){0,5} %s)? \"::\" %s | ((%s \":\"){0,6} %s)? \"::\"",
                 h, ls, h, ls, h, h, ls, h, h, h, ls, h, h, h, ls, h, h, h, ls, h, h, ls, h, h, h, h, h);
        return R("ipv6", b);
    }
    if (!strcmp(f, "hostname") || !strcmp(f, "email") || !strcmp(f, "uri")) {
        const char *l = R("label", "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])?");
        if (!l) return NULL;
        if (!strcmp(f, "hostname")) {
            snprintf(b, sizeof b, "%s (\".\" %s)*", l, l);
            return R("host", b);
        }
        if (!strcmp(f, "email")) {
            snprintf(b, sizeof b, "[a-zA-Z0-9_+-]+ (\".\" [a-zA-Z0-9_+-]+)* \"@\" %s (\".\" %s)+", l, l);
            return R("email", b);
        }
        const char *pc = R("pchar", "[a-zA-Z0-9._~!$&'()*+,;=:@-] | \"%\" [0-9a-fA-F] [0-9a-fA-F]");
        if (!pc) return NULL;
        snprintf(b, sizeof b,
                 "[a-zA-Z] [a-zA-Z0-9+.-]* \"://\" %s (\".\" %s)* (\":\" [0-9]{1,5})? (\"/\" %s*)* (\"?\" (%s | [/?])*)? "
                 "(\"#\" (%s | [/?])*)?",
                 l, l, pc, pc, pc);
        return R("uri", b);
    }
    return NULL; /* unknown: an annotation */
#undef R
}

/* A pattern "^ATOM QUANT$" (one class, '.', or \\d-style escape, repeated)
 * with minLength/maxLength folded into the count: the rewritten pattern in
 * out, or false when the pattern is not of that shape. */
static bool fold_lengths(const char *re, double mn, double mx, char *out, size_t cap)
{
    size_t n = strlen(re);
    if (n < 3 || re[0] != '^' || re[n - 1] != '$' || (n >= 2 && re[n - 2] == '\\')) return false;
    const char *p = re + 1, *end = re + n - 1, *a0 = p;
    if (*p == '[') {
        p++;
        if (p < end && *p == '^') p++;
        if (p < end && *p == ']') p++;
        while (p < end && *p != ']') p += (*p == '\\' && p + 1 < end) ? 2 : 1;
        if (p >= end) return false;
        p++;
    } else if (*p == '.') p++;
    else if (*p == '\\' && p + 1 < end && strchr("dDwWsS", p[1])) p += 2;
    else return false;
    size_t alen = (size_t)(p - a0);
    long lo = 0, hi = -1;
    if (p < end && *p == '*') p++;
    else if (p < end && *p == '+') lo = 1, p++;
    else if (p < end && *p == '{') {
        char *e;
        lo = strtol(p + 1, &e, 10);
        if (e == p + 1) return false;
        hi = lo;
        if (*e == ',') {
            if (e[1] == '}') hi = -1, e++;
            else { char *e2; hi = strtol(e + 1, &e2, 10); if (e2 == e + 1) return false; e = e2; }
        }
        if (*e != '}') return false;
        p = e + 1;
    } else return false;
    if (p != end) return false;
    double nlo = mn > lo ? mn : lo, nhi = hi < 0 ? mx : (mx >= 0 && mx < hi ? mx : hi);
    if (nhi >= 0 && nhi < nlo) nhi = nlo - 1; /* empty: the caller reports it */
    if (nhi >= 0) snprintf(out, cap, "^%.*s{%.0f,%.0f}$", (int)alen, a0, nlo, nhi);
    else snprintf(out, cap, "^%.*s{%.0f,}$", (int)alen, a0, nlo);
    return strlen(out) + 1 < cap;
}

/* Length bounds of the exact-length formats: whether [fmin, fmax] of the
 * format lies inside [mn, mx] (so the lengths add nothing). */
static bool format_within(const char *f, double mn, double mx)
{
    static const struct { const char *f; int lo, hi; } t[] = {
        {"date", 10, 10}, {"uuid", 36, 36}, {"ipv4", 7, 15}, {"ipv6", 2, 45}, {"time", 9, -1}, {"date-time", 20, -1},
        {"email", 5, -1}, {"hostname", 1, -1}, {"uri", 6, -1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].f, f)) return t[i].lo >= mn && (mx < 0 || (t[i].hi >= 0 && t[i].hi <= mx));
    return false;
}

const char *gjs_string(gjs *c, json_t *s)
{
    json_t *notin = json_object_get(s, GJS_NOTIN_KEY);
    if (notin) { /* from `not` of an enum (grammar_json_not.c) */
        if (json_object_get(s, "pattern") || json_object_get(s, "format") || json_object_get(s, "minLength") ||
            json_object_get(s, "maxLength"))
            return gjs_fail(c, "'not' of string values together with pattern/format/lengths is not supported"), NULL;
        return gjs_string_not_in(c, notin);
    }
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    bool lens = json_is_number(mn) || json_is_number(mx);
    double lo = json_is_number(mn) ? json_number_value(mn) : 0, hi = json_is_number(mx) ? json_number_value(mx) : -1;
    if (lo < 0) lo = 0;
    if (lo > GJS_MAX_REPEAT) return gjs_fail(c, "minLength %g over the limit %d", lo, GJS_MAX_REPEAT), NULL;
    if (hi > GJS_MAX_REPEAT) hi = -1;
    if (hi >= 0 && hi < lo) return gjs_unsat(c, "string schema cannot be satisfied (minLength > maxLength)"), NULL;
    const char *fr = NULL;
    if (json_is_string(fmt)) {
        fr = fmt_rule(c, json_string_value(fmt));
        if (c->failed) return NULL;
    }
    if (json_is_string(pat)) {
        /* the pattern wins over a format the validators do not assert */
        if (fr) {
            const char *f = json_string_value(fmt);
            if (!strcmp(f, "date") || !strcmp(f, "email") || !strcmp(f, "ipv4") || !strcmp(f, "ipv6") || !strcmp(f, "uuid"))
                return gjs_fail(c, "'pattern' together with 'format' %s is not supported", f), NULL;
        }
        if (lens && !(lo == 0 && hi < 0)) {
            char re[1024];
            if (!fold_lengths(json_string_value(pat), lo, hi, re, sizeof re))
                return gjs_fail(c, "'pattern' together with 'minLength'/'maxLength' is not supported (only for ^[class]{m,n}$ patterns)"), NULL;
            return gjs_pattern_string(c, re);
        }
        return gjs_pattern_string(c, json_string_value(pat));
    }
    char b[256];
    if (fr) {
        if (lens && !format_within(json_string_value(fmt), lo, hi))
            return gjs_fail(c, "'format' together with 'minLength'/'maxLength' is not supported"), NULL;
        snprintf(b, sizeof b, "\"\\\"\" %s \"\\\"\"", fr);
        return gjs_rule(c, "fstr", b);
    }
    if (!lens) return gjs_basic(c, "string");
    if (!gjs_basic(c, "jchar")) return NULL;
    if (hi < 0) snprintf(b, sizeof b, "\"\\\"\" jchar{%lld,} \"\\\"\"", (long long)lo);
    else snprintf(b, sizeof b, "\"\\\"\" jchar{%lld,%lld} \"\\\"\"", (long long)lo, (long long)hi);
    return gjs_rule(c, "str", b);
}
