/* moe — routing for mixture-of-experts MLP blocks (Qwen3-MoE, Mixtral).
 *
 * DESIGN: two pure functions the decoder calls per MoE layer, kept apart
 * so unit tests can pin their behaviour (tie order, renormalization,
 * grouping):
 *   moe_route_row  router logits of one token -> its top-k experts and
 *                  their weights (softmax over ALL experts in f32, then
 *                  top-k, optionally renormalized to sum 1 -- transformers'
 *                  Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock);
 *   moe_group      the batch's (token, k) assignments -> a counting sort by
 *                  expert, so each expert's rows are contiguous and its
 *                  weights are read once per step as one small matmul.
 * Assignment a = t * K + k (token t, choice k).  No allocation, no state.
 */
#ifndef SGLC_MODEL_MOE_H
#define SGLC_MODEL_MOE_H

#include <stdint.h>

/* logits (E) -> sel (K) expert ids, w (K) weights, ordered by decreasing
 * probability; equal probabilities are taken lowest index first (a fixed
 * rule, so batched and single runs agree), and the K ids are always
 * distinct.  renorm: divide
 * the K weights by their sum.  Requires 1 <= K <= E.  NaN logits count as
 * -inf (never chosen unless nothing else is left). */
void moe_route_row(const float *logits, int E, int K, int renorm, int32_t *sel, float *w);

/* Group n assignments sel (n) over E experts: cnt (E) rows per expert,
 * off (E+1) prefix sums, order (n) assignment ids sorted by expert (stable:
 * increasing a within an expert), inv (n) position of assignment a in
 * order.  Every sel[a] must be in [0, E). */
void moe_group(const int32_t *sel, int n, int E, int32_t *cnt, int32_t *off, int32_t *order,
               int32_t *inv);

#endif
