/* template_globals — the global functions of every render: range,
 * namespace, dict, cycler, joiner, and transformers' raise_exception and
 * strftime_now.
 *
 * DESIGN: one table row per global (name, handler); tmpl_render puts a
 * TFN_GLOBAL value per row (tr_global_name) into the root frame, and
 * calling one lands in tr_call_global, which finds the row.  range() is bounded like the sandbox (MAX_RANGE).
 * Uses template_ops and template_rt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/template_rt.h"


/* ---- strftime_now ------------------------------------------------------------ */
/* The current local time, or SGLC_FIXED_DATE ("YYYY-MM-DD[THH:MM[:SS]]")
 * when set: tests pin the date so output compares with the reference. */
static tv *strftime_now(trender *r, const tnode *at, tv *fmt)
{
    if (fmt->type != TV_STR) {
        tr_err(r, at, "strftime_now() argument must be str");
        return NULL;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *fixed = getenv("SGLC_FIXED_DATE");
    if (fixed && *fixed) {
        int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
        if (sscanf(fixed, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &se) < 3) {
            tr_err(r, at, "SGLC_FIXED_DATE must look like 2024-07-26 or 2024-07-26T12:00:00");
            return NULL;
        }
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = se;
        tm.tm_isdst = -1;
        time_t t = timegm(&tm); /* normalizes and fills weekday / yearday */
        gmtime_r(&t, &tm);
    } else {
        time_t t = time(NULL);
        localtime_r(&t, &tm);
    }
    char *f = tarena_strndup(r->a, fmt->u.str.s, fmt->u.str.len);
    if (!f) return tr_oom(r);
    char out[1024];
    size_t k = fmt->u.str.len ? strftime(out, sizeof out, f, &tm) : 0;
    if (k == 0 && fmt->u.str.len) {
        tr_err(r, at, "strftime_now(): format too long or invalid");
        return NULL;
    }
    return tr_str(r, out, k);
}

static tv *gl_raise_exception(trender *r, const tnode *at, const char *g, targs *a)
{
    tv *m = tr_arg(a, 0, "message");
    tbuf b = {0};
    if (m) tv_write_str(&b, m);
    tr_err(r, NULL, "%s", b.p ? b.p : "");
    tbuf_free(&b);
    return NULL;
}

static tv *gl_strftime_now(trender *r, const tnode *at, const char *g, targs *a)
{
    tv *f = tr_arg(a, 0, "format");
    if (!f) {
        tr_err(r, at, "strftime_now() missing 1 required positional argument: 'format'");
        return NULL;
    }
    return strftime_now(r, at, f);
}

static tv *gl_range(trender *r, const tnode *at, const char *g, targs *a)
{
    int64_t v[3] = {0, 0, 1};
    if (a->npos < 1 || a->npos > 3 || a->nkw) {
        tr_err(r, at, "range expected 1 to 3 integer arguments");
        return NULL;
    }
    for (size_t i = 0; i < a->npos; i++) {
        if (!is_intlike(a->pos[i])) {
            if (a->pos[i]->type == TV_UNDEF) return tr_undef_error(r, at, a->pos[i]);
            tr_err(r, at, "'%s' object cannot be interpreted as an integer", tv_type_name(a->pos[i]));
            return NULL;
        }
    }
    if (a->npos == 1) v[1] = ival(a->pos[0]);
    else {
        v[0] = ival(a->pos[0]);
        v[1] = ival(a->pos[1]);
        if (a->npos == 3) v[2] = ival(a->pos[2]);
    }
    if (v[2] == 0) {
        tr_err(r, at, "range() arg 3 must not be zero");
        return NULL;
    }
    int64_t cnt = 0;
    if (v[2] > 0 && v[1] > v[0]) cnt = (v[1] - v[0] + v[2] - 1) / v[2];
    if (v[2] < 0 && v[0] > v[1]) cnt = (v[0] - v[1] - v[2] - 1) / (-v[2]);
    if (cnt > 100000) {
        tr_err(r, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        return NULL;
    }
    tv *l = tr_list(r, (size_t)cnt);
    if (!l) return NULL;
    for (int64_t i = 0; i < cnt; i++)
        if (!(l->u.list.items[i] = tr_int(r, v[0] + i * v[2]))) return NULL;
    return l;
}

static tv *gl_cycler_joiner(trender *r, const tnode *at, const char *g, targs *a)
{
    /* state lives in a namespace with \x01-prefixed keys (not reachable by name) */
    tv *d = tv_dict(r->a, 4);
    if (!d) return tr_oom(r);
    d->type = TV_NS;
    if (g[0] == 'c') {
        if (a->npos == 0) {
            tr_err(r, at, "cycler() needs at least one item");
            return NULL;
        }
        tv *items = tr_list(r, a->npos);
        if (!items) return NULL;
        memcpy(items->u.list.items, a->pos, a->npos * sizeof(tv *));
        if (tv_dict_set(r->a, d, tr_str(r, "\x01items", 6), items) ||
            tv_dict_set(r->a, d, tr_str(r, "\x01pos", 4), tr_int(r, 0)) ||
            tv_dict_set(r->a, d, tr_str(r, "current", 7), a->pos[0]))
            return tr_oom(r);
        return d;
    }
    tv *sep = tr_arg(a, 0, "sep");
    if (!sep && !(sep = tr_str(r, ", ", 2))) return NULL;
    if (tv_dict_set(r->a, d, tr_str(r, "\x01sep", 4), sep)) return tr_oom(r);
    return tr_method(r, d, "joiner");
}

static tv *gl_namespace_dict(trender *r, const tnode *at, const char *g, targs *a)
{
    tv *d = tv_dict(r->a, 8);
    if (!d) return tr_oom(r);
    if (!strcmp(g, "namespace")) d->type = TV_NS;
    for (size_t i = 0; i < a->npos; i++) {
        tv *src = a->pos[i];
        if (src->type != TV_DICT && src->type != TV_NS) {
            tr_err(r, at, "%s() positional argument must be a mapping", g);
            return NULL;
        }
        for (size_t k = 0; k < src->u.dict.n; k++)
            if (tv_dict_set(r->a, d, src->u.dict.keys[k], src->u.dict.vals[k])) return tr_oom(r);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        tv *key = tr_str(r, a->kwn[k], strlen(a->kwn[k]));
        if (!key || tv_dict_set(r->a, d, key, a->kwv[k])) return tr_oom(r);
    }
    return d;
}

typedef tv *(*tglobal_fn)(trender *r, const tnode *at, const char *g, targs *a);

/* the globals, in the order tmpl_render registers them */
static const struct {
    const char *name;
    tglobal_fn fn;
} GLOBALS[] = {
    {"range", gl_range},
    {"namespace", gl_namespace_dict},
    {"dict", gl_namespace_dict},
    {"cycler", gl_cycler_joiner},
    {"joiner", gl_cycler_joiner},
    {"raise_exception", gl_raise_exception},
    {"strftime_now", gl_strftime_now},
};

const char *tr_global_name(size_t i) { return i < sizeof GLOBALS / sizeof GLOBALS[0] ? GLOBALS[i].name : NULL; }

tv *tr_call_global(trender *r, tscope *s, const tnode *at, const char *g, targs *a)
{
    (void)s;
    for (size_t i = 0; i < sizeof GLOBALS / sizeof GLOBALS[0]; i++)
        if (!strcmp(g, GLOBALS[i].name)) return GLOBALS[i].fn(r, at, g, a);
    tr_err(r, at, "'%s' is not callable", g);
    return NULL;
}
