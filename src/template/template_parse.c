/* template_parse — Jinja2 lexer and parser (source -> AST).
 *
 * DESIGN: the lexer follows jinja2/lexer.py with the options transformers
 * sets: newlines are normalized to "\n" and one trailing newline dropped
 * (keep_trailing_newline=False); {%- / -%} strip whitespace (Python's
 * definition of whitespace); trim_blocks drops the first newline after a
 * block or comment tag; lstrip_blocks strips spaces and tabs before a block
 * or comment tag that starts a line (not before {{ }}); "+" disables both;
 * "}}" and "%}" do not end a tag while brackets are open.  The parser is
 * recursive descent with Jinja's precedence (low to high): ternary, or,
 * and, not, comparisons/in/is, + -, ~, * / // %, **, unary - +, postfix
 * (. [] ()), filters and tests.  Nesting depth is bounded (deep input is a
 * syntax error, not a stack overflow).  Unknown filters and tests fail at
 * compile time, as Jinja2 does (the names come from the interpreter's
 * tables: tr_filter_known / tr_test_known).
 *
 * Node layout (fields of tnode, see template_impl.h):
 *   GETATTR a.name   GETITEM a[b]   SLICE a[b:c:d]   CALL a(l1, names=l2)
 *   FILTER a|name(l1, names=l2) (a NULL in filter blocks)   TEST a is name(l1), op=negated
 *   BINOP a op b   NEG/POS/NOT a   AND/OR a b   COMPARE a (l2[i].op l1[i])...
 *   COND b if a else c   LIST/TUPLE l1   DICT l1:l2   CONCAT l1
 *   BODY l1   TEXT lit   PRINT a   IF a: b else c   FOR names in a if d: b else c
 *     (FOR op=1: with-block, names = l2; op=2: recursive loop)
 *   SET names = a (op=1: name.names[0] = a)   SET_BLOCK names, filters l1, body b
 *   MACRO name(names = l2 defaults): b   CALL_BLOCK a with caller(names = l2): b
 *   FILTER_BLOCK l1: b */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"
#include "template/template_impl.h"
#include "util/log.h"

#define MAX_NEST 200

enum { T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT,
       T_FLOAT, T_OP, T_EOF };

typedef struct ttok {
    int type;
    int line, col;
    const char *s; /* DATA/NAME/STRING text (arena), OP text */
    size_t len;
    int64_t i;
    double f;
} ttok;

typedef struct tparser {
    tarena *a;
    const char *src; /* normalized source */
    size_t n;
    ttok *toks;      /* (ntok) */
    size_t ntok, cap;
    size_t pos;
    int depth;
    char err[256];
    int failed;
    size_t pos_off;  /* pos_of() cache: offset -> line/col */
    int pos_line, pos_col;
} tparser;

static void perr_at(tparser *p, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void perr_at(tparser *p, int line, int col, const char *fmt, ...)
{
    if (p->failed) return;
    p->failed = 1;
    int k = snprintf(p->err, sizeof p->err, "line %d, column %d: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + k, sizeof p->err - (size_t)k, fmt, ap);
    va_end(ap);
}

/* ---- lexer ------------------------------------------------------------- */
static void pos_of(tparser *p, size_t off, int *line, int *col)
{
    /* incremental: offsets mostly grow, so continue from the last answer */
    if (off < p->pos_off) {
        p->pos_off = 0;
        p->pos_line = 1;
        p->pos_col = 1;
    }
    for (size_t i = p->pos_off; i < off && i < p->n; i++) {
        if (p->src[i] == '\n') {
            p->pos_line++;
            p->pos_col = 1;
        } else p->pos_col++;
    }
    if (off > p->pos_off) p->pos_off = off < p->n ? off : p->n;
    *line = p->pos_line;
    *col = p->pos_col;
}

static ttok *push_tok(tparser *p, int type, size_t off)
{
    if (p->ntok == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 256;
        ttok *t = realloc(p->toks, nc * sizeof *t);
        if (!t) {
            perr_at(p, 0, 0, "out of memory");
            return NULL;
        }
        p->toks = t;
        p->cap = nc;
    }
    ttok *t = &p->toks[p->ntok++];
    memset(t, 0, sizeof *t);
    t->type = type;
    pos_of(p, off, &t->line, &t->col);
    return t;
}

/* Length of the Python-whitespace code point at s[i], 0 if none. */
static size_t ws_at(const char *s, size_t n, size_t i)
{
    size_t j = i;
    uint32_t c = tutf8_next(s, n, &j);
    return tpy_isspace(c) ? j - i : 0;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    size_t k;
    while (i < n && (k = ws_at(s, n, i))) i += k;
    return i;
}

/* End of the text after removing trailing Python whitespace from s[b,e). */
static size_t rstrip_end(const char *s, size_t b, size_t e)
{
    while (e > b) {
        size_t st = e - 1;
        while (st > b && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
        if (ws_at(s, e, st) == e - st) e = st;
        else break;
    }
    return e;
}

static void emit_data(tparser *p, size_t b, size_t e)
{
    if (e <= b) return;
    ttok *t = push_tok(p, T_DATA, b);
    if (!t) return;
    t->s = p->src + b;
    t->len = e - b;
}

/* Apply {%- / lstrip_blocks to text [b,e) before a tag with `sign` ('-',
 * '+' or 0); returns the new end. */
static size_t strip_before(tparser *p, size_t b, size_t e, char sign, int is_block, int line_starting)
{
    if (sign == '-') return rstrip_end(p->src, b, e);
    if (sign == '+' || !is_block) return e;
    size_t l = e;
    while (l > b && p->src[l - 1] != '\n') l--;
    if (l > b || line_starting) {
        if (l == e) return e;
        /* only whitespace between line start and tag? */
        size_t i = l, k;
        while (i < e && (k = ws_at(p->src, e, i))) i += k;
        if (i == e) return l;
    }
    return e;
}

static int unescape_string(tparser *p, const char *s, size_t n, tbuf *out)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            tbuf_putc(out, c);
            continue;
        }
        char e = s[++i];
        switch (e) {
        case 'n': tbuf_putc(out, '\n'); break;
        case 't': tbuf_putc(out, '\t'); break;
        case 'r': tbuf_putc(out, '\r'); break;
        case '\\': tbuf_putc(out, '\\'); break;
        case '\'': tbuf_putc(out, '\''); break;
        case '"': tbuf_putc(out, '"'); break;
        case 'a': tbuf_putc(out, '\a'); break;
        case 'b': tbuf_putc(out, '\b'); break;
        case 'f': tbuf_putc(out, '\f'); break;
        case 'v': tbuf_putc(out, '\v'); break;
        case '\n': break; /* line continuation */
        case 'x':
        case 'u':
        case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            if (i + (size_t)nd >= n) return -1;
            for (int k = 1; k <= nd; k++) {
                char h = s[i + (size_t)k];
                int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (d < 0) return -1;
                cp = cp * 16 + (uint32_t)d;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1; /* no lone surrogates */
            tutf8_put(out, cp);
            i += (size_t)nd;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = 0;
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(s[i] - '0');
                    i++;
                    k++;
                }
                i--;
                tutf8_put(out, cp);
            } else {
                tbuf_putc(out, '\\');
                tbuf_putc(out, e);
            }
        }
    }
    (void)p;
    return 0;
}

static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Lex the inside of a tag starting at i; kind is T_VAR_BEGIN/T_BLOCK_BEGIN.
 * Returns the index after the end delimiter (and its whitespace handling)
 * and sets *line_starting. */
static size_t lex_tag(tparser *p, size_t i, int kind, int *line_starting)
{
    const char *s = p->src;
    size_t n = p->n;
    char endc = kind == T_VAR_BEGIN ? '}' : '%';
    int bal = 0;
    while (!p->failed) {
        i = skip_ws(s, n, i);
        if (i >= n) {
            int l, c;
            pos_of(p, i, &l, &c);
            perr_at(p, l, c, "unexpected end of template, expected '%s'", kind == T_VAR_BEGIN ? "}}" : "%}");
            return n;
        }
        /* end delimiter (only with no open brackets) */
        if (bal == 0) {
            size_t j = i;
            char sign = 0;
            if ((s[j] == '-' || (s[j] == '+' && kind == T_BLOCK_BEGIN)) && j + 2 < n &&
                s[j + 1] == endc && s[j + 2] == '}') {
                sign = s[j];
                j++;
            }
            if (j + 1 < n && s[j] == endc && s[j + 1] == '}') {
                push_tok(p, kind == T_VAR_BEGIN ? T_VAR_END : T_BLOCK_END, i);
                j += 2;
                if (sign == '-') {
                    j = skip_ws(s, n, j);
                } else if (sign != '+' && kind == T_BLOCK_BEGIN && j < n && s[j] == '\n') {
                    j++; /* trim_blocks */
                }
                *line_starting = j > 0 && s[j - 1] == '\n';
                return j;
            }
        }
        char c = s[i];
        if (is_name_start(c)) {
            size_t b = i;
            while (i < n && is_name_char(s[i])) i++;
            ttok *t = push_tok(p, T_NAME, b);
            if (!t) return n;
            t->s = tarena_strndup(p->a, s + b, i - b);
            t->len = i - b;
        } else if (is_digit(c)) {
            size_t b = i;
            int isf = 0;
            while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) i++;
            if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
                isf = 1;
                i++;
                while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) i++;
            }
            if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                size_t k = i + 1;
                if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                if (k < n && is_digit(s[k])) {
                    isf = 1;
                    i = k;
                    while (i < n && is_digit(s[i])) i++;
                }
            }
            char tmp[128];
            size_t m = 0;
            for (size_t k = b; k < i && m + 1 < sizeof tmp; k++)
                if (s[k] != '_') tmp[m++] = s[k];
            tmp[m] = 0;
            ttok *t = push_tok(p, isf ? T_FLOAT : T_INT, b);
            if (!t) return n;
            if (isf) t->f = strtod(tmp, NULL);
            else {
                char *endp;
                unsigned long long v = strtoull(tmp, &endp, 10);
                if (m > 18 && (v > (unsigned long long)INT64_MAX || m > 19)) {
                    perr_at(p, t->line, t->col, "integer literal too large");
                    return n;
                }
                t->i = (int64_t)v;
            }
        } else if (c == '\'' || c == '"') {
            size_t b = i++;
            while (i < n && s[i] != c) {
                if (s[i] == '\\' && i + 1 < n) i++;
                i++;
            }
            if (i >= n) {
                int l, cc;
                pos_of(p, b, &l, &cc);
                perr_at(p, l, cc, "unterminated string");
                return n;
            }
            tbuf out = {0};
            int rc = unescape_string(p, s + b + 1, i - b - 1, &out);
            i++;
            ttok *t = push_tok(p, T_STRING, b);
            if (!t) {
                tbuf_free(&out);
                return n;
            }
            if (rc || out.over) {
                tbuf_free(&out);
                perr_at(p, t->line, t->col, "invalid escape in string literal");
                return n;
            }
            t->s = tarena_strndup(p->a, out.p ? out.p : "", out.len);
            t->len = out.len;
            tbuf_free(&out);
        } else {
            static const char *ops2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
            size_t b = i, len = 0;
            for (int k = 0; ops2[k]; k++)
                if (i + 1 < n && s[i] == ops2[k][0] && s[i + 1] == ops2[k][1]) len = 2;
            if (!len && strchr("+-/*%~[](){}<>=.:|,;", c) && c) len = 1;
            if (!len) {
                int l, cc;
                pos_of(p, i, &l, &cc);
                perr_at(p, l, cc, "unexpected character '%c'", c);
                return n;
            }
            if (c == '(' || c == '[' || c == '{') bal++;
            if ((c == ')' || c == ']' || c == '}') && bal > 0) bal--;
            ttok *t = push_tok(p, T_OP, b);
            if (!t) return n;
            t->s = s + b;
            t->len = len;
            i += len;
        }
    }

    return n;
}

/* Match "{%[-+]? *NAME *[-+]?%}" at i; returns end index or 0. */
static size_t match_simple_block(const char *s, size_t n, size_t i, const char *name, char *sign_in,
                                 char *sign_out)
{
    if (i + 1 >= n || s[i] != '{' || s[i + 1] != '%') return 0;
    i += 2;
    *sign_in = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) *sign_in = s[i++];
    i = skip_ws(s, n, i);
    size_t k = strlen(name);
    if (i + k > n || memcmp(s + i, name, k) || (i + k < n && is_name_char(s[i + k]))) return 0;
    i = skip_ws(s, n, i + k);
    *sign_out = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) *sign_out = s[i++];
    if (i + 1 < n && s[i] == '%' && s[i + 1] == '}') return i + 2;
    return 0;
}

static void lex(tparser *p)
{
    const char *s = p->src;
    size_t n = p->n, i = 0;
    int line_starting = 1;
    while (i < n && !p->failed) {
        /* find the next tag start */
        size_t j = i;
        int kind = -1;
        while (j + 1 < n) {
            if (s[j] == '{' && (s[j + 1] == '{' || s[j + 1] == '%' || s[j + 1] == '#')) {
                kind = s[j + 1];
                break;
            }
            j++;
        }
        if (kind < 0) {
            emit_data(p, i, n);
            return;
        }
        char sign = (j + 2 < n && (s[j + 2] == '-' || s[j + 2] == '+')) ? s[j + 2] : 0;
        /* raw block */
        char si, so;
        size_t rend = kind == '%' ? match_simple_block(s, n, j, "raw", &si, &so) : 0;
        if (rend && so == '+') rend = 0; /* jinja2's raw_begin takes "-%}" or "%}" only */
        if (rend) {
            emit_data(p, i, strip_before(p, i, j, si, 1, line_starting));
            size_t b = rend;
            if (so == '-') b = skip_ws(s, n, b);
            size_t k = b, e = 0, endend = 0;
            char si2 = 0, so2 = 0;
            for (; k + 1 < n; k++)
                if ((endend = match_simple_block(s, n, k, "endraw", &si2, &so2))) {
                    e = k;
                    break;
                }
            if (!endend) {
                int l, c;
                pos_of(p, j, &l, &c);
                perr_at(p, l, c, "missing endraw");
                return;
            }
            size_t te = strip_before(p, b, e, si2, 1, 0);
            emit_data(p, b, te);
            i = endend;
            if (so2 == '-') i = skip_ws(s, n, i);
            else if (so2 != '+' && i < n && s[i] == '\n') i++;
            line_starting = i > 0 && s[i - 1] == '\n';
            continue;
        }
        int is_block = kind == '%' || kind == '#';
        emit_data(p, i, strip_before(p, i, j, sign, is_block, line_starting));
        size_t b = j + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t k = b;
            while (k + 1 < n && !(s[k] == '#' && s[k + 1] == '}')) k++;
            if (k + 1 >= n) {
                int l, c;
                pos_of(p, j, &l, &c);
                perr_at(p, l, c, "missing end of comment tag");
                return;
            }
            char esign = (k > b && (s[k - 1] == '-' || s[k - 1] == '+')) ? s[k - 1] : 0;
            i = k + 2;
            if (esign == '-') i = skip_ws(s, n, i);
            else if (esign != '+' && i < n && s[i] == '\n') i++;
            line_starting = i > 0 && s[i - 1] == '\n';
            continue;
        }
        push_tok(p, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, j);
        i = lex_tag(p, b, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, &line_starting);
    }
}

/* ---- parser helpers -------------------------------------------------------- */
static ttok *cur(tparser *p) { return &p->toks[p->pos]; }
static ttok *peek(tparser *p, size_t k)
{
    return p->pos + k < p->ntok ? &p->toks[p->pos + k] : &p->toks[p->ntok - 1];
}
static void adv(tparser *p)
{
    if (p->pos + 1 < p->ntok) p->pos++;
}
static int is_op(const ttok *t, const char *op)
{
    return t->type == T_OP && t->len == strlen(op) && !memcmp(t->s, op, t->len);
}
static int is_name(const ttok *t, const char *nm) { return t->type == T_NAME && !strcmp(t->s, nm); }

static const char *tok_desc(const ttok *t)
{
    switch (t->type) {
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_NAME: return "name";
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_OP: return "operator";
    default: return "end of template";
    }
}

static void unexpected(tparser *p, const char *expected)
{
    ttok *t = cur(p);
    if (t->type == T_NAME || t->type == T_OP)
        perr_at(p, t->line, t->col, "unexpected '%.*s', expected %s", (int)(t->type == T_OP ? t->len : strlen(t->s)),
                t->s, expected);
    else perr_at(p, t->line, t->col, "unexpected %s, expected %s", tok_desc(t), expected);
}

static int expect_op(tparser *p, const char *op)
{
    if (!is_op(cur(p), op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", op);
        unexpected(p, e);
        return -1;
    }
    adv(p);
    return 0;
}

static tnode *mk(tparser *p, int kind, const ttok *at)
{
    tnode *n = tarena_alloc(p->a, sizeof *n);
    if (!n) {
        perr_at(p, 0, 0, "out of memory");
        return NULL;
    }
    n->kind = (uint8_t)kind;
    n->line = at ? at->line : 0;
    n->col = at ? at->col : 0;
    return n;
}

/* growable node list built in malloc, copied to the arena when done */
typedef struct nlist {
    tnode **v;
    size_t n, cap;
    const char **names;
} nlist;

static void nl_push(tparser *p, nlist *l, tnode *x, const char *name)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        tnode **v = realloc(l->v, nc * sizeof *v);
        if (v) l->v = v;
        const char **nm = realloc(l->names, nc * sizeof *nm);
        if (nm) l->names = nm;
        if (!v || !nm) {
            perr_at(p, 0, 0, "out of memory");
            return;
        }
        l->v = v;
        l->names = nm;
        l->cap = nc;
    }
    l->v[l->n] = x;
    l->names[l->n] = name;
    l->n++;
}

static tnode **nl_finish(tparser *p, nlist *l, size_t *n, const char ***names)
{
    tnode **out = tarena_alloc(p->a, (l->n ? l->n : 1) * sizeof *out);
    const char **nm = names ? tarena_alloc(p->a, (l->n ? l->n : 1) * sizeof *nm) : NULL;
    if (!out || (names && !nm)) perr_at(p, 0, 0, "out of memory");
    else {
        if (l->n) memcpy(out, l->v, l->n * sizeof *out);
        if (names && l->n) memcpy(nm, l->names, l->n * sizeof *nm);
    }
    *n = l->n;
    if (names) *names = nm;
    free(l->v);
    free(l->names);
    memset(l, 0, sizeof *l);
    return out;
}

/* ---- expressions --------------------------------------------------------- */
static tnode *parse_expr(tparser *p);
static tnode *parse_or(tparser *p);
static tnode *parse_unary(tparser *p, int with_filter);
static tnode *parse_primary(tparser *p);
static tnode *parse_postfix(tparser *p, tnode *n);

/* Parse "(args, name=value, ...)" after '(' has been seen; fills n. */
static void parse_call_args(tparser *p, tnode *n)
{
    nlist args = {0}, kw = {0};
    adv(p); /* ( */
    while (!p->failed && !is_op(cur(p), ")")) {
        if (args.n || kw.n) {
            if (expect_op(p, ",")) break;
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            unexpected(p, "an argument (*args/**kwargs are not supported)");
            break;
        }
        if (cur(p)->type == T_NAME && is_op(peek(p, 1), "=")) {
            const char *nm = cur(p)->s;
            adv(p);
            adv(p);
            tnode *v = parse_expr(p);
            if (!v) break;
            nl_push(p, &kw, v, nm);
        } else {
            if (kw.n) {
                unexpected(p, "a keyword argument");
                break;
            }
            tnode *v = parse_expr(p);
            if (!v) break;
            nl_push(p, &args, v, NULL);
        }
    }
    if (!p->failed) expect_op(p, ")");
    n->l1 = nl_finish(p, &args, &n->n1, NULL);
    n->l2 = nl_finish(p, &kw, &n->n2, &n->names);
    n->nn = n->n2;
}

static const char *parse_dotted_name(tparser *p)
{
    if (cur(p)->type != T_NAME) {
        unexpected(p, "a name");
        return NULL;
    }
    const char *nm = cur(p)->s;
    adv(p);
    return nm;
}

static tnode *parse_filter(tparser *p, tnode *operand)
{
    ttok *at = cur(p);
    const char *nm = parse_dotted_name(p);
    if (!nm) return NULL;
    if (!tr_filter_known(nm)) {
        perr_at(p, at->line, at->col, "no filter named '%s' (unknown or not supported by sglc)", nm);
        return NULL;
    }
    tnode *n = mk(p, TN_FILTER, at);
    if (!n) return NULL;
    n->a = operand;
    n->name = nm;
    if (is_op(cur(p), "(")) parse_call_args(p, n);
    return p->failed ? NULL : n;
}

static tnode *parse_filter_expr(tparser *p, tnode *node)
{
    while (node && !p->failed) {
        ttok *t = cur(p);
        if (is_op(t, "|")) {
            adv(p);
            node = parse_filter(p, node);
        } else if (is_name(t, "is")) {
            adv(p);
            int neg = 0;
            if (is_name(cur(p), "not")) {
                neg = 1;
                adv(p);
            }
            ttok *at = cur(p);
            const char *nm = NULL;
            if (at->type == T_NAME) nm = at->s;
            if (!nm) {
                unexpected(p, "a test name");
                return NULL;
            }
            adv(p);
            if (!tr_test_known(nm)) {
                perr_at(p, at->line, at->col, "no test named '%s'", nm);
                return NULL;
            }
            tnode *n = mk(p, TN_TEST, at);
            if (!n) return NULL;
            n->a = node;
            n->name = nm;
            n->op = (uint8_t)neg;
            ttok *c = cur(p);
            if (is_op(c, "(")) parse_call_args(p, n);
            else if (is_name(c, "is")) {
                perr_at(p, c->line, c->col, "You cannot chain multiple tests with is");
                return NULL;
            } else if ((c->type == T_NAME && !is_name(c, "else") && !is_name(c, "or") &&
                        !is_name(c, "and")) ||
                     c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT ||
                     is_op(c, "[") || is_op(c, "{")) {
                tnode *arg = parse_primary(p);
                arg = arg ? parse_postfix(p, arg) : NULL;
                if (!arg) return NULL;
                n->l1 = tarena_alloc(p->a, sizeof(tnode *));
                if (!n->l1) return NULL;
                n->l1[0] = arg;
                n->n1 = 1;
            }
            node = n;
        } else if (is_op(t, "(")) {
            tnode *n = mk(p, TN_CALL, t);
            if (!n) return NULL;
            n->a = node;
            parse_call_args(p, n);
            node = n;
        } else break;
    }
    return p->failed ? NULL : node;
}

static tnode *parse_subscript(tparser *p, tnode *obj)
{
    ttok *at = cur(p);
    adv(p); /* [ */
    tnode *parts[3] = {NULL, NULL, NULL};
    int nparts = 0, is_slice = 0;
    for (;;) {
        if (is_op(cur(p), ":")) {
            is_slice = 1;
            if (++nparts > 2) {
                unexpected(p, "']'");
                return NULL;
            }
            adv(p);
            continue;
        }
        if (is_op(cur(p), "]")) break;
        if (parts[nparts]) {
            if (!is_slice && nparts == 0 && is_op(cur(p), ",")) {
                /* a[x, y]: the key is a tuple, as in jinja2 */
                nlist l = {0};
                nl_push(p, &l, parts[0], NULL);
                while (!p->failed && is_op(cur(p), ",")) {
                    adv(p);
                    tnode *x = parse_expr(p);
                    if (!x) break;
                    nl_push(p, &l, x, NULL);
                }
                tnode *t = mk(p, TN_TUPLE, at);
                if (!t || p->failed) {
                    free(l.v);
                    free(l.names);
                    return NULL;
                }
                t->l1 = nl_finish(p, &l, &t->n1, NULL);
                parts[0] = t;
                continue;
            }
            unexpected(p, "']'");
            return NULL;
        }
        parts[nparts] = parse_expr(p);
        if (!parts[nparts]) return NULL;
    }
    adv(p);
    tnode *n = mk(p, is_slice ? TN_SLICE : TN_GETITEM, at);
    if (!n) return NULL;
    n->a = obj;
    n->b = parts[0];
    if (is_slice) {
        n->c = parts[1];
        n->d = parts[2];
    } else if (!parts[0]) {
        perr_at(p, at->line, at->col, "expected an index");
        return NULL;
    }
    return n;
}

static tnode *parse_postfix(tparser *p, tnode *n)
{
    while (n && !p->failed) {
        ttok *t = cur(p);
        if (is_op(t, ".")) {
            adv(p);
            ttok *a = cur(p);
            if (a->type == T_NAME) {
                tnode *g = mk(p, TN_GETATTR, t);
                if (!g) return NULL;
                g->a = n;
                g->name = a->s;
                adv(p);
                n = g;
            } else if (a->type == T_INT) {
                tnode *g = mk(p, TN_GETITEM, t), *k = mk(p, TN_LIT, a);
                if (!g || !k) return NULL;
                k->lit = tv_int(p->a, a->i);
                g->a = n;
                g->b = k;
                adv(p);
                n = g;
            } else {
                unexpected(p, "an attribute name");
                return NULL;
            }
        } else if (is_op(t, "[")) {
            n = parse_subscript(p, n);
        } else if (is_op(t, "(")) {
            tnode *c = mk(p, TN_CALL, t);
            if (!c) return NULL;
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else break;
    }
    return p->failed ? NULL : n;
}

static tnode *parse_primary(tparser *p)
{
    ttok *t = cur(p);
    if (++p->depth > MAX_NEST) {
        perr_at(p, t->line, t->col, "expression nested too deeply");
        return NULL;
    }
    tnode *n = NULL;
    if (t->type == T_NAME) {
        n = mk(p, TN_LIT, t);
        if (!n) return NULL;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->lit = &tv_true_v;
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->lit = &tv_false_v;
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->lit = &tv_none_v;
        else {
            n->kind = TN_NAME;
            n->name = t->s;
        }
        adv(p);
    } else if (t->type == T_STRING) {
        /* adjacent string literals concatenate */
        tbuf b = {0};
        while (cur(p)->type == T_STRING) {
            tbuf_put(&b, cur(p)->s, cur(p)->len);
            adv(p);
        }
        n = mk(p, TN_LIT, t);
        if (n) n->lit = tv_str(p->a, b.p ? b.p : "", b.len);
        tbuf_free(&b);
        if (n && !n->lit) perr_at(p, t->line, t->col, "out of memory");
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        n = mk(p, TN_LIT, t);
        if (n) n->lit = t->type == T_INT ? tv_int(p->a, t->i) : tv_float(p->a, t->f);
        adv(p);
    } else if (is_op(t, "(")) {
        adv(p);
        if (is_op(cur(p), ")")) {
            adv(p);
            n = mk(p, TN_TUPLE, t);
        } else {
            tnode *e = parse_expr(p);
            if (!e) return NULL;
            if (is_op(cur(p), ",")) {
                nlist l = {0};
                nl_push(p, &l, e, NULL);
                while (is_op(cur(p), ",")) {
                    adv(p);
                    if (is_op(cur(p), ")")) break;
                    tnode *x = parse_expr(p);
                    if (!x) {
                        free(l.v);
                        free(l.names);
                        return NULL;
                    }
                    nl_push(p, &l, x, NULL);
                }
                n = mk(p, TN_TUPLE, t);
                if (n) n->l1 = nl_finish(p, &l, &n->n1, NULL);
                else {
                    free(l.v);
                    free(l.names);
                }
            } else n = e;
            if (expect_op(p, ")")) return NULL;
        }
    } else if (is_op(t, "[")) {
        adv(p);
        nlist l = {0};
        while (!p->failed && !is_op(cur(p), "]")) {
            if (l.n && expect_op(p, ",")) break;
            if (is_op(cur(p), "]")) break;
            tnode *x = parse_expr(p);
            if (!x) break;
            nl_push(p, &l, x, NULL);
        }
        if (!p->failed) expect_op(p, "]");
        n = mk(p, TN_LIST, t);
        if (n) n->l1 = nl_finish(p, &l, &n->n1, NULL);
        else {
            free(l.v);
            free(l.names);
        }
    } else if (is_op(t, "{")) {
        adv(p);
        nlist k = {0}, v = {0};
        while (!p->failed && !is_op(cur(p), "}")) {
            if (k.n && expect_op(p, ",")) break;
            if (is_op(cur(p), "}")) break;
            tnode *x = parse_expr(p);
            if (!x || expect_op(p, ":")) break;
            tnode *y = parse_expr(p);
            if (!y) break;
            nl_push(p, &k, x, NULL);
            nl_push(p, &v, y, NULL);
        }
        if (!p->failed) expect_op(p, "}");
        n = mk(p, TN_DICT, t);
        if (n) {
            n->l1 = nl_finish(p, &k, &n->n1, NULL);
            n->l2 = nl_finish(p, &v, &n->n2, NULL);
        } else {
            free(k.v);
            free(k.names);
            free(v.v);
            free(v.names);
        }
    } else {
        unexpected(p, "an expression");
    }
    p->depth--;
    return p->failed ? NULL : n;
}

static tnode *parse_unary(tparser *p, int with_filter)
{
    ttok *t = cur(p);
    tnode *n;
    if (++p->depth > MAX_NEST) {
        perr_at(p, t->line, t->col, "expression nested too deeply");
        return NULL;
    }
    if (is_op(t, "-") || is_op(t, "+")) {
        adv(p);
        tnode *x = parse_unary(p, 0);
        if (!x) return NULL;
        n = mk(p, is_op(t, "-") ? TN_NEG : TN_POS, t);
        if (!n) return NULL;
        n->a = x;
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static tnode *binop(tparser *p, const ttok *at, int op, tnode *a, tnode *b)
{
    if (!a || !b) return NULL;
    tnode *n = mk(p, TN_BINOP, at);
    if (!n) return NULL;
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static tnode *parse_pow(tparser *p)
{
    tnode *l = parse_unary(p, 1);
    while (l && is_op(cur(p), "**")) {
        ttok *t = cur(p);
        adv(p);
        l = binop(p, t, TOP_POW, l, parse_unary(p, 1));
    }
    return l;
}

static tnode *parse_math2(tparser *p)
{
    tnode *l = parse_pow(p);
    while (l) {
        ttok *t = cur(p);
        int op = is_op(t, "*") ? TOP_MUL : is_op(t, "/") ? TOP_DIV : is_op(t, "//") ? TOP_FLOORDIV
                 : is_op(t, "%") ? TOP_MOD : -1;
        if (op < 0) break;
        adv(p);
        l = binop(p, t, op, l, parse_pow(p));
    }
    return l;
}

static tnode *parse_concat(tparser *p)
{
    tnode *l = parse_math2(p);
    if (!l || !is_op(cur(p), "~")) return l;
    nlist parts = {0};
    ttok *at = cur(p);
    nl_push(p, &parts, l, NULL);
    while (is_op(cur(p), "~")) {
        adv(p);
        tnode *x = parse_math2(p);
        if (!x) {
            free(parts.v);
            free(parts.names);
            return NULL;
        }
        nl_push(p, &parts, x, NULL);
    }
    tnode *n = mk(p, TN_CONCAT, at);
    if (!n) {
        free(parts.v);
        free(parts.names);
        return NULL;
    }
    n->l1 = nl_finish(p, &parts, &n->n1, NULL);
    return n;
}

static tnode *parse_math1(tparser *p)
{
    tnode *l = parse_concat(p);
    while (l) {
        ttok *t = cur(p);
        int op = is_op(t, "+") ? TOP_ADD : is_op(t, "-") ? TOP_SUB : -1;
        if (op < 0) break;
        adv(p);
        l = binop(p, t, op, l, parse_concat(p));
    }
    return l;
}

static tnode *parse_compare(tparser *p)
{
    tnode *first = parse_math1(p);
    if (!first) return NULL;
    nlist ops = {0}, rhs = {0};
    ttok *at = cur(p);
    for (;;) {
        ttok *t = cur(p);
        int op = is_op(t, "==") ? TOP_EQ : is_op(t, "!=") ? TOP_NE : is_op(t, "<") ? TOP_LT
                 : is_op(t, "<=") ? TOP_LE : is_op(t, ">") ? TOP_GT : is_op(t, ">=") ? TOP_GE : -1;
        if (op >= 0) adv(p);
        else if (is_name(t, "in")) {
            op = TOP_IN;
            adv(p);
        } else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = TOP_NOTIN;
            adv(p);
            adv(p);
        } else break;
        tnode *r = parse_math1(p);
        tnode *o = mk(p, TN_LIT, t);
        if (!r || !o) {
            free(ops.v);
            free(ops.names);
            free(rhs.v);
            free(rhs.names);
            return NULL;
        }
        o->op = (uint8_t)op;
        nl_push(p, &ops, o, NULL);
        nl_push(p, &rhs, r, NULL);
    }
    if (!ops.n) return first;
    tnode *n = mk(p, TN_COMPARE, at);
    if (!n) return NULL;
    n->a = first;
    n->l1 = nl_finish(p, &rhs, &n->n1, NULL);
    n->l2 = nl_finish(p, &ops, &n->n2, NULL);
    return p->failed ? NULL : n;
}

static tnode *parse_not(tparser *p)
{
    if (is_name(cur(p), "not")) {
        ttok *t = cur(p);
        adv(p);
        if (++p->depth > MAX_NEST) {
            perr_at(p, t->line, t->col, "expression nested too deeply");
            return NULL;
        }
        tnode *x = parse_not(p);
        p->depth--;
        if (!x) return NULL;
        tnode *n = mk(p, TN_NOT, t);
        if (n) n->a = x;
        return n;
    }
    return parse_compare(p);
}

static tnode *parse_and(tparser *p)
{
    tnode *l = parse_not(p);
    while (l && is_name(cur(p), "and")) {
        ttok *t = cur(p);
        adv(p);
        tnode *r = parse_not(p);
        if (!r) return NULL;
        tnode *n = mk(p, TN_AND, t);
        if (!n) return NULL;
        n->a = l;
        n->b = r;
        l = n;
    }
    return l;
}

static tnode *parse_or(tparser *p)
{
    tnode *l = parse_and(p);
    while (l && is_name(cur(p), "or")) {
        ttok *t = cur(p);
        adv(p);
        tnode *r = parse_and(p);
        if (!r) return NULL;
        tnode *n = mk(p, TN_OR, t);
        if (!n) return NULL;
        n->a = l;
        n->b = r;
        l = n;
    }
    return l;
}

/* condexpr: or ('if' or ('else' condexpr)?)* */
static tnode *parse_expr(tparser *p)
{
    ttok *t0 = cur(p);
    if (++p->depth > MAX_NEST) {
        perr_at(p, t0->line, t0->col, "expression nested too deeply");
        return NULL;
    }
    tnode *e = parse_or(p);
    while (e && is_name(cur(p), "if")) {
        ttok *t = cur(p);
        adv(p);
        tnode *c = parse_or(p), *f = NULL;
        if (!c) return NULL;
        if (is_name(cur(p), "else")) {
            adv(p);
            f = parse_expr(p);
            if (!f) return NULL;
        }
        tnode *n = mk(p, TN_COND, t);
        if (!n) return NULL;
        n->a = c;
        n->b = e;
        n->c = f;
        e = n;
    }
    p->depth--;
    return p->failed ? NULL : e;
}

/* expr (',' expr)* -> a tuple when there is a comma.  condexpr = 0 parses
 * each element without `a if b else c` (jinja2's with_condexpr=False, used
 * by if/elif conditions and for-loop iterables). */
static tnode *parse_tuple_expr(tparser *p, int condexpr)
{
    ttok *at = cur(p);
    tnode *e = condexpr ? parse_expr(p) : parse_or(p);
    if (!e || !is_op(cur(p), ",")) return e;
    nlist l = {0};
    nl_push(p, &l, e, NULL);
    while (is_op(cur(p), ",")) {
        adv(p);
        if (cur(p)->type == T_BLOCK_END || cur(p)->type == T_VAR_END) break;
        if (!condexpr && (is_name(cur(p), "if") || is_name(cur(p), "recursive"))) break;
        tnode *x = condexpr ? parse_expr(p) : parse_or(p);
        if (!x) {
            free(l.v);
            free(l.names);
            return NULL;
        }
        nl_push(p, &l, x, NULL);
    }
    tnode *n = mk(p, TN_TUPLE, at);
    if (n) n->l1 = nl_finish(p, &l, &n->n1, NULL);
    return n;
}

/* ---- statements -------------------------------------------------------------- */
static tnode *parse_body(tparser *p, const char *const *ends);

static int expect_block_end(tparser *p)
{
    if (cur(p)->type != T_BLOCK_END) {
        unexpected(p, "end of statement block");
        return -1;
    }
    adv(p);
    return 0;
}

/* Parse a list of target names "a" or "a, b"; returns count. */
static size_t parse_targets(tparser *p, const char ***out)
{
    const char *tmp[16];
    size_t n = 0;
    int paren = 0;
    if (is_op(cur(p), "(")) {
        paren = 1;
        adv(p);
    }
    for (;;) {
        if (cur(p)->type != T_NAME) {
            unexpected(p, "a target name");
            return 0;
        }
        if (n == 16) {
            unexpected(p, "fewer targets");
            return 0;
        }
        tmp[n++] = cur(p)->s;
        adv(p);
        if (!is_op(cur(p), ",")) break;
        adv(p);
    }
    if (paren && expect_op(p, ")")) return 0;
    *out = tarena_alloc(p->a, n * sizeof(char *));
    if (!*out) return 0;
    memcpy(*out, tmp, n * sizeof(char *));
    return n;
}

/* macro parameters "(a, b=1)" into names/l2 */
static int parse_params(tparser *p, tnode *n)
{
    nlist l = {0};
    if (expect_op(p, "(")) return -1;
    while (!p->failed && !is_op(cur(p), ")")) {
        if (l.n && expect_op(p, ",")) break;
        if (cur(p)->type != T_NAME) {
            unexpected(p, "a parameter name");
            break;
        }
        const char *nm = cur(p)->s;
        adv(p);
        tnode *def = NULL;
        if (is_op(cur(p), "=")) {
            adv(p);
            def = parse_expr(p);
            if (!def) break;
        }
        nl_push(p, &l, def, nm);
    }
    if (!p->failed) expect_op(p, ")");
    n->l2 = nl_finish(p, &l, &n->n2, &n->names);
    n->nn = n->n2;
    return p->failed ? -1 : 0;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};

static tnode *parse_if(tparser *p, ttok *at)
{
    tnode *n = mk(p, TN_IF, at);
    if (!n) return NULL;
    n->a = parse_tuple_expr(p, 0);
    if (!n->a || expect_block_end(p)) return NULL;
    n->b = parse_body(p, END_IF);
    if (!n->b) return NULL;
    ttok *t = cur(p);
    adv(p);
    if (!strcmp(t->s, "elif")) {
        n->c = parse_if(p, t);
        return n->c ? n : NULL;
    }
    if (!strcmp(t->s, "else")) {
        if (expect_block_end(p)) return NULL;
        static const char *const e[] = {"endif", NULL};
        n->c = parse_body(p, e);
        if (!n->c) return NULL;
        adv(p);
    }
    return expect_block_end(p) ? NULL : n;
}

static tnode *parse_for(tparser *p, ttok *at)
{
    tnode *n = mk(p, TN_FOR, at);
    if (!n) return NULL;
    n->nn = parse_targets(p, &n->names);
    if (!n->nn) return NULL;
    if (!is_name(cur(p), "in")) {
        unexpected(p, "'in'");
        return NULL;
    }
    adv(p);
    /* the iterable must not swallow the "if" filter: parse without condexpr */
    n->a = parse_tuple_expr(p, 0);
    if (!n->a) return NULL;
    if (is_name(cur(p), "if")) {
        adv(p);
        n->d = parse_expr(p);
        if (!n->d) return NULL;
    }
    if (is_name(cur(p), "recursive")) {
        n->op = 2;
        adv(p);
    }
    if (expect_block_end(p)) return NULL;
    n->b = parse_body(p, END_FOR);
    if (!n->b) return NULL;
    ttok *t = cur(p);
    adv(p);
    if (!strcmp(t->s, "else")) {
        if (expect_block_end(p)) return NULL;
        static const char *const e[] = {"endfor", NULL};
        n->c = parse_body(p, e);
        if (!n->c) return NULL;
        adv(p);
    }
    return expect_block_end(p) ? NULL : n;
}

static tnode *parse_filter_chain(tparser *p, tnode *n)
{
    nlist l = {0};
    for (;;) {
        tnode *f = parse_filter(p, NULL);
        if (!f) break;
        nl_push(p, &l, f, NULL);
        if (!is_op(cur(p), "|")) break;
        adv(p);
    }
    n->l1 = nl_finish(p, &l, &n->n1, NULL);
    return p->failed ? NULL : n;
}

static tnode *parse_set(tparser *p, ttok *at)
{
    tnode *n = mk(p, TN_SET, at);
    if (!n) return NULL;
    if (cur(p)->type == T_NAME && is_op(peek(p, 1), ".") && peek(p, 2)->type == T_NAME) {
        n->op = 1;
        n->name = cur(p)->s;
        n->names = tarena_alloc(p->a, sizeof(char *));
        if (!n->names) return NULL;
        n->names[0] = peek(p, 2)->s;
        n->nn = 1;
        adv(p);
        adv(p);
        adv(p);
    } else {
        n->nn = parse_targets(p, &n->names);
        if (!n->nn) return NULL;
    }
    if (is_op(cur(p), "=")) {
        adv(p);
        n->a = parse_tuple_expr(p, 1);
        if (!n->a || expect_block_end(p)) return NULL;
        return n;
    }
    if (n->op == 1) {
        unexpected(p, "'='");
        return NULL;
    }
    /* block set */
    n->kind = TN_SET_BLOCK;
    if (is_op(cur(p), "|")) {
        adv(p);
        if (!parse_filter_chain(p, n)) return NULL;
    }
    if (expect_block_end(p)) return NULL;
    static const char *const e[] = {"endset", NULL};
    n->b = parse_body(p, e);
    if (!n->b) return NULL;
    adv(p);
    return expect_block_end(p) ? NULL : n;
}

static tnode *parse_stmt(tparser *p)
{
    ttok *t = cur(p);
    if (t->type != T_NAME) {
        unexpected(p, "a statement name");
        return NULL;
    }
    const char *k = t->s;
    adv(p);
    if (!strcmp(k, "if")) return parse_if(p, t);
    if (!strcmp(k, "for")) return parse_for(p, t);
    if (!strcmp(k, "set")) return parse_set(p, t);
    if (!strcmp(k, "break") || !strcmp(k, "continue")) {
        tnode *n = mk(p, k[0] == 'b' ? TN_BREAK : TN_CONTINUE, t);
        return n && !expect_block_end(p) ? n : NULL;
    }
    if (!strcmp(k, "macro")) {
        tnode *n = mk(p, TN_MACRO, t);
        if (!n) return NULL;
        if (cur(p)->type != T_NAME) {
            unexpected(p, "a macro name");
            return NULL;
        }
        n->name = cur(p)->s;
        adv(p);
        if (parse_params(p, n) || expect_block_end(p)) return NULL;
        static const char *const e[] = {"endmacro", NULL};
        n->b = parse_body(p, e);
        if (!n->b) return NULL;
        adv(p);
        if (cur(p)->type == T_NAME) adv(p); /* {% endmacro name %} */
        return expect_block_end(p) ? NULL : n;
    }
    if (!strcmp(k, "call")) {
        tnode *n = mk(p, TN_CALL_BLOCK, t);
        if (!n) return NULL;
        if (is_op(cur(p), "(")) {
            if (parse_params(p, n)) return NULL;
        }
        n->a = parse_expr(p);
        if (!n->a) return NULL;
        if (n->a->kind != TN_CALL) {
            perr_at(p, t->line, t->col, "expected a call after 'call'");
            return NULL;
        }
        if (expect_block_end(p)) return NULL;
        static const char *const e[] = {"endcall", NULL};
        n->b = parse_body(p, e);
        if (!n->b) return NULL;
        adv(p);
        return expect_block_end(p) ? NULL : n;
    }
    if (!strcmp(k, "filter")) {
        tnode *n = mk(p, TN_FILTER_BLOCK, t);
        if (!n || !parse_filter_chain(p, n) || expect_block_end(p)) return NULL;
        static const char *const e[] = {"endfilter", NULL};
        n->b = parse_body(p, e);
        if (!n->b) return NULL;
        adv(p);
        return expect_block_end(p) ? NULL : n;
    }
    if (!strcmp(k, "generation")) {
        /* transformers' AssistantTracker: the body renders as usual */
        if (expect_block_end(p)) return NULL;
        static const char *const e[] = {"endgeneration", NULL};
        tnode *b = parse_body(p, e);
        if (!b) return NULL;
        adv(p);
        return expect_block_end(p) ? NULL : b;
    }
    if (!strcmp(k, "with")) {
        /* {% with a = x, b = y %} body {% endwith %}: a new scope */
        tnode *n = mk(p, TN_FOR, t); /* reuse: evaluated as a one-shot scope */
        if (!n) return NULL;
        n->op = 1;
        nlist vals = {0};
        while (!p->failed && cur(p)->type == T_NAME) {
            const char *nm = cur(p)->s;
            adv(p);
            if (expect_op(p, "=")) break;
            tnode *v = parse_expr(p);
            if (!v) break;
            nl_push(p, &vals, v, nm);
            if (!is_op(cur(p), ",")) break;
            adv(p);
        }
        n->l2 = nl_finish(p, &vals, &n->n2, &n->names);
        n->nn = n->n2;
        if (p->failed || expect_block_end(p)) return NULL;
        static const char *const e[] = {"endwith", NULL};
        n->b = parse_body(p, e);
        if (!n->b) return NULL;
        adv(p);
        return expect_block_end(p) ? NULL : n;
    }
    perr_at(p, t->line, t->col, "unsupported or unknown statement '%s'", k);
    return NULL;
}

/* Parse statements until a block tag whose name is in `ends` (left at that
 * name) or the end of input (an error when ends is non-NULL). */
static tnode *parse_body(tparser *p, const char *const *ends)
{
    ttok *at = cur(p);
    if (++p->depth > MAX_NEST) {
        perr_at(p, at->line, at->col, "blocks nested too deeply");
        return NULL;
    }
    nlist l = {0};
    while (!p->failed) {
        ttok *t = cur(p);
        if (t->type == T_EOF) {
            if (ends) {
                perr_at(p, t->line, t->col, "unexpected end of template, expected '%s'", ends[0]);
            }
            break;
        }
        if (t->type == T_DATA) {
            tnode *n = mk(p, TN_TEXT, t);
            if (!n) break;
            n->lit = tv_str_nocopy(p->a, t->s, t->len);
            nl_push(p, &l, n, NULL);
            adv(p);
        } else if (t->type == T_VAR_BEGIN) {
            adv(p);
            tnode *n = mk(p, TN_PRINT, t);
            if (!n) break;
            n->a = parse_tuple_expr(p, 1);
            if (!n->a) break;
            if (cur(p)->type != T_VAR_END) {
                unexpected(p, "'}}'");
                break;
            }
            adv(p);
            nl_push(p, &l, n, NULL);
        } else if (t->type == T_BLOCK_BEGIN) {
            adv(p);
            ttok *nm = cur(p);
            if (ends && nm->type == T_NAME) {
                int hit = 0;
                for (int i = 0; ends[i]; i++)
                    if (!strcmp(ends[i], nm->s)) hit = 1;
                if (hit) break;
            }
            if (nm->type == T_NAME && (!strncmp(nm->s, "end", 3) || !strcmp(nm->s, "elif") ||
                                       !strcmp(nm->s, "else"))) {
                perr_at(p, nm->line, nm->col, "unexpected '%s'%s%s", nm->s,
                        ends ? ", expected " : "", ends ? ends[0] : "");
                break;
            }
            tnode *n = parse_stmt(p);
            if (!n) break;
            nl_push(p, &l, n, NULL);
        } else {
            unexpected(p, "template data or a tag");
        }
    }
    p->depth--;
    tnode *body = mk(p, TN_BODY, at);
    if (body) body->l1 = nl_finish(p, &l, &body->n1, NULL);
    else {
        free(l.v);
        free(l.names);
    }
    return p->failed ? NULL : body;
}

int tmpl_compile(const char *src, size_t len, tmpl_template **out, char **err)
{
    *out = NULL;
    if (err) *err = NULL;
    tmpl_template *t = calloc(1, sizeof *t);
    if (!t) return -1;
    tarena_init(&t->arena, 0);
    tparser p = {0};
    p.a = &t->arena;
    p.pos_line = p.pos_col = 1;
    /* normalize newlines and drop one trailing newline */
    char *norm = tarena_alloc(&t->arena, len + 1);
    if (!norm) {
        free(t);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[m++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else norm[m++] = src[i];
    }
    if (m && norm[m - 1] == '\n') m--;
    norm[m] = 0;
    p.src = norm;
    p.n = m;
    lex(&p);
    if (!p.failed) push_tok(&p, T_EOF, m);
    if (!p.failed) t->root = parse_body(&p, NULL);
    free(p.toks);
    if (p.failed || !t->root) {
        if (err) *err = strdup(p.err[0] ? p.err : "syntax error");
        tarena_free(&t->arena);
        free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void tmpl_destroy(tmpl_template *t)
{
    if (!t) return;
    tarena_free(&t->arena);
    free(t);
}
