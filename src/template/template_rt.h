/* template_rt — what the interpreter's files share: the render state, scope
 * frames, call arguments, and the helpers every stage uses.
 *
 * DESIGN: the interpreter (tmpl_render) is split by concern into files that
 * call each other in one direction only, top to bottom:
 *
 *   template_eval.c     statements, expressions, macros, calls, tmpl_render
 *   template_filters.c  the filter table (|name)
 *   template_tests.c    the test table (is name)
 *   template_globals.c  the global functions (range, namespace, dict, cycler,
 *                       joiner, raise_exception, strftime_now)
 *   template_methods.c  str / dict / list / loop / cycler methods, str.format
 *   template_ops.c      attribute, item and slice access; arithmetic,
 *                       comparison, `in`, `%` formatting
 *   template_strings.c  Python string algorithms (strip, split, case,
 *                       replace, splitlines), Markup escaping
 *   template_rt.c       errors, step limit, value constructors, iteration,
 *                       argument lookup
 *
 * (filters and tests are also looked up by the parser, template_parse.c, so
 * unknown names fail at compile time.)  Every function that can fail
 * records the first error in the render state (tr_err) and returns NULL
 * (values) or -1; nothing longjmps.  All values come from the render's
 * arena (r->a) and live until the render ends.  Names carry the tr_ prefix
 * because they are visible across the library. */
#ifndef SGLC_TEMPLATE_RT_H
#define SGLC_TEMPLATE_RT_H

#include <stdint.h>
#include <string.h>

#include "template/template.h"
#include "template/template_impl.h"

/* One scope frame (Jinja's context layer); arena-allocated. */
typedef struct tscope {
    struct tscope *parent; /* borrowed: the enclosing frame, NULL at the root */
    const char **names;    /* (n) arena */
    tv **vals;             /* (n) arena */
    size_t n, cap;
} tscope;

/* The state of one tmpl_render call. */
typedef struct trender {
    tarena *a;       /* borrowed: the render's arena (every value) */
    tbuf *out;       /* current output (swapped while capturing macro/set/filter bodies) */
    tmpl_limits lim;
    size_t steps;
    int depth;
    int const_print; /* evaluating a {{ }} that jinja2 folds to a constant */
    int failed;
    char err[1024];
} trender;

/* Evaluated call arguments; the arrays belong to the arena. */
typedef struct targs {
    tv **pos;          /* (npos) */
    size_t npos;
    const char **kwn;  /* (nkw) */
    tv **kwv;          /* (nkw) */
    size_t nkw;
} targs;

/* ---- template_rt.c -------------------------------------------------------- */
/* Record the first error (later ones are dropped), " (line L)" appended when
 * `at` has a line. */
void tr_err(trender *r, const tnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
tv *tr_oom(trender *r);                                       /* memory-limit error; NULL */
tv *tr_undef_error(trender *r, const tnode *at, const tv *u); /* u's hint as the error; NULL */
int tr_step(trender *r, const tnode *at);                     /* count a step: -1 past the limit */
tv *tr_undef(trender *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tv *tr_str(trender *r, const char *s, size_t n); /* copies s */
tv *tr_int(trender *r, int64_t i);
tv *tr_float(trender *r, double f);
tv *tr_list(trender *r, size_t n);               /* n NULL items to fill */
tv *tr_buf_to_str(trender *r, tbuf *b);          /* frees b; error when b went over its limit */
tv *tr_to_str(trender *r, tv *v);                /* str(v) (undefined -> "") */
/* Items of an iterable (list/tuple items, dict keys, string chars,
 * undefined -> empty); NULL + error for non-iterables. */
tv *tr_iter(trender *r, const tnode *at, tv *v);
/* jinja2's generator filters fail only when iterated: for an input that
 * cannot be iterated, *out = a generator that raises then, and 1. */
int tr_lazy_fail(trender *r, tv *v, tv **out, const char *fmt);
tv *tr_arg(const targs *a, size_t i, const char *name); /* positional i or keyword name; NULL */
int tr_check_nargs(trender *r, const tnode *at, const char *fn, const targs *a, size_t maxpos);

static inline int is_num(const tv *v) { return v->type == TV_INT || v->type == TV_FLOAT || v->type == TV_BOOL; }
static inline int is_intlike(const tv *v) { return v->type == TV_INT || v->type == TV_BOOL; }
static inline int64_t ival(const tv *v) { return v->type == TV_INT ? v->u.i : v->u.b; }
static inline double fval(const tv *v) { return v->type == TV_FLOAT ? v->u.f : (double)ival(v); }
static inline int str_eq(const tv *v, const char *s)
{
    return v->type == TV_STR && v->u.str.len == strlen(s) && !memcmp(v->u.str.s, s, v->u.str.len);
}

/* ---- template_strings.c --------------------------------------------------- */
size_t tr_cp_offset(const tv *s, int64_t idx); /* byte offset of code point idx */
const char *tr_memmem(const char *h, size_t hn, const char *nd, size_t nn);
tv *tr_py_strip(trender *r, const tv *s, const tv *chars, int mode); /* mode 1 left, 2 right, 3 both */
tv *tr_py_split(trender *r, const tnode *at, const tv *s, const tv *sep, int64_t maxsplit, int right);
void tr_put_case(tbuf *b, uint32_t c, int mode); /* mode 0 lower, 1 upper, 2 title */
tv *tr_py_case(trender *r, const tv *s, int kind); /* 0 lower 1 upper 2 capitalize 3 title 4 swapcase */
tv *tr_py_replace(trender *r, const tnode *at, const tv *s, const tv *old, const tv *new_, int64_t count);
tv *tr_py_splitlines(trender *r, const tv *s, int keepends);
tv *tr_as_markup(trender *r, tv *v);   /* the same string as a Markup */
tv *tr_html_escape(trender *r, tv *v); /* markupsafe.escape */

/* ---- template_ops.c ------------------------------------------------------- */
extern const char *const tr_dict_methods[]; /* NULL-terminated */
int tr_in_names(const char *const *names, const char *s, size_t n);
tv *tr_method(trender *r, tv *self, const char *name); /* a bound method value */
tv *tr_get_attr(trender *r, const tnode *at, tv *obj, const char *name);
tv *tr_get_item(trender *r, const tnode *at, tv *obj, tv *key);
tv *tr_slice(trender *r, const tnode *at, tv *obj, tv *a, tv *b, tv *c); /* obj[a:b:c], NULL parts absent */
tv *tr_type_error(trender *r, const tnode *at, const char *op, tv *a, tv *b);
tv *tr_binop(trender *r, const tnode *at, int op, tv *a, tv *b); /* op: tbinop (arithmetic) */
int tr_contains(trender *r, const tnode *at, tv *item, tv *seq); /* 1/0, -1 on error */
tv *tr_compare(trender *r, const tnode *at, int op, tv *a, tv *b); /* op: TOP_EQ..TOP_NOTIN */
tv *tr_format_percent(trender *r, const tnode *at, tv *fmt, tv *args); /* fmt % args */

/* ---- template_methods.c --------------------------------------------------- */
tv *tr_call_method(trender *r, const tnode *at, tv *fn, targs *a); /* fn: TFN_METHOD */

/* ---- template_globals.c --------------------------------------------------- */
/* The i-th global's name (NULL past the last): every render's root frame
 * holds them. */
const char *tr_global_name(size_t i);
tv *tr_call_global(trender *r, tscope *s, const tnode *at, const char *g, targs *a);

/* (tr_filter_known / tr_test_known: template_impl.h, for the parser) */

/* ---- template_tests.c ----------------------------------------------------- */
/* 1/0 for `v is name(args)`, -1 on error. */
int tr_apply_test(trender *r, tscope *s, const tnode *at, const char *name, tv *v, targs *a);

/* ---- template_filters.c --------------------------------------------------- */
tv *tr_apply_filter(trender *r, tscope *s, const tnode *at, const char *name, tv *v, targs *a);

#endif
