/* grammar_ebnf — the GBNF-style EBNF that SGLang (xgrammar) and llama.cpp
 * accept, parsed into the AST.
 *
 * DESIGN: recursive descent.  The syntax accepted is the union of the two:
 *
 *   rule      ::= name "::=" alternates
 *   alternates::= sequence ("|" sequence)*
 *   sequence  ::= postfix*          (ends at "|", ")", end of text, or the
 *                                    next "name ::=", so rules may span lines)
 *   postfix   ::= primary ("*" | "+" | "?" | "{m}" | "{m,}" | "{m,n}" | "{,n}")*
 *   primary   ::= "literal" | 'literal' | [class] | [^class] | . | name | ( alternates )
 *
 * Newlines are plain whitespace; `#` starts a comment to the end of the
 * line.  Escapes in literals and classes: \n \r \t \f \v \0 \\ \" \' \[ \]
 * \- \^ and other ASCII punctuation, \xHH, \uHHHH, \UHHHHHHHH (code points,
 * written as UTF-8).  `.` is any one UTF-8 character.  Names are
 * [A-Za-z0-9_.-]+.  Nesting is bounded (parens deeper than 500 is an
 * error) so hostile input cannot exhaust the C stack. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

#define MAX_DEPTH 500

typedef struct ep {
    ga_ast *a;
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
    int failed;
} ep;

static void where(const ep *p, size_t at, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t k = 0; k < at && k < p->n; k++) {
        if (p->s[k] == '\n') l++, c = 1;
        else c++;
    }
    *line = l;
    *col = c;
}

static int fail(ep *p, const char *msg)
{
    if (p->failed) return -1;
    p->failed = 1;
    int l, c;
    where(p, p->i, &l, &c);
    if (p->err && p->errlen) snprintf(p->err, p->errlen, "EBNF line %d col %d: %s", l, c, msg);
    return -1;
}

static void skip_ws(ep *p)
{
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->i++;
        else if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\n') p->i++;
        } else break;
    }
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

/* Length of a name at i (0 if none).  A lone "." is the any-char. */
static size_t name_len(const ep *p, size_t i)
{
    size_t k = i;
    while (k < p->n && is_name_char(p->s[k])) k++;
    if (k - i == 1 && p->s[i] == '.') return 0;
    return k - i;
}

/* Is a "name ::=" at i (after whitespace)? */
static int rule_head_at(const ep *p, size_t i)
{
    size_t l = name_len(p, i);
    if (!l) return 0;
    size_t k = i + l;
    while (k < p->n && (p->s[k] == ' ' || p->s[k] == '\t' || p->s[k] == '\n' || p->s[k] == '\r')) k++;
    return k + 3 <= p->n && !memcmp(p->s + k, "::=", 3);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode one raw UTF-8 character; -1 if invalid. */
static int64_t utf8_char(ep *p)
{
    const unsigned char *u = (const unsigned char *)p->s;
    unsigned char c = u[p->i];
    int len;
    uint32_t cp;
    if (c < 0x80) len = 1, cp = c;
    else if (c >= 0xC2 && c < 0xE0) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c < 0xF0) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c < 0xF5) len = 4, cp = c & 0x07;
    else return -1;
    if (p->i + (size_t)len > p->n) return -1;
    for (int k = 1; k < len; k++) {
        if ((u[p->i + k] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (u[p->i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    p->i += (size_t)len;
    return cp;
}

/* One character of a literal or class (escape or raw UTF-8): code point,
 * or -1 (error reported). */
static int64_t parse_char(ep *p)
{
    if (p->i >= p->n) return fail(p, "unexpected end of text");
    if (p->s[p->i] != '\\') {
        int64_t cp = utf8_char(p);
        if (cp < 0) return fail(p, "invalid UTF-8");
        return cp;
    }
    p->i++;
    if (p->i >= p->n) return fail(p, "unfinished escape");
    char c = p->s[p->i++];
    int digits = 0;
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
        if ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
            (c >= 0x7B && c <= 0x7E) || c == ' ')
            return (unsigned char)c;
        p->i--;
        return fail(p, "unknown escape");
    }
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        int h = p->i < p->n ? hexval(p->s[p->i]) : -1;
        if (h < 0) return fail(p, "bad hex escape");
        v = v * 16 + (uint32_t)h;
        p->i++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return fail(p, "escape is not a Unicode scalar value");
    return v;
}

static int32_t parse_literal(ep *p)
{
    char q = p->s[p->i++];
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (p->i >= p->n) {
            free(buf);
            return fail(p, "unterminated string literal");
        }
        if (p->s[p->i] == q) {
            p->i++;
            break;
        }
        int64_t cp = parse_char(p);
        if (cp < 0) {
            free(buf);
            return -1;
        }
        if (n + 4 > cap) {
            cap = cap ? cap * 2 : 32;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return fail(p, "out of memory");
            }
            buf = nb;
        }
        n += (size_t)ga_utf8_encode((uint32_t)cp, buf + n);
    }
    int32_t id = ga_lit(p->a, buf, (int32_t)n);
    free(buf);
    return id;
}

static int32_t parse_class(ep *p)
{
    p->i++; /* [ */
    int neg = 0;
    if (p->i < p->n && p->s[p->i] == '^') neg = 1, p->i++;
    uint32_t *r = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (p->i >= p->n) {
            free(r);
            return fail(p, "unterminated character class");
        }
        if (p->s[p->i] == ']') {
            p->i++;
            break;
        }
        int64_t lo = parse_char(p), hi = lo;
        if (lo < 0) {
            free(r);
            return -1;
        }
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            hi = parse_char(p);
            if (hi < 0) {
                free(r);
                return -1;
            }
            if (hi < lo) {
                free(r);
                return fail(p, "character range out of order");
            }
        }
        if (n + 1 > cap) {
            cap = cap ? cap * 2 : 16;
            uint32_t *nr = realloc(r, cap * 2 * sizeof *nr);
            if (!nr) {
                free(r);
                return fail(p, "out of memory");
            }
            r = nr;
        }
        r[2 * n] = (uint32_t)lo;
        r[2 * n + 1] = (uint32_t)hi;
        n++;
    }
    int32_t id = ga_class(p->a, r, (int32_t)n, neg);
    free(r);
    return id;
}

static int32_t parse_alts(ep *p, int depth);

static int parse_int(ep *p, int32_t *out)
{
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "expected a number");
    int64_t v = 0;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        v = v * 10 + (p->s[p->i++] - '0');
        if (v > 1000000) return fail(p, "repetition count too large");
    }
    *out = (int32_t)v;
    return 0;
}

static int32_t parse_primary(ep *p, int depth)
{
    char c = p->s[p->i];
    if (c == '"' || c == '\'') return parse_literal(p);
    if (c == '[') return parse_class(p);
    if (c == '(') {
        if (depth >= MAX_DEPTH) return fail(p, "nesting too deep");
        p->i++;
        int32_t e = parse_alts(p, depth + 1);
        if (e < 0) return -1;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ')') return fail(p, "expected ')'");
        p->i++;
        return e;
    }
    size_t l = name_len(p, p->i);
    if (l) {
        int l0, c0;
        where(p, p->i, &l0, &c0);
        int32_t r = ga_rule_id(p->a, p->s + p->i, l, l0);
        if (r < 0) return fail(p, "out of memory");
        p->i += l;
        return ga_new(p->a, GA_REF, r, 0);
    }
    if (c == '.') {
        p->i++;
        uint32_t all[2] = {0, 0x10FFFF};
        return ga_class(p->a, all, 1, 0);
    }
    return fail(p, "expected a literal, class, rule name or '('");
}

static int32_t parse_postfix(ep *p, int depth)
{
    int32_t e = parse_primary(p, depth);
    for (int ops = 0;; ops++) {
        if (e < 0) return -1;
        if (ops > 64) return fail(p, "too many repetition operators in a row");
        size_t save = p->i;
        skip_ws(p);
        if (p->i >= p->n) {
            p->i = save;
            return e;
        }
        char c = p->s[p->i];
        if (c == '*') p->i++, e = ga_rep(p->a, e, 0, -1);
        else if (c == '+') p->i++, e = ga_rep(p->a, e, 1, -1);
        else if (c == '?') p->i++, e = ga_rep(p->a, e, 0, 1);
        else if (c == '{') {
            p->i++;
            skip_ws(p);
            int32_t lo = 0, hi = -1;
            if (p->i < p->n && p->s[p->i] != ',' && parse_int(p, &lo) < 0) return -1;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                skip_ws(p);
                if (p->i < p->n && p->s[p->i] != '}' && parse_int(p, &hi) < 0) return -1;
            } else hi = lo;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '}') return fail(p, "expected '}'");
            p->i++;
            if (hi >= 0 && hi < lo) return fail(p, "repetition {m,n} with n < m");
            e = ga_rep(p->a, e, lo, hi);
        } else {
            p->i = save;
            return e;
        }
    }
}

static int32_t parse_seq(ep *p, int depth)
{
    gm_ibuf kids = {0}; /* the node's children */
    for (;;) {
        skip_ws(p);
        if (p->i >= p->n) break;
        char c = p->s[p->i];
        if (c == '|' || c == ')') break;
        if (rule_head_at(p, p->i)) break;
        int32_t e = parse_postfix(p, depth);
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

static int32_t parse_alts(ep *p, int depth)
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
        skip_ws(p);
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

int ga_parse_ebnf(ga_ast *a, const char *text, size_t len, char *err, size_t errlen)
{
    ep p = {.a = a, .s = text, .n = len, .err = err, .errlen = errlen};
    for (;;) {
        skip_ws(&p);
        if (p.i >= p.n) break;
        size_t l = name_len(&p, p.i);
        if (!l) return fail(&p, "expected a rule name");
        int line, col;
        where(&p, p.i, &line, &col);
        int32_t r = ga_rule_id(a, text + p.i, l, line);
        if (r < 0) return fail(&p, "out of memory");
        p.i += l;
        skip_ws(&p);
        if (p.i + 3 > p.n || memcmp(text + p.i, "::=", 3)) return fail(&p, "expected '::='");
        p.i += 3;
        if (a->rules[r].body >= 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "rule '%.100s' defined twice", a->rules[r].name);
            return fail(&p, msg);
        }
        int32_t body = parse_alts(&p, 0);
        if (body < 0) return -1;
        skip_ws(&p);
        if (p.i < p.n && p.s[p.i] == ')') return fail(&p, "unbalanced ')'");
        a->rules[r].body = body;
        a->rules[r].line = line;
    }
    if (a->oom) return fail(&p, "out of memory");
    return 0;
}
