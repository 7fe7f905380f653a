/* model_lora — the model side of LoRA: projection shapes for the adapter
 * loader, batch checks, and the per-projection exec the decoder hands to
 * linear() (see model.h's model_batch and model_impl.h).
 *
 * DESIGN: adapters are not stored on the shared, immutable weights (they
 * come and go while serving); each batch names the adapters its rows use.
 * For projection p of layer l the decoder asks model_lora_exec for a copy
 * of its exec carrying the batch's deltas of that projection (id = the
 * adapter's index in the batch) and the per-row adapter ids: a batch with
 * no adapter gets the exec back unchanged, so base-only batches run the
 * same code as before. */
#include <math.h>
#include <stdlib.h>

#include "model/model_impl.h"
#include "util/log.h"

int model_proj_shape(const model *m, int layer, model_proj p, int *n, int *k)
{
    const model_weights *w = m->w;
    if (layer < 0 || layer >= w->cfg.n_layer || p < 0 || p >= MODEL_NPROJ) return -1;
    const model_layer *l = &w->layers[layer];
    const linear_weight *lw = NULL;
    /* MLA (DeepSeek): q_proj (without q_lora_rank) and o_proj run through
     * mla.c's adapter hooks; k_proj / v_proj do not exist there */
    if ((p == MODEL_PROJ_K || p == MODEL_PROJ_V) && l->wkv_a.mat.n > 0) return -3;
    switch (p) {
    case MODEL_PROJ_Q: lw = &l->wq; break;
    case MODEL_PROJ_K: lw = &l->wk; break;
    case MODEL_PROJ_V: lw = &l->wv; break;
    case MODEL_PROJ_O: lw = &l->wo; break;
    case MODEL_PROJ_GATE: lw = l->moe ? NULL : &l->wgate; break;
    case MODEL_PROJ_UP: lw = l->moe ? NULL : &l->wup; break;
    case MODEL_PROJ_DOWN: lw = l->moe ? NULL : &l->wdown; break;
    default: break;
    }
    if (!lw) return -2; /* MoE MLP: experts */
    if (lw->mat.n <= 0 || lw->mat.k <= 0) return -1;
    *n = lw->mat.n, *k = lw->mat.k;
    return 0;
}

void model_lm_head_shape(const model *m, int *n, int *k)
{
    *n = m->w->lm_head.mat.n, *k = m->w->lm_head.mat.k;
}

int model_mla_shape(const model *m, int layer, int which, int *n, int *k)
{
    const model_weights *w = m->w;
    const model_config *c = &w->cfg;
    if (layer < 0 || layer >= c->n_layer || which < 0 || which > MODEL_NMLA) return -1;
    const model_layer *l = &w->layers[layer];
    if (l->wkv_a.mat.n <= 0) return -3;
    if (which == MODEL_NMLA) { /* kv_b_proj, split per head at load */
        if (!l->wkb_t || !l->wvb) return -1;
        *n = c->n_head * (c->qk_nope_dim + c->v_head_dim), *k = c->kv_lora_rank;
        return 0;
    }
    const linear_weight *lw = which == MODEL_MLA_Q_A ? &l->wq_a : which == MODEL_MLA_Q_B ? &l->wq_b
                                                                                   : &l->wkv_a;
    if (lw->mat.n <= 0 || lw->mat.k <= 0) return -1;
    *n = lw->mat.n, *k = lw->mat.k;
    return 0;
}

int model_expert_shape(const model *m, int layer, int e, int part, int *n, int *k)
{
    const model_weights *w = m->w;
    if (layer < 0 || layer >= w->cfg.n_layer || part < 0 || part > MODEL_EXPERT_DOWN) return -1;
    const model_layer *l = &w->layers[layer];
    if (!l->moe) return -2;
    if (e >= w->cfg.n_expert) return -4;
    if (w->arch->names && w->arch->names->expert_in) return -1; /* packed (GraniteMoE) */
    const linear_weight *lw;
    if (e < 0) {
        if (!l->has_shared) return -1;
        lw = part == MODEL_EXPERT_GATE ? &l->wsgate : part == MODEL_EXPERT_UP ? &l->wsup : &l->wsdown;
    } else {
        lw = part == MODEL_EXPERT_GATE ? &l->egate[e] : part == MODEL_EXPERT_UP ? &l->eup[e]
                                                                                : &l->edown[e];
    }
    if (lw->mat.n <= 0 || lw->mat.k <= 0) return -1;
    *n = lw->mat.n, *k = lw->mat.k;
    return 0;
}

int model_lora_check(const model *m, const model_batch *b)
{
    if (!b->seq_adapter || b->n_adapters <= 0) return 0;
    if (b->n_adapters > MODEL_MAX_BATCH_ADAPTERS || !b->adapters) {
        log_error("batch names %d adapters (at most %d)", b->n_adapters, MODEL_MAX_BATCH_ADAPTERS);
        return -1;
    }
    for (int i = 0; i < b->n_adapters; i++) {
        const model_adapter *a = b->adapters[i];
        if (!a || a->n_layer != m->cfg->n_layer || !a->proj ||
            (a->moe && a->n_expert != m->cfg->n_expert)) {
            log_error("adapter %d of the batch does not belong to this model", i);
            return -1;
        }
    }
    for (int s = 0; s < b->n_seqs; s++)
        if (b->seq_adapter[s] < -1 || b->seq_adapter[s] >= b->n_adapters) {
            log_error("sequence %d: adapter index %d outside [-1, %d)", s, b->seq_adapter[s],
                      b->n_adapters);
            return -1;
        }
    return 0;
}

int model_lora_rows(const model_batch *b, const int32_t *tok_seq, int k_moe, int32_t **row_ad,
                    int32_t **lrow_ad)
{
    *row_ad = *lrow_ad = NULL;
    if (!b->seq_adapter || b->n_adapters <= 0) return 0;
    int any = 0;
    for (int s = 0; s < b->n_seqs; s++) any |= b->seq_adapter[s] >= 0;
    if (!any) return 0;
    size_t n = (size_t)b->n_tokens * (size_t)(1 + (k_moe > 0 ? k_moe : 0)) + (size_t)b->n_logits + 1;
    *row_ad = malloc(sizeof(int32_t) * n);
    if (!*row_ad) return -1;
    for (int t = 0; t < b->n_tokens; t++) (*row_ad)[t] = b->seq_adapter[tok_seq[t]];
    *lrow_ad = *row_ad + b->n_tokens;
    for (int i = 0; i < b->n_logits; i++) (*lrow_ad)[i] = (*row_ad)[b->logit_rows[i]];
    return 0;
}

void model_lora_embed(const model_weights *w, const model_adapter *ad, int tok, float *out)
{
    const linear_adapter *e = &ad->embed;
    if (e->rank <= 0) return;
    const int H = w->cfg.hidden_size, r = e->rank;
    const float *u = (const float *)e->a + (size_t)tok * r, *bt = e->bt;
    /* the model scales the embedding module's output (Gemma's sqrt(H), Granite's multiplier) */
    float f = e->scale * (w->arch->embed_scale ? sqrtf((float)H) : 1.0f) * w->cfg.embed_mult;
    for (int c = 0; c < H; c++) {
        float s = 0;
        for (int j = 0; j < r; j++) s += u[j] * bt[(size_t)j * H + c];
        out[c] += f * s;
    }
}

void model_lora_linear_group(int n, float *const *y, const float *x, int m, const linear_weight *const *w,
                             const linear_exec *const *ex)
{
    int any = 0;
    for (int i = 0; i < n; i++) {
        linear_exec e = *ex[i];
        any |= e.n_adapters > 0 && e.row_adapter;
        e.n_adapters = 0, e.adapters = NULL, e.row_adapter = NULL; /* base product only */
        linear(y[i], x, m, w[i], &e);
    }
    if (!any) return;
    /* the base products' column split may differ from kern_split's */
    if (ex[0]->barrier) ex[0]->barrier(ex[0]->barrier_arg);
    for (int i = 0; i < n; i++)
        if (ex[i]->n_adapters > 0 && ex[i]->row_adapter)
            linear_adapters_apply(y[i], x, m, w[i]->mat.n, w[i]->mat.k, ex[i]->adapters, ex[i]->n_adapters,
                                  ex[i]->row_adapter, ex[i]->ith, ex[i]->nth, 0);
}

/* Adapter ma's delta at slot (kind, il, p) (model_lora_exec_at), or NULL. */
static const linear_adapter *slot_of(const model_adapter *ma, int kind, int il, int p, int nh)
{
    switch (kind) {
    case MODEL_LORA_PROJ: return il < 0 ? &ma->lm_head : &ma->proj[il * MODEL_NPROJ + p];
    case MODEL_LORA_MLA: return ma->mla ? &ma->mla[il * MODEL_NMLA + p] : NULL;
    case MODEL_LORA_KVB: return ma->kvb ? &ma->kvb[(size_t)il * nh * 2 + p] : NULL;
    case MODEL_LORA_EXPERT: return ma->moe ? &ma->moe[(size_t)il * (ma->n_expert + 1) * 3 + p] : NULL;
    default: return NULL;
    }
}

const linear_exec *model_lora_exec(const model_batch *b, const int32_t *row_ad,
                                   const linear_exec *ex, int il, int p, linear_exec *buf,
                                   linear_adapter *abuf)
{
    return model_lora_exec_at(b, row_ad, ex, MODEL_LORA_PROJ, il, p, 0, buf, abuf);
}

const linear_exec *model_lora_exec_at(const model_batch *b, const int32_t *row_ad,
                                      const linear_exec *ex, int kind, int il, int p, int nh,
                                      linear_exec *buf, linear_adapter *abuf)
{
    if (!row_ad) return ex;
    int na = 0;
    for (int i = 0; i < b->n_adapters; i++) {
        const linear_adapter *la = slot_of(b->adapters[i], kind, il, p, nh);
        if (!la || la->rank <= 0) continue;
        abuf[na] = *la;
        abuf[na++].id = i;
    }
    if (!na) return ex;
    *buf = *ex;
    buf->row_adapter = row_ad;
    buf->n_adapters = na;
    buf->adapters = abuf;
    return buf;
}

void model_lora_apply(float *y, const float *x, int m, int n, int k, const linear_exec *ex)
{
    if (ex->n_adapters > 0 && ex->row_adapter)
        linear_adapters_apply(y, x, m, n, k, ex->adapters, ex->n_adapters, ex->row_adapter, ex->ith,
                              ex->nth, 0);
}
