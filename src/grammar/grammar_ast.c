/* grammar_ast — the syntax tree both front ends (EBNF, regex) build and the
 * FSM builder reads, and its printer back to GBNF text (regex -> EBNF).
 *
 * DESIGN: every node is an index into one array; kids, literal bytes and
 * class ranges live in side pools.  An allocation failure sets a->oom and
 * returns -1; callers check once at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

#define GROW(p, n, cap, need)                                                                      \
    do {                                                                                           \
        if ((n) + (need) > (cap)) {                                                                \
            int32_t nc_ = (cap) ? (cap) * 2 : 16;                                                  \
            while (nc_ < (n) + (need)) nc_ *= 2;                                                   \
            void *np_ = realloc((p), (size_t)nc_ * sizeof *(p));                                   \
            if (!np_) {                                                                            \
                a->oom = 1;                                                                        \
                return -1;                                                                         \
            }                                                                                      \
            (p) = np_;                                                                             \
            (cap) = nc_;                                                                           \
        }                                                                                          \
    } while (0)

void ga_free(ga_ast *a)
{
    for (int32_t i = 0; i < a->n_rules; i++) free(a->rules[i].name);
    free(a->rules);
    free(a->nodes);
    free(a->kids);
    free(a->bytes);
    free(a->ranges);
    memset(a, 0, sizeof *a);
}

int32_t ga_new(ga_ast *a, ga_kind k, int32_t x, int32_t y)
{
    if (a->oom) return -1;
    GROW(a->nodes, a->n_nodes, a->cap_nodes, 1);
    ga_node *n = &a->nodes[a->n_nodes];
    n->kind = k;
    n->a = x;
    n->b = y;
    n->kid_off = 0;
    n->nkids = 0;
    return a->n_nodes++;
}

int32_t ga_list(ga_ast *a, ga_kind k, const int32_t *kids, int32_t n)
{
    if (a->oom) return -1;
    if (n == 0) return ga_new(a, GA_EMPTY, 0, 0);
    if (n == 1) return kids[0];
    GROW(a->kids, a->n_kids, a->cap_kids, n);
    int32_t off = a->n_kids;
    memcpy(a->kids + off, kids, (size_t)n * sizeof *kids);
    a->n_kids += n;
    int32_t id = ga_new(a, k, 0, 0);
    if (id < 0) return -1;
    a->nodes[id].kid_off = off;
    a->nodes[id].nkids = n;
    return id;
}

int32_t ga_lit(ga_ast *a, const uint8_t *s, int32_t n)
{
    if (a->oom) return -1;
    if (n == 0) return ga_new(a, GA_EMPTY, 0, 0);
    GROW(a->bytes, a->n_bytes, a->cap_bytes, n);
    int32_t off = a->n_bytes;
    memcpy(a->bytes + off, s, (size_t)n);
    a->n_bytes += n;
    return ga_new(a, GA_LIT, off, n);
}

static int cmp_pair(const void *x, const void *y)
{
    const uint32_t *p = x, *q = y;
    return p[0] < q[0] ? -1 : p[0] > q[0] ? 1 : 0;
}

int32_t ga_class(ga_ast *a, const uint32_t *ranges, int32_t n_pairs, int negate)
{
    if (a->oom) return -1;
    /* sort + merge into tmp, then complement, then cut out surrogates */
    uint32_t *tmp = malloc(((size_t)n_pairs + 2) * 2 * sizeof *tmp);
    uint32_t *out = malloc(((size_t)n_pairs + 3) * 2 * sizeof *out);
    if (!tmp || !out) {
        free(tmp);
        free(out);
        a->oom = 1;
        return -1;
    }
    int32_t n = 0;
    for (int32_t i = 0; i < n_pairs; i++) {
        uint32_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
        if (hi > 0x10FFFF) hi = 0x10FFFF;
        if (lo > hi) continue;
        tmp[2 * n] = lo;
        tmp[2 * n + 1] = hi;
        n++;
    }
    qsort(tmp, (size_t)n, 2 * sizeof *tmp, cmp_pair);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && tmp[2 * i] <= tmp[2 * (m - 1) + 1] + 1) {
            if (tmp[2 * i + 1] > tmp[2 * (m - 1) + 1]) tmp[2 * (m - 1) + 1] = tmp[2 * i + 1];
        } else {
            tmp[2 * m] = tmp[2 * i];
            tmp[2 * m + 1] = tmp[2 * i + 1];
            m++;
        }
    }
    if (negate) {
        int32_t k = 0;
        uint32_t next = 0;
        for (int32_t i = 0; i < m; i++) {
            if (tmp[2 * i] > next) {
                out[2 * k] = next;
                out[2 * k + 1] = tmp[2 * i] - 1;
                k++;
            }
            next = tmp[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) {
            out[2 * k] = next;
            out[2 * k + 1] = 0x10FFFF;
            k++;
        }
        memcpy(tmp, out, (size_t)k * 2 * sizeof *tmp);
        m = k;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < m; i++) {
        uint32_t lo = tmp[2 * i], hi = tmp[2 * i + 1];
        if (hi < 0xD800 || lo > 0xDFFF) {
            out[2 * k] = lo, out[2 * k + 1] = hi, k++;
            continue;
        }
        if (lo < 0xD800) out[2 * k] = lo, out[2 * k + 1] = 0xD7FF, k++;
        if (hi > 0xDFFF) out[2 * k] = 0xE000, out[2 * k + 1] = hi, k++;
    }
    free(tmp);
    if (a->cap_ranges < a->n_ranges + k) {
        int32_t nc = a->cap_ranges ? a->cap_ranges * 2 : 64;
        while (nc < a->n_ranges + k) nc *= 2;
        uint32_t *np = realloc(a->ranges, (size_t)nc * 2 * sizeof *np);
        if (!np) {
            free(out);
            a->oom = 1;
            return -1;
        }
        a->ranges = np;
        a->cap_ranges = nc;
    }
    if (k) memcpy(a->ranges + 2 * a->n_ranges, out, (size_t)k * 2 * sizeof *out);
    free(out);
    int32_t off = a->n_ranges;
    a->n_ranges += k;
    return ga_new(a, GA_CLASS, off, k);
}

int32_t ga_rep(ga_ast *a, int32_t kid, int32_t min, int32_t max)
{
    if (kid < 0 || a->oom) return -1;
    GROW(a->kids, a->n_kids, a->cap_kids, 1);
    int32_t off = a->n_kids;
    a->kids[a->n_kids++] = kid;
    int32_t id = ga_new(a, GA_REP, min, max);
    if (id < 0) return -1;
    a->nodes[id].kid_off = off;
    a->nodes[id].nkids = 1;
    return id;
}

int32_t ga_rule_id(ga_ast *a, const char *name, size_t len, int line)
{
    for (int32_t i = 0; i < a->n_rules; i++)
        if (strlen(a->rules[i].name) == len && !memcmp(a->rules[i].name, name, len)) return i;
    if (a->oom) return -1;
    GROW(a->rules, a->n_rules, a->cap_rules, 1);
    char *s = malloc(len + 1);
    if (!s) {
        a->oom = 1;
        return -1;
    }
    memcpy(s, name, len);
    s[len] = 0;
    a->rules[a->n_rules].name = s;
    a->rules[a->n_rules].body = -1;
    a->rules[a->n_rules].line = line;
    return a->n_rules++;
}

int ga_utf8_encode(uint32_t cp, uint8_t *o)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- printing as GBNF --------------------------------------------------- */

static void put_cp(strbuf *out, uint32_t cp, int in_class)
{
    if (cp == '"' && !in_class) strbuf_puts(out, "\\\"");
    else if (cp == '\\') strbuf_puts(out, "\\\\");
    else if (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^')) strbuf_printf(out, "\\%c", (char)cp);
    else if (cp == '\n') strbuf_puts(out, "\\n");
    else if (cp == '\r') strbuf_puts(out, "\\r");
    else if (cp == '\t') strbuf_puts(out, "\\t");
    else if (cp < 0x20 || cp == 0x7F) strbuf_printf(out, "\\x%02X", (unsigned)cp);
    else if (cp < 0x80) {
        char c = (char)cp;
        strbuf_put(out, &c, 1);
    } else if (cp < 0x10000) strbuf_printf(out, "\\u%04X", (unsigned)cp);
    else strbuf_printf(out, "\\U%08X", (unsigned)cp);
}

/* Decode one UTF-8 character of a literal (literals are built from code
 * points, so they are valid UTF-8). */
static int utf8_dec(const uint8_t *s, int32_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (len > n) len = 1;
    if (len == 1) {
        *cp = c;
        return 1;
    }
    uint32_t v = c & (0x3F >> (len - 1));
    for (int i = 1; i < len; i++) v = (v << 6) | (s[i] & 0x3F);
    *cp = v;
    return len;
}

void ga_print(const ga_ast *a, int32_t id, strbuf *out)
{
    const ga_node *n = &a->nodes[id];
    switch (n->kind) {
    case GA_EMPTY:
        strbuf_puts(out, "\"\"");
        break;
    case GA_LIT: {
        strbuf_puts(out, "\"");
        const uint8_t *s = a->bytes + n->a;
        for (int32_t i = 0; i < n->b;) {
            uint32_t cp;
            i += utf8_dec(s + i, n->b - i, &cp);
            put_cp(out, cp, 0);
        }
        strbuf_puts(out, "\"");
        break;
    }
    case GA_CLASS:
        if (n->b == 0) {
            /* the empty class: a literal that cannot match cannot be
             * written in GBNF; [^\x00-\U0010FFFF] is empty */
            strbuf_puts(out, "[^\\x00-\\U0010FFFF]");
            break;
        }
        strbuf_puts(out, "[");
        for (int32_t i = 0; i < n->b; i++) {
            uint32_t lo = a->ranges[2 * (n->a + i)], hi = a->ranges[2 * (n->a + i) + 1];
            put_cp(out, lo, 1);
            if (hi != lo) {
                strbuf_puts(out, "-");
                put_cp(out, hi, 1);
            }
        }
        strbuf_puts(out, "]");
        break;
    case GA_REF:
        strbuf_puts(out, a->rules[n->a].name);
        break;
    case GA_SEQ:
    case GA_ALT:
        strbuf_puts(out, "(");
        for (int32_t i = 0; i < n->nkids; i++) {
            if (i) strbuf_puts(out, n->kind == GA_ALT ? " | " : " ");
            ga_print(a, a->kids[n->kid_off + i], out);
        }
        strbuf_puts(out, ")");
        break;
    case GA_REP:
        strbuf_puts(out, "(");
        ga_print(a, a->kids[n->kid_off], out);
        strbuf_puts(out, ")");
        if (n->a == 0 && n->b == -1) strbuf_puts(out, "*");
        else if (n->a == 1 && n->b == -1) strbuf_puts(out, "+");
        else if (n->a == 0 && n->b == 1) strbuf_puts(out, "?");
        else if (n->b == -1) strbuf_printf(out, "{%d,}", n->a);
        else if (n->a == n->b) strbuf_printf(out, "{%d}", n->a);
        else strbuf_printf(out, "{%d,%d}", n->a, n->b);
        break;
    }
}
