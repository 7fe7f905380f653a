/* sched_util — small helpers for every scheduler layer: growing arrays,
 * strdup, request-array push/remove, the scheduler's random numbers.
 *
 * DESIGN
 * The bottom of the scheduler's layers (see sched_impl.h, "Layers"): it
 * includes only sched_impl.h, and every other sched_*.c may include it. */
#include "sched/sched_util.h"

#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

/* Grow *p (elements of size es) to hold at least need; 0 or -1. */
int sched_grow(void **p, int64_t *cap, int64_t need, size_t es)
{
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *g = realloc(*p, (size_t)nc * es);
    if (!g) return -1;
    *p = g;
    *cap = nc;
    return 0;
}

int sched_grow_int(void **p, int *cap, int need, size_t es)
{
    int64_t c = *cap;
    if (sched_grow(p, &c, need, es)) return -1;
    *cap = (int)c;
    return 0;
}

char *sched_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int sched_push_req(sreq ***arr, int *n, int *cap, sreq *r)
{
    if (sched_grow_int((void **)arr, cap, *n + 1, sizeof(sreq *))) return -1;
    (*arr)[(*n)++] = r;
    return 0;
}

void sched_remove_req(sreq **arr, int *n, int i)
{
    memmove(arr + i, arr + i + 1, sizeof(sreq *) * (size_t)(*n - i - 1));
    (*n)--;
}

uint64_t sched_rand(uint64_t *state) { return rng_next(state); }
