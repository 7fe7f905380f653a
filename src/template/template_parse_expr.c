/* template_parse_expr — Jinja2 expressions: recursive descent with Jinja's
 * precedence (low to high): ternary, or, and, not, comparisons/in/is, + -,
 * ~, * / // %, **, unary - +, postfix (. [] ()), filters and tests.  Also
 * the token-stream helpers both parser files use (file map:
 * template_parse_impl.h).
 *
 * DESIGN: nesting depth is bounded by MAX_NEST (deep input is a syntax
 * error, not a stack overflow).  Unknown filters and tests fail at compile
 * time, as Jinja2 does; the names come from the interpreter's tables
 * (tr_filter_known / tr_test_known).  Node layout: see template_parse.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template_parse_impl.h"

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

void tp_unexpected(tparser *p, const char *expected)
{
    ttok *t = cur(p);
    if (t->type == T_NAME || t->type == T_OP)
        tp_err_at(p, t->line, t->col, "unexpected '%.*s', expected %s", (int)(t->type == T_OP ? t->len : strlen(t->s)),
                t->s, expected);
    else tp_err_at(p, t->line, t->col, "unexpected %s, expected %s", tok_desc(t), expected);
}

int tp_expect_op(tparser *p, const char *op)
{
    if (!is_op(cur(p), op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", op);
        tp_unexpected(p, e);
        return -1;
    }
    adv(p);
    return 0;
}

tnode *tp_mk(tparser *p, int kind, const ttok *at)
{
    tnode *n = tarena_alloc(p->a, sizeof *n);
    if (!n) {
        tp_err_at(p, 0, 0, "out of memory");
        return NULL;
    }
    n->kind = (uint8_t)kind;
    n->line = at ? at->line : 0;
    n->col = at ? at->col : 0;
    return n;
}


void tp_nl_push(tparser *p, nlist *l, tnode *x, const char *name)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        tnode **v = realloc(l->v, nc * sizeof *v);
        if (v) l->v = v;
        const char **nm = realloc(l->names, nc * sizeof *nm);
        if (nm) l->names = nm;
        if (!v || !nm) {
            tp_err_at(p, 0, 0, "out of memory");
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

tnode **tp_nl_finish(tparser *p, nlist *l, size_t *n, const char ***names)
{
    tnode **out = tarena_alloc(p->a, (l->n ? l->n : 1) * sizeof *out);
    const char **nm = names ? tarena_alloc(p->a, (l->n ? l->n : 1) * sizeof *nm) : NULL;
    if (!out || (names && !nm)) tp_err_at(p, 0, 0, "out of memory");
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
            if (tp_expect_op(p, ",")) break;
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            tp_unexpected(p, "an argument (*args/**kwargs are not supported)");
            break;
        }
        if (cur(p)->type == T_NAME && is_op(peek(p, 1), "=")) {
            const char *nm = cur(p)->s;
            adv(p);
            adv(p);
            tnode *v = tp_parse_expr(p);
            if (!v) break;
            tp_nl_push(p, &kw, v, nm);
        } else {
            if (kw.n) {
                tp_unexpected(p, "a keyword argument");
                break;
            }
            tnode *v = tp_parse_expr(p);
            if (!v) break;
            tp_nl_push(p, &args, v, NULL);
        }
    }
    if (!p->failed) tp_expect_op(p, ")");
    n->l1 = tp_nl_finish(p, &args, &n->n1, NULL);
    n->l2 = tp_nl_finish(p, &kw, &n->n2, &n->names);
    n->nn = n->n2;
}

static const char *parse_dotted_name(tparser *p)
{
    if (cur(p)->type != T_NAME) {
        tp_unexpected(p, "a name");
        return NULL;
    }
    const char *nm = cur(p)->s;
    adv(p);
    return nm;
}

tnode *tp_parse_filter(tparser *p, tnode *operand)
{
    ttok *at = cur(p);
    const char *nm = parse_dotted_name(p);
    if (!nm) return NULL;
    if (!tr_filter_known(nm)) {
        tp_err_at(p, at->line, at->col, "no filter named '%s' (unknown or not supported by sglc)", nm);
        return NULL;
    }
    tnode *n = tp_mk(p, TN_FILTER, at);
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
            node = tp_parse_filter(p, node);
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
                tp_unexpected(p, "a test name");
                return NULL;
            }
            adv(p);
            if (!tr_test_known(nm)) {
                tp_err_at(p, at->line, at->col, "no test named '%s'", nm);
                return NULL;
            }
            tnode *n = tp_mk(p, TN_TEST, at);
            if (!n) return NULL;
            n->a = node;
            n->name = nm;
            n->op = (uint8_t)neg;
            ttok *c = cur(p);
            if (is_op(c, "(")) parse_call_args(p, n);
            else if (is_name(c, "is")) {
                tp_err_at(p, c->line, c->col, "You cannot chain multiple tests with is");
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
            tnode *n = tp_mk(p, TN_CALL, t);
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
                tp_unexpected(p, "']'");
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
                tp_nl_push(p, &l, parts[0], NULL);
                while (!p->failed && is_op(cur(p), ",")) {
                    adv(p);
                    tnode *x = tp_parse_expr(p);
                    if (!x) break;
                    tp_nl_push(p, &l, x, NULL);
                }
                tnode *t = tp_mk(p, TN_TUPLE, at);
                if (!t || p->failed) {
                    free(l.v);
                    free(l.names);
                    return NULL;
                }
                t->l1 = tp_nl_finish(p, &l, &t->n1, NULL);
                parts[0] = t;
                continue;
            }
            tp_unexpected(p, "']'");
            return NULL;
        }
        parts[nparts] = tp_parse_expr(p);
        if (!parts[nparts]) return NULL;
    }
    adv(p);
    tnode *n = tp_mk(p, is_slice ? TN_SLICE : TN_GETITEM, at);
    if (!n) return NULL;
    n->a = obj;
    n->b = parts[0];
    if (is_slice) {
        n->c = parts[1];
        n->d = parts[2];
    } else if (!parts[0]) {
        tp_err_at(p, at->line, at->col, "expected an index");
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
                tnode *g = tp_mk(p, TN_GETATTR, t);
                if (!g) return NULL;
                g->a = n;
                g->name = a->s;
                adv(p);
                n = g;
            } else if (a->type == T_INT) {
                tnode *g = tp_mk(p, TN_GETITEM, t), *k = tp_mk(p, TN_LIT, a);
                if (!g || !k) return NULL;
                k->lit = tv_int(p->a, a->i);
                g->a = n;
                g->b = k;
                adv(p);
                n = g;
            } else {
                tp_unexpected(p, "an attribute name");
                return NULL;
            }
        } else if (is_op(t, "[")) {
            n = parse_subscript(p, n);
        } else if (is_op(t, "(")) {
            tnode *c = tp_mk(p, TN_CALL, t);
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
        tp_err_at(p, t->line, t->col, "expression nested too deeply");
        return NULL;
    }
    tnode *n = NULL;
    if (t->type == T_NAME) {
        n = tp_mk(p, TN_LIT, t);
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
        n = tp_mk(p, TN_LIT, t);
        if (n) n->lit = tv_str(p->a, b.p ? b.p : "", b.len);
        tbuf_free(&b);
        if (n && !n->lit) tp_err_at(p, t->line, t->col, "out of memory");
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        n = tp_mk(p, TN_LIT, t);
        if (n) n->lit = t->type == T_INT ? tv_int(p->a, t->i) : tv_float(p->a, t->f);
        adv(p);
    } else if (is_op(t, "(")) {
        adv(p);
        if (is_op(cur(p), ")")) {
            adv(p);
            n = tp_mk(p, TN_TUPLE, t);
        } else {
            tnode *e = tp_parse_expr(p);
            if (!e) return NULL;
            if (is_op(cur(p), ",")) {
                nlist l = {0};
                tp_nl_push(p, &l, e, NULL);
                while (is_op(cur(p), ",")) {
                    adv(p);
                    if (is_op(cur(p), ")")) break;
                    tnode *x = tp_parse_expr(p);
                    if (!x) {
                        free(l.v);
                        free(l.names);
                        return NULL;
                    }
                    tp_nl_push(p, &l, x, NULL);
                }
                n = tp_mk(p, TN_TUPLE, t);
                if (n) n->l1 = tp_nl_finish(p, &l, &n->n1, NULL);
                else {
                    free(l.v);
                    free(l.names);
                }
            } else n = e;
            if (tp_expect_op(p, ")")) return NULL;
        }
    } else if (is_op(t, "[")) {
        adv(p);
        nlist l = {0};
        while (!p->failed && !is_op(cur(p), "]")) {
            if (l.n && tp_expect_op(p, ",")) break;
            if (is_op(cur(p), "]")) break;
            tnode *x = tp_parse_expr(p);
            if (!x) break;
            tp_nl_push(p, &l, x, NULL);
        }
        if (!p->failed) tp_expect_op(p, "]");
        n = tp_mk(p, TN_LIST, t);
        if (n) n->l1 = tp_nl_finish(p, &l, &n->n1, NULL);
        else {
            free(l.v);
            free(l.names);
        }
    } else if (is_op(t, "{")) {
        adv(p);
        nlist k = {0}, v = {0};
        while (!p->failed && !is_op(cur(p), "}")) {
            if (k.n && tp_expect_op(p, ",")) break;
            if (is_op(cur(p), "}")) break;
            tnode *x = tp_parse_expr(p);
            if (!x || tp_expect_op(p, ":")) break;
            tnode *y = tp_parse_expr(p);
            if (!y) break;
            tp_nl_push(p, &k, x, NULL);
            tp_nl_push(p, &v, y, NULL);
        }
        if (!p->failed) tp_expect_op(p, "}");
        n = tp_mk(p, TN_DICT, t);
        if (n) {
            n->l1 = tp_nl_finish(p, &k, &n->n1, NULL);
            n->l2 = tp_nl_finish(p, &v, &n->n2, NULL);
        } else {
            free(k.v);
            free(k.names);
            free(v.v);
            free(v.names);
        }
    } else {
        tp_unexpected(p, "an expression");
    }
    p->depth--;
    return p->failed ? NULL : n;
}

static tnode *parse_unary(tparser *p, int with_filter)
{
    ttok *t = cur(p);
    tnode *n;
    if (++p->depth > MAX_NEST) {
        tp_err_at(p, t->line, t->col, "expression nested too deeply");
        return NULL;
    }
    if (is_op(t, "-") || is_op(t, "+")) {
        adv(p);
        tnode *x = parse_unary(p, 0);
        if (!x) return NULL;
        n = tp_mk(p, is_op(t, "-") ? TN_NEG : TN_POS, t);
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
    tnode *n = tp_mk(p, TN_BINOP, at);
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
    tp_nl_push(p, &parts, l, NULL);
    while (is_op(cur(p), "~")) {
        adv(p);
        tnode *x = parse_math2(p);
        if (!x) {
            free(parts.v);
            free(parts.names);
            return NULL;
        }
        tp_nl_push(p, &parts, x, NULL);
    }
    tnode *n = tp_mk(p, TN_CONCAT, at);
    if (!n) {
        free(parts.v);
        free(parts.names);
        return NULL;
    }
    n->l1 = tp_nl_finish(p, &parts, &n->n1, NULL);
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
        tnode *o = tp_mk(p, TN_LIT, t);
        if (!r || !o) {
            free(ops.v);
            free(ops.names);
            free(rhs.v);
            free(rhs.names);
            return NULL;
        }
        o->op = (uint8_t)op;
        tp_nl_push(p, &ops, o, NULL);
        tp_nl_push(p, &rhs, r, NULL);
    }
    if (!ops.n) return first;
    tnode *n = tp_mk(p, TN_COMPARE, at);
    if (!n) return NULL;
    n->a = first;
    n->l1 = tp_nl_finish(p, &rhs, &n->n1, NULL);
    n->l2 = tp_nl_finish(p, &ops, &n->n2, NULL);
    return p->failed ? NULL : n;
}

static tnode *parse_not(tparser *p)
{
    if (is_name(cur(p), "not")) {
        ttok *t = cur(p);
        adv(p);
        if (++p->depth > MAX_NEST) {
            tp_err_at(p, t->line, t->col, "expression nested too deeply");
            return NULL;
        }
        tnode *x = parse_not(p);
        p->depth--;
        if (!x) return NULL;
        tnode *n = tp_mk(p, TN_NOT, t);
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
        tnode *n = tp_mk(p, TN_AND, t);
        if (!n) return NULL;
        n->a = l;
        n->b = r;
        l = n;
    }
    return l;
}

tnode *tp_parse_or(tparser *p)
{
    tnode *l = parse_and(p);
    while (l && is_name(cur(p), "or")) {
        ttok *t = cur(p);
        adv(p);
        tnode *r = parse_and(p);
        if (!r) return NULL;
        tnode *n = tp_mk(p, TN_OR, t);
        if (!n) return NULL;
        n->a = l;
        n->b = r;
        l = n;
    }
    return l;
}

/* condexpr: or ('if' or ('else' condexpr)?)* */
tnode *tp_parse_expr(tparser *p)
{
    ttok *t0 = cur(p);
    if (++p->depth > MAX_NEST) {
        tp_err_at(p, t0->line, t0->col, "expression nested too deeply");
        return NULL;
    }
    tnode *e = tp_parse_or(p);
    while (e && is_name(cur(p), "if")) {
        ttok *t = cur(p);
        adv(p);
        tnode *c = tp_parse_or(p), *f = NULL;
        if (!c) return NULL;
        if (is_name(cur(p), "else")) {
            adv(p);
            f = tp_parse_expr(p);
            if (!f) return NULL;
        }
        tnode *n = tp_mk(p, TN_COND, t);
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
tnode *tp_parse_tuple_expr(tparser *p, int condexpr)
{
    ttok *at = cur(p);
    tnode *e = condexpr ? tp_parse_expr(p) : tp_parse_or(p);
    if (!e || !is_op(cur(p), ",")) return e;
    nlist l = {0};
    tp_nl_push(p, &l, e, NULL);
    while (is_op(cur(p), ",")) {
        adv(p);
        if (cur(p)->type == T_BLOCK_END || cur(p)->type == T_VAR_END) break;
        if (!condexpr && (is_name(cur(p), "if") || is_name(cur(p), "recursive"))) break;
        tnode *x = condexpr ? tp_parse_expr(p) : tp_parse_or(p);
        if (!x) {
            free(l.v);
            free(l.names);
            return NULL;
        }
        tp_nl_push(p, &l, x, NULL);
    }
    tnode *n = tp_mk(p, TN_TUPLE, at);
    if (n) n->l1 = tp_nl_finish(p, &l, &n->n1, NULL);
    return n;
}
