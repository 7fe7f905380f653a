/* decoder — the shared decoder-only forward pass (Llama, Mistral, Qwen2,
 * Qwen3, the MoE families, Gemma 2/3), driven by the architecture
 * descriptor's flags.
 *
 * DESIGN: one tpool_run per forward.  Every thread runs fwd_task over the
 * whole network and the threads meet at tpool_barrier between ops, so a
 * decode step costs one dispatch plus ~10 barriers per layer.  Each op is
 * split by (ith, nth): row ops (norms, rope, KV stores, residual adds) by
 * token rows, projections by output columns (inside linear(), the one
 * projection step: see linear.h), attention by
 * (query, head) pairs of each sequence (inside kern_attention).  All
 * buffers are preallocated by model_reserve() for cap_tokens rows; the
 * forward never allocates once it has started.
 *
 * Per layer:
 *   x += xn; xn = norm(x)             rows          | barrier
 *   q,k,v = xn Wq,Wk,Wv (+bias)       columns       | barrier
 *   [q,k = headnorm(q,k)]; rope(q,k); store k,v at their slots   rows | barrier
 *   att = attention(q, cache)         (seq, q, head) | barrier
 *   xn = att Wo                       columns       | barrier
 *   [xn = postnorm(xn)] x += xn; xn = norm(x)  rows | barrier
 *   (Gemma's post-norms: post_norm_rows, on the rows the add reads next)
 *   gate,up = xn Wg, Wu               columns       | barrier
 *   gate = act(gate) * up             rows          | barrier
 *   xn = gate Wd                      columns       | barrier
 *   [xn = postnorm(xn)]; x += xn      rows (fused into the next layer's norm)
 * The MLP block is the slot where MoE plugs in: MoE layers run moe_block
 * (router, top-k, rows grouped by expert; see its comment and moe.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "model/moe.h"
#include "model/model_ep.h"
#include "model/rope.h"
#include "util/log.h"

void model_embed_row(const model_weights *w, int token, float *out)
{
    int H = w->cfg.hidden_size;
    kern_type et = (kern_type)w->embed_t.type;
    if (!w->embed) { /* rows through the source (dummy) */
        w->src.ops->read_row(w->src.self, &w->embed_t, token, out);
    } else {
        const char *row = (const char *)w->embed + (size_t)token * kern_type_row_bytes(et, H);
        kern_type_get(et)->row_to_f32(out, row, H);
    }
    /* rounded to --dtype unless stored at that precision already */
    if (w->prec == MODEL_PREC_BF16 && et != KERN_TYPE_BF16)
        for (int i = 0; i < H; i++) out[i] = bf16_to_f32(f32_to_bf16(out[i]));
    else if (w->prec == MODEL_PREC_F16 && et != KERN_TYPE_F16)
        for (int i = 0; i < H; i++) out[i] = f16_to_f32(f32_to_f16(out[i]));
    if (w->arch->embed_scale) {
        /* Gemma: sqrt(hidden) cast to the model dtype first, as transformers
         * does (sqrt(1152) = 33.94 becomes 34 in bf16) */
        float s = sqrtf((float)H);
        if (w->prec == MODEL_PREC_BF16) s = bf16_to_f32(f32_to_bf16(s));
        else if (w->prec == MODEL_PREC_F16) s = f16_to_f32(f32_to_f16(s));
        for (int i = 0; i < H; i++) out[i] *= s;
    }
    if (w->cfg.embed_mult != 1.0f)
        for (int i = 0; i < H; i++) out[i] *= w->cfg.embed_mult;
}

/* x += r * y over n (r = residual_multiplier, 1 for most models). */
static void resid_add(float *x, const float *y, int n, float r)
{
    if (r == 1.0f) {
        kern_add(x, x, y, n);
        return;
    }
    for (int i = 0; i < n; i++) x[i] += r * y[i];
}

/* ---- forward ------------------------------------------------------------- */

typedef struct fwd_ctx {
    model *m;
    model_kv *kv;
    const model_batch *b;
    float *logits;
    float *lm_out;          /* the LM head's output: logits, or this rank's vocabulary slice */
    tpool *pool;
    const int32_t *row_ad, *lrow_ad; /* LoRA: adapter per token / logit row, or NULL */
    int32_t *erow_ad;       /* LoRA on experts: adapter per routed assignment (expert order) */
} fwd_ctx;

/* LoRA: exec of projection p of layer il with the batch's adapters (ex when none). */
#define LX(p) model_lora_exec(b, cx->row_ad, &ex, il, (p), &lx, lbuf)

/* Projections p[0..n) (n <= 3) of layer il on the same input: the base
 * products, then (LoRA) one barrier for all their adapter passes. */
static void proj_group(const fwd_ctx *cx, const linear_exec *ex, int il, int n, const model_proj *p,
                       float *const *y, const float *x, int T, const linear_weight *const *w)
{
    linear_exec lx[3];
    linear_adapter lb[3][MODEL_MAX_BATCH_ADAPTERS];
    const linear_exec *e[3];
    for (int i = 0; i < n; i++) e[i] = model_lora_exec(cx->b, cx->row_ad, ex, il, p[i], &lx[i], lb[i]);
    model_lora_linear_group(n, y, x, T, w, e);
}

static void fwd_barrier(void *pool) { tpool_barrier(pool); }

static void rows_split(int total, int ith, int nth, int *lo, int *hi) { kern_split(total, ith, nth, lo, hi); }

/* Gemma's post-norms: rows [lo, hi) of y (T, H) normed in place by w (the
 * attention or MLP output, before its residual add); nothing when w is
 * NULL. */
static void post_norm_rows(float *y, const float *w, int lo, int hi, int H, float eps, float noff)
{
    if (!w) return;
    for (int t = lo; t < hi; t++) kern_rmsnorm(y + (size_t)t * H, y + (size_t)t * H, w, H, eps, noff);
}

/* The cos/sin tables of layer l for row t: the local ones (Gemma 3 sliding
 * layers) or the global ones. */
static void rope_tables(const model *m, const model_layer *l, int t, int half, const float **ct,
                        const float **st)
{
    const int loc = l->rope_local && m->cos_l;
    *ct = (loc ? m->cos_l : m->cos_t) + (size_t)t * half;
    *st = (loc ? m->sin_l : m->sin_t) + (size_t)t * half;
}

/* The MoE MLP slot: xn (T, H) normed rows in, xn (T, H) = sum over each
 * row's top-k experts of w * down(act(gate(x)) * up(x)) out.
 *   router logits = xn Wr            columns        | barrier
 *   softmax + top-k per row, group assignments by expert
 *                                    thread 0 (+ the gather when A is small) | barrier
 *   gather rows into expert order    assignments    | barrier (skipped when small)
 *   per used expert: gate, up        columns        | barrier
 *   act(gate) * up                   assignments    | barrier
 *   per used expert: down -> ex      columns        | barrier
 *   xn[t] = sum_k w[t,k] ex[inv[t,k]]  rows (fixed k order: deterministic)
 * Each used expert's weights are read once per forward, whatever the
 * number of rows routed to it.  LoRA on experts (only when an adapter of
 * the batch changes this layer's): after the gate/up and the down
 * products, a barrier and the adapter pass of each used expert over its
 * rows (their adapters in erow_ad, expert order) and of the shared expert
 * (moe_lora_pass). */
/* Assignments (rows x top-k) up to which thread 0 gathers alone. */
#define MOE_SERIAL_GATHER 64

/* LoRA: whether any adapter of the batch changes an expert (or the shared
 * expert) of layer il. */
static int moe_lora_any(const fwd_ctx *cx, int il)
{
    if (!cx->row_ad) return 0;
    for (int i = 0; i < cx->b->n_adapters; i++) {
        const model_adapter *a = cx->b->adapters[i];
        if (!a->moe) continue;
        const size_t n = (size_t)(a->n_expert + 1) * 3;
        for (size_t j = 0; j < n; j++)
            if (a->moe[(size_t)il * n + j].rank > 0) return 1;
    }
    return 0;
}

/* LoRA on experts (model_lora_apply after the base products and a
 * barrier): parts [p0, p1) of MODEL_EXPERT_* of every used expert, rows
 * in expert order (erow_ad), and of the shared expert (token rows). */
static void moe_lora_pass(fwd_ctx *cx, int il, const linear_exec *ex, int p0, int p1)
{
    model *m = cx->m;
    const model_config *c = &m->w->cfg;
    const int T = cx->b->n_tokens, H = c->hidden_size, E = c->n_expert;
    const int Ie = m->w->tp.moe_inter, Is = m->w->layers[il].has_shared ? m->w->tp.shared_inter : 0;
    linear_exec lx;
    linear_adapter lb[MODEL_MAX_BATCH_ADAPTERS];
    for (int part = p0; part < p1; part++) {
        const int down = part == MODEL_EXPERT_DOWN;
        float *ey = part == MODEL_EXPERT_GATE ? m->eg : part == MODEL_EXPERT_UP ? m->eu : m->ex;
        for (int e = 0; e < E; e++) {
            int n = m->ecnt[e];
            if (!n) continue;
            size_t o = (size_t)m->eoff[e];
            const linear_exec *le = model_lora_exec_at(cx->b, cx->erow_ad + o, ex, MODEL_LORA_EXPERT, il,
                                                       e * 3 + part, 0, &lx, lb);
            if (down) model_lora_apply(ey + o * H, m->eg + o * Ie, n, H, Ie, le);
            else model_lora_apply(ey + o * Ie, m->ex + o * H, n, Ie, H, le);
        }
        if (!Is) continue;
        const linear_exec *le = model_lora_exec_at(cx->b, cx->row_ad, ex, MODEL_LORA_EXPERT, il, E * 3 + part,
                                                   0, &lx, lb);
        if (down) model_lora_apply(m->sout, m->sg, T, H, Is, le);
        else model_lora_apply(part == MODEL_EXPERT_GATE ? m->sg : m->su, m->xn, T, Is, H, le);
    }
}

static void moe_block(fwd_ctx *cx, const model_layer *l, int il, const linear_exec *ex, int lo, int hi)
{
    model *m = cx->m;
    const model_weights *w = m->w;
    const model_config *c = &w->cfg;
    const int ith = ex->ith, nth = ex->nth;
    const int T = cx->b->n_tokens, H = c->hidden_size, E = c->n_expert, K = c->n_expert_used;
    const int Ie = w->tp.moe_inter, A = T * K; /* this rank's expert width */
    const int Is = l->has_shared ? w->tp.shared_inter : 0; /* this rank's shared-expert width */
    linear(m->rlog, m->xn, T, &l->wrouter, ex); /* (T, E) */
    if (l->has_ssig) linear(m->ssig, m->xn, T, &l->wssig, ex); /* (T, 1) */
    tpool_barrier(cx->pool);
    const moe_route_cfg rc = {
        .E = E, .K = K, .score = (moe_score_fn)c->moe_score,
        .method = (moe_topk_method)c->moe_topk_method,
        .n_group = c->n_group, .topk_group = c->topk_group, .bias = l->router_bias,
        .renorm = c->norm_topk_prob, .scale = c->routed_scale > 0.0f ? c->routed_scale : 1.0f,
    };
    /* routing and grouping are O(T * E * K): one thread, one barrier less;
     * small batches (decode) gather on that thread too, another one less */
    const int small = A <= MOE_SERIAL_GATHER;
    if (ith == 0) {
        for (int t = 0; t < T; t++)
            moe_route(&rc, m->rlog + (size_t)t * E, m->esel + (size_t)t * K, m->ew + (size_t)t * K);
        moe_group(m->esel, A, E, m->ecnt, m->eoff, m->eorder, m->einv);
        model_ep_routed(m, il, T, K, m->esel, m->ew, m->eorder, m->eoff); /* recorder; EP: others' rows weigh 0 */
        if (cx->erow_ad) /* LoRA: each assignment's adapter, expert order */
            for (int p = 0; p < A; p++) cx->erow_ad[p] = cx->row_ad[m->eorder[p] / K];
        for (int e = 0; e < E; e++)
            if (m->ecnt[e] && model_ep_holds(w, il, e)) m->touched_bytes += w->expert_bytes;
        if (small)
            for (int p = 0; p < A; p++)
                memcpy(m->ex + (size_t)p * H, m->xn + (size_t)(m->eorder[p] / K) * H,
                       sizeof(float) * H);
    }
    tpool_barrier(cx->pool);
    int alo, ahi;
    kern_split(A, ith, nth, &alo, &ahi);
    if (!small) {
        for (int p = alo; p < ahi; p++)
            memcpy(m->ex + (size_t)p * H, m->xn + (size_t)(m->eorder[p] / K) * H,
                   sizeof(float) * H);
        tpool_barrier(cx->pool);
    }
    for (int e = 0; e < E; e++) {
        int p0, p1; /* expert parallelism: the rows this rank computes (all of them without) */
        if (!model_ep_rows(w->ep, il, e, m->eoff[e], m->ecnt[e], &p0, &p1)) continue;
        size_t o = (size_t)p0;
        linear(m->eg + o * Ie, m->ex + o * H, p1 - p0, &l->egate[e], ex);
        linear(m->eu + o * Ie, m->ex + o * H, p1 - p0, &l->eup[e], ex);
    }
    if (Is) { /* the shared expert runs beside the routed ones, same phases */
        linear(m->sg, m->xn, T, &l->wsgate, ex);
        linear(m->su, m->xn, T, &l->wsup, ex);
    }
    tpool_barrier(cx->pool);
    const int lora = moe_lora_any(cx, il);
    if (lora) { /* adapters on the experts' gate / up */
        moe_lora_pass(cx, il, ex, MODEL_EXPERT_GATE, MODEL_EXPERT_DOWN);
        tpool_barrier(cx->pool);
    }
    for (int p = alo; p < ahi; p++) {
        float *g = m->eg + (size_t)p * Ie;
        kern_silu_mul(g, g, m->eu + (size_t)p * Ie, Ie);
    }
    for (int t = lo; Is && t < hi; t++)
        kern_silu_mul(m->sg + (size_t)t * Is, m->sg + (size_t)t * Is, m->su + (size_t)t * Is, Is);
    tpool_barrier(cx->pool);
    if (Is) linear(m->sout, m->sg, T, &l->wsdown, ex);
    for (int e = 0; e < E; e++) {
        int p0, p1;
        if (!model_ep_rows(w->ep, il, e, m->eoff[e], m->ecnt[e], &p0, &p1)) continue;
        size_t o = (size_t)p0;
        linear(m->ex + o * H, m->eg + o * Ie, p1 - p0, &l->edown[e], ex);
    }
    tpool_barrier(cx->pool);
    if (lora) { /* adapters on the experts' down */
        moe_lora_pass(cx, il, ex, MODEL_EXPERT_DOWN, MODEL_EXPERT_DOWN + 1);
        tpool_barrier(cx->pool);
    }
    for (int t = lo; t < hi; t++) {
        float *y = m->xn + (size_t)t * H;
        for (int i = 0; i < H; i++) y[i] = 0.0f;
        for (int k = 0; k < K; k++) {
            float w = m->ew[(size_t)t * K + k];
            if (w == 0.0f) continue; /* another rank's expert (EP), or nothing to add */
            const float *src = m->ex + (size_t)m->einv[(size_t)t * K + k] * H;
            for (int i = 0; i < H; i++) y[i] += w * src[i];
        }
        if (Is) { /* + shared expert, Qwen2-MoE: * sigmoid(x Wsg) */
            const float *so = m->sout + (size_t)t * H;
            float g = l->has_ssig ? 1.0f / (1.0f + expf(-m->ssig[t])) : 1.0f;
            for (int i = 0; i < H; i++) y[i] += g * so[i];
        }
    }
    tpool_barrier(cx->pool);
}

/* longrope: sequence s uses the long factors when it is longer than
 * original_max_position_embeddings, as HF decides per forward from
 * max(position_ids) + 1.  The length is seq_rope_len (the whole prompt
 * when it runs in chunks, so every chunk of one prompt rotates alike),
 * else this step's kv length.  Keys cached before a sequence crosses the
 * threshold keep the short rotation (SGLang/vLLM do the same; HF generate
 * recomputes the whole cache at that step instead). */
static const float *longrope_table(const model_weights *w, const model_batch *b, int s)
{
    int len = b->seq_rope_len ? b->seq_rope_len[s] : b->seq_kv_len[s];
    return len > w->rope_switch ? w->inv_freq_long : w->inv_freq;
}

/* *ForSequenceClassification: scores (n_logits, n_labels) = normed rows
 * (m->lrows) x score^T, laid out at the hidden-state stride H the
 * embedding path reads (row i's labels first in its H floats). */
static void score_rows(fwd_ctx *cx, const linear_exec *ex)
{
    const model_weights *w = cx->m->w;
    const int H = w->cfg.hidden_size, L = w->cfg.n_labels, n = cx->b->n_logits;
    tpool_barrier(cx->pool);
    if (n > 0) linear(cx->logits, cx->m->lrows, n, &w->score, ex);
    tpool_barrier(cx->pool);
    if (ex->ith == 0) /* spread rows L -> H apart, last first (dest >= source) */
        for (int i = n - 1; i > 0; i--)
            memmove(cx->logits + (size_t)i * H, cx->logits + (size_t)i * L, sizeof(float) * L);
}

static void fwd_task(void *vctx, int ith, int nth)
{
    fwd_ctx *cx = vctx;
    model *m = cx->m;
    const model_batch *b = cx->b;
    model_kv *kv = cx->kv;
    const model_weights *w = m->w;
    const model_config *c = &w->cfg;
    const model_arch *ar = w->arch;
    /* heads and MLP width of this rank (tensor parallelism: its shard; else the config's) */
    const int T = b->n_tokens, H = c->hidden_size, I = w->tp.inter, hd = c->head_dim;
    const int nh = w->tp.n_head, nkv = w->tp.n_kv_head, qd = nh * hd, kvd = nkv * hd;
    const int half = w->rot_dim / 2;
    const float eps = c->rms_norm_eps, noff = ar->norm_offset, rm = c->resid_mult;
    const float attn_scale = c->attn_mult > 0.0f ? c->attn_mult : 1.0f / sqrtf((float)hd);
    char *scr = m->tscratch + (size_t)ith * m->tstride;
    float *inv_dyn = (float *)(scr + m->tstride - sizeof(float) * (size_t)(half + 16));
    /* this thread's context for every projection of the pass */
    const linear_exec ex = {.ith = ith, .nth = nth, .scratch = scr, .barrier = fwd_barrier,
                            .barrier_arg = cx->pool};
    linear_exec lx; /* LoRA: per-projection copy of ex (model_lora_exec) */
    linear_adapter lbuf[MODEL_MAX_BATCH_ADAPTERS];
    int lo, hi;
    rows_split(T, ith, nth, &lo, &hi);

    /* embeddings and this forward's rope tables */
    for (int t = lo; t < hi; t++) {
        if (w->tp.layer0 == 0) { /* pipeline stage > 0: x came from the previous stage */
            model_embed_row(w, b->tokens[t], m->x + (size_t)t * H);
            if (cx->row_ad && cx->row_ad[t] >= 0) /* LoRA on embed_tokens */
                model_lora_embed(w, b->adapters[cx->row_ad[t]], b->tokens[t], m->x + (size_t)t * H);
        }
        const float *inv = w->inv_freq;
        if (c->rope.kind == MODEL_ROPE_DYNAMIC) {
            int s = m->tok_seq[t];
            model_rope_inv_freq(c, b->seq_kv_len[s], inv_dyn);
            inv = inv_dyn;
        } else if (w->inv_freq_long) {
            inv = longrope_table(w, b, m->tok_seq[t]);
        }
        kern_rope_cache(m->cos_t + (size_t)t * half, m->sin_t + (size_t)t * half,
                        b->rope_pos ? b->rope_pos[t] : b->positions[t], inv, half, w->attn_factor);
        if (m->cos_l)
            kern_rope_cache(m->cos_l + (size_t)t * half, m->sin_l + (size_t)t * half,
                            b->rope_pos ? b->rope_pos[t] : b->positions[t], w->inv_freq_local, half, 1.0f);
    }

    for (int il = w->tp.layer0; il < w->tp.layer1; il++) { /* this stage's layers (all without PP) */
        const model_layer *l = &w->layers[il];
        if (l->kind) { /* hybrid block (NemotronH: Mamba2 / attention / MLP), nemotron_h.c */
            nemotron_h_layer(m, kv, b, l, il, &ex, cx->row_ad, cx->pool, lo, hi);
            continue;
        }
        for (int t = lo; t < hi; t++) {
            float *x = m->x + (size_t)t * H;
            if (il > w->tp.layer0) resid_add(x, m->xn + (size_t)t * H, H, rm);
            kern_rmsnorm(m->xn + (size_t)t * H, x, l->attn_norm, H, eps, noff);
        }
        if (m->capture.store) model_capture_rows(m, b, il, lo, hi); /* EAGLE: layer il's input */
        tpool_barrier(cx->pool);
        if (ar->mla) { /* DeepSeek: latent attention, o_proj output in xn (mla.c) */
            mla_attention(m, kv, b, l, il, &ex, cx->row_ad, cx->pool, lo, hi);
            goto attn_done;
        }
        const float *xin = m->xn;
        {
            static const model_proj qkv[3] = {MODEL_PROJ_Q, MODEL_PROJ_K, MODEL_PROJ_V};
            float *const y[3] = {m->q, m->k, m->v};
            const linear_weight *const lw[3] = {&l->wq, &l->wk, &l->wv};
            proj_group(cx, &ex, il, 3, qkv, y, xin, T, lw);
        }
        tpool_barrier(cx->pool);
        for (int t = lo; t < hi; t++) {
            float *q = m->q + (size_t)t * qd, *k = m->k + (size_t)t * kvd;
            if (l->q_norm) {
                for (int h = 0; h < nh; h++) kern_rmsnorm(q + h * hd, q + h * hd, l->q_norm, hd, eps, noff);
                for (int h = 0; h < nkv; h++) kern_rmsnorm(k + h * hd, k + h * hd, l->k_norm, hd, eps, noff);
            }
            const float *ct, *st;
            rope_tables(m, l, t, half, &ct, &st);
            kern_rope_apply(q, nh, hd, w->rot_dim, ct, st, ar->rope_neox);
            kern_rope_apply(k, nkv, hd, w->rot_dim, ct, st, ar->rope_neox);
            int s = m->tok_seq[t];
            int32_t slot = b->seq_slots[s][b->positions[t]];
            kern_kv_store_tok(kv->k[il], kv->k_tok ? kv->k_tok[il] : NULL, kv->dt, slot, nkv, hd, k, kv->k_scale[il]);
            kern_kv_store_tok(kv->v[il], kv->v_tok ? kv->v_tok[il] : NULL, kv->dt, slot, nkv, hd,
                              m->v + (size_t)t * kvd, kv->v_scale[il]);
        }
        tpool_barrier(cx->pool);
        for (int s = 0; s < b->n_seqs; s++) {
            int r0 = b->seq_start[s], nq = b->seq_start[s + 1] - r0;
            kern_attn_args a = {
                .n_q = nq,
                .n_kv = b->seq_kv_len[s],
                .n_head = nh,
                .n_kv_head = nkv,
                .head_dim = hd,
                .q = m->q + (size_t)r0 * qd,
                .q_stride = (size_t)qd,
                .k_cache = kv->k[il],
                .v_cache = kv->v[il],
                .kv_dt = kv->dt,
                .k_scale = kv->k_scale[il],
                .v_scale = kv->v_scale[il],
                .k_tok_scale = kv->k_tok ? kv->k_tok[il] : NULL,
                .v_tok_scale = kv->v_tok ? kv->v_tok[il] : NULL,
                .slots = b->seq_slots[s],
                .sliding_window = l->window,
                .scale = attn_scale,
                .softcap = c->attn_softcap,
                .out = m->att + (size_t)r0 * qd,
                .out_stride = (size_t)qd,
            };
            model_tree_args(b, s, &a);
            kern_attention(&a, ith, nth, scr);
        }
        tpool_barrier(cx->pool);
        linear(m->xn, m->att, T, &l->wo, LX(MODEL_PROJ_O)); /* (T, H) */
    attn_done:
        tpool_barrier(cx->pool);
        model_tp_allreduce(m, m->xn, (size_t)T * H, ith, cx->pool); /* row-parallel o */
        post_norm_rows(m->xn, l->post_attn_norm, lo, hi, H, eps, noff);
        for (int t = lo; t < hi; t++) {
            float *x = m->x + (size_t)t * H;
            resid_add(x, m->xn + (size_t)t * H, H, rm);
            kern_rmsnorm(m->xn + (size_t)t * H, x, l->ffn_norm, H, eps, noff);
        }
        tpool_barrier(cx->pool);
        if (l->moe) {
            moe_block(cx, l, il, &ex, lo, hi);
            model_tp_allreduce(m, m->xn, (size_t)T * H, ith, cx->pool); /* row-parallel experts */
            continue;
        }
        /* MLP slot (dense gated) */
        {
            static const model_proj gu[2] = {MODEL_PROJ_GATE, MODEL_PROJ_UP};
            float *const y[2] = {m->gate, m->up};
            const linear_weight *const lw[2] = {&l->wgate, &l->wup};
            proj_group(cx, &ex, il, 2, gu, y, m->xn, T, lw);
        }
        tpool_barrier(cx->pool);
        for (int t = lo; t < hi; t++) {
            float *g = m->gate + (size_t)t * I, *u = m->up + (size_t)t * I;
            if (ar->act == MODEL_ACT_GELU_TANH) kern_gelu_tanh_mul(g, g, u, I);
            else kern_silu_mul(g, g, u, I);
        }
        tpool_barrier(cx->pool);
        /* down projection into xn (added to x at the next layer's norm) */
        linear(m->xn, m->gate, T, &l->wdown, LX(MODEL_PROJ_DOWN));
        tpool_barrier(cx->pool);
        model_tp_allreduce(m, m->xn, (size_t)T * H, ith, cx->pool); /* row-parallel down */
        /* same rows as the residual add that reads them next: no barrier */
        post_norm_rows(m->xn, l->post_ffn_norm, lo, hi, H, eps, noff);
    }
    /* last residual add, final norm of the rows that need logits */
    for (int t = lo; t < hi; t++) resid_add(m->x + (size_t)t * H, m->xn + (size_t)t * H, H, rm);
    if (m->capture.store) model_capture_rows(m, b, c->n_layer, lo, hi); /* EAGLE: the last hidden state */
    tpool_barrier(cx->pool);
    if (w->tp.layer1 < c->n_layer) return; /* pipeline: a later stage goes on from x */
    int llo, lhi;
    rows_split(b->n_logits, ith, nth, &llo, &lhi);
    /* want_hidden (embedding models): the normed rows are the output;
     * classifiers: their score head over them */
    float *nrows = b->want_hidden && !c->n_labels ? cx->logits : m->lrows;
    for (int i = llo; i < lhi; i++)
        kern_rmsnorm(nrows + (size_t)i * H, m->x + (size_t)b->logit_rows[i] * H, w->final_norm,
                     H, eps, noff);
    if (b->want_hidden) {
        if (c->n_labels) score_rows(cx, &ex);
        return;
    }
    tpool_barrier(cx->pool);
    /* LM head: all rows, or this rank's vocabulary slice (gathered after the pass) */
    float *lg = cx->lm_out;
    if (b->n_logits > 0)
        linear(lg, m->lrows, b->n_logits, &w->lm_head,
               model_lora_exec(b, cx->lrow_ad, &ex, -1, 0, &lx, lbuf));
    if (c->logits_scaling != 1.0f) {
        tpool_barrier(cx->pool);
        size_t n = (size_t)b->n_logits * w->tp.vocab_n;
        size_t per = (n + nth - 1) / nth, a0 = per * ith, a1 = a0 + per > n ? n : a0 + per;
        float inv = 1.0f / c->logits_scaling;
        for (size_t i = a0; i < a1; i++) lg[i] *= inv;
    }
    if (c->final_softcap > 0.0f) {
        tpool_barrier(cx->pool);
        size_t n = (size_t)b->n_logits * w->tp.vocab_n;
        size_t per = (n + nth - 1) / nth, a0 = per * ith, a1 = a0 + per > n ? n : a0 + per;
        float cap = c->final_softcap;
        for (size_t i = a0; i < a1; i++) lg[i] = cap * tanhf(lg[i] / cap);
    }
}

/* Reject malformed batches before anything is written. */
static int check_batch(const model *m, const model_kv *kv, const model_batch *b, int *max_kv)
{
    const model_config *c = m->cfg;
    if (!b || b->n_tokens < 1 || b->n_seqs < 1 || !b->tokens || !b->positions || !b->seq_start ||
        !b->seq_kv_len || !b->seq_slots || b->n_logits < 0 || (b->n_logits && !b->logit_rows)) {
        log_error("malformed batch (empty or missing arrays)");
        return -1;
    }
    if (!kv || kv->n_layer != c->n_layer || kv->row_len != model_kv_row_len(c, m->w->tp.n_kv_head)) {
        log_error("KV cache does not belong to this model");
        return -1;
    }
    if (b->seq_start[0] != 0 || b->seq_start[b->n_seqs] != b->n_tokens) {
        log_error("seq_start must run from 0 to n_tokens (%d)", b->n_tokens);
        return -1;
    }
    *max_kv = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int r0 = b->seq_start[s], nq = b->seq_start[s + 1] - r0, kvl = b->seq_kv_len[s];
        if (nq < 1 || kvl < nq) {
            log_error("sequence %d: %d new tokens with kv length %d", s, nq, kvl);
            return -1;
        }
        if (kvl > c->context_length) {
            log_error("sequence %d: kv length %d exceeds the context length %d", s, kvl,
                      c->context_length);
            return -1;
        }
        if (!b->seq_slots[s]) {
            log_error("sequence %d: no slot list", s);
            return -1;
        }
        for (int p = 0; p < kvl; p++) {
            int32_t sl = b->seq_slots[s][p];
            if (sl < 0 || sl >= kv->n_slots) {
                log_error("sequence %d: position %d has slot %d outside [0, %d)", s, p, sl,
                          kv->n_slots);
                return -1;
            }
        }
        for (int i = 0; i < nq; i++) {
            int t = r0 + i;
            if (b->positions[t] != kvl - nq + i) {
                log_error("sequence %d: token row %d has position %d, expected %d", s, t,
                          b->positions[t], kvl - nq + i);
                return -1;
            }
            if (b->tokens[t] < 0 || b->tokens[t] >= c->vocab_size) {
                log_error("token id %d at row %d is outside the vocabulary [0, %d)", b->tokens[t],
                          t, c->vocab_size);
                return -1;
            }
        }
        if (kvl > *max_kv) *max_kv = kvl;
    }
    for (int i = 0; i < b->n_logits; i++) {
        if (b->logit_rows[i] < 0 || b->logit_rows[i] >= b->n_tokens) {
            log_error("logit row %d outside [0, %d)", b->logit_rows[i], b->n_tokens);
            return -1;
        }
    }
    if (b->n_logits > b->n_tokens) {
        log_error("more logit rows (%d) than tokens (%d)", b->n_logits, b->n_tokens);
        return -1;
    }
    return 0;
}

/* Run one already-checked batch of at most chunk_tokens rows.  comm 0: a
 * micro-batch of a pipelined forward (forward_pp_micro sends the command
 * and runs the stage boundaries): this rank's layers only. */
static int forward_checked_run(model *m, model_kv *kv, const model_batch *b, int max_kv, float *logits,
                               tpool *pool, int comm)
{
    int nth = pool ? tpool_size(pool) : 1;
    if (model_reserve(m, b->n_tokens, max_kv, nth)) return -1;
    for (int s = 0; s < b->n_seqs; s++)
        for (int t = b->seq_start[s]; t < b->seq_start[s + 1]; t++) m->tok_seq[t] = s;
    /* tensor parallelism: the LM head writes this rank's slice; rank 0 sends the batch */
    fwd_ctx cx = {m, kv, b, logits, model_tp_logits_out(m, b, logits), pool, NULL, NULL, NULL};
    if (!cx.lm_out && b->n_logits) return -1;
    int32_t *row_ad = NULL, *lrow_ad = NULL;
    const int k_moe = m->cfg->n_expert > 0 ? m->cfg->n_expert_used : 0;
    if (model_lora_rows(b, m->tok_seq, k_moe, &row_ad, &lrow_ad)) return -1;
    cx.row_ad = row_ad, cx.lrow_ad = lrow_ad;
    cx.erow_ad = row_ad && k_moe ? row_ad + b->n_tokens + b->n_logits : NULL;
    if (m->cfg->arch && m->cfg->arch->mla && mla_prepare(m, b, row_ad)) { /* expanded / absorbed */
        free(row_ad);
        return -1;
    }
    if (comm && (model_tp_send_forward(m, kv, b, 0) || model_pp_before(m, b))) {
        log_error("tensor parallelism: %s", model_tp_error(m));
        free(row_ad);
        return -1;
    }
    if (m->cfg->n_mamba && mamba2_begin(m, kv, b)) { /* recurrent states: check, reset */
        free(row_ad);
        return -1;
    }
    if (pool) {
        tpool_run(pool, fwd_task, &cx);
    } else {
        tpool *one = tpool_create(1);
        if (!one) {
            free(row_ad);
            return -1;
        }
        cx.pool = one;
        tpool_run(one, fwd_task, &cx);
        tpool_destroy(one);
    }
    free(row_ad);
    if (m->cfg->n_mamba) mamba2_end(kv, b);
    /* a stage's broken TP group stops it before it passes rows on (TP x PP) */
    if (model_tp_stage_failed(m) || model_tp_gather_logits(m, b, logits) ||
        (comm && model_pp_after(m, b, logits)) || model_tp_failed(m)) {
        model_tp_stage_failed(m); /* TP x PP: the stage group's error reaches every rank */
        log_error("tensor parallelism: %s", model_tp_error(m));
        return -1;
    }
    return comm ? model_ep_after_forward(m) : 0; /* recorder pass; EPLB every N forwards (same point on every rank) */
}

/* Pipeline micro-batches (--pp-max-micro-batch-size).  Rank 0 picks the
 * size M (0: one micro-batch) and sends it with the batch; a worker takes
 * the command's.  Only batches whose every part splits by sequence: no
 * Mamba states, checkpoints or draft trees, and logit rows in row order
 * (each micro-batch's output rows are then one run of the batch's). */
static int pp_micro_size(const model *m, const model_batch *b)
{
    const model_tp *t = &m->tp;
    if (t->pp_n <= 1) return 0;
    if (t->rank != 0) return m->pp_mb_rx;
    int M = t->pp_mb;
    if (M < 1 || b->n_seqs <= M || m->cfg->n_mamba || b->seq_snap || b->seq_tree) return 0;
    for (int i = 1; i < b->n_logits; i++)
        if (b->logit_rows[i] <= b->logit_rows[i - 1]) return 0;
    return M;
}

/* One forward as micro-batches of M sequences through the pipeline.  With
 * n micro-batches and P stages it runs n + P - 1 ticks; at tick k stage p
 * computes micro-batch k - p (its rows arrived in the previous round),
 * then every rank runs the tick's round of broadcasts over the group, in
 * the one order all ranks share: the last stage's output rows of
 * micro-batch k - (P-1) first, then each boundary s = P-2 .. 0 (stage s's
 * residual rows of micro-batch k - s, which stage s + 1 takes into m->x for
 * the next tick; the other ranks take them into scratch).  Last stage
 * first, so a middle stage sends its rows before the previous stage's
 * overwrite them.  Each row's arithmetic is the one-micro-batch run's
 * (rows, heads and sequences are independent in every op), so the
 * outputs are the same. */
static int forward_pp_micro(model *m, model_kv *kv, const model_batch *b, int max_kv, float *logits,
                            tpool *pool, int M)
{
    model_tp *t = &m->tp;
    const int P = t->pp_n, p = t->stage, n = (b->n_seqs + M - 1) / M;
    const int H = m->cfg->hidden_size, V = b->want_hidden ? H : m->cfg->vocab_size;
    int rc = -1;
    if (model_reserve(m, b->n_tokens, max_kv, pool ? tpool_size(pool) : 1)) return -1;
    int32_t *start = malloc(sizeof(int32_t) * (size_t)(b->n_seqs + n)); /* rebased seq_start per micro-batch */
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)(b->n_logits + 1)); /* rebased logit rows */
    int32_t *tok0 = malloc(sizeof(int32_t) * 4 * (size_t)n), *ntok = tok0 + n, *j0 = tok0 + 2 * n, *nl = tok0 + 3 * n;
    float *scr = NULL;
    if (!start || !rows || !tok0) goto oom;
    int max_tok = 0;
    for (int i = 0, j = 0; i < n; i++) {
        int s0 = i * M, s1 = s0 + M < b->n_seqs ? s0 + M : b->n_seqs;
        tok0[i] = b->seq_start[s0], ntok[i] = b->seq_start[s1] - tok0[i];
        if (ntok[i] > max_tok) max_tok = ntok[i];
        for (int s = s0; s <= s1; s++) start[s + i] = b->seq_start[s] - tok0[i];
        j0[i] = j;
        while (j < b->n_logits && b->logit_rows[j] < b->seq_start[s1]) {
            rows[j] = b->logit_rows[j] - tok0[i];
            j++;
        }
        nl[i] = j - j0[i];
    }
    scr = malloc(sizeof(float) * (size_t)max_tok * H + 1);
    if (!scr) goto oom;
    if (model_tp_send_forward(m, kv, b, M)) {
        log_error("tensor parallelism: %s", model_tp_error(m));
        goto out;
    }
    for (int k = 0; k < n + P - 1; k++) {
        int i = k - p;
        if (i >= 0 && i < n) {
            int s0 = i * M, s1 = s0 + M < b->n_seqs ? s0 + M : b->n_seqs, mkv = 0;
            for (int s = s0; s < s1; s++)
                if (b->seq_kv_len[s] > mkv) mkv = b->seq_kv_len[s];
            model_batch sub = {.n_tokens = ntok[i], .tokens = b->tokens + tok0[i],
                               .positions = b->positions + tok0[i], .n_seqs = s1 - s0, .seq_start = start + s0 + i,
                               .seq_kv_len = b->seq_kv_len + s0, .seq_slots = b->seq_slots + s0,
                               .n_logits = nl[i], .logit_rows = rows + j0[i],
                               .rope_pos = b->rope_pos ? b->rope_pos + tok0[i] : NULL,
                               .seq_rope_len = b->seq_rope_len ? b->seq_rope_len + s0 : NULL,
                               .want_hidden = b->want_hidden, .n_adapters = b->n_adapters,
                               .adapters = b->adapters, .seq_adapter = b->seq_adapter ? b->seq_adapter + s0 : NULL,
                               .seq_state = b->seq_state ? b->seq_state + s0 : NULL};
            if (forward_checked_run(m, kv, &sub, mkv, logits ? logits + (size_t)j0[i] * V : NULL, pool, 0)) goto out;
        }
        int q = k - (P - 1); /* the round: output rows, then boundaries P-2 .. 0 */
        if (q >= 0 && q < n && nl[q] &&
            model_pp_bcast(m, logits + (size_t)j0[q] * V, sizeof(float) * (size_t)nl[q] * V, P - 1))
            goto fail;
        for (int s = P - 2; s >= 0; s--) {
            q = k - s;
            if (q < 0 || q >= n) continue;
            float *buf = p == s + 1 || (p == s && t->tp_rank == 0) ? m->x : scr;
            if (model_pp_bcast(m, buf, sizeof(float) * (size_t)ntok[q] * H, s)) goto fail;
        }
    }
    m->pp_fwd_micro++, m->pp_n_micro += n;
    rc = model_ep_after_forward(m);
    goto out;
fail:
    model_tp_stage_failed(m);
    log_error("tensor parallelism: %s", model_tp_error(m));
    goto out;
oom:
    log_error("out of memory splitting a batch of %d sequences into micro-batches", b->n_seqs);
out:
    free(start), free(rows), free(tok0), free(scr);
    return rc;
}

/* As forward_checked_run, holding the tensor-parallel group (rank 0: a
 * LoRA load from another thread waits for the step). */
static int forward_checked(model *m, model_kv *kv, const model_batch *b, int max_kv, float *logits,
                           tpool *pool)
{
    model_tp_lock(m);
    int M = pp_micro_size(m, b);
    int rc = M ? forward_pp_micro(m, kv, b, max_kv, logits, pool, M)
               : forward_checked_run(m, kv, b, max_kv, logits, pool, 1);
    model_tp_unlock(m);
    return rc;
}

/* Batches larger than chunk_tokens rows run as consecutive row ranges
 * [c0, c1) (chunked prefill): a sequence cut by a boundary sees, in the
 * later chunk, the KV its earlier rows wrote in the earlier chunk, so the
 * result equals one big forward while scratch stays bounded. */
static int forward_chunked(model *m, model_kv *kv, const model_batch *b, float *logits,
                           tpool *pool)
{
    /* output row width: logits or hidden states */
    const int V = b->want_hidden ? m->cfg->hidden_size : m->cfg->vocab_size, C = m->chunk_tokens;
    int rc = -1;
    int32_t *start = malloc(sizeof(int32_t) * (size_t)(b->n_seqs + 1));
    int32_t *kvl = malloc(sizeof(int32_t) * (size_t)b->n_seqs);
    const int32_t **sl = malloc(sizeof(int32_t *) * (size_t)b->n_seqs);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)(b->n_logits + 1));
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(b->n_logits + 1));
    int32_t *sad = malloc(sizeof(int32_t) * (size_t)b->n_seqs); /* LoRA: adapter per sequence */
    int32_t *rl = malloc(sizeof(int32_t) * (size_t)b->n_seqs); /* rope length per sub-seq */
    int32_t *sst = malloc(sizeof(int32_t) * (size_t)b->n_seqs); /* Mamba state slot per sub-seq */
    const model_tree **stree = malloc(sizeof *stree * (size_t)b->n_seqs); /* draft tree per sub-seq */
    /* Mamba checkpoints per sub-seq: the ones inside its positions */
    const int n_snap = b->seq_snap ? b->seq_snap[b->n_seqs] : 0;
    int32_t *ssn = malloc(sizeof(int32_t) * (size_t)(b->n_seqs + 1));
    int32_t *spos = malloc(sizeof(int32_t) * (size_t)(n_snap + 1)), *sstt = malloc(sizeof(int32_t) * (size_t)(n_snap + 1));
    float *tmp = NULL;
    if (!start || !kvl || !sl || !rows || !idx || !sad || !rl || !sst || !stree || !ssn || !spos || !sstt) goto out;
    for (int c0 = 0; c0 < b->n_tokens; c0 += C) {
        int c1 = c0 + C < b->n_tokens ? c0 + C : b->n_tokens;
        int ns = 0, max_kv = 0, nsp = 0;
        for (int s = 0; s < b->n_seqs; s++) {
            int r0 = b->seq_start[s], r1 = b->seq_start[s + 1];
            if (r1 <= c0 || r0 >= c1) continue;
            int a = r0 > c0 ? r0 : c0, e = r1 < c1 ? r1 : c1;
            start[ns] = a - c0;
            kvl[ns] = b->seq_kv_len[s] - (r1 - e);
            sl[ns] = b->seq_slots[s];
            sad[ns] = b->seq_adapter ? b->seq_adapter[s] : -1;
            rl[ns] = b->seq_rope_len ? b->seq_rope_len[s] : b->seq_kv_len[s];
            sst[ns] = b->seq_state ? b->seq_state[s] : s;
            stree[ns] = b->seq_tree ? b->seq_tree[s] : NULL;
            ssn[ns] = nsp;
            for (int k = b->seq_snap ? b->seq_snap[s] : 0; b->seq_snap && k < b->seq_snap[s + 1]; k++)
                if (b->snap_pos[k] > kvl[ns] - (e - a) && b->snap_pos[k] <= kvl[ns]) {
                    spos[nsp] = b->snap_pos[k];
                    sstt[nsp++] = b->snap_state[k];
                }
            if (kvl[ns] > max_kv) max_kv = kvl[ns];
            ns++;
        }
        start[ns] = c1 - c0;
        ssn[ns] = nsp;
        int nl = 0, consecutive = 1;
        for (int i = 0; i < b->n_logits; i++) {
            if (b->logit_rows[i] < c0 || b->logit_rows[i] >= c1) continue;
            if (nl && idx[nl - 1] != i - 1) consecutive = 0;
            rows[nl] = b->logit_rows[i] - c0;
            idx[nl++] = i;
        }
        float *dst = nl ? logits + (size_t)idx[0] * V : NULL;
        if (nl && !consecutive) {
            free(tmp);
            tmp = malloc(sizeof(float) * (size_t)nl * V);
            if (!tmp) goto out;
            dst = tmp;
        }
        model_batch sub = {.n_tokens = c1 - c0, .tokens = b->tokens + c0,
                           .positions = b->positions + c0, .n_seqs = ns, .seq_start = start,
                           .seq_kv_len = kvl, .seq_slots = sl, .n_logits = nl, .logit_rows = rows,
                           .seq_rope_len = rl, .rope_pos = b->rope_pos ? b->rope_pos + c0 : NULL,
                           .want_hidden = b->want_hidden, .n_adapters = b->n_adapters,
                           .adapters = b->adapters, .seq_adapter = b->seq_adapter ? sad : NULL,
                           .seq_state = sst, .seq_tree = b->seq_tree ? stree : NULL,
                           .seq_snap = nsp ? ssn : NULL, .snap_pos = spos, .snap_state = sstt};
        if (forward_checked(m, kv, &sub, max_kv, dst, pool)) goto out;
        if (nl && !consecutive)
            for (int j = 0; j < nl; j++)
                memcpy(logits + (size_t)idx[j] * V, tmp + (size_t)j * V, sizeof(float) * V);
    }
    rc = 0;
out:
    free(start), free(kvl), free(sl), free(rows), free(idx), free(sad), free(tmp), free(rl), free(sst);
    free(stree), free(ssn), free(spos), free(sstt);
    if (rc) log_error("out of memory splitting a batch of %d tokens", b->n_tokens);
    return rc;
}

int model_forward(model *m, model_kv *kv, const model_batch *b, float *logits, tpool *pool)
{
    int max_kv;
    if (check_batch(m, kv, b, &max_kv) || model_lora_check(m, b)) return -1;
    if (b->n_logits && !logits) {
        log_error("logits buffer is NULL");
        return -1;
    }
    if (m->cfg->n_labels && b->n_logits && !b->want_hidden) {
        log_error("%s is a sequence-classification model: it has scores, not logits "
                  "(serve it with --is-embedding)", m->cfg->architecture);
        return -1;
    }
    if (m->chunk_tokens <= 0) m->chunk_tokens = MODEL_DEFAULT_CHUNK;
    m->touched_bytes = 0;
    model_mi_buf mb;
    model_batch split;
    int rc, sp = m->mi_on ? model_mi_split(b, m->mi_delim, &split, &mb) : 0;
    if (sp < 0) {
        log_error("out of memory splitting a multi-item scoring batch");
        return -1;
    }
    if (sp && m->cfg->n_mamba) { /* the sub-sequences would need states of their own */
        model_mi_buf_free(&mb);
        log_error("multi-item scoring is not supported for %s (Mamba2 layers)", m->cfg->architecture);
        return -1;
    }
    if (sp) b = &split; /* same rows, query + item sub-sequences (multi_item.c) */
    model_tree_buf tb;
    model_batch tree_b;
    int tr = b->seq_tree_parent ? model_tree_prepare(m, b, &tree_b, &tb) : 0;
    if (tr < 0 || (tr && sp)) {
        if (tr > 0) {
            log_error("tree verification cannot run with multi-item scoring in one batch");
            model_tree_buf_free(&tb);
        }
        if (sp) model_mi_buf_free(&mb);
        return -1;
    }
    if (tr) b = &tree_b; /* masks, depths and rope positions of the draft trees */
    if (b->n_tokens > m->chunk_tokens) rc = forward_chunked(m, kv, b, logits, pool);
    else rc = forward_checked(m, kv, b, max_kv, logits, pool);
    if (sp) model_mi_buf_free(&mb);
    if (tr) model_tree_buf_free(&tb);
    return rc;
}
