/* grammar_queue — see grammar_queue.h.  A FIFO of jobs under one mutex
 * and condvar, n worker threads; done flags and reference counts are
 * atomic so the scheduler's poll takes no lock. */
#include "grammar/grammar_queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct grammar_job {
    atomic_int refs;             /* the queue's (while queued / compiling) + the submitter's */
    atomic_bool done;
    atomic_bool abandoned;       /* the submitter released it */
    grammar_kind kind;
    uint32_t opts;
    char *text;                  /* (len + 1) owned */
    size_t len;
    grammar_entry *entry;        /* owned reference once done (NULL if even caching failed) */
    struct grammar_job *next;
};

struct grammar_queue {
    grammar_queue_opts o;
    grammar_cache *cache;        /* owned */
    pthread_mutex_t mu;          /* guards head/tail, stop, n_pending */
    pthread_cond_t cv;
    grammar_job *head, *tail;    /* queued jobs (the queue's references) */
    bool stop;
    int n_pending;               /* queued + compiling */
    pthread_t *threads;          /* (n_threads) */
    int n_threads;
    void (*notify)(void *);
    void *notify_ctx;
};

static void job_unref(grammar_job *j)
{
    if (j && atomic_fetch_sub(&j->refs, 1) == 1) {
        grammar_entry_release(j->entry);
        free(j->text);
        free(j);
    }
}

static void job_finish(grammar_queue *q, grammar_job *j, grammar_entry *e)
{
    j->entry = e;
    atomic_store(&j->done, true);
    /* under the lock, so that set_notify(NULL) returning means no call is
     * in progress or to come (the scheduler detaches before it is freed) */
    pthread_mutex_lock(&q->mu);
    if (q->notify) q->notify(q->notify_ctx);
    pthread_mutex_unlock(&q->mu);
}

static void *worker(void *arg)
{
    grammar_queue *q = arg;
    pthread_setname_np(pthread_self(), "sglc-grammar");
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->stop && !q->head) pthread_cond_wait(&q->cv, &q->mu);
        if (q->stop) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        grammar_job *j = q->head;
        q->head = j->next;
        if (!q->head) q->tail = NULL;
        j->next = NULL;
        pthread_mutex_unlock(&q->mu);
        grammar_key k = {j->kind, j->text, j->len, j->opts};
        if (!atomic_load(&j->abandoned)) {
            grammar_entry *e = grammar_cache_get(q->cache, &k);
            if (!e) {
                char err[1024] = "";
                size_t bytes = 0;
                void *v = q->o.compile(q->o.compile_ctx, &k, &bytes, err, sizeof err);
                if (!v && !err[0]) snprintf(err, sizeof err, "compilation failed");
                e = grammar_cache_put(q->cache, &k, v, bytes, err);
            }
            job_finish(q, j, e);
        }
        pthread_mutex_lock(&q->mu);
        q->n_pending--;
        pthread_mutex_unlock(&q->mu);
        job_unref(j);
    }
    return NULL;
}

grammar_queue *grammar_queue_create(const grammar_queue_opts *o)
{
    if (!o || !o->compile) {
        log_error("grammar queue: no compile function");
        return NULL;
    }
    grammar_queue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->o = *o;
    q->cache = grammar_cache_create(o->cache_bytes, o->free_value);
    int n = o->n_threads > 0 ? o->n_threads : 1;
    q->threads = calloc((size_t)n, sizeof *q->threads);
    if (!q->cache || !q->threads) {
        grammar_cache_destroy(q->cache);
        free(q->threads);
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&q->threads[i], NULL, worker, q)) {
            log_error("grammar queue: cannot start thread %d", i);
            break;
        }
        q->n_threads++;
    }
    if (!q->n_threads) {
        grammar_queue_destroy(q);
        return NULL;
    }
    return q;
}

void grammar_queue_destroy(grammar_queue *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->n_threads; i++) pthread_join(q->threads[i], NULL);
    /* jobs never started: failures, so a poller sees them end */
    for (grammar_job *j = q->head, *n; j; j = n) {
        n = j->next;
        grammar_key k = {j->kind, j->text, j->len, j->opts};
        grammar_entry *e = grammar_cache_put(q->cache, &k, NULL, 0, "the grammar queue was stopped");
        j->entry = e;
        atomic_store(&j->done, true);
        job_unref(j);
    }
    grammar_cache_destroy(q->cache);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->threads);
    free(q);
}

void grammar_queue_set_notify(grammar_queue *q, void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&q->mu);
    q->notify = fn;
    q->notify_ctx = ctx;
    pthread_mutex_unlock(&q->mu);
}

grammar_job *grammar_queue_submit(grammar_queue *q, const grammar_key *key)
{
    grammar_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    atomic_init(&j->refs, 1);
    atomic_init(&j->done, false);
    atomic_init(&j->abandoned, false);
    grammar_entry *e = grammar_cache_get(q->cache, key);
    if (e) {
        j->entry = e;
        atomic_store(&j->done, true);
        return j;
    }
    j->text = malloc(key->len + 1);
    if (!j->text) {
        free(j);
        return NULL;
    }
    memcpy(j->text, key->text, key->len);
    j->text[key->len] = 0;
    j->len = key->len;
    j->kind = key->kind;
    j->opts = key->opts;
    atomic_fetch_add(&j->refs, 1); /* the queue's */
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = j;
    else q->head = j;
    q->tail = j;
    q->n_pending++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return j;
}

bool grammar_job_done(grammar_job *j) { return atomic_load(&j->done); }

grammar_entry *grammar_job_entry(grammar_job *j) { return atomic_load(&j->done) ? j->entry : NULL; }

void grammar_job_release(grammar_job *j)
{
    if (!j) return;
    atomic_store(&j->abandoned, true);
    job_unref(j);
}

grammar_cache *grammar_queue_cache(grammar_queue *q) { return q->cache; }

int grammar_queue_pending(grammar_queue *q)
{
    pthread_mutex_lock(&q->mu);
    int n = q->n_pending;
    pthread_mutex_unlock(&q->mu);
    return n;
}
