/* sampler — per-request next-token sampling on one logits row, as SGLang.
 *
 * DESIGN
 * One call turns a row of f32 logits (vocab) into a token, in SGLang's
 * order (sampling_batch_info.apply_logits_bias, then Sampler.forward):
 *
 *   logits ──┬─ NaN -> -inf (never sampled)
 *            ├─ additive: -= frequency_penalty * count(t in output)
 *            │            -= presence_penalty  * (count(t in output) > 0)
 *            │            -inf on stop_token_ids + eos while
 *            │            n_generated < min_new_tokens
 *            ├─ scaling:  repetition_penalty on tokens seen in the prompt
 *            │            (if the caller added it) and the output:
 *            │            logit > 0 ? logit / rp : logit * rp   (HF)
 *            ├─ += logit_bias
 *            │           = the "processed logits" (written back to the row)
 *            ├─ greedy (top_k <= 1; temperature 0 is normalised to this):
 *            │    argmax, first index on ties
 *            └─ otherwise: softmax(logits / temperature), then joint
 *                 top-k / top-p / min-p filtering by rank (as SGLang's
 *                 sorted-probability version: rank < top_k, mass ranked
 *                 strictly before the token <= top_p, p >= min_p * p_max),
 *                 renormalise, draw.  Ties rank the lower id first.
 *
 * Logprobs follow SGLang (layers/sampler.py): greedy -> log_softmax of the
 * processed logits; sampled -> log of the temperature-scaled
 * probabilities renormalised over the top-p set (top-k and min-p not
 * applied), tokens outside it get -FLT_MAX (torch's clamp of log 0);
 * `original` (SGLANG_RETURN_ORIGINAL_LOGPROB) -> log_softmax of the
 * processed logits before temperature.  The chosen token's logprob,
 * top_logprobs_num best entries (by processed logit; value desc, id asc)
 * and the logprobs of token_ids_logprob are returned.
 *
 * Cost: no sort of the vocabulary, O(vocab) passes that vectorise.
 * Weights exp((l - max) / T) come from a polynomial exp on bit patterns
 * written in blocks of 8 (GCC -O2 vectorises those; ~3x glibc expf);
 * argmax and NaN cleaning likewise.  Top-k: an in-place size-k heap (one
 * compare per token) or quickselect for large k.  Top-p: tokens with
 * p < (1 - top_p) / vocab cannot be in the set and are dropped first, then
 * a weighted quickselect (keep the pivot iff the mass ranked above it is
 * <= top_p).  Top logprobs: a size-n heap.  Penalties: O(distinct tokens
 * seen).  No allocation per call: the caller passes scratch of
 * sampling_scratch_bytes(vocab).
 *
 * Randomness: a counter-based generator, u = hash(seed, draw index), so
 * a request with sampling_seed replays exactly, whatever else runs in
 * the batch.  Without a seed the scheduler passes one from its own
 * generator; n > 1 siblings get seed + i.
 *
 * Ownership: sampling_state borrows its sampling_params (must outlive
 * it) and owns its token counters (grown by sampling_state_accept /
 * add_prompt, amortised, never inside sampling_sample). */
#ifndef SGLC_SAMPLER_H
#define SGLC_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampling/sampling_params.h"

/* token -> count, open addressing (linear probing), keys -1 = empty. */
typedef struct {
    int32_t *keys;   /* (cap) owned */
    int32_t *vals;   /* (cap) owned */
    uint32_t cap;    /* power of two or 0 */
    uint32_t n;
} sampling_counter;

typedef struct sampling_state {
    const sampling_params *params; /* borrowed */
    int64_t vocab;
    int32_t *stop_ids;             /* (n_stop_ids) stop_token_ids + eos ids, owned */
    int n_stop_ids;
    uint64_t seed;
    uint64_t n_draws;              /* random numbers used so far */
    int64_t n_generated;           /* tokens accepted (min_new_tokens, penalties) */
    sampling_counter output;       /* generated token -> count */
    sampling_counter prompt;       /* prompt tokens (repetition penalty), count unused */
} sampling_state;

/* eos_ids: the model's / tokenizer's end tokens (masked by
 * min_new_tokens along with stop_token_ids).  seed: sampling_seed when
 * given, else any number from the scheduler's generator.  Returns 0 or
 * -1 (out of memory, logged). */
int sampling_state_init(sampling_state *st, const sampling_params *p, int64_t vocab, const int32_t *eos_ids,
                        int n_eos, uint64_t seed);
void sampling_state_free(sampling_state *st);

/* Prompt tokens for the repetition penalty (HF semantics: prompt +
 * output).  SGLang's current penalizer counts only output tokens; skip
 * this call to match it.  Only needed when repetition_penalty != 1.
 * Returns 0 or -1 (out of memory). */
int sampling_state_add_prompt(sampling_state *st, const int32_t *ids, int64_t n);

/* Record a generated token (after sampling, or forced by a grammar /
 * speculative accept).  Returns 0 or -1 (out of memory). */
int sampling_state_accept(sampling_state *st, int32_t token);

/* Bytes of scratch sampling_sample needs for this vocabulary. */
size_t sampling_scratch_bytes(int64_t vocab);

typedef struct {
    bool want;               /* return_logprob: chosen token's logprob */
    int top_n;               /* top_logprobs_num (0 = none) */
    const int32_t *ids;      /* token_ids_logprob (n_ids), borrowed */
    int n_ids;
    bool original;           /* SGLANG_RETURN_ORIGINAL_LOGPROB */
} sampling_logprob_req;

typedef struct {
    int32_t token;
    float logprob;           /* when lp->want */
    int32_t *top_ids;        /* caller array (lp->top_n) */
    float *top_logprobs;     /* caller array (lp->top_n) */
    int n_top;               /* filled entries: min(top_n, vocab) */
    float *ids_logprobs;     /* caller array (lp->n_ids); ids out of range get NaN */
} sampling_result;

/* Sample the next token for st from logits (vocab, f32; rewritten with
 * the processed logits).  scratch: sampling_scratch_bytes(vocab) bytes,
 * 16-byte aligned.  lp may be NULL.  Returns 0, or -1 on bad arguments
 * (logged).  Does not record the token: call sampling_state_accept. */
int sampling_sample(sampling_state *st, float *logits, void *scratch, const sampling_logprob_req *lp,
                    sampling_result *out);

/* The two halves of sampling_sample, for callers that run more logit
 * processors in between (the scheduler's grammar mask, next):
 * sampling_apply_processors rewrites logits (vocab) with the penalties,
 * the min_new_tokens mask, NaN cleaning and logit_bias (the "processed
 * logits" above); sampling_sample_processed draws from such a row (not
 * modified) exactly as sampling_sample does after that step.
 * sampling_sample(st, l, ...) == apply_processors(st, l) then
 * sample_processed(st, l, ...).  Both return 0 or -1 (bad arguments). */
int sampling_apply_processors(const sampling_state *st, float *logits);
int sampling_sample_processed(sampling_state *st, const float *logits, void *scratch,
                              const sampling_logprob_req *lp, sampling_result *out);

/* Speculative verification of one draft token with SGLang's acceptance
 * rule (tree_speculative_sampling_target_only on a chain): q = the
 * distribution sampling_sample_processed draws from (temperature, then
 * top-k / top-p / min-p, renormalised), coin = the next uniform draw;
 * the draft is taken when sampling_spec_accept(q[draft], coin, ...),
 * otherwise a second draw samples the residual (q without the draft,
 * renormalised).  At thresholds (1, 1) that is exact rejection sampling:
 * the token is distributed as q (another random stream than plain
 * sampling, so not the same ids for a seed); below 1 drafts are taken
 * more often and the output no longer follows q.  Greedy (top_k <= 1):
 * the argmax, thresholds unused, as SGLang.  out->token == draft means
 * accepted; logprobs as sampling_sample_processed for the token.  Does
 * not record the token.  0, or -1 on bad arguments (draft outside the
 * vocabulary included). */
int sampling_verify_processed(sampling_state *st, const float *logits, void *scratch, int32_t draft,
                              double threshold_single, double threshold_acc, const sampling_logprob_req *lp,
                              sampling_result *out);
/* The rule itself: accept when p > 0 and (coin <= p / threshold_acc or
 * p >= threshold_single); threshold_acc is capped below at 1e-9 as
 * SGLang.  (SGLang's prob_acc sums the target probabilities of the
 * siblings tried at a tree level; a chain has one, so it is p.)  p = 0
 * (masked by a grammar, filtered by top-k) is never accepted. */
bool sampling_spec_accept(double p, double coin, double threshold_single, double threshold_acc);

/* Prompt logprobs (return_logprob with logprob_start_len): for the logits
 * row at prompt position i (vocab, f32, not modified) and the next prompt
 * token `target`, as SGLang's default: log_softmax of the raw logits (no
 * penalties, no temperature; NaN logits count as -inf).  Fills
 * out->logprob for target (NaN when out of vocabulary), the top lp->top_n
 * and the lp->ids entries (lp may be NULL); out->token = target.
 * scratch: sampling_scratch_bytes(vocab).  Returns 0 or -1 (bad args). */
int sampling_input_logprobs(const float *logits, int64_t vocab, int32_t target, void *scratch,
                            const sampling_logprob_req *lp, sampling_result *out);

/* exp(x) for x <= 0 as the sampler computes it: 0 at or below -87,
 * relative error < 2e-7 above (exposed for tests). */
float sampling_exp_neg(float x);

/* The uniform [0, 1) draw number k of a seed (exposed for tests). */
double sampling_uniform(uint64_t seed, uint64_t k);

#endif
