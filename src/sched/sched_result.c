/* sched_result — see sched_result.h. */
#include "sched/sched_result.h"

#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void sched_result_init(sched_result *r, bool return_logprob)
{
    memset(r, 0, sizeof *r);
    r->return_logprob = return_logprob;
}

void sched_result_free(sched_result *r)
{
    free(r->ids);
    free(r->lp);
    free(r->top_ids);
    free(r->top_lp);
    free(r->tids);
    free(r->tid_lp);
    free(r->in_ids);
    free(r->in_lp);
    free(r->in_top_ids);
    free(r->in_top_lp);
    free(r->in_tid_lp);
    free(r->fin.rid);
    free(r->fin.finish_str);
    memset(r, 0, sizeof *r);
}

static int grow_to(void **p, size_t es, int64_t n)
{
    void *g = realloc(*p, es * (size_t)(n ? n : 1));
    if (!g) return -1;
    *p = g;
    return 0;
}

int sched_result_add(sched_result *r, const sched_event *e)
{
    int64_t need = r->n + e->n_ids;
    if (need > r->cap) {
        int64_t nc = r->cap ? r->cap : 16;
        while (nc < need) nc *= 2;
        if (grow_to((void **)&r->ids, sizeof(int32_t), nc)) return -1;
        if (r->return_logprob) {
            if (grow_to((void **)&r->lp, sizeof(float), nc)) return -1;
            if (e->top_n && (grow_to((void **)&r->top_ids, sizeof(int32_t), nc * e->top_n) ||
                             grow_to((void **)&r->top_lp, sizeof(float), nc * e->top_n)))
                return -1;
            if (e->n_tid && grow_to((void **)&r->tid_lp, sizeof(float), nc * e->n_tid)) return -1;
        }
        r->cap = nc;
    }
    if (e->n_ids && e->ids) memcpy(r->ids + r->n, e->ids, sizeof(int32_t) * (size_t)e->n_ids);
    if (r->return_logprob && e->n_ids) {
        if (e->logprobs) memcpy(r->lp + r->n, e->logprobs, sizeof(float) * (size_t)e->n_ids);
        if (e->top_n && e->top_ids) {
            r->top_n = e->top_n;
            memcpy(r->top_ids + r->n * e->top_n, e->top_ids, sizeof(int32_t) * (size_t)(e->n_ids * e->top_n));
            memcpy(r->top_lp + r->n * e->top_n, e->top_logprobs, sizeof(float) * (size_t)(e->n_ids * e->top_n));
        }
        if (e->n_tid && e->tid_logprobs) {
            if (!r->tids) {
                r->tids = malloc(sizeof(int32_t) * (size_t)e->n_tid);
                if (!r->tids) return -1;
                memcpy(r->tids, e->tids, sizeof(int32_t) * (size_t)e->n_tid);
                r->n_tid = e->n_tid;
            }
            memcpy(r->tid_lp + r->n * e->n_tid, e->tid_logprobs, sizeof(float) * (size_t)(e->n_ids * e->n_tid));
        }
    }
    r->n = need;
    if (e->n_in > 0 && r->n_in == 0 && e->in_ids && e->in_logprobs) {
        size_t m = (size_t)e->n_in;
        r->in_ids = malloc(sizeof(int32_t) * m);
        r->in_lp = malloc(sizeof(float) * m);
        if (!r->in_ids || !r->in_lp) return -1;
        memcpy(r->in_ids, e->in_ids, sizeof(int32_t) * m);
        memcpy(r->in_lp, e->in_logprobs, sizeof(float) * m);
        if (e->top_n && e->in_top_ids) {
            r->top_n = e->top_n;
            r->in_top_ids = malloc(sizeof(int32_t) * m * (size_t)e->top_n);
            r->in_top_lp = malloc(sizeof(float) * m * (size_t)e->top_n);
            if (!r->in_top_ids || !r->in_top_lp) return -1;
            memcpy(r->in_top_ids, e->in_top_ids, sizeof(int32_t) * m * (size_t)e->top_n);
            memcpy(r->in_top_lp, e->in_top_logprobs, sizeof(float) * m * (size_t)e->top_n);
        }
        if (e->n_tid && e->in_tid_logprobs) {
            if (!r->tids) {
                r->tids = malloc(sizeof(int32_t) * (size_t)e->n_tid);
                if (!r->tids) return -1;
                memcpy(r->tids, e->tids, sizeof(int32_t) * (size_t)e->n_tid);
                r->n_tid = e->n_tid;
            }
            r->in_tid_lp = malloc(sizeof(float) * m * (size_t)e->n_tid);
            if (!r->in_tid_lp) return -1;
            memcpy(r->in_tid_lp, e->in_tid_logprobs, sizeof(float) * m * (size_t)e->n_tid);
        }
        r->n_in = e->n_in;
    }
    /* the speculative counters travel on every event (streamed meta_info) */
    r->fin.spec_on = e->spec_on;
    r->fin.spec_verify_ct = e->spec_verify_ct;
    r->fin.spec_accepted = e->spec_accepted;
    r->fin.spec_drafted = e->spec_drafted;
    if (e->kind == SCHED_EV_FINISH) {
        free(r->fin.rid);
        free(r->fin.finish_str);
        r->fin = *e;
        r->fin.rid = e->rid ? dup_str(e->rid) : NULL;
        r->fin.finish_str = e->finish_str ? dup_str(e->finish_str) : NULL;
        r->fin.ids = NULL, r->fin.logprobs = NULL, r->fin.top_ids = NULL, r->fin.top_logprobs = NULL;
        r->fin.tids = NULL, r->fin.tid_logprobs = NULL, r->fin.next = NULL;
        r->fin.text = NULL, r->fin.text_len = 0, r->fin.embedding = NULL;
        r->done = true;
    }
    return 0;
}
