/* sched_req — a request's life cycle: new, queue, finish, free (layer 5,
 * above sched_kv). */
#ifndef SGLC_SCHED_REQ_H
#define SGLC_SCHED_REQ_H

#include "sched/sched_impl.h"

/* A request from a spec (copies what it needs; the spec keeps its own):
 * sibling `index`, sampling seed, effective max_new_tokens.  NULL when
 * out of memory. */
sreq *sched_req_new(sched *s, const sched_req_spec *sp, uint64_t id, int index, uint64_t seed, int64_t max_new);

/* Frees r, its held siblings and everything it owns (not its KV: release
 * that first). */
void sched_req_free(sreq *r);

/* Into the waiting queue (arrival order number); out of memory: an
 * ABORT event and r is freed. */
void sched_req_enqueue(sched *s, sreq *r);

/* The end of a request: KV to the tree, FINISH event, stats, n > 1
 * siblings queued (or rejected with it).  r is freed. */
void sched_req_finish(sched *s, sreq *r, sched_finish_kind kind, int64_t len, int32_t tok, const char *str,
                      int status);

/* sched_req_finish with ABORT and r's abort_msg / abort_status (or the
 * defaults "Request aborted." / 200). */
void sched_req_abort(sched *s, sreq *r);

#endif
