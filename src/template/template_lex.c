/* template_lex — the Jinja2 lexer (source -> tokens) for the parser in
 * template_parse.c / template_parse_expr.c (file map: template_parse_impl.h).
 *
 * DESIGN: the lexer follows jinja2/lexer.py with the options transformers
 * sets: newlines are normalized to "\n" and one trailing newline dropped
 * (keep_trailing_newline=False); {%- / -%} strip whitespace (Python's
 * definition of whitespace); trim_blocks drops the first newline after a
 * block or comment tag; lstrip_blocks strips spaces and tabs before a block
 * or comment tag that starts a line (not before {{ }}); "+" disables both;
 * "}}" and "%}" do not end a tag while brackets are open.  Token positions
 * (line, column) are computed incrementally for error messages. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template_parse_impl.h"

void tp_err_at(tparser *p, int line, int col, const char *fmt, ...)
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

ttok *tp_push_tok(tparser *p, int type, size_t off)
{
    if (p->ntok == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 256;
        ttok *t = realloc(p->toks, nc * sizeof *t);
        if (!t) {
            tp_err_at(p, 0, 0, "out of memory");
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
    ttok *t = tp_push_tok(p, T_DATA, b);
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
            tp_err_at(p, l, c, "unexpected end of template, expected '%s'", kind == T_VAR_BEGIN ? "}}" : "%}");
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
                tp_push_tok(p, kind == T_VAR_BEGIN ? T_VAR_END : T_BLOCK_END, i);
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
            ttok *t = tp_push_tok(p, T_NAME, b);
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
            ttok *t = tp_push_tok(p, isf ? T_FLOAT : T_INT, b);
            if (!t) return n;
            if (isf) t->f = strtod(tmp, NULL);
            else {
                char *endp;
                unsigned long long v = strtoull(tmp, &endp, 10);
                if (m > 18 && (v > (unsigned long long)INT64_MAX || m > 19)) {
                    tp_err_at(p, t->line, t->col, "integer literal too large");
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
                tp_err_at(p, l, cc, "unterminated string");
                return n;
            }
            tbuf out = {0};
            int rc = unescape_string(p, s + b + 1, i - b - 1, &out);
            i++;
            ttok *t = tp_push_tok(p, T_STRING, b);
            if (!t) {
                tbuf_free(&out);
                return n;
            }
            if (rc || out.over) {
                tbuf_free(&out);
                tp_err_at(p, t->line, t->col, "invalid escape in string literal");
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
                tp_err_at(p, l, cc, "unexpected character '%c'", c);
                return n;
            }
            if (c == '(' || c == '[' || c == '{') bal++;
            if ((c == ')' || c == ']' || c == '}') && bal > 0) bal--;
            ttok *t = tp_push_tok(p, T_OP, b);
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

void tp_lex(tparser *p)
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
                tp_err_at(p, l, c, "missing endraw");
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
                tp_err_at(p, l, c, "missing end of comment tag");
                return;
            }
            char esign = (k > b && (s[k - 1] == '-' || s[k - 1] == '+')) ? s[k - 1] : 0;
            i = k + 2;
            if (esign == '-') i = skip_ws(s, n, i);
            else if (esign != '+' && i < n && s[i] == '\n') i++;
            line_starting = i > 0 && s[i - 1] == '\n';
            continue;
        }
        tp_push_tok(p, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, j);
        i = lex_tag(p, b, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, &line_starting);
    }
}
