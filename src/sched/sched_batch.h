/* sched_batch — stage 1 of a step, "assemble" (layer 9, above
 * sched_retract). */
#ifndef SGLC_SCHED_BATCH_H
#define SGLC_SCHED_BATCH_H

#include <stdbool.h>

#include "sched/sched_impl.h"

/* Choose this step's prefill requests into s->batch (pages allocated,
 * extend set).  n_mixed: decode rows riding along.  Returns the number
 * of prefill requests, or -1 out of memory. */
int sched_batch_build_prefill(sched *s, int n_mixed);

/* Pages for one decode token of every running request, all or nothing;
 * 0 or -1 (the pool cannot give them). */
int sched_batch_alloc_decode(sched *s);

/* Draft tokens for the decode rows (sched_set_draft_hook), best effort;
 * after sched_batch_alloc_decode. */
void sched_batch_draft(sched *s);

/* Lay out the forward over s->batch then (with_decode) s->running into
 * the step buffers and *mb.  0 or -1 (out of memory). */
int sched_batch_assemble(sched *s, bool with_decode, model_batch *mb);

#endif
