/* template_filters — Jinja filters (`x | name(args)`).
 *
 * DESIGN: one sorted table row per filter name (aliases included: d /
 * default, e / escape, count / length), found by binary search; a row's
 * handler gets the value and the call's arguments with jinja2's parameter
 * order.  Rows flagged TF_STR are string filters: they get str(value)
 * (Markup kept).  map/select/reject/selectattr/rejectattr/unique/items/
 * batch/slice/reverse return generators as in jinja2.  The parser checks
 * names with tr_filter_known, so only map(name) can reach an unknown name at
 * render time.  Uses template_tests, template_methods, template_ops,
 * template_strings and template_rt. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "template/template_rt.h"

/* ---- filters ------------------------------------------------------------------ */
/* attribute path "a.b.0" of an item, as Jinja's make_attrgetter */
static tv *attr_path(trender *r, const tnode *at, tv *item, tv *path)
{
    if (is_intlike(path)) return tr_get_item(r, at, item, path);
    if (path->type != TV_STR) {
        tr_err(r, at, "attribute must be a string");
        return NULL;
    }
    const char *p = path->u.str.s;
    size_t n = path->u.str.len, b = 0;
    tv *cur = item;
    while (b <= n) {
        size_t e = b;
        while (e < n && p[e] != '.') e++;
        tv *key;
        int digits = e > b;
        for (size_t k = b; k < e; k++)
            if (p[k] < '0' || p[k] > '9') digits = 0;
        if (digits) key = tr_int(r, strtoll(p + b, NULL, 10));
        else key = tr_str(r, p + b, e - b);
        if (!key) return NULL;
        cur = tr_get_item(r, at, cur, key);
        if (!cur) return NULL;
        if (e >= n) break;
        b = e + 1;
        if (cur->type == TV_UNDEF) return cur;
    }
    return cur;
}

static tv *lower_key(trender *r, tv *v, int case_sensitive)
{
    if (case_sensitive || v->type != TV_STR) return v;
    return tr_py_case(r, v, 0);
}

/* insertion sort on a copy (stable; lists are small) with key transform */
static tv *sorted_list(trender *r, const tnode *at, tv *l, int reverse, int case_sensitive, tv *attribute)
{
    size_t n = l->u.list.n;
    tv *out = tr_list(r, n);
    tv **keys = tarena_alloc(r->a, (n + 1) * sizeof *keys);
    if (!out || !keys) return tr_oom(r);
    for (size_t i = 0; i < n; i++) {
        tv *k = l->u.list.items[i];
        if (attribute && !(k = attr_path(r, at, k, attribute))) return NULL;
        if (!(k = lower_key(r, k, case_sensitive))) return NULL;
        keys[i] = k;
        out->u.list.items[i] = l->u.list.items[i];
    }
    for (size_t i = 1; i < n; i++) {
        tv *k = keys[i], *v = out->u.list.items[i];
        size_t j = i;
        while (j > 0) {
            int c;
            if (tv_compare(keys[j - 1], k, &c) < 0) {
                tr_err(r, at, "'<' not supported between instances of '%s' and '%s'", tv_type_name(k),
                     tv_type_name(keys[j - 1]));
                return NULL;
            }
            if (reverse ? c >= 0 : c <= 0) break;
            keys[j] = keys[j - 1];
            out->u.list.items[j] = out->u.list.items[j - 1];
            j--;
        }
        keys[j] = k;
        out->u.list.items[j] = v;
    }
    return out;
}

static tv *filter_select(trender *r, tscope *s, const tnode *at, tv *v, targs *a, int attr_mode, int reject)
{
    /* jinja2 iterates only `if seq:` - a falsy value (0, false, none) gives nothing */
    tv *lz;
    if (tv_truthy(v) && tr_lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
    tv *l = tv_truthy(v) ? tr_iter(r, at, v) : tr_list(r, 0);
    if (!l) return NULL;
    size_t off = attr_mode ? 1 : 0;
    tv *attrname = attr_mode ? tr_arg(a, 0, NULL) : NULL;
    if (attr_mode && !attrname) {
        tr_err(r, at, "missing parameter for attribute name");
        return NULL;
    }
    tv *testname = tr_arg(a, off, NULL);
    targs ta = {0};
    if (a->npos > off + 1) {
        ta.pos = a->pos + off + 1;
        ta.npos = a->npos - off - 1;
    }
    tv *out = tr_list(r, l->u.list.n);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < l->u.list.n; i++) {
        tv *item = l->u.list.items[i], *x = item;
        if (attr_mode && !(x = attr_path(r, at, item, attrname))) return NULL;
        int ok;
        if (!testname) ok = tv_truthy(x);
        else {
            if (testname->type != TV_STR) {
                tr_err(r, at, "test name must be a string");
                return NULL;
            }
            char *tn = tarena_strndup(r->a, testname->u.str.s, testname->u.str.len);
            if (!tn) return tr_oom(r);
            ok = tr_apply_test(r, s, at, tn, x, &ta);
            if (ok < 0) return NULL;
        }
        if (ok != reject) out->u.list.items[k++] = item;
    }
    out->u.list.n = k;
    out->is_gen = 1;
    return out;
}

static int get_bool_arg(const targs *a, size_t i, const char *name, int def)
{
    tv *v = tr_arg(a, i, name);
    return v ? tv_truthy(v) : def;
}

static tv *filter_int(trender *r, tv *v, tv *def)
{
    tv *d = def ? def : NULL;
    switch (v->type) {
    case TV_INT: return v;
    case TV_BOOL: return tr_int(r, v->u.b);
    case TV_FLOAT:
        if (v->u.f != v->u.f || isinf(v->u.f)) break;
        return tr_int(r, (int64_t)v->u.f);
    case TV_STR: {
        char *s = tarena_strndup(r->a, v->u.str.s, v->u.str.len), *e;
        if (!s) return tr_oom(r);
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        long long x = strtoll(s, &e, 10);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (e != s && !*e) return tr_int(r, x);
        double f = strtod(s, &e);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (e != s && !*e && f == f && !isinf(f)) return tr_int(r, (int64_t)f);
        break;
    }
    default: break;
    }
    return d ? d : tr_int(r, 0);
}

static tv *filter_float(trender *r, tv *v, tv *def)
{
    switch (v->type) {
    case TV_FLOAT: return v;
    case TV_INT:
    case TV_BOOL: return tr_float(r, (double)ival(v));
    case TV_STR: {
        char *s = tarena_strndup(r->a, v->u.str.s, v->u.str.len), *e;
        if (!s) return tr_oom(r);
        double f = strtod(s, &e);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (e != s && !*e) return tr_float(r, f);
        break;
    }
    default: break;
    }
    return def ? def : tr_float(r, 0.0);
}

static tv *filter_indent(trender *r, const tnode *at, tv *v, targs *a)
{
    tv *w = tr_arg(a, 0, "width");
    int first = get_bool_arg(a, 1, "first", 0), blank = get_bool_arg(a, 2, "blank", 0);
    tbuf ind = {0};
    if (!w) tbuf_puts(&ind, "    ");
    else if (w->type == TV_STR) tbuf_put(&ind, w->u.str.s, w->u.str.len);
    else if (is_intlike(w)) {
        for (int64_t i = 0; i < ival(w) && i < 4096; i++) tbuf_putc(&ind, ' ');
    } else {
        tr_err(r, at, "indent width must be an int or str");
        return NULL;
    }
    tv *s = tr_to_str(r, v);
    if (!s) {
        tbuf_free(&ind);
        return NULL;
    }
    tbuf src = {0};
    tbuf_put(&src, s->u.str.s, s->u.str.len);
    tbuf_putc(&src, '\n');
    tv *sv = tr_buf_to_str(r, &src);
    tv *lines = sv ? tr_py_splitlines(r, sv, 0) : NULL;
    if (!lines) {
        tbuf_free(&ind);
        return NULL;
    }
    tbuf b = {0};
    const char *is = ind.p ? ind.p : "";
    if (first) tbuf_put(&b, is, ind.len);
    for (size_t i = 0; i < lines->u.list.n; i++) {
        tv *ln = lines->u.list.items[i];
        if (i) {
            tbuf_putc(&b, '\n');
            if (blank || ln->u.str.len) tbuf_put(&b, is, ind.len);
        }
        tbuf_put(&b, ln->u.str.s, ln->u.str.len);
    }
    tbuf_free(&ind);
    return tr_buf_to_str(r, &b);
}

/* ---- the table ---------------------------------------------------------------- */
/* A filter: the value (str(value) for TF_STR rows) and the call's arguments;
 * f is the name it was called by (aliases share a handler). */
typedef tv *(*tfilter_fn)(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a);

enum {
    TF_STR = 1,     /* a string filter: gets str(value), Markup kept */
    TF_DEFINED = 2, /* Undefined input is an error (int, float) */
};

typedef struct tfilter {
    const char *name;
    tfilter_fn fn;
    unsigned flags;
} tfilter;

static tv *flt_default(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *d = tr_arg(a, 0, "default_value");
    int boolean = get_bool_arg(a, 1, "boolean", 0);
    if (v->type == TV_UNDEF || (boolean && !tv_truthy(v))) return d ? d : tr_str(r, "", 0);
    return v;
}

static tv *flt_length(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    switch (v->type) {
    case TV_UNDEF: return tr_int(r, 0);
    case TV_STR: return tr_int(r, (int64_t)tutf8_len(v->u.str.s, v->u.str.len));
    case TV_LIST:
        if (v->is_gen) {
            tr_err(r, at, "object of type 'generator' has no len()");
            return NULL;
        }
        return tr_int(r, (int64_t)v->u.list.n);
    case TV_DICT:
    case TV_NS: return tr_int(r, (int64_t)v->u.dict.n);
    default: tr_err(r, at, "object of type '%s' has no len()", tv_type_name(v)); return NULL;
    }
}

static tv *flt_string(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    return tr_to_str(r, v);
}

static tv *flt_safe(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    return tr_as_markup(r, tr_to_str(r, v));
}

static tv *flt_tojson(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    /* transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    if (tr_check_nargs(r, at, "tojson", a, 4)) return NULL;
    tv *ea = tr_arg(a, 0, "ensure_ascii"), *ind = tr_arg(a, 1, "indent"), *seps = tr_arg(a, 2, "separators"),
       *sk = tr_arg(a, 3, "sort_keys");
    int indent = -1;
    const char *indent_str = NULL;
    if (ind && ind->type != TV_NONE) {
        if (is_intlike(ind)) indent = (int)(ival(ind) < 0 ? 0 : ival(ind) > 1000 ? 1000 : ival(ind));
        else if (ind->type == TV_STR) indent_str = tarena_strndup(r->a, ind->u.str.s, ind->u.str.len);
        else {
            tr_err(r, at, "tojson indent must be an int or str");
            return NULL;
        }
    }
    const char *isep = (indent >= 0 || indent_str) ? "," : ", ", *ksep = ": ";
    if (seps && seps->type != TV_NONE) {
        if (seps->type != TV_LIST || seps->u.list.n != 2 || seps->u.list.items[0]->type != TV_STR ||
            seps->u.list.items[1]->type != TV_STR) {
            tr_err(r, at, "tojson separators must be a pair of strings");
            return NULL;
        }
        isep = tarena_strndup(r->a, seps->u.list.items[0]->u.str.s, seps->u.list.items[0]->u.str.len);
        ksep = tarena_strndup(r->a, seps->u.list.items[1]->u.str.s, seps->u.list.items[1]->u.str.len);
        if (!isep || !ksep) return tr_oom(r);
    }
    tbuf b = {0};
    b.limit = r->lim.max_output;
    if (tv_write_json(&b, v, ea && tv_truthy(ea), indent, indent_str, isep, ksep, sk && tv_truthy(sk), 0)) {
        tbuf_free(&b);
        if (v->type == TV_UNDEF) return tr_undef_error(r, at, v);
        tr_err(r, at, "Object of type %s is not JSON serializable", tv_type_name(v));
        return NULL;
    }
    return tr_buf_to_str(r, &b);
}

static tv *flt_list(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *l = tr_iter(r, at, v);
    if (!l || l != v) return l;
    tv *c = tr_list(r, l->u.list.n);
    if (c) memcpy(c->u.list.items, l->u.list.items, l->u.list.n * sizeof(tv *));
    return c;
}

static tv *flt_items(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    if (v->type == TV_UNDEF) { /* an empty generator: still true */
        tv *g = tr_list(r, 0);
        if (g) g->is_gen = 1;
        return g;
    }
    if (v->type != TV_DICT) {
        tv *g = tr_list(r, 0);
        if (!g) return NULL;
        g->is_gen = 1;
        g->u.list.err = "Can only get item pairs from a mapping.";
        return g;
    }
    tv fn = {.type = TV_FUNC};
    fn.u.fn.kind = TFN_METHOD;
    fn.u.fn.name = "items";
    fn.u.fn.self = v;
    targs none = {0};
    tv *l = tr_call_method(r, at, &fn, &none);
    if (l) l->is_gen = 1;
    return l;
}

static tv *flt_first_last(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    if (f[0] == 'l' && l->is_gen) {
        tr_err(r, at, "'generator' object is not reversible");
        return NULL;
    }
    if (l->u.list.n == 0) return tr_undef(r, "No %s item, sequence was empty.", f);
    return l->u.list.items[f[0] == 'f' ? 0 : l->u.list.n - 1];
}

static tv *flt_join(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *d = tr_arg(a, 0, "d"), *attribute = tr_arg(a, 1, "attribute");
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    tbuf b = {0};
    for (size_t i = 0; i < l->u.list.n; i++) {
        tv *x = l->u.list.items[i];
        if (attribute && !(x = attr_path(r, at, x, attribute))) {
            tbuf_free(&b);
            return NULL;
        }
        if (i && d) tv_write_str(&b, d);
        tv_write_str(&b, x);
    }
    return tr_buf_to_str(r, &b);
}

static tv *flt_map(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *lz;
    if (tv_truthy(v) && tr_lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
    tv *l = tv_truthy(v) ? tr_iter(r, at, v) : tr_list(r, 0);
    if (!l) return NULL;
    tv *attribute = tr_arg(a, a->npos, "attribute"), *dflt = tr_arg(a, a->npos, "default");
    tv *out = tr_list(r, l->u.list.n);
    if (!out) return NULL;
    for (size_t i = 0; i < l->u.list.n; i++) {
        tv *x = l->u.list.items[i];
        if (attribute) {
            x = attr_path(r, at, x, attribute);
            if (x && x->type == TV_UNDEF && dflt) x = dflt;
        } else {
            tv *fname = tr_arg(a, 0, NULL);
            if (!fname || fname->type != TV_STR) {
                tr_err(r, at, "map requires a filter name or attribute=");
                return NULL;
            }
            char *fn = tarena_strndup(r->a, fname->u.str.s, fname->u.str.len);
            if (!fn) return tr_oom(r);
            targs rest = {a->pos + 1, a->npos - 1, a->kwn, a->kwv, a->nkw};
            x = tr_apply_filter(r, s, at, fn, x, &rest);
        }
        if (!x) return NULL;
        out->u.list.items[i] = x;
    }
    out->is_gen = 1;
    return out;
}

static tv *flt_select(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    return filter_select(r, s, at, v, a, 0, f[0] == 'r');
}

static tv *flt_selectattr(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    return filter_select(r, s, at, v, a, 1, f[0] == 'r');
}

static tv *flt_unique(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *lz;
    if (tr_lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
    int cs = get_bool_arg(a, 0, "case_sensitive", 0);
    tv *attribute = tr_arg(a, 1, "attribute");
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    tv *out = tr_list(r, l->u.list.n), *seen = tr_list(r, l->u.list.n);
    if (!out || !seen) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < l->u.list.n; i++) {
        tv *x = l->u.list.items[i];
        if (attribute && !(x = attr_path(r, at, x, attribute))) return NULL;
        if (!(x = lower_key(r, x, cs))) return NULL;
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++) dup = tv_equal(seen->u.list.items[j], x);
        if (!dup) {
            seen->u.list.items[k] = x;
            out->u.list.items[k++] = l->u.list.items[i];
        }
    }
    out->u.list.n = k;
    out->is_gen = 1;
    return out;
}

static tv *flt_sort(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    return sorted_list(r, at, l, get_bool_arg(a, 0, "reverse", 0), get_bool_arg(a, 1, "case_sensitive", 0),
                       tr_arg(a, 2, "attribute"));
}

static tv *flt_dictsort(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    if (v->type != TV_DICT) {
        tr_err(r, at, "dictsort requires a mapping");
        return NULL;
    }
    int cs = get_bool_arg(a, 0, "case_sensitive", 0);
    tv *by = tr_arg(a, 1, "by");
    int rev = get_bool_arg(a, 2, "reverse", 0);
    int by_value = by && str_eq(by, "value");
    tv fn = {.type = TV_FUNC};
    fn.u.fn.kind = TFN_METHOD;
    fn.u.fn.name = "items";
    fn.u.fn.self = v;
    targs none = {0};
    tv *items = tr_call_method(r, at, &fn, &none);
    if (!items) return NULL;
    tv *idx = tr_int(r, by_value ? 1 : 0);
    return idx ? sorted_list(r, at, items, rev, cs, idx) : NULL;
}

static tv *flt_reverse(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    if (v->type == TV_STR) {
        tv *neg = tr_int(r, -1);
        return neg ? tr_slice(r, at, v, NULL, NULL, neg) : NULL;
    }
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    tv *out = tr_list(r, l->u.list.n);
    if (!out) return NULL;
    for (size_t i = 0; i < l->u.list.n; i++) out->u.list.items[i] = l->u.list.items[l->u.list.n - 1 - i];
    out->is_gen = 1; /* reversed() is an iterator */
    return out;
}

static tv *flt_sum(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *attribute = tr_arg(a, 0, "attribute"), *acc = tr_arg(a, 1, "start");
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    if (!acc && !(acc = tr_int(r, 0))) return NULL;
    for (size_t i = 0; i < l->u.list.n; i++) {
        tv *x = l->u.list.items[i];
        if (attribute && !(x = attr_path(r, at, x, attribute))) return NULL;
        if (!(acc = tr_binop(r, at, TOP_ADD, acc, x))) return NULL;
    }
    return acc;
}

static tv *flt_min_max(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    if (l->u.list.n == 0) return tr_undef(r, "No aggregated item, sequence was empty.");
    tv *sl = sorted_list(r, at, l, f[1] == 'a', get_bool_arg(a, 0, "case_sensitive", 0), tr_arg(a, 1, "attribute"));
    return sl ? sl->u.list.items[0] : NULL;
}

static tv *flt_attr(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *nm = tr_arg(a, 0, "name");
    if (!nm || nm->type != TV_STR) {
        tr_err(r, at, "attr() needs an attribute name");
        return NULL;
    }
    if (v->type == TV_UNDEF) return tr_undef_error(r, at, v);
    char *name = tarena_strndup(r->a, nm->u.str.s, nm->u.str.len);
    if (!name) return tr_oom(r);
    if (v->type == TV_DICT) {
        if (tr_in_names(tr_dict_methods, name, nm->u.str.len)) return tr_method(r, v, name);
        return tr_undef(r, "'dict object' has no attribute '%s'", name);
    }
    return tr_get_attr(r, at, v, name);
}

static tv *flt_escape(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    return tr_html_escape(r, v);
}

static tv *flt_forceescape(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *plain = tr_to_str(r, v);
    if (plain && plain->is_markup && !(plain = tv_str_nocopy(r->a, plain->u.str.s, plain->u.str.len)))
        return tr_oom(r);
    return plain ? tr_html_escape(r, plain) : NULL;
}

static tv *flt_format(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *s0 = tr_to_str(r, v);
    if (!s0) return NULL;
    tv *t;
    if (a->nkw) {
        t = tv_dict(r->a, a->nkw);
        if (!t) return tr_oom(r);
        for (size_t k = 0; k < a->nkw; k++)
            if (tv_dict_set(r->a, t, tv_str(r->a, a->kwn[k], strlen(a->kwn[k])), a->kwv[k])) return tr_oom(r);
    } else {
        t = tr_list(r, a->npos);
        if (!t) return NULL;
        t->is_tuple = 1;
        if (a->npos) memcpy(t->u.list.items, a->pos, a->npos * sizeof(tv *));
    }
    return tr_format_percent(r, at, s0, t);
}

static tv *flt_int(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    return filter_int(r, v, tr_arg(a, 0, "default"));
}

static tv *flt_float(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    return filter_float(r, v, tr_arg(a, 0, "default"));
}

static tv *flt_batch_slice(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *cnt = tr_arg(a, 0, f[0] == 'b' ? "linecount" : "slices"), *fill = tr_arg(a, 1, "fill_with");
    if (!cnt || !is_intlike(cnt)) {
        tr_err(r, at, "%s() needs an integer count", f);
        return NULL;
    }
    if (fill && fill->type == TV_NONE) fill = NULL;
    tv *lz;
    if (f[0] == 'b' && tr_lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
    tv *l = tr_iter(r, at, v);
    if (!l) return NULL;
    int64_t k = ival(cnt), n = (int64_t)l->u.list.n;
    if (f[0] == 's' && k <= 0) {
        tr_err(r, at, "slice count must be positive");
        return NULL;
    }
    if (f[0] == 'b' && k == 0 && n > 0) { /* jinja2 yields [] first: len([]) == 0 */
        tv *out = tr_list(r, 2), *empty = tr_list(r, 0);
        if (!out || !empty) return NULL;
        out->u.list.items[0] = empty;
        out->u.list.items[1] = l;
        out->is_gen = 1;
        return out;
    }
    int64_t nparts = f[0] == 'b' ? (k > 0 ? (n + k - 1) / k : (n > 0)) : k;
    if (nparts > 100000) {
        tr_err(r, at, "too many slices");
        return NULL;
    }
    tv *out = tr_list(r, (size_t)nparts);
    if (!out) return NULL;
    int64_t per = f[0] == 's' ? n / k : 0, extra = f[0] == 's' ? n % k : 0, offset = 0;
    for (int64_t p = 0; p < nparts; p++) {
        int64_t b, e;
        if (f[0] == 'b') {
            b = k > 0 ? p * k : 0;
            e = k > 0 ? (b + k < n ? b + k : n) : n;
        } else {
            b = offset + p * per;
            if (p < extra) offset++;
            e = offset + (p + 1) * per;
        }
        int pad = fill && (f[0] == 'b' ? (k > 0 && e - b < k) : p >= extra);
        int64_t want = f[0] == 'b' ? (pad ? k : e - b) : e - b + pad;
        tv *part = tr_list(r, (size_t)want);
        if (!part) return NULL;
        for (int64_t i = 0; i < want; i++) part->u.list.items[i] = b + i < e ? l->u.list.items[b + i] : fill;
        out->u.list.items[p] = part;
    }
    out->is_gen = 1;
    return out;
}

static tv *flt_abs(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    if (v->type == TV_FLOAT) return tr_float(r, fabs(v->u.f));
    if (is_intlike(v)) {
        if (ival(v) == INT64_MIN) {
            tr_err(r, at, "integer overflow");
            return NULL;
        }
        return tr_int(r, ival(v) < 0 ? -ival(v) : ival(v));
    }
    return tr_type_error(r, at, "abs()", v, NULL);
}

static tv *flt_round(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    tv *pr = tr_arg(a, 0, "precision"), *method = tr_arg(a, 1, "method");
    if (!is_num(v)) return tr_type_error(r, at, "round()", v, NULL);
    if (is_intlike(v) && !(method && (str_eq(method, "floor") || str_eq(method, "ceil"))) &&
        (!pr || (is_intlike(pr) && ival(pr) >= 0)))
        return tr_int(r, ival(v)); /* round(int, n >= 0) is the int itself */
    int64_t p = pr && is_intlike(pr) ? ival(pr) : 0;
    if (p > 300) p = 300;
    if (p < -300) p = -300;
    double x = fval(v), m = pow(10.0, (double)p), y;
    if (method && str_eq(method, "floor")) y = floor(x * m) / m;
    else if (method && str_eq(method, "ceil")) y = ceil(x * m) / m;
    else {
        /* Python round(): half to even, on the decimal value */
        char tmp[400];
        snprintf(tmp, sizeof tmp, "%.*f", (int)(p > 0 ? p : 0), x);
        y = p >= 0 ? strtod(tmp, NULL) : nearbyint(x * m) / m;
    }
    return tr_float(r, y);
}

static tv *flt_trim(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    int mk = sv->is_markup; /* Markup methods return Markup */
    tv *chars = tr_arg(a, 0, "chars");
    tv *x = tr_py_strip(r, sv, chars, 3);
    return mk ? tr_as_markup(r, x) : x;
}

static tv *flt_upper(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    int mk = sv->is_markup; /* Markup methods return Markup */
    return mk ? tr_as_markup(r, tr_py_case(r, sv, 1)) : tr_py_case(r, sv, 1);
}

static tv *flt_lower(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    int mk = sv->is_markup; /* Markup methods return Markup */
    return mk ? tr_as_markup(r, tr_py_case(r, sv, 0)) : tr_py_case(r, sv, 0);
}

static tv *flt_capitalize(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    int mk = sv->is_markup; /* Markup methods return Markup */
    return mk ? tr_as_markup(r, tr_py_case(r, sv, 2)) : tr_py_case(r, sv, 2);
}

static tv *flt_title(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    /* Jinja: split on runs of [-\s({[<], capitalize each piece */
    tbuf b = {0};
    const char *p = sv->u.str.s;
    size_t n = sv->u.str.len, i = 0;
    int at_start = 1;
    while (i < n) {
        size_t st = i;
        uint32_t c = tutf8_next(p, n, &i);
        int sep = tpy_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        (void)st;
        if (sep) {
            tr_put_case(&b, c, at_start ? 1 : 0);
            at_start = 1;
        } else {
            tr_put_case(&b, c, at_start ? 1 : 0);
            at_start = 0;
        }
    }
    return tr_buf_to_str(r, &b);
}

static tv *flt_replace(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    tv *o = tr_arg(a, 0, "old"), *nw = tr_arg(a, 1, "new"), *cnt = tr_arg(a, 2, "count");
    if (!o || !nw) {
        tr_err(r, at, "replace filter needs old and new");
        return NULL;
    }
    tv *os = tr_to_str(r, o), *ns = tr_to_str(r, nw);
    if (!os || !ns) return NULL;
    return tr_py_replace(r, at, sv, os, ns, cnt && is_intlike(cnt) ? ival(cnt) : -1);
}

static tv *flt_indent(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    if (v->type != TV_STR) { /* jinja2 does s += "\n" */
        if (v->type == TV_UNDEF) return tr_undef_error(r, at, v);
        tr_err(r, at, "unsupported operand type(s) for +=: '%s' and 'str'", tv_type_name(v));
        return NULL;
    }
    return filter_indent(r, at, v, a);
}

static tv *flt_truncate(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    /* jinja2: truncate(s, length=255, killwords=False, end='...', leeway=5) */
    tv *lv = tr_arg(a, 0, "length"), *end = tr_arg(a, 2, "end"), *lw = tr_arg(a, 3, "leeway");
    int kill = get_bool_arg(a, 1, "killwords", 0);
    int64_t length = lv && is_intlike(lv) ? ival(lv) : 255, leeway = lw && is_intlike(lw) ? ival(lw) : 5;
    tv *e = end ? tr_to_str(r, end) : tr_str(r, "...", 3);
    if (!e) return NULL;
    int64_t elen = (int64_t)tutf8_len(e->u.str.s, e->u.str.len), n = (int64_t)tutf8_len(sv->u.str.s, sv->u.str.len);
    if (length < elen) {
        tr_err(r, at, "expected length >= %lld, got %lld", (long long)elen, (long long)length);
        return NULL;
    }
    if (leeway < 0) {
        tr_err(r, at, "expected leeway >= 0, got %lld", (long long)leeway);
        return NULL;
    }
    if (n <= length + leeway) return sv;
    size_t cut = tr_cp_offset(sv, length - elen);
    size_t keep = cut;
    if (!kill) { /* drop the last partial word: rsplit(" ", 1)[0] */
        const char *sp = NULL;
        for (size_t k = cut; k-- > 0;)
            if (sv->u.str.s[k] == ' ') {
                sp = sv->u.str.s + k;
                break;
            }
        if (sp) keep = (size_t)(sp - sv->u.str.s);
    }
    tbuf b = {0};
    tbuf_put(&b, sv->u.str.s, keep);
    tbuf_put(&b, e->u.str.s, e->u.str.len);
    return tr_buf_to_str(r, &b);
}

static tv *flt_wordcount(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    size_t i = 0, n = sv->u.str.len;
    int64_t words = 0;
    int in = 0;
    while (i < n) {
        uint32_t c = tutf8_next(sv->u.str.s, n, &i);
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
        int w = c == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
                (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
        if (w && !in) words++;
        in = w;
    }
    return tr_int(r, words);
}

static tv *flt_center(trender *r, tscope *s, const tnode *at, const char *f, tv *sv, targs *a)
{
    tv *w = tr_arg(a, 0, "width");
    int64_t width = w && is_intlike(w) ? ival(w) : 80;
    int64_t len = (int64_t)tutf8_len(sv->u.str.s, sv->u.str.len);
    if (width > 100000) width = 100000;
    if (width <= len) return sv;
    int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    tbuf b = {0};
    for (int64_t i = 0; i < left; i++) tbuf_putc(&b, ' ');
    tbuf_put(&b, sv->u.str.s, sv->u.str.len);
    for (int64_t i = 0; i < pad - left; i++) tbuf_putc(&b, ' ');
    return tr_buf_to_str(r, &b);
}

/* sorted by name (strcmp order): tr_filter_find bisects it */
static const tfilter FILTERS[] = {
    {"abs", flt_abs, 0},
    {"attr", flt_attr, 0},
    {"batch", flt_batch_slice, 0},
    {"capitalize", flt_capitalize, TF_STR},
    {"center", flt_center, TF_STR},
    {"count", flt_length, 0},
    {"d", flt_default, 0},
    {"default", flt_default, 0},
    {"dictsort", flt_dictsort, 0},
    {"e", flt_escape, 0},
    {"escape", flt_escape, 0},
    {"first", flt_first_last, 0},
    {"float", flt_float, TF_DEFINED},
    {"forceescape", flt_forceescape, 0},
    {"format", flt_format, 0},
    {"indent", flt_indent, 0},
    {"int", flt_int, TF_DEFINED},
    {"items", flt_items, 0},
    {"join", flt_join, 0},
    {"last", flt_first_last, 0},
    {"length", flt_length, 0},
    {"list", flt_list, 0},
    {"lower", flt_lower, TF_STR},
    {"map", flt_map, 0},
    {"max", flt_min_max, 0},
    {"min", flt_min_max, 0},
    {"reject", flt_select, 0},
    {"rejectattr", flt_selectattr, 0},
    {"replace", flt_replace, TF_STR},
    {"reverse", flt_reverse, 0},
    {"round", flt_round, 0},
    {"safe", flt_safe, 0},
    {"select", flt_select, 0},
    {"selectattr", flt_selectattr, 0},
    {"slice", flt_batch_slice, 0},
    {"sort", flt_sort, 0},
    {"string", flt_string, 0},
    {"sum", flt_sum, 0},
    {"title", flt_title, TF_STR},
    {"tojson", flt_tojson, 0},
    {"trim", flt_trim, TF_STR},
    {"truncate", flt_truncate, TF_STR},
    {"unique", flt_unique, 0},
    {"upper", flt_upper, TF_STR},
    {"wordcount", flt_wordcount, TF_STR},
};

static int filter_cmp(const void *key, const void *row)
{
    return strcmp((const char *)key, ((const tfilter *)row)->name);
}

static const tfilter *filter_find(const char *name)
{
    return bsearch(name, FILTERS, sizeof FILTERS / sizeof FILTERS[0], sizeof FILTERS[0], filter_cmp);
}

int tr_filter_known(const char *name) { return filter_find(name) != NULL; }

tv *tr_apply_filter(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    if (tr_step(r, at)) return NULL;
    const tfilter *row = filter_find(f);
    if (row && (row->flags & TF_DEFINED) && v->type == TV_UNDEF) return tr_undef_error(r, at, v);
    if (!row || (row->flags & TF_STR)) {
        /* string filters get str(value); an unknown name (map('name')) is
         * reported after the same conversion, as before the table */
        tv *sv = tr_to_str(r, v);
        if (!sv) return NULL;
        if (!row) {
            tr_err(r, at, "filter '%s' is not supported by sglc's template engine", f);
            return NULL;
        }
        v = sv;
    }
    return row->fn(r, s, at, f, v, a);
}
