/* threadpool — the compute pool that runs kernels.
 *
 * DESIGN: n threads (the caller is thread 0) run the same task function
 * with (ith, nth); tpool_run returns when all have finished.  Workers spin
 * briefly on a generation counter and then sleep on a condition variable,
 * so back-to-back ops in a forward pass cost a few hundred ns to dispatch
 * while an idle server uses no CPU.  Kernels never create threads and never
 * allocate; inside a task they may call tpool_barrier() to meet the others
 * (e.g. after a shared conversion step).
 *
 * One pool is driven by one thread at a time (the scheduler / the offline
 * command); tpool_run is not re-entrant. */
#ifndef SGLC_UTIL_THREADPOOL_H
#define SGLC_UTIL_THREADPOOL_H

typedef struct tpool tpool;
typedef void (*tpool_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (including the caller).  NULL on failure. */
tpool *tpool_create(int n_threads);
void tpool_destroy(tpool *p);
int tpool_size(const tpool *p);
/* Run fn(ctx, ith, nth) on every thread of the pool; returns when all did. */
void tpool_run(tpool *p, tpool_fn fn, void *ctx);
/* Workers that are spinning for the next task go to sleep now instead of
 * after their spin (a few ms; the driver has no more work for a while: the
 * scheduler's --sleep-on-idle).  The next tpool_run wakes them as usual. */
void tpool_quiesce(tpool *p);
/* Called from inside a task by all nth threads: waits until all arrive. */
void tpool_barrier(tpool *p);

#endif
