/* moe — top-k routing and grouping by expert (see moe.h). */
#include "model/moe.h"

#include <math.h>

void moe_route_row(const float *logits, int E, int K, int renorm, int32_t *sel, float *w)
{
    float mx = -INFINITY;
    for (int e = 0; e < E; e++)
        if (logits[e] > mx) mx = logits[e];
    /* softmax denominator over all experts (f32, as HF's dtype=torch.float) */
    float sum = 0.0f;
    for (int e = 0; e < E; e++) sum += isnan(logits[e]) ? 0.0f : expf(logits[e] - mx);
    /* selection: K passes of an argmax that skips chosen ids; strict '>'
     * keeps the lowest index among equal values */
    for (int k = 0; k < K; k++) {
        int best = -1;
        float bv = 0.0f;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= sel[j] == e;
            if (taken) continue;
            float v = isnan(logits[e]) ? -INFINITY : logits[e];
            if (best < 0 || v > bv) best = e, bv = v;
        }
        sel[k] = best;
        w[k] = isinf(bv) && bv < 0 ? 0.0f : expf(bv - mx) / sum;
    }
    if (renorm) {
        float s = 0.0f;
        for (int k = 0; k < K; k++) s += w[k];
        if (s > 0.0f)
            for (int k = 0; k < K; k++) w[k] /= s;
    }
}

void moe_group(const int32_t *sel, int n, int E, int32_t *cnt, int32_t *off, int32_t *order,
               int32_t *inv)
{
    for (int e = 0; e < E; e++) cnt[e] = 0;
    for (int a = 0; a < n; a++) cnt[sel[a]]++;
    off[0] = 0;
    for (int e = 0; e < E; e++) off[e + 1] = off[e] + cnt[e];
    /* fill in increasing a; cnt is reused as the running cursor, restored after */
    for (int e = 0; e < E; e++) cnt[e] = 0;
    for (int a = 0; a < n; a++) {
        int e = sel[a], p = off[e] + cnt[e]++;
        order[p] = a;
        inv[a] = p;
    }
}

/* ---- general router (moe_route) ----------------------------------------- */

typedef struct route_ctx {
    const moe_route_cfg *rc;
    const float *l;
    float mx, sum; /* softmax: max logit and the sum of exp */
} route_ctx;

/* The score of expert e (what the weights are made of). */
static float route_score(const route_ctx *r, int e)
{
    float x = r->l[e];
    if (isnan(x)) return 0.0f;
    if (r->rc->score == MOE_SCORE_SIGMOID) return 1.0f / (1.0f + expf(-x));
    return r->sum > 0.0f ? expf(x - r->mx) / r->sum : 0.0f;
}

/* The value experts are chosen by: score + bias, or for softmax without a
 * bias the logit (monotone in the score, and exact). */
static float route_choice(const route_ctx *r, int e)
{
    float x = r->l[e];
    if (isnan(x)) return -INFINITY;
    if (!r->rc->bias && r->rc->score == MOE_SCORE_SOFTMAX) return x;
    return route_score(r, e) + (r->rc->bias ? r->rc->bias[e] : 0.0f);
}

void moe_route(const moe_route_cfg *rc, const float *logits, int32_t *sel, float *w)
{
    const int E = rc->E, K = rc->K;
    route_ctx r = {rc, logits, -INFINITY, 1.0f};
    if (rc->score == MOE_SCORE_SOFTMAX) {
        for (int e = 0; e < E; e++)
            if (logits[e] > r.mx) r.mx = logits[e];
        float sum = 0.0f;
        for (int e = 0; e < E; e++) sum += isnan(logits[e]) ? 0.0f : expf(logits[e] - r.mx);
        r.sum = sum;
    }
    /* groups allowed to be chosen from */
    unsigned char allowed[MOE_MAX_GROUPS];
    int G = rc->method == MOE_TOPK_GREEDY || rc->n_group <= 1 ? 1 : rc->n_group;
    if (G > MOE_MAX_GROUPS) G = MOE_MAX_GROUPS;
    int gs = E / G;
    for (int g = 0; g < G; g++) allowed[g] = G == 1;
    if (G > 1) {
        float gsc[MOE_MAX_GROUPS];
        for (int g = 0; g < G; g++) {
            float b1 = -INFINITY, b2 = -INFINITY;
            for (int e = g * gs; e < (g + 1) * gs; e++) {
                float v = route_choice(&r, e);
                if (v > b1) b2 = b1, b1 = v;
                else if (v > b2) b2 = v;
            }
            gsc[g] = rc->method == MOE_TOPK_GROUP_TOP2 ? b1 + b2 : b1;
        }
        int tg = rc->topk_group < G ? rc->topk_group : G;
        for (int j = 0; j < tg; j++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!allowed[g] && (best < 0 || gsc[g] > gsc[best] ||
                                    (isnan(gsc[best]) && !isnan(gsc[g]))))
                    best = g;
            allowed[best] = 1;
        }
    }
    /* K passes of an argmax over the allowed, not yet taken experts; strict
     * '>' keeps the lowest index among equal values */
    for (int k = 0; k < K; k++) {
        int best = -1;
        float bv = 0.0f;
        for (int pass = 0; pass < 2 && best < 0; pass++) /* pass 1: outside the groups (K too big) */
            for (int e = 0; e < E; e++) {
                if ((allowed[G > 1 ? e / gs : 0] != 0) == pass) continue;
                int taken = 0;
                for (int j = 0; j < k; j++) taken |= sel[j] == e;
                if (taken) continue;
                float v = route_choice(&r, e);
                if (best < 0 || v > bv) best = e, bv = v;
            }
        sel[k] = best;
        w[k] = route_score(&r, best);
    }
    if (rc->renorm) {
        float s = 0.0f;
        for (int k = 0; k < K; k++) s += w[k];
        if (s > 0.0f)
            for (int k = 0; k < K; k++) w[k] /= s;
    }
    if (rc->scale != 1.0f)
        for (int k = 0; k < K; k++) w[k] *= rc->scale;
}
