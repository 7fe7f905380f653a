/* api_tokq — see api_tokq.h.
 *
 * DESIGN: one mutex guards two FIFO lists (small, large) and the list of
 * batch encodes that accept help.  Two condition variables, so that a
 * wake-up is never spent on a thread that cannot take the work: `cv_work`
 * wakes the workers (any job, batch items), `cv_express` the express
 * thread (small jobs).  A batch encode lives on its caller's stack: items
 * are claimed with an atomic counter, the caller takes items too and,
 * once every item is claimed, unlinks the batch and waits until every
 * item is done and every helper has left it.  A helper registers under
 * the queue mutex while the batch is still linked, so none can arrive
 * after the caller's unlink, and none touches the batch after it leaves. */
#include "api/api_tokq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

typedef struct tokq_job {
    http_req *r;                 /* the handler's hold, passed to run */
    char *method, *path;         /* owned copies */
    const char *body;            /* (len) r's buffer, valid until the terminal call */
    size_t len;
    struct tokq_job *next;
} tokq_job;

typedef struct tokq_list {
    tokq_job *head, *tail;
    int n;
} tokq_list;

typedef struct tokq_batch {
    const tok_tokenizer *t;
    const api_tokq_text *texts;  /* (n) borrowed */
    tok_ids *out;                /* (n) borrowed */
    size_t n;
    bool add_special;
    atomic_size_t next;          /* next item to claim */
    size_t done;                 /* items finished, under mu below */
    int helpers;                 /* other threads inside batch_work, under mu */
    bool failed;
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* done == n && helpers == 0 */
    struct tokq_batch *link;     /* in api_tokq.batches while items are unclaimed */
} tokq_batch;

struct api_tokq {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_express;
    tokq_list small, large;
    tokq_batch *batches;         /* accepting help */
    bool stop;
    api_tokq_run_fn run;
    void *ctx;
    int n_threads;               /* workers + the express thread */
    pthread_t *threads;          /* (n_threads) [0] = express */
    int n_started;
};

static void list_push(tokq_list *l, tokq_job *j)
{
    j->next = NULL;
    if (l->tail) l->tail->next = j;
    else l->head = j;
    l->tail = j;
    l->n++;
}

static tokq_job *list_pop(tokq_list *l)
{
    tokq_job *j = l->head;
    if (!j) return NULL;
    l->head = j->next;
    if (!l->head) l->tail = NULL;
    l->n--;
    return j;
}

/* ---- batch encode ------------------------------------------------------------------ */

/* Claim and encode items of b until none is left (any thread). */
static void batch_work(tokq_batch *b)
{
    for (;;) {
        size_t i = atomic_fetch_add(&b->next, 1);
        if (i >= b->n) return;
        int rc = tok_encode(b->t, b->texts[i].s, b->texts[i].len, b->add_special, &b->out[i]);
        pthread_mutex_lock(&b->mu);
        if (rc) b->failed = true;
        b->done++;
        pthread_mutex_unlock(&b->mu);
    }
}

/* Unlink b from q->batches (caller holds q->mu). */
static void batch_unlink(api_tokq *q, tokq_batch *b)
{
    for (tokq_batch **pp = &q->batches; *pp; pp = &(*pp)->link)
        if (*pp == b) {
            *pp = b->link;
            return;
        }
}

int api_tokq_encode_batch(api_tokq *q, const tok_tokenizer *t, const api_tokq_text *texts, size_t n,
                          bool add_special, tok_ids *out)
{
    if (n == 0) return 0;
    tokq_batch b = {.t = t, .texts = texts, .out = out, .n = n, .add_special = add_special};
    atomic_init(&b.next, 0);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    bool shared = q && n > 1 && q->n_threads > 2;
    if (shared) {
        pthread_mutex_lock(&q->mu);
        b.link = q->batches;
        q->batches = &b;
        pthread_cond_broadcast(&q->cv_work);
        pthread_mutex_unlock(&q->mu);
    }
    batch_work(&b);
    if (shared) {
        /* every item is claimed: no new helper may find b */
        pthread_mutex_lock(&q->mu);
        batch_unlink(q, &b);
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_lock(&b.mu);
    while (b.done < b.n || b.helpers > 0) pthread_cond_wait(&b.cv, &b.mu);
    bool failed = b.failed;
    pthread_mutex_unlock(&b.mu);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    if (failed) {
        for (size_t i = 0; i < n; i++) tok_ids_free(&out[i]);
        return -1;
    }
    return 0;
}

/* ---- threads -------------------------------------------------------------------------- */

typedef struct tokq_thread_arg {
    api_tokq *q;
    bool express;
} tokq_thread_arg;

static void job_run(api_tokq *q, tokq_job *j)
{
    q->run(q->ctx, j->r, j->method, j->path, j->body, j->len);
    free(j->method);
    free(j->path);
    free(j);
}

static void *worker_main(void *arg)
{
    tokq_thread_arg ta = *(tokq_thread_arg *)arg;
    free(arg);
    api_tokq *q = ta.q;
    /* bulk work yields to the latency-bound threads (see api_tokq.h);
     * raising one's own nice needs no privilege, so this cannot fail in
     * a way that matters */
    if (!ta.express) (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), API_TOKQ_WORKER_NICE);
    pthread_mutex_lock(&q->mu);
    for (;;) {
        tokq_job *j = list_pop(&q->small);
        if (!j && !ta.express) {
            tokq_batch *b = q->batches;
            if (b && atomic_load(&b->next) >= b->n) {
                batch_unlink(q, b); /* nothing left to claim */
                continue;
            }
            if (b) {
                /* help (b is linked, so its caller has not passed its
                 * unlink: it will wait for us) */
                pthread_mutex_lock(&b->mu);
                b->helpers++;
                pthread_mutex_unlock(&b->mu);
                pthread_mutex_unlock(&q->mu);
                batch_work(b);
                pthread_mutex_lock(&b->mu);
                b->helpers--;
                pthread_cond_broadcast(&b->cv);
                pthread_mutex_unlock(&b->mu); /* b may be gone from here on */
                pthread_mutex_lock(&q->mu);
                continue;
            }
            j = list_pop(&q->large);
        }
        if (j) {
            pthread_mutex_unlock(&q->mu);
            job_run(q, j);
            pthread_mutex_lock(&q->mu);
            continue;
        }
        if (q->stop) break;
        pthread_cond_wait(ta.express ? &q->cv_express : &q->cv_work, &q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

api_tokq *api_tokq_create(int workers, api_tokq_run_fn run, void *ctx, char *err, size_t errlen)
{
    if (workers < 1) {
        snprintf(err, errlen, "tokenizer workers must be at least 1, got %d", workers);
        return NULL;
    }
    api_tokq *q = calloc(1, sizeof *q);
    if (!q || !(q->threads = calloc((size_t)workers + 1, sizeof(pthread_t)))) {
        free(q);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv_work, NULL);
    pthread_cond_init(&q->cv_express, NULL);
    q->run = run;
    q->ctx = ctx;
    q->n_threads = workers + 1;
    for (int i = 0; i < q->n_threads; i++) {
        tokq_thread_arg *ta = malloc(sizeof *ta);
        if (ta) *ta = (tokq_thread_arg){.q = q, .express = i == 0};
        if (!ta || pthread_create(&q->threads[i], NULL, worker_main, ta)) {
            free(ta);
            snprintf(err, errlen, "cannot start the tokenizer worker threads");
            api_tokq_destroy(q);
            return NULL;
        }
        q->n_started++;
    }
    return q;
}

void api_tokq_destroy(api_tokq *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv_work);
    pthread_cond_broadcast(&q->cv_express);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->n_started; i++) pthread_join(q->threads[i], NULL);
    /* no thread ran (start-up failure): run what is queued here */
    tokq_job *j;
    while ((j = list_pop(&q->small)) || (j = list_pop(&q->large))) job_run(q, j);
    pthread_cond_destroy(&q->cv_work);
    pthread_cond_destroy(&q->cv_express);
    pthread_mutex_destroy(&q->mu);
    free(q->threads);
    free(q);
}

bool api_tokq_offer(api_tokq *q, http_req *r, const char *method, const char *path, const char *body,
                    size_t body_len)
{
    if (!q || body_len == 0) return false;
    tokq_job *j = calloc(1, sizeof *j);
    if (!j) return false;
    j->method = strdup(method);
    j->path = strdup(path);
    if (!j->method || !j->path || http_req_detach(r)) {
        free(j->method);
        free(j->path);
        free(j);
        return false;
    }
    j->r = r;
    j->body = body;
    j->len = body_len;
    bool small = body_len <= API_TOKQ_EXPRESS_MAX;
    pthread_mutex_lock(&q->mu);
    list_push(small ? &q->small : &q->large, j);
    pthread_cond_signal(&q->cv_work);
    if (small) pthread_cond_signal(&q->cv_express);
    pthread_mutex_unlock(&q->mu);
    return true;
}

/* ---- encode ahead ----------------------------------------------------------------------- */

/* The ids kept for the route running on this thread. */
static _Thread_local struct {
    size_t n;
    api_tokq_text *texts;        /* (n) borrowed from the parsed body */
    tok_ids *ids;                /* (n) owned */
    bool add_special;
} tl_pre;

void api_tokq_pre_clear(void)
{
    for (size_t i = 0; i < tl_pre.n; i++) tok_ids_free(&tl_pre.ids[i]);
    free(tl_pre.ids);
    free(tl_pre.texts);
    memset(&tl_pre, 0, sizeof tl_pre);
}

bool api_tokq_pre_take(const char *text, size_t len, bool add_special, tok_ids *out)
{
    if (!tl_pre.n || add_special != tl_pre.add_special) return false;
    for (size_t i = 0; i < tl_pre.n; i++) {
        const api_tokq_text *x = &tl_pre.texts[i];
        if (x->len != len || (x->s != text && memcmp(x->s, text, len))) continue;
        const tok_ids *v = &tl_pre.ids[i];
        size_t n0 = out->n;
        for (size_t k = 0; k < v->n; k++)
            if (tok_ids_push(out, v->ids[k])) {
                out->n = n0; /* out of memory: the caller encodes it */
                return false;
            }
        return true;
    }
    return false;
}

/* sampling_params.n of a request (dict, or the first of a list); 1 when absent */
static json_int_t n_of(const json_t *sp)
{
    if (json_is_array(sp)) sp = json_array_get(sp, 0);
    const json_t *n = json_is_object(sp) ? json_object_get(sp, "n") : NULL;
    return json_is_integer(n) ? json_integer_value(n) : 1;
}

int api_tokq_encode_ahead(api_tokq *q, const tok_tokenizer *t, const char *path, const json_t *body,
                          char *err, size_t errlen)
{
    api_tokq_pre_clear();
    if (!t || !json_is_object(body)) return 0;
    const json_t *list = NULL;
    json_int_t n = 1;
    bool gen = !strcmp(path, "/generate");
    if (gen) {
        list = json_object_get(body, "text");
        n = n_of(json_object_get(body, "sampling_params"));
        const json_t *ids = json_object_get(body, "input_ids");
        if (ids && !json_is_null(ids)) return 0; /* the route refuses text + input_ids */
    } else if (!strcmp(path, "/v1/completions")) {
        list = json_object_get(body, "prompt");
        const json_t *nv = json_object_get(body, "n");
        if (json_is_integer(nv)) n = json_integer_value(nv);
    } else if (!strcmp(path, "/encode")) {
        list = json_object_get(body, "text");
    } else if (!strcmp(path, "/v1/embeddings")) {
        list = json_object_get(body, "input");
    }
    /* SGLang batch-encodes a batch (a list) with one sample per prompt */
    if (!json_is_array(list) || n != 1) return 0;
    size_t m = 0, i;
    bool has_text = false;
    const json_t *x;
    json_array_foreach(list, i, x) if (json_is_string(x)) {
        m++;
        has_text |= json_string_length(x) > 0;
    }
    if (gen && has_text) { /* SGLang's _validate_batch_tokenization_constraints */
        static const char *const mm[] = {"image_data", "video_data", "audio_data", NULL};
        for (int k = 0; mm[k]; k++) {
            const json_t *v = json_object_get(body, mm[k]);
            if (v && !json_is_null(v)) {
                snprintf(err, errlen, "For multimodal input processing do not set `enable_tokenizer_batch_encode`.");
                return 400;
            }
        }
    }
    if (m == 0) return 0;
    api_tokq_text *texts = calloc(m, sizeof *texts);
    tok_ids *ids = calloc(m, sizeof *ids);
    if (!texts || !ids) {
        free(texts);
        free(ids);
        return 0; /* the route encodes them one by one */
    }
    m = 0;
    json_array_foreach(list, i, x) if (json_is_string(x)) {
        texts[m].s = json_string_value(x);
        texts[m].len = json_string_length(x);
        m++;
    }
    if (api_tokq_encode_batch(q, t, texts, m, true, ids)) {
        free(texts);
        free(ids);
        return 0; /* the route reports the failure as it does today */
    }
    tl_pre.n = m;
    tl_pre.texts = texts;
    tl_pre.ids = ids;
    tl_pre.add_special = true;
    return 0;
}
