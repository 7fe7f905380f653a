/* moe — routing for mixture-of-experts MLP blocks (Qwen3-MoE, Mixtral,
 * Qwen2-MoE, DeepSeek V2/V3).
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
 *   moe_route      the general router every MoE layer runs (moe_route_cfg):
 *                  softmax or sigmoid scores, grouped top-k (DeepSeek's
 *                  n_group / topk_group: group_limited_greedy ranks groups
 *                  by their best score, noaux_tc by the sum of their two
 *                  best bias-corrected scores), a correction bias that
 *                  moves the choice but not the weights (V3's
 *                  e_score_correction_bias), renormalization and
 *                  routed_scaling_factor.  With softmax, no groups, no bias
 *                  and scale 1 it is moe_route_row exactly.
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

/* Scoring function and top-k method of moe_route. */
typedef enum moe_score_fn { MOE_SCORE_SOFTMAX = 0, MOE_SCORE_SIGMOID = 1 } moe_score_fn;
typedef enum moe_topk_method {
    MOE_TOPK_GREEDY = 0,    /* top-k over all experts */
    MOE_TOPK_GROUP_MAX = 1, /* group_limited_greedy: groups ranked by their max score */
    MOE_TOPK_GROUP_TOP2 = 2 /* noaux_tc: groups ranked by the sum of their 2 best choice scores */
} moe_topk_method;

/* Largest n_group moe_route takes (config.c rejects more). */
#define MOE_MAX_GROUPS 64

typedef struct moe_route_cfg {
    int E, K;
    moe_score_fn score;
    moe_topk_method method;
    int n_group, topk_group; /* grouped methods: E % n_group == 0, K <= topk_group * E / n_group */
    const float *bias;       /* (E) added to the scores for choosing only, or NULL */
    int renorm;              /* divide the K weights by their sum */
    float scale;             /* then multiply them by this (routed_scaling_factor; 1 = none) */
} moe_route_cfg;

/* Route one token: logits (E) -> sel (K) distinct expert ids in decreasing
 * order of their choice value (score + bias; for softmax without bias the
 * logit itself, so no two logits tie through rounding), w (K) their
 * scores (not biased), renormalized and scaled per rc.  Grouped methods
 * first keep the topk_group best groups (ties: lowest group index) and
 * choose only inside them.  NaN logits are never preferred (score 0). */
void moe_route(const moe_route_cfg *rc, const float *logits, int32_t *sel, float *w);

#endif
