/* sched_result — the events of one (request, sibling) gathered into one
 * result: output ids, their logprobs, the input logprobs of the first
 * event and the FINISH event's fields.
 *
 * DESIGN: the scheduler emits events with this event's tokens only (see
 * sched_event); every front that wants the whole output (the HTTP
 * dispatcher, `generate --requests`, `bench-offline`, the tests) appends
 * them here.  Rendering a result as SGLang's /generate object is a wire
 * concern: api/api_generate_json.h.
 *
 * Ownership: sched_result owns its arrays (init/free pair). */
#ifndef SGLC_SCHED_RESULT_H
#define SGLC_SCHED_RESULT_H

#include "sched/sched.h"

typedef struct sched_result {
    int32_t *ids;                /* (n) output ids */
    float *lp;                   /* (n) when return_logprob */
    int32_t *top_ids;            /* (n, top_n) */
    float *top_lp;
    int top_n;
    int32_t *tids;               /* (n_tid) */
    float *tid_lp;               /* (n, n_tid) */
    int n_tid;
    int64_t n, cap;
    int n_in;                    /* input logprob entries (0 = none received) */
    int32_t *in_ids;             /* (n_in) */
    float *in_lp;                /* (n_in), [0] = pad */
    int32_t *in_top_ids;         /* (n_in, top_n) or NULL */
    float *in_top_lp;
    float *in_tid_lp;            /* (n_in, n_tid) or NULL */
    bool return_logprob;
    bool done;
    sched_event fin;             /* the FINISH event's scalar fields (no arrays; finish_str/rid owned) */
} sched_result;

void sched_result_init(sched_result *r, bool return_logprob);
void sched_result_free(sched_result *r);
/* Append an event's tokens (and take its finish fields).  0 or -1 (OOM). */
int sched_result_add(sched_result *r, const sched_event *e);

#endif
