/* template_methods — methods callable on values: str (strip, split,
 * format, is*, ...), dict (get, items, keys, values, copy), list (index,
 * count), loop.cycle/changed, cycler.next/reset, joiner().
 *
 * DESIGN: a method value (TFN_METHOD) carries its receiver; calling it lands
 * in tr_call_method.  Mutating methods raise the sandbox's error (the
 * environment transformers uses is immutable).  str.format is Python's
 * format mini-language without nested fields or grouping.  Uses
 * template_ops, template_strings and template_rt. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "template/template_rt.h"

/* ---- str.format -------------------------------------------------------------- */
/* Pad `body` (UTF-8, `w` code points already) to `width` with fill/align. */
static void pad_field(tbuf *b, const char *body, size_t blen, int64_t w, int64_t width, uint32_t fill,
                      char align, size_t sign_len)
{
    int64_t pad = width > w ? width - w : 0;
    int64_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
    int64_t right = pad - left;
    if (align == '=') { /* padding after the sign */
        tbuf_put(b, body, sign_len);
        for (int64_t i = 0; i < pad; i++) tutf8_put(b, fill);
        tbuf_put(b, body + sign_len, blen - sign_len);
        return;
    }
    for (int64_t i = 0; i < left; i++) tutf8_put(b, fill);
    tbuf_put(b, body, blen);
    for (int64_t i = 0; i < right; i++) tutf8_put(b, fill);
}

/* Apply a format spec ([[fill]align][sign][0][width][.precision][type]) to v. */
static int format_field(trender *r, const tnode *at, tbuf *b, tv *v, const char *spec, size_t sl)
{
    size_t i = 0;
    uint32_t fill = ' ';
    char align = 0, sign = '-', type = 0;
    int64_t width = -1, prec = -1;
    if (sl == 0) {
        tv_write_str(b, v);
        return 0;
    }
    size_t j = 0;
    uint32_t c0 = tutf8_next(spec, sl, &j);
    if (j < sl && strchr("<>^=", spec[j])) {
        fill = c0;
        align = spec[j];
        i = j + 1;
    } else if (strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    if (i < sl && strchr("+- ", spec[i])) sign = spec[i++];
    if (i < sl && spec[i] == '0') {
        if (!align) {
            fill = '0';
            align = '=';
        }
        i++;
    }
    while (i < sl && spec[i] >= '0' && spec[i] <= '9') {
        width = (width < 0 ? 0 : width) * 10 + (spec[i++] - '0');
        if (width > 100000) goto bad;
    }
    if (i < sl && spec[i] == '.') {
        prec = 0;
        i++;
        while (i < sl && spec[i] >= '0' && spec[i] <= '9') {
            prec = prec * 10 + (spec[i++] - '0');
            if (prec > 300) goto bad;
        }
    }
    if (i < sl) type = spec[i++];
    if (i != sl) goto bad;
    tbuf body = {0};
    size_t sign_len = 0;
    if (v->type == TV_STR && (!type || type == 's')) {
        size_t n = v->u.str.len, k = 0;
        int64_t cps = 0;
        while (k < n && (prec < 0 || cps < prec)) {
            tutf8_next(v->u.str.s, n, &k);
            cps++;
        }
        pad_field(b, v->u.str.s, k, cps, width, fill, align ? align : '<', 0);
        return 0;
    }
    if (!is_num(v) || (v->type != TV_FLOAT && type && !strchr("dxXobeEfFgG%", type)) ||
        (v->type == TV_FLOAT && type && strchr("dxXob", type)) || (type == 's')) {
        tr_err(r, at, "unsupported format string passed to %s.__format__", tv_type_name(v));
        return -1;
    }
    int is_float = v->type == TV_FLOAT || (type && strchr("eEfFgG%", type));
    double f = fval(v);
    int neg = is_float ? (f < 0 || (f == 0 && signbit(f))) : ival(v) < 0;
    if (neg) tbuf_putc(&body, '-');
    else if (sign == '+') tbuf_putc(&body, '+');
    else if (sign == ' ') tbuf_putc(&body, ' ');
    sign_len = body.len;
    if (!is_float) {
        int64_t x = ival(v);
        uint64_t ux = neg ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
        if (v->type == TV_BOOL && !type) tbuf_puts(&body, v->u.b ? "True" : "False");
        else if (type == 'x') tbuf_printf(&body, "%llx", (unsigned long long)ux);
        else if (type == 'X') tbuf_printf(&body, "%llX", (unsigned long long)ux);
        else if (type == 'o') tbuf_printf(&body, "%llo", (unsigned long long)ux);
        else if (type == 'b') {
            char tmp[70];
            int k = 0;
            do {
                tmp[k++] = (char)('0' + (ux & 1));
                ux >>= 1;
            } while (ux);
            while (k) tbuf_putc(&body, tmp[--k]);
        } else tbuf_printf(&body, "%llu", (unsigned long long)ux);
    } else {
        double af = fabs(f);
        if (!type && prec < 0) {
            tbuf t = {0};
            tv_write_float(&t, af);
            tbuf_put(&body, t.p ? t.p : "", t.len);
            tbuf_free(&t);
        } else if (type == '%') tbuf_printf(&body, "%.*f%%", (int)(prec < 0 ? 6 : prec), af * 100.0);
        else {
            char ty = type ? type : 'g';
            char fmtb[16];
            snprintf(fmtb, sizeof fmtb, "%%.%d%c", (int)(prec < 0 ? 6 : prec), ty);
            tbuf_printf(&body, fmtb, af);
        }
    }
    pad_field(b, body.p ? body.p : "", body.len, (int64_t)tutf8_len(body.p ? body.p : "", body.len), width,
              fill, align ? align : '>', sign_len);
    tbuf_free(&body);
    return 0;
bad:
    tr_err(r, at, "invalid format specifier");
    return -1;
}

/* Python str.format with positional/keyword fields, !s/!r and format specs. */
static tv *py_str_format(trender *r, const tnode *at, const tv *self, const targs *a)
{
    const char *p = self->u.str.s;
    size_t n = self->u.str.len, auto_idx = 0;
    tbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '}') {
            if (i + 1 < n && p[i + 1] == '}') {
                tbuf_putc(&b, '}');
                i++;
                continue;
            }
            goto bad;
        }
        if (c != '{') {
            tbuf_putc(&b, c);
            continue;
        }
        if (i + 1 < n && p[i + 1] == '{') {
            tbuf_putc(&b, '{');
            i++;
            continue;
        }
        size_t e = i + 1;
        while (e < n && p[e] != '}' && p[e] != '{') e++;
        if (e >= n || p[e] != '}') goto bad;
        /* field = name[!conv][:spec] */
        size_t fb = i + 1, fe = e, ne = fb;
        while (ne < fe && p[ne] != '!' && p[ne] != ':' && p[ne] != '.' && p[ne] != '[') ne++;
        tv *v = NULL;
        if (ne == fb) {
            if (auto_idx >= a->npos) goto range;
            v = a->pos[auto_idx++];
        } else if (p[fb] >= '0' && p[fb] <= '9') {
            size_t idx = (size_t)strtoul(p + fb, NULL, 10);
            if (idx >= a->npos) goto range;
            v = a->pos[idx];
        } else {
            for (size_t k = 0; k < a->nkw && !v; k++)
                if (strlen(a->kwn[k]) == ne - fb && !memcmp(a->kwn[k], p + fb, ne - fb)) v = a->kwv[k];
            if (!v) {
                tbuf_free(&b);
                tr_err(r, at, "KeyError: '%.*s'", (int)(ne - fb), p + fb);
                return NULL;
            }
        }
        while (ne < fe && (p[ne] == '.' || p[ne] == '[')) {
            size_t ks = ne + 1, ke = ks;
            if (p[ne] == '.') {
                while (ke < fe && p[ke] != '.' && p[ke] != '[' && p[ke] != '!' && p[ke] != ':') ke++;
                char *nm = tarena_strndup(r->a, p + ks, ke - ks);
                if (!nm || !(v = tr_get_attr(r, at, v, nm))) goto fail;
                ne = ke;
            } else {
                while (ke < fe && p[ke] != ']') ke++;
                if (ke >= fe) goto bad;
                int digits = ke > ks;
                for (size_t k = ks; k < ke; k++)
                    if (p[k] < '0' || p[k] > '9') digits = 0;
                tv *key = digits ? tr_int(r, strtoll(p + ks, NULL, 10)) : tr_str(r, p + ks, ke - ks);
                if (!key || !(v = tr_get_item(r, at, v, key))) goto fail;
                ne = ke + 1;
            }
        }
        char conv = 0;
        if (ne < fe && p[ne] == '!') {
            if (ne + 1 >= fe) goto bad;
            conv = p[ne + 1];
            ne += 2;
        }
        const char *spec = "";
        size_t sl = 0;
        if (ne < fe && p[ne] == ':') {
            spec = p + ne + 1;
            sl = fe - ne - 1;
        } else if (ne != fe) goto bad;
        if (v->type == TV_UNDEF && conv != 's' && conv != 'r') {
            tbuf_free(&b);
            tr_undef_error(r, at, v);
            return NULL;
        }
        if (conv == 'r' || conv == 's' || conv == 'a') {
            tbuf t = {0};
            if (conv == 's') tv_write_str(&t, v);
            else tv_write_repr(&t, v);
            tv *sv = tr_buf_to_str(r, &t);
            if (!sv) goto fail;
            v = sv;
        } else if (conv) goto bad;
        if (format_field(r, at, &b, v, spec, sl)) goto fail;
        i = e;
    }
    return tr_buf_to_str(r, &b);
bad:
    tbuf_free(&b);
    tr_err(r, at, "invalid format string");
    return NULL;
range:
    tbuf_free(&b);
    tr_err(r, at, "IndexError: Replacement index out of range for positional args tuple");
    return NULL;
fail:
    tbuf_free(&b);
    return NULL;
}

/* ---- str methods: one sorted table ------------------------------------------ */
/* A str method on self (a TV_STR); m is the name it was called by. */
typedef tv *(*tstr_method_fn)(trender *r, const tnode *at, const char *m, tv *self, targs *a);

static tv *sm_strip(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *a0 = tr_arg(a, 0, NULL);
    if (tr_check_nargs(r, at, m, a, 1)) return NULL;
    if (a0 && a0->type != TV_STR && a0->type != TV_NONE) {
        tr_err(r, at, "%s arg must be None or str", m);
        return NULL;
    }
    return tr_py_strip(r, self, a0, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
}

static tv *sm_split(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *sep = tr_arg(a, 0, "sep"), *mx = tr_arg(a, 1, "maxsplit");
    if (mx && !is_intlike(mx)) {
        tr_err(r, at, "maxsplit must be an integer");
        return NULL;
    }
    return tr_py_split(r, at, self, sep, mx ? ival(mx) : -1, m[0] == 'r');
}

static tv *sm_startswith(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *a0 = tr_arg(a, 0, NULL);
    if (!a0) {
        tr_err(r, at, "%s() takes at least 1 argument (0 given)", m);
        return NULL;
    }
    tv *one[1] = {a0};
    tv **cands = one;
    size_t nc = 1;
    if (a0->type == TV_LIST && a0->is_tuple) {
        cands = a0->u.list.items;
        nc = a0->u.list.n;
    }
    for (size_t i = 0; i < nc; i++) {
        tv *c = cands[i];
        if (c->type != TV_STR) {
            tr_err(r, at, "%s first arg must be str or a tuple of str, not %s", m, tv_type_name(c));
            return NULL;
        }
        size_t L = c->u.str.len, N = self->u.str.len;
        if (L > N) continue;
        const char *p = m[0] == 's' ? self->u.str.s : self->u.str.s + N - L;
        if (!memcmp(p, c->u.str.s, L)) return &tv_true_v;
    }
    return &tv_false_v;
}

/* upper lower casefold capitalize title swapcase: tr_py_case's kinds */
static tv *sm_case(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    int kind = !strcmp(m, "upper") ? 1 : !strcmp(m, "capitalize") ? 2 : !strcmp(m, "title") ? 3
             : !strcmp(m, "swapcase") ? 4 : 0;
    return tr_py_case(r, self, kind);
}

static tv *sm_replace(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *a0 = tr_arg(a, 0, NULL), *a1 = tr_arg(a, 1, NULL);
    tv *cnt = tr_arg(a, 2, "count");
    if (!a0 || !a1) {
        tr_err(r, at, "replace() takes at least 2 arguments");
        return NULL;
    }
    return tr_py_replace(r, at, self, a0, a1, cnt && is_intlike(cnt) ? ival(cnt) : -1);
}

/* find rfind index rindex count */
static tv *sm_find(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *a0 = tr_arg(a, 0, NULL);
    if (!a0 || a0->type != TV_STR) {
        tr_err(r, at, "%s() argument must be str", m);
        return NULL;
    }
    const char *h = self->u.str.s;
    size_t hn = self->u.str.len, nn = a0->u.str.len;
    if (!strcmp(m, "count")) {
        if (nn == 0) return tr_int(r, (int64_t)tutf8_len(h, hn) + 1);
        int64_t c = 0;
        size_t i = 0;
        const char *f;
        while ((f = tr_memmem(h + i, hn - i, a0->u.str.s, nn))) {
            c++;
            i = (size_t)(f - h) + nn;
        }
        return tr_int(r, c);
    }
    const char *f = NULL;
    if (m[0] == 'r') {
        for (size_t k = hn >= nn ? hn - nn + 1 : 0; k-- > 0;)
            if (!memcmp(h + k, a0->u.str.s, nn)) {
                f = h + k;
                break;
            }
    } else f = tr_memmem(h, hn, a0->u.str.s, nn);
    if (!f) {
        if (strstr(m, "index")) {
            tr_err(r, at, "substring not found");
            return NULL;
        }
        return tr_int(r, -1);
    }
    return tr_int(r, (int64_t)tutf8_len(h, (size_t)(f - h)));
}

static tv *sm_join(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *a0 = tr_arg(a, 0, NULL);
    if (!a0) {
        tr_err(r, at, "join() takes exactly one argument");
        return NULL;
    }
    tv *l = tr_iter(r, at, a0);
    if (!l) return NULL;
    tbuf b = {0};
    for (size_t i = 0; i < l->u.list.n; i++) {
        if (l->u.list.items[i]->type != TV_STR) {
            tbuf_free(&b);
            tr_err(r, at, "sequence item %zu: expected str instance, %s found", i,
                   tv_type_name(l->u.list.items[i]));
            return NULL;
        }
        if (i) tbuf_put(&b, self->u.str.s, self->u.str.len);
        tbuf_put(&b, l->u.list.items[i]->u.str.s, l->u.list.items[i]->u.str.len);
    }
    return tr_buf_to_str(r, &b);
}

/* the is* predicates; also reached for is* names sglc lacks (istitle, ...),
 * which are False on "" and an error otherwise, as before the table */
static tv *sm_is(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    enum { IS_DIGIT, IS_NUMERIC, IS_ALPHA, IS_ALNUM, IS_SPACE, IS_ASCII, IS_UPPER, IS_LOWER, IS_UNKNOWN };
    int kind = !strcmp(m, "isdigit") || !strcmp(m, "isdecimal") ? IS_DIGIT
             : !strcmp(m, "isnumeric")                          ? IS_NUMERIC
             : !strcmp(m, "isalpha")                            ? IS_ALPHA
             : !strcmp(m, "isalnum")                            ? IS_ALNUM
             : !strcmp(m, "isspace")                            ? IS_SPACE
             : !strcmp(m, "isascii")                            ? IS_ASCII
             : !strcmp(m, "isupper")                            ? IS_UPPER
             : !strcmp(m, "islower")                            ? IS_LOWER
                                                                : IS_UNKNOWN;
    size_t i = 0, n = self->u.str.len;
    if (n == 0) return &tv_false_v;
    if (kind == IS_UNKNOWN) {
        tr_err(r, at, "str.%s() is not supported", m);
        return NULL;
    }
    int any_cased = 0, all = 1;
    while (i < n) {
        uint32_t c = tutf8_next(self->u.str.s, n, &i);
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
        int alpha = k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
                    k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
        int digit = k == UTF8PROC_CATEGORY_ND;
        int ok = 1;
        switch (kind) {
        case IS_DIGIT: ok = digit; break;
        case IS_NUMERIC: ok = digit || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO; break;
        case IS_ALPHA: ok = alpha; break;
        case IS_ALNUM: ok = alpha || digit; break;
        case IS_SPACE: ok = tpy_isspace(c); break;
        case IS_ASCII: ok = c < 0x80; break;
        case IS_UPPER:
            if (k == UTF8PROC_CATEGORY_LL) ok = 0;
            if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) any_cased = 1;
            break;
        default: /* IS_LOWER */
            if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) ok = 0;
            if (k == UTF8PROC_CATEGORY_LL) any_cased = 1;
            break;
        }
        if (!ok) all = 0;
    }
    if (kind == IS_UPPER || kind == IS_LOWER) return tv_bool(all && any_cased);
    return tv_bool(all);
}

static tv *sm_format(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    return py_str_format(r, at, self, a);
}

static tv *sm_splitlines(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *ke = tr_arg(a, 0, "keepends");
    return tr_py_splitlines(r, self, ke && tv_truthy(ke));
}

static tv *sm_removeprefix(trender *r, const tnode *at, const char *m, tv *self, targs *a)
{
    tv *a0 = tr_arg(a, 0, NULL);
    if (!a0 || a0->type != TV_STR) {
        tr_err(r, at, "%s() argument must be str", m);
        return NULL;
    }
    size_t L = a0->u.str.len, N = self->u.str.len;
    if (L <= N) {
        if (m[6] == 'p' && !memcmp(self->u.str.s, a0->u.str.s, L)) return tr_str(r, self->u.str.s + L, N - L);
        if (m[6] == 's' && !memcmp(self->u.str.s + N - L, a0->u.str.s, L)) return tr_str(r, self->u.str.s, N - L);
    }
    return self;
}

enum { SM_MARKUP = 1 /* on a Markup, the result is a Markup (case and strip methods) */ };

typedef struct tstr_method {
    const char *name;
    tstr_method_fn fn;
    unsigned flags;
} tstr_method;

/* sorted by name (strcmp order): str_method_find bisects it.  STR_METHODS in
 * template_ops.c lists the names attribute lookup offers; those missing here
 * are "not supported" errors (is* ones go to sm_is). */
static const tstr_method STR_METHOD_TABLE[] = {
    {"capitalize", sm_case, SM_MARKUP},
    {"casefold", sm_case, 0},
    {"count", sm_find, 0},
    {"endswith", sm_startswith, 0},
    {"find", sm_find, 0},
    {"format", sm_format, 0},
    {"index", sm_find, 0},
    {"isalnum", sm_is, 0},
    {"isalpha", sm_is, 0},
    {"isascii", sm_is, 0},
    {"isdecimal", sm_is, 0},
    {"isdigit", sm_is, 0},
    {"islower", sm_is, 0},
    {"isnumeric", sm_is, 0},
    {"isspace", sm_is, 0},
    {"isupper", sm_is, 0},
    {"join", sm_join, 0},
    {"lower", sm_case, SM_MARKUP},
    {"lstrip", sm_strip, SM_MARKUP},
    {"removeprefix", sm_removeprefix, 0},
    {"removesuffix", sm_removeprefix, 0},
    {"replace", sm_replace, 0},
    {"rfind", sm_find, 0},
    {"rindex", sm_find, 0},
    {"rsplit", sm_split, 0},
    {"rstrip", sm_strip, SM_MARKUP},
    {"split", sm_split, 0},
    {"splitlines", sm_splitlines, 0},
    {"startswith", sm_startswith, 0},
    {"strip", sm_strip, SM_MARKUP},
    {"swapcase", sm_case, SM_MARKUP},
    {"title", sm_case, SM_MARKUP},
    {"upper", sm_case, SM_MARKUP},
};

static int str_method_cmp(const void *key, const void *row)
{
    return strcmp((const char *)key, ((const tstr_method *)row)->name);
}

static const tstr_method *str_method_find(const char *name)
{
    return bsearch(name, STR_METHOD_TABLE, sizeof STR_METHOD_TABLE / sizeof STR_METHOD_TABLE[0],
                   sizeof STR_METHOD_TABLE[0], str_method_cmp);
}

tv *tr_call_method(trender *r, const tnode *at, tv *fn, targs *a)
{
    tv *self = fn->u.fn.self;
    const char *m = fn->u.fn.name;
    if (self->type == TV_LOOP && !strcmp(m, "changed")) {
        tv *t = tr_list(r, a->npos);
        if (!t) return NULL;
        t->is_tuple = 1;
        if (a->npos) memcpy(t->u.list.items, a->pos, a->npos * sizeof(tv *));
        tloop *lp = self->u.loop;
        if (lp->changed_last && tv_equal(lp->changed_last, t)) return &tv_false_v;
        lp->changed_last = t;
        return &tv_true_v;
    }
    if (self->type == TV_NS && (!strcmp(m, "next") || !strcmp(m, "reset"))) { /* cycler */
        tv *items = tv_dict_get(self, "\x01items", 6), *pos = tv_dict_get(self, "\x01pos", 4);
        if (!items || !pos) return tr_undef(r, "not a cycler");
        int64_t p = m[0] == 'r' ? 0 : pos->u.i;
        tv *cur = items->u.list.items[p];
        tv *np = tr_int(r, m[0] == 'r' ? 0 : (p + 1) % (int64_t)items->u.list.n);
        tv *kp = tr_str(r, "\x01pos", 4), *kc = tr_str(r, "current", 7);
        if (!np || !kp || !kc || tv_dict_set(r->a, self, kp, np)) return tr_oom(r);
        tv *nc = items->u.list.items[np->u.i];
        if (tv_dict_set(r->a, self, kc, nc)) return tr_oom(r);
        return m[0] == 'r' ? &tv_none_v : cur;
    }
    if (self->type == TV_NS && !strcmp(m, "joiner")) {
        tv *sep = tv_dict_get(self, "\x01sep", 4), *used = tv_dict_get(self, "\x01used", 5);
        if (!sep) return tr_undef(r, "not a joiner");
        if (used) return sep;
        tv *k = tr_str(r, "\x01used", 5);
        if (!k || tv_dict_set(r->a, self, k, &tv_true_v)) return tr_oom(r);
        return tr_str(r, "", 0);
    }
    if (self->type == TV_LOOP && !strcmp(m, "cycle")) {
        if (a->npos == 0) {
            tr_err(r, at, "no items for cycling given");
            return NULL;
        }
        return a->pos[self->u.loop->index0 % (int64_t)a->npos];
    }
    if (self->type == TV_DICT) {
        if (!strcmp(m, "get")) {
            tv *k = tr_arg(a, 0, NULL), *d = tr_arg(a, 1, NULL);
            if (!k) {
                tr_err(r, at, "get expected at least 1 argument, got 0");
                return NULL;
            }
            tv *v = tv_dict_getv(self, k);
            return v ? v : d ? d : &tv_none_v;
        }
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            tv *l = tr_list(r, self->u.dict.n);
            if (!l) return NULL;
            for (size_t i = 0; i < self->u.dict.n; i++) {
                if (m[0] == 'k') l->u.list.items[i] = self->u.dict.keys[i];
                else if (m[0] == 'v') l->u.list.items[i] = self->u.dict.vals[i];
                else {
                    tv *t = tr_list(r, 2);
                    if (!t) return NULL;
                    t->is_tuple = 1;
                    t->u.list.items[0] = self->u.dict.keys[i];
                    t->u.list.items[1] = self->u.dict.vals[i];
                    l->u.list.items[i] = t;
                }
            }
            return l;
        }
        if (!strcmp(m, "copy")) {
            tv *d = tv_dict(r->a, self->u.dict.n);
            if (!d) return tr_oom(r);
            for (size_t i = 0; i < self->u.dict.n; i++)
                if (tv_dict_set(r->a, d, self->u.dict.keys[i], self->u.dict.vals[i])) return tr_oom(r);
            return d;
        }
        tr_err(r, at, "access to attribute '%s' of 'dict' object is unsafe (the sandbox is immutable)", m);
        return NULL;
    }
    if (self->type == TV_LIST) {
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            tv *x = tr_arg(a, 0, NULL);
            if (!x) {
                tr_err(r, at, "%s() takes exactly one argument", m);
                return NULL;
            }
            int64_t cnt = 0;
            for (size_t i = 0; i < self->u.list.n; i++)
                if (tv_equal(self->u.list.items[i], x)) {
                    if (m[0] == 'i') return tr_int(r, (int64_t)i);
                    cnt++;
                }
            if (m[0] == 'i') {
                tr_err(r, at, "value is not in list");
                return NULL;
            }
            return tr_int(r, cnt);
        }
        if (!strcmp(m, "copy")) return self;
        tr_err(r, at, "access to attribute '%s' of '%s' object is unsafe (the sandbox is immutable)", m,
             tv_type_name(self));
        return NULL;
    }
    /* str methods; Markup's case and strip methods return Markup */
    const tstr_method *row = str_method_find(m);
    if (self->is_markup && row && (row->flags & SM_MARKUP)) {
        tv plain = *self;
        plain.is_markup = 0;
        tv pf = *fn;
        pf.u.fn.self = &plain;
        return tr_as_markup(r, tr_call_method(r, at, &pf, a));
    }
    if (row) return row->fn(r, at, m, self, a);
    if (!strncmp(m, "is", 2)) return sm_is(r, at, m, self, a);
    tr_err(r, at, "str.%s() is not supported by sglc's template engine", m);
    return NULL;
}
