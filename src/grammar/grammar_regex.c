/* grammar_regex — regular expressions as users write them (Python / JS /
 * JSON Schema `pattern` style) into the grammar AST.
 *
 * DESIGN: recursive descent to the same AST the EBNF parser builds, so a
 * regex compiles with the same FSM builder and prints back as GBNF
 * (grammar_regex_to_ebnf, used by the JSON Schema compiler for `pattern`).
 * Supported: literals, escapes (\n \t \r \f \v \0 \xHH \uHHHH \u{H..}
 * \/ and escaped punctuation), . (any character but \n), [classes] with
 * ranges, negation and \d \w \s \D \W \S inside, \d \w \s \D \W \S, groups
 * ( ), (?: ), (?<name> ), (?P<name> ), |, * + ? {m} {m,} {m,n} {,n} and
 * their lazy forms (same language), ^ and $ (treated as matching the empty
 * string: the whole output must match anyway, so they only make sense at
 * the ends).  Rejected with a reason: backreferences, lookaround, \b \B,
 * \p{...}, possessive quantifiers.  A '{' that does not start a valid
 * quantifier is a literal, as in Python. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

#define MAX_DEPTH 500

typedef struct rp {
    ga_ast *a;
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
    int failed;
} rp;

static int32_t fail(rp *p, const char *msg)
{
    if (!p->failed && p->err && p->errlen)
        snprintf(p->err, p->errlen, "regex at offset %zu: %s", p->i, msg);
    p->failed = 1;
    return -1;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int64_t utf8_char(rp *p)
{
    const unsigned char *u = (const unsigned char *)p->s;
    unsigned char c = u[p->i];
    int len;
    uint32_t cp;
    if (c < 0x80) len = 1, cp = c;
    else if (c >= 0xC2 && c < 0xE0) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c < 0xF0) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c < 0xF5) len = 4, cp = c & 0x07;
    else return fail(p, "invalid UTF-8");
    if (p->i + (size_t)len > p->n) return fail(p, "invalid UTF-8");
    for (int k = 1; k < len; k++) {
        if ((u[p->i + k] & 0xC0) != 0x80) return fail(p, "invalid UTF-8");
        cp = (cp << 6) | (u[p->i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return fail(p, "invalid UTF-8");
    p->i += (size_t)len;
    return cp;
}

/* Ranges of the class escapes \d \w \s. */
static int class_escape(char c, const uint32_t **r, int *n, int *neg)
{
    static const uint32_t d[] = {'0', '9'};
    static const uint32_t w[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
    static const uint32_t s[] = {'\t', '\r', ' ', ' '};
    *neg = c == 'D' || c == 'W' || c == 'S';
    switch (c) {
    case 'd': case 'D': *r = d, *n = 1; return 1;
    case 'w': case 'W': *r = w, *n = 4; return 1;
    case 's': case 'S': *r = s, *n = 2; return 1;
    }
    return 0;
}

/* An escape after '\' (p->i at the char after it) that denotes one code
 * point; -1 with error for unsupported ones. */
static int64_t escape_cp(rp *p)
{
    if (p->i >= p->n) return fail(p, "trailing backslash");
    char c = p->s[p->i++];
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'b': case 'B': return fail(p, "word boundaries (\\b, \\B) are not supported");
    case 'p': case 'P': return fail(p, "Unicode property classes (\\p{...}) are not supported");
    case 'x': {
        if (p->i + 2 > p->n || hexval(p->s[p->i]) < 0 || hexval(p->s[p->i + 1]) < 0) return fail(p, "bad \\x escape");
        int v = hexval(p->s[p->i]) * 16 + hexval(p->s[p->i + 1]);
        p->i += 2;
        return v;
    }
    case 'u': {
        uint32_t v = 0;
        if (p->i < p->n && p->s[p->i] == '{') {
            p->i++;
            int k = 0;
            while (p->i < p->n && hexval(p->s[p->i]) >= 0 && k < 8) v = v * 16 + (uint32_t)hexval(p->s[p->i++]), k++;
            if (!k || p->i >= p->n || p->s[p->i] != '}') return fail(p, "bad \\u{...} escape");
            p->i++;
        } else {
            for (int k = 0; k < 4; k++) {
                if (p->i >= p->n || hexval(p->s[p->i]) < 0) return fail(p, "bad \\u escape");
                v = v * 16 + (uint32_t)hexval(p->s[p->i++]);
            }
            /* a surrogate pair written as two \u escapes */
            if (v >= 0xD800 && v <= 0xDBFF && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                uint32_t lo = 0;
                int ok = 1;
                for (int k = 0; k < 4; k++) {
                    int h = hexval(p->s[p->i + 2 + k]);
                    if (h < 0) ok = 0;
                    else lo = lo * 16 + (uint32_t)h;
                }
                if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
                    p->i += 6;
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                }
            }
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return fail(p, "escape is not a Unicode scalar value");
        return v;
    }
    default:
        if (c >= '1' && c <= '9') return fail(p, "backreferences are not supported");
        if ((unsigned char)c >= 0x80) {
            p->i--;
            return utf8_char(p);
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return fail(p, "unknown escape");
        return (unsigned char)c;
    }
}

typedef struct rbuf {
    uint32_t *r;
    size_t n, cap;
} rbuf;

static int rb_add(rbuf *b, uint32_t lo, uint32_t hi)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        uint32_t *nr = realloc(b->r, b->cap * 2 * sizeof *nr);
        if (!nr) return -1;
        b->r = nr;
    }
    b->r[2 * b->n] = lo;
    b->r[2 * b->n + 1] = hi;
    b->n++;
    return 0;
}

/* Add the ranges of escape class e (maybe negated) to b. */
static int rb_add_escape(rbuf *b, const uint32_t *r, int n, int neg)
{
    if (!neg) {
        for (int i = 0; i < n; i++)
            if (rb_add(b, r[2 * i], r[2 * i + 1]) < 0) return -1;
        return 0;
    }
    uint32_t next = 0;
    for (int i = 0; i < n; i++) {
        if (r[2 * i] > next && rb_add(b, next, r[2 * i] - 1) < 0) return -1;
        next = r[2 * i + 1] + 1;
    }
    return rb_add(b, next, 0x10FFFF);
}

static int32_t parse_class(rp *p)
{
    p->i++; /* [ */
    int neg = 0;
    if (p->i < p->n && p->s[p->i] == '^') neg = 1, p->i++;
    rbuf b = {0};
    int first = 1;
    for (;;) {
        if (p->i >= p->n) {
            free(b.r);
            return fail(p, "unterminated character class");
        }
        char c = p->s[p->i];
        if (c == ']' && !first) {
            p->i++;
            break;
        }
        first = 0;
        int64_t lo;
        if (c == '\\') {
            p->i++;
            const uint32_t *er;
            int en, eneg;
            if (p->i < p->n && class_escape(p->s[p->i], &er, &en, &eneg)) {
                p->i++;
                if (rb_add_escape(&b, er, en, eneg) < 0) goto oom;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == 'b') {
                p->i++;
                lo = '\b';
            } else lo = escape_cp(p);
        } else if (c == '[' && p->i + 1 < p->n && p->s[p->i + 1] == ':') {
            free(b.r);
            return fail(p, "POSIX classes [:name:] are not supported");
        } else lo = utf8_char(p);
        if (lo < 0) {
            free(b.r);
            return -1;
        }
        int64_t hi = lo;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            if (p->s[p->i] == '\\') {
                p->i++;
                const uint32_t *er;
                int en, eneg;
                if (p->i < p->n && class_escape(p->s[p->i], &er, &en, &eneg)) {
                    /* [a-\d]: '-' is a literal */
                    p->i++;
                    if (rb_add(&b, (uint32_t)lo, (uint32_t)lo) < 0 || rb_add(&b, '-', '-') < 0 ||
                        rb_add_escape(&b, er, en, eneg) < 0)
                        goto oom;
                    continue;
                }
                hi = escape_cp(p);
            } else hi = utf8_char(p);
            if (hi < 0) {
                free(b.r);
                return -1;
            }
            if (hi < lo) {
                free(b.r);
                return fail(p, "character range out of order");
            }
        }
        if (rb_add(&b, (uint32_t)lo, (uint32_t)hi) < 0) goto oom;
    }
    int32_t id = ga_class(p->a, b.r, (int32_t)b.n, neg);
    free(b.r);
    return id;
oom:
    free(b.r);
    return fail(p, "out of memory");
}

static int32_t parse_alt(rp *p, int depth);

/* Try a {m}, {m,}, {m,n}, {,n} quantifier at p->i ('{'); 1 parsed, 0 not
 * a quantifier (p->i unchanged), -1 error. */
static int parse_braces(rp *p, int32_t *lo, int32_t *hi)
{
    size_t i = p->i + 1;
    int64_t a = -1, b = -1;
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') {
        a = (a < 0 ? 0 : a) * 10 + (p->s[i++] - '0');
        if (a > 1000000) return fail(p, "repetition count too large");
    }
    if (i < p->n && p->s[i] == '}') {
        if (a < 0) return 0;
        b = a;
    } else if (i < p->n && p->s[i] == ',') {
        i++;
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') {
            b = (b < 0 ? 0 : b) * 10 + (p->s[i++] - '0');
            if (b > 1000000) return fail(p, "repetition count too large");
        }
        if (i >= p->n || p->s[i] != '}') return 0;
        if (a < 0 && b < 0) return 0;
        if (a < 0) a = 0;
    } else return 0;
    if (b >= 0 && b < a) return fail(p, "repetition {m,n} with n < m");
    p->i = i + 1;
    *lo = (int32_t)a;
    *hi = (int32_t)b;
    return 1;
}

static int32_t parse_atom(rp *p, int depth)
{
    char c = p->s[p->i];
    if (c == '(') {
        if (depth >= MAX_DEPTH) return fail(p, "nesting too deep");
        p->i++;
        if (p->i < p->n && p->s[p->i] == '?') {
            p->i++;
            if (p->i < p->n && p->s[p->i] == ':') p->i++;
            else if (p->i < p->n && (p->s[p->i] == '<' || p->s[p->i] == 'P')) {
                if (p->s[p->i] == 'P') p->i++;
                if (p->i >= p->n || p->s[p->i] != '<') return fail(p, "bad group syntax");
                if (p->i + 1 < p->n && (p->s[p->i + 1] == '=' || p->s[p->i + 1] == '!'))
                    return fail(p, "lookbehind is not supported");
                while (p->i < p->n && p->s[p->i] != '>') p->i++;
                if (p->i >= p->n) return fail(p, "unterminated group name");
                p->i++;
            } else if (p->i < p->n && (p->s[p->i] == '=' || p->s[p->i] == '!'))
                return fail(p, "lookahead is not supported");
            else return fail(p, "unsupported group flags");
        }
        int32_t e = parse_alt(p, depth + 1);
        if (e < 0) return -1;
        if (p->i >= p->n || p->s[p->i] != ')') return fail(p, "missing ')'");
        p->i++;
        return e;
    }
    if (c == '[') return parse_class(p);
    if (c == '.') {
        p->i++;
        uint32_t r[2] = {'\n', '\n'};
        return ga_class(p->a, r, 1, 1);
    }
    if (c == '^' || c == '$') {
        p->i++;
        return ga_new(p->a, GA_EMPTY, 0, 0);
    }
    if (c == '*' || c == '+' || c == '?') return fail(p, "nothing to repeat");
    int64_t cp;
    if (c == '\\') {
        p->i++;
        const uint32_t *er;
        int en, eneg;
        if (p->i < p->n && class_escape(p->s[p->i], &er, &en, &eneg)) {
            p->i++;
            rbuf b = {0};
            if (rb_add_escape(&b, er, en, eneg) < 0) {
                free(b.r);
                return fail(p, "out of memory");
            }
            int32_t id = ga_class(p->a, b.r, (int32_t)b.n, 0);
            free(b.r);
            return id;
        }
        cp = escape_cp(p);
    } else cp = utf8_char(p);
    if (cp < 0) return -1;
    uint8_t u[4];
    int l = ga_utf8_encode((uint32_t)cp, u);
    return ga_lit(p->a, u, l);
}

static int32_t parse_seq(rp *p, int depth)
{
    gm_ibuf kids = {0}; /* the node's children */
    while (p->i < p->n && p->s[p->i] != '|' && p->s[p->i] != ')') {
        int32_t e = parse_atom(p, depth);
        for (int ops = 0; e >= 0 && p->i < p->n; ops++) {
            char c = p->s[p->i];
            int32_t lo, hi;
            if (c == '*') p->i++, lo = 0, hi = -1;
            else if (c == '+') p->i++, lo = 1, hi = -1;
            else if (c == '?') p->i++, lo = 0, hi = 1;
            else if (c == '{') {
                int r = parse_braces(p, &lo, &hi);
                if (r < 0) e = -1;
                if (r <= 0) break;
            } else break;
            if (ops > 0) {
                e = fail(p, "multiple repeat");
                break;
            }
            if (p->i < p->n && p->s[p->i] == '?') p->i++; /* lazy: same language */
            else if (p->i < p->n && p->s[p->i] == '+') {
                e = fail(p, "possessive quantifiers are not supported");
                break;
            }
            e = ga_rep(p->a, e, lo, hi);
        }
        if (e < 0) {
            free(kids.p);
            return -1;
        }
        if (gm_push(&kids, e)) {
            free(kids.p);
            return fail(p, "out of memory");
        }
    }
    int32_t id = ga_list(p->a, GA_SEQ, kids.p, kids.n);
    free(kids.p);
    return id;
}

static int32_t parse_alt(rp *p, int depth)
{
    gm_ibuf kids = {0}; /* the node's children */
    for (;;) {
        int32_t e = parse_seq(p, depth);
        if (e < 0) {
            free(kids.p);
            return -1;
        }
        if (gm_push(&kids, e)) {
            free(kids.p);
            return fail(p, "out of memory");
        }
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            continue;
        }
        break;
    }
    int32_t id = ga_list(p->a, GA_ALT, kids.p, kids.n);
    free(kids.p);
    return id;
}

int32_t ga_parse_regex(ga_ast *a, const char *re, size_t len, char *err, size_t errlen)
{
    rp p = {.a = a, .s = re, .n = len, .err = err, .errlen = errlen};
    int32_t e = parse_alt(&p, 0);
    if (e < 0) return -1;
    if (p.i < p.n) return fail(&p, "unbalanced ')'");
    if (a->oom) return fail(&p, "out of memory");
    return e;
}

grammar *grammar_compile_regex(const char *re, size_t len, char *err, size_t errlen)
{
    ga_ast a = {0};
    if (err && errlen) err[0] = 0;
    grammar *g = NULL;
    int32_t r = ga_rule_id(&a, "root", 4, 1);
    int32_t e = r < 0 ? -1 : ga_parse_regex(&a, re, len, err, errlen);
    if (e >= 0) {
        a.rules[r].body = e;
        g = gr_build(&a, "root", err, errlen);
    } else if (r < 0 && err && errlen) snprintf(err, errlen, "out of memory");
    ga_free(&a);
    return g;
}

int grammar_regex_to_ebnf(const char *re, size_t len, const char *name_prefix, strbuf *out, strbuf *rules_out,
                          char *err, size_t errlen)
{
    (void)name_prefix;
    (void)rules_out; /* everything is inlined: a regex needs no helper rules */
    ga_ast a = {0};
    if (err && errlen) err[0] = 0;
    int32_t e = ga_parse_regex(&a, re, len, err, errlen);
    if (e >= 0) ga_print(&a, e, out);
    ga_free(&a);
    if (e >= 0 && out->oom) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return -1;
    }
    return e >= 0 ? 0 : -1;
}
