/* template_rt — the bottom of the interpreter: errors, the step limit,
 * value constructors that report memory-limit failures, iteration and
 * argument lookup (see template_rt.h for the file map).
 *
 * DESIGN: the first error wins (later ones are dropped) and carries the
 * template line; every constructor returns NULL after recording the
 * memory-limit error, so callers just propagate NULL. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template_rt.h"

void tr_err(trender *r, const tnode *at, const char *fmt, ...)
{
    if (r->failed) return;
    r->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    if (at && at->line && k > 0 && (size_t)k < sizeof r->err)
        snprintf(r->err + k, sizeof r->err - (size_t)k, " (line %d)", at->line);
}

/* an allocation failed: report it once */
tv *tr_oom(trender *r)
{
    tr_err(r, NULL, "template render exceeded its memory limit");
    return NULL;
}

tv *tr_undef_error(trender *r, const tnode *at, const tv *u)
{
    tr_err(r, at, "%s", u->u.hint ? u->u.hint : "value is undefined");
    return NULL;
}

int tr_step(trender *r, const tnode *at)
{
    if (++r->steps > r->lim.max_steps) {
        tr_err(r, at, "template exceeded its step limit (%zu)", r->lim.max_steps);
        return -1;
    }
    return 0;
}

tv *tr_undef(trender *r, const char *fmt, ...)
{
    char tmp[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    tv *u = tv_undef(r->a, tmp);
    return u ? u : tr_oom(r);
}

/* ---- small helpers ----------------------------------------------------------- */
tv *tr_str(trender *r, const char *s, size_t n)
{
    tv *v = tv_str(r->a, s, n);
    return v ? v : tr_oom(r);
}

tv *tr_int(trender *r, int64_t i)
{
    tv *v = tv_int(r->a, i);
    return v ? v : tr_oom(r);
}

tv *tr_float(trender *r, double f)
{
    tv *v = tv_float(r->a, f);
    return v ? v : tr_oom(r);
}

tv *tr_list(trender *r, size_t n)
{
    tv *v = tv_list(r->a, n);
    return v ? v : tr_oom(r);
}

tv *tr_buf_to_str(trender *r, tbuf *b)
{
    if (b->over) {
        tbuf_free(b);
        tr_err(r, NULL, "template output exceeded its size limit");
        return NULL;
    }
    tv *v = tr_str(r, b->p ? b->p : "", b->len);
    tbuf_free(b);
    return v;
}

/* str(v) as a string value (undefined -> "") */
tv *tr_to_str(trender *r, tv *v)
{
    if (v->type == TV_STR) return v;
    tbuf b = {0};
    tv_write_str(&b, v);
    return tr_buf_to_str(r, &b);
}

/* Items of an iterable (list/tuple items, dict keys, string chars,
 * undefined -> empty).  Returns NULL + error for non-iterables. */
tv *tr_iter(trender *r, const tnode *at, tv *v)
{
    switch (v->type) {
    case TV_LIST:
        if (v->u.list.err) {
            tr_err(r, at, "%s", v->u.list.err);
            return NULL;
        }
        return v;
    case TV_UNDEF: return tr_list(r, 0);
    case TV_DICT: {
        tv *l = tr_list(r, v->u.dict.n);
        if (!l) return NULL;
        for (size_t i = 0; i < v->u.dict.n; i++) l->u.list.items[i] = v->u.dict.keys[i];
        return l;
    }
    case TV_STR: {
        size_t n = tutf8_len(v->u.str.s, v->u.str.len), i = 0, k = 0;
        tv *l = tr_list(r, n);
        if (!l) return NULL;
        while (i < v->u.str.len) {
            size_t b = i;
            tutf8_next(v->u.str.s, v->u.str.len, &i);
            if (!(l->u.list.items[k++] = tr_str(r, v->u.str.s + b, i - b))) return NULL;
        }
        return l;
    }
    default:
        tr_err(r, at, "'%s' object is not iterable", tv_type_name(v));
        return NULL;
    }
}

/* jinja2's filters that are generators (map, select, items, unique, batch,
 * ...) only fail when iterated.  When their input cannot be iterated, return
 * a generator that raises then; *out is set and 1 returned.  Inputs that
 * are such failing generators propagate. */
int tr_lazy_fail(trender *r, tv *v, tv **out, const char *fmt)
{
    const char *msg = NULL;
    char tmp[200];
    if (v->type == TV_LIST && v->u.list.err) msg = v->u.list.err;
    else if (v->type != TV_LIST && v->type != TV_STR && v->type != TV_DICT && v->type != TV_UNDEF) {
        snprintf(tmp, sizeof tmp, fmt, tv_type_name(v));
        msg = tmp;
    }
    if (!msg) return 0;
    tv *g = tr_list(r, 0);
    if (g) {
        g->is_gen = 1;
        g->u.list.err = tarena_strndup(r->a, msg, strlen(msg));
        if (!g->u.list.err) g = tr_oom(r);
    }
    *out = g;
    return 1;
}

/* positional index i or keyword `name`; NULL when absent */
tv *tr_arg(const targs *a, size_t i, const char *name)
{
    if (i < a->npos) return a->pos[i];
    for (size_t k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name)) return a->kwv[k];
    return NULL;
}

int tr_check_nargs(trender *r, const tnode *at, const char *fn, const targs *a, size_t maxpos)
{
    if (a->npos > maxpos) {
        tr_err(r, at, "%s() takes at most %zu positional arguments (%zu given)", fn, maxpos, a->npos);
        return -1;
    }
    return 0;
}
