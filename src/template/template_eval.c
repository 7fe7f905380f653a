/* template_eval — the Jinja interpreter's top: statements, expressions,
 * macros and calls, and tmpl_render (filters, tests, methods, globals and
 * value operations live in the files below it: see template_rt.h).
 *
 * DESIGN: a tree-walking interpreter over the AST of template_parse.c.
 * Scoping follows Jinja2: the template has one frame; each for-loop
 * iteration, macro call and with-block gets a child frame (so a `set`
 * inside a loop body is gone at the next iteration, hence namespace());
 * if-blocks share their parent's frame.  Undefined values behave like
 * jinja2.Undefined: printing gives "", truth is false, iteration is empty,
 * attribute access, arithmetic, ordering and calls raise an error.
 *
 * Errors: every eval function returns NULL (values) or -1 (statements)
 * after recording the first error message in the render state; nothing
 * longjmps.  The render state counts steps (loop iterations, calls) and
 * nesting depth against tmpl_limits, and the arena and output buffer carry
 * their own caps, so every render ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template_rt.h"

enum { EX_OK = 0, EX_BREAK = 1, EX_CONTINUE = 2, EX_ERR = -1 };

static int run_for(trender *r, tscope *s, const tnode *n, tv *it, int depth);
static tv *eval(trender *r, tscope *s, const tnode *n);
static int exec_body(trender *r, tscope *s, const tnode *body);

/* ---- scopes -------------------------------------------------------------- */
static tscope *scope_new(trender *r, tscope *parent)
{
    tscope *s = tarena_alloc(r->a, sizeof *s);
    if (!s) return NULL;
    s->parent = parent;
    return s;
}

static int scope_set(trender *r, tscope *s, const char *name, tv *v)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            s->vals[i] = v;
            return 0;
        }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 8;
        const char **nn = tarena_alloc(r->a, nc * sizeof *nn);
        tv **nv = tarena_alloc(r->a, nc * sizeof *nv);
        if (!nn || !nv) return -1;
        if (s->n) {
            memcpy(nn, s->names, s->n * sizeof *nn);
            memcpy(nv, s->vals, s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = nc;
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
    return 0;
}

static tv *scope_get(tscope *s, const char *name)
{
    for (; s; s = s->parent)
        for (size_t i = s->n; i-- > 0;)
            if (!strcmp(s->names[i], name)) return s->vals[i];
    return NULL;
}

/* ---- calls ------------------------------------------------------------------- */
/* Would jinja2's optimizer fold this expression to a constant?  (No names,
 * no calls.)  A folded slice of a non-sequence becomes Undefined there,
 * while a runtime one raises TypeError. */
static int node_is_const(const tnode *n)
{
    if (!n) return 1;
    if (n->kind == TN_NAME || n->kind == TN_CALL) return 0;
    if (n->kind == TN_FILTER && (!strcmp(n->name, "map") || !strcmp(n->name, "select") ||
                                 !strcmp(n->name, "reject") || !strcmp(n->name, "selectattr") ||
                                 !strcmp(n->name, "rejectattr")))
        return 0; /* context filters are never folded */
    if (!node_is_const(n->a) || !node_is_const(n->b) || !node_is_const(n->c) || !node_is_const(n->d)) return 0;
    for (size_t i = 0; i < n->n1; i++)
        if (!node_is_const(n->l1[i])) return 0;
    for (size_t i = 0; i < n->n2 && n->kind != TN_COMPARE; i++)
        if (!node_is_const(n->l2[i])) return 0;
    return 1;
}

/* Does the subtree reference variable `name`?  (Jinja lets a macro take
 * extra arguments only when its body mentions varargs / kwargs.) */
static int node_uses_name(const tnode *n, const char *name)
{
    if (!n) return 0;
    if (n->kind == TN_NAME && !strcmp(n->name, name)) return 1;
    if (node_uses_name(n->a, name) || node_uses_name(n->b, name) || node_uses_name(n->c, name) ||
        node_uses_name(n->d, name))
        return 1;
    for (size_t i = 0; i < n->n1; i++)
        if (node_uses_name(n->l1[i], name)) return 1;
    if (n->kind != TN_COMPARE)
        for (size_t i = 0; i < n->n2; i++)
            if (node_uses_name(n->l2[i], name)) return 1;
    return 0;
}

static tv *call_macro(trender *r, const tnode *at, tv *fn, targs *a, tv *caller)
{
    const tnode *m = fn->u.fn.node;
    if (++r->depth > r->lim.max_depth) {
        tr_err(r, at, "macro calls nested too deeply (limit %d)", r->lim.max_depth);
        return NULL;
    }
    tscope *s = scope_new(r, fn->u.fn.scope);
    if (!s) return tr_oom(r);
    size_t np = m->nn;
    tv *varargs = tr_list(r, a->npos > np ? a->npos - np : 0);
    tv *kwargs = tv_dict(r->a, 4);
    if (!varargs || !kwargs) return tr_oom(r);
    varargs->is_tuple = 1;
    if (a->npos > np && !node_uses_name(m->b, "varargs")) {
        tr_err(r, at, "macro '%s' takes not more than %zu argument(s)", m->name ? m->name : "caller", np);
        return NULL;
    }
    for (size_t i = np; i < a->npos; i++) varargs->u.list.items[i - np] = a->pos[i];
    for (size_t i = 0; i < np; i++) {
        tv *v = i < a->npos ? a->pos[i] : NULL;
        for (size_t k = 0; !v && k < a->nkw; k++)
            if (!strcmp(a->kwn[k], m->names[i])) v = a->kwv[k];
        if (!v && m->l2[i]) {
            v = eval(r, s, m->l2[i]);
            if (!v) return NULL;
        }
        if (!v) v = tr_undef(r, "parameter '%s' was not provided", m->names[i]);
        if (!v || scope_set(r, s, m->names[i], v)) return tr_oom(r);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        int known = 0;
        for (size_t i = 0; i < np; i++)
            if (!strcmp(a->kwn[k], m->names[i])) known = 1;
        if (!known && !node_uses_name(m->b, "kwargs")) {
            tr_err(r, at, "macro '%s' takes no keyword argument '%s'", m->name ? m->name : "caller", a->kwn[k]);
            return NULL;
        }
        if (!known && tv_dict_set(r->a, kwargs, tv_str(r->a, a->kwn[k], strlen(a->kwn[k])), a->kwv[k]))
            return tr_oom(r);
    }
    if (scope_set(r, s, "varargs", varargs) || scope_set(r, s, "kwargs", kwargs)) return tr_oom(r);
    if (caller && !node_uses_name(m->b, "caller")) {
        tr_err(r, at, "macro '%s' was invoked with two values for the special caller argument", m->name);
        return NULL;
    }
    if (caller && scope_set(r, s, "caller", caller)) return tr_oom(r);
    tbuf buf = {0}, *saved = r->out;
    buf.limit = r->lim.max_output;
    r->out = &buf;
    int rc = exec_body(r, s, m->b);
    r->out = saved;
    r->depth--;
    if (rc < 0) {
        tbuf_free(&buf);
        return NULL;
    }
    return tr_buf_to_str(r, &buf);
}

static tv *call_value(trender *r, tscope *s, const tnode *at, tv *fn, targs *a, tv *caller)
{
    if (tr_step(r, at)) return NULL;
    if (fn->type == TV_UNDEF) return tr_undef_error(r, at, fn);
    if (fn->type == TV_LOOP) {
        tloop *lp = fn->u.loop;
        if (lp->node->op != 2) {
            tr_err(r, at, "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
            return NULL;
        }
        if (a->npos != 1 || a->nkw) {
            tr_err(r, at, "loop() takes exactly one iterable");
            return NULL;
        }
        if (++r->depth > r->lim.max_depth) {
            tr_err(r, at, "recursive loop nested too deeply (limit %d)", r->lim.max_depth);
            return NULL;
        }
        tbuf buf = {0}, *saved = r->out;
        buf.limit = r->lim.max_output;
        r->out = &buf;
        int rc = run_for(r, lp->scope, lp->node, a->pos[0], lp->depth + 1);
        r->out = saved;
        r->depth--;
        if (rc < 0) {
            tbuf_free(&buf);
            return NULL;
        }
        return tr_buf_to_str(r, &buf);
    }
    if (fn->type != TV_FUNC) {
        tr_err(r, at, "'%s' object is not callable", tv_type_name(fn));
        return NULL;
    }
    switch (fn->u.fn.kind) {
    case TFN_METHOD: return tr_call_method(r, at, fn, a);
    case TFN_GLOBAL: return tr_call_global(r, s, at, fn->u.fn.name, a);
    case TFN_MACRO: return call_macro(r, at, fn, a, caller);
    case TFN_CALLER: {
        /* caller(args): the call block's body with its parameters */
        const tnode *cb = fn->u.fn.node;
        tv tmp = *fn;
        tmp.u.fn.kind = TFN_MACRO;
        tnode fake = *cb;
        fake.kind = TN_MACRO;
        tmp.u.fn.node = &fake;
        return call_macro(r, at, &tmp, a, NULL);
    }
    }
    return NULL;
}

/* Evaluate a call node's arguments. */
static int eval_args(trender *r, tscope *s, const tnode *n, targs *a)
{
    memset(a, 0, sizeof *a);
    a->npos = n->n1;
    a->nkw = n->n2;
    a->pos = tarena_alloc(r->a, (n->n1 + 1) * sizeof(tv *));
    a->kwv = tarena_alloc(r->a, (n->n2 + 1) * sizeof(tv *));
    a->kwn = n->names;
    if (!a->pos || !a->kwv) {
        tr_oom(r);
        return -1;
    }
    for (size_t i = 0; i < n->n1; i++)
        if (!(a->pos[i] = eval(r, s, n->l1[i]))) return -1;
    for (size_t i = 0; i < n->n2; i++)
        if (!(a->kwv[i] = eval(r, s, n->l2[i]))) return -1;
    return 0;
}

/* ---- expressions ----------------------------------------------------------------- */
static tv *eval(trender *r, tscope *s, const tnode *n)
{
    if (r->failed) return NULL;
    switch (n->kind) {
    case TN_LIT: return n->lit;
    case TN_NAME: {
        tv *v = scope_get(s, n->name);
        return v ? v : tr_undef(r, "'%s' is undefined", n->name);
    }
    case TN_GETATTR: {
        tv *o = eval(r, s, n->a);
        return o ? tr_get_attr(r, n, o, n->name) : NULL;
    }
    case TN_GETITEM: {
        tv *o = eval(r, s, n->a), *k = o ? eval(r, s, n->b) : NULL;
        if (!k) return NULL;
        if (k->type == TV_UNDEF && o->type != TV_UNDEF) {
            /* obj[undefined]: the key is used, which raises */
            return tr_undef_error(r, n, k);
        }
        return tr_get_item(r, n, o, k);
    }
    case TN_SLICE: {
        tv *o = eval(r, s, n->a);
        if (!o) return NULL;
        tv *x[3] = {NULL, NULL, NULL};
        const tnode *kids[3] = {n->b, n->c, n->d};
        for (int i = 0; i < 3; i++)
            if (kids[i] && !(x[i] = eval(r, s, kids[i]))) return NULL;
        if (o->type != TV_STR && o->type != TV_LIST && o->type != TV_UNDEF && r->const_print)
            return tr_undef(r, "'%s object' is not subscriptable", tv_type_name(o));
        return tr_slice(r, n, o, x[0], x[1], x[2]);
    }
    case TN_CALL: {
        tv *fn = eval(r, s, n->a);
        targs a;
        if (!fn || eval_args(r, s, n, &a)) return NULL;
        return call_value(r, s, n, fn, &a, NULL);
    }
    case TN_FILTER: {
        tv *v = eval(r, s, n->a);
        targs a;
        if (!v || eval_args(r, s, n, &a)) return NULL;
        return tr_apply_filter(r, s, n, n->name, v, &a);
    }
    case TN_TEST: {
        tv *v = eval(r, s, n->a);
        targs a;
        if (!v || eval_args(r, s, n, &a)) return NULL;
        int k = tr_apply_test(r, s, n, n->name, v, &a);
        if (k < 0) return NULL;
        return tv_bool(n->op ? !k : k);
    }
    case TN_BINOP: {
        tv *a = eval(r, s, n->a), *b = a ? eval(r, s, n->b) : NULL;
        return b ? tr_binop(r, n, n->op, a, b) : NULL;
    }
    case TN_NEG:
    case TN_POS: {
        tv *a = eval(r, s, n->a);
        if (!a) return NULL;
        if (a->type == TV_FLOAT) return n->kind == TN_NEG ? tr_float(r, -a->u.f) : a;
        if (is_intlike(a)) {
            if (n->kind == TN_POS) return tr_int(r, ival(a));
            if (ival(a) == INT64_MIN) {
                tr_err(r, n, "integer overflow");
                return NULL;
            }
            return tr_int(r, -ival(a));
        }
        return tr_type_error(r, n, n->kind == TN_NEG ? "-" : "+", a, NULL);
    }
    case TN_NOT: {
        tv *a = eval(r, s, n->a);
        return a ? tv_bool(!tv_truthy(a)) : NULL;
    }
    case TN_AND: {
        tv *a = eval(r, s, n->a);
        if (!a) return NULL;
        return tv_truthy(a) ? eval(r, s, n->b) : a;
    }
    case TN_OR: {
        tv *a = eval(r, s, n->a);
        if (!a) return NULL;
        return tv_truthy(a) ? a : eval(r, s, n->b);
    }
    case TN_COMPARE: {
        tv *left = eval(r, s, n->a);
        if (!left) return NULL;
        for (size_t i = 0; i < n->n1; i++) {
            tv *right = eval(r, s, n->l1[i]);
            if (!right) return NULL;
            tv *res = tr_compare(r, n, n->l2[i]->op, left, right);
            if (!res) return NULL;
            if (!tv_truthy(res)) return &tv_false_v;
            left = right;
        }
        return &tv_true_v;
    }
    case TN_COND: {
        tv *c = eval(r, s, n->a);
        if (!c) return NULL;
        if (tv_truthy(c)) return eval(r, s, n->b);
        return n->c ? eval(r, s, n->c) : tr_undef(r, "the inline if-expression on line %d evaluated to false and no else section was defined.", n->line);
    }
    case TN_LIST:
    case TN_TUPLE: {
        tv *l = tr_list(r, n->n1);
        if (!l) return NULL;
        l->is_tuple = n->kind == TN_TUPLE;
        for (size_t i = 0; i < n->n1; i++)
            if (!(l->u.list.items[i] = eval(r, s, n->l1[i]))) return NULL;
        return l;
    }
    case TN_DICT: {
        tv *d = tv_dict(r->a, n->n1);
        if (!d) return tr_oom(r);
        for (size_t i = 0; i < n->n1; i++) {
            tv *k = eval(r, s, n->l1[i]), *v = k ? eval(r, s, n->l2[i]) : NULL;
            if (!v) return NULL;
            if (k->type == TV_LIST && !k->is_tuple) {
                tr_err(r, n, "unhashable type: 'list'");
                return NULL;
            }
            if (k->type == TV_DICT || k->type == TV_UNDEF) {
                tr_err(r, n, "unhashable type: '%s'", tv_type_name(k));
                return NULL;
            }
            if (tv_dict_set(r->a, d, k, v)) return tr_oom(r);
        }
        return d;
    }
    case TN_CONCAT: {
        tbuf b = {0};
        for (size_t i = 0; i < n->n1; i++) {
            tv *v = eval(r, s, n->l1[i]);
            if (!v) {
                tbuf_free(&b);
                return NULL;
            }
            tv_write_str(&b, v);
        }
        return tr_buf_to_str(r, &b);
    }
    default: tr_err(r, n, "internal error: not an expression"); return NULL;
    }
}

/* ---- statements ------------------------------------------------------------------- */
static int assign(trender *r, tscope *s, const tnode *at, const char **names, size_t nn, tv *v)
{
    if (nn == 1) return scope_set(r, s, names[0], v) ? (tr_oom(r), -1) : 0;
    tv *l = tr_iter(r, at, v);
    if (!l) return -1;
    if (l->u.list.n != nn) {
        tr_err(r, at, "%s values to unpack (expected %zu, got %zu)", l->u.list.n > nn ? "too many" : "not enough",
             nn, l->u.list.n);
        return -1;
    }
    for (size_t i = 0; i < nn; i++)
        if (scope_set(r, s, names[i], l->u.list.items[i])) return tr_oom(r), -1;
    return 0;
}

static tv *capture(trender *r, tscope *s, const tnode *body)
{
    tbuf buf = {0}, *saved = r->out;
    buf.limit = r->lim.max_output;
    r->out = &buf;
    int rc = exec_body(r, s, body);
    r->out = saved;
    if (rc < 0) {
        tbuf_free(&buf);
        return NULL;
    }
    return tr_buf_to_str(r, &buf);
}

static tv *apply_filter_chain(trender *r, tscope *s, const tnode *n, tv *v)
{
    for (size_t i = 0; i < n->n1 && v; i++) {
        targs a;
        if (eval_args(r, s, n->l1[i], &a)) return NULL;
        v = tr_apply_filter(r, s, n->l1[i], n->l1[i]->name, v, &a);
    }
    return v;
}

/* Run a for statement over `it` (one level of a recursive loop at `depth`). */
static int run_for(trender *r, tscope *s, const tnode *n, tv *it, int depth)
{
    tv *l = tr_iter(r, n->a, it);
    if (!l) return EX_ERR;
    if (n->d) { /* loop filter: evaluated with the targets bound */
        tv *f = tr_list(r, l->u.list.n);
        if (!f) return EX_ERR;
        size_t k = 0;
        for (size_t i = 0; i < l->u.list.n; i++) {
            if (tr_step(r, n)) return EX_ERR;
            tscope *fs = scope_new(r, s);
            if (!fs) return tr_oom(r), EX_ERR;
            if (assign(r, fs, n, n->names, n->nn, l->u.list.items[i])) return EX_ERR;
            tv *c = eval(r, fs, n->d);
            if (!c) return EX_ERR;
            if (tv_truthy(c)) f->u.list.items[k++] = l->u.list.items[i];
        }
        f->u.list.n = k;
        l = f;
    }
    tloop *lp = tarena_alloc(r->a, sizeof *lp);
    tv *lv = tarena_alloc(r->a, sizeof *lv);
    if (!lp || !lv) return tr_oom(r), EX_ERR;
    lp->length = (int64_t)l->u.list.n;
    lp->items = l->u.list.items;
    lp->depth = depth;
    lp->node = n;
    lp->scope = s;
    lv->type = TV_LOOP;
    lv->u.loop = lp;
    for (size_t i = 0; i < l->u.list.n; i++) {
        if (tr_step(r, n)) return EX_ERR;
        lp->index0 = (int64_t)i;
        tscope *is = scope_new(r, s);
        if (!is) return tr_oom(r), EX_ERR;
        if (scope_set(r, is, "loop", lv)) return tr_oom(r), EX_ERR;
        if (assign(r, is, n, n->names, n->nn, l->u.list.items[i])) return EX_ERR;
        int rc = exec_body(r, is, n->b);
        if (rc == EX_ERR) return EX_ERR;
        if (rc == EX_BREAK) break;
        /* a loop object handed out during this iteration keeps its
         * index only if copied; Jinja's loop is live too */
    }
    if (l->u.list.n == 0 && n->c) return exec_body(r, s, n->c);
    return EX_OK;
}

static int exec(trender *r, tscope *s, const tnode *n)
{
    if (r->failed) return EX_ERR;
    switch (n->kind) {
    case TN_BODY: return exec_body(r, s, n);
    case TN_TEXT: tbuf_put(r->out, n->lit->u.str.s, n->lit->u.str.len); break;
    case TN_PRINT: {
        /* jinja2 folds a constant {{ }} at compile time, where a slice of a
         * non-sequence becomes Undefined instead of a TypeError */
        r->const_print = node_is_const(n->a);
        tv *v = eval(r, s, n->a);
        r->const_print = 0;
        if (!v) return EX_ERR;
        tv_write_str(r->out, v);
        break;
    }
    case TN_IF: {
        tv *c = eval(r, s, n->a);
        if (!c) return EX_ERR;
        if (tv_truthy(c)) return exec_body(r, s, n->b);
        if (n->c) return exec(r, s, n->c);
        break;
    }
    case TN_FOR: {
        if (n->op == 1) { /* with-block */
            tscope *w = scope_new(r, s);
            if (!w) return tr_oom(r), EX_ERR;
            for (size_t i = 0; i < n->n2; i++) {
                tv *v = eval(r, s, n->l2[i]);
                if (!v || scope_set(r, w, n->names[i], v)) return EX_ERR;
            }
            return exec_body(r, w, n->b);
        }
        tv *it = eval(r, s, n->a);
        if (!it) return EX_ERR;
        return run_for(r, s, n, it, 1);
    }
    case TN_SET: {
        tv *v = eval(r, s, n->a);
        if (!v) return EX_ERR;
        if (n->op == 1) {
            tv *ns = scope_get(s, n->name);
            if (!ns || ns->type != TV_NS) {
                tr_err(r, n, "cannot assign attribute on non-namespace object");
                return EX_ERR;
            }
            tv *key = tr_str(r, n->names[0], strlen(n->names[0]));
            if (!key || tv_dict_set(r->a, ns, key, v)) return tr_oom(r), EX_ERR;
            break;
        }
        return assign(r, s, n, n->names, n->nn, v) ? EX_ERR : EX_OK;
    }
    case TN_SET_BLOCK: {
        tscope *bs = scope_new(r, s);
        if (!bs) return tr_oom(r), EX_ERR;
        tv *v = capture(r, bs, n->b);
        if (v && n->n1) v = apply_filter_chain(r, s, n, v);
        if (!v) return EX_ERR;
        return assign(r, s, n, n->names, n->nn, v) ? EX_ERR : EX_OK;
    }
    case TN_MACRO: {
        tv *f = tarena_alloc(r->a, sizeof *f);
        if (!f) return tr_oom(r), EX_ERR;
        f->type = TV_FUNC;
        f->u.fn.kind = TFN_MACRO;
        f->u.fn.name = n->name;
        f->u.fn.node = n;
        f->u.fn.scope = s;
        if (scope_set(r, s, n->name, f)) return tr_oom(r), EX_ERR;
        break;
    }
    case TN_CALL_BLOCK: {
        tv *caller = tarena_alloc(r->a, sizeof *caller);
        if (!caller) return tr_oom(r), EX_ERR;
        caller->type = TV_FUNC;
        caller->u.fn.kind = TFN_CALLER;
        caller->u.fn.name = "caller";
        caller->u.fn.node = n;
        caller->u.fn.scope = s;
        tv *fn = eval(r, s, n->a->a);
        targs a;
        if (!fn || eval_args(r, s, n->a, &a)) return EX_ERR;
        if (fn->type != TV_FUNC || fn->u.fn.kind != TFN_MACRO) {
            tr_err(r, n, "{%% call %%} needs a macro");
            return EX_ERR;
        }
        if (tr_step(r, n)) return EX_ERR;
        tv *v = call_macro(r, n, fn, &a, caller);
        if (!v) return EX_ERR;
        tv_write_str(r->out, v);
        break;
    }
    case TN_FILTER_BLOCK: {
        if (++r->depth > r->lim.max_depth) {
            tr_err(r, n, "filter blocks nested too deeply");
            return EX_ERR;
        }
        tv *v = capture(r, s, n->b);
        r->depth--;
        if (v) v = apply_filter_chain(r, s, n, v);
        if (!v) return EX_ERR;
        tv_write_str(r->out, v);
        break;
    }
    case TN_BREAK: return EX_BREAK;
    case TN_CONTINUE: return EX_CONTINUE;
    default: tr_err(r, n, "internal error: not a statement"); return EX_ERR;
    }
    if (r->out->over) {
        tr_err(r, n, "template output exceeded its size limit");
        return EX_ERR;
    }
    if (r->a->failed) {
        tr_oom(r);
        return EX_ERR;
    }
    return r->failed ? EX_ERR : EX_OK;
}

static int exec_body(trender *r, tscope *s, const tnode *body)
{
    if (body->kind != TN_BODY) return exec(r, s, body);
    for (size_t i = 0; i < body->n1; i++) {
        int rc = exec(r, s, body->l1[i]);
        if (rc != EX_OK) return rc;
    }
    return EX_OK;
}

/* ---- entry -------------------------------------------------------------------------- */
int tmpl_render(const tmpl_template *t, const json_t *vars, const tmpl_limits *limits, char **out,
                size_t *out_len, char **err)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (err) *err = NULL;
    trender r;
    memset(&r, 0, sizeof r);
    r.lim.max_output = limits && limits->max_output ? limits->max_output : (size_t)64 << 20;
    r.lim.max_memory = limits && limits->max_memory ? limits->max_memory : (size_t)512 << 20;
    r.lim.max_steps = limits && limits->max_steps ? limits->max_steps : 10000000;
    r.lim.max_depth = limits && limits->max_depth ? limits->max_depth : 64;
    tarena arena;
    tarena_init(&arena, r.lim.max_memory);
    r.a = &arena;
    tbuf buf = {0};
    buf.limit = r.lim.max_output;
    r.out = &buf;
    tscope *root = scope_new(&r, NULL);
    const char *gname;
    for (size_t i = 0; root && (gname = tr_global_name(i)); i++) {
        tv *f = tarena_alloc(&arena, sizeof *f);
        if (!f) break;
        f->type = TV_FUNC;
        f->u.fn.kind = TFN_GLOBAL;
        f->u.fn.name = gname;
        scope_set(&r, root, gname, f);
    }
    if (!root || arena.failed) tr_oom(&r);
    if (!r.failed && vars) {
        if (!json_is_object(vars)) tr_err(&r, NULL, "template variables must be a JSON object");
        else {
            const char *k;
            json_t *v;
            json_object_foreach((json_t *)vars, k, v) {
                tv *x = tv_from_json(&arena, v);
                if (!x || scope_set(&r, root, k, x)) {
                    tr_oom(&r);
                    break;
                }
            }
        }
    }
    tscope *top = r.failed ? NULL : scope_new(&r, root);
    if (!r.failed && top) exec_body(&r, top, t->root);
    if (!r.failed && buf.over) tr_err(&r, NULL, "template output exceeded its size limit");
    if (!r.failed && arena.failed) tr_oom(&r);
    tarena_free(&arena);
    if (r.failed) {
        tbuf_free(&buf);
        if (err) *err = strdup(r.err);
        return -1;
    }
    if (!buf.p) {
        buf.p = calloc(1, 1);
        if (!buf.p) {
            if (err) *err = strdup("out of memory");
            return -1;
        }
    }
    *out = buf.p;
    if (out_len) *out_len = buf.len;
    return 0;
}
