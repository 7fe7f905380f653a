/* sched_ctl — control messages (layer 11, above sched_inbox). */
#ifndef SGLC_SCHED_CTL_H
#define SGLC_SCHED_CTL_H

#include "sched/sched_impl.h"

/* Handle every queued control message (scheduler thread). */
void sched_ctl_drain(sched *s);

/* The waiting weight swap m, now (between steps): retract what runs,
 * switch the model, flush the tree unless asked not to. */
void sched_ctl_swap(sched *s, ctl_msg *m);

/* Refuse every control message still queued or waiting (shutdown). */
void sched_ctl_fail_pending(sched *s);

#endif
