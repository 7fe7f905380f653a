/* template_ops — operations on values: attribute / item / slice access
 * (the sandbox's getattr-then-getitem order, so `d.items` is the method and
 * `d.role` the key), arithmetic with Python semantics, comparisons, `in`,
 * and `%` formatting.
 *
 * DESIGN: every operation follows CPython's results and error messages
 * (floor division and modulo signs, str/list repetition, Markup + str
 * escaping the str).  Uses template_strings and template_rt. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template_rt.h"

/* method names by receiver type (attribute lookup finds these first) */
static const char *const STR_METHODS[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "find", "rfind", "index", "rindex", "count", "join",
    "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal",
    "splitlines", "swapcase", "casefold", "format", "center", "ljust", "rjust", "zfill",
    "partition", "rpartition", "removeprefix", "removesuffix", "encode", "expandtabs", "istitle",
    "isidentifier", "isprintable", "isascii", "translate", "maketrans", "format_map", NULL};
const char *const tr_dict_methods[] = {"get", "items", "keys", "values", "copy", "clear",
                                           "pop", "popitem", "setdefault", "update", "fromkeys", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", "append", "extend", "insert",
                                           "pop", "remove", "reverse", "sort", "clear", NULL};


int tr_in_names(const char *const *names, const char *s, size_t n)
{
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) return 1;
    return 0;
}

tv *tr_method(trender *r, tv *self, const char *name)
{
    tv *f = tarena_alloc(r->a, sizeof *f);
    if (!f) return tr_oom(r);
    f->type = TV_FUNC;
    f->u.fn.kind = TFN_METHOD;
    f->u.fn.name = name;
    f->u.fn.self = self;
    return f;
}

static tv *loop_attr(trender *r, tv *lv, const char *name)
{
    tloop *l = lv->u.loop;
    if (!strcmp(name, "index")) return tr_int(r, l->index0 + 1);
    if (!strcmp(name, "index0")) return tr_int(r, l->index0);
    if (!strcmp(name, "revindex")) return tr_int(r, l->length - l->index0);
    if (!strcmp(name, "revindex0")) return tr_int(r, l->length - l->index0 - 1);
    if (!strcmp(name, "first")) return tv_bool(l->index0 == 0);
    if (!strcmp(name, "last")) return tv_bool(l->index0 == l->length - 1);
    if (!strcmp(name, "length")) return tr_int(r, l->length);
    if (!strcmp(name, "depth")) return tr_int(r, l->depth);
    if (!strcmp(name, "depth0")) return tr_int(r, l->depth - 1);
    if (!strcmp(name, "previtem"))
        return l->index0 > 0 ? l->items[l->index0 - 1] : tr_undef(r, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return l->index0 + 1 < l->length ? l->items[l->index0 + 1] : tr_undef(r, "there is no next item");
    if (!strcmp(name, "cycle")) return tr_method(r, lv, "cycle");
    if (!strcmp(name, "changed")) return tr_method(r, lv, "changed");
    return tr_undef(r, "'LoopContext' object has no attribute '%s'", name);
}

tv *tr_get_attr(trender *r, const tnode *at, tv *obj, const char *name)
{
    size_t nl = strlen(name);
    switch (obj->type) {
    case TV_UNDEF: return tr_undef_error(r, at, obj);
    case TV_DICT: {
        if (tr_in_names(tr_dict_methods, name, nl)) return tr_method(r, obj, name);
        tv *v = tv_dict_get(obj, name, nl);
        return v ? v : tr_undef(r, "'dict object' has no attribute '%s'", name);
    }
    case TV_NS: {
        if (tv_dict_get(obj, "\x01items", 6) && (!strcmp(name, "next") || !strcmp(name, "reset")))
            return tr_method(r, obj, name); /* a cycler */
        tv *v = tv_dict_get(obj, name, nl);
        return v ? v : tr_undef(r, "'Namespace' object has no attribute '%s'", name);
    }
    case TV_STR:
        if (tr_in_names(STR_METHODS, name, nl)) return tr_method(r, obj, name);
        return tr_undef(r, "'str object' has no attribute '%s'", name);
    case TV_LIST:
        if (!obj->is_gen && tr_in_names(LIST_METHODS, name, nl)) return tr_method(r, obj, name);
        return tr_undef(r, "'%s object' has no attribute '%s'", tv_type_name(obj), name);
    case TV_LOOP: return loop_attr(r, obj, name);
    default: return tr_undef(r, "'%s object' has no attribute '%s'", tv_type_name(obj), name);
    }
}

tv *tr_get_item(trender *r, const tnode *at, tv *obj, tv *key)
{
    switch (obj->type) {
    case TV_UNDEF: return tr_undef_error(r, at, obj);
    case TV_DICT:
    case TV_NS: {
        tv *v = tv_dict_getv(obj, key);
        if (v) return v;
        break;
    }
    case TV_LIST:
        if (obj->is_gen) return tr_undef(r, "'generator' object is not subscriptable");
        if (is_intlike(key)) {
            int64_t i = ival(key), n = (int64_t)obj->u.list.n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj->u.list.items[i];
            return tr_undef(r, "%s object has no element %lld", tv_type_name(obj), (long long)ival(key));
        }
        break;
    case TV_STR:
        if (is_intlike(key)) {
            int64_t n = (int64_t)tutf8_len(obj->u.str.s, obj->u.str.len), i = ival(key);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t b = tr_cp_offset(obj, i), e = b;
                tutf8_next(obj->u.str.s, obj->u.str.len, &e);
                return tr_str(r, obj->u.str.s + b, e - b);
            }
            return tr_undef(r, "str object has no element %lld", (long long)ival(key));
        }
        break;
    default: break;
    }
    if (key->type == TV_STR) {
        char *nm = tarena_strndup(r->a, key->u.str.s, key->u.str.len);
        if (!nm) return tr_oom(r);
        if (obj->type == TV_DICT) {
            if (tr_in_names(tr_dict_methods, nm, key->u.str.len)) return tr_method(r, obj, nm);
            return tr_undef(r, "'dict object' has no attribute '%s'", nm);
        }
        return tr_get_attr(r, at, obj, nm);
    }
    tbuf b = {0};
    tv_write_repr(&b, key);
    tv *u = tr_undef(r, "'%s object' has no attribute '%s'", tv_type_name(obj), b.p ? b.p : "");
    tbuf_free(&b);
    return u;
}

/* Python slice.indices for length n */
static int slice_indices(trender *r, const tnode *at, tv *a, tv *b, tv *c, int64_t n, int64_t *start,
                         int64_t *stop, int64_t *stepv)
{
    int64_t st = 1;
    if (c && c->type != TV_NONE) {
        if (!is_intlike(c)) {
            tr_err(r, at, "slice indices must be integers or None");
            return -1;
        }
        st = ival(c);
        if (st == 0) {
            tr_err(r, at, "slice step cannot be zero");
            return -1;
        }
    }
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? n - 1 : n;
    int64_t s0 = st < 0 ? hi : lo, s1 = st < 0 ? lo : hi;
    tv *ab[2] = {a, b};
    int64_t *outp[2] = {&s0, &s1};
    for (int k = 0; k < 2; k++) {
        tv *x = ab[k];
        if (!x || x->type == TV_NONE) continue;
        if (!is_intlike(x)) {
            tr_err(r, at, "slice indices must be integers or None");
            return -1;
        }
        int64_t v = ival(x);
        if (v < 0) {
            v += n;
            if (v < lo) v = lo;
        } else if (v > hi) v = hi;
        *outp[k] = v;
    }
    *start = s0;
    *stop = s1;
    *stepv = st;
    return 0;
}

tv *tr_slice(trender *r, const tnode *at, tv *obj, tv *a, tv *b, tv *c)
{
    if (obj->type == TV_UNDEF) return tr_undef_error(r, at, obj);
    if (obj->type == TV_LIST && obj->is_gen) {
        tr_err(r, at, "'generator' object is not subscriptable");
        return NULL;
    }
    int64_t n;
    if (obj->type == TV_LIST) n = (int64_t)obj->u.list.n;
    else if (obj->type == TV_STR) n = (int64_t)tutf8_len(obj->u.str.s, obj->u.str.len);
    else { /* jinja2 compiles slices to plain Python subscripts: a TypeError */
        tr_err(r, at, "'%s' object is not subscriptable", tv_type_name(obj));
        return NULL;
    }
    int64_t st, sp, stp;
    if (slice_indices(r, at, a, b, c, n, &st, &sp, &stp)) return NULL;
    int64_t cnt = 0;
    if (stp > 0 && sp > st) cnt = (sp - st + stp - 1) / stp;
    if (stp < 0 && st > sp) cnt = (st - sp + (-stp) - 1) / (-stp);
    if (obj->type == TV_LIST) {
        tv *l = tr_list(r, (size_t)cnt);
        if (!l) return NULL;
        l->is_tuple = obj->is_tuple;
        for (int64_t k = 0; k < cnt; k++) l->u.list.items[k] = obj->u.list.items[st + k * stp];
        return l;
    }
    /* string: map code point index -> byte offset once */
    size_t *offs = malloc(((size_t)n + 1) * sizeof *offs); /* (n+1) byte offsets */
    if (!offs) return tr_oom(r);
    size_t i = 0;
    for (int64_t k = 0; k < n; k++) {
        offs[k] = i;
        tutf8_next(obj->u.str.s, obj->u.str.len, &i);
    }
    offs[n] = obj->u.str.len;
    tbuf bf = {0};
    if (stp == 1 && cnt > 0) tbuf_put(&bf, obj->u.str.s + offs[st], offs[st + cnt] - offs[st]);
    else
        for (int64_t k = 0; k < cnt; k++) {
            int64_t x = st + k * stp;
            tbuf_put(&bf, obj->u.str.s + offs[x], offs[x + 1] - offs[x]);
        }
    free(offs);
    return tr_buf_to_str(r, &bf);
}

/* ---- operators ----------------------------------------------------------------- */
tv *tr_type_error(trender *r, const tnode *at, const char *op, tv *a, tv *b)
{
    if (a->type == TV_UNDEF) return tr_undef_error(r, at, a);
    if (b && b->type == TV_UNDEF) return tr_undef_error(r, at, b);
    if (b)
        tr_err(r, at, "unsupported operand type(s) for %s: '%s' and '%s'", op, tv_type_name(a), tv_type_name(b));
    else tr_err(r, at, "bad operand type for unary %s: '%s'", op, tv_type_name(a));
    return NULL;
}

static tv *repeat(trender *r, const tnode *at, tv *seq, int64_t k)
{
    if (k < 0) k = 0;
    if (seq->type == TV_STR) {
        if (seq->u.str.len && (uint64_t)k > r->lim.max_output / seq->u.str.len) {
            tr_err(r, at, "string repetition too large");
            return NULL;
        }
        tbuf b = {0};
        for (int64_t i = 0; i < k; i++) tbuf_put(&b, seq->u.str.s, seq->u.str.len);
        return tr_buf_to_str(r, &b);
    }
    if (seq->u.list.n && (uint64_t)k > (r->lim.max_memory / 8) / seq->u.list.n) {
        tr_err(r, at, "list repetition too large");
        return NULL;
    }
    tv *l = tr_list(r, seq->u.list.n * (size_t)k);
    if (!l) return NULL;
    l->is_tuple = seq->is_tuple;
    for (int64_t i = 0; i < k; i++)
        memcpy(l->u.list.items + (size_t)i * seq->u.list.n, seq->u.list.items, seq->u.list.n * sizeof(tv *));
    return l;
}

static double py_fmod(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

/* Python float ** float: errors where CPython raises instead of giving inf
 * or a complex number */
static tv *float_pow(trender *r, const tnode *at, double x, double y)
{
    if (x == 0 && y < 0) {
        tr_err(r, at, "0.0 cannot be raised to a negative power");
        return NULL;
    }
    if (x < 0 && isfinite(y) && y != floor(y)) {
        tr_err(r, at, "negative number raised to a fractional power gives a complex number (not supported)");
        return NULL;
    }
    double z = pow(x, y);
    if (isinf(z) && isfinite(x) && isfinite(y)) {
        tr_err(r, at, "(34, 'Numerical result out of range')");
        return NULL;
    }
    return tr_float(r, z);
}

tv *tr_binop(trender *r, const tnode *at, int op, tv *a, tv *b)
{
    static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
    /* str % Undefined: Python treats the Undefined (it has __getitem__) as the argument */
    if (op == TOP_MOD && a->type == TV_STR && b->type == TV_UNDEF) return tr_format_percent(r, at, a, b);
    if (a->type == TV_UNDEF) return tr_undef_error(r, at, a);
    if (b->type == TV_UNDEF) return tr_undef_error(r, at, b);
    if (is_num(a) && is_num(b)) {
        int fl = a->type == TV_FLOAT || b->type == TV_FLOAT;
        if (!fl) {
            int64_t x = ival(a), y = ival(b), z;
            switch (op) {
            case TOP_ADD:
                if (__builtin_add_overflow(x, y, &z)) break;
                return tr_int(r, z);
            case TOP_SUB:
                if (__builtin_sub_overflow(x, y, &z)) break;
                return tr_int(r, z);
            case TOP_MUL:
                if (__builtin_mul_overflow(x, y, &z)) break;
                return tr_int(r, z);
            case TOP_DIV:
                if (y == 0) goto zerodiv;
                return tr_float(r, (double)x / (double)y);
            case TOP_FLOORDIV:
            case TOP_MOD: {
                if (y == 0) goto zerodiv;
                if (x == INT64_MIN && y == -1) break;
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return tr_int(r, op == TOP_MOD ? m : q);
            }
            case TOP_POW: {
                if (y < 0) return float_pow(r, at, (double)x, (double)y);
                int64_t res = 1, base = x;
                int64_t e = y;
                int ovf = 0;
                while (e > 0 && !ovf) {
                    if (e & 1) ovf |= __builtin_mul_overflow(res, base, &res);
                    e >>= 1;
                    if (e) ovf |= __builtin_mul_overflow(base, base, &base);
                }
                if (ovf) break;
                return tr_int(r, res);
            }
            }
            tr_err(r, at, "integer overflow in '%s' (sglc integers are 64-bit)", names[op]);
            return NULL;
        }
        double x = fval(a), y = fval(b);
        switch (op) {
        case TOP_ADD: return tr_float(r, x + y);
        case TOP_SUB: return tr_float(r, x - y);
        case TOP_MUL: return tr_float(r, x * y);
        case TOP_DIV:
            if (y == 0) goto zerodiv;
            return tr_float(r, x / y);
        case TOP_FLOORDIV: {
            if (y == 0) goto zerodiv;
            /* CPython's float floor division (via fmod, not floor(x / y)) */
            double mod = fmod(x, y), div = (x - mod) / y;
            if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
            double fd = floor(div);
            if (div - fd > 0.5) fd += 1.0;
            if (div == 0) fd = copysign(0.0, x / y);
            return tr_float(r, fd);
        }
        case TOP_MOD: {
            if (y == 0) goto zerodiv;
            double m = py_fmod(x, y);
            if (m == 0) m = copysign(0.0, y);
            return tr_float(r, m);
        }
        case TOP_POW: return float_pow(r, at, x, y);
        }
    }
    if (op == TOP_ADD) {
        if (a->type == TV_STR && b->type == TV_STR && (a->is_markup || b->is_markup)) {
            /* Markup + str escapes the plain operand */
            tv *x = tr_html_escape(r, a), *y = x ? tr_html_escape(r, b) : NULL;
            if (!y) return NULL;
            tbuf bf = {0};
            tbuf_put(&bf, x->u.str.s, x->u.str.len);
            tbuf_put(&bf, y->u.str.s, y->u.str.len);
            return tr_as_markup(r, tr_buf_to_str(r, &bf));
        }
        if (a->type == TV_STR && b->type == TV_STR) {
            tbuf bf = {0};
            tbuf_put(&bf, a->u.str.s, a->u.str.len);
            tbuf_put(&bf, b->u.str.s, b->u.str.len);
            return tr_buf_to_str(r, &bf);
        }
        if (a->type == TV_LIST && b->type == TV_LIST && a->is_tuple == b->is_tuple && !a->is_gen &&
            !b->is_gen) {
            tv *l = tr_list(r, a->u.list.n + b->u.list.n);
            if (!l) return NULL;
            l->is_tuple = a->is_tuple;
            memcpy(l->u.list.items, a->u.list.items, a->u.list.n * sizeof(tv *));
            memcpy(l->u.list.items + a->u.list.n, b->u.list.items, b->u.list.n * sizeof(tv *));
            return l;
        }
        if (a->type == TV_STR) {
            tr_err(r, at, "can only concatenate str (not \"%s\") to str", tv_type_name(b));
            return NULL;
        }
    }
    if (op == TOP_MUL) {
        if ((a->type == TV_STR || (a->type == TV_LIST && !a->is_gen)) && is_intlike(b)) {
            tv *x = repeat(r, at, a, ival(b));
            return a->type == TV_STR && a->is_markup ? tr_as_markup(r, x) : x;
        }
        if ((b->type == TV_STR || (b->type == TV_LIST && !b->is_gen)) && is_intlike(a)) {
            tv *x = repeat(r, at, b, ival(a));
            return b->type == TV_STR && b->is_markup ? tr_as_markup(r, x) : x;
        }
    }
    if (op == TOP_MOD && a->type == TV_STR) return tr_format_percent(r, at, a, b);
    return tr_type_error(r, at, names[op], a, b);
zerodiv:
    tr_err(r, at, "division by zero");
    return NULL;
}

int tr_contains(trender *r, const tnode *at, tv *item, tv *seq)
{
    switch (seq->type) {
    case TV_STR:
        if (item->type != TV_STR) {
            if (item->type == TV_UNDEF) tr_undef_error(r, at, item);
            else tr_err(r, at, "'in <string>' requires string as left operand, not %s", tv_type_name(item));
            return -1;
        }
        return tr_memmem(seq->u.str.s, seq->u.str.len, item->u.str.s, item->u.str.len) != NULL;
    case TV_LIST:
        if (seq->u.list.err) {
            tr_err(r, at, "%s", seq->u.list.err);
            return -1;
        }
        for (size_t i = 0; i < seq->u.list.n; i++)
            if (tv_equal(seq->u.list.items[i], item)) return 1;
        return 0;
    case TV_DICT:
    case TV_NS:
        if ((item->type == TV_LIST && !item->is_tuple) || item->type == TV_DICT || item->type == TV_NS) {
            tr_err(r, at, "unhashable type: '%s'", tv_type_name(item));
            return -1;
        }
        return tv_dict_getv(seq, item) != NULL;
    case TV_UNDEF: return 0;
    default: tr_err(r, at, "argument of type '%s' is not iterable", tv_type_name(seq)); return -1;
    }
}

tv *tr_compare(trender *r, const tnode *at, int op, tv *a, tv *b)
{
    int c;
    switch (op) {
    case TOP_EQ: return tv_bool(tv_equal(a, b));
    case TOP_NE: return tv_bool(!tv_equal(a, b));
    case TOP_IN:
    case TOP_NOTIN: {
        int k = tr_contains(r, at, a, b);
        if (k < 0) return NULL;
        return tv_bool(op == TOP_IN ? k : !k);
    }
    default:
        if (a->type == TV_UNDEF) return tr_undef_error(r, at, a);
        if (b->type == TV_UNDEF) return tr_undef_error(r, at, b);
        if (tv_compare(a, b, &c) < 0) {
            static const char *s[] = {"<", "<=", ">", ">="};
            tr_err(r, at, "'%s' not supported between instances of '%s' and '%s'", s[op - TOP_LT],
                 tv_type_name(a), tv_type_name(b));
            return NULL;
        }
        if (c == 2) return &tv_false_v;
        switch (op) {
        case TOP_LT: return tv_bool(c < 0);
        case TOP_LE: return tv_bool(c <= 0);
        case TOP_GT: return tv_bool(c > 0);
        default: return tv_bool(c >= 0);
        }
    }
}

/* printf-style "fmt % args" (also the |format filter) */
tv *tr_format_percent(trender *r, const tnode *at, tv *fmt, tv *args)
{
    tv *one[1] = {args};
    tv **items = one;
    size_t n = 1, k = 0;
    tv *mapping = NULL;
    if (args->type == TV_LIST && args->is_tuple) {
        items = args->u.list.items;
        n = args->u.list.n;
    } else if (args->type == TV_DICT) mapping = args;
    tbuf b = {0};
    const char *p = fmt->u.str.s;
    size_t len = fmt->u.str.len;
    for (size_t i = 0; i < len; i++) {
        if (p[i] != '%') {
            tbuf_putc(&b, p[i]);
            continue;
        }
        if (++i >= len) goto bad;
        tv *v = NULL;
        if (p[i] == '(') {
            size_t e = i;
            while (e < len && p[e] != ')') e++;
            if (e >= len || !mapping) goto bad;
            v = tv_dict_get(mapping, p + i + 1, e - i - 1);
            if (!v) {
                tbuf_free(&b);
                tr_err(r, at, "format key '%.*s' not found", (int)(e - i - 1), p + i + 1);
                return NULL;
            }
            i = e + 1;
            if (i >= len) goto bad;
        }
        /* %[flags][width][.precision]conv, validated here: the spec goes to
         * vsnprintf (width <= 9999, precision <= 300, as the {} path) */
        char spec[32];
        size_t sl = 0;
        spec[sl++] = '%';
        for (; i < len && strchr("-+ #0", p[i]); i++) /* repeats allowed, as Python; kept once */
            if (!memchr(spec + 1, p[i], sl - 1)) spec[sl++] = p[i];
        for (int d = 0; i < len && p[i] >= '0' && p[i] <= '9'; d++) {
            if (d >= 4) goto bad;
            spec[sl++] = p[i++];
        }
        if (i < len && p[i] == '.') {
            spec[sl++] = p[i++];
            int prec = 0;
            for (int d = 0; i < len && p[i] >= '0' && p[i] <= '9'; d++) {
                prec = prec * 10 + (p[i] - '0');
                if (d >= 3 || prec > 300) goto bad;
                spec[sl++] = p[i++];
            }
        }
        if (i >= len) goto bad;
        char conv = p[i];
        if (conv == '%') {
            tbuf_putc(&b, '%');
            continue;
        }
        if (!v) {
            if (k >= n) {
                tbuf_free(&b);
                tr_err(r, at, "not enough arguments for format string");
                return NULL;
            }
            v = items[k++];
        }
        if (conv == 's' || conv == 'r') {
            tbuf t = {0};
            if (conv == 's') tv_write_str(&t, v);
            else tv_write_repr(&t, v);
            spec[sl++] = 's';
            spec[sl] = 0;
            if (sl == 2) tbuf_put(&b, t.p ? t.p : "", t.len);
            else tbuf_printf(&b, spec, t.p ? t.p : "");
            tbuf_free(&t);
        } else if (strchr("dixXo", conv)) {
            if (!is_num(v)) goto typeerr;
            spec[sl++] = 'l';
            spec[sl++] = 'l';
            spec[sl++] = conv == 'i' ? 'd' : conv;
            spec[sl] = 0;
            tbuf_printf(&b, spec, (long long)(v->type == TV_FLOAT ? (int64_t)v->u.f : ival(v)));
        } else if (strchr("feEgG", conv)) {
            if (!is_num(v)) goto typeerr;
            spec[sl++] = conv;
            spec[sl] = 0;
            tbuf_printf(&b, spec, fval(v));
        } else goto bad;
    }
    /* a lone unused argument is an error unless Python would treat it as a
     * mapping (it has __getitem__ and is not a str/tuple) */
    int lone_mapping = n == 1 && !(args->type == TV_LIST && args->is_tuple) &&
                       (args->type == TV_LIST || args->type == TV_UNDEF || args->type == TV_NS);
    if (!mapping && k < n && !lone_mapping) {
        tbuf_free(&b);
        tr_err(r, at, "not all arguments converted during string formatting");
        return NULL;
    }
    return tr_buf_to_str(r, &b);
bad:
    tbuf_free(&b);
    tr_err(r, at, "unsupported format string");
    return NULL;
typeerr:
    tbuf_free(&b);
    tr_err(r, at, "format requires a number, not %s", tv_type_name(items[k ? k - 1 : 0]));
    return NULL;
}
