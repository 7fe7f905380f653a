/* linear — the projection step (see linear.h). */
#include "model/linear.h"

#include <string.h>

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

static const linear_adapter *find_adapter(const linear_weight *w, int id)
{
    for (int i = 0; i < w->n_adapters; i++)
        if (w->adapters[i].id == id) return &w->adapters[i];
    return NULL;
}

/* Adapter pass, reference version: after the base product of every
 * thread, thread ith adds scale · B (A x[t]) to its kern_split share of
 * the output columns of each row t that names an adapter.  A x[t] is
 * recomputed by each thread (r · k per row): the grouped shrink / expand
 * kernels of the LoRA issue replace this loop. */
static void apply_adapters(float *y, const float *x, int m, const linear_weight *w,
                           const linear_exec *ex)
{
    if (ex->barrier) ex->barrier(ex->barrier_arg);
    const int n = w->mat.n, k = w->mat.k;
    int c0, c1;
    kern_split(n, ex->ith, ex->nth, &c0, &c1);
    float u[LINEAR_MAX_RANK];
    for (int t = 0; t < m; t++) {
        const linear_adapter *a = ex->row_adapter[t] < 0 ? NULL : find_adapter(w, ex->row_adapter[t]);
        if (!a || c0 == c1) continue;
        const float *xt = x + (size_t)t * k;
        for (int r = 0; r < a->rank; r++) u[r] = kern_ref_dot_f32(a->a + (size_t)r * k, xt, k);
        float *yt = y + (size_t)t * n;
        for (int c = c0; c < c1; c++)
            yt[c] += a->scale * kern_ref_dot_f32(a->b + (size_t)c * a->rank, u, a->rank);
    }
}

void linear(float *y, const float *x, int m, const linear_weight *w, const linear_exec *ex)
{
    const kern_type_traits *tr = kern_type_get(linear_type(w));
    kern_matmul_fn mm = tr ? tr->matmul[w->mat.isa] : NULL;
    if (mm) mm(y, x, m, &w->mat, w->bias, ex->ith, ex->nth, ex->scratch);
    else kern_matmul(y, x, m, &w->mat, w->bias, ex->ith, ex->nth, ex->scratch);
    /* adapter hook: only weights that carry adapters pay for it */
    if (w->n_adapters && ex->row_adapter) apply_adapters(y, x, m, w, ex);
}
