/* grammar_close — finishing inside a token budget: the fewest bytes that
 * complete the grammar from the matcher's position, and a mask that keeps
 * only the tokens after which the rest still fits.
 *
 * DESIGN: a constrained request that runs out of max_new_tokens in the
 * middle of its grammar ends with invalid output (half a JSON object).
 * With a trained model that is rare; with random weights — or a model
 * that likes whitespace — it is the usual case, since grammars such as
 * JSON's allow unbounded whitespace and strings.  So the scheduler asks,
 * each step, how many bytes the shortest completion needs
 * (grammar_matcher_min_bytes_to_end) and, once the budget left is not
 * more than that plus one, masks with grammar_matcher_fill_mask_within:
 * the normal mask narrowed to tokens whose acceptance leaves a completion
 * of at most budget - 1 bytes.  Every token holds at least one byte and a
 * byte-level vocabulary has a token for each byte, so the shortest path
 * always has a next token that fits: the output completes within the
 * budget, ending where the grammar may end.
 *
 * The distance of a DFA node (bytes from there to the end of its rule,
 * taking each rule reference at its own shortest length) is computed once
 * per grammar by relaxation to a fixed point (Bellman-Ford over nodes;
 * rule lengths are the distances of their start nodes), stored on the
 * grammar under its mutex.  A stack's distance is the sum over its frames
 * (each frame's node is where its rule resumes); the matcher's is the
 * minimum over its stacks.
 *
 * Threading: the table is built once under g->mu and read-only after;
 * matchers are used by one thread at a time. */
#include "grammar/grammar_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define GC_INF (INT32_MAX / 4)

static int32_t sat_add(int32_t a, int32_t b)
{
    int64_t s = (int64_t)a + b;
    return s >= GC_INF ? GC_INF : (int32_t)s;
}

/* The per-node distance table (n_nodes), built on first use. */
static const int32_t *dist_table(grammar *g)
{
    pthread_mutex_lock(&g->mu);
    if (!g->close_dist) {
        int32_t *d = malloc(sizeof(int32_t) * (size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
        if (d) {
            for (int32_t i = 0; i < g->n_nodes; i++) d[i] = g->nodes[i].accept ? 0 : GC_INF;
            /* relax until nothing changes: each pass can only lower values,
             * bounded below by 0, so it terminates */
            for (int changed = 1; changed;) {
                changed = 0;
                for (int32_t i = 0; i < g->n_nodes; i++) {
                    const gr_node *nd = &g->nodes[i];
                    int32_t best = d[i];
                    for (uint32_t e = 0; e < nd->ne; e++) {
                        int32_t c = sat_add(1, d[g->edges[nd->e_off + e].to]);
                        if (c < best) best = c;
                    }
                    for (uint32_t r = 0; r < nd->nr; r++) {
                        const gr_ref *rf = &g->refs[nd->r_off + r];
                        int32_t st = rf->rule >= 0 && rf->rule < g->n_rules ? g->rule_start[rf->rule] : -1;
                        if (st < 0) continue;
                        int32_t c = sat_add(d[st], d[rf->to]);
                        if (c < best) best = c;
                    }
                    if (best < d[i]) d[i] = best, changed = 1;
                }
            }
            g->close_dist = d;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return g->close_dist;
}

/* Distance of the stack whose top frame is f. */
static int32_t stack_dist(const grammar_matcher *m, const int32_t *d, int32_t f)
{
    int32_t s = 0;
    for (int guard = 0; f != GM_ROOT && f != GM_BOTTOM && guard < 1 << 20; guard++) {
        s = sat_add(s, d[m->frames[f].node]);
        f = m->frames[f].parent;
    }
    return s;
}

int32_t grammar_matcher_min_bytes_to_end(grammar_matcher *m)
{
    const gm_hist *h = gm_cur(m);
    if (h->terminated || (h->flags & GM_CAN_END)) return 0;
    const int32_t *d = dist_table((grammar *)m->g);
    if (!d) return -1;
    int32_t best = GC_INF;
    for (int32_t i = 0; i < h->n_tops; i++) {
        int32_t s = stack_dist(m, d, m->committed.p[h->tops_off + i]);
        if (s < best) best = s;
    }
    return best >= GC_INF ? -1 : best;
}

int grammar_matcher_token_fits(grammar_matcher *m, int32_t id, int32_t budget)
{
    if (budget < 1) return 1;
    if (gv_is_end(m->v, id)) return 1; /* in the mask only where the grammar may end */
    if (!grammar_matcher_accept_token(m, id)) return 0;
    int32_t rest = grammar_matcher_min_bytes_to_end(m);
    grammar_matcher_rollback(m, 1);
    return rest >= 0 && rest <= budget - 1;
}

void grammar_matcher_fill_mask_within(grammar_matcher *m, uint32_t *mask, int32_t budget)
{
    grammar_matcher_fill_mask(m, mask);
    if (budget < 1) return;
    const grammar_vocab *v = m->v;
    size_t words = grammar_mask_words(v);
    int any = 0;
    uint32_t *keep = calloc(words, sizeof *keep);
    if (!keep) return; /* out of memory: the plain mask */
    for (size_t w = 0; w < words; w++) {
        for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
            int32_t id = (int32_t)(w * 32 + (size_t)__builtin_ctz(bits));
            if (grammar_matcher_token_fits(m, id, budget)) keep[w] |= 1u << (id % 32), any = 1;
        }
    }
    if (any) memcpy(mask, keep, words * sizeof *mask);
    free(keep);
}
