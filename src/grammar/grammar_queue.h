/* grammar_queue — grammar compilation off the scheduler thread (SGLang's
 * grammar backend executor + the scheduler's grammar_queue).
 *
 * DESIGN
 *   scheduler ── grammar_queue_submit(key) ──▶ cache hit? job done at once
 *                                              │ miss
 *                                              ▼
 *                       jobs (FIFO, mutex + condvar) ──▶ grammar thread(s):
 *                         cache lookup again (a job of the same key may
 *                         have finished meanwhile), else compile (no lock
 *                         held), grammar_cache_put (value or error),
 *                         mark done, call notify
 *   scheduler ◀── grammar_job_done / grammar_job_entry (polled each step)
 *
 * The scheduler never waits on a job: it polls, and a request whose job
 * is not done stays in its grammar queue (num_grammar_queue_reqs); the
 * notify callback wakes an idle scheduler.  A job whose submitter gave up
 * (abort, timeout: grammar_job_release before it ran) is skipped; one
 * that is compiling runs to its end and its result is cached anyway (the
 * engine has no cancellation; a later request of the same key benefits).
 *
 * What "compile" means is a callback (grammar_compile_key in the server:
 * JSON Schema / regex / EBNF / structural tag -> grammar); the queue and
 * cache never call the engine themselves, so they are tested with any
 * value type.
 *
 * Ownership: the queue owns its cache, threads and queued jobs; a job is
 * shared (reference counted) between the queue and its submitter. */
#ifndef SGLC_GRAMMAR_GRAMMAR_QUEUE_H
#define SGLC_GRAMMAR_GRAMMAR_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "grammar/grammar_cache.h"

/* Compile key into a value (NULL on failure with the reason in err);
 * *bytes gets the value's size for the cache bound.  Called on a
 * grammar thread. */
typedef void *(*grammar_compile_fn)(void *ctx, const grammar_key *key, size_t *bytes, char *err, size_t errlen);

typedef struct grammar_queue_opts {
    int n_threads;               /* grammar threads; <= 0 = 1 */
    size_t cache_bytes;          /* the cache's bound; 0 = 64 MiB */
    grammar_compile_fn compile;  /* required */
    void *compile_ctx;           /* borrowed; must outlive the queue */
    void (*free_value)(void *);  /* frees a compiled value (NULL: never freed) */
} grammar_queue_opts;

typedef struct grammar_queue grammar_queue;
typedef struct grammar_job grammar_job;

/* Starts the threads.  NULL on failure (logged). */
grammar_queue *grammar_queue_create(const grammar_queue_opts *o);
/* Stops and joins the threads (a compile in progress finishes first);
 * queued jobs end as failures ("the grammar queue was stopped"). */
void grammar_queue_destroy(grammar_queue *q);

/* fn(ctx) after each job completes, on the grammar thread, under the
 * queue's lock (fn must not call back into the queue; the scheduler's
 * wake-up takes only its inbox lock).  Any thread; after
 * set_notify(q, NULL, NULL) returns, fn is not running and will not be
 * called again, so its ctx may be freed. */
void grammar_queue_set_notify(grammar_queue *q, void (*fn)(void *ctx), void *ctx);

/* Any thread.  A job for key (copied).  A cache hit (compiled or
 * failed) gives a job that is already done.  NULL when out of memory. */
grammar_job *grammar_queue_submit(grammar_queue *q, const grammar_key *key);
/* Any thread: whether the job has its result. */
bool grammar_job_done(grammar_job *j);
/* After done: the cache entry (borrowed from the job: take
 * grammar_entry_ref to keep it past grammar_job_release). */
grammar_entry *grammar_job_entry(grammar_job *j);
/* The submitter's reference; a job not started yet is skipped. */
void grammar_job_release(grammar_job *j);

/* The queue's cache (lookups, stats, clear). */
grammar_cache *grammar_queue_cache(grammar_queue *q);
/* Jobs queued or compiling now (any thread). */
int grammar_queue_pending(grammar_queue *q);

#endif
