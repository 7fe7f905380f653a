/* wsource — the format-independent helpers of the weight-source
 * interface (see wsource.h); formats live in safetensors.c and
 * wsource_dummy.c. */
#include "model/wsource.h"

#include <stdlib.h>
#include <string.h>

int wsrc_find(const wsrc *s, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out)
{
    memset(out, 0, sizeof *out);
    return s->ops->find(s->self, name, ndim, expect, out);
}

int wsrc_read(const wsrc *s, const wsrc_tensor *t, void *dst, dtype dst_dt)
{
    return s->ops->read(s->self, t, dst, dst_dt);
}

void wsrc_keep(const wsrc *s, const wsrc_tensor *t)
{
    if (s->ops && s->ops->keep) s->ops->keep(s->self, t);
}

void wsrc_drop(const wsrc *s, const wsrc_tensor *t)
{
    if (s->ops && s->ops->drop) s->ops->drop(s->self, t);
}

void wsrc_release_unused(const wsrc *s)
{
    if (s->ops && s->ops->release_unused) s->ops->release_unused(s->self);
}

void wsrc_close(wsrc *s)
{
    if (s->ops && s->ops->close) s->ops->close(s->self);
    s->ops = NULL;
    s->self = NULL;
}

int64_t wsrc_numel(const wsrc_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

wsrc_tensor wsrc_view2(const wsrc_tensor *t, int64_t elem_off, int64_t rows, int64_t cols)
{
    wsrc_tensor v = *t;
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = cols;
    if (t->type >= 0) {
        v.nbytes = kern_type_mat_bytes((kern_type)t->type, rows, cols);
        if (t->data) v.data = (const char *)t->data + kern_type_row_bytes((kern_type)t->type, elem_off);
    }
    return v;
}

#define CONV_CHUNK 4096

int wsrc_convert(void *dst, dtype dst_dt, const void *src, int type, size_t n)
{
    const kern_type_traits *tr = type >= 0 ? kern_type_get((kern_type)type) : NULL;
    if (!tr || (dst_dt != DTYPE_F32 && dst_dt != DTYPE_BF16)) return -1;
    if ((int)dst_dt == type) { /* same type: a plain copy (the source may be unaligned) */
        memcpy(dst, src, kern_type_row_bytes((kern_type)type, (int64_t)n));
        return 0;
    }
    /* through f32, a chunk at a time, from an aligned copy of the bytes */
    size_t bsz = tr->block_bytes, bs = (size_t)tr->block_size;
    size_t chunk = CONV_CHUNK / bs * bs;
    float *row = malloc(sizeof(float) * chunk);
    char *raw = malloc(chunk / bs * bsz);
    if (!row || !raw) {
        free(row), free(raw);
        return -1;
    }
    for (size_t i = 0; i < n; i += chunk) {
        size_t c = n - i < chunk ? n - i : chunk;
        memcpy(raw, (const char *)src + i / bs * bsz, c / bs * bsz);
        tr->row_to_f32(row, raw, (int64_t)c);
        if (dst_dt == DTYPE_F32) memcpy((float *)dst + i, row, c * sizeof(float));
        else dtype_from_f32((uint16_t *)dst + i, DTYPE_BF16, row, c);
    }
    free(row), free(raw);
    return 0;
}
