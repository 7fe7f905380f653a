/* model_tree — tree verification of speculative decoding: a sequence's new
 * rows are the nodes of a draft tree (model_batch.seq_tree_parent) instead
 * of a chain.
 *
 * DESIGN: nothing above the attention kernel knows the tree but rope.
 * Node i's KV goes to the slot of its index (kv position base + i, base =
 * kv_len - n_new), so stores, slot lists and the batch checks are those of
 * a causal forward; what differs:
 *   - attention: row i sees the prefix, its ancestors and itself
 *     (kern_attn_args.tree_mask, built here once per forward, n x n bytes);
 *   - rope: row i turns by (the first row's position) + depth(i), the
 *     position the token will have if its path is accepted (SGLang's
 *     positions = seq_len + depth in build_tree_kernel);
 *   - the sliding window counts depth (kern_attn_args.tree_depth).
 * At page size > 1 an accepted node's KV cannot follow it by a page swap
 * (a page holds several positions): the scheduler copies its rows to the
 * position's slot (model_tree_copy_slot).
 * Under tensor / pipeline parallelism the other ranks would not get the
 * tree (model_tp.c sends tokens, positions and slots), and a Mamba2
 * layer's recurrent state cannot follow branches: both are refused. */
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/log.h"

int model_tree_ok(const model *m) { return model_tp_size(m) <= 1 && m->cfg->n_mamba == 0; }

int model_tree_copy_slot(model *m, model_kv *kv, int32_t dst, int32_t src)
{
    if (dst < 0 || src < 0 || dst >= kv->n_slots || src >= kv->n_slots) {
        log_error("a tree node's KV cannot be copied from slot %d to slot %d (%d slots)", src, dst, kv->n_slots);
        return -1;
    }
    if (dst == src) return 0;
    const size_t row = (size_t)kv->row_len;
    const size_t eb = kv->dt == DTYPE_F32 ? 4 : kv->dt == DTYPE_BF16 ? 2 : 1; /* f8 and int8: one byte */
    for (int l = 0; l < kv->n_layer; l++) {
        for (int h = 0; h < 2; h++) {
            char *c = h ? kv->v[l] : kv->k[l];
            if (!c || (h && kv->v[l] == kv->k[l])) continue; /* no attention here; MLA: one latent row */
            memcpy(c + (size_t)dst * row * eb, c + (size_t)src * row * eb, row * eb);
            float *ts = kv->dt == DTYPE_I8 ? (h ? kv->v_tok[l] : kv->k_tok[l]) : NULL;
            if (ts) memcpy(ts + (size_t)dst * kv->n_tok_head, ts + (size_t)src * kv->n_tok_head,
                           sizeof(float) * (size_t)kv->n_tok_head);
        }
    }
    if (m->capture.store && dst < m->capture.n_slots && src < m->capture.n_slots) {
        const size_t w = (size_t)m->capture.n_at * (size_t)m->cfg->hidden_size;
        memcpy(m->capture.store + (size_t)dst * w, m->capture.store + (size_t)src * w, sizeof(float) * w);
    }
    return 0;
}

void model_tree_buf_free(model_tree_buf *tb)
{
    if (!tb) return;
    free(tb->trees), free((void *)tb->seq), free(tb->mask), free(tb->depth), free(tb->rpos);
    memset(tb, 0, sizeof *tb);
}

int model_tree_prepare(const model *m, const model_batch *b, model_batch *out, model_tree_buf *tb)
{
    memset(tb, 0, sizeof *tb);
    size_t nm = 0, nd = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        if (!b->seq_tree_parent[s]) continue;
        size_t n = (size_t)(b->seq_start[s + 1] - b->seq_start[s]);
        nm += n * n, nd += n;
    }
    if (!nd) return 0;
    if (!model_tree_ok(m)) {
        log_error("tree verification is not supported for this model (%s)",
                  model_tp_size(m) > 1 ? "tensor / pipeline parallel" : "Mamba2 layers");
        return -1;
    }
    tb->trees = calloc((size_t)b->n_seqs, sizeof *tb->trees);
    tb->seq = calloc((size_t)b->n_seqs, sizeof *tb->seq);
    tb->mask = calloc(nm, 1);
    tb->depth = malloc(sizeof(int32_t) * nd);
    tb->rpos = malloc(sizeof(int32_t) * (size_t)(b->n_tokens > 0 ? b->n_tokens : 1));
    if (!tb->trees || !tb->seq || !tb->mask || !tb->depth || !tb->rpos) {
        log_error("out of memory for the draft trees of a batch");
        model_tree_buf_free(tb);
        return -1;
    }
    for (int t = 0; t < b->n_tokens; t++) tb->rpos[t] = b->rope_pos ? b->rope_pos[t] : b->positions[t];
    uint8_t *mk = tb->mask;
    int32_t *dp = tb->depth;
    for (int s = 0; s < b->n_seqs; s++) {
        const int32_t *par = b->seq_tree_parent[s];
        if (!par) continue;
        int r0 = b->seq_start[s], n = b->seq_start[s + 1] - r0;
        for (int i = 0; i < n; i++) {
            if (par[i] < -1 || par[i] >= i) {
                log_error("sequence %d: tree node %d has parent %d (must be in [-1, %d))", s, i, par[i], i);
                model_tree_buf_free(tb);
                return -1;
            }
            dp[i] = par[i] < 0 ? 0 : dp[par[i]] + 1;
            for (int v = i; v >= 0; v = par[v]) mk[(size_t)i * (size_t)n + (size_t)v] = 1;
            tb->rpos[r0 + i] = tb->rpos[r0] + dp[i]; /* row 0 is a root: depth 0 */
        }
        tb->trees[s] = (model_tree){.mask = mk, .depth = dp, .base = b->seq_kv_len[s] - n, .n = n};
        tb->seq[s] = &tb->trees[s];
        mk += (size_t)n * (size_t)n;
        dp += n;
    }
    *out = *b;
    out->rope_pos = tb->rpos;
    out->seq_tree = tb->seq;
    return 1;
}

void model_tree_args(const model_batch *b, int s, kern_attn_args *a)
{
    const model_tree *t = b->seq_tree ? b->seq_tree[s] : NULL;
    if (!t) return;
    a->tree_mask = t->mask;
    a->tree_depth = t->depth;
    a->tree_base = t->base;
    a->tree_n = t->n;
}
