/* template_parse — the Jinja2 compiler (source -> AST): statements and
 * bodies here, expressions in template_parse_expr.c, tokens in template_lex.c.
 *
 * DESIGN (file map: template_parse_impl.h): statements are parsed as
 * jinja2/parser.py does (if/elif/else, for with else/if/recursive, set and
 * block set, macro, call, filter, with, raw, generation, break/continue);
 * each body ends at one of the names its caller expects.  Nesting depth is
 * bounded by MAX_NEST.  tmpl_compile normalizes newlines, lexes, parses the
 * whole template into one TN_BODY and keeps the AST in the template's arena.
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
#include <stdlib.h>
#include <string.h>

#include "template/template.h"
#include "template/template_parse_impl.h"
#include "util/log.h"

/* ---- statements -------------------------------------------------------------- */
static tnode *parse_body(tparser *p, const char *const *ends);

static int expect_block_end(tparser *p)
{
    if (cur(p)->type != T_BLOCK_END) {
        tp_unexpected(p, "end of statement block");
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
            tp_unexpected(p, "a target name");
            return 0;
        }
        if (n == 16) {
            tp_unexpected(p, "fewer targets");
            return 0;
        }
        tmp[n++] = cur(p)->s;
        adv(p);
        if (!is_op(cur(p), ",")) break;
        adv(p);
    }
    if (paren && tp_expect_op(p, ")")) return 0;
    *out = tarena_alloc(p->a, n * sizeof(char *));
    if (!*out) return 0;
    memcpy(*out, tmp, n * sizeof(char *));
    return n;
}

/* macro parameters "(a, b=1)" into names/l2 */
static int parse_params(tparser *p, tnode *n)
{
    nlist l = {0};
    if (tp_expect_op(p, "(")) return -1;
    while (!p->failed && !is_op(cur(p), ")")) {
        if (l.n && tp_expect_op(p, ",")) break;
        if (cur(p)->type != T_NAME) {
            tp_unexpected(p, "a parameter name");
            break;
        }
        const char *nm = cur(p)->s;
        adv(p);
        tnode *def = NULL;
        if (is_op(cur(p), "=")) {
            adv(p);
            def = tp_parse_expr(p);
            if (!def) break;
        }
        tp_nl_push(p, &l, def, nm);
    }
    if (!p->failed) tp_expect_op(p, ")");
    n->l2 = tp_nl_finish(p, &l, &n->n2, &n->names);
    n->nn = n->n2;
    return p->failed ? -1 : 0;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};

static tnode *parse_if(tparser *p, ttok *at)
{
    tnode *n = tp_mk(p, TN_IF, at);
    if (!n) return NULL;
    n->a = tp_parse_tuple_expr(p, 0);
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
    tnode *n = tp_mk(p, TN_FOR, at);
    if (!n) return NULL;
    n->nn = parse_targets(p, &n->names);
    if (!n->nn) return NULL;
    if (!is_name(cur(p), "in")) {
        tp_unexpected(p, "'in'");
        return NULL;
    }
    adv(p);
    /* the iterable must not swallow the "if" filter: parse without condexpr */
    n->a = tp_parse_tuple_expr(p, 0);
    if (!n->a) return NULL;
    if (is_name(cur(p), "if")) {
        adv(p);
        n->d = tp_parse_expr(p);
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
        tnode *f = tp_parse_filter(p, NULL);
        if (!f) break;
        tp_nl_push(p, &l, f, NULL);
        if (!is_op(cur(p), "|")) break;
        adv(p);
    }
    n->l1 = tp_nl_finish(p, &l, &n->n1, NULL);
    return p->failed ? NULL : n;
}

static tnode *parse_set(tparser *p, ttok *at)
{
    tnode *n = tp_mk(p, TN_SET, at);
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
        n->a = tp_parse_tuple_expr(p, 1);
        if (!n->a || expect_block_end(p)) return NULL;
        return n;
    }
    if (n->op == 1) {
        tp_unexpected(p, "'='");
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
        tp_unexpected(p, "a statement name");
        return NULL;
    }
    const char *k = t->s;
    adv(p);
    if (!strcmp(k, "if")) return parse_if(p, t);
    if (!strcmp(k, "for")) return parse_for(p, t);
    if (!strcmp(k, "set")) return parse_set(p, t);
    if (!strcmp(k, "break") || !strcmp(k, "continue")) {
        tnode *n = tp_mk(p, k[0] == 'b' ? TN_BREAK : TN_CONTINUE, t);
        return n && !expect_block_end(p) ? n : NULL;
    }
    if (!strcmp(k, "macro")) {
        tnode *n = tp_mk(p, TN_MACRO, t);
        if (!n) return NULL;
        if (cur(p)->type != T_NAME) {
            tp_unexpected(p, "a macro name");
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
        tnode *n = tp_mk(p, TN_CALL_BLOCK, t);
        if (!n) return NULL;
        if (is_op(cur(p), "(")) {
            if (parse_params(p, n)) return NULL;
        }
        n->a = tp_parse_expr(p);
        if (!n->a) return NULL;
        if (n->a->kind != TN_CALL) {
            tp_err_at(p, t->line, t->col, "expected a call after 'call'");
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
        tnode *n = tp_mk(p, TN_FILTER_BLOCK, t);
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
        tnode *n = tp_mk(p, TN_FOR, t); /* reuse: evaluated as a one-shot scope */
        if (!n) return NULL;
        n->op = 1;
        nlist vals = {0};
        while (!p->failed && cur(p)->type == T_NAME) {
            const char *nm = cur(p)->s;
            adv(p);
            if (tp_expect_op(p, "=")) break;
            tnode *v = tp_parse_expr(p);
            if (!v) break;
            tp_nl_push(p, &vals, v, nm);
            if (!is_op(cur(p), ",")) break;
            adv(p);
        }
        n->l2 = tp_nl_finish(p, &vals, &n->n2, &n->names);
        n->nn = n->n2;
        if (p->failed || expect_block_end(p)) return NULL;
        static const char *const e[] = {"endwith", NULL};
        n->b = parse_body(p, e);
        if (!n->b) return NULL;
        adv(p);
        return expect_block_end(p) ? NULL : n;
    }
    tp_err_at(p, t->line, t->col, "unsupported or unknown statement '%s'", k);
    return NULL;
}

/* Parse statements until a block tag whose name is in `ends` (left at that
 * name) or the end of input (an error when ends is non-NULL). */
static tnode *parse_body(tparser *p, const char *const *ends)
{
    ttok *at = cur(p);
    if (++p->depth > MAX_NEST) {
        tp_err_at(p, at->line, at->col, "blocks nested too deeply");
        return NULL;
    }
    nlist l = {0};
    while (!p->failed) {
        ttok *t = cur(p);
        if (t->type == T_EOF) {
            if (ends) {
                tp_err_at(p, t->line, t->col, "unexpected end of template, expected '%s'", ends[0]);
            }
            break;
        }
        if (t->type == T_DATA) {
            tnode *n = tp_mk(p, TN_TEXT, t);
            if (!n) break;
            n->lit = tv_str_nocopy(p->a, t->s, t->len);
            tp_nl_push(p, &l, n, NULL);
            adv(p);
        } else if (t->type == T_VAR_BEGIN) {
            adv(p);
            tnode *n = tp_mk(p, TN_PRINT, t);
            if (!n) break;
            n->a = tp_parse_tuple_expr(p, 1);
            if (!n->a) break;
            if (cur(p)->type != T_VAR_END) {
                tp_unexpected(p, "'}}'");
                break;
            }
            adv(p);
            tp_nl_push(p, &l, n, NULL);
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
                tp_err_at(p, nm->line, nm->col, "unexpected '%s'%s%s", nm->s,
                        ends ? ", expected " : "", ends ? ends[0] : "");
                break;
            }
            tnode *n = parse_stmt(p);
            if (!n) break;
            tp_nl_push(p, &l, n, NULL);
        } else {
            tp_unexpected(p, "template data or a tag");
        }
    }
    p->depth--;
    tnode *body = tp_mk(p, TN_BODY, at);
    if (body) body->l1 = tp_nl_finish(p, &l, &body->n1, NULL);
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
    tp_lex(&p);
    if (!p.failed) tp_push_tok(&p, T_EOF, m);
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
