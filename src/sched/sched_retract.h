/* sched_retract — retraction and priority preemption (layer 8, above
 * sched_output). */
#ifndef SGLC_SCHED_RETRACT_H
#define SGLC_SCHED_RETRACT_H

#include <stdbool.h>

#include "sched/sched_impl.h"

/* Back to the waiting queue: KV cached in the tree, outputs kept. */
void sched_retract(sched *s, sreq *r);

/* Retract the longest outputs until one decode token per running request
 * fits (the last one standing is aborted if it cannot); updates
 * new_token_ratio.  Returns the number retracted. */
int sched_retract_for_decode(sched *s);

/* SGLang's preempt_to_schedule for the waiting request w; returns how
 * many running requests were retracted. */
int sched_preempt_for(sched *s, const sreq *w, double need_tokens, bool need_slot);

/* Every running (and half-prefilled) request back to the waiting queue;
 * returns how many. */
int sched_retract_all(sched *s);

#endif
