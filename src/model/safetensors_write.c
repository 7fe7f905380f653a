/* safetensors_write — see the writer section of safetensors.h. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "util/errmsg.h"

void st_writer_init(st_writer *w)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

int st_writer_add(st_writer *w, const char *name, const char *dtype, int ndim, const int64_t *shape)
{
    size_t es = 0;
    if (st_dtype_parse(dtype, &es) == -2 || ndim < 0 || ndim > ST_MAX_DIMS || strlen(dtype) >= 12 || w->fd >= 0)
        return -1;
    size_t nb = es;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -1;
        nb *= (size_t)shape[d];
    }
    if (w->n == w->cap) {
        int nc = w->cap ? w->cap * 2 : 64;
        st_wtensor *g = realloc(w->t, sizeof *g * (size_t)nc);
        if (!g) return -1;
        w->t = g;
        w->cap = nc;
    }
    st_wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return -1;
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->nbytes = nb;
    return w->n++;
}

size_t st_writer_data_bytes(const st_writer *w)
{
    size_t s = 0;
    for (int i = 0; i < w->n; i++) s += w->t[i].nbytes;
    return s;
}

static size_t elem_size(const st_wtensor *t)
{
    size_t es = 1;
    st_dtype_parse(t->dtype, &es);
    return es;
}

static const st_wtensor *g_sort_base;

static int cmp_layout(const void *a, const void *b)
{
    const st_wtensor *x = g_sort_base + *(const int *)a, *y = g_sort_base + *(const int *)b;
    size_t ex = elem_size(x), ey = elem_size(y);
    if (ex != ey) return ex > ey ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int write_all(int fd, const void *buf, size_t n, off_t at)
{
    const char *p = buf;
    while (n) {
        ssize_t k = pwrite(fd, p, n, at);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k, n -= (size_t)k, at += k;
    }
    return 0;
}

int st_writer_begin(st_writer *w, const char *path, char *err, size_t errlen)
{
    int *ord = malloc(sizeof(int) * (size_t)(w->n ? w->n : 1));
    json_t *h = json_object();
    char *js = NULL;
    int rc = -1;
    if (!ord || !h) goto oom;
    for (int i = 0; i < w->n; i++) ord[i] = i;
    g_sort_base = w->t; /* single-threaded: the CLI's converter */
    qsort(ord, (size_t)w->n, sizeof *ord, cmp_layout);
    json_t *meta = json_pack("{s:s}", "format", "pt");
    if (!meta || json_object_set_new(h, "__metadata__", meta)) goto oom;
    size_t off = 0;
    for (int k = 0; k < w->n; k++) {
        st_wtensor *t = &w->t[ord[k]];
        t->off = off;
        off += t->nbytes;
        json_t *sh = json_array();
        for (int d = 0; sh && d < t->ndim; d++) json_array_append_new(sh, json_integer(t->shape[d]));
        json_t *e = sh ? json_pack("{s:s,s:o,s:[I,I]}", "dtype", t->dtype, "shape", sh, "data_offsets",
                                   (json_int_t)t->off, (json_int_t)(t->off + t->nbytes))
                       : NULL;
        if (!e || json_object_set_new(h, t->name, e)) goto oom;
    }
    if (!(js = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER))) goto oom;
    size_t hl = strlen(js), pad = (8 - hl % 8) % 8;
    char *hb = malloc(8 + hl + pad);
    if (!hb) goto oom;
    uint64_t n64 = hl + pad;
    for (int i = 0; i < 8; i++) hb[i] = (char)((n64 >> (8 * i)) & 0xff);
    memcpy(hb + 8, js, hl);
    memset(hb + 8 + hl, ' ', pad);
    w->data_off = 8 + hl + pad;
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0 || write_all(w->fd, hb, w->data_off, 0) || ftruncate(w->fd, (off_t)(w->data_off + off))) {
        errmsg_set(err, errlen, "cannot write %s: %s", path, strerror(errno));
        free(hb);
        goto out;
    }
    free(hb);
    rc = 0;
    goto out;
oom:
    errmsg_set(err, errlen, "%s: out of memory", path);
out:
    free(ord);
    free(js);
    json_decref(h);
    return rc;
}

int st_writer_pwrite(st_writer *w, int idx, size_t at, const void *buf, size_t n)
{
    if (w->fd < 0 || idx < 0 || idx >= w->n) return -1;
    st_wtensor *t = &w->t[idx];
    if (at > t->nbytes || n > t->nbytes - at) return -1;
    if (write_all(w->fd, buf, n, (off_t)(w->data_off + t->off + at))) return -1;
    t->written += n;
    return 0;
}

int st_writer_finish(st_writer *w, char *err, size_t errlen)
{
    int rc = 0;
    for (int i = 0; i < w->n; i++)
        if (w->t[i].written != w->t[i].nbytes) {
            errmsg_set(err, errlen, "tensor '%s': %zu of %zu bytes written", w->t[i].name, w->t[i].written,
                       w->t[i].nbytes);
            rc = -1;
            break;
        }
    if (w->fd >= 0 && close(w->fd) && !rc) {
        errmsg_set(err, errlen, "close: %s", strerror(errno));
        rc = -1;
    }
    w->fd = -1;
    return rc;
}

void st_writer_free(st_writer *w)
{
    if (w->fd >= 0) close(w->fd);
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    st_writer_init(w);
}
