/* spec_draft — STANDALONE speculative decoding: a smaller model of the
 * target's vocabulary proposes k tokens greedily.
 *
 * DESIGN
 * The draft model gets its own run state, KV cache and compute pool; its
 * KV slots are handed out per request from a free stack (no pages, no
 * prefix sharing).  A request's state remembers which token every draft
 * KV position was computed for (`fed`); at each proposal the draft KV is
 * valid up to the longest common prefix of `fed` and the sequence now
 * (accepted drafts stay, rejected ones are recomputed), so:
 *
 *   forward 1   the sequence's tokens past that prefix (the whole prompt
 *               on the first call), logits of the last row -> d0 = argmax
 *   forward j   d(j-1) at position len + j - 1 -> d(j) = argmax, j < k
 *
 * k forwards of one sequence per request and step (requests are drafted
 * one after the other: the hook is per request).  A request that cannot
 * get slots, or would pass the draft model's context length, is not
 * drafted.
 *
 * Ownership: spec_draft borrows the draft model (the caller frees it
 * after spec_draft_destroy) and owns its run state, KV and pool; a
 * spec_draft_req is owned by the caller and released with
 * spec_draft_req_release.  One thread at a time (the scheduler's). */
#ifndef SGLC_SPEC_DRAFT_H
#define SGLC_SPEC_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct spec_draft spec_draft;

typedef struct spec_draft_req {
    int32_t *slots;              /* (cap) draft KV slot of each position, owned */
    int32_t *fed;                /* (cap) the token each position's KV was computed for */
    int64_t n_fed;               /* positions with KV */
    int64_t cap;
} spec_draft_req;

/* A drafter over `draft` (borrowed) for a target of vocabulary
 * target_vocab: -1 and the reason when the vocabularies differ.
 * kv_tokens: draft KV slots over all requests; threads: its pool. */
spec_draft *spec_draft_create(model *draft, int target_vocab, int64_t kv_tokens, int threads, char *err,
                              size_t errlen);
void spec_draft_destroy(spec_draft *d);

/* Up to k greedy draft tokens continuing seq (len) into draft; returns
 * how many (0 on any failure: no slots, context, forward error). */
int spec_draft_propose(spec_draft *d, spec_draft_req *r, const int32_t *seq, int64_t len, int32_t *draft, int k);
/* Give r's slots back and free its arrays. */
void spec_draft_req_release(spec_draft *d, spec_draft_req *r);
/* Slots in use (tests). */
int64_t spec_draft_slots_used(const spec_draft *d);

#endif
