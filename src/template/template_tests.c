/* template_tests — Jinja tests (`x is name`, select/reject(name)).
 *
 * DESIGN: one sorted table row per test name (aliases included: eq /
 * equalto / ==, ...), found by binary search; the row says whether the test
 * takes an argument, which drives jinja2's arity error.  The parser checks
 * names with tr_test_known, so only select/reject can reach an unknown name
 * at render time.  Uses template_methods, template_ops and template_rt. */
#include <stdlib.h>
#include <string.h>

#include "template/template_rt.h"

/* ---- the tests ----------------------------------------------------------------- */
/* A test: 1/0, or -1 with the error recorded.  x is the argument (NULL when
 * none was given); op is the row's comparison for the comparison tests. */
typedef int (*ttest_fn)(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x);

static int tst_defined(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type != TV_UNDEF; }
static int tst_undefined(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type == TV_UNDEF; }
static int tst_none(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type == TV_NONE; }
static int tst_boolean(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type == TV_BOOL; }
static int tst_true(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    return v->type == TV_BOOL && v->u.b;
}
static int tst_false(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    return v->type == TV_BOOL && !v->u.b;
}
static int tst_integer(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type == TV_INT; }
static int tst_float(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type == TV_FLOAT; }
static int tst_number(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return is_num(v); }
static int tst_string(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type == TV_STR; }
static int tst_mapping(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return v->type == TV_DICT; }

/* iterable and sequence: the same answer for sglc's value types */
static int tst_iterable(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    return v->type == TV_STR || v->type == TV_LIST || v->type == TV_DICT || v->type == TV_UNDEF;
}

static int tst_callable(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    return v->type == TV_FUNC || v->type == TV_UNDEF; /* Undefined has __call__ */
}

static int tst_escaped(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return 0; }

/* lower / upper: str(v).islower() / isupper() */
static int tst_case(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    tv *sv = tr_to_str(r, v);
    if (!sv) return -1;
    tv fn = {.type = TV_FUNC};
    fn.u.fn.kind = TFN_METHOD;
    fn.u.fn.name = t[0] == 'l' ? "islower" : "isupper";
    fn.u.fn.self = sv;
    targs none = {0};
    tv *res = tr_call_method(r, at, &fn, &none);
    return res ? tv_truthy(res) : -1;
}

/* odd / even / divisibleby(k) */
static int tst_modulo(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    if (v->type == TV_UNDEF) return tr_undef_error(r, at, v) ? 0 : -1;
    if (!is_num(v)) {
        tr_err(r, at, "unsupported operand type(s) for %%: '%s' and 'int'", tv_type_name(v));
        return -1;
    }
    tv *two = tr_int(r, 2);
    tv *d = t[0] == 'd' ? x : two;
    if (!d) {
        if (!two) return -1;
        tr_err(r, at, "divisibleby() missing the divisor");
        return -1;
    }
    tv *m = tr_binop(r, at, TOP_MOD, v, d);
    if (!m) return -1;
    /* odd: v % 2 == 1; even / divisibleby: v % k == 0 (floats too) */
    tv one = {.type = TV_INT, .u.i = 1}, zero = {.type = TV_INT, .u.i = 0};
    return tv_equal(m, t[0] == 'o' ? &one : &zero);
}

static int tst_sameas(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    if (v->type != x->type) return 0;
    if (v->type == TV_NONE || v->type == TV_UNDEF) return 1;
    if (v->type == TV_BOOL) return v->u.b == x->u.b;
    return v == x;
}

static int tst_in(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x) { return tr_contains(r, at, v, x); }

/* eq / ne / lt / le / gt / ge and their aliases */
static int tst_compare(trender *r, const tnode *at, const char *t, int op, tv *v, tv *x)
{
    tv *res = tr_compare(r, at, op, v, x);
    return res ? tv_truthy(res) : -1;
}

enum {
    TT_UNARY = 1, /* takes no argument: jinja2's arity error says "1 positional argument" */
    TT_ARG = 2,   /* needs its argument ("test 'x' needs an argument") */
};

typedef struct ttest {
    const char *name;
    ttest_fn fn;
    unsigned flags;
    int op; /* tst_compare: the comparison */
} ttest;

/* sorted by name (strcmp order): test_find bisects it */
static const ttest TESTS[] = {
    {"!=", tst_compare, TT_ARG, TOP_NE},
    {"<", tst_compare, TT_ARG, TOP_LT},
    {"<=", tst_compare, TT_ARG, TOP_LE},
    {"==", tst_compare, TT_ARG, TOP_EQ},
    {">", tst_compare, TT_ARG, TOP_GT},
    {">=", tst_compare, TT_ARG, TOP_GE},
    {"boolean", tst_boolean, TT_UNARY, 0},
    {"callable", tst_callable, TT_UNARY, 0},
    {"defined", tst_defined, TT_UNARY, 0},
    {"divisibleby", tst_modulo, 0, 0},
    {"eq", tst_compare, TT_ARG, TOP_EQ},
    {"equalto", tst_compare, TT_ARG, TOP_EQ},
    {"escaped", tst_escaped, TT_UNARY, 0},
    {"even", tst_modulo, TT_UNARY, 0},
    {"false", tst_false, TT_UNARY, 0},
    {"float", tst_float, TT_UNARY, 0},
    {"ge", tst_compare, TT_ARG, TOP_GE},
    {"greaterthan", tst_compare, TT_ARG, TOP_GT},
    {"gt", tst_compare, TT_ARG, TOP_GT},
    {"in", tst_in, TT_ARG, 0},
    {"integer", tst_integer, TT_UNARY, 0},
    {"iterable", tst_iterable, TT_UNARY, 0},
    {"le", tst_compare, TT_ARG, TOP_LE},
    {"lessthan", tst_compare, TT_ARG, TOP_LT},
    {"lower", tst_case, TT_UNARY, 0},
    {"lt", tst_compare, TT_ARG, TOP_LT},
    {"mapping", tst_mapping, TT_UNARY, 0},
    {"ne", tst_compare, TT_ARG, TOP_NE},
    {"none", tst_none, TT_UNARY, 0},
    {"number", tst_number, TT_UNARY, 0},
    {"odd", tst_modulo, TT_UNARY, 0},
    {"sameas", tst_sameas, TT_ARG, 0},
    {"sequence", tst_iterable, TT_UNARY, 0},
    {"string", tst_string, TT_UNARY, 0},
    {"true", tst_true, TT_UNARY, 0},
    {"undefined", tst_undefined, TT_UNARY, 0},
    {"upper", tst_case, TT_UNARY, 0},
};

static int test_cmp(const void *key, const void *row)
{
    return strcmp((const char *)key, ((const ttest *)row)->name);
}

static const ttest *test_find(const char *name)
{
    return bsearch(name, TESTS, sizeof TESTS / sizeof TESTS[0], sizeof TESTS[0], test_cmp);
}

int tr_test_known(const char *name) { return test_find(name) != NULL; }

int tr_apply_test(trender *r, tscope *s, const tnode *at, const char *t, tv *v, targs *a)
{
    (void)s;
    tv *x = tr_arg(a, 0, NULL);
    const ttest *row = test_find(t);
    int is_unary = row && (row->flags & TT_UNARY);
    size_t nargs = a->npos + a->nkw;
    if (nargs > (is_unary ? 0u : 1u)) {
        tr_err(r, at, "test_%s() takes %d positional argument%s but %zu were given", t, is_unary ? 1 : 2,
               is_unary ? "" : "s", nargs + 1);
        return -1;
    }
    if ((!row || (row->flags & TT_ARG)) && !x) {
        tr_err(r, at, "test '%s' needs an argument", t);
        return -1;
    }
    if (!row) {
        tr_err(r, at, "test '%s' is not supported by sglc's template engine", t);
        return -1;
    }
    return row->fn(r, at, t, row->op, v, x);
}
