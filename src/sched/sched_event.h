/* sched_event — events into the outbox (layer 3, above sched_policy). */
#ifndef SGLC_SCHED_EVENT_H
#define SGLC_SCHED_EVENT_H

#include "sched/sched_impl.h"

/* How a request ended, for its FINISH event. */
typedef struct sched_finish_info {
    sched_finish_kind kind;
    int64_t len;            /* LENGTH: max_new_tokens */
    int32_t tok;            /* STOP_TOKEN: the matched id */
    const char *str;        /* borrowed: STOP_STR's string or ABORT's message */
    int status;             /* HTTP status (ABORT) */
} sched_finish_info;

/* An ABORT FINISH for a request that never entered the queue. */
void sched_emit_reject(sched *s, uint64_t id, int index, const char *rid, int64_t n_input, const char *msg,
                       int status);

/* An event with r's output tokens not sent yet (and input logprobs not
 * sent yet); fin != NULL: the FINISH event.  Nothing for internal
 * requests.  Advances r->n_sent. */
void sched_emit_tokens(sched *s, sreq *r, const sched_finish_info *fin);

#endif
