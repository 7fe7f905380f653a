/* pt_reader — see pt_reader.h.
 *
 *   zip:    EOCD (or its zip64 record) -> central directory -> per entry
 *           name, method 0, sizes, local header -> data span; CRC-32 checked
 *   pickle: a stack of value indices over a value table; MARK is a
 *           sentinel on the stack; the memo maps indices to values.
 * No recursion anywhere: nesting depth is bounded by the stack size. */
#include "util/pt_reader.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PT_MAX_ENTRIES 4096
#define PT_MAX_STACK 65536
#define PT_MAX_MEMO 65536
#define PT_MAX_VALUES 65536
#define PT_MAX_TUPLE 8

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- zip ------------------------------------------------------------------------ */

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    static uint32_t tab[256];
    static bool init;
    if (!init) { /* written once, same values from any thread */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            tab[i] = c;
        }
        init = true;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = tab[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

typedef struct zip_entry {
    const char *name; /* into the buffer, not NUL-terminated */
    size_t name_len;
    const uint8_t *data;
    size_t size;
} zip_entry;

typedef struct zip_dir {
    zip_entry *e;     /* (n) owned */
    size_t n;
} zip_dir;

/* Central-directory entry at p (cd_end bounds it) into *z; its size in *adv. */
static int zip_entry_parse(const uint8_t *buf, size_t len, const uint8_t *p, const uint8_t *cd_end, zip_entry *z,
                           size_t *adv, char *err, size_t errlen)
{
    if ((size_t)(cd_end - p) < 46 || rd32(p) != 0x02014b50u)
        return fail(err, errlen, "not a torch.save file: bad zip central directory");
    uint32_t flags = rd16(p + 8), method = rd16(p + 10), crc = rd32(p + 16);
    uint64_t csize = rd32(p + 20), usize = rd32(p + 24), off = rd32(p + 42);
    size_t nl = rd16(p + 28), el = rd16(p + 30), cl = rd16(p + 32);
    if ((size_t)(cd_end - p) < 46 + nl + el + cl)
        return fail(err, errlen, "not a torch.save file: truncated zip central directory");
    const uint8_t *name = p + 46, *ex = name + nl, *ex_end = ex + el;
    /* zip64: the saturated fields follow in the 0x0001 extra, in this order */
    bool need = usize == 0xFFFFFFFFu || csize == 0xFFFFFFFFu || off == 0xFFFFFFFFu;
    while (need && ex_end - ex >= 4) {
        uint32_t id = rd16(ex), sz = rd16(ex + 2);
        if ((size_t)(ex_end - ex - 4) < sz) break;
        if (id == 1) {
            const uint8_t *q = ex + 4, *qe = q + sz;
            uint64_t *f[3] = {&usize, &csize, &off};
            for (int i = 0; i < 3; i++) {
                if (*f[i] != 0xFFFFFFFFu) continue;
                if (qe - q < 8) return fail(err, errlen, "not a torch.save file: short zip64 extra field");
                *f[i] = rd64(q);
                q += 8;
            }
            need = false;
        }
        ex += 4 + sz;
    }
    if (need) return fail(err, errlen, "not a torch.save file: zip64 sizes without their extra field");
    if (flags & 1) return fail(err, errlen, "the zip entry %.*s is encrypted", (int)(nl > 200 ? 200 : nl), name);
    if (method != 0 || csize != usize)
        return fail(err, errlen, "the zip entry %.*s is compressed (method %u): torch.save writes stored entries only",
                    (int)(nl > 200 ? 200 : nl), name, method);
    if (off > len || len - off < 30 || rd32(buf + off) != 0x04034b50u)
        return fail(err, errlen, "not a torch.save file: bad zip local header for %.*s", (int)(nl > 200 ? 200 : nl),
                    name);
    uint64_t start = off + 30 + rd16(buf + off + 26) + rd16(buf + off + 28);
    if (start > len || len - start < usize)
        return fail(err, errlen, "truncated file: the zip entry %.*s runs past the end", (int)(nl > 200 ? 200 : nl),
                    name);
    z->name = (const char *)name;
    z->name_len = nl;
    z->data = buf + start;
    z->size = (size_t)usize;
    if (crc32_of(z->data, z->size) != crc)
        return fail(err, errlen, "corrupt file: CRC-32 mismatch in the zip entry %.*s", (int)(nl > 200 ? 200 : nl),
                    name);
    *adv = 46 + nl + el + cl;
    return 0;
}

static int zip_open(zip_dir *d, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (len >= 2 && buf[0] == 0x80 && buf[1] <= 5)
        return fail(err, errlen, "a legacy (pre-1.6, non-zip) torch.save file: re-save it with a current torch.save");
    if (len < 22 || rd32(buf) != 0x04034b50u) return fail(err, errlen, "not a torch.save file (no zip signature)");
    size_t eo = len - 22, lo = len > 22 + 65535 ? len - 22 - 65535 : 0;
    for (;; eo--) {
        if (rd32(buf + eo) == 0x06054b50u && eo + 22 + rd16(buf + eo + 20) == len) break;
        if (eo == lo) return fail(err, errlen, "not a torch.save file: no zip end-of-central-directory record");
    }
    uint64_t n = rd16(buf + eo + 10), cds = rd32(buf + eo + 12), cdo = rd32(buf + eo + 16);
    if (n == 0xFFFF || cds == 0xFFFFFFFFu || cdo == 0xFFFFFFFFu) { /* zip64: locator 20 bytes before */
        if (eo < 20 || rd32(buf + eo - 20) != 0x07064b50u)
            return fail(err, errlen, "not a torch.save file: no zip64 end-of-central-directory locator");
        uint64_t ro = rd64(buf + eo - 20 + 8);
        if (ro > len || len - ro < 56 || rd32(buf + ro) != 0x06064b50u)
            return fail(err, errlen, "not a torch.save file: bad zip64 end-of-central-directory record");
        n = rd64(buf + ro + 32), cds = rd64(buf + ro + 40), cdo = rd64(buf + ro + 48);
    }
    if (n == 0 || n > PT_MAX_ENTRIES) return fail(err, errlen, "a zip of %llu entries is not a torch.save file",
                                                  (unsigned long long)n);
    if (cdo > len || len - cdo < cds) return fail(err, errlen, "truncated file: the zip central directory runs past the end");
    if (!(d->e = calloc((size_t)n, sizeof *d->e))) return fail(err, errlen, "out of memory");
    const uint8_t *p = buf + cdo, *end = p + cds;
    for (uint64_t i = 0; i < n; i++) {
        size_t adv = 0;
        if (zip_entry_parse(buf, len, p, end, &d->e[i], &adv, err, errlen)) {
            free(d->e);
            d->e = NULL;
            return -1;
        }
        p += adv;
        d->n++;
    }
    return 0;
}

static const zip_entry *zip_find(const zip_dir *d, const char *prefix, size_t plen, const char *tail, size_t tlen)
{
    for (size_t i = 0; i < d->n; i++) {
        const zip_entry *z = &d->e[i];
        if (z->name_len == plen + tlen && !memcmp(z->name, prefix, plen) && !memcmp(z->name + plen, tail, tlen))
            return z;
    }
    return NULL;
}

/* ---- pickle ----------------------------------------------------------------------- */

enum { V_MARK = -1 };
typedef enum {
    K_INT = 1, K_STR, K_BOOL, K_NONE, K_GLOBAL, K_TUPLE, K_LIST, K_STORAGE, K_ODICT, K_TENSOR
} vkind;
typedef enum { G_REBUILD = 1, G_ODICT, G_LONG_STORAGE, G_INT_STORAGE } gkind;

typedef struct pval {
    vkind kind;
    int64_t i;                  /* INT, BOOL; GLOBAL: gkind; STORAGE: element bytes; TENSOR: offset */
    const char *s;              /* STR; STORAGE: key (into the pickle) */
    uint32_t slen;
    int32_t items[PT_MAX_TUPLE]; /* TUPLE: value indices; TENSOR: items[0] = the storage */
    int nitems;
    int64_t numel;              /* STORAGE: elements; TENSOR: size */
    int64_t *list;              /* LIST: (nlist) owned */
    int64_t nlist, caplist;
    bool memoized;              /* in the memo: its index must stay valid */
} pval;

typedef struct pstate {
    const uint8_t *start, *p, *end;
    pval *v;                    /* (cap_v) owned; indices stay valid, pointers do not across new_val */
    int32_t nv, cap_v;
    int32_t *stack;             /* (cap_stack) owned, grows to PT_MAX_STACK */
    int32_t sp, cap_stack;
    int32_t *memo;              /* (cap_memo) owned, -2 = unset; grows to PT_MAX_MEMO */
    int32_t cap_memo;
    char *err;
    size_t errlen;
} pstate;

static const char *kind_name(vkind k)
{
    static const char *names[] = {"?", "an int", "a string", "a bool", "None", "a global", "a tuple", "a list",
                                  "a storage", "an OrderedDict", "a tensor"};
    return (int)k >= 0 && (size_t)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static int32_t new_val(pstate *s, vkind k)
{
    if (s->nv >= PT_MAX_VALUES) return fail(s->err, s->errlen, "the pickle holds more than %d objects", PT_MAX_VALUES), -1;
    if (s->nv == s->cap_v) {
        int32_t nc = s->cap_v ? s->cap_v * 2 : 64;
        pval *nv = realloc(s->v, sizeof(pval) * (size_t)nc);
        if (!nv) return fail(s->err, s->errlen, "out of memory"), -1;
        s->v = nv;
        s->cap_v = nc;
    }
    memset(&s->v[s->nv], 0, sizeof s->v[0]);
    s->v[s->nv].kind = k;
    return s->nv++;
}

static int push(pstate *s, int32_t vi)
{
    if (vi < V_MARK) return -1;
    if (s->sp >= PT_MAX_STACK) return fail(s->err, s->errlen, "the pickle nests deeper than %d", PT_MAX_STACK);
    if (s->sp == s->cap_stack) {
        int32_t nc = s->cap_stack ? s->cap_stack * 2 : 64;
        int32_t *ns = realloc(s->stack, sizeof(int32_t) * (size_t)nc);
        if (!ns) return fail(s->err, s->errlen, "out of memory");
        s->stack = ns;
        s->cap_stack = nc;
    }
    s->stack[s->sp++] = vi;
    return 0;
}

static int32_t pop(pstate *s)
{
    if (s->sp == 0 || s->stack[s->sp - 1] == V_MARK)
        return fail(s->err, s->errlen, "bad pickle: stack underflow"), -2;
    return s->stack[--s->sp];
}

/* Index of the topmost MARK, or -1. */
static int32_t find_mark(const pstate *s)
{
    for (int32_t i = s->sp - 1; i >= 0; i--)
        if (s->stack[i] == V_MARK) return i;
    return -1;
}

static int need(pstate *s, size_t n)
{
    if ((size_t)(s->end - s->p) < n) return fail(s->err, s->errlen, "truncated pickle");
    return 0;
}

/* Tuple of the stack values from index from to the top (removed). */
static int make_tuple(pstate *s, int32_t from)
{
    int n = s->sp - from;
    if (n > PT_MAX_TUPLE) return fail(s->err, s->errlen, "a tuple of %d items: a token map pickles no such tuple", n);
    int32_t t = new_val(s, K_TUPLE);
    if (t < 0) return -1;
    for (int i = 0; i < n; i++) s->v[t].items[i] = s->stack[from + i];
    s->v[t].nitems = n;
    s->sp = from;
    return push(s, t);
}

static bool is_str(const pval *v, const char *lit)
{
    return v->kind == K_STR && v->slen == strlen(lit) && !memcmp(v->s, lit, v->slen);
}

static int op_global(pstate *s)
{
    const uint8_t *m = s->p, *nl1 = memchr(m, '\n', (size_t)(s->end - m));
    if (!nl1) return fail(s->err, s->errlen, "truncated pickle (GLOBAL)");
    const uint8_t *nm = nl1 + 1, *nl2 = memchr(nm, '\n', (size_t)(s->end - nm));
    if (!nl2) return fail(s->err, s->errlen, "truncated pickle (GLOBAL)");
    int ml = (int)(nl1 - m), nml = (int)(nl2 - nm);
    s->p = nl2 + 1;
    static const struct {
        const char *mod, *name;
        gkind g;
    } ok[] = {{"torch._utils", "_rebuild_tensor_v2", G_REBUILD},
              {"collections", "OrderedDict", G_ODICT},
              {"torch", "LongStorage", G_LONG_STORAGE},
              {"torch", "IntStorage", G_INT_STORAGE}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if ((size_t)ml == strlen(ok[i].mod) && (size_t)nml == strlen(ok[i].name) && !memcmp(m, ok[i].mod, (size_t)ml) &&
            !memcmp(nm, ok[i].name, (size_t)nml)) {
            int32_t v = new_val(s, K_GLOBAL);
            if (v < 0) return -1;
            s->v[v].i = ok[i].g;
            return push(s, v);
        }
    return fail(s->err, s->errlen,
                "the pickle names %.*s.%.*s: a token map holds one integer tensor (int64 / int32 storage) or a list of "
                "ints",
                ml > 80 ? 80 : ml, (const char *)m, nml > 80 ? 80 : nml, (const char *)nm);
}

/* persistent_id(('storage', torch.XStorage, key, location, numel)) */
static int op_persid(pstate *s)
{
    int32_t t = pop(s);
    if (t < 0) return -1;
    const pval *pt = &s->v[t];
    if (pt->kind != K_TUPLE || pt->nitems != 5 || !is_str(&s->v[pt->items[0]], "storage"))
        return fail(s->err, s->errlen, "bad pickle: a persistent id other than ('storage', type, key, location, numel)");
    const pval *ty = &s->v[pt->items[1]], *key = &s->v[pt->items[2]], *n = &s->v[pt->items[4]];
    if (ty->kind != K_GLOBAL || (ty->i != G_LONG_STORAGE && ty->i != G_INT_STORAGE))
        return fail(s->err, s->errlen, "bad pickle: the storage type is %s, not torch.LongStorage / IntStorage",
                    kind_name(ty->kind));
    if (key->kind != K_STR || key->slen == 0 || key->slen > 64 || s->v[pt->items[3]].kind != K_STR ||
        n->kind != K_INT || n->i < 0 || n->i > PT_MAX_VECTOR)
        return fail(s->err, s->errlen, "bad pickle: storage key, location or element count");
    const int64_t elsize = ty->i == G_LONG_STORAGE ? 8 : 4, numel = n->i;
    const char *ks = key->s;
    const uint32_t kl = key->slen;
    int32_t st = new_val(s, K_STORAGE); /* (the pointers above are stale from here) */
    if (st < 0) return -1;
    s->v[st].i = elsize;
    s->v[st].s = ks;
    s->v[st].slen = kl;
    s->v[st].numel = numel;
    return push(s, st);
}

static int op_reduce(pstate *s)
{
    int32_t a = pop(s);
    if (a < 0) return -1;
    int32_t f = pop(s);
    if (f < 0) return -1;
    const pval *fn = &s->v[f], *args = &s->v[a];
    if (fn->kind != K_GLOBAL || args->kind != K_TUPLE)
        return fail(s->err, s->errlen, "bad pickle: REDUCE over %s with %s", kind_name(fn->kind), kind_name(args->kind));
    if (fn->i == G_ODICT) {
        if (args->nitems != 0) return fail(s->err, s->errlen, "bad pickle: OrderedDict with arguments");
        int32_t d = new_val(s, K_ODICT);
        return d < 0 ? -1 : push(s, d);
    }
    if (fn->i != G_REBUILD) return fail(s->err, s->errlen, "bad pickle: a storage type called as a function");
    /* (storage, offset, size, stride, requires_grad, backward_hooks[, metadata]) */
    const int32_t *it = args->items;
    if (args->nitems != 6 && args->nitems != 7)
        return fail(s->err, s->errlen, "bad pickle: _rebuild_tensor_v2 with %d arguments", args->nitems);
    const pval *st = &s->v[it[0]], *off = &s->v[it[1]], *size = &s->v[it[2]], *stride = &s->v[it[3]];
    if (st->kind != K_STORAGE || off->kind != K_INT || size->kind != K_TUPLE || stride->kind != K_TUPLE ||
        s->v[it[4]].kind != K_BOOL || s->v[it[5]].kind != K_ODICT ||
        (args->nitems == 7 && s->v[it[6]].kind != K_NONE))
        return fail(s->err, s->errlen, "bad pickle: unexpected _rebuild_tensor_v2 arguments");
    if (size->nitems != 1 || stride->nitems != 1)
        return fail(s->err, s->errlen, "the tensor has %d dimensions: a token map is a 1-D tensor", size->nitems);
    const pval *n = &s->v[size->items[0]], *sd = &s->v[stride->items[0]];
    if (n->kind != K_INT || sd->kind != K_INT) return fail(s->err, s->errlen, "bad pickle: non-integer size or stride");
    if (n->i > 1 && sd->i != 1)
        return fail(s->err, s->errlen, "the tensor has stride %lld: only contiguous tensors are read", (long long)sd->i);
    if (off->i < 0 || n->i < 0 || off->i > st->numel || n->i > st->numel - off->i)
        return fail(s->err, s->errlen, "the tensor (offset %lld, size %lld) lies outside its storage of %lld elements",
                    (long long)off->i, (long long)n->i, (long long)st->numel);
    const int32_t sti = it[0];
    const int64_t o = off->i, nn = n->i;
    int32_t t = new_val(s, K_TENSOR); /* (the pointers above are stale from here) */
    if (t < 0) return -1;
    s->v[t].items[0] = sti;
    s->v[t].i = o;
    s->v[t].numel = nn;
    return push(s, t);
}

static int list_append(pstate *s, int32_t li, int32_t from)
{
    pval *l = &s->v[li];
    if (l->kind != K_LIST) return fail(s->err, s->errlen, "bad pickle: APPEND to %s", kind_name(l->kind));
    for (int32_t i = from; i < s->sp; i++) {
        const pval *x = &s->v[s->stack[i]];
        if (x->kind != K_INT)
            return fail(s->err, s->errlen, "the list holds %s: a token map is a list of ints", kind_name(x->kind));
        if (l->nlist == l->caplist) {
            if (l->nlist >= PT_MAX_VECTOR) return fail(s->err, s->errlen, "a list of more than %lld ints", (long long)PT_MAX_VECTOR);
            int64_t nc = l->caplist ? l->caplist * 2 : 256;
            int64_t *nl = realloc(l->list, sizeof(int64_t) * (size_t)nc);
            if (!nl) return fail(s->err, s->errlen, "out of memory");
            l->list = nl;
            l->caplist = nc;
        }
        l->list[l->nlist++] = x->i;
    }
    /* the appended ints were the newest values and nothing else refers to
     * them: give their table entries back (a list of 10^5 ints would
     * otherwise need 10^5 entries) */
    bool tail = true;
    for (int32_t i = from; i < s->sp && tail; i++)
        tail = s->stack[i] == s->nv - (s->sp - i) && !s->v[s->stack[i]].memoized;
    if (tail) s->nv -= s->sp - from;
    s->sp = from;
    return 0;
}

static int push_int(pstate *s, int64_t x)
{
    int32_t v = new_val(s, K_INT);
    if (v < 0) return -1;
    s->v[v].i = x;
    return push(s, v);
}

static int push_str(pstate *s, size_t n)
{
    if (need(s, n)) return -1;
    int32_t v = new_val(s, K_STR);
    if (v < 0) return -1;
    s->v[v].s = (const char *)s->p;
    s->v[v].slen = (uint32_t)n;
    s->p += n;
    return push(s, v);
}

static int memo_put(pstate *s, uint64_t idx)
{
    if (idx >= PT_MAX_MEMO) return fail(s->err, s->errlen, "bad pickle: memo index %llu", (unsigned long long)idx);
    if (s->sp == 0 || s->stack[s->sp - 1] == V_MARK) return fail(s->err, s->errlen, "bad pickle: memo of nothing");
    if (idx >= (uint64_t)s->cap_memo) {
        int32_t nc = s->cap_memo ? s->cap_memo : 64;
        while ((uint64_t)nc <= idx) nc *= 2;
        int32_t *nm = realloc(s->memo, sizeof(int32_t) * (size_t)nc);
        if (!nm) return fail(s->err, s->errlen, "out of memory");
        for (int32_t i = s->cap_memo; i < nc; i++) nm[i] = -2;
        s->memo = nm;
        s->cap_memo = nc;
    }
    s->memo[idx] = s->stack[s->sp - 1];
    s->v[s->memo[idx]].memoized = true;
    return 0;
}

static int memo_get(pstate *s, uint64_t idx)
{
    if (idx >= (uint64_t)s->cap_memo || s->memo[idx] < 0)
        return fail(s->err, s->errlen, "bad pickle: memo index %llu was never set", (unsigned long long)idx);
    return push(s, s->memo[idx]);
}

/* Run the pickle to STOP; the result's value index in *res. */
static int unpickle(pstate *s, int32_t *res)
{
    int32_t memo_next = 0;
    while (s->p < s->end) {
        uint8_t op = *s->p++;
        int rc = 0;
        int32_t m, a;
        switch (op) {
        case 0x80: /* PROTO */
            if (need(s, 1)) return -1;
            if (*s->p < 2 || *s->p > 5) return fail(s->err, s->errlen, "pickle protocol %u: 2 to 5 are read", *s->p);
            s->p++;
            break;
        case 0x95: /* FRAME (protocol 4): a length hint */
            if (need(s, 8)) return -1;
            s->p += 8;
            break;
        case 'c': rc = op_global(s); break;
        case 'q':
            if (need(s, 1)) return -1;
            rc = memo_put(s, *s->p++);
            break;
        case 'r':
            if (need(s, 4)) return -1;
            rc = memo_put(s, rd32(s->p));
            s->p += 4;
            break;
        case 0x94: rc = memo_put(s, (uint64_t)memo_next++); break; /* MEMOIZE */
        case 'h':
            if (need(s, 1)) return -1;
            rc = memo_get(s, *s->p++);
            break;
        case 'j':
            if (need(s, 4)) return -1;
            rc = memo_get(s, rd32(s->p));
            s->p += 4;
            break;
        case '(': rc = push(s, V_MARK); break;
        case 'X':
            if (need(s, 4)) return -1;
            a = (int32_t)rd32(s->p);
            s->p += 4;
            if (a < 0) return fail(s->err, s->errlen, "bad pickle: string length");
            rc = push_str(s, (size_t)a);
            break;
        case 0x8c: /* SHORT_BINUNICODE */
            if (need(s, 1)) return -1;
            a = *s->p++;
            rc = push_str(s, (size_t)a);
            break;
        case 'J':
            if (need(s, 4)) return -1;
            rc = push_int(s, (int32_t)rd32(s->p));
            s->p += 4;
            break;
        case 'K':
            if (need(s, 1)) return -1;
            rc = push_int(s, *s->p++);
            break;
        case 'M':
            if (need(s, 2)) return -1;
            rc = push_int(s, rd16(s->p));
            s->p += 2;
            break;
        case 0x8a: { /* LONG1: n little-endian two's-complement bytes */
            if (need(s, 1)) return -1;
            int n = *s->p++;
            if (n > 8) return fail(s->err, s->errlen, "an integer of %d bytes does not fit 64 bits", n);
            if (need(s, (size_t)n)) return -1;
            uint64_t x = 0;
            for (int i = 0; i < n; i++) x |= (uint64_t)s->p[i] << (8 * i);
            if (n > 0 && n < 8 && (s->p[n - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * n);
            s->p += n;
            int64_t sx;
            memcpy(&sx, &x, sizeof sx);
            rc = push_int(s, sx);
            break;
        }
        case 't':
            if ((m = find_mark(s)) < 0) return fail(s->err, s->errlen, "bad pickle: TUPLE without MARK");
            memmove(&s->stack[m], &s->stack[m + 1], sizeof(int32_t) * (size_t)(s->sp - m - 1)); /* drop the mark */
            s->sp--;
            rc = make_tuple(s, m);
            break;
        case ')': rc = make_tuple(s, s->sp); break;
        case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
            int n = op - 0x84;
            if (s->sp < n || find_mark(s) >= s->sp - n) return fail(s->err, s->errlen, "bad pickle: stack underflow");
            rc = make_tuple(s, s->sp - n);
            break;
        }
        case 0x88: case 0x89:
            if ((a = new_val(s, K_BOOL)) < 0) return -1;
            s->v[a].i = op == 0x88;
            rc = push(s, a);
            break;
        case 'N':
            if ((a = new_val(s, K_NONE)) < 0) return -1;
            rc = push(s, a);
            break;
        case '}':
            return fail(s->err, s->errlen, "the file holds a dict: a token map is one integer tensor or a list of ints");
        case 'Q': rc = op_persid(s); break;
        case 'R': rc = op_reduce(s); break;
        case ']':
            if ((a = new_val(s, K_LIST)) < 0) return -1;
            rc = push(s, a);
            break;
        case 'a':
            if (s->sp < 2 || s->stack[s->sp - 1] == V_MARK || s->stack[s->sp - 2] == V_MARK)
                return fail(s->err, s->errlen, "bad pickle: stack underflow");
            rc = list_append(s, s->stack[s->sp - 2], s->sp - 1);
            break;
        case 'e':
            if ((m = find_mark(s)) < 1 || s->stack[m - 1] == V_MARK)
                return fail(s->err, s->errlen, "bad pickle: APPENDS without a list and MARK");
            a = s->stack[m - 1];
            memmove(&s->stack[m], &s->stack[m + 1], sizeof(int32_t) * (size_t)(s->sp - m - 1));
            s->sp--;
            rc = list_append(s, a, m);
            break;
        case '.':
            if (s->sp != 1 || s->stack[0] == V_MARK)
                return fail(s->err, s->errlen, "bad pickle: %d objects left at STOP", s->sp);
            *res = s->stack[0];
            return 0;
        default:
            return fail(s->err, s->errlen, "pickle opcode 0x%02x at byte %td: not one a token map uses", op,
                        s->p - 1 - s->start);
        }
        if (rc) return -1;
    }
    return fail(s->err, s->errlen, "truncated pickle (no STOP)");
}

/* ---- the file ------------------------------------------------------------------------ */

int pt_read_int_vector(const uint8_t *buf, size_t len, int64_t **out, int64_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (len > PT_MAX_FILE_BYTES) return fail(err, errlen, "%zu bytes: more than a token map needs", len);
    zip_dir d;
    if (zip_open(&d, buf, len, err, errlen)) return -1;
    int rc = -1;
    pstate *s = NULL;
    /* PREFIX/data.pkl: exactly one, one folder deep */
    const zip_entry *pk = NULL;
    for (size_t i = 0; i < d.n; i++) {
        const zip_entry *z = &d.e[i];
        const char *sl = memchr(z->name, '/', z->name_len);
        if (sl && (size_t)(sl - z->name) + 1 + 8 == z->name_len && !memcmp(sl + 1, "data.pkl", 8)) {
            if (pk) {
                fail(err, errlen, "the zip holds more than one data.pkl");
                goto out;
            }
            pk = z;
        }
    }
    if (!pk) {
        fail(err, errlen, "not a torch.save file: no PREFIX/data.pkl in the zip");
        goto out;
    }
    const size_t plen = pk->name_len - 8; /* "PREFIX/" */
    const zip_entry *bo = zip_find(&d, pk->name, plen, "byteorder", 9);
    if (bo && !(bo->size == 6 && !memcmp(bo->data, "little", 6))) {
        fail(err, errlen, "a big-endian torch.save file (byteorder %.*s): only little-endian files are read",
             (int)(bo->size > 16 ? 16 : bo->size), (const char *)bo->data);
        goto out;
    }
    if (!(s = calloc(1, sizeof *s))) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    s->start = s->p = pk->data;
    s->end = pk->data + pk->size;
    s->err = err;
    s->errlen = errlen;
    int32_t r = 0;
    if (unpickle(s, &r)) goto out;
    const pval *v = &s->v[r];
    if (v->kind == K_LIST) {
        if (!(*out = malloc(sizeof(int64_t) * (size_t)(v->nlist ? v->nlist : 1)))) {
            fail(err, errlen, "out of memory");
            goto out;
        }
        if (v->nlist) memcpy(*out, v->list, sizeof(int64_t) * (size_t)v->nlist);
        *n = v->nlist;
        rc = 0;
        goto out;
    }
    if (v->kind != K_TENSOR) {
        fail(err, errlen, "the file holds %s, not an integer tensor or a list of ints", kind_name(v->kind));
        goto out;
    }
    const pval *st = &s->v[v->items[0]];
    char key[80];
    int kl = snprintf(key, sizeof key, "data/%.*s", (int)st->slen, st->s);
    const zip_entry *de = zip_find(&d, pk->name, plen, key, (size_t)kl);
    if (!de) {
        fail(err, errlen, "the zip has no storage %.*s%s", (int)plen, pk->name, key);
        goto out;
    }
    const size_t es = (size_t)st->i;
    if (de->size != (size_t)st->numel * es) {
        fail(err, errlen, "storage %s holds %zu bytes, the pickle says %lld elements of %zu", key, de->size,
             (long long)st->numel, es);
        goto out;
    }
    if (!(*out = malloc(sizeof(int64_t) * (size_t)(v->numel ? v->numel : 1)))) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    const uint8_t *p = de->data + (size_t)v->i * es;
    for (int64_t i = 0; i < v->numel; i++, p += es) {
        if (es == 8) {
            uint64_t x = rd64(p);
            memcpy(&(*out)[i], &x, sizeof x);
        } else {
            (*out)[i] = (int32_t)rd32(p);
        }
    }
    *n = v->numel;
    rc = 0;
out:
    if (s) {
        for (int32_t i = 0; i < s->nv; i++)
            if (s->v[i].kind == K_LIST) free(s->v[i].list);
        free(s->v);
        free(s->memo);
        free(s->stack);
        free(s);
    }
    free(d.e);
    return rc;
}

int pt_read_int_vector_file(const char *path, int64_t **out, int64_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "%s", strerror(errno));
    uint8_t *buf = NULL;
    int rc = -1;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0) sz = ftell(f);
    if (sz < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fail(err, errlen, "cannot read it (not a regular file?)");
    } else if ((size_t)sz > PT_MAX_FILE_BYTES) {
        fail(err, errlen, "%ld bytes: more than a token map needs (limit %zu)", sz, PT_MAX_FILE_BYTES);
    } else if (!(buf = malloc((size_t)sz + 1))) {
        fail(err, errlen, "out of memory");
    } else if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        fail(err, errlen, "short read");
    } else {
        rc = pt_read_int_vector(buf, (size_t)sz, out, n, err, errlen);
    }
    free(buf);
    fclose(f);
    return rc;
}
