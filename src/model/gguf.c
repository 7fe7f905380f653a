/* gguf — see gguf.h.
 *
 * DESIGN: one cursor (rd) over the image; every read checks the bytes
 * left first and records the first error, so the parser is a straight
 * line of reads with one check per record.  Counts are checked against a
 * lower bound of the bytes their records need before anything is
 * allocated for them, so a hostile count cannot make us allocate more
 * than a small multiple of the file size.
 */
#include "model/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errmsg.h"

/* ---- ggml type table ------------------------------------------------------ */

static const struct { int id; const char *name; int bs; int bytes; } k_types[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},        {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
};

static int type_index(int id)
{
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (k_types[i].id == id) return (int)i;
    return -1;
}

const char *gguf_type_name(int t)
{
    int i = type_index(t);
    return i < 0 ? NULL : k_types[i].name;
}

int gguf_type_block(int t, int *bs, size_t *bytes)
{
    int i = type_index(t);
    if (i < 0) return 0;
    *bs = k_types[i].bs;
    *bytes = (size_t)k_types[i].bytes;
    return 1;
}

int gguf_type_by_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof k_types / sizeof k_types[0]; i++)
        if (!strcasecmp(k_types[i].name, name)) return k_types[i].id;
    return -1;
}

size_t gguf_type_bytes(int t, int64_t n)
{
    int i = type_index(t);
    if (i < 0 || n < 0 || n % k_types[i].bs) return 0;
    return (size_t)(n / k_types[i].bs) * (size_t)k_types[i].bytes;
}

const char *gguf_vtype_name(int t)
{
    static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32",
                                        "int32", "float32", "bool", "string", "array",
                                        "uint64", "int64", "float64"};
    return t >= 0 && t < GGUF_T_COUNT ? names[t] : "unknown";
}

/* bytes of a fixed-size value type; 0 for string/array/unknown */
static size_t vtype_size(int t)
{
    switch (t) {
    case GGUF_T_UINT8: case GGUF_T_INT8: case GGUF_T_BOOL: return 1;
    case GGUF_T_UINT16: case GGUF_T_INT16: return 2;
    case GGUF_T_UINT32: case GGUF_T_INT32: case GGUF_T_FLOAT32: return 4;
    case GGUF_T_UINT64: case GGUF_T_INT64: case GGUF_T_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- reader ---------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t len, pos;
    const char *fname;
    char *err;
    size_t errlen;
    int bad;
} rd;

static void rd_fail(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rd_fail(rd *r, const char *fmt, ...)
{
    if (r->bad) return;
    r->bad = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    errmsg_set(r->err, r->errlen, "%s: %s", r->fname, msg);
}

static size_t rd_left(const rd *r) { return r->len - r->pos; }

static int rd_bytes(rd *r, void *dst, size_t n, const char *what)
{
    if (r->bad) return -1;
    if (rd_left(r) < n) {
        rd_fail(r, "truncated file: %s needs %zu bytes at offset %zu, %zu left", what, n, r->pos,
                rd_left(r));
        return -1;
    }
    memcpy(dst, r->p + r->pos, n);
    r->pos += n;
    return 0;
}

static uint32_t rd_u32(rd *r, const char *what)
{
    uint32_t v = 0;
    rd_bytes(r, &v, 4, what);
    return v;
}

static uint64_t rd_u64(rd *r, const char *what)
{
    uint64_t v = 0;
    rd_bytes(r, &v, 8, what);
    return v;
}

static gguf_str rd_str(rd *r, const char *what)
{
    gguf_str s = {NULL, 0};
    uint64_t n = rd_u64(r, what);
    if (r->bad) return s;
    if (n > rd_left(r)) {
        rd_fail(r, "truncated file: %s of %llu bytes at offset %zu, %zu left", what,
                (unsigned long long)n, r->pos, rd_left(r));
        return s;
    }
    s.s = (const char *)r->p + r->pos;
    s.len = n;
    r->pos += n;
    return s;
}

static char *str_dup(rd *r, gguf_str s, const char *what)
{
    if (r->bad) return NULL;
    if (memchr(s.s, 0, s.len)) {
        rd_fail(r, "%s '%.*s' holds a NUL byte", what, (int)(s.len > 64 ? 64 : s.len), s.s);
        return NULL;
    }
    char *c = malloc(s.len + 1);
    if (!c) {
        rd_fail(r, "out of memory");
        return NULL;
    }
    memcpy(c, s.s, s.len);
    c[s.len] = 0;
    return c;
}

static void value_free(gguf_value *v)
{
    if (v->arrs)
        for (uint64_t i = 0; i < v->n; i++) value_free(&v->arrs[i]);
    free(v->arrs);
    free(v->strs);
    v->arrs = NULL;
    v->strs = NULL;
}

static void rd_value(rd *r, gguf_value *v, int type, int depth, const char *key);

static void rd_array(rd *r, gguf_value *v, int depth, const char *key)
{
    if (depth >= GGUF_MAX_DEPTH) {
        rd_fail(r, "key '%s': arrays nested deeper than %d", key, GGUF_MAX_DEPTH);
        return;
    }
    uint32_t et = rd_u32(r, "array element type");
    uint64_t n = rd_u64(r, "array length");
    if (r->bad) return;
    v->arr_type = (int)et;
    if (et >= GGUF_T_COUNT) {
        rd_fail(r, "key '%s': unknown array element type %u", key, et);
        return;
    }
    size_t es = vtype_size((int)et);
    /* the least bytes one element takes: a count beyond left / min is a lie */
    size_t min = es ? es : et == GGUF_T_STRING ? 8 : 12;
    if (n > rd_left(r) / min) {
        rd_fail(r, "key '%s': array of %llu %s elements does not fit the %zu bytes left", key,
                (unsigned long long)n, gguf_vtype_name((int)et), rd_left(r));
        return;
    }
    v->n = n;
    if (es) {
        v->arr_data = r->p + r->pos;
        r->pos += (size_t)n * es;
        if (et == GGUF_T_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (((const uint8_t *)v->arr_data)[i] > 1) {
                    rd_fail(r, "key '%s': bool element %llu is %u, not 0 or 1", key,
                            (unsigned long long)i, ((const uint8_t *)v->arr_data)[i]);
                    return;
                }
        return;
    }
    if (et == GGUF_T_STRING) {
        v->strs = calloc(n ? (size_t)n : 1, sizeof *v->strs);
        if (!v->strs) {
            rd_fail(r, "out of memory");
            return;
        }
        for (uint64_t i = 0; i < n && !r->bad; i++) v->strs[i] = rd_str(r, "array string");
        return;
    }
    v->arrs = calloc(n ? (size_t)n : 1, sizeof *v->arrs);
    if (!v->arrs) {
        rd_fail(r, "out of memory");
        return;
    }
    for (uint64_t i = 0; i < n && !r->bad; i++) {
        v->arrs[i].type = GGUF_T_ARRAY;
        rd_array(r, &v->arrs[i], depth + 1, key);
    }
}

static void rd_value(rd *r, gguf_value *v, int type, int depth, const char *key)
{
    v->type = type;
    uint8_t b[8] = {0};
    switch (type) {
    case GGUF_T_STRING:
        v->str = rd_str(r, "string value");
        return;
    case GGUF_T_ARRAY:
        rd_array(r, v, depth, key);
        return;
    default:
        break;
    }
    size_t es = vtype_size(type);
    if (!es) {
        rd_fail(r, "key '%s': unknown value type %d", key, type);
        return;
    }
    if (rd_bytes(r, b, es, "value")) return;
    switch (type) {
    case GGUF_T_UINT8: v->num.u = b[0]; break;
    case GGUF_T_INT8: v->num.i = (int8_t)b[0]; break;
    case GGUF_T_BOOL:
        if (b[0] > 1) rd_fail(r, "key '%s': bool is %u, not 0 or 1", key, b[0]);
        v->num.u = b[0];
        break;
    case GGUF_T_UINT16: { uint16_t x; memcpy(&x, b, 2); v->num.u = x; break; }
    case GGUF_T_INT16: { int16_t x; memcpy(&x, b, 2); v->num.i = x; break; }
    case GGUF_T_UINT32: { uint32_t x; memcpy(&x, b, 4); v->num.u = x; break; }
    case GGUF_T_INT32: { int32_t x; memcpy(&x, b, 4); v->num.i = x; break; }
    case GGUF_T_FLOAT32: { float x; memcpy(&x, b, 4); v->num.f = x; break; }
    case GGUF_T_UINT64: memcpy(&v->num.u, b, 8); break;
    case GGUF_T_INT64: memcpy(&v->num.i, b, 8); break;
    case GGUF_T_FLOAT64: memcpy(&v->num.f, b, 8); break;
    }
}

static const gguf_file *g_sort_ctx; /* qsort has no context argument in C11 */

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(g_sort_ctx->tensors[*(const int64_t *)a].name,
                  g_sort_ctx->tensors[*(const int64_t *)b].name);
}

static int cmp_kv_key(const void *a, const void *b)
{
    return strcmp(g_sort_ctx->kv[*(const int64_t *)a].key, g_sort_ctx->kv[*(const int64_t *)b].key);
}

static int cmp_tensor_off(const void *a, const void *b)
{
    const gguf_tensor *x = &g_sort_ctx->tensors[*(const int64_t *)a];
    const gguf_tensor *y = &g_sort_ctx->tensors[*(const int64_t *)b];
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void free_records(gguf_file *g)
{
    for (int64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        value_free(&g->kv[i].v);
    }
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv), free(g->tensors), free(g->by_name), free(g->kv_by_key);
    g->kv = NULL, g->tensors = NULL, g->by_name = NULL, g->kv_by_key = NULL;
    g->n_kv = g->n_tensors = 0;
}

/* the records need the sorted indices; sorting uses a file-static context,
 * so parses are serialized (loading is single-threaded; fuzzers too) */
static void sort_index(gguf_file *g, int64_t *idx, int64_t n, int (*cmp)(const void *, const void *))
{
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    g_sort_ctx = g;
    qsort(idx, (size_t)n, sizeof *idx, cmp);
    g_sort_ctx = NULL;
}

static void parse_tensors(rd *r, gguf_file *g)
{
    char what[96];
    for (int64_t i = 0; i < g->n_tensors && !r->bad; i++) {
        gguf_tensor *t = &g->tensors[i];
        gguf_str nm = rd_str(r, "tensor name");
        t->name = str_dup(r, nm, "tensor name");
        if (r->bad) return;
        snprintf(what, sizeof what, "tensor '%.60s'", t->name);
        uint32_t nd = rd_u32(r, what);
        if (r->bad) return;
        if (nd < 1 || nd > GGUF_MAX_DIMS) {
            rd_fail(r, "tensor '%s' has %u dimensions (1..%d allowed)", t->name, nd, GGUF_MAX_DIMS);
            return;
        }
        t->ndim = (int)nd;
        int64_t numel = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t ne = rd_u64(r, what);
            if (r->bad) return;
            if (ne == 0 || ne > (1ull << 40) || (uint64_t)numel > (1ull << 42) / ne) {
                rd_fail(r, "tensor '%s': dimension %u is %llu (absurd or empty)", t->name, d,
                        (unsigned long long)ne);
                return;
            }
            t->ne[d] = (int64_t)ne;
            numel *= (int64_t)ne;
        }
        for (int d = (int)nd; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        uint32_t ty = rd_u32(r, what);
        t->offset = rd_u64(r, what);
        if (r->bad) return;
        int bs;
        size_t bb;
        if (!gguf_type_block((int)ty, &bs, &bb)) {
            rd_fail(r, "tensor '%s' has unknown ggml type id %u", t->name, ty);
            return;
        }
        t->ggml_type = (int)ty;
        if (t->ne[0] % bs) {
            rd_fail(r, "tensor '%s': row length %lld is not a multiple of the %s block size %d",
                    t->name, (long long)t->ne[0], gguf_type_name((int)ty), bs);
            return;
        }
        t->nbytes = (size_t)(numel / bs) * bb;
        if (t->offset % g->alignment) {
            rd_fail(r, "tensor '%s': offset %llu is not a multiple of the alignment %u", t->name,
                    (unsigned long long)t->offset, g->alignment);
            return;
        }
    }
}

int gguf_parse_buffer(gguf_file *g, const uint8_t *buf, size_t len, const char *fname, char *err,
                      size_t errlen)
{
    memset(g, 0, sizeof *g);
    rd r = {.p = buf, .len = len, .fname = fname ? fname : "gguf", .err = err, .errlen = errlen};
    g->buf = buf;
    g->len = len;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    char magic[4];
    if (len < 4 || (memcpy(magic, buf, 4), memcmp(magic, "GGUF", 4))) {
        rd_fail(&r, "not a GGUF file (bad magic; expected \"GGUF\")");
        return -1;
    }
    r.pos = 4;
    g->version = rd_u32(&r, "version");
    if (r.bad) return -1;
    if (g->version == 1) {
        rd_fail(&r, "GGUF version 1 is not supported (an old llama.cpp format); re-convert the "
                    "model to GGUF v3");
        return -1;
    }
    if (g->version != 2 && g->version != 3) {
        rd_fail(&r, "unsupported GGUF version %u (2 and 3 are)", g->version);
        return -1;
    }
    uint64_t nt = rd_u64(&r, "tensor count");
    uint64_t nkv = rd_u64(&r, "metadata count");
    if (r.bad) return -1;
    /* a kv takes >= 8 (key length) + 4 (type) + 1 bytes; a tensor info >= 8 + 4 + 8 + 4 + 8 */
    if (nkv > rd_left(&r) / 13) {
        rd_fail(&r, "metadata count %llu does not fit the file", (unsigned long long)nkv);
        return -1;
    }
    if (nt > rd_left(&r) / 32) {
        rd_fail(&r, "tensor count %llu does not fit the file", (unsigned long long)nt);
        return -1;
    }
    g->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
    g->kv_by_key = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv_by_key);
    g->tensors = calloc(nt ? (size_t)nt : 1, sizeof *g->tensors);
    g->by_name = calloc(nt ? (size_t)nt : 1, sizeof *g->by_name);
    g->n_kv = (int64_t)nkv;
    g->n_tensors = (int64_t)nt;
    if (!g->kv || !g->tensors || !g->by_name || !g->kv_by_key) {
        rd_fail(&r, "out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < g->n_kv && !r.bad; i++) {
        gguf_kv *kv = &g->kv[i];
        kv->key = str_dup(&r, rd_str(&r, "metadata key"), "metadata key");
        uint32_t ty = rd_u32(&r, "metadata value type");
        if (r.bad) break;
        if (ty >= GGUF_T_COUNT) {
            rd_fail(&r, "key '%s' has unknown value type %u", kv->key, ty);
            break;
        }
        rd_value(&r, &kv->v, (int)ty, 0, kv->key);
    }
    if (r.bad) goto fail;
    sort_index(g, g->kv_by_key, g->n_kv, cmp_kv_key);
    for (int64_t i = 1; i < g->n_kv; i++)
        if (!strcmp(g->kv[g->kv_by_key[i]].key, g->kv[g->kv_by_key[i - 1]].key)) {
            rd_fail(&r, "metadata key '%s' appears twice", g->kv[g->kv_by_key[i]].key);
            goto fail;
        }
    const gguf_kv *al = gguf_find_kv(g, "general.alignment");
    if (al) {
        if (al->v.type != GGUF_T_UINT32 || al->v.num.u == 0 || (al->v.num.u & (al->v.num.u - 1)) ||
            al->v.num.u > (1u << 16)) {
            rd_fail(&r, "general.alignment must be a uint32 power of two up to 65536");
            goto fail;
        }
        g->alignment = (uint32_t)al->v.num.u;
    }
    parse_tensors(&r, g);
    if (r.bad) goto fail;
    sort_index(g, g->by_name, g->n_tensors, cmp_tensor_name);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[g->by_name[i]].name, g->tensors[g->by_name[i - 1]].name)) {
            rd_fail(&r, "tensor '%s' appears twice", g->tensors[g->by_name[i]].name);
            goto fail;
        }
    size_t data_off = (r.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors > 0 && data_off > len) {
        rd_fail(&r, "truncated file: the data section would start at %zu, past the end (%zu)",
                data_off, len);
        goto fail;
    }
    g->data_off = data_off;
    size_t data_len = data_off <= len ? len - data_off : 0;
    /* tensors in offset order: in range and disjoint */
    int64_t *ord = malloc(sizeof(int64_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
    if (!ord) {
        rd_fail(&r, "out of memory");
        goto fail;
    }
    sort_index(g, ord, g->n_tensors, cmp_tensor_off);
    uint64_t end_prev = 0;
    const char *prev = NULL;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[ord[i]];
        if (t->offset > data_len || t->nbytes > data_len - t->offset) {
            rd_fail(&r, "tensor '%s' (%s, %zu bytes at offset %llu) runs past the end of the "
                        "data section (%zu bytes)", t->name, gguf_type_name(t->ggml_type),
                    t->nbytes, (unsigned long long)t->offset, data_len);
            break;
        }
        if (prev && t->offset < end_prev) {
            rd_fail(&r, "tensors '%s' and '%s' overlap", prev, t->name);
            break;
        }
        end_prev = t->offset + t->nbytes;
        prev = t->name;
        t->data = buf + data_off + t->offset;
    }
    free(ord);
    if (r.bad) goto fail;
    return 0;
fail:
    free_records(g);
    return -1;
}

int gguf_open(gguf_file *g, const char *path, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errmsg_set(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        errmsg_set(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    if (len < 4) {
        close(fd);
        errmsg_set(err, errlen, "%s: not a GGUF file (%zu bytes)", path, len);
        return -1;
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        errmsg_set(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
        return -1;
    }
    if (gguf_parse_buffer(g, map, len, path, err, errlen)) {
        munmap(map, len);
        return -1;
    }
    g->map = map;
    g->map_len = len;
    g->path = strdup(path);
    if (!g->path) {
        gguf_close(g);
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void gguf_close(gguf_file *g)
{
    if (!g) return;
    free_records(g);
    if (g->map) munmap(g->map, g->map_len);
    free(g->path);
    memset(g, 0, sizeof *g);
}

void gguf_release_unused(gguf_file *g)
{
    if (!g->map || !g->n_tensors) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* pages wholly inside the data section that hold no byte of a kept tensor */
    unsigned char *keep = calloc((g->map_len + page - 1) / page, 1);
    if (!keep) return;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (!t->keep || !t->nbytes) continue;
        size_t b = (size_t)((const uint8_t *)t->data - g->buf);
        for (size_t p = b / page; p <= (b + t->nbytes - 1) / page; p++) keep[p] = 1;
    }
    size_t first = (g->data_off + page - 1) / page, npages = (g->map_len + page - 1) / page;
    /* the metadata (the tokenizer's 128K-entry arrays: ~8 MiB for Llama 3)
     * was read while loading; its records point into the mapping, so a
     * later look faults the pages back in from the file */
    if (first > 1) madvise(g->map, (first - 1) * page, MADV_DONTNEED);
    size_t run = first;
    for (size_t p = first; p <= npages; p++) {
        if (p == npages || keep[p]) {
            if (p > run) madvise((char *)g->map + run * page, (p - run) * page, MADV_DONTNEED);
            run = p + 1;
        }
    }
    free(keep);
}

void gguf_drop_range(gguf_file *g, const void *p, size_t len)
{
    if (!g->map || !p || !len) return;
    const uint8_t *lo = p, *base = g->map;
    if (lo < base + g->data_off || lo + len > base + g->map_len) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t b = ((size_t)(lo - base) + page - 1) / page * page, e = (size_t)(lo + len - base) / page * page;
    if (e > b) madvise((char *)g->map + b, e - b, MADV_DONTNEED);
}

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key)
{
    int64_t lo = 0, hi = g->n_kv - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int c = strcmp(g->kv[g->kv_by_key[mid]].key, key);
        if (!c) return &g->kv[g->kv_by_key[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name)
{
    int64_t lo = 0, hi = g->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int c = strcmp(g->tensors[g->by_name[mid]].name, name);
        if (!c) return &g->tensors[g->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static int is_int_type(int t)
{
    return t == GGUF_T_UINT8 || t == GGUF_T_INT8 || t == GGUF_T_UINT16 || t == GGUF_T_INT16 ||
           t == GGUF_T_UINT32 || t == GGUF_T_INT32 || t == GGUF_T_UINT64 || t == GGUF_T_INT64 ||
           t == GGUF_T_BOOL;
}

static int is_signed(int t)
{
    return t == GGUF_T_INT8 || t == GGUF_T_INT16 || t == GGUF_T_INT32 || t == GGUF_T_INT64;
}

static const char *fname_of(const gguf_file *g) { return g->path ? g->path : "gguf"; }

int gguf_get_int(const gguf_file *g, const char *key, int64_t *out, char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv) return 0;
    int t = kv->v.type;
    if (!is_int_type(t) || (!is_signed(t) && kv->v.num.u > (uint64_t)INT64_MAX)) {
        errmsg_set(err, errlen, "%s: metadata '%s' is a %s, expected an integer", fname_of(g), key,
                   gguf_vtype_name(t));
        return -1;
    }
    *out = is_signed(t) ? kv->v.num.i : (int64_t)kv->v.num.u;
    return 1;
}

int gguf_get_float(const gguf_file *g, const char *key, double *out, char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv) return 0;
    int t = kv->v.type;
    if (t == GGUF_T_FLOAT32 || t == GGUF_T_FLOAT64) {
        *out = kv->v.num.f;
        return 1;
    }
    if (is_int_type(t) && t != GGUF_T_BOOL) {
        *out = is_signed(t) ? (double)kv->v.num.i : (double)kv->v.num.u;
        return 1;
    }
    errmsg_set(err, errlen, "%s: metadata '%s' is a %s, expected a number", fname_of(g), key,
               gguf_vtype_name(t));
    return -1;
}

int gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv) return 0;
    if (kv->v.type != GGUF_T_STRING) {
        errmsg_set(err, errlen, "%s: metadata '%s' is a %s, expected a string", fname_of(g), key,
                   gguf_vtype_name(kv->v.type));
        return -1;
    }
    *out = kv->v.str;
    return 1;
}

/* a float as int64, 0 for NaN and values outside the range (a cast would be UB) */
static int64_t f_to_i64(double x)
{
    return x >= -9.2e18 && x <= 9.2e18 ? (int64_t)x : 0;
}

int64_t gguf_arr_int(const gguf_value *v, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)v->arr_data + i * vtype_size(v->arr_type);
    switch (v->arr_type) {
    case GGUF_T_UINT8: case GGUF_T_BOOL: return *p;
    case GGUF_T_INT8: return (int8_t)*p;
    case GGUF_T_UINT16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_T_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_T_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_T_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_T_UINT64: case GGUF_T_INT64: { int64_t x; memcpy(&x, p, 8); return x; }
    case GGUF_T_FLOAT32: { float x; memcpy(&x, p, 4); return f_to_i64(x); }
    case GGUF_T_FLOAT64: { double x; memcpy(&x, p, 8); return f_to_i64(x); }
    default: return 0;
    }
}

double gguf_arr_float(const gguf_value *v, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)v->arr_data + i * vtype_size(v->arr_type);
    if (v->arr_type == GGUF_T_FLOAT32) {
        float x;
        memcpy(&x, p, 4);
        return x;
    }
    if (v->arr_type == GGUF_T_FLOAT64) {
        double x;
        memcpy(&x, p, 8);
        return x;
    }
    return (double)gguf_arr_int(v, i);
}

/* ---- writer ---------------------------------------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int oom;
} wbuf;

static void wb_put(wbuf *b, const void *d, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->len + n) nc *= 2;
        uint8_t *g = realloc(b->p, nc);
        if (!g) {
            b->oom = 1;
            return;
        }
        b->p = g;
        b->cap = nc;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void wb_u32(wbuf *b, uint32_t v) { wb_put(b, &v, 4); }
static void wb_u64(wbuf *b, uint64_t v) { wb_put(b, &v, 8); }
static void wb_str(wbuf *b, const char *s, size_t n)
{
    wb_u64(b, n);
    wb_put(b, s, n);
}

typedef struct wtensor {
    char *name;
    int type, ndim;
    int64_t ne[GGUF_MAX_DIMS];
    size_t nbytes;
    uint64_t offset;
} wtensor;

struct gguf_writer {
    uint32_t alignment;
    wbuf kv;             /* encoded metadata records */
    int64_t n_kv;
    char **keys;         /* (n_kv) owned: duplicate check */
    wtensor *t;          /* (n_t) owned */
    int64_t n_t, cap_t;
    int64_t cur;         /* tensor whose bytes are being written */
    size_t cur_done;     /* bytes of it written */
    int failed;
};

gguf_writer *gguf_writer_create(uint32_t alignment)
{
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment ? alignment : GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_destroy(gguf_writer *w)
{
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (int64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->keys), free(w->t), free(w->kv.p);
    free(w);
}

/* key + type id; -1 on a duplicate key or OOM */
static int w_key(gguf_writer *w, const char *key, int type)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key)) return -1;
    char **g = realloc(w->keys, sizeof(char *) * (size_t)(w->n_kv + 1));
    if (!g) return -1;
    w->keys = g;
    if (!(w->keys[w->n_kv] = strdup(key))) return -1;
    w->n_kv++;
    wb_str(&w->kv, key, strlen(key));
    wb_u32(&w->kv, (uint32_t)type);
    return w->kv.oom ? -1 : 0;
}

int gguf_writer_raw(gguf_writer *w, const char *key, int type, const void *bytes, size_t len)
{
    if (w_key(w, key, type)) return -1;
    wb_put(&w->kv, bytes, len);
    return w->kv.oom ? -1 : 0;
}

int gguf_writer_u32(gguf_writer *w, const char *key, uint32_t v)
{
    return gguf_writer_raw(w, key, GGUF_T_UINT32, &v, 4);
}

int gguf_writer_i32(gguf_writer *w, const char *key, int32_t v)
{
    return gguf_writer_raw(w, key, GGUF_T_INT32, &v, 4);
}

int gguf_writer_u64(gguf_writer *w, const char *key, uint64_t v)
{
    return gguf_writer_raw(w, key, GGUF_T_UINT64, &v, 8);
}

int gguf_writer_f32(gguf_writer *w, const char *key, float v)
{
    return gguf_writer_raw(w, key, GGUF_T_FLOAT32, &v, 4);
}

int gguf_writer_bool(gguf_writer *w, const char *key, int v)
{
    uint8_t b = v ? 1 : 0;
    return gguf_writer_raw(w, key, GGUF_T_BOOL, &b, 1);
}

int gguf_writer_str(gguf_writer *w, const char *key, const char *s)
{
    if (w_key(w, key, GGUF_T_STRING)) return -1;
    wb_str(&w->kv, s, strlen(s));
    return w->kv.oom ? -1 : 0;
}

int gguf_writer_arr_str(gguf_writer *w, const char *key, const char *const *s, uint64_t n)
{
    if (w_key(w, key, GGUF_T_ARRAY)) return -1;
    wb_u32(&w->kv, GGUF_T_STRING);
    wb_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++) wb_str(&w->kv, s[i], strlen(s[i]));
    return w->kv.oom ? -1 : 0;
}

int gguf_writer_arr(gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n)
{
    size_t es = vtype_size(elem_type);
    if (!es || w_key(w, key, GGUF_T_ARRAY)) return -1;
    wb_u32(&w->kv, (uint32_t)elem_type);
    wb_u64(&w->kv, n);
    wb_put(&w->kv, data, (size_t)n * es);
    return w->kv.oom ? -1 : 0;
}

int gguf_writer_tensor(gguf_writer *w, const char *name, int type, int ndim, const int64_t *ne)
{
    if (ndim < 1 || ndim > GGUF_MAX_DIMS || !gguf_type_name(type)) return -1;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (ne[d] <= 0) return -1;
        n *= ne[d];
    }
    int bs = 1;
    size_t bb = 0;
    if (!gguf_type_block(type, &bs, &bb) || ne[0] % bs) return -1;
    if (w->n_t == w->cap_t) {
        int64_t nc = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *g = realloc(w->t, sizeof *g * (size_t)nc);
        if (!g) return -1;
        w->t = g;
        w->cap_t = nc;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return -1;
    t->type = type;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->ne[d] = ne[d];
    t->nbytes = (size_t)(n / bs) * bb;
    uint64_t off = 0;
    if (w->n_t) {
        const wtensor *p = &w->t[w->n_t - 1];
        off = (p->offset + p->nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    t->offset = off;
    w->n_t++;
    return 0;
}

static int pad_to(FILE *f, size_t len, uint32_t align)
{
    static const uint8_t zeros[256];
    size_t pad = (align - len % align) % align;
    while (pad) {
        size_t c = pad < sizeof zeros ? pad : sizeof zeros;
        if (fwrite(zeros, 1, c, f) != c) return -1;
        pad -= c;
    }
    return 0;
}

int gguf_writer_write_header(gguf_writer *w, FILE *f)
{
    if (w->kv.oom) return -1;
    wbuf h = {0};
    wb_put(&h, "GGUF", 4);
    wb_u32(&h, 3);
    wb_u64(&h, (uint64_t)w->n_t);
    uint64_t nkv = (uint64_t)w->n_kv + (w->alignment != GGUF_DEFAULT_ALIGNMENT);
    wb_u64(&h, nkv);
    wb_put(&h, w->kv.p, w->kv.len);
    if (w->alignment != GGUF_DEFAULT_ALIGNMENT) {
        const char *k = "general.alignment";
        wb_str(&h, k, strlen(k));
        wb_u32(&h, GGUF_T_UINT32);
        wb_u32(&h, w->alignment);
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        wb_str(&h, t->name, strlen(t->name));
        wb_u32(&h, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) wb_u64(&h, (uint64_t)t->ne[d]);
        wb_u32(&h, (uint32_t)t->type);
        wb_u64(&h, t->offset);
    }
    int rc = h.oom || fwrite(h.p, 1, h.len, f) != h.len || pad_to(f, h.len, w->alignment) ? -1 : 0;
    free(h.p);
    w->cur = 0;
    w->cur_done = 0;
    return rc;
}

int gguf_writer_write_data(gguf_writer *w, FILE *f, const void *data, size_t n)
{
    if (w->failed || w->cur >= w->n_t) return -1;
    wtensor *t = &w->t[w->cur];
    if (n > t->nbytes - w->cur_done) {
        w->failed = 1;
        return -1;
    }
    if (n && fwrite(data, 1, n, f) != n) {
        w->failed = 1;
        return -1;
    }
    w->cur_done += n;
    if (w->cur_done == t->nbytes) {
        if (w->cur + 1 < w->n_t && pad_to(f, t->nbytes, w->alignment)) {
            w->failed = 1;
            return -1;
        }
        w->cur++;
        w->cur_done = 0;
    }
    return 0;
}

int gguf_writer_finish(gguf_writer *w, FILE *f)
{
    if (w->failed || w->cur != w->n_t) return -1;
    return fflush(f) ? -1 : 0;
}
