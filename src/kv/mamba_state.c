/* mamba_state — recurrent-state slot ids for hybrid Mamba2 models (see
 * mamba_state.h for the design and the sizing rule). */
#include "kv/mamba_state.h"

#include <stdlib.h>

#include "util/log.h"

struct mamba_state_pool {
    int n, n_free;
    int32_t *stack;          /* (n) free ids, top at n_free - 1 */
    unsigned char *used;     /* (n) 1 = held by a request */
};

mamba_state_pool *mamba_state_pool_create(int n)
{
    if (n < 1) {
        log_error("a Mamba state pool needs at least one slot (got %d)", n);
        return NULL;
    }
    mamba_state_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->stack = malloc(sizeof(int32_t) * (size_t)n)) || !(p->used = calloc((size_t)n, 1))) {
        log_error("out of memory for a Mamba state pool of %d slots", n);
        mamba_state_pool_destroy(p);
        return NULL;
    }
    p->n = p->n_free = n;
    for (int i = 0; i < n; i++) p->stack[i] = n - 1 - i; /* slot 0 first */
    return p;
}

void mamba_state_pool_destroy(mamba_state_pool *p)
{
    if (!p) return;
    free(p->stack), free(p->used);
    free(p);
}

int32_t mamba_state_alloc(mamba_state_pool *p)
{
    if (!p->n_free) return -1;
    int32_t id = p->stack[--p->n_free];
    p->used[id] = 1;
    return id;
}

int mamba_state_free(mamba_state_pool *p, int32_t id)
{
    if (id < 0 || id >= p->n || !p->used[id]) {
        log_error("Mamba state slot %d is out of range or already free", id);
        return -1;
    }
    p->used[id] = 0;
    p->stack[p->n_free++] = id;
    return 0;
}

int mamba_state_n_free(const mamba_state_pool *p) { return p->n_free; }
int mamba_state_n_total(const mamba_state_pool *p) { return p->n; }

int64_t mamba_state_count(int64_t explicit_n, int64_t max_running, double budget_bytes, double ratio,
                          size_t state_bytes, double *kv_budget_left)
{
    int64_t n = 0;
    if (explicit_n > 0) n = explicit_n;
    else if (max_running > 0) n = max_running;
    else if (state_bytes > 0 && budget_bytes > 0 && ratio > 0)
        n = (int64_t)(budget_bytes * (ratio / (1.0 + ratio)) / (double)state_bytes);
    double left = budget_bytes - (double)n * (double)state_bytes;
    *kv_budget_left = left > 0 ? left : 0;
    return n;
}
