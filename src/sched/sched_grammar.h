/* sched_grammar — constrained decoding in the scheduler (layer 6, above
 * sched_req): the grammar queue of requests whose grammar compiles, and
 * per request its matcher, mask and accepted tokens. */
#ifndef SGLC_SCHED_GRAMMAR_H
#define SGLC_SCHED_GRAMMAR_H

#include <stdbool.h>

#include "sched/sched_impl.h"

/* r (with r->gram.text) enters the grammar queue: its compile job is
 * submitted (a cache hit is ready at the next poll).  Out of memory: r
 * finishes with a 500 (freed). */
void sched_grammar_wait(sched *s, sreq *r);

/* The next request of the grammar queue whose grammar is ready (removed
 * from the queue, matchers made for it and its n > 1 siblings), or NULL.
 * Requests whose grammar failed or timed out are finished here with a
 * 400 (SGLang's messages) as the scan meets them. */
sreq *sched_grammar_next_ready(sched *s);

/* Remove the i-th request of the grammar queue (its job released); the
 * caller owns it. */
sreq *sched_grammar_remove(sched *s, int i);

/* Logit processor: the grammar's mask on r's logits row (V) when its
 * matcher is active (ids past the grammar vocabulary are disallowed).
 * Near the end of the token budget the mask is narrowed to tokens after
 * which the grammar still completes (grammar_matcher_fill_mask_within);
 * with lazy, for greedy and plain temperature sampling without logprobs,
 * the plain mask is applied instead and the budget returned (> 0): the
 * caller then checks only the sampled token (sched_grammar_fits), drops
 * it from the row and samples again while it does not fit — the same
 * token (greedy) or distribution (temperature) as the narrowed mask, at
 * one accept + rollback instead of one per allowed token.  0: no check. */
int32_t sched_grammar_mask(sched *s, sreq *r, float *row, bool lazy);
/* The lazy close check: does tok leave a completion within budget - 1
 * bytes (grammar_matcher_token_fits)? */
bool sched_grammar_fits(sched *s, sreq *r, int32_t tok, int32_t budget);
/* Greedy's lazy check after several misses: the best id of row (value
 * desc, id asc) that fits, searched in rounds of the best remaining ids
 * (checked ids are set to -inf in row), then by the full narrowed mask;
 * `first` (the plain mask's argmax, which did not fit) when none fits —
 * exactly the argmax of the row under fill_mask_within's mask. */
int32_t sched_grammar_greedy_fit(sched *s, sreq *r, float *row, int32_t budget, int32_t first);
/* The lazy check's fallback after several misses: narrow the row (already
 * masked) by the full fill_mask_within of this budget. */
void sched_grammar_narrow(sched *s, sreq *r, float *row, int32_t budget);

/* r accepted token tok (already appended to seq).  Advances the matcher
 * (or, before the grammar starts, watches for the "after" sequence).
 * 0, or -1 when the matcher rejects the token. */
int sched_grammar_accept(sched *s, sreq *r, int32_t tok);

/* The matcher ended on an end token (the model's eos ids, which are the
 * grammar vocabulary's end ids). */
bool sched_grammar_terminated(const sched *s, const sreq *r);

/* Draft tokens the grammar forbids are cut: r's drafts are walked
 * through the matcher (accept_token), the run stops at the first
 * rejected one, and the matcher is rolled back.  Returns the number of
 * drafts kept. */
int sched_grammar_trim_draft(sched *s, sreq *r, int n_draft);
/* The same for a draft tree (r->spec.draft / r->spec.parent, n_draft
 * nodes): a node is kept when the matcher accepts every token on its path
 * from the root (checked path by path, rolled back after each), so a
 * forbidden node goes with its subtree; the kept nodes are compacted in
 * order (parents renumbered).  Returns the number kept. */
int sched_grammar_prune_tree(sched *s, sreq *r, int n_draft);

/* Free every request of the grammar queue and detach from the queue's
 * notify (sched_destroy). */
void sched_grammar_free_all(sched *s);

#endif
