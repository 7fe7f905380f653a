/* sched_util — the scheduler's small helpers (bottom layer: includes no
 * other sched_* layer but sched_impl.h).  Layer order: sched_impl.h. */
#ifndef SGLC_SCHED_UTIL_H
#define SGLC_SCHED_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "sched/sched_impl.h"

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Grow *p (elements of size es) to hold at least need (doubling, from
 * 16); *cap updated.  0 or -1 (out of memory, *p unchanged). */
int sched_grow(void **p, int64_t *cap, int64_t need, size_t es);
int sched_grow_int(void **p, int *cap, int need, size_t es);

/* strdup that passes NULL through (NULL also when out of memory). */
char *sched_strdup(const char *s);

/* Append r to a request array (grown); 0 or -1.  Remove entry i (order kept). */
int sched_push_req(sreq ***arr, int *n, int *cap, sreq *r);
void sched_remove_req(sreq **arr, int *n, int i);

/* splitmix64 step. */
uint64_t sched_rand(uint64_t *state);

#endif
