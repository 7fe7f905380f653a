/* template_eval — the Jinja interpreter: statements, expressions, filters,
 * tests, methods and globals.
 *
 * DESIGN: a tree-walking interpreter over the AST of template_parse.c.
 * Scoping follows Jinja2: the template has one frame; each for-loop
 * iteration, macro call and with-block gets a child frame (so a `set`
 * inside a loop body is gone at the next iteration, hence namespace());
 * if-blocks share their parent's frame.  Undefined values behave like
 * jinja2.Undefined: printing gives "", truth is false, iteration is empty,
 * attribute access, arithmetic, ordering and calls raise an error.
 * Attribute lookup follows the sandbox's getattr-then-getitem order, so
 * `d.items` is the method and `d.role` the key.
 *
 * Errors: every eval function returns NULL (values) or -1 (statements)
 * after recording the first error message in the render state; nothing
 * longjmps.  The render state counts steps (loop iterations, calls) and
 * nesting depth against tmpl_limits, and the arena and output buffer carry
 * their own caps, so every render ends. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "template/template.h"
#include "template/template_impl.h"

typedef struct tscope {
    struct tscope *parent;
    const char **names; /* (n) arena */
    tv **vals;          /* (n) arena */
    size_t n, cap;
} tscope;

typedef struct trender {
    tarena *a;
    tbuf *out;       /* current output (swapped while capturing macro/set/filter bodies) */
    tmpl_limits lim;
    size_t steps;
    int depth;
    int const_print; /* evaluating a {{ }} that jinja2 folds to a constant */
    int failed;
    char err[1024];
} trender;

enum { EX_OK = 0, EX_BREAK = 1, EX_CONTINUE = 2, EX_ERR = -1 };

/* ---- errors --------------------------------------------------------------- */
static void rerr(trender *r, const tnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rerr(trender *r, const tnode *at, const char *fmt, ...)
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
static tv *oom(trender *r)
{
    rerr(r, NULL, "template render exceeded its memory limit");
    return NULL;
}

static tv *undef_error(trender *r, const tnode *at, const tv *u)
{
    rerr(r, at, "%s", u->u.hint ? u->u.hint : "value is undefined");
    return NULL;
}

static int step(trender *r, const tnode *at)
{
    if (++r->steps > r->lim.max_steps) {
        rerr(r, at, "template exceeded its step limit (%zu)", r->lim.max_steps);
        return -1;
    }
    return 0;
}

static tv *mkundef(trender *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tv *mkundef(trender *r, const char *fmt, ...)
{
    char tmp[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    tv *u = tv_undef(r->a, tmp);
    return u ? u : oom(r);
}

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

/* ---- small helpers ----------------------------------------------------------- */
static tv *mkstr(trender *r, const char *s, size_t n)
{
    tv *v = tv_str(r->a, s, n);
    return v ? v : oom(r);
}
static tv *mkint(trender *r, int64_t i)
{
    tv *v = tv_int(r->a, i);
    return v ? v : oom(r);
}
static tv *mkfloat(trender *r, double f)
{
    tv *v = tv_float(r->a, f);
    return v ? v : oom(r);
}
static tv *mklist(trender *r, size_t n)
{
    tv *v = tv_list(r->a, n);
    return v ? v : oom(r);
}
static tv *buf_to_str(trender *r, tbuf *b)
{
    if (b->over) {
        tbuf_free(b);
        rerr(r, NULL, "template output exceeded its size limit");
        return NULL;
    }
    tv *v = mkstr(r, b->p ? b->p : "", b->len);
    tbuf_free(b);
    return v;
}
/* str(v) as a string value (undefined -> "") */
static tv *to_str(trender *r, tv *v)
{
    if (v->type == TV_STR) return v;
    tbuf b = {0};
    tv_write_str(&b, v);
    return buf_to_str(r, &b);
}
static int is_num(const tv *v) { return v->type == TV_INT || v->type == TV_FLOAT || v->type == TV_BOOL; }
static int is_intlike(const tv *v) { return v->type == TV_INT || v->type == TV_BOOL; }
static int64_t ival(const tv *v) { return v->type == TV_INT ? v->u.i : v->u.b; }
static double fval(const tv *v) { return v->type == TV_FLOAT ? v->u.f : (double)ival(v); }
static int str_eq(const tv *v, const char *s)
{
    return v->type == TV_STR && v->u.str.len == strlen(s) && !memcmp(v->u.str.s, s, v->u.str.len);
}

/* Items of an iterable (list/tuple items, dict keys, string chars,
 * undefined -> empty).  Returns NULL + error for non-iterables. */
static tv *iter_list(trender *r, const tnode *at, tv *v)
{
    switch (v->type) {
    case TV_LIST:
        if (v->u.list.err) {
            rerr(r, at, "%s", v->u.list.err);
            return NULL;
        }
        return v;
    case TV_UNDEF: return mklist(r, 0);
    case TV_DICT: {
        tv *l = mklist(r, v->u.dict.n);
        if (!l) return NULL;
        for (size_t i = 0; i < v->u.dict.n; i++) l->u.list.items[i] = v->u.dict.keys[i];
        return l;
    }
    case TV_STR: {
        size_t n = tutf8_len(v->u.str.s, v->u.str.len), i = 0, k = 0;
        tv *l = mklist(r, n);
        if (!l) return NULL;
        while (i < v->u.str.len) {
            size_t b = i;
            tutf8_next(v->u.str.s, v->u.str.len, &i);
            if (!(l->u.list.items[k++] = mkstr(r, v->u.str.s + b, i - b))) return NULL;
        }
        return l;
    }
    default:
        rerr(r, at, "'%s' object is not iterable", tv_type_name(v));
        return NULL;
    }
}

/* jinja2's filters that are generators (map, select, items, unique, batch,
 * ...) only fail when iterated.  When their input cannot be iterated, return
 * a generator that raises then; *out is set and 1 returned.  Inputs that
 * are such failing generators propagate. */
static int lazy_fail(trender *r, tv *v, tv **out, const char *fmt)
{
    const char *msg = NULL;
    char tmp[200];
    if (v->type == TV_LIST && v->u.list.err) msg = v->u.list.err;
    else if (v->type != TV_LIST && v->type != TV_STR && v->type != TV_DICT && v->type != TV_UNDEF) {
        snprintf(tmp, sizeof tmp, fmt, tv_type_name(v));
        msg = tmp;
    }
    if (!msg) return 0;
    tv *g = mklist(r, 0);
    if (g) {
        g->is_gen = 1;
        g->u.list.err = tarena_strndup(r->a, msg, strlen(msg));
        if (!g->u.list.err) g = oom(r);
    }
    *out = g;
    return 1;
}

/* ---- string helpers ------------------------------------------------------- */
/* Offsets of code point boundaries would cost memory; strings are indexed
 * by walking, which is fine at chat-template sizes. */
static size_t cp_offset(const tv *s, int64_t idx)
{
    size_t i = 0;
    for (int64_t k = 0; k < idx && i < s->u.str.len; k++) tutf8_next(s->u.str.s, s->u.str.len, &i);
    return i;
}

static int in_chars(uint32_t c, const tv *chars)
{
    size_t i = 0;
    while (i < chars->u.str.len)
        if (tutf8_next(chars->u.str.s, chars->u.str.len, &i) == c) return 1;
    return 0;
}

/* Python strip family: mode 1 = left, 2 = right, 3 = both; chars NULL or
 * None = whitespace. */
static tv *py_strip(trender *r, const tv *s, const tv *chars, int mode)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, b = 0, e = n;
    int ws = !chars || chars->type == TV_NONE;
    if (mode & 1) {
        while (b < e) {
            size_t j = b;
            uint32_t c = tutf8_next(p, n, &j);
            if (ws ? tpy_isspace(c) : in_chars(c, chars)) b = j;
            else break;
        }
    }
    if (mode & 2) {
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            size_t j = st;
            uint32_t c = tutf8_next(p, e, &j);
            if (ws ? tpy_isspace(c) : in_chars(c, chars)) e = st;
            else break;
        }
    }
    return mkstr(r, p + b, e - b);
}

static const char *memmem_s(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    return memmem(h, hn, nd, nn);
}

/* str.split(sep=None, maxsplit=-1) / rsplit */
static tv *py_split(trender *r, const tnode *at, const tv *s, const tv *sep, int64_t maxsplit, int right)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.len;
    tv **parts = NULL;
    size_t np = 0, cap = 0;
#define PUSH_PART(b, e)                                                                  \
    do {                                                                                 \
        if (np == cap) {                                                                 \
            cap = cap ? cap * 2 : 8;                                                     \
            tv **q = tarena_alloc(r->a, cap * sizeof *q);                                \
            if (!q) return oom(r);                                                       \
            if (np) memcpy(q, parts, np * sizeof *q);                                    \
            parts = q;                                                                   \
        }                                                                                \
        if (!(parts[np++] = mkstr(r, p + (b), (e) - (b)))) return NULL;                  \
    } while (0)
    if (sep && sep->type != TV_NONE) {
        if (sep->type != TV_STR) {
            rerr(r, at, "must be str or None, not %s", tv_type_name(sep));
            return NULL;
        }
        size_t sl = sep->u.str.len;
        if (sl == 0) {
            rerr(r, at, "empty separator");
            return NULL;
        }
        if (!right) {
            size_t b = 0;
            while (maxsplit < 0 || (int64_t)np < maxsplit) {
                const char *f = memmem_s(p + b, n - b, sep->u.str.s, sl);
                if (!f) break;
                size_t e = (size_t)(f - p);
                PUSH_PART(b, e);
                b = e + sl;
            }
            PUSH_PART(b, n);
        } else {
            size_t e = n;
            while (maxsplit < 0 || (int64_t)np < maxsplit) {
                /* find last occurrence in p[0,e) */
                const char *f = NULL;
                for (size_t k = e >= sl ? e - sl + 1 : 0; k-- > 0;)
                    if (!memcmp(p + k, sep->u.str.s, sl)) {
                        f = p + k;
                        break;
                    }
                if (!f) break;
                size_t b = (size_t)(f - p) + sl;
                PUSH_PART(b, e);
                e = (size_t)(f - p);
            }
            PUSH_PART((size_t)0, e);
            for (size_t i = 0; i < np / 2; i++) {
                tv *t = parts[i];
                parts[i] = parts[np - 1 - i];
                parts[np - 1 - i] = t;
            }
        }
    } else {
        /* whitespace split: runs of whitespace, no empty strings */
        if (!right) {
            size_t i = 0;
            for (;;) {
                while (i < n) {
                    size_t j = i;
                    if (!tpy_isspace(tutf8_next(p, n, &j))) break;
                    i = j;
                }
                if (i >= n) break;
                if (maxsplit >= 0 && (int64_t)np >= maxsplit) {
                    /* rest, with trailing whitespace kept as Python does */
                    PUSH_PART(i, n);
                    break;
                }
                size_t b = i;
                while (i < n) {
                    size_t j = i;
                    if (tpy_isspace(tutf8_next(p, n, &j))) break;
                    i = j;
                }
                PUSH_PART(b, i);
            }
        } else {
            tv *fw = py_strip(r, s, NULL, 2);
            if (!fw) return NULL;
            if (maxsplit < 0) return py_split(r, at, fw, NULL, -1, 0);
            /* rare: rsplit(None, k) — split fully, then rejoin the head */
            tv *all = py_split(r, at, fw, NULL, -1, 0);
            if (!all) return NULL;
            size_t tot = all->u.list.n;
            if ((int64_t)tot <= maxsplit) return all;
            size_t head = tot - (size_t)maxsplit;
            /* head part: from start of string (after lstrip) to end of word head-1 */
            size_t hb = 0;
            while (hb < fw->u.str.len) {
                size_t j = hb;
                if (!tpy_isspace(tutf8_next(fw->u.str.s, fw->u.str.len, &j))) break;
                hb = j;
            }
            /* words are copies; locate by scanning words again */
            size_t i = hb, w = 0;
            while (w < head) {
                while (i < fw->u.str.len) {
                    size_t j = i;
                    if (!tpy_isspace(tutf8_next(fw->u.str.s, fw->u.str.len, &j))) break;
                    i = j;
                }
                while (i < fw->u.str.len) {
                    size_t j = i;
                    if (tpy_isspace(tutf8_next(fw->u.str.s, fw->u.str.len, &j))) break;
                    i = j;
                }
                w++;
            }
            tv *l = mklist(r, (size_t)maxsplit + 1);
            if (!l) return NULL;
            if (!(l->u.list.items[0] = mkstr(r, fw->u.str.s, i))) return NULL;
            for (size_t k = 0; k < (size_t)maxsplit; k++) l->u.list.items[k + 1] = all->u.list.items[head + k];
            return l;
        }
    }
#undef PUSH_PART
    tv *l = mklist(r, np);
    if (!l) return NULL;
    if (np) memcpy(l->u.list.items, parts, np * sizeof *parts);
    return l;
}

/* case mapping: mode 0 lower, 1 upper, 2 title-case one code point */
static void put_case(tbuf *b, uint32_t c, int mode)
{
    if (mode == 0) {
        if (c == 0x130) { /* İ -> i̇ as Python does */
            tutf8_put(b, 'i');
            tutf8_put(b, 0x307);
            return;
        }
        tutf8_put(b, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
    } else if (mode == 1) {
        if (c == 0xDF) { /* ß -> SS */
            tbuf_puts(b, "SS");
            return;
        }
        tutf8_put(b, (uint32_t)utf8proc_toupper((utf8proc_int32_t)c));
    } else {
        tutf8_put(b, (uint32_t)utf8proc_totitle((utf8proc_int32_t)c));
    }
}

static int is_cased_letter(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

/* kind: 0 lower, 1 upper, 2 capitalize, 3 py title, 4 swapcase */
static tv *py_case(trender *r, const tv *s, int kind)
{
    tbuf b = {0};
    size_t i = 0, n = s->u.str.len;
    int first = 1, prev_cased = 0;
    while (i < n) {
        uint32_t c = tutf8_next(s->u.str.s, n, &i);
        switch (kind) {
        case 0: put_case(&b, c, 0); break;
        case 1: put_case(&b, c, 1); break;
        case 2: put_case(&b, c, first ? 2 : 0); break;
        case 3: {
            int cased = is_cased_letter(c);
            put_case(&b, c, prev_cased ? 0 : 2);
            prev_cased = cased || (utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_LM &&
                                   prev_cased);
            if (!cased && utf8proc_category((utf8proc_int32_t)c) != UTF8PROC_CATEGORY_MN) prev_cased = 0;
            if (cased) prev_cased = 1;
            break;
        }
        default: {
            uint32_t u = (uint32_t)utf8proc_toupper((utf8proc_int32_t)c);
            put_case(&b, c, u == c ? 0 : 1);
        }
        }
        first = 0;
    }
    return buf_to_str(r, &b);
}

static tv *py_replace(trender *r, const tnode *at, const tv *s, const tv *old, const tv *new_, int64_t count)
{
    if (old->type != TV_STR || new_->type != TV_STR) {
        rerr(r, at, "replace() arguments must be str");
        return NULL;
    }
    tbuf b = {0};
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, ol = old->u.str.len;
    if (ol == 0) {
        /* Python inserts new between every character (and at both ends) */
        size_t i = 0;
        int64_t k = 0;
        while (count < 0 || k < count) {
            tbuf_put(&b, new_->u.str.s, new_->u.str.len);
            k++;
            if (i >= n) break;
            size_t st = i;
            tutf8_next(p, n, &i);
            tbuf_put(&b, p + st, i - st);
        }
        tbuf_put(&b, p + i, n - i);
        return buf_to_str(r, &b);
    }
    size_t i = 0;
    int64_t k = 0;
    while (count < 0 || k < count) {
        const char *f = memmem_s(p + i, n - i, old->u.str.s, ol);
        if (!f) break;
        tbuf_put(&b, p + i, (size_t)(f - (p + i)));
        tbuf_put(&b, new_->u.str.s, new_->u.str.len);
        i = (size_t)(f - p) + ol;
        k++;
    }
    tbuf_put(&b, p + i, n - i);
    return buf_to_str(r, &b);
}

/* Python str.splitlines() boundaries */
static int is_linebreak(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
}

static tv *py_splitlines(trender *r, const tv *s, int keepends)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, i = 0, b = 0, cnt = 0;
    tv **parts = NULL;
    size_t cap = 0;
    while (i < n) {
        size_t st = i;
        uint32_t c = tutf8_next(p, n, &i);
        if (!is_linebreak(c)) continue;
        size_t e = st;
        if (c == '\r' && i < n && p[i] == '\n') i++;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            tv **q = tarena_alloc(r->a, cap * sizeof *q);
            if (!q) return oom(r);
            if (cnt) memcpy(q, parts, cnt * sizeof *q);
            parts = q;
        }
        if (!(parts[cnt++] = mkstr(r, p + b, (keepends ? i : e) - b))) return NULL;
        b = i;
    }
    if (b < n) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            tv **q = tarena_alloc(r->a, cap * sizeof *q);
            if (!q) return oom(r);
            if (cnt) memcpy(q, parts, cnt * sizeof *q);
            parts = q;
        }
        if (!(parts[cnt++] = mkstr(r, p + b, n - b))) return NULL;
    }
    tv *l = mklist(r, cnt);
    if (l && cnt) memcpy(l->u.list.items, parts, cnt * sizeof *parts);
    return l;
}

/* ---- arguments ---------------------------------------------------------------- */
typedef struct targs {
    tv **pos;          /* (npos) */
    size_t npos;
    const char **kwn;  /* (nkw) */
    tv **kwv;          /* (nkw) */
    size_t nkw;
} targs;

/* positional index i or keyword `name`; NULL when absent */
static tv *arg(const targs *a, size_t i, const char *name)
{
    if (i < a->npos) return a->pos[i];
    for (size_t k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name)) return a->kwv[k];
    return NULL;
}

static int check_nargs(trender *r, const tnode *at, const char *fn, const targs *a, size_t maxpos)
{
    if (a->npos > maxpos) {
        rerr(r, at, "%s() takes at most %zu positional arguments (%zu given)", fn, maxpos, a->npos);
        return -1;
    }
    return 0;
}

/* ---- forward -------------------------------------------------------------------- */
static tv *html_escape(trender *r, tv *v);
static tv *as_markup(trender *r, tv *v);
static int run_for(trender *r, tscope *s, const tnode *n, tv *it, int depth);
static tv *eval(trender *r, tscope *s, const tnode *n);
static int exec_body(trender *r, tscope *s, const tnode *body);
static tv *call_value(trender *r, tscope *s, const tnode *at, tv *fn, targs *a, tv *caller);
static tv *apply_filter(trender *r, tscope *s, const tnode *at, const char *name, tv *v, targs *a);
static int apply_test(trender *r, tscope *s, const tnode *at, const char *name, tv *v, targs *a);

/* ---- attribute / item access --------------------------------------------- */
static const char *const STR_METHODS[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "find", "rfind", "index", "rindex", "count", "join",
    "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal",
    "splitlines", "swapcase", "casefold", "format", "center", "ljust", "rjust", "zfill",
    "partition", "rpartition", "removeprefix", "removesuffix", "encode", "expandtabs", "istitle",
    "isidentifier", "isprintable", "isascii", "translate", "maketrans", "format_map", NULL};
static const char *const DICT_METHODS[] = {"get", "items", "keys", "values", "copy", "clear",
                                           "pop", "popitem", "setdefault", "update", "fromkeys", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", "append", "extend", "insert",
                                           "pop", "remove", "reverse", "sort", "clear", NULL};

static int in_names(const char *const *names, const char *s, size_t n)
{
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) return 1;
    return 0;
}

static tv *mkmethod(trender *r, tv *self, const char *name)
{
    tv *f = tarena_alloc(r->a, sizeof *f);
    if (!f) return oom(r);
    f->type = TV_FUNC;
    f->u.fn.kind = TFN_METHOD;
    f->u.fn.name = name;
    f->u.fn.self = self;
    return f;
}

static tv *loop_attr(trender *r, tv *lv, const char *name)
{
    tloop *l = lv->u.loop;
    if (!strcmp(name, "index")) return mkint(r, l->index0 + 1);
    if (!strcmp(name, "index0")) return mkint(r, l->index0);
    if (!strcmp(name, "revindex")) return mkint(r, l->length - l->index0);
    if (!strcmp(name, "revindex0")) return mkint(r, l->length - l->index0 - 1);
    if (!strcmp(name, "first")) return tv_bool(l->index0 == 0);
    if (!strcmp(name, "last")) return tv_bool(l->index0 == l->length - 1);
    if (!strcmp(name, "length")) return mkint(r, l->length);
    if (!strcmp(name, "depth")) return mkint(r, l->depth);
    if (!strcmp(name, "depth0")) return mkint(r, l->depth - 1);
    if (!strcmp(name, "previtem"))
        return l->index0 > 0 ? l->items[l->index0 - 1] : mkundef(r, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return l->index0 + 1 < l->length ? l->items[l->index0 + 1] : mkundef(r, "there is no next item");
    if (!strcmp(name, "cycle")) return mkmethod(r, lv, "cycle");
    if (!strcmp(name, "changed")) return mkmethod(r, lv, "changed");
    return mkundef(r, "'LoopContext' object has no attribute '%s'", name);
}

static tv *get_attr(trender *r, const tnode *at, tv *obj, const char *name)
{
    size_t nl = strlen(name);
    switch (obj->type) {
    case TV_UNDEF: return undef_error(r, at, obj);
    case TV_DICT: {
        if (in_names(DICT_METHODS, name, nl)) return mkmethod(r, obj, name);
        tv *v = tv_dict_get(obj, name, nl);
        return v ? v : mkundef(r, "'dict object' has no attribute '%s'", name);
    }
    case TV_NS: {
        if (tv_dict_get(obj, "\x01items", 6) && (!strcmp(name, "next") || !strcmp(name, "reset")))
            return mkmethod(r, obj, name); /* a cycler */
        tv *v = tv_dict_get(obj, name, nl);
        return v ? v : mkundef(r, "'Namespace' object has no attribute '%s'", name);
    }
    case TV_STR:
        if (in_names(STR_METHODS, name, nl)) return mkmethod(r, obj, name);
        return mkundef(r, "'str object' has no attribute '%s'", name);
    case TV_LIST:
        if (!obj->is_gen && in_names(LIST_METHODS, name, nl)) return mkmethod(r, obj, name);
        return mkundef(r, "'%s object' has no attribute '%s'", tv_type_name(obj), name);
    case TV_LOOP: return loop_attr(r, obj, name);
    default: return mkundef(r, "'%s object' has no attribute '%s'", tv_type_name(obj), name);
    }
}

static tv *get_item(trender *r, const tnode *at, tv *obj, tv *key)
{
    switch (obj->type) {
    case TV_UNDEF: return undef_error(r, at, obj);
    case TV_DICT:
    case TV_NS: {
        tv *v = tv_dict_getv(obj, key);
        if (v) return v;
        break;
    }
    case TV_LIST:
        if (obj->is_gen) return mkundef(r, "'generator' object is not subscriptable");
        if (is_intlike(key)) {
            int64_t i = ival(key), n = (int64_t)obj->u.list.n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj->u.list.items[i];
            return mkundef(r, "%s object has no element %lld", tv_type_name(obj), (long long)ival(key));
        }
        break;
    case TV_STR:
        if (is_intlike(key)) {
            int64_t n = (int64_t)tutf8_len(obj->u.str.s, obj->u.str.len), i = ival(key);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t b = cp_offset(obj, i), e = b;
                tutf8_next(obj->u.str.s, obj->u.str.len, &e);
                return mkstr(r, obj->u.str.s + b, e - b);
            }
            return mkundef(r, "str object has no element %lld", (long long)ival(key));
        }
        break;
    default: break;
    }
    if (key->type == TV_STR) {
        char *nm = tarena_strndup(r->a, key->u.str.s, key->u.str.len);
        if (!nm) return oom(r);
        if (obj->type == TV_DICT) {
            if (in_names(DICT_METHODS, nm, key->u.str.len)) return mkmethod(r, obj, nm);
            return mkundef(r, "'dict object' has no attribute '%s'", nm);
        }
        return get_attr(r, at, obj, nm);
    }
    tbuf b = {0};
    tv_write_repr(&b, key);
    tv *u = mkundef(r, "'%s object' has no attribute '%s'", tv_type_name(obj), b.p ? b.p : "");
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
            rerr(r, at, "slice indices must be integers or None");
            return -1;
        }
        st = ival(c);
        if (st == 0) {
            rerr(r, at, "slice step cannot be zero");
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
            rerr(r, at, "slice indices must be integers or None");
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

static tv *do_slice(trender *r, const tnode *at, tv *obj, tv *a, tv *b, tv *c)
{
    if (obj->type == TV_UNDEF) return undef_error(r, at, obj);
    if (obj->type == TV_LIST && obj->is_gen) {
        rerr(r, at, "'generator' object is not subscriptable");
        return NULL;
    }
    int64_t n;
    if (obj->type == TV_LIST) n = (int64_t)obj->u.list.n;
    else if (obj->type == TV_STR) n = (int64_t)tutf8_len(obj->u.str.s, obj->u.str.len);
    else { /* jinja2 compiles slices to plain Python subscripts: a TypeError */
        rerr(r, at, "'%s' object is not subscriptable", tv_type_name(obj));
        return NULL;
    }
    int64_t st, sp, stp;
    if (slice_indices(r, at, a, b, c, n, &st, &sp, &stp)) return NULL;
    int64_t cnt = 0;
    if (stp > 0 && sp > st) cnt = (sp - st + stp - 1) / stp;
    if (stp < 0 && st > sp) cnt = (st - sp + (-stp) - 1) / (-stp);
    if (obj->type == TV_LIST) {
        tv *l = mklist(r, (size_t)cnt);
        if (!l) return NULL;
        l->is_tuple = obj->is_tuple;
        for (int64_t k = 0; k < cnt; k++) l->u.list.items[k] = obj->u.list.items[st + k * stp];
        return l;
    }
    /* string: map code point index -> byte offset once */
    size_t *offs = malloc(((size_t)n + 1) * sizeof *offs); /* (n+1) byte offsets */
    if (!offs) return oom(r);
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
    return buf_to_str(r, &bf);
}

/* ---- operators ----------------------------------------------------------------- */
static tv *type_error(trender *r, const tnode *at, const char *op, tv *a, tv *b)
{
    if (a->type == TV_UNDEF) return undef_error(r, at, a);
    if (b && b->type == TV_UNDEF) return undef_error(r, at, b);
    if (b)
        rerr(r, at, "unsupported operand type(s) for %s: '%s' and '%s'", op, tv_type_name(a), tv_type_name(b));
    else rerr(r, at, "bad operand type for unary %s: '%s'", op, tv_type_name(a));
    return NULL;
}

static tv *repeat(trender *r, const tnode *at, tv *seq, int64_t k)
{
    if (k < 0) k = 0;
    if (seq->type == TV_STR) {
        if (seq->u.str.len && (uint64_t)k > r->lim.max_output / seq->u.str.len) {
            rerr(r, at, "string repetition too large");
            return NULL;
        }
        tbuf b = {0};
        for (int64_t i = 0; i < k; i++) tbuf_put(&b, seq->u.str.s, seq->u.str.len);
        return buf_to_str(r, &b);
    }
    if (seq->u.list.n && (uint64_t)k > (r->lim.max_memory / 8) / seq->u.list.n) {
        rerr(r, at, "list repetition too large");
        return NULL;
    }
    tv *l = mklist(r, seq->u.list.n * (size_t)k);
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

static tv *format_percent(trender *r, const tnode *at, tv *fmt, tv *args);

/* Python float ** float: errors where CPython raises instead of giving inf
 * or a complex number */
static tv *float_pow(trender *r, const tnode *at, double x, double y)
{
    if (x == 0 && y < 0) {
        rerr(r, at, "0.0 cannot be raised to a negative power");
        return NULL;
    }
    if (x < 0 && isfinite(y) && y != floor(y)) {
        rerr(r, at, "negative number raised to a fractional power gives a complex number (not supported)");
        return NULL;
    }
    double z = pow(x, y);
    if (isinf(z) && isfinite(x) && isfinite(y)) {
        rerr(r, at, "(34, 'Numerical result out of range')");
        return NULL;
    }
    return mkfloat(r, z);
}

static tv *binop(trender *r, const tnode *at, int op, tv *a, tv *b)
{
    static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
    /* str % Undefined: Python treats the Undefined (it has __getitem__) as the argument */
    if (op == TOP_MOD && a->type == TV_STR && b->type == TV_UNDEF) return format_percent(r, at, a, b);
    if (a->type == TV_UNDEF) return undef_error(r, at, a);
    if (b->type == TV_UNDEF) return undef_error(r, at, b);
    if (is_num(a) && is_num(b)) {
        int fl = a->type == TV_FLOAT || b->type == TV_FLOAT;
        if (!fl) {
            int64_t x = ival(a), y = ival(b), z;
            switch (op) {
            case TOP_ADD:
                if (__builtin_add_overflow(x, y, &z)) break;
                return mkint(r, z);
            case TOP_SUB:
                if (__builtin_sub_overflow(x, y, &z)) break;
                return mkint(r, z);
            case TOP_MUL:
                if (__builtin_mul_overflow(x, y, &z)) break;
                return mkint(r, z);
            case TOP_DIV:
                if (y == 0) goto zerodiv;
                return mkfloat(r, (double)x / (double)y);
            case TOP_FLOORDIV:
            case TOP_MOD: {
                if (y == 0) goto zerodiv;
                if (x == INT64_MIN && y == -1) break;
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return mkint(r, op == TOP_MOD ? m : q);
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
                return mkint(r, res);
            }
            }
            rerr(r, at, "integer overflow in '%s' (sglc integers are 64-bit)", names[op]);
            return NULL;
        }
        double x = fval(a), y = fval(b);
        switch (op) {
        case TOP_ADD: return mkfloat(r, x + y);
        case TOP_SUB: return mkfloat(r, x - y);
        case TOP_MUL: return mkfloat(r, x * y);
        case TOP_DIV:
            if (y == 0) goto zerodiv;
            return mkfloat(r, x / y);
        case TOP_FLOORDIV: {
            if (y == 0) goto zerodiv;
            /* CPython's float floor division (via fmod, not floor(x / y)) */
            double mod = fmod(x, y), div = (x - mod) / y;
            if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
            double fd = floor(div);
            if (div - fd > 0.5) fd += 1.0;
            if (div == 0) fd = copysign(0.0, x / y);
            return mkfloat(r, fd);
        }
        case TOP_MOD: {
            if (y == 0) goto zerodiv;
            double m = py_fmod(x, y);
            if (m == 0) m = copysign(0.0, y);
            return mkfloat(r, m);
        }
        case TOP_POW: return float_pow(r, at, x, y);
        }
    }
    if (op == TOP_ADD) {
        if (a->type == TV_STR && b->type == TV_STR && (a->is_markup || b->is_markup)) {
            /* Markup + str escapes the plain operand */
            tv *x = html_escape(r, a), *y = x ? html_escape(r, b) : NULL;
            if (!y) return NULL;
            tbuf bf = {0};
            tbuf_put(&bf, x->u.str.s, x->u.str.len);
            tbuf_put(&bf, y->u.str.s, y->u.str.len);
            return as_markup(r, buf_to_str(r, &bf));
        }
        if (a->type == TV_STR && b->type == TV_STR) {
            tbuf bf = {0};
            tbuf_put(&bf, a->u.str.s, a->u.str.len);
            tbuf_put(&bf, b->u.str.s, b->u.str.len);
            return buf_to_str(r, &bf);
        }
        if (a->type == TV_LIST && b->type == TV_LIST && a->is_tuple == b->is_tuple && !a->is_gen &&
            !b->is_gen) {
            tv *l = mklist(r, a->u.list.n + b->u.list.n);
            if (!l) return NULL;
            l->is_tuple = a->is_tuple;
            memcpy(l->u.list.items, a->u.list.items, a->u.list.n * sizeof(tv *));
            memcpy(l->u.list.items + a->u.list.n, b->u.list.items, b->u.list.n * sizeof(tv *));
            return l;
        }
        if (a->type == TV_STR) {
            rerr(r, at, "can only concatenate str (not \"%s\") to str", tv_type_name(b));
            return NULL;
        }
    }
    if (op == TOP_MUL) {
        if ((a->type == TV_STR || (a->type == TV_LIST && !a->is_gen)) && is_intlike(b)) {
            tv *x = repeat(r, at, a, ival(b));
            return a->type == TV_STR && a->is_markup ? as_markup(r, x) : x;
        }
        if ((b->type == TV_STR || (b->type == TV_LIST && !b->is_gen)) && is_intlike(a)) {
            tv *x = repeat(r, at, b, ival(a));
            return b->type == TV_STR && b->is_markup ? as_markup(r, x) : x;
        }
    }
    if (op == TOP_MOD && a->type == TV_STR) return format_percent(r, at, a, b);
    return type_error(r, at, names[op], a, b);
zerodiv:
    rerr(r, at, "division by zero");
    return NULL;
}

static int contains(trender *r, const tnode *at, tv *item, tv *seq)
{
    switch (seq->type) {
    case TV_STR:
        if (item->type != TV_STR) {
            if (item->type == TV_UNDEF) undef_error(r, at, item);
            else rerr(r, at, "'in <string>' requires string as left operand, not %s", tv_type_name(item));
            return -1;
        }
        return memmem_s(seq->u.str.s, seq->u.str.len, item->u.str.s, item->u.str.len) != NULL;
    case TV_LIST:
        if (seq->u.list.err) {
            rerr(r, at, "%s", seq->u.list.err);
            return -1;
        }
        for (size_t i = 0; i < seq->u.list.n; i++)
            if (tv_equal(seq->u.list.items[i], item)) return 1;
        return 0;
    case TV_DICT:
    case TV_NS:
        if ((item->type == TV_LIST && !item->is_tuple) || item->type == TV_DICT || item->type == TV_NS) {
            rerr(r, at, "unhashable type: '%s'", tv_type_name(item));
            return -1;
        }
        return tv_dict_getv(seq, item) != NULL;
    case TV_UNDEF: return 0;
    default: rerr(r, at, "argument of type '%s' is not iterable", tv_type_name(seq)); return -1;
    }
}

static tv *compare(trender *r, const tnode *at, int op, tv *a, tv *b)
{
    int c;
    switch (op) {
    case TOP_EQ: return tv_bool(tv_equal(a, b));
    case TOP_NE: return tv_bool(!tv_equal(a, b));
    case TOP_IN:
    case TOP_NOTIN: {
        int k = contains(r, at, a, b);
        if (k < 0) return NULL;
        return tv_bool(op == TOP_IN ? k : !k);
    }
    default:
        if (a->type == TV_UNDEF) return undef_error(r, at, a);
        if (b->type == TV_UNDEF) return undef_error(r, at, b);
        if (tv_compare(a, b, &c) < 0) {
            static const char *s[] = {"<", "<=", ">", ">="};
            rerr(r, at, "'%s' not supported between instances of '%s' and '%s'", s[op - TOP_LT],
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
static tv *format_percent(trender *r, const tnode *at, tv *fmt, tv *args)
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
                rerr(r, at, "format key '%.*s' not found", (int)(e - i - 1), p + i + 1);
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
                rerr(r, at, "not enough arguments for format string");
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
        rerr(r, at, "not all arguments converted during string formatting");
        return NULL;
    }
    return buf_to_str(r, &b);
bad:
    tbuf_free(&b);
    rerr(r, at, "unsupported format string");
    return NULL;
typeerr:
    tbuf_free(&b);
    rerr(r, at, "format requires a number, not %s", tv_type_name(items[k ? k - 1 : 0]));
    return NULL;
}

/* ---- strftime_now ------------------------------------------------------------ */
/* The current local time, or SGLC_FIXED_DATE ("YYYY-MM-DD[THH:MM[:SS]]")
 * when set: tests pin the date so output compares with the reference. */
static tv *strftime_now(trender *r, const tnode *at, tv *fmt)
{
    if (fmt->type != TV_STR) {
        rerr(r, at, "strftime_now() argument must be str");
        return NULL;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *fixed = getenv("SGLC_FIXED_DATE");
    if (fixed && *fixed) {
        int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
        if (sscanf(fixed, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &se) < 3) {
            rerr(r, at, "SGLC_FIXED_DATE must look like 2024-07-26 or 2024-07-26T12:00:00");
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
    if (!f) return oom(r);
    char out[1024];
    size_t k = fmt->u.str.len ? strftime(out, sizeof out, f, &tm) : 0;
    if (k == 0 && fmt->u.str.len) {
        rerr(r, at, "strftime_now(): format too long or invalid");
        return NULL;
    }
    return mkstr(r, out, k);
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
        rerr(r, at, "macro calls nested too deeply (limit %d)", r->lim.max_depth);
        return NULL;
    }
    tscope *s = scope_new(r, fn->u.fn.scope);
    if (!s) return oom(r);
    size_t np = m->nn;
    tv *varargs = mklist(r, a->npos > np ? a->npos - np : 0);
    tv *kwargs = tv_dict(r->a, 4);
    if (!varargs || !kwargs) return oom(r);
    varargs->is_tuple = 1;
    if (a->npos > np && !node_uses_name(m->b, "varargs")) {
        rerr(r, at, "macro '%s' takes not more than %zu argument(s)", m->name ? m->name : "caller", np);
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
        if (!v) v = mkundef(r, "parameter '%s' was not provided", m->names[i]);
        if (!v || scope_set(r, s, m->names[i], v)) return oom(r);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        int known = 0;
        for (size_t i = 0; i < np; i++)
            if (!strcmp(a->kwn[k], m->names[i])) known = 1;
        if (!known && !node_uses_name(m->b, "kwargs")) {
            rerr(r, at, "macro '%s' takes no keyword argument '%s'", m->name ? m->name : "caller", a->kwn[k]);
            return NULL;
        }
        if (!known && tv_dict_set(r->a, kwargs, tv_str(r->a, a->kwn[k], strlen(a->kwn[k])), a->kwv[k]))
            return oom(r);
    }
    if (scope_set(r, s, "varargs", varargs) || scope_set(r, s, "kwargs", kwargs)) return oom(r);
    if (caller && !node_uses_name(m->b, "caller")) {
        rerr(r, at, "macro '%s' was invoked with two values for the special caller argument", m->name);
        return NULL;
    }
    if (caller && scope_set(r, s, "caller", caller)) return oom(r);
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
    return buf_to_str(r, &buf);
}


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
        rerr(r, at, "unsupported format string passed to %s.__format__", tv_type_name(v));
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
    rerr(r, at, "invalid format specifier");
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
                rerr(r, at, "KeyError: '%.*s'", (int)(ne - fb), p + fb);
                return NULL;
            }
        }
        while (ne < fe && (p[ne] == '.' || p[ne] == '[')) {
            size_t ks = ne + 1, ke = ks;
            if (p[ne] == '.') {
                while (ke < fe && p[ke] != '.' && p[ke] != '[' && p[ke] != '!' && p[ke] != ':') ke++;
                char *nm = tarena_strndup(r->a, p + ks, ke - ks);
                if (!nm || !(v = get_attr(r, at, v, nm))) goto fail;
                ne = ke;
            } else {
                while (ke < fe && p[ke] != ']') ke++;
                if (ke >= fe) goto bad;
                int digits = ke > ks;
                for (size_t k = ks; k < ke; k++)
                    if (p[k] < '0' || p[k] > '9') digits = 0;
                tv *key = digits ? mkint(r, strtoll(p + ks, NULL, 10)) : mkstr(r, p + ks, ke - ks);
                if (!key || !(v = get_item(r, at, v, key))) goto fail;
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
            undef_error(r, at, v);
            return NULL;
        }
        if (conv == 'r' || conv == 's' || conv == 'a') {
            tbuf t = {0};
            if (conv == 's') tv_write_str(&t, v);
            else tv_write_repr(&t, v);
            tv *sv = buf_to_str(r, &t);
            if (!sv) goto fail;
            v = sv;
        } else if (conv) goto bad;
        if (format_field(r, at, &b, v, spec, sl)) goto fail;
        i = e;
    }
    return buf_to_str(r, &b);
bad:
    tbuf_free(&b);
    rerr(r, at, "invalid format string");
    return NULL;
range:
    tbuf_free(&b);
    rerr(r, at, "IndexError: Replacement index out of range for positional args tuple");
    return NULL;
fail:
    tbuf_free(&b);
    return NULL;
}

static tv *call_method(trender *r, const tnode *at, tv *fn, targs *a)
{
    tv *self = fn->u.fn.self;
    const char *m = fn->u.fn.name;
    if (self->type == TV_LOOP && !strcmp(m, "changed")) {
        tv *t = mklist(r, a->npos);
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
        if (!items || !pos) return mkundef(r, "not a cycler");
        int64_t p = m[0] == 'r' ? 0 : pos->u.i;
        tv *cur = items->u.list.items[p];
        tv *np = mkint(r, m[0] == 'r' ? 0 : (p + 1) % (int64_t)items->u.list.n);
        tv *kp = mkstr(r, "\x01pos", 4), *kc = mkstr(r, "current", 7);
        if (!np || !kp || !kc || tv_dict_set(r->a, self, kp, np)) return oom(r);
        tv *nc = items->u.list.items[np->u.i];
        if (tv_dict_set(r->a, self, kc, nc)) return oom(r);
        return m[0] == 'r' ? &tv_none_v : cur;
    }
    if (self->type == TV_NS && !strcmp(m, "joiner")) {
        tv *sep = tv_dict_get(self, "\x01sep", 4), *used = tv_dict_get(self, "\x01used", 5);
        if (!sep) return mkundef(r, "not a joiner");
        if (used) return sep;
        tv *k = mkstr(r, "\x01used", 5);
        if (!k || tv_dict_set(r->a, self, k, &tv_true_v)) return oom(r);
        return mkstr(r, "", 0);
    }
    if (self->type == TV_LOOP && !strcmp(m, "cycle")) {
        if (a->npos == 0) {
            rerr(r, at, "no items for cycling given");
            return NULL;
        }
        return a->pos[self->u.loop->index0 % (int64_t)a->npos];
    }
    if (self->type == TV_DICT) {
        if (!strcmp(m, "get")) {
            tv *k = arg(a, 0, NULL), *d = arg(a, 1, NULL);
            if (!k) {
                rerr(r, at, "get expected at least 1 argument, got 0");
                return NULL;
            }
            tv *v = tv_dict_getv(self, k);
            return v ? v : d ? d : &tv_none_v;
        }
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            tv *l = mklist(r, self->u.dict.n);
            if (!l) return NULL;
            for (size_t i = 0; i < self->u.dict.n; i++) {
                if (m[0] == 'k') l->u.list.items[i] = self->u.dict.keys[i];
                else if (m[0] == 'v') l->u.list.items[i] = self->u.dict.vals[i];
                else {
                    tv *t = mklist(r, 2);
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
            if (!d) return oom(r);
            for (size_t i = 0; i < self->u.dict.n; i++)
                if (tv_dict_set(r->a, d, self->u.dict.keys[i], self->u.dict.vals[i])) return oom(r);
            return d;
        }
        rerr(r, at, "access to attribute '%s' of 'dict' object is unsafe (the sandbox is immutable)", m);
        return NULL;
    }
    if (self->type == TV_LIST) {
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            tv *x = arg(a, 0, NULL);
            if (!x) {
                rerr(r, at, "%s() takes exactly one argument", m);
                return NULL;
            }
            int64_t cnt = 0;
            for (size_t i = 0; i < self->u.list.n; i++)
                if (tv_equal(self->u.list.items[i], x)) {
                    if (m[0] == 'i') return mkint(r, (int64_t)i);
                    cnt++;
                }
            if (m[0] == 'i') {
                rerr(r, at, "value is not in list");
                return NULL;
            }
            return mkint(r, cnt);
        }
        if (!strcmp(m, "copy")) return self;
        rerr(r, at, "access to attribute '%s' of '%s' object is unsafe (the sandbox is immutable)", m,
             tv_type_name(self));
        return NULL;
    }
    /* str methods; Markup's case and strip methods return Markup */
    if (self->is_markup && (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip") ||
                            !strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") ||
                            !strcmp(m, "capitalize") || !strcmp(m, "swapcase"))) {
        tv plain = *self;
        plain.is_markup = 0;
        tv pf = *fn;
        pf.u.fn.self = &plain;
        return as_markup(r, call_method(r, at, &pf, a));
    }
    tv *a0 = arg(a, 0, NULL), *a1 = arg(a, 1, NULL);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        if (check_nargs(r, at, m, a, 1)) return NULL;
        if (a0 && a0->type != TV_STR && a0->type != TV_NONE) {
            rerr(r, at, "%s arg must be None or str", m);
            return NULL;
        }
        return py_strip(r, self, a0, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        tv *sep = arg(a, 0, "sep"), *mx = arg(a, 1, "maxsplit");
        if (mx && !is_intlike(mx)) {
            rerr(r, at, "maxsplit must be an integer");
            return NULL;
        }
        return py_split(r, at, self, sep, mx ? ival(mx) : -1, m[0] == 'r');
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (!a0) {
            rerr(r, at, "%s() takes at least 1 argument (0 given)", m);
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
                rerr(r, at, "%s first arg must be str or a tuple of str, not %s", m, tv_type_name(c));
                return NULL;
            }
            size_t L = c->u.str.len, N = self->u.str.len;
            if (L > N) continue;
            const char *p = m[0] == 's' ? self->u.str.s : self->u.str.s + N - L;
            if (!memcmp(p, c->u.str.s, L)) return &tv_true_v;
        }
        return &tv_false_v;
    }
    if (!strcmp(m, "upper")) return py_case(r, self, 1);
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return py_case(r, self, 0);
    if (!strcmp(m, "capitalize")) return py_case(r, self, 2);
    if (!strcmp(m, "title")) return py_case(r, self, 3);
    if (!strcmp(m, "swapcase")) return py_case(r, self, 4);
    if (!strcmp(m, "replace")) {
        tv *cnt = arg(a, 2, "count");
        if (!a0 || !a1) {
            rerr(r, at, "replace() takes at least 2 arguments");
            return NULL;
        }
        return py_replace(r, at, self, a0, a1, cnt && is_intlike(cnt) ? ival(cnt) : -1);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex") ||
        !strcmp(m, "count")) {
        if (!a0 || a0->type != TV_STR) {
            rerr(r, at, "%s() argument must be str", m);
            return NULL;
        }
        const char *h = self->u.str.s;
        size_t hn = self->u.str.len, nn = a0->u.str.len;
        if (!strcmp(m, "count")) {
            if (nn == 0) return mkint(r, (int64_t)tutf8_len(h, hn) + 1);
            int64_t c = 0;
            size_t i = 0;
            const char *f;
            while ((f = memmem_s(h + i, hn - i, a0->u.str.s, nn))) {
                c++;
                i = (size_t)(f - h) + nn;
            }
            return mkint(r, c);
        }
        const char *f = NULL;
        if (m[0] == 'r') {
            for (size_t k = hn >= nn ? hn - nn + 1 : 0; k-- > 0;)
                if (!memcmp(h + k, a0->u.str.s, nn)) {
                    f = h + k;
                    break;
                }
        } else f = memmem_s(h, hn, a0->u.str.s, nn);
        if (!f) {
            if (strstr(m, "index")) {
                rerr(r, at, "substring not found");
                return NULL;
            }
            return mkint(r, -1);
        }
        return mkint(r, (int64_t)tutf8_len(h, (size_t)(f - h)));
    }
    if (!strcmp(m, "join")) {
        if (!a0) {
            rerr(r, at, "join() takes exactly one argument");
            return NULL;
        }
        tv *l = iter_list(r, at, a0);
        if (!l) return NULL;
        tbuf b = {0};
        for (size_t i = 0; i < l->u.list.n; i++) {
            if (l->u.list.items[i]->type != TV_STR) {
                tbuf_free(&b);
                rerr(r, at, "sequence item %zu: expected str instance, %s found", i,
                     tv_type_name(l->u.list.items[i]));
                return NULL;
            }
            if (i) tbuf_put(&b, self->u.str.s, self->u.str.len);
            tbuf_put(&b, l->u.list.items[i]->u.str.s, l->u.list.items[i]->u.str.len);
        }
        return buf_to_str(r, &b);
    }
    if (!strncmp(m, "is", 2)) {
        size_t i = 0, n = self->u.str.len;
        if (n == 0) return &tv_false_v;
        int any_cased = 0, all = 1;
        while (i < n) {
            uint32_t c = tutf8_next(self->u.str.s, n, &i);
            utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
            int alpha = k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
                        k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
            int digit = k == UTF8PROC_CATEGORY_ND;
            int ok = 1;
            if (!strcmp(m, "isdigit") || !strcmp(m, "isdecimal")) ok = digit;
            else if (!strcmp(m, "isnumeric")) ok = digit || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
            else if (!strcmp(m, "isalpha")) ok = alpha;
            else if (!strcmp(m, "isalnum")) ok = alpha || digit;
            else if (!strcmp(m, "isspace")) ok = tpy_isspace(c);
            else if (!strcmp(m, "isascii")) ok = c < 0x80;
            else if (!strcmp(m, "isupper")) {
                if (k == UTF8PROC_CATEGORY_LL) ok = 0;
                if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) any_cased = 1;
            } else if (!strcmp(m, "islower")) {
                if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) ok = 0;
                if (k == UTF8PROC_CATEGORY_LL) any_cased = 1;
            } else {
                rerr(r, at, "str.%s() is not supported", m);
                return NULL;
            }
            if (!ok) all = 0;
        }
        if (!strcmp(m, "isupper") || !strcmp(m, "islower")) return tv_bool(all && any_cased);
        return tv_bool(all);
    }
    if (!strcmp(m, "format")) return py_str_format(r, at, self, a);
    if (!strcmp(m, "splitlines")) {
        tv *ke = arg(a, 0, "keepends");
        return py_splitlines(r, self, ke && tv_truthy(ke));
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        if (!a0 || a0->type != TV_STR) {
            rerr(r, at, "%s() argument must be str", m);
            return NULL;
        }
        size_t L = a0->u.str.len, N = self->u.str.len;
        if (L <= N) {
            if (m[6] == 'p' && !memcmp(self->u.str.s, a0->u.str.s, L)) return mkstr(r, self->u.str.s + L, N - L);
            if (m[6] == 's' && !memcmp(self->u.str.s + N - L, a0->u.str.s, L)) return mkstr(r, self->u.str.s, N - L);
        }
        return self;
    }
    rerr(r, at, "str.%s() is not supported by sglc's template engine", m);
    return NULL;
}

static tv *call_global(trender *r, tscope *s, const tnode *at, const char *g, targs *a)
{
    (void)s;
    if (!strcmp(g, "raise_exception")) {
        tv *m = arg(a, 0, "message");
        tbuf b = {0};
        if (m) tv_write_str(&b, m);
        rerr(r, NULL, "%s", b.p ? b.p : "");
        tbuf_free(&b);
        return NULL;
    }
    if (!strcmp(g, "strftime_now")) {
        tv *f = arg(a, 0, "format");
        if (!f) {
            rerr(r, at, "strftime_now() missing 1 required positional argument: 'format'");
            return NULL;
        }
        return strftime_now(r, at, f);
    }
    if (!strcmp(g, "range")) {
        int64_t v[3] = {0, 0, 1};
        if (a->npos < 1 || a->npos > 3 || a->nkw) {
            rerr(r, at, "range expected 1 to 3 integer arguments");
            return NULL;
        }
        for (size_t i = 0; i < a->npos; i++) {
            if (!is_intlike(a->pos[i])) {
                if (a->pos[i]->type == TV_UNDEF) return undef_error(r, at, a->pos[i]);
                rerr(r, at, "'%s' object cannot be interpreted as an integer", tv_type_name(a->pos[i]));
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
            rerr(r, at, "range() arg 3 must not be zero");
            return NULL;
        }
        int64_t cnt = 0;
        if (v[2] > 0 && v[1] > v[0]) cnt = (v[1] - v[0] + v[2] - 1) / v[2];
        if (v[2] < 0 && v[0] > v[1]) cnt = (v[0] - v[1] - v[2] - 1) / (-v[2]);
        if (cnt > 100000) {
            rerr(r, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
            return NULL;
        }
        tv *l = mklist(r, (size_t)cnt);
        if (!l) return NULL;
        for (int64_t i = 0; i < cnt; i++)
            if (!(l->u.list.items[i] = mkint(r, v[0] + i * v[2]))) return NULL;
        return l;
    }
    if (!strcmp(g, "cycler") || !strcmp(g, "joiner")) {
        /* state lives in a namespace with \x01-prefixed keys (not reachable by name) */
        tv *d = tv_dict(r->a, 4);
        if (!d) return oom(r);
        d->type = TV_NS;
        if (g[0] == 'c') {
            if (a->npos == 0) {
                rerr(r, at, "cycler() needs at least one item");
                return NULL;
            }
            tv *items = mklist(r, a->npos);
            if (!items) return NULL;
            memcpy(items->u.list.items, a->pos, a->npos * sizeof(tv *));
            if (tv_dict_set(r->a, d, mkstr(r, "\x01items", 6), items) ||
                tv_dict_set(r->a, d, mkstr(r, "\x01pos", 4), mkint(r, 0)) ||
                tv_dict_set(r->a, d, mkstr(r, "current", 7), a->pos[0]))
                return oom(r);
            return d;
        }
        tv *sep = arg(a, 0, "sep");
        if (!sep && !(sep = mkstr(r, ", ", 2))) return NULL;
        if (tv_dict_set(r->a, d, mkstr(r, "\x01sep", 4), sep)) return oom(r);
        return mkmethod(r, d, "joiner");
    }
    if (!strcmp(g, "namespace") || !strcmp(g, "dict")) {
        tv *d = tv_dict(r->a, 8);
        if (!d) return oom(r);
        if (!strcmp(g, "namespace")) d->type = TV_NS;
        for (size_t i = 0; i < a->npos; i++) {
            tv *src = a->pos[i];
            if (src->type != TV_DICT && src->type != TV_NS) {
                rerr(r, at, "%s() positional argument must be a mapping", g);
                return NULL;
            }
            for (size_t k = 0; k < src->u.dict.n; k++)
                if (tv_dict_set(r->a, d, src->u.dict.keys[k], src->u.dict.vals[k])) return oom(r);
        }
        for (size_t k = 0; k < a->nkw; k++) {
            tv *key = mkstr(r, a->kwn[k], strlen(a->kwn[k]));
            if (!key || tv_dict_set(r->a, d, key, a->kwv[k])) return oom(r);
        }
        return d;
    }
    rerr(r, at, "'%s' is not callable", g);
    return NULL;
}

static tv *call_value(trender *r, tscope *s, const tnode *at, tv *fn, targs *a, tv *caller)
{
    if (step(r, at)) return NULL;
    if (fn->type == TV_UNDEF) return undef_error(r, at, fn);
    if (fn->type == TV_LOOP) {
        tloop *lp = fn->u.loop;
        if (lp->node->op != 2) {
            rerr(r, at, "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
            return NULL;
        }
        if (a->npos != 1 || a->nkw) {
            rerr(r, at, "loop() takes exactly one iterable");
            return NULL;
        }
        if (++r->depth > r->lim.max_depth) {
            rerr(r, at, "recursive loop nested too deeply (limit %d)", r->lim.max_depth);
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
        return buf_to_str(r, &buf);
    }
    if (fn->type != TV_FUNC) {
        rerr(r, at, "'%s' object is not callable", tv_type_name(fn));
        return NULL;
    }
    switch (fn->u.fn.kind) {
    case TFN_METHOD: return call_method(r, at, fn, a);
    case TFN_GLOBAL: return call_global(r, s, at, fn->u.fn.name, a);
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
        oom(r);
        return -1;
    }
    for (size_t i = 0; i < n->n1; i++)
        if (!(a->pos[i] = eval(r, s, n->l1[i]))) return -1;
    for (size_t i = 0; i < n->n2; i++)
        if (!(a->kwv[i] = eval(r, s, n->l2[i]))) return -1;
    return 0;
}

/* ---- filters ------------------------------------------------------------------ */
/* attribute path "a.b.0" of an item, as Jinja's make_attrgetter */
static tv *attr_path(trender *r, const tnode *at, tv *item, tv *path)
{
    if (is_intlike(path)) return get_item(r, at, item, path);
    if (path->type != TV_STR) {
        rerr(r, at, "attribute must be a string");
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
        if (digits) key = mkint(r, strtoll(p + b, NULL, 10));
        else key = mkstr(r, p + b, e - b);
        if (!key) return NULL;
        cur = get_item(r, at, cur, key);
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
    return py_case(r, v, 0);
}

/* insertion sort on a copy (stable; lists are small) with key transform */
static tv *sorted_list(trender *r, const tnode *at, tv *l, int reverse, int case_sensitive, tv *attribute)
{
    size_t n = l->u.list.n;
    tv *out = mklist(r, n);
    tv **keys = tarena_alloc(r->a, (n + 1) * sizeof *keys);
    if (!out || !keys) return oom(r);
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
                rerr(r, at, "'<' not supported between instances of '%s' and '%s'", tv_type_name(k),
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

static tv *as_markup(trender *r, tv *v)
{
    if (!v || v->type != TV_STR || v->is_markup) return v;
    tv *m = tv_str_nocopy(r->a, v->u.str.s, v->u.str.len);
    if (!m) return oom(r);
    m->is_markup = 1;
    return m;
}

/* markupsafe.escape(v): Markup stays as is, anything else is str()'d and escaped */
static tv *html_escape(trender *r, tv *v)
{
    if (v->type == TV_STR && v->is_markup) return v;
    tv *s = to_str(r, v);
    if (!s) return NULL;
    tbuf b = {0};
    for (size_t i = 0; i < s->u.str.len; i++) {
        char c = s->u.str.s[i];
        switch (c) {
        case '&': tbuf_puts(&b, "&amp;"); break;
        case '<': tbuf_puts(&b, "&lt;"); break;
        case '>': tbuf_puts(&b, "&gt;"); break;
        case '"': tbuf_puts(&b, "&#34;"); break;
        case '\'': tbuf_puts(&b, "&#39;"); break;
        default: tbuf_putc(&b, c);
        }
    }
    return as_markup(r, buf_to_str(r, &b));
}

static tv *filter_select(trender *r, tscope *s, const tnode *at, tv *v, targs *a, int attr_mode, int reject)
{
    /* jinja2 iterates only `if seq:` - a falsy value (0, false, none) gives nothing */
    tv *lz;
    if (tv_truthy(v) && lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
    tv *l = tv_truthy(v) ? iter_list(r, at, v) : mklist(r, 0);
    if (!l) return NULL;
    size_t off = attr_mode ? 1 : 0;
    tv *attrname = attr_mode ? arg(a, 0, NULL) : NULL;
    if (attr_mode && !attrname) {
        rerr(r, at, "missing parameter for attribute name");
        return NULL;
    }
    tv *testname = arg(a, off, NULL);
    targs ta = {0};
    if (a->npos > off + 1) {
        ta.pos = a->pos + off + 1;
        ta.npos = a->npos - off - 1;
    }
    tv *out = mklist(r, l->u.list.n);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < l->u.list.n; i++) {
        tv *item = l->u.list.items[i], *x = item;
        if (attr_mode && !(x = attr_path(r, at, item, attrname))) return NULL;
        int ok;
        if (!testname) ok = tv_truthy(x);
        else {
            if (testname->type != TV_STR) {
                rerr(r, at, "test name must be a string");
                return NULL;
            }
            char *tn = tarena_strndup(r->a, testname->u.str.s, testname->u.str.len);
            if (!tn) return oom(r);
            ok = apply_test(r, s, at, tn, x, &ta);
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
    tv *v = arg(a, i, name);
    return v ? tv_truthy(v) : def;
}

static tv *filter_int(trender *r, tv *v, tv *def)
{
    tv *d = def ? def : NULL;
    switch (v->type) {
    case TV_INT: return v;
    case TV_BOOL: return mkint(r, v->u.b);
    case TV_FLOAT:
        if (v->u.f != v->u.f || isinf(v->u.f)) break;
        return mkint(r, (int64_t)v->u.f);
    case TV_STR: {
        char *s = tarena_strndup(r->a, v->u.str.s, v->u.str.len), *e;
        if (!s) return oom(r);
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        long long x = strtoll(s, &e, 10);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (e != s && !*e) return mkint(r, x);
        double f = strtod(s, &e);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (e != s && !*e && f == f && !isinf(f)) return mkint(r, (int64_t)f);
        break;
    }
    default: break;
    }
    return d ? d : mkint(r, 0);
}

static tv *filter_float(trender *r, tv *v, tv *def)
{
    switch (v->type) {
    case TV_FLOAT: return v;
    case TV_INT:
    case TV_BOOL: return mkfloat(r, (double)ival(v));
    case TV_STR: {
        char *s = tarena_strndup(r->a, v->u.str.s, v->u.str.len), *e;
        if (!s) return oom(r);
        double f = strtod(s, &e);
        while (*e == ' ' || *e == '\t' || *e == '\n') e++;
        if (e != s && !*e) return mkfloat(r, f);
        break;
    }
    default: break;
    }
    return def ? def : mkfloat(r, 0.0);
}

static tv *filter_indent(trender *r, const tnode *at, tv *v, targs *a)
{
    tv *w = arg(a, 0, "width");
    int first = get_bool_arg(a, 1, "first", 0), blank = get_bool_arg(a, 2, "blank", 0);
    tbuf ind = {0};
    if (!w) tbuf_puts(&ind, "    ");
    else if (w->type == TV_STR) tbuf_put(&ind, w->u.str.s, w->u.str.len);
    else if (is_intlike(w)) {
        for (int64_t i = 0; i < ival(w) && i < 4096; i++) tbuf_putc(&ind, ' ');
    } else {
        rerr(r, at, "indent width must be an int or str");
        return NULL;
    }
    tv *s = to_str(r, v);
    if (!s) {
        tbuf_free(&ind);
        return NULL;
    }
    tbuf src = {0};
    tbuf_put(&src, s->u.str.s, s->u.str.len);
    tbuf_putc(&src, '\n');
    tv *sv = buf_to_str(r, &src);
    tv *lines = sv ? py_splitlines(r, sv, 0) : NULL;
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
    return buf_to_str(r, &b);
}

static tv *apply_filter(trender *r, tscope *s, const tnode *at, const char *f, tv *v, targs *a)
{
    if (step(r, at)) return NULL;
    /* filters that accept Undefined specially */
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        tv *d = arg(a, 0, "default_value");
        int boolean = get_bool_arg(a, 1, "boolean", 0);
        if (v->type == TV_UNDEF || (boolean && !tv_truthy(v))) return d ? d : mkstr(r, "", 0);
        return v;
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        switch (v->type) {
        case TV_UNDEF: return mkint(r, 0);
        case TV_STR: return mkint(r, (int64_t)tutf8_len(v->u.str.s, v->u.str.len));
        case TV_LIST:
            if (v->is_gen) {
                rerr(r, at, "object of type 'generator' has no len()");
                return NULL;
            }
            return mkint(r, (int64_t)v->u.list.n);
        case TV_DICT:
        case TV_NS: return mkint(r, (int64_t)v->u.dict.n);
        default: rerr(r, at, "object of type '%s' has no len()", tv_type_name(v)); return NULL;
        }
    }
    if (!strcmp(f, "string")) return to_str(r, v);
    if (!strcmp(f, "safe")) return as_markup(r, to_str(r, v));
    if (!strcmp(f, "tojson")) {
        /* transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
        if (check_nargs(r, at, "tojson", a, 4)) return NULL;
        tv *ea = arg(a, 0, "ensure_ascii"), *ind = arg(a, 1, "indent"), *seps = arg(a, 2, "separators"),
           *sk = arg(a, 3, "sort_keys");
        int indent = -1;
        const char *indent_str = NULL;
        if (ind && ind->type != TV_NONE) {
            if (is_intlike(ind)) indent = (int)(ival(ind) < 0 ? 0 : ival(ind) > 1000 ? 1000 : ival(ind));
            else if (ind->type == TV_STR) indent_str = tarena_strndup(r->a, ind->u.str.s, ind->u.str.len);
            else {
                rerr(r, at, "tojson indent must be an int or str");
                return NULL;
            }
        }
        const char *isep = (indent >= 0 || indent_str) ? "," : ", ", *ksep = ": ";
        if (seps && seps->type != TV_NONE) {
            if (seps->type != TV_LIST || seps->u.list.n != 2 || seps->u.list.items[0]->type != TV_STR ||
                seps->u.list.items[1]->type != TV_STR) {
                rerr(r, at, "tojson separators must be a pair of strings");
                return NULL;
            }
            isep = tarena_strndup(r->a, seps->u.list.items[0]->u.str.s, seps->u.list.items[0]->u.str.len);
            ksep = tarena_strndup(r->a, seps->u.list.items[1]->u.str.s, seps->u.list.items[1]->u.str.len);
            if (!isep || !ksep) return oom(r);
        }
        tbuf b = {0};
        b.limit = r->lim.max_output;
        if (tv_write_json(&b, v, ea && tv_truthy(ea), indent, indent_str, isep, ksep, sk && tv_truthy(sk), 0)) {
            tbuf_free(&b);
            if (v->type == TV_UNDEF) return undef_error(r, at, v);
            rerr(r, at, "Object of type %s is not JSON serializable", tv_type_name(v));
            return NULL;
        }
        return buf_to_str(r, &b);
    }
    if (!strcmp(f, "list")) {
        tv *l = iter_list(r, at, v);
        if (!l || l != v) return l;
        tv *c = mklist(r, l->u.list.n);
        if (c) memcpy(c->u.list.items, l->u.list.items, l->u.list.n * sizeof(tv *));
        return c;
    }
    if (!strcmp(f, "items")) {
        if (v->type == TV_UNDEF) { /* an empty generator: still true */
            tv *g = mklist(r, 0);
            if (g) g->is_gen = 1;
            return g;
        }
        if (v->type != TV_DICT) {
            tv *g = mklist(r, 0);
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
        tv *l = call_method(r, at, &fn, &none);
        if (l) l->is_gen = 1;
        return l;
    }
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        tv *l = iter_list(r, at, v);
        if (!l) return NULL;
        if (f[0] == 'l' && l->is_gen) {
            rerr(r, at, "'generator' object is not reversible");
            return NULL;
        }
        if (l->u.list.n == 0) return mkundef(r, "No %s item, sequence was empty.", f);
        return l->u.list.items[f[0] == 'f' ? 0 : l->u.list.n - 1];
    }
    if (!strcmp(f, "join")) {
        tv *d = arg(a, 0, "d"), *attribute = arg(a, 1, "attribute");
        tv *l = iter_list(r, at, v);
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
        return buf_to_str(r, &b);
    }
    if (!strcmp(f, "map")) {
        tv *lz;
        if (tv_truthy(v) && lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
        tv *l = tv_truthy(v) ? iter_list(r, at, v) : mklist(r, 0);
        if (!l) return NULL;
        tv *attribute = arg(a, a->npos, "attribute"), *dflt = arg(a, a->npos, "default");
        tv *out = mklist(r, l->u.list.n);
        if (!out) return NULL;
        for (size_t i = 0; i < l->u.list.n; i++) {
            tv *x = l->u.list.items[i];
            if (attribute) {
                x = attr_path(r, at, x, attribute);
                if (x && x->type == TV_UNDEF && dflt) x = dflt;
            } else {
                tv *fname = arg(a, 0, NULL);
                if (!fname || fname->type != TV_STR) {
                    rerr(r, at, "map requires a filter name or attribute=");
                    return NULL;
                }
                char *fn = tarena_strndup(r->a, fname->u.str.s, fname->u.str.len);
                if (!fn) return oom(r);
                targs rest = {a->pos + 1, a->npos - 1, a->kwn, a->kwv, a->nkw};
                x = apply_filter(r, s, at, fn, x, &rest);
            }
            if (!x) return NULL;
            out->u.list.items[i] = x;
        }
        out->is_gen = 1;
        return out;
    }
    if (!strcmp(f, "select") || !strcmp(f, "reject")) return filter_select(r, s, at, v, a, 0, f[0] == 'r');
    if (!strcmp(f, "selectattr") || !strcmp(f, "rejectattr"))
        return filter_select(r, s, at, v, a, 1, f[0] == 'r');
    if (!strcmp(f, "unique")) {
        tv *lz;
        if (lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
        int cs = get_bool_arg(a, 0, "case_sensitive", 0);
        tv *attribute = arg(a, 1, "attribute");
        tv *l = iter_list(r, at, v);
        if (!l) return NULL;
        tv *out = mklist(r, l->u.list.n), *seen = mklist(r, l->u.list.n);
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
    if (!strcmp(f, "sort")) {
        tv *l = iter_list(r, at, v);
        if (!l) return NULL;
        return sorted_list(r, at, l, get_bool_arg(a, 0, "reverse", 0), get_bool_arg(a, 1, "case_sensitive", 0),
                           arg(a, 2, "attribute"));
    }
    if (!strcmp(f, "dictsort")) {
        if (v->type != TV_DICT) {
            rerr(r, at, "dictsort requires a mapping");
            return NULL;
        }
        int cs = get_bool_arg(a, 0, "case_sensitive", 0);
        tv *by = arg(a, 1, "by");
        int rev = get_bool_arg(a, 2, "reverse", 0);
        int by_value = by && str_eq(by, "value");
        tv fn = {.type = TV_FUNC};
        fn.u.fn.kind = TFN_METHOD;
        fn.u.fn.name = "items";
        fn.u.fn.self = v;
        targs none = {0};
        tv *items = call_method(r, at, &fn, &none);
        if (!items) return NULL;
        tv *idx = mkint(r, by_value ? 1 : 0);
        return idx ? sorted_list(r, at, items, rev, cs, idx) : NULL;
    }
    if (!strcmp(f, "reverse")) {
        if (v->type == TV_STR) {
            tv *neg = mkint(r, -1);
            return neg ? do_slice(r, at, v, NULL, NULL, neg) : NULL;
        }
        tv *l = iter_list(r, at, v);
        if (!l) return NULL;
        tv *out = mklist(r, l->u.list.n);
        if (!out) return NULL;
        for (size_t i = 0; i < l->u.list.n; i++) out->u.list.items[i] = l->u.list.items[l->u.list.n - 1 - i];
        out->is_gen = 1; /* reversed() is an iterator */
        return out;
    }
    if (!strcmp(f, "sum")) {
        tv *attribute = arg(a, 0, "attribute"), *acc = arg(a, 1, "start");
        tv *l = iter_list(r, at, v);
        if (!l) return NULL;
        if (!acc && !(acc = mkint(r, 0))) return NULL;
        for (size_t i = 0; i < l->u.list.n; i++) {
            tv *x = l->u.list.items[i];
            if (attribute && !(x = attr_path(r, at, x, attribute))) return NULL;
            if (!(acc = binop(r, at, TOP_ADD, acc, x))) return NULL;
        }
        return acc;
    }
    if (!strcmp(f, "min") || !strcmp(f, "max")) {
        tv *l = iter_list(r, at, v);
        if (!l) return NULL;
        if (l->u.list.n == 0) return mkundef(r, "No aggregated item, sequence was empty.");
        tv *sl = sorted_list(r, at, l, f[1] == 'a', get_bool_arg(a, 0, "case_sensitive", 0), arg(a, 1, "attribute"));
        return sl ? sl->u.list.items[0] : NULL;
    }
    if (!strcmp(f, "attr")) {
        tv *nm = arg(a, 0, "name");
        if (!nm || nm->type != TV_STR) {
            rerr(r, at, "attr() needs an attribute name");
            return NULL;
        }
        if (v->type == TV_UNDEF) return undef_error(r, at, v);
        char *name = tarena_strndup(r->a, nm->u.str.s, nm->u.str.len);
        if (!name) return oom(r);
        if (v->type == TV_DICT) {
            if (in_names(DICT_METHODS, name, nm->u.str.len)) return mkmethod(r, v, name);
            return mkundef(r, "'dict object' has no attribute '%s'", name);
        }
        return get_attr(r, at, v, name);
    }
    if (!strcmp(f, "e") || !strcmp(f, "escape")) return html_escape(r, v);
    if (!strcmp(f, "forceescape")) {
        tv *plain = to_str(r, v);
        if (plain && plain->is_markup && !(plain = tv_str_nocopy(r->a, plain->u.str.s, plain->u.str.len)))
            return oom(r);
        return plain ? html_escape(r, plain) : NULL;
    }
    if (!strcmp(f, "format")) {
        tv *s0 = to_str(r, v);
        if (!s0) return NULL;
        tv *t;
        if (a->nkw) {
            t = tv_dict(r->a, a->nkw);
            if (!t) return oom(r);
            for (size_t k = 0; k < a->nkw; k++)
                if (tv_dict_set(r->a, t, tv_str(r->a, a->kwn[k], strlen(a->kwn[k])), a->kwv[k])) return oom(r);
        } else {
            t = mklist(r, a->npos);
            if (!t) return NULL;
            t->is_tuple = 1;
            if (a->npos) memcpy(t->u.list.items, a->pos, a->npos * sizeof(tv *));
        }
        return format_percent(r, at, s0, t);
    }
    if ((!strcmp(f, "int") || !strcmp(f, "float")) && v->type == TV_UNDEF) return undef_error(r, at, v);
    if (!strcmp(f, "int")) return filter_int(r, v, arg(a, 0, "default"));
    if (!strcmp(f, "float")) return filter_float(r, v, arg(a, 0, "default"));
    if (!strcmp(f, "batch") || !strcmp(f, "slice")) {
        tv *cnt = arg(a, 0, f[0] == 'b' ? "linecount" : "slices"), *fill = arg(a, 1, "fill_with");
        if (!cnt || !is_intlike(cnt)) {
            rerr(r, at, "%s() needs an integer count", f);
            return NULL;
        }
        if (fill && fill->type == TV_NONE) fill = NULL;
        tv *lz;
        if (f[0] == 'b' && lazy_fail(r, v, &lz, "'%s' object is not iterable")) return lz;
        tv *l = iter_list(r, at, v);
        if (!l) return NULL;
        int64_t k = ival(cnt), n = (int64_t)l->u.list.n;
        if (f[0] == 's' && k <= 0) {
            rerr(r, at, "slice count must be positive");
            return NULL;
        }
        if (f[0] == 'b' && k == 0 && n > 0) { /* jinja2 yields [] first: len([]) == 0 */
            tv *out = mklist(r, 2), *empty = mklist(r, 0);
            if (!out || !empty) return NULL;
            out->u.list.items[0] = empty;
            out->u.list.items[1] = l;
            out->is_gen = 1;
            return out;
        }
        int64_t nparts = f[0] == 'b' ? (k > 0 ? (n + k - 1) / k : (n > 0)) : k;
        if (nparts > 100000) {
            rerr(r, at, "too many slices");
            return NULL;
        }
        tv *out = mklist(r, (size_t)nparts);
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
            tv *part = mklist(r, (size_t)want);
            if (!part) return NULL;
            for (int64_t i = 0; i < want; i++) part->u.list.items[i] = b + i < e ? l->u.list.items[b + i] : fill;
            out->u.list.items[p] = part;
        }
        out->is_gen = 1;
        return out;
    }
    if (!strcmp(f, "abs")) {
        if (v->type == TV_FLOAT) return mkfloat(r, fabs(v->u.f));
        if (is_intlike(v)) {
            if (ival(v) == INT64_MIN) {
                rerr(r, at, "integer overflow");
                return NULL;
            }
            return mkint(r, ival(v) < 0 ? -ival(v) : ival(v));
        }
        return type_error(r, at, "abs()", v, NULL);
    }
    if (!strcmp(f, "indent") && v->type != TV_STR) { /* jinja2 does s += "\n" */
        if (v->type == TV_UNDEF) return undef_error(r, at, v);
        rerr(r, at, "unsupported operand type(s) for +=: '%s' and 'str'", tv_type_name(v));
        return NULL;
    }
    if (!strcmp(f, "round")) {
        tv *pr = arg(a, 0, "precision"), *method = arg(a, 1, "method");
        if (!is_num(v)) return type_error(r, at, "round()", v, NULL);
        if (is_intlike(v) && !(method && (str_eq(method, "floor") || str_eq(method, "ceil"))) &&
            (!pr || (is_intlike(pr) && ival(pr) >= 0)))
            return mkint(r, ival(v)); /* round(int, n >= 0) is the int itself */
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
        return mkfloat(r, y);
    }
    /* string filters: operate on str(value) */
    tv *sv = to_str(r, v);
    if (!sv) return NULL;
    int mk = sv->is_markup; /* Markup methods return Markup */
    if (!strcmp(f, "trim")) {
        tv *chars = arg(a, 0, "chars");
        tv *x = py_strip(r, sv, chars, 3);
        return mk ? as_markup(r, x) : x;
    }
    if (!strcmp(f, "upper")) return mk ? as_markup(r, py_case(r, sv, 1)) : py_case(r, sv, 1);
    if (!strcmp(f, "lower")) return mk ? as_markup(r, py_case(r, sv, 0)) : py_case(r, sv, 0);
    if (!strcmp(f, "capitalize")) return mk ? as_markup(r, py_case(r, sv, 2)) : py_case(r, sv, 2);
    if (!strcmp(f, "title")) {
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
                put_case(&b, c, at_start ? 1 : 0);
                at_start = 1;
            } else {
                put_case(&b, c, at_start ? 1 : 0);
                at_start = 0;
            }
        }
        return buf_to_str(r, &b);
    }
    if (!strcmp(f, "replace")) {
        tv *o = arg(a, 0, "old"), *nw = arg(a, 1, "new"), *cnt = arg(a, 2, "count");
        if (!o || !nw) {
            rerr(r, at, "replace filter needs old and new");
            return NULL;
        }
        tv *os = to_str(r, o), *ns = to_str(r, nw);
        if (!os || !ns) return NULL;
        return py_replace(r, at, sv, os, ns, cnt && is_intlike(cnt) ? ival(cnt) : -1);
    }
    if (!strcmp(f, "indent")) return filter_indent(r, at, sv, a);
    if (!strcmp(f, "truncate")) {
        /* jinja2: truncate(s, length=255, killwords=False, end='...', leeway=5) */
        tv *lv = arg(a, 0, "length"), *end = arg(a, 2, "end"), *lw = arg(a, 3, "leeway");
        int kill = get_bool_arg(a, 1, "killwords", 0);
        int64_t length = lv && is_intlike(lv) ? ival(lv) : 255, leeway = lw && is_intlike(lw) ? ival(lw) : 5;
        tv *e = end ? to_str(r, end) : mkstr(r, "...", 3);
        if (!e) return NULL;
        int64_t elen = (int64_t)tutf8_len(e->u.str.s, e->u.str.len), n = (int64_t)tutf8_len(sv->u.str.s, sv->u.str.len);
        if (length < elen) {
            rerr(r, at, "expected length >= %lld, got %lld", (long long)elen, (long long)length);
            return NULL;
        }
        if (leeway < 0) {
            rerr(r, at, "expected leeway >= 0, got %lld", (long long)leeway);
            return NULL;
        }
        if (n <= length + leeway) return sv;
        size_t cut = cp_offset(sv, length - elen);
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
        return buf_to_str(r, &b);
    }
    if (!strcmp(f, "wordcount")) {
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
        return mkint(r, words);
    }
    if (!strcmp(f, "center")) {
        tv *w = arg(a, 0, "width");
        int64_t width = w && is_intlike(w) ? ival(w) : 80;
        int64_t len = (int64_t)tutf8_len(sv->u.str.s, sv->u.str.len);
        if (width > 100000) width = 100000;
        if (width <= len) return sv;
        int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
        tbuf b = {0};
        for (int64_t i = 0; i < left; i++) tbuf_putc(&b, ' ');
        tbuf_put(&b, sv->u.str.s, sv->u.str.len);
        for (int64_t i = 0; i < pad - left; i++) tbuf_putc(&b, ' ');
        return buf_to_str(r, &b);
    }
    rerr(r, at, "filter '%s' is not supported by sglc's template engine", f);
    return NULL;
}

/* ---- tests ------------------------------------------------------------------- */
static int apply_test(trender *r, tscope *s, const tnode *at, const char *t, tv *v, targs *a)
{
    (void)s;
    tv *x = arg(a, 0, NULL);
    static const char *const unary[] = {"defined", "undefined", "none", "boolean", "true", "false",
                                        "integer", "float", "number", "string", "mapping", "iterable",
                                        "sequence", "callable", "escaped", "lower", "upper", "odd", "even", NULL};
    size_t nargs = a->npos + a->nkw;
    int is_unary = 0;
    for (int i = 0; unary[i]; i++)
        if (!strcmp(unary[i], t)) is_unary = 1;
    if (nargs > (is_unary ? 0u : 1u)) {
        rerr(r, at, "test_%s() takes %d positional argument%s but %zu were given", t, is_unary ? 1 : 2,
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
        tv *sv = to_str(r, v);
        if (!sv) return -1;
        tv fn = {.type = TV_FUNC};
        fn.u.fn.kind = TFN_METHOD;
        fn.u.fn.name = t[0] == 'l' ? "islower" : "isupper";
        fn.u.fn.self = sv;
        targs none = {0};
        tv *res = call_method(r, at, &fn, &none);
        return res ? tv_truthy(res) : -1;
    }
    if (!strcmp(t, "odd") || !strcmp(t, "even") || !strcmp(t, "divisibleby")) {
        if (v->type == TV_UNDEF) return undef_error(r, at, v) ? 0 : -1;
        if (!is_num(v)) {
            rerr(r, at, "unsupported operand type(s) for %%: '%s' and 'int'", tv_type_name(v));
            return -1;
        }
        tv *two = mkint(r, 2);
        tv *d = t[0] == 'd' ? x : two;
        if (!d) {
            if (!two) return -1;
            rerr(r, at, "divisibleby() missing the divisor");
            return -1;
        }
        tv *m = binop(r, at, TOP_MOD, v, d);
        if (!m) return -1;
        /* odd: v % 2 == 1; even / divisibleby: v % k == 0 (floats too) */
        tv one = {.type = TV_INT, .u.i = 1}, zero = {.type = TV_INT, .u.i = 0};
        return tv_equal(m, t[0] == 'o' ? &one : &zero);
    }
    if (!x) {
        rerr(r, at, "test '%s' needs an argument", t);
        return -1;
    }
    if (!strcmp(t, "sameas")) {
        if (v->type != x->type) return 0;
        if (v->type == TV_NONE || v->type == TV_UNDEF) return 1;
        if (v->type == TV_BOOL) return v->u.b == x->u.b;
        return v == x;
    }
    if (!strcmp(t, "in")) {
        int k = contains(r, at, v, x);
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
        tv *res = compare(r, at, op, v, x);
        return res ? tv_truthy(res) : -1;
    }
    rerr(r, at, "test '%s' is not supported by sglc's template engine", t);
    return -1;
}

/* ---- expressions ----------------------------------------------------------------- */
static tv *eval(trender *r, tscope *s, const tnode *n)
{
    if (r->failed) return NULL;
    switch (n->kind) {
    case TN_LIT: return n->lit;
    case TN_NAME: {
        tv *v = scope_get(s, n->name);
        return v ? v : mkundef(r, "'%s' is undefined", n->name);
    }
    case TN_GETATTR: {
        tv *o = eval(r, s, n->a);
        return o ? get_attr(r, n, o, n->name) : NULL;
    }
    case TN_GETITEM: {
        tv *o = eval(r, s, n->a), *k = o ? eval(r, s, n->b) : NULL;
        if (!k) return NULL;
        if (k->type == TV_UNDEF && o->type != TV_UNDEF) {
            /* obj[undefined]: the key is used, which raises */
            return undef_error(r, n, k);
        }
        return get_item(r, n, o, k);
    }
    case TN_SLICE: {
        tv *o = eval(r, s, n->a);
        if (!o) return NULL;
        tv *x[3] = {NULL, NULL, NULL};
        const tnode *kids[3] = {n->b, n->c, n->d};
        for (int i = 0; i < 3; i++)
            if (kids[i] && !(x[i] = eval(r, s, kids[i]))) return NULL;
        if (o->type != TV_STR && o->type != TV_LIST && o->type != TV_UNDEF && r->const_print)
            return mkundef(r, "'%s object' is not subscriptable", tv_type_name(o));
        return do_slice(r, n, o, x[0], x[1], x[2]);
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
        return apply_filter(r, s, n, n->name, v, &a);
    }
    case TN_TEST: {
        tv *v = eval(r, s, n->a);
        targs a;
        if (!v || eval_args(r, s, n, &a)) return NULL;
        int k = apply_test(r, s, n, n->name, v, &a);
        if (k < 0) return NULL;
        return tv_bool(n->op ? !k : k);
    }
    case TN_BINOP: {
        tv *a = eval(r, s, n->a), *b = a ? eval(r, s, n->b) : NULL;
        return b ? binop(r, n, n->op, a, b) : NULL;
    }
    case TN_NEG:
    case TN_POS: {
        tv *a = eval(r, s, n->a);
        if (!a) return NULL;
        if (a->type == TV_FLOAT) return n->kind == TN_NEG ? mkfloat(r, -a->u.f) : a;
        if (is_intlike(a)) {
            if (n->kind == TN_POS) return mkint(r, ival(a));
            if (ival(a) == INT64_MIN) {
                rerr(r, n, "integer overflow");
                return NULL;
            }
            return mkint(r, -ival(a));
        }
        return type_error(r, n, n->kind == TN_NEG ? "-" : "+", a, NULL);
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
            tv *res = compare(r, n, n->l2[i]->op, left, right);
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
        return n->c ? eval(r, s, n->c) : mkundef(r, "the inline if-expression on line %d evaluated to false and no else section was defined.", n->line);
    }
    case TN_LIST:
    case TN_TUPLE: {
        tv *l = mklist(r, n->n1);
        if (!l) return NULL;
        l->is_tuple = n->kind == TN_TUPLE;
        for (size_t i = 0; i < n->n1; i++)
            if (!(l->u.list.items[i] = eval(r, s, n->l1[i]))) return NULL;
        return l;
    }
    case TN_DICT: {
        tv *d = tv_dict(r->a, n->n1);
        if (!d) return oom(r);
        for (size_t i = 0; i < n->n1; i++) {
            tv *k = eval(r, s, n->l1[i]), *v = k ? eval(r, s, n->l2[i]) : NULL;
            if (!v) return NULL;
            if (k->type == TV_LIST && !k->is_tuple) {
                rerr(r, n, "unhashable type: 'list'");
                return NULL;
            }
            if (k->type == TV_DICT || k->type == TV_UNDEF) {
                rerr(r, n, "unhashable type: '%s'", tv_type_name(k));
                return NULL;
            }
            if (tv_dict_set(r->a, d, k, v)) return oom(r);
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
        return buf_to_str(r, &b);
    }
    default: rerr(r, n, "internal error: not an expression"); return NULL;
    }
}

/* ---- statements ------------------------------------------------------------------- */
static int assign(trender *r, tscope *s, const tnode *at, const char **names, size_t nn, tv *v)
{
    if (nn == 1) return scope_set(r, s, names[0], v) ? (oom(r), -1) : 0;
    tv *l = iter_list(r, at, v);
    if (!l) return -1;
    if (l->u.list.n != nn) {
        rerr(r, at, "%s values to unpack (expected %zu, got %zu)", l->u.list.n > nn ? "too many" : "not enough",
             nn, l->u.list.n);
        return -1;
    }
    for (size_t i = 0; i < nn; i++)
        if (scope_set(r, s, names[i], l->u.list.items[i])) return oom(r), -1;
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
    return buf_to_str(r, &buf);
}

static tv *apply_filter_chain(trender *r, tscope *s, const tnode *n, tv *v)
{
    for (size_t i = 0; i < n->n1 && v; i++) {
        targs a;
        if (eval_args(r, s, n->l1[i], &a)) return NULL;
        v = apply_filter(r, s, n->l1[i], n->l1[i]->name, v, &a);
    }
    return v;
}

/* Run a for statement over `it` (one level of a recursive loop at `depth`). */
static int run_for(trender *r, tscope *s, const tnode *n, tv *it, int depth)
{
    tv *l = iter_list(r, n->a, it);
    if (!l) return EX_ERR;
    if (n->d) { /* loop filter: evaluated with the targets bound */
        tv *f = mklist(r, l->u.list.n);
        if (!f) return EX_ERR;
        size_t k = 0;
        for (size_t i = 0; i < l->u.list.n; i++) {
            if (step(r, n)) return EX_ERR;
            tscope *fs = scope_new(r, s);
            if (!fs) return oom(r), EX_ERR;
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
    if (!lp || !lv) return oom(r), EX_ERR;
    lp->length = (int64_t)l->u.list.n;
    lp->items = l->u.list.items;
    lp->depth = depth;
    lp->node = n;
    lp->scope = s;
    lv->type = TV_LOOP;
    lv->u.loop = lp;
    for (size_t i = 0; i < l->u.list.n; i++) {
        if (step(r, n)) return EX_ERR;
        lp->index0 = (int64_t)i;
        tscope *is = scope_new(r, s);
        if (!is) return oom(r), EX_ERR;
        if (scope_set(r, is, "loop", lv)) return oom(r), EX_ERR;
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
            if (!w) return oom(r), EX_ERR;
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
                rerr(r, n, "cannot assign attribute on non-namespace object");
                return EX_ERR;
            }
            tv *key = mkstr(r, n->names[0], strlen(n->names[0]));
            if (!key || tv_dict_set(r->a, ns, key, v)) return oom(r), EX_ERR;
            break;
        }
        return assign(r, s, n, n->names, n->nn, v) ? EX_ERR : EX_OK;
    }
    case TN_SET_BLOCK: {
        tscope *bs = scope_new(r, s);
        if (!bs) return oom(r), EX_ERR;
        tv *v = capture(r, bs, n->b);
        if (v && n->n1) v = apply_filter_chain(r, s, n, v);
        if (!v) return EX_ERR;
        return assign(r, s, n, n->names, n->nn, v) ? EX_ERR : EX_OK;
    }
    case TN_MACRO: {
        tv *f = tarena_alloc(r->a, sizeof *f);
        if (!f) return oom(r), EX_ERR;
        f->type = TV_FUNC;
        f->u.fn.kind = TFN_MACRO;
        f->u.fn.name = n->name;
        f->u.fn.node = n;
        f->u.fn.scope = s;
        if (scope_set(r, s, n->name, f)) return oom(r), EX_ERR;
        break;
    }
    case TN_CALL_BLOCK: {
        tv *caller = tarena_alloc(r->a, sizeof *caller);
        if (!caller) return oom(r), EX_ERR;
        caller->type = TV_FUNC;
        caller->u.fn.kind = TFN_CALLER;
        caller->u.fn.name = "caller";
        caller->u.fn.node = n;
        caller->u.fn.scope = s;
        tv *fn = eval(r, s, n->a->a);
        targs a;
        if (!fn || eval_args(r, s, n->a, &a)) return EX_ERR;
        if (fn->type != TV_FUNC || fn->u.fn.kind != TFN_MACRO) {
            rerr(r, n, "{%% call %%} needs a macro");
            return EX_ERR;
        }
        if (step(r, n)) return EX_ERR;
        tv *v = call_macro(r, n, fn, &a, caller);
        if (!v) return EX_ERR;
        tv_write_str(r->out, v);
        break;
    }
    case TN_FILTER_BLOCK: {
        if (++r->depth > r->lim.max_depth) {
            rerr(r, n, "filter blocks nested too deeply");
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
    default: rerr(r, n, "internal error: not a statement"); return EX_ERR;
    }
    if (r->out->over) {
        rerr(r, n, "template output exceeded its size limit");
        return EX_ERR;
    }
    if (r->a->failed) {
        oom(r);
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
    static const char *globals[] = {"range", "namespace", "dict", "cycler", "joiner", "raise_exception",
                                    "strftime_now", NULL};
    for (int i = 0; root && globals[i]; i++) {
        tv *f = tarena_alloc(&arena, sizeof *f);
        if (!f) break;
        f->type = TV_FUNC;
        f->u.fn.kind = TFN_GLOBAL;
        f->u.fn.name = globals[i];
        scope_set(&r, root, globals[i], f);
    }
    if (!root || arena.failed) oom(&r);
    if (!r.failed && vars) {
        if (!json_is_object(vars)) rerr(&r, NULL, "template variables must be a JSON object");
        else {
            const char *k;
            json_t *v;
            json_object_foreach((json_t *)vars, k, v) {
                tv *x = tv_from_json(&arena, v);
                if (!x || scope_set(&r, root, k, x)) {
                    oom(&r);
                    break;
                }
            }
        }
    }
    tscope *top = r.failed ? NULL : scope_new(&r, root);
    if (!r.failed && top) exec_body(&r, top, t->root);
    if (!r.failed && buf.over) rerr(&r, NULL, "template output exceeded its size limit");
    if (!r.failed && arena.failed) oom(&r);
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
