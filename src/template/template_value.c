/* template_value — arena, buffers and values of the Jinja engine.
 *
 * DESIGN: Python semantics live here: str() and repr() of every value
 * (Jinja prints values with str(), and str() of a list uses repr() of its
 * items), float formatting as Python's shortest round-trip repr, equality
 * and ordering across int/float/bool, truthiness, and json.dumps as
 * transformers calls it (ensure_ascii=False, optional indent/separators/
 * sort_keys).  Conversions from/to jansson happen at the engine's edges.
 * Python's str.isspace() set is reproduced exactly (trim and strip use it). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "template/template_impl.h"

/* ---- arena ---------------------------------------------------------------- */
struct tarena_chunk {
    tarena_chunk *next;
    size_t size, used;
    max_align_t data[]; /* (size bytes) */
};

void tarena_init(tarena *a, size_t cap)
{
    memset(a, 0, sizeof *a);
    a->cap = cap;
}

void tarena_free(tarena *a)
{
    tarena_chunk *c = a->head;
    while (c) {
        tarena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used = 0;
}

void *tarena_alloc(tarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->failed || (a->cap && a->used + n > a->cap)) {
        a->failed = 1;
        return NULL;
    }
    tarena_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + sz);
        if (!c) {
            a->failed = 1;
            return NULL;
        }
        c->size = sz;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *tarena_strndup(tarena *a, const char *s, size_t n)
{
    char *p = tarena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---- buffer --------------------------------------------------------------- */
void tbuf_put(tbuf *b, const char *s, size_t n)
{
    if (b->over) return;
    if (b->limit && b->len + n > b->limit) {
        b->over = 1;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->len + n + 1) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) {
            b->over = 1;
            return;
        }
        b->p = p;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void tbuf_puts(tbuf *b, const char *s) { tbuf_put(b, s, strlen(s)); }
void tbuf_putc(tbuf *b, char c) { tbuf_put(b, &c, 1); }

void tbuf_printf(tbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tmp) {
        tbuf_put(b, tmp, (size_t)n);
    } else if (n >= 0) { /* longer than tmp: print again into the heap */
        char *big = malloc((size_t)n + 1);
        if (big && vsnprintf(big, (size_t)n + 1, fmt, ap2) == n) tbuf_put(b, big, (size_t)n);
        free(big);
    }
    va_end(ap2);
}

void tbuf_free(tbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- UTF-8 ---------------------------------------------------------------- */
uint32_t tutf8_next(const char *s, size_t n, size_t *i)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + *i, (utf8proc_ssize_t)(n - *i), &cp);
    if (k <= 0) {
        (*i)++;
        return 0xFFFD;
    }
    *i += (size_t)k;
    return (uint32_t)cp;
}

void tutf8_put(tbuf *b, uint32_t cp)
{
    utf8proc_uint8_t tmp[4];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, tmp);
    if (k > 0) tbuf_put(b, (const char *)tmp, (size_t)k);
}

size_t tutf8_len(const char *s, size_t n)
{
    size_t i = 0, c = 0;
    while (i < n) {
        tutf8_next(s, n, &i);
        c++;
    }
    return c;
}

/* Python's str.isspace(): bidi class WS/B/S or category Zs. */
int tpy_isspace(uint32_t c)
{
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
    return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
           c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* ---- constructors ----------------------------------------------------------- */
tv tv_undef_v = {.type = TV_UNDEF};
tv tv_none_v = {.type = TV_NONE};
tv tv_true_v = {.type = TV_BOOL, .u.b = 1};
tv tv_false_v = {.type = TV_BOOL, .u.b = 0};

tv *tv_str_nocopy(tarena *a, const char *s, size_t n)
{
    tv *v = tarena_alloc(a, sizeof *v);
    if (!v) return NULL;
    v->type = TV_STR;
    v->u.str.s = s;
    v->u.str.len = n;
    return v;
}

tv *tv_str(tarena *a, const char *s, size_t n)
{
    char *p = tarena_strndup(a, s, n);
    return p ? tv_str_nocopy(a, p, n) : NULL;
}

tv *tv_int(tarena *a, int64_t i)
{
    tv *v = tarena_alloc(a, sizeof *v);
    if (!v) return NULL;
    v->type = TV_INT;
    v->u.i = i;
    return v;
}

tv *tv_float(tarena *a, double f)
{
    tv *v = tarena_alloc(a, sizeof *v);
    if (!v) return NULL;
    v->type = TV_FLOAT;
    v->u.f = f;
    return v;
}

tv *tv_bool(int b) { return b ? &tv_true_v : &tv_false_v; }

tv *tv_undef(tarena *a, const char *hint)
{
    tv *v = tarena_alloc(a, sizeof *v);
    if (!v) return NULL;
    v->type = TV_UNDEF;
    v->u.hint = hint ? tarena_strndup(a, hint, strlen(hint)) : NULL;
    return v;
}

tv *tv_list(tarena *a, size_t n)
{
    tv *v = tarena_alloc(a, sizeof *v);
    if (!v) return NULL;
    v->type = TV_LIST;
    v->u.list.n = n;
    v->u.list.items = tarena_alloc(a, (n ? n : 1) * sizeof(tv *));
    return v->u.list.items ? v : NULL;
}

tv *tv_dict(tarena *a, size_t cap)
{
    tv *v = tarena_alloc(a, sizeof *v);
    if (!v) return NULL;
    v->type = TV_DICT;
    if (cap < 4) cap = 4;
    v->u.dict.cap = cap;
    v->u.dict.keys = tarena_alloc(a, cap * sizeof(tv *));
    v->u.dict.vals = tarena_alloc(a, cap * sizeof(tv *));
    return v->u.dict.keys && v->u.dict.vals ? v : NULL;
}

tv *tv_dict_getv(const tv *d, const tv *key)
{
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (tv_equal(d->u.dict.keys[i], key)) return d->u.dict.vals[i];
    return NULL;
}

tv *tv_dict_get(const tv *d, const char *key, size_t klen)
{
    for (size_t i = 0; i < d->u.dict.n; i++) {
        const tv *k = d->u.dict.keys[i];
        if (k->type == TV_STR && k->u.str.len == klen && !memcmp(k->u.str.s, key, klen))
            return d->u.dict.vals[i];
    }
    return NULL;
}

int tv_dict_set(tarena *a, tv *d, tv *key, tv *val)
{
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (tv_equal(d->u.dict.keys[i], key)) {
            d->u.dict.vals[i] = val;
            return 0;
        }
    if (d->u.dict.n == d->u.dict.cap) {
        size_t nc = d->u.dict.cap * 2;
        tv **k = tarena_alloc(a, nc * sizeof(tv *)), **v = tarena_alloc(a, nc * sizeof(tv *));
        if (!k || !v) return -1;
        memcpy(k, d->u.dict.keys, d->u.dict.n * sizeof(tv *));
        memcpy(v, d->u.dict.vals, d->u.dict.n * sizeof(tv *));
        d->u.dict.keys = k;
        d->u.dict.vals = v;
        d->u.dict.cap = nc;
    }
    d->u.dict.keys[d->u.dict.n] = key;
    d->u.dict.vals[d->u.dict.n] = val;
    d->u.dict.n++;
    return 0;
}

tv *tv_from_json(tarena *a, const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_NULL: return &tv_none_v;
    case JSON_TRUE: return &tv_true_v;
    case JSON_FALSE: return &tv_false_v;
    case JSON_INTEGER: return tv_int(a, json_integer_value(j));
    case JSON_REAL: return tv_float(a, json_real_value(j));
    case JSON_STRING: return tv_str_nocopy(a, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        tv *l = tv_list(a, n);
        if (!l) return NULL;
        for (size_t i = 0; i < n; i++)
            if (!(l->u.list.items[i] = tv_from_json(a, json_array_get(j, i)))) return NULL;
        return l;
    }
    case JSON_OBJECT: {
        tv *d = tv_dict(a, json_object_size(j));
        if (!d) return NULL;
        const char *k;
        json_t *v;
        /* jansson keeps insertion order (>= 2.8), as Python's json does. */
        json_object_foreach((json_t *)j, k, v) {
            tv *kv = tv_str_nocopy(a, k, strlen(k)), *vv = tv_from_json(a, v);
            if (!kv || !vv) return NULL;
            d->u.dict.keys[d->u.dict.n] = kv;
            d->u.dict.vals[d->u.dict.n] = vv;
            d->u.dict.n++;
        }
        return d;
    }
    }
    return NULL;
}

json_t *tv_to_json(const tv *v)
{
    switch (v->type) {
    case TV_NONE: return json_null();
    case TV_BOOL: return json_boolean(v->u.b);
    case TV_INT: return json_integer(v->u.i);
    case TV_FLOAT: return json_real(v->u.f);
    case TV_STR: return json_stringn(v->u.str.s, v->u.str.len);
    case TV_LIST: {
        json_t *arr = json_array();
        for (size_t i = 0; i < v->u.list.n; i++) {
            json_t *e = tv_to_json(v->u.list.items[i]);
            if (!e) {
                json_decref(arr);
                return NULL;
            }
            json_array_append_new(arr, e);
        }
        return arr;
    }
    case TV_DICT: {
        json_t *o = json_object();
        for (size_t i = 0; i < v->u.dict.n; i++) {
            const tv *k = v->u.dict.keys[i];
            json_t *e = tv_to_json(v->u.dict.vals[i]);
            if (k->type != TV_STR || !e) {
                json_decref(e);
                json_decref(o);
                return NULL;
            }
            char *ks = strndup(k->u.str.s, k->u.str.len);
            json_object_set_new(o, ks, e);
            free(ks);
        }
        return o;
    }
    default: return NULL;
    }
}

/* ---- truth, equality, order ---------------------------------------------- */
int tv_truthy(const tv *v)
{
    switch (v->type) {
    case TV_UNDEF:
    case TV_NONE: return 0;
    case TV_BOOL: return v->u.b;
    case TV_INT: return v->u.i != 0;
    case TV_FLOAT: return v->u.f != 0.0;
    case TV_STR: return v->u.str.len != 0;
    case TV_LIST: return v->is_gen || v->u.list.n != 0;
    case TV_DICT: return v->u.dict.n != 0;
    case TV_LOOP: return v->u.loop->length != 0;
    default: return 1;
    }
}

static int is_num(const tv *v) { return v->type == TV_BOOL || v->type == TV_INT || v->type == TV_FLOAT; }
static double num_f(const tv *v)
{
    return v->type == TV_FLOAT ? v->u.f : v->type == TV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const tv *v) { return v->type == TV_INT ? v->u.i : v->u.b; }

int tv_equal(const tv *a, const tv *b)
{
    if (a == b) return a->type != TV_FLOAT || a->u.f == a->u.f;
    if (is_num(a) && is_num(b)) {
        if (a->type == TV_FLOAT || b->type == TV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a->type != b->type) return 0;
    switch (a->type) {
    case TV_UNDEF:
    case TV_NONE: return 1;
    case TV_STR: return a->u.str.len == b->u.str.len && !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
    case TV_LIST:
        if (a->is_gen || b->is_gen) return 0; /* generators compare by identity */
        if (a->is_tuple != b->is_tuple || a->u.list.n != b->u.list.n) return 0;
        for (size_t i = 0; i < a->u.list.n; i++)
            if (!tv_equal(a->u.list.items[i], b->u.list.items[i])) return 0;
        return 1;
    case TV_DICT:
        if (a->u.dict.n != b->u.dict.n) return 0;
        for (size_t i = 0; i < a->u.dict.n; i++) {
            tv *o = tv_dict_getv(b, a->u.dict.keys[i]);
            if (!o || !tv_equal(a->u.dict.vals[i], o)) return 0;
        }
        return 1;
    default: return 0;
    }
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    /* UTF-8 byte order equals code point order, which Python compares. */
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c) return c < 0 ? -1 : 1;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

int tv_compare(const tv *a, const tv *b, int *res)
{
    if (is_num(a) && is_num(b)) {
        if (a->type == TV_FLOAT || b->type == TV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            *res = x < y ? -1 : x > y ? 1 : 0;
            if (x != x || y != y) *res = 2; /* nan: every comparison false */
        } else {
            int64_t x = num_i(a), y = num_i(b);
            *res = x < y ? -1 : x > y ? 1 : 0;
        }
        return 0;
    }
    if (a->type == TV_STR && b->type == TV_STR) {
        *res = cmp_bytes(a->u.str.s, a->u.str.len, b->u.str.s, b->u.str.len);
        return 0;
    }
    if (a->type == TV_LIST && b->type == TV_LIST && a->is_tuple == b->is_tuple && !a->is_gen && !b->is_gen) {
        size_t n = a->u.list.n < b->u.list.n ? a->u.list.n : b->u.list.n;
        for (size_t i = 0; i < n; i++) {
            if (tv_equal(a->u.list.items[i], b->u.list.items[i])) continue;
            return tv_compare(a->u.list.items[i], b->u.list.items[i], res);
        }
        *res = a->u.list.n < b->u.list.n ? -1 : a->u.list.n > b->u.list.n ? 1 : 0;
        return 0;
    }
    return -1;
}

const char *tv_type_name(const tv *v)
{
    switch (v->type) {
    case TV_UNDEF: return "Undefined";
    case TV_NONE: return "NoneType";
    case TV_BOOL: return "bool";
    case TV_INT: return "int";
    case TV_FLOAT: return "float";
    case TV_STR: return "str";
    case TV_LIST: return v->is_tuple ? "tuple" : "list";
    case TV_DICT: return "dict";
    case TV_NS: return "Namespace";
    case TV_FUNC: return "function";
    case TV_LOOP: return "LoopContext";
    }
    return "object";
}

/* ---- formatting ------------------------------------------------------------- */
/* Python repr(float): shortest digits that round-trip, scientific when the
 * decimal exponent is < -4 or >= 16. */
void tv_write_float(tbuf *b, double f)
{
    if (f != f) {
        tbuf_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        tbuf_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX ; split digits and exponent */
    char digits[32];
    int nd = 0, neg = 0;
    const char *p = tmp;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) tbuf_putc(b, '-');
    if (exp < -4 || exp >= 16) {
        tbuf_putc(b, digits[0]);
        if (nd > 1) {
            tbuf_putc(b, '.');
            tbuf_put(b, digits + 1, (size_t)nd - 1);
        }
        tbuf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        tbuf_puts(b, "0.");
        for (int i = 0; i < -exp - 1; i++) tbuf_putc(b, '0');
        tbuf_put(b, digits, (size_t)nd);
    } else {
        for (int i = 0; i <= exp; i++) tbuf_putc(b, i < nd ? digits[i] : '0');
        tbuf_putc(b, '.');
        if (nd > exp + 1)
            tbuf_put(b, digits + exp + 1, (size_t)(nd - exp - 1));
        else
            tbuf_putc(b, '0');
    }
}

/* Python str.isprintable() for one code point. */
static int py_printable(uint32_t c)
{
    if (c == ' ') return 1;
    if (c < 0x20 || c == 0x7f) return 0;
    if (c < 0x7f) return 1;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
    switch (cat) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return 0;
    default: return 1;
    }
}

static void write_str_repr(tbuf *b, const char *s, size_t n)
{
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    tbuf_putc(b, q);
    size_t i = 0;
    while (i < n) {
        uint32_t c = tutf8_next(s, n, &i);
        if (c == (uint32_t)q || c == '\\') {
            tbuf_putc(b, '\\');
            tbuf_putc(b, (char)c);
        } else if (c == '\n') tbuf_puts(b, "\\n");
        else if (c == '\r') tbuf_puts(b, "\\r");
        else if (c == '\t') tbuf_puts(b, "\\t");
        else if (!py_printable(c)) {
            if (c < 0x100) tbuf_printf(b, "\\x%02x", c);
            else if (c < 0x10000) tbuf_printf(b, "\\u%04x", c);
            else tbuf_printf(b, "\\U%08x", c);
        } else tutf8_put(b, c);
    }
    tbuf_putc(b, q);
}

void tv_write_repr(tbuf *b, const tv *v)
{
    if (v->type == TV_LIST && v->is_gen) {
        tbuf_puts(b, "<generator object>");
        return;
    }
    switch (v->type) {
    case TV_UNDEF: tbuf_puts(b, "Undefined"); return;
    case TV_STR:
        if (v->is_markup) tbuf_puts(b, "Markup(");
        write_str_repr(b, v->u.str.s, v->u.str.len);
        if (v->is_markup) tbuf_putc(b, ')');
        return;
    case TV_LIST: {
        tbuf_putc(b, v->is_tuple ? '(' : '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i) tbuf_puts(b, ", ");
            tv_write_repr(b, v->u.list.items[i]);
        }
        if (v->is_tuple && v->u.list.n == 1) tbuf_putc(b, ',');
        tbuf_putc(b, v->is_tuple ? ')' : ']');
        return;
    }
    case TV_DICT:
    case TV_NS: {
        if (v->type == TV_NS) tbuf_puts(b, "<Namespace ");
        tbuf_putc(b, '{');
        for (size_t i = 0; i < v->u.dict.n; i++) {
            if (i) tbuf_puts(b, ", ");
            tv_write_repr(b, v->u.dict.keys[i]);
            tbuf_puts(b, ": ");
            tv_write_repr(b, v->u.dict.vals[i]);
        }
        tbuf_putc(b, '}');
        if (v->type == TV_NS) tbuf_putc(b, '>');
        return;
    }
    default: tv_write_str(b, v);
    }
}

void tv_write_str(tbuf *b, const tv *v)
{
    switch (v->type) {
    case TV_UNDEF: return;
    case TV_NONE: tbuf_puts(b, "None"); return;
    case TV_BOOL: tbuf_puts(b, v->u.b ? "True" : "False"); return;
    case TV_INT: tbuf_printf(b, "%lld", (long long)v->u.i); return;
    case TV_FLOAT: tv_write_float(b, v->u.f); return;
    case TV_STR: tbuf_put(b, v->u.str.s, v->u.str.len); return;
    case TV_LIST:
    case TV_DICT:
    case TV_NS: tv_write_repr(b, v); return;
    case TV_FUNC: tbuf_printf(b, "<function %s>", v->u.fn.name ? v->u.fn.name : "?"); return;
    case TV_LOOP: tbuf_puts(b, "<LoopContext>"); return;
    }
}

/* ---- json.dumps --------------------------------------------------------- */
static void json_str(tbuf *b, const char *s, size_t n, int ensure_ascii)
{
    tbuf_putc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (ensure_ascii && (c >= 0x7f)) {
            /* \uXXXX for everything outside ' '..'~', surrogate pairs above the BMP */
            tbuf_put(b, s + start, i - start);
            size_t j = i;
            uint32_t cp = tutf8_next(s, n, &j);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                tbuf_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else tbuf_printf(b, "\\u%04x", cp);
            i = j - 1;
            start = j;
            continue;
        }
        const char *esc = NULL;
        char tmp[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
        }
        if (esc) {
            tbuf_put(b, s + start, i - start);
            tbuf_puts(b, esc);
            start = i + 1;
        }
    }
    tbuf_put(b, s + start, n - start);
    tbuf_putc(b, '"');
}

static void json_newline(tbuf *b, int indent, const char *indent_str, int level)
{
    tbuf_putc(b, '\n');
    for (int l = 0; l < level; l++) {
        if (indent_str) tbuf_puts(b, indent_str);
        else
            for (int i = 0; i < indent; i++) tbuf_putc(b, ' ');
    }
}

static int key_cmp(const void *x, const void *y)
{
    const tv *a = **(tv *const *const *)x, *b = **(tv *const *const *)y;
    int r = 0;
    if (tv_compare(a, b, &r) < 0) return 0;
    return r;
}

int tv_write_json(tbuf *b, const tv *v, int ensure_ascii, int indent, const char *indent_str,
                  const char *item_sep, const char *key_sep, int sort_keys, int depth)
{
    int pretty = indent >= 0 || indent_str;
    if (depth > 512) return -1;
    switch (v->type) {
    case TV_NONE: tbuf_puts(b, "null"); return 0;
    case TV_BOOL: tbuf_puts(b, v->u.b ? "true" : "false"); return 0;
    case TV_INT: tbuf_printf(b, "%lld", (long long)v->u.i); return 0;
    case TV_FLOAT:
        if (v->u.f != v->u.f) tbuf_puts(b, "NaN");
        else if (isinf(v->u.f)) tbuf_puts(b, v->u.f < 0 ? "-Infinity" : "Infinity");
        else tv_write_float(b, v->u.f);
        return 0;
    case TV_STR: json_str(b, v->u.str.s, v->u.str.len, ensure_ascii); return 0;
    case TV_LIST: {
        if (v->is_gen) return -1; /* a generator is not JSON serializable */
        if (v->u.list.n == 0) {
            tbuf_puts(b, "[]");
            return 0;
        }
        tbuf_putc(b, '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i) tbuf_puts(b, item_sep);
            if (pretty) json_newline(b, indent, indent_str, depth + 1);
            if (tv_write_json(b, v->u.list.items[i], ensure_ascii, indent, indent_str, item_sep, key_sep,
                              sort_keys, depth + 1))
                return -1;
        }
        if (pretty) json_newline(b, indent, indent_str, depth);
        tbuf_putc(b, ']');
        return 0;
    }
    case TV_DICT: {
        size_t n = v->u.dict.n;
        if (n == 0) {
            tbuf_puts(b, "{}");
            return 0;
        }
        tv ***order = malloc(n * sizeof *order); /* (n) pointers into keys */
        if (!order) return -1;
        for (size_t i = 0; i < n; i++) order[i] = &v->u.dict.keys[i];
        if (sort_keys) qsort(order, n, sizeof *order, key_cmp);
        tbuf_putc(b, '{');
        int rc = 0;
        for (size_t j = 0; j < n && !rc; j++) {
            size_t i = (size_t)(order[j] - v->u.dict.keys);
            const tv *k = v->u.dict.keys[i];
            if (j) tbuf_puts(b, item_sep);
            if (pretty) json_newline(b, indent, indent_str, depth + 1);
            /* json.dumps coerces int/float/bool/None keys to strings */
            if (k->type == TV_STR) json_str(b, k->u.str.s, k->u.str.len, ensure_ascii);
            else if (k->type == TV_INT || k->type == TV_FLOAT) {
                tbuf_putc(b, '"');
                tv_write_json(b, k, 0, -1, NULL, ", ", ": ", 0, depth + 1);
                tbuf_putc(b, '"');
            } else if (k->type == TV_BOOL || k->type == TV_NONE) {
                tbuf_putc(b, '"');
                tbuf_puts(b, k->type == TV_NONE ? "null" : k->u.b ? "true" : "false");
                tbuf_putc(b, '"');
            } else {
                rc = -1;
                break;
            }
            tbuf_puts(b, key_sep);
            rc = tv_write_json(b, v->u.dict.vals[i], ensure_ascii, indent, indent_str, item_sep, key_sep,
                               sort_keys, depth + 1);
        }
        free(order);
        if (rc) return -1;
        if (pretty) json_newline(b, indent, indent_str, depth);
        tbuf_putc(b, '}');
        return 0;
    }
    default: return -1; /* Undefined, functions, namespaces: not serializable */
    }
}
