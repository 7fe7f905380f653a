/* sched_json — SGLang /generate request bodies to sched_req_spec, and
 * scheduler events back to /generate response objects.
 *
 * DESIGN: the offline `generate --requests` path and (later) the HTTP
 * front share these.  A request object holds SGLang's GenerateReqInput
 * fields for one prompt: input_ids (or text, which needs a tokenizer),
 * sampling_params, rid, priority, cache_salt, return_logprob,
 * top_logprobs_num, logprob_start_len, token_ids_logprob, stream.  Unknown
 * keys are refused, as the dataclass refuses unexpected arguments.
 *
 * A sched_result accumulates the events of one (request, sibling) and
 * renders SGLang's response:
 *   {"text": "", "output_ids": [...],
 *    "meta_info": {"id", "finish_reason", "prompt_tokens",
 *                  "completion_tokens", "cached_tokens", "num_retractions",
 *                  "e2e_latency", [logprob fields]}}
 * with output_token_logprobs [[logprob, id, null], ...],
 * output_top_logprobs [[[logprob, id, null], ...], ...] and
 * output_token_ids_logprobs in the same shape (text entries are null
 * until a tokenizer is attached).  Input logprobs as SGLang: entries for
 * input positions logprob_start_len .. end, the first padded with None:
 * input_token_logprobs [[null, id, null], [lp, id, null], ...],
 * input_top_logprobs [null, [[lp, id, null], ...], ...].
 *
 * Ownership: sched_result owns its arrays (init/free pair). */
#ifndef SGLC_SCHED_JSON_H
#define SGLC_SCHED_JSON_H

#include <jansson.h>

#include "sched/sched.h"

/* Fill spec (initialised here) from one request object.  `text` is refused
 * until a tokenizer exists.  0, or -1 with a message (spec freed). */
int sched_req_from_json(const json_t *obj, sched_req_spec *spec, char *err, size_t errlen);

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
/* SGLang's response object (new reference) or NULL on OOM. */
json_t *sched_result_to_json(const sched_result *r);
/* finish_reason object of an event (new reference); JSON null when none. */
json_t *sched_finish_reason_json(const sched_event *e);

#endif
