/* sched_policy — waiting-queue order (layer 2, above sched_util). */
#ifndef SGLC_SCHED_POLICY_H
#define SGLC_SCHED_POLICY_H

#include "sched/sched_impl.h"

/* Order s->waiting in place for the next admission (--schedule-policy,
 * priority first when priority scheduling is on). */
void sched_policy_order(sched *s);

#endif
