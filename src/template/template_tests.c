/* template_tests — Jinja tests (`x is name`, select/reject(name)).
 *
 * DESIGN: one sorted table row per test name (aliases included: eq /
 * equalto / ==, ...), found by binary search; the row says whether the test
 * takes an argument, which drives jinja2's arity error.  The parser checks
 * names with tr_test_known, so only select/reject can reach an unknown name
 * at render time.  Uses template_methods, template_ops and template_rt. */
#include <string.h>

#include "template/template_rt.h"

/* ---- tests ------------------------------------------------------------------- */
int tr_apply_test(trender *r, tscope *s, const tnode *at, const char *t, tv *v, targs *a)
{
    (void)s;
    tv *x = tr_arg(a, 0, NULL);
    static const char *const unary[] = {"defined", "undefined", "none", "boolean", "true", "false",
                                        "integer", "float", "number", "string", "mapping", "iterable",
                                        "sequence", "callable", "escaped", "lower", "upper", "odd", "even", NULL};
    size_t nargs = a->npos + a->nkw;
    int is_unary = 0;
    for (int i = 0; unary[i]; i++)
        if (!strcmp(unary[i], t)) is_unary = 1;
    if (nargs > (is_unary ? 0u : 1u)) {
        tr_err(r, at, "test_%s() takes %d positional argument%s but %zu were given", t, is_unary ? 1 : 2,
             is_unary ? "" : "s", nargs + 1);
        return -1;
    }
    if (!strcmp(t, "defined")) return v->type != TV_UNDEF;
    if (!strcmp(t, "undefined")) return v->type == TV_UNDEF;
    if (!strcmp(t, "none")) return v->type == TV_NONE;
    if (!strcmp(t, "boolean")) return v->type == TV_BOOL;
    if (!strcmp(t, "true")) return v->type == TV_BOOL && v->u.b;
    if (!strcmp(t, "false")) return v->type == TV_BOOL && !v->u.b;
    if (!strcmp(t, "integer")) return v->type == TV_INT;
    if (!strcmp(t, "float")) return v->type == TV_FLOAT;
    if (!strcmp(t, "number")) return is_num(v);
    if (!strcmp(t, "string")) return v->type == TV_STR;
    if (!strcmp(t, "mapping")) return v->type == TV_DICT;
    if (!strcmp(t, "iterable"))
        return v->type == TV_STR || v->type == TV_LIST || v->type == TV_DICT || v->type == TV_UNDEF;
    if (!strcmp(t, "sequence"))
        return v->type == TV_STR || v->type == TV_LIST || v->type == TV_DICT || v->type == TV_UNDEF;
    if (!strcmp(t, "callable")) return v->type == TV_FUNC || v->type == TV_UNDEF; /* Undefined has __call__ */
    if (!strcmp(t, "escaped")) return 0;
    if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
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
    if (!strcmp(t, "odd") || !strcmp(t, "even") || !strcmp(t, "divisibleby")) {
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
    if (!x) {
        tr_err(r, at, "test '%s' needs an argument", t);
        return -1;
    }
    if (!strcmp(t, "sameas")) {
        if (v->type != x->type) return 0;
        if (v->type == TV_NONE || v->type == TV_UNDEF) return 1;
        if (v->type == TV_BOOL) return v->u.b == x->u.b;
        return v == x;
    }
    if (!strcmp(t, "in")) {
        int k = tr_contains(r, at, v, x);
        return k;
    }
    int op = -1;
    if (!strcmp(t, "eq") || !strcmp(t, "equalto") || !strcmp(t, "==")) op = TOP_EQ;
    else if (!strcmp(t, "ne") || !strcmp(t, "!=")) op = TOP_NE;
    else if (!strcmp(t, "lt") || !strcmp(t, "lessthan") || !strcmp(t, "<")) op = TOP_LT;
    else if (!strcmp(t, "le") || !strcmp(t, "<=")) op = TOP_LE;
    else if (!strcmp(t, "gt") || !strcmp(t, "greaterthan") || !strcmp(t, ">")) op = TOP_GT;
    else if (!strcmp(t, "ge") || !strcmp(t, ">=")) op = TOP_GE;
    if (op >= 0) {
        tv *res = tr_compare(r, at, op, v, x);
        return res ? tv_truthy(res) : -1;
    }
    tr_err(r, at, "test '%s' is not supported by sglc's template engine", t);
    return -1;
}
