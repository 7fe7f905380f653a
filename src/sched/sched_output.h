/* sched_output — stage 3 of a step, "process results" (layer 7, above
 * sched_grammar). */
#ifndef SGLC_SCHED_OUTPUT_H
#define SGLC_SCHED_OUTPUT_H

#include <stdbool.h>

#include "sched/sched_impl.h"

/* After the forward of the batch that sched_batch_assemble described
 * (s->batch prefill requests, then with_decode: every running request):
 * advance each request's KV, record input logprobs, cache prefills in the
 * tree, then take 0..k new tokens per request in the per-request order
 * (sched_impl.h, "A step"): logit processors -> sample or verify -> stop
 * checks -> emit.  Finished requests leave (sched_req_finish); prefilled
 * ones that go on join s->running.  Empties s->batch. */
void sched_process_results(sched *s, bool with_decode);

/* The per-request order on n_rows logits rows (n_rows, V) of one request
 * whose KV covers its whole sequence, with `draft` (n_rows - 1) the
 * draft tokens the forward ran after it: row j is processed, sampled,
 * appended and stop-checked; row j + 1 only when the token sampled from
 * row j equals draft[j] (verify).  Emits a TOKENS event when streaming
 * asks for one.  Returns the number of tokens appended (1..n_rows) and
 * sets *finished when r ended (then r is freed).  Exposed for the unit
 * tests of the k > 1 path. */
int sched_process_request(sched *s, sreq *r, float *rows, int n_rows, const int32_t *draft, bool *finished);
/* The same over a draft tree: parent (n_rows - 1) or NULL (a chain): draft k
 * (row k + 1) follows draft parent[k] (row parent[k] + 1; -1 = row 0).  From
 * row 0, the next row is the first child row whose draft equals the token
 * just sampled; when a row at index k is accepted as the d-th token
 * (k != d), its KV page is swapped into kv position len - 1 + d (page size 1;
 * the pages left past the accepted path are the caller's to trim). */
int sched_process_request_tree(sched *s, sreq *r, float *rows, int n_rows, const int32_t *draft, const int32_t *parent,
                               bool *finished);

#endif
