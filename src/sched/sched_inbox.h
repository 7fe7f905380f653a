/* sched_inbox — the inbox: submit / abort and their drain (layer 10, above
 * sched_batch). */
#ifndef SGLC_SCHED_INBOX_H
#define SGLC_SCHED_INBOX_H

#include <stdbool.h>

#include "sched/sched_impl.h"

/* Which requests an abort names. */
typedef struct sched_abort_key {
    const char *rid;        /* borrowed; NULL = all (unless id) */
    uint64_t id;            /* > 0: match by submit id instead */
} sched_abort_key;

/* Abort matching requests wherever they are (waiting, held siblings,
 * running, chunked, held while paused); their pages go back now. */
void sched_inbox_abort(sched *s, const sched_abort_key *key);

/* Admit the requests held while paused / while a swap waited, in arrival
 * order. */
void sched_inbox_release_held(sched *s);

/* Take everything in the inbox: new requests queued (or held, or
 * rejected when the queue is full), aborts applied. */
void sched_inbox_drain(sched *s);

#endif
