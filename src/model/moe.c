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
