/* linear — the projection step (see linear.h).
 *
 * DESIGN (adapter pass): after the base product, rows are grouped by
 * adapter (the segmented shrink / expand of Punica and S-LoRA): for each
 * adapter of the call, its rows are taken up to LIN_TILE at a time, the
 * shrink u = x Aᵀ (tile, r) reads A once for the whole tile, then the
 * expand adds scale · u Bᵀ to this thread's columns, reading Bᵀ (r, n)
 * row by row over the thread's contiguous column range.  Every thread
 * recomputes the shrink of every row (r · k per row, small next to the
 * base product's n · k) so the pass needs no shared buffer and no second
 * barrier.  A row's delta depends only on that row and its adapter, so a
 * batch mixing adapters gives each row what it gets alone.  The shrink
 * accumulates in a fixed order per (row, rank) whatever the tile holds. */
#include "model/linear.h"

#include <string.h>

#include "util/cpu.h"

/* AVX2 variants (linear_lora_avx2.c); bf16: a / bt hold bf16 bits */
void linear_lora_shrink_avx2(float *u, const float *const *xr, int nr, const void *a, int bf16, int r,
                             int k);
void linear_lora_expand_avx2(float *y, const float *u, const void *bt, int bf16, int r, int n, int c0,
                             int c1, float scale);

enum { LIN_TILE = 4 };

int linear_init(linear_weight *w, const void *src, dtype src_dt, int n, int k, dtype want,
                int borrow_ok)
{
    memset(w, 0, sizeof *w);
    if (kern_mat_init(&w->mat, src, src_dt, n, k, want, borrow_ok)) return -1;
    w->shard = linear_shard_full(n, k);
    return 0;
}

int linear_init_kt(linear_weight *w, const void *src, kern_type src_t, int n, int k, kern_type want,
                   int borrow_ok)
{
    memset(w, 0, sizeof *w);
    if (kern_mat_init_kt(&w->mat, src, (int)src_t, n, k, (int)want, borrow_ok)) return -1;
    w->shard = linear_shard_full(n, k);
    return 0;
}

void linear_free(linear_weight *w)
{
    kern_mat_free(&w->mat);
    memset(w, 0, sizeof *w);
}

static inline float ld(const void *p, int bf16, size_t i)
{
    return bf16 ? bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* Scalar shrink: u[i * r + j] = A[j, :] · xr[i] for the nr rows of a tile
 * (4 partial sums per dot, combined in a fixed order). */
static void shrink_ref(float *u, const float *const *xr, int nr, const void *a, int bf16, int r, int k)
{
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < r; j++) {
            const size_t o = (size_t)j * k;
            const float *x = xr[i];
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int c = 0;
            for (; c + 4 <= k; c += 4) {
                s0 += ld(a, bf16, o + c) * x[c], s1 += ld(a, bf16, o + c + 1) * x[c + 1];
                s2 += ld(a, bf16, o + c + 2) * x[c + 2], s3 += ld(a, bf16, o + c + 3) * x[c + 3];
            }
            for (; c < k; c++) s0 += ld(a, bf16, o + c) * x[c];
            u[i * r + j] = (s0 + s1) + (s2 + s3);
        }
}

/* Scalar expand: y[c] += scale · Σ_j u[j] bt[j, c] for c in [c0, c1). */
static void expand_ref(float *y, const float *u, const void *bt, int bf16, int r, int n, int c0, int c1,
                       float scale)
{
    for (int c = c0; c < c1; c++) {
        float s = 0;
        for (int j = 0; j < r; j++) s += u[j] * ld(bt, bf16, (size_t)j * n + c);
        y[c] += scale * s;
    }
}

void linear_adapters_apply(float *y, const float *x, int m, int n, int k,
                           const linear_adapter *ads, int n_ads, const int32_t *row_adapter,
                           int ith, int nth, int isa)
{
    int c0, c1;
    kern_split(n, ith, nth, &c0, &c1);
    if (c0 >= c1 || !row_adapter) return;
    const cpu_features *cf = cpu_get();
    /* auto follows the kernels' selection (kernels_init("scalar") forces scalar) */
    int simd = cf->avx2 && cf->fma && (isa == 2 || (isa == 0 && kernels_isa() != KERN_ISA_SCALAR));
    float u[LIN_TILE * LINEAR_MAX_RANK];
    for (int ai = 0; ai < n_ads; ai++) {
        const linear_adapter *a = &ads[ai];
        if (a->rank <= 0 || a->rank > LINEAR_MAX_RANK) continue;
        int rows[LIN_TILE], nr = 0;
        for (int t = 0; t <= m; t++) {
            if (t < m && row_adapter[t] == a->id) rows[nr++] = t;
            if (nr == LIN_TILE || (t == m && nr)) {
                const float *xr[LIN_TILE];
                for (int i = 0; i < nr; i++) xr[i] = x + (size_t)rows[i] * k;
                const int bf = a->dt == DTYPE_BF16;
                if (simd) linear_lora_shrink_avx2(u, xr, nr, a->a, bf, a->rank, k);
                else shrink_ref(u, xr, nr, a->a, bf, a->rank, k);
                for (int i = 0; i < nr; i++) {
                    float *yt = y + (size_t)rows[i] * n;
                    if (simd)
                        linear_lora_expand_avx2(yt, u + i * a->rank, a->bt, bf, a->rank, n, c0, c1,
                                                a->scale);
                    else expand_ref(yt, u + i * a->rank, a->bt, bf, a->rank, n, c0, c1, a->scale);
                }
                nr = 0;
            }
        }
    }
}

void linear(float *y, const float *x, int m, const linear_weight *w, const linear_exec *ex)
{
    const kern_type_traits *tr = kern_type_get(linear_type(w));
    kern_matmul_fn mm = tr ? tr->matmul[w->mat.isa] : NULL;
    if (mm) mm(y, x, m, &w->mat, w->bias, ex->ith, ex->nth, ex->scratch);
    else kern_matmul(y, x, m, &w->mat, w->bias, ex->ith, ex->nth, ex->scratch);
    /* adapter hook: only calls that carry adapters pay for it */
    const linear_adapter *ads = ex->n_adapters > 0 ? ex->adapters : w->adapters;
    int na = ex->n_adapters > 0 ? ex->n_adapters : w->n_adapters;
    if (!na || !ads || !ex->row_adapter) return;
    /* the base product's column split may differ from kern_split's */
    if (ex->barrier) ex->barrier(ex->barrier_arg);
    linear_adapters_apply(y, x, m, w->mat.n, w->mat.k, ads, na, ex->row_adapter, ex->ith, ex->nth,
                          0);
}
