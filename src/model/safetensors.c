/* safetensors — see safetensors.h for the format and the validation rules.
 *
 * DESIGN: parsing is done on an in-memory image (the mmap of a file, or a
 * fuzzer's buffer) so the exact same code validates both.  Records of one
 * file are first checked among themselves (sorted by offset: they must tile
 * the data area), then appended to the archive; after all files are read the
 * archive is sorted by name and checked for names defined twice.
 *
 * The end of the file implements the weight-source interface (wsource.h)
 * over an st_archive: the loader reaches safetensors only through it.
 */
#include "model/safetensors.h"
#include "model/wsource.h"
#include "util/errmsg.h"
#include "util/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

#define ST_MAX_HEADER (100u << 20) /* same cap as the Rust implementation */


int st_dtype_parse(const char *s, size_t *elem_size)
{
    static const struct {
        const char *name;
        int dt;
        size_t size;
    } tab[] = {
        {"F32", DTYPE_F32, 4}, {"F16", DTYPE_F16, 2},     {"BF16", DTYPE_BF16, 2},
        {"F64", -1, 8},        {"I64", -1, 8},            {"U64", -1, 8},
        {"I32", -1, 4},        {"U32", -1, 4},            {"I16", -1, 2},
        {"U16", -1, 2},        {"I8", -1, 1},             {"U8", -1, 1},
        {"BOOL", -1, 1},       {"F8_E4M3", -1, 1},        {"F8_E5M2", -1, 1},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (!strcmp(s, tab[i].name)) {
            if (elem_size) *elem_size = tab[i].size;
            return tab[i].dt;
        }
    }
    return -2;
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

typedef struct {
    size_t begin, end;
    const char *name;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* A JSON integer that fits in [0, max]; -1 otherwise. */
static int json_uint(const json_t *v, uint64_t max, uint64_t *out)
{
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max) return -1;
    *out = (uint64_t)x;
    return 0;
}

int st_parse_buffer(st_archive *a, const uint8_t *buf, size_t len, int file_idx,
                    const char *fname, char *err, size_t errlen)
{
    if (len < 8) {
        errmsg_set(err, errlen, "%s: file too short for a safetensors header (%zu bytes)", fname, len);
        return -1;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n > len - 8) {
        errmsg_set(err, errlen, "%s: header length %llu exceeds the file size %zu", fname,
               (unsigned long long)n, len);
        return -1;
    }
    if (n > ST_MAX_HEADER) {
        errmsg_set(err, errlen, "%s: header length %llu exceeds the 100 MiB limit", fname,
               (unsigned long long)n);
        return -1;
    }
    if (n < 2 || buf[8] != '{') {
        errmsg_set(err, errlen, "%s: header is not a JSON object", fname);
        return -1;
    }
    size_t data_len = len - 8 - (size_t)n;
    const uint8_t *data = buf + 8 + n;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        errmsg_set(err, errlen, "%s: bad JSON header: %s (line %d, column %d)", fname, jerr.text,
               jerr.line, jerr.column);
        return -1;
    }
    if (!json_is_object(root)) {
        errmsg_set(err, errlen, "%s: header is not a JSON object", fname);
        json_decref(root);
        return -1;
    }
    size_t cap = json_object_size(root);
    span *spans = calloc(cap ? cap : 1, sizeof *spans);
    st_tensor *grow = realloc(a->tensors, sizeof(st_tensor) * ((size_t)a->n_tensors + cap + 1));
    if (!spans || !grow) {
        free(spans);
        if (grow) a->tensors = grow;
        errmsg_set(err, errlen, "%s: out of memory", fname);
        json_decref(root);
        return -1;
    }
    a->tensors = grow;
    int n0 = a->n_tensors, ns = 0, rc = -1;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                errmsg_set(err, errlen, "%s: __metadata__ is not a JSON object", fname);
                goto out;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv)
            {
                if (!json_is_string(mv)) {
                    errmsg_set(err, errlen, "%s: __metadata__ value of '%s' is not a string", fname, mk);
                    goto out;
                }
            }
            continue;
        }
        if (!json_is_object(val)) {
            errmsg_set(err, errlen, "%s: tensor '%s': entry is not a JSON object", fname, key);
            goto out;
        }
        json_t *jdt = json_object_get(val, "dtype"), *jshape = json_object_get(val, "shape"),
               *joff = json_object_get(val, "data_offsets");
        if (!json_is_string(jdt)) {
            errmsg_set(err, errlen, "%s: tensor '%s': missing or non-string dtype", fname, key);
            goto out;
        }
        size_t esize = 0;
        int dt = st_dtype_parse(json_string_value(jdt), &esize);
        if (dt == -2) {
            errmsg_set(err, errlen, "%s: tensor '%s': unknown dtype '%.16s'", fname, key,
                   json_string_value(jdt));
            goto out;
        }
        if (!json_is_array(jshape) || json_array_size(jshape) > ST_MAX_DIMS) {
            errmsg_set(err, errlen, "%s: tensor '%s': shape must be an array of at most %d ints", fname,
                   key, ST_MAX_DIMS);
            goto out;
        }
        st_tensor t;
        memset(&t, 0, sizeof t);
        t.ndim = (int)json_array_size(jshape);
        uint64_t numel = 1;
        int overflow = 0;
        for (int d = 0; d < t.ndim; d++) {
            uint64_t dim;
            if (json_uint(json_array_get(jshape, (size_t)d), (uint64_t)INT64_MAX, &dim)) {
                errmsg_set(err, errlen, "%s: tensor '%s': shape[%d] is not a non-negative integer",
                       fname, key, d);
                goto out;
            }
            t.shape[d] = (int64_t)dim;
            if (dim && numel > UINT64_MAX / dim) overflow = 1;
            numel *= dim;
        }
        if (overflow || numel > UINT64_MAX / esize) {
            errmsg_set(err, errlen, "%s: tensor '%s': shape is too large", fname, key);
            goto out;
        }
        uint64_t b, e;
        if (!json_is_array(joff) || json_array_size(joff) != 2 ||
            json_uint(json_array_get(joff, 0), UINT64_MAX >> 1, &b) ||
            json_uint(json_array_get(joff, 1), UINT64_MAX >> 1, &e)) {
            errmsg_set(err, errlen, "%s: tensor '%s': data_offsets must be [begin, end] integers",
                   fname, key);
            goto out;
        }
        if (b > e || e > data_len) {
            errmsg_set(err, errlen,
                   "%s: tensor '%s': data_offsets [%llu, %llu] out of range (data area is %zu "
                   "bytes)",
                   fname, key, (unsigned long long)b, (unsigned long long)e, data_len);
            goto out;
        }
        if (e - b != numel * esize) {
            errmsg_set(err, errlen,
                   "%s: tensor '%s': data_offsets span %llu bytes but dtype %s x shape needs %llu",
                   fname, key, (unsigned long long)(e - b), json_string_value(jdt),
                   (unsigned long long)(numel * esize));
            goto out;
        }
        t.name = strdup(key);
        if (!t.name) {
            errmsg_set(err, errlen, "%s: out of memory", fname);
            goto out;
        }
        t.dt = dt;
        snprintf(t.dtype_str, sizeof t.dtype_str, "%s", json_string_value(jdt));
        t.nbytes = (size_t)(e - b);
        t.data = data + b;
        t.file = file_idx;
        a->tensors[a->n_tensors++] = t;
        spans[ns].begin = (size_t)b;
        spans[ns].end = (size_t)e;
        spans[ns].name = a->tensors[a->n_tensors - 1].name;
        ns++;
    }
    /* The tensors must tile the data area: sorted by begin, each starts where
     * the previous ended, and the last ends at the end of the file. */
    qsort(spans, (size_t)ns, sizeof *spans, cmp_span);
    size_t pos = 0;
    for (int i = 0; i < ns; i++) {
        if (spans[i].begin < pos) {
            errmsg_set(err, errlen, "%s: tensor '%s' overlaps tensor '%s' (offset %zu)", fname,
                   spans[i].name, spans[i - 1].name, spans[i].begin);
            goto out;
        }
        if (spans[i].begin > pos) {
            errmsg_set(err, errlen, "%s: %zu unused bytes before tensor '%s' (offset %zu)", fname,
                   spans[i].begin - pos, spans[i].name, pos);
            goto out;
        }
        pos = spans[i].end;
    }
    if (pos != data_len) {
        errmsg_set(err, errlen, "%s: %zu bytes after the last tensor (data area %zu bytes)", fname,
               data_len - pos, data_len);
        goto out;
    }
    rc = 0;
out:
    if (rc) {
        for (int i = n0; i < a->n_tensors; i++) free(a->tensors[i].name);
        a->n_tensors = n0;
    }
    free(spans);
    json_decref(root);
    return rc;
}

/* Map one file and parse it as file index a->n_files. */
static int open_one(st_archive *a, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errmsg_set(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat stt;
    if (fstat(fd, &stt) != 0 || !S_ISREG(stt.st_mode)) {
        errmsg_set(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    size_t len = (size_t)stt.st_size;
    if (len < 8) {
        errmsg_set(err, errlen, "%s: file too short for a safetensors header (%zu bytes)", path, len);
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        errmsg_set(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
        return -1;
    }
    st_file *grow = realloc(a->files, sizeof(st_file) * (size_t)(a->n_files + 1));
    if (!grow) {
        munmap(map, len);
        errmsg_set(err, errlen, "%s: out of memory", path);
        return -1;
    }
    a->files = grow;
    st_file *f = &a->files[a->n_files];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    f->map = map;
    f->map_len = len;
    a->n_files++;
    if (!f->path) {
        errmsg_set(err, errlen, "%s: out of memory", path);
        return -1;
    }
    uint64_t n = 0;
    const uint8_t *b = map;
    for (int i = 7; i >= 0; i--) n = (n << 8) | b[i];
    f->data_off = n <= len - 8 ? 8 + (size_t)n : len;
    return st_parse_buffer(a, map, len, a->n_files - 1, path, err, errlen);
}

static int finish(st_archive *a, char *err, size_t errlen)
{
    if (a->n_tensors > 1) qsort(a->tensors, (size_t)a->n_tensors, sizeof(st_tensor), cmp_by_name);
    for (int i = 1; i < a->n_tensors; i++) {
        if (!strcmp(a->tensors[i].name, a->tensors[i - 1].name)) {
            errmsg_set(err, errlen, "tensor '%s' is defined in both %s and %s", a->tensors[i].name,
                   a->files[a->tensors[i - 1].file].path, a->files[a->tensors[i].file].path);
            return -1;
        }
    }
    return 0;
}


static int open_sharded(st_archive *a, const char *dir, const char *index_path, char *err,
                        size_t errlen)
{
    size_t len;
    char *text = fileio_read(index_path, 64u << 20, &len);
    if (!text) {
        errmsg_set(err, errlen, "%s: cannot read (or larger than 64 MiB)", index_path);
        return -1;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!root) {
        errmsg_set(err, errlen, "%s: bad JSON: %s (line %d)", index_path, jerr.text, jerr.line);
        return -1;
    }
    int rc = -1;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        errmsg_set(err, errlen, "%s: no \"weight_map\" object", index_path);
        goto out;
    }
    const char *key;
    json_t *val;
    /* open each distinct shard once, in first-seen order */
    json_object_foreach(wm, key, val)
    {
        if (!json_is_string(val)) {
            errmsg_set(err, errlen, "%s: weight_map entry '%s' is not a file name", index_path, key);
            goto out;
        }
        const char *fn = json_string_value(val);
        if (!*fn || strchr(fn, '/') || !strcmp(fn, "..") || !strcmp(fn, ".")) {
            errmsg_set(err, errlen, "%s: weight_map entry '%s' names a bad shard '%s'", index_path,
                   key, fn);
            goto out;
        }
        int seen = 0;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, fn);
        for (int i = 0; i < a->n_files; i++)
            if (!strcmp(a->files[i].path, path)) seen = 1;
        if (!seen && open_one(a, path, err, errlen)) goto out;
    }
    if (finish(a, err, errlen)) goto out;
    json_object_foreach(wm, key, val)
    {
        const st_tensor *t = st_find(a, key);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(val));
        if (!t || strcmp(a->files[t->file].path, path)) {
            errmsg_set(err, errlen, "%s maps tensor '%s' to %s, which does not contain it", index_path,
                   key, json_string_value(val));
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int st_open(st_archive *a, const char *path, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    struct stat stt;
    if (stat(path, &stt) != 0) {
        errmsg_set(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc;
    if (S_ISDIR(stt.st_mode)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
        if (access(p, R_OK) == 0) {
            rc = open_sharded(a, path, p, err, errlen);
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors", path);
            if (access(p, R_OK) != 0) {
                errmsg_set(err, errlen,
                       "%s: no model.safetensors or model.safetensors.index.json (only "
                       "safetensors checkpoints are supported; try --load-format dummy)",
                       path);
                return -1;
            }
            rc = open_one(a, p, err, errlen);
            if (!rc) rc = finish(a, err, errlen);
        }
    } else {
        rc = open_one(a, path, err, errlen);
        if (!rc) rc = finish(a, err, errlen);
    }
    if (rc) st_close(a);
    return rc;
}

const st_tensor *st_find(const st_archive *a, const char *name)
{
    int lo = 0, hi = a->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(a->tensors[mid].name, name);
        if (!c) return &a->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

void st_mark_keep(st_archive *a, const st_tensor *t)
{
    SGLC_ASSERT(t >= a->tensors && t < a->tensors + a->n_tensors);
    a->tensors[t - a->tensors].keep = 1;
}

static void release_range(st_file *f, size_t lo, size_t hi, size_t page)
{
    lo = (lo + page - 1) / page * page;
    hi = hi / page * page;
    if (hi > lo) madvise((char *)f->map + lo, hi - lo, MADV_DONTNEED);
}

void st_release_unused(st_archive *a)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int fi = 0; fi < a->n_files; fi++) {
        st_file *f = &a->files[fi];
        if (!f->map) continue;
        int nk = 0;
        for (int i = 0; i < a->n_tensors; i++)
            if (a->tensors[i].file == fi && a->tensors[i].keep) nk++;
        span *keep = calloc((size_t)nk + 1, sizeof *keep);
        if (!keep) return;
        nk = 0;
        for (int i = 0; i < a->n_tensors; i++) {
            const st_tensor *t = &a->tensors[i];
            if (t->file != fi || !t->keep) continue;
            keep[nk].begin = (size_t)((const char *)t->data - (const char *)f->map);
            keep[nk].end = keep[nk].begin + t->nbytes;
            nk++;
        }
        qsort(keep, (size_t)nk, sizeof *keep, cmp_span);
        size_t cur = 0;
        for (int i = 0; i < nk; i++) {
            release_range(f, cur, keep[i].begin, page);
            if (keep[i].end > cur) cur = keep[i].end;
            /* borrowed weights: start reading them in now, not on the first forward */
            size_t b0 = keep[i].begin / page * page;
            madvise((char *)f->map + b0, keep[i].end - b0, MADV_WILLNEED);
        }
        /* the tail: round its end up to a page (no kept byte lies beyond) */
        size_t end = (f->map_len + page - 1) / page * page;
        release_range(f, cur, end, page);
        free(keep);
    }
}

void st_close(st_archive *a)
{
    for (int i = 0; i < a->n_tensors; i++) free(a->tensors[i].name);
    free(a->tensors);
    for (int i = 0; i < a->n_files; i++) {
        if (a->files[i].map) munmap(a->files[i].map, a->files[i].map_len);
        free(a->files[i].path);
    }
    free(a->files);
    memset(a, 0, sizeof *a);
}

/* ---- the weight-source implementation (wsource.h) ---------------------- */

static void to_wsrc(const st_archive *a, const st_tensor *t, wsrc_tensor *out)
{
    out->name = t->name;
    out->type = t->dt; /* DTYPE_* ids are the kern_type ids of the float types */
    out->type_name = t->dtype_str;
    out->ndim = t->ndim;
    for (int i = 0; i < t->ndim && i < WSRC_MAX_DIMS; i++) out->shape[i] = t->shape[i];
    out->nbytes = t->nbytes;
    out->data = t->data;
    out->origin = a->files[t->file].path;
    out->priv = t;
}

static int sts_find(void *self, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out)
{
    (void)ndim, (void)expect; /* files say what they hold; the loader checks */
    const st_archive *a = self;
    const st_tensor *t = st_find(a, name);
    if (!t) return 0;
    to_wsrc(a, t, out);
    return 1;
}

static int sts_read(void *self, const wsrc_tensor *t, void *dst, dtype dst_dt)
{
    (void)self;
    return wsrc_convert(dst, dst_dt, t->data, t->type, (size_t)wsrc_numel(t));
}

static void sts_read_row(void *self, const wsrc_tensor *t, int64_t r, float *dst)
{
    (void)self;
    size_t rb = kern_type_row_bytes((kern_type)t->type, t->shape[1]);
    (void)wsrc_convert(dst, DTYPE_F32, (const char *)t->data + (size_t)r * rb, t->type,
                       (size_t)t->shape[1]);
}

static void sts_keep(void *self, const wsrc_tensor *t) { st_mark_keep(self, t->priv); }
static void sts_release(void *self) { st_release_unused(self); }
static void sts_close(void *self)
{
    st_close(self);
    free(self);
}

static const wsrc_ops st_ops = {
    .kind = "safetensors",
    .find = sts_find,
    .read = sts_read,
    .read_row = sts_read_row,
    .keep = sts_keep,
    .release_unused = sts_release,
    .close = sts_close,
};

int wsrc_open_safetensors(wsrc *s, const char *path, char *err, size_t errlen)
{
    st_archive *a = calloc(1, sizeof *a);
    if (!a) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    if (st_open(a, path, err, errlen)) {
        free(a);
        return -1;
    }
    s->ops = &st_ops;
    s->self = a;
    return 0;
}
