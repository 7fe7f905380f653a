/* api_generate_json — the /generate wire codec: SGLang's GenerateReqInput
 * object (one prompt) to a sched_req_spec, and a sched_result back to the
 * /generate response object.
 *
 * DESIGN: a wire concern, kept out of sched/: the HTTP route (api_native.c)
 * and the offline `generate --requests` / warm-up paths (cli/) share it.
 * The HTTP routes that tokenize hand the ids over directly
 * (api_gen_req_from_json_ids): no token ids are printed into JSON and
 * parsed back inside the process.
 *
 * A request object holds SGLang's GenerateReqInput fields for one prompt:
 * input_ids (or text, which needs a tokenizer), sampling_params, rid,
 * priority, cache_salt, return_logprob, top_logprobs_num,
 * logprob_start_len, token_ids_logprob, stream.  Unknown keys are refused,
 * as the dataclass refuses unexpected arguments.
 *
 * A sched_result (sched/sched_result.h) renders SGLang's response:
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
 * input_top_logprobs [null, [[lp, id, null], ...], ...]. */
#ifndef SGLC_API_GENERATE_JSON_H
#define SGLC_API_GENERATE_JSON_H

#include <jansson.h>

#include "sched/sched.h"
#include "sched/sched_result.h"

/* Fill spec (initialised here) from one request object.  `text` is refused
 * (the caller tokenizes).  0, or -1 with a message (spec freed). */
int api_gen_req_from_json(const json_t *obj, sched_req_spec *spec, char *err, size_t errlen);
/* The same for a prompt already tokenized: ids (n_ids, malloc'd) are moved
 * into spec (freed on failure too); obj's input_ids is ignored. */
int api_gen_req_from_json_ids(const json_t *obj, int32_t *ids, int64_t n_ids, sched_req_spec *spec, char *err,
                              size_t errlen);
/* A JSON list of token ids to a malloc'd int32 array (*out, *n_out), with
 * the codec's messages ("NAME must be a list of integers", "NAME[i] must
 * be an integer").  0 or -1. */
int api_gen_id_list(const json_t *v, const char *name, int32_t **out, int64_t *n_out, char *err, size_t errlen);

/* SGLang's response object (new reference) or NULL on OOM. */
json_t *api_gen_result_json(const sched_result *r);
/* finish_reason object of an event (new reference); JSON null when none. */
json_t *api_gen_finish_reason_json(const sched_event *e);

#endif
