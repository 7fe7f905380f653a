/* template_parse_impl — what the three parser files share: tokens, the
 * parser state, node lists, and the token-stream helpers.
 *
 * DESIGN: the compiler (tmpl_compile) is split into files that call each
 * other in one direction only, top to bottom:
 *
 *   template_parse.c       statements (if, for, set, macro, call, filter,
 *                          with, raw, generation), bodies, tmpl_compile
 *   template_parse_expr.c  expressions (Jinja's precedence), filters and
 *                          tests, call arguments; the token-stream helpers
 *   template_lex.c         the lexer (source -> tokens) and the error
 *                          record every stage uses
 *
 * The first error wins (tp_err_at records it with its line and column);
 * functions return NULL / -1 after it and callers propagate.  Nodes are
 * allocated from the template's arena; tokens and node lists grow in
 * malloc and are freed by tmpl_compile / tp_nl_finish. */
#ifndef SGLC_TEMPLATE_PARSE_IMPL_H
#define SGLC_TEMPLATE_PARSE_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "template/template_impl.h"

#define MAX_NEST 200 /* parser nesting bound: deeper input is a syntax error */

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
    tarena *a;       /* borrowed: the template's arena (nodes, token text) */
    const char *src; /* normalized source (owned by tmpl_compile) */
    size_t n;
    ttok *toks;      /* (ntok) owned, malloc'd */
    size_t ntok, cap;
    size_t pos;
    int depth;
    char err[256];
    int failed;
    size_t pos_off;  /* pos_of() cache: offset -> line/col */
    int pos_line, pos_col;
} tparser;

/* growable node list built in malloc, copied to the arena when done */
typedef struct nlist {
    tnode **v;          /* (n) malloc'd */
    size_t n, cap;
    const char **names; /* (n) malloc'd */
} nlist;

/* ---- template_lex.c ------------------------------------------------------- */
/* Record the first error as "line L, column C: message". */
void tp_err_at(tparser *p, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
ttok *tp_push_tok(tparser *p, int type, size_t off); /* NULL (+ error) on OOM */
void tp_lex(tparser *p); /* p->src[0..n) -> p->toks, ending with T_EOF */

/* ---- token stream (inline) ------------------------------------------------ */
static inline ttok *cur(tparser *p) { return &p->toks[p->pos]; }
static inline ttok *peek(tparser *p, size_t k)
{
    return p->pos + k < p->ntok ? &p->toks[p->pos + k] : &p->toks[p->ntok - 1];
}
static inline void adv(tparser *p)
{
    if (p->pos + 1 < p->ntok) p->pos++;
}
static inline int is_op(const ttok *t, const char *op)
{
    return t->type == T_OP && t->len == strlen(op) && !memcmp(t->s, op, t->len);
}
static inline int is_name(const ttok *t, const char *nm) { return t->type == T_NAME && !strcmp(t->s, nm); }

/* ---- template_parse_expr.c ------------------------------------------------ */
void tp_unexpected(tparser *p, const char *expected); /* "unexpected X, expected Y" at the current token */
int tp_expect_op(tparser *p, const char *op);          /* consume op or error (-1) */
tnode *tp_mk(tparser *p, int kind, const ttok *at);   /* a zeroed node at at's position */
void tp_nl_push(tparser *p, nlist *l, tnode *x, const char *name);
/* Copy l into the arena (*n items, *names when names is non-NULL) and free l. */
tnode **tp_nl_finish(tparser *p, nlist *l, size_t *n, const char ***names);
tnode *tp_parse_expr(tparser *p); /* a full expression (with a if b else c) */
tnode *tp_parse_or(tparser *p);   /* an expression without the conditional */
/* expr (',' expr)*: a tuple when there is a comma; condexpr = 0 parses the
 * elements without `a if b else c`. */
tnode *tp_parse_tuple_expr(tparser *p, int condexpr);
/* One filter (name and arguments) after '|'; operand may be NULL (filter blocks). */
tnode *tp_parse_filter(tparser *p, tnode *operand);

#endif
