/* spec_eagle — EAGLE / EAGLE3 speculative decoding (SGLang's
 * --speculative-algorithm EAGLE, EAGLE3, and NEXTN mapped onto EAGLE): a
 * one-layer draft head that reads the target model's hidden states.
 *
 * DESIGN
 * The head is a Hugging Face folder in the published layouts (config.json
 * + model.safetensors):
 *   EAGLE-1/2  LlamaForCausalLMEagle: fc (H, 2H) (+ bias) over
 *              concat(embed(token), target's final-normed last hidden),
 *              one Llama layer `layers.0.*` without its input_layernorm;
 *              logits = the target's LM head over the layer's output
 *              (no norm); embeddings always the target's (SGLang sets
 *              the draft's embed and head from the target).
 *   EAGLE3     LlamaForCausalLMEagle3: fc (H, 3H) over three target hidden
 *              states (the residual stream entering layers l+1 for the
 *              head's eagle_config.eagle_aux_hidden_state_layer_ids, else
 *              layers 2, L/2, L-3 as SGLang; ascending, as SGLang's capture
 *              appends them); `midlayer.*` whose q/k/v read 2H =
 *              concat(input_layernorm(embed), hidden_norm(hidden)); `norm`;
 *              its own lm_head over draft_vocab_size with d2t (draft id
 *              -> target id = id + d2t[id]); t2d is not needed.  Without a
 *              lm_head the target's is used.
 *
 * --speculative-token-map (EAGLE-1 / NEXTN; spec_tokmap.h): the logits come
 * from the target's LM head cut to the map's rows, -inf elsewhere.
 *
 * The target's hidden states come from model_set_capture: every target
 * forward writes each token row's capture rows into a store indexed by the
 * target KV slot (the store mirrors the KV cache, so radix-cache prefixes
 * and chunked prefill need nothing more); at drafting time the scheduler
 * names the request's slots (sched_draft_slots).
 *
 * Draft position p holds the pair (target hidden of token p, token p+1),
 * as SGLang's draft extend shifts the ids by one.  Per request the draft
 * KV (own slots from a free stack, f32) is valid over the pairs whose
 * tokens still match the sequence; at each proposal
 *   catch-up   the pairs not yet in the draft KV up to (h[len-2], seq[len-1])
 *              -> d0 = argmax of the last row
 *   chain j    (draft hidden of step j-1, d(j-1)) at position len-2+j -> dj
 * (topk 1: a chain of k tokens; topk > 1: spec_eagle_propose_tree).  The chain positions' slots go back to
 * the free stack after the proposal (rejected or not, they are recomputed
 * from the target's hidden states once verified).  Greedy drafts; the
 * scheduler's verification keeps outputs identical to plain decoding.
 *
 * One thread (the scheduler's), kern_matmul over the head's matrices (bf16
 * when the file holds bf16, else f32).
 *
 * Ownership: spec_eagle borrows the target model (it must outlive it) and
 * owns the head's weights, its KV, and the capture store it installs on
 * the target (removed again by spec_eagle_destroy). */
#ifndef SGLC_SPEC_EAGLE_H
#define SGLC_SPEC_EAGLE_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/model.h"
#include "spec/spec_draft.h"
#include "spec/spec_tokmap.h"

typedef struct spec_eagle spec_eagle;

#define SPEC_EAGLE_TOPK_MAX 16   /* --speculative-eagle-topk: sglc's bound (a step forwards topk rows) */

/* What the head's config.json says (spec_eagle_config_parse). */
typedef struct spec_eagle_config {
    model_config cfg;            /* parsed as a Llama config (attention sizes, rope, eps) */
    int draft_vocab;             /* draft_vocab_size, 0 = absent */
    int at[3];                   /* capture points (model_set_capture) */
    int n_at;                    /* 1 (EAGLE: the final-normed hidden) or 3 (EAGLE3) */
} spec_eagle_config;

/* Parse config.json text (len bytes) of a head for a target of config tc
 * (eagle3: the algorithm asked for).  0, or -1 with the reason in err
 * (not an EAGLE architecture, the other version, more than one layer,
 * hidden size or vocabulary unlike the target's, capture layers outside
 * the target).  The fuzz entry (tests/fuzz/fuzz_eagle_config.c). */
int spec_eagle_config_parse(const char *txt, size_t len, const model_config *tc, int eagle3, spec_eagle_config *out,
                            char *err, size_t errlen);

/* Load the head in dir for target (borrowed) and install the capture on
 * it for target_slots KV slots.  eagle3: the algorithm asked for (the
 * head's architecture must match).  kv_tokens: draft KV slots over all
 * requests.  NULL and the reason in err (missing file, wrong architecture
 * or hidden size, bad tensor shapes, tensor parallelism). */
spec_eagle *spec_eagle_create(const char *dir, int eagle3, model *target, int64_t target_slots, int64_t kv_tokens,
                              char *err, size_t errlen);
void spec_eagle_destroy(spec_eagle *e);

/* Up to k draft tokens continuing seq (len), whose target KV slots are
 * tslots (positions 0..len-2 computed).  Returns how many (0 on any
 * failure: no slots, too short, context). */
int spec_eagle_propose(spec_eagle *e, spec_draft_req *r, const int32_t *seq, int64_t len, const int32_t *tslots,
                       int32_t *draft, int k);
/* A draft tree (SGLang's EAGLE tree, --speculative-eagle-topk > 1): the
 * catch-up's row gives the root's topk children; then steps - 1 times the
 * topk best nodes of the newest depth by cumulative log-probability (the
 * frontier) run through the head as one tree-masked forward (each row sees
 * the sequence's pairs, its ancestors and itself; rope at its depth) and
 * each adds its topk children; finally the k best nodes of the whole tree
 * (ties to the earlier node; a node never outscores its parent, so the set
 * keeps every kept node's parents).  draft / parent get them parents first
 * (parent -1 = a child of the last token), score (optional) their
 * cumulative log-probabilities.  Returns how many (0 on any failure).  The
 * frontier's draft KV goes back to the free stack before it returns. */
int spec_eagle_propose_tree(spec_eagle *e, spec_draft_req *r, const int32_t *seq, int64_t len, const int32_t *tslots,
                            int32_t *draft, int32_t *parent, double *score, int k, int steps, int topk);
/* Tests: the head's logits (draft vocabulary) after the catch-up and n_path
 * causal chain steps fed the given tokens (path[j] at position len - 1 + j),
 * the reference a tree node is checked against.  0 or -1. */
int spec_eagle_path_logits(spec_eagle *e, const int32_t *seq, int64_t len, const int32_t *tslots, const int32_t *path,
                           int n_path, float *out);
void spec_eagle_req_release(spec_eagle *e, spec_draft_req *r);
int64_t spec_eagle_slots_used(const spec_eagle *e);

/* EAGLE-1 / NEXTN: restrict the drafts to the hot ids of m (borrowed,
 * bound to the target's vocabulary; NULL = none), SGLang's
 * --speculative-token-map (spec_tokmap.h).  0, or -1 with err (an EAGLE3
 * head, which has d2t; a map bound to another vocabulary). */
int spec_eagle_set_token_map(spec_eagle *e, const spec_tokmap *m, char *err, size_t errlen);

/* Tests: the first-step logits (draft vocabulary; *n_vocab set) of the
 * pairs 0..len-2 of seq after a target forward over seq's first len-1
 * tokens at slots tslots; out gets the last row's logits.  0 or -1. */
int spec_eagle_first_logits(spec_eagle *e, const int32_t *seq, int64_t len, const int32_t *tslots, float *out,
                            int *n_vocab);
/* A draft-vocabulary id as a target id (EAGLE3's d2t; else itself). */
int32_t spec_eagle_target_id(const spec_eagle *e, int draft_id);
/* The draft vocabulary size (target's for EAGLE-1). */
int spec_eagle_vocab(const spec_eagle *e);

#endif
