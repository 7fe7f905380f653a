/* wsource_dummy — `--load-format dummy`: random weights of the shapes the
 * loader asks for (see wsource.h).
 *
 * DESIGN: SGLang's dummy init draws uniform values in [-1e-3, 1e-3).  Two
 * generators, advanced in read order: matrices take four 16-bit draws per
 * xorshift64 step (a 1B model fills in about a second), vectors one
 * splitmix64 draw per value.  The embedding table is never stored: when
 * the loader binds its rows, the current state becomes its row seed and
 * row r is regenerated from hash(seed, r) on each lookup, so a dummy model
 * is resident once even when the kernels pack the LM head.  Every value is
 * rounded to the requested precision (bf16 / f16), which is also the type
 * the tensors report. */
#include <stdlib.h>
#include <string.h>

#include "model/wsource.h"
#include "util/rng.h"

typedef struct dummy_src {
    uint64_t rng;       /* shared state of both generators, advanced per read */
    dtype prec;
} dummy_src;

/* splitmix64 -> uniform float in [lo, hi) */
static float rng_uniform(uint64_t *s, float lo, float hi)
{
    uint64_t z = rng_next(s);
    return lo + (hi - lo) * (float)((double)(z >> 40) / (double)(1ull << 24));
}

static void fill_matrix(void *buf, dtype dt, size_t n, uint64_t *state, dtype prec)
{
    uint64_t s = *state | 1;
    for (size_t i = 0; i < n; i += 4) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        for (size_t j = 0; j < 4 && i + j < n; j++) {
            float u = (float)((s >> (16 * j)) & 0xffff) * (1.0f / 65536.0f);
            float v = -1e-3f + 2e-3f * u;
            if (dt == DTYPE_BF16) ((uint16_t *)buf)[i + j] = f32_to_bf16(v);
            else ((float *)buf)[i + j] = dtype_round(v, prec);
        }
    }
    *state = s;
}

static int d_find(void *self, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out)
{
    dummy_src *d = self;
    if (ndim < 1 || ndim > WSRC_MAX_DIMS) return 0;
    out->name = name; /* the loader's string: valid for its call; names are not kept */
    out->type = (int)d->prec;
    out->type_name = dtype_name(d->prec);
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->shape[i] = expect[i];
    out->nbytes = 0;
    out->data = NULL;
    out->origin = "dummy weights";
    out->priv = d;
    return 1;
}

static int d_read(void *self, const wsrc_tensor *t, void *dst, dtype dst_dt)
{
    dummy_src *d = self;
    size_t n = (size_t)wsrc_numel(t);
    if (t->ndim >= 2) {
        if (dst_dt != DTYPE_F32 && dst_dt != DTYPE_BF16) return -1;
        fill_matrix(dst, dst_dt, n, &d->rng, d->prec);
        return 0;
    }
    if (dst_dt != DTYPE_F32) return -1;
    float *v = dst;
    for (size_t i = 0; i < n; i++) v[i] = dtype_round(rng_uniform(&d->rng, -1e-3f, 1e-3f), d->prec);
    return 0;
}

static void d_bind_rows(void *self, wsrc_tensor *t)
{
    dummy_src *d = self;
    t->tag = d->rng;
    d->rng = d->rng * 6364136223846793005ull + 1442695040888963407ull;
}

static void d_read_row(void *self, const wsrc_tensor *t, int64_t r, float *out)
{
    dummy_src *d = self;
    uint64_t st = t->tag ^ ((uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull);
    st ^= st >> 29;
    st *= 0xbf58476d1ce4e5b9ull;
    st ^= st >> 32;
    int64_t H = t->shape[1];
    for (int64_t i = 0; i < H; i += 4) {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        for (int64_t j = 0; j < 4 && i + j < H; j++) {
            float u = (float)((st >> (16 * j)) & 0xffff) * (1.0f / 65536.0f);
            out[i + j] = dtype_round(-1e-3f + 2e-3f * u, d->prec);
        }
    }
}

static void d_close(void *self) { free(self); }

static const wsrc_ops dummy_ops = {
    .kind = "dummy weights",
    .find = d_find,
    .read = d_read,
    .bind_rows = d_bind_rows,
    .read_row = d_read_row,
    .close = d_close,
};

int wsrc_open_dummy(wsrc *s, uint64_t seed, dtype prec)
{
    dummy_src *d = calloc(1, sizeof *d);
    if (!d) return -1;
    d->rng = seed;
    d->prec = prec;
    s->ops = &dummy_ops;
    s->self = d;
    return 0;
}
