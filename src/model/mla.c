/* mla — DeepSeek's multi-head latent attention with a compressed KV cache.
 *
 * DESIGN: the cache holds, per token and layer, ONE row of kvr + rope
 * values: the kv_a_layernorm'ed latent c_kv (kv_lora_rank) and the
 * rotated shared rope key k_pe (qk_rope_head_dim) -- 576 values for
 * V2-Lite / V3 where full attention would keep nh * (192 + 128).  The
 * attention never re-expands K or V: kv_b_proj is absorbed (the
 * "absorbed" formulation of the DeepSeek-V2 paper, as SGLang's MLA):
 *   score(h, j) = q_nope[h] . (Wk[h] c_j) + q_pe[h] . k_pe_j
 *               = [Wk[h]^T q_nope[h] | q_pe[h]] . [c_j | k_pe_j]
 *   out[h]      = Wv[h] (sum_j p_j c_j)
 * so each head's query becomes a (kvr + rope) vector and the whole layer
 * is MQA (one KV head) over the cache rows, run by the shared attention
 * kernel with K = V = the cache row; the kernel's output per head is
 * [sum_j p_j c_j | sum_j p_j k_pe_j], and only the first kvr values are
 * used (Wv[h] applied after).  Wk[h]^T and Wv[h] are per-head matrices
 * split out of kv_b_proj at load (mla_split_kv_b), so each is one small
 * linear() per head, every thread taking its share of columns.
 *
 * Rope: DeepSeek rotates q_pe / k_pe as (x[2i], x[2i+1]) pairs (HF's
 * modeling_deepseek de-interleaves then rotates halves; the dot products
 * are the same), i.e. kern_rope_apply with neox = 0, on the tables the
 * decoder built (yarn inv_freq and attention factor from rope.c with
 * rot_dim = qk_rope_head_dim).  Softmax scale: config's mla_scale.
 *
 * Steps of one layer (| = barrier), T rows:
 *   [q_a = xn Wqa |  q_a = norm(q_a) |] q = q_a Wqb or xn Wq; kv = xn Wkva   | 
 *   per row: norm(c_kv), rope(k_pe), store [c|k_pe] at the slot; rope(q_pe);
 *            q_pe -> qabs; (T > 1: gather q_nope head-major)                 |
 *   per head: qabs[h][:kvr] = Wk[h]^T q_nope[h]                              |
 *   (T > 1: scatter into qabs                                                |)
 *   attention over the cache (MQA, head dim kvr + rope) -> aout              |
 *   (T > 1: gather aout[:, h, :kvr] head-major                               |)
 *   per head: att[h] = Wv[h] aout[h][:kvr]                                   |
 *   (T > 1: scatter into att                                                 |)
 *   xn = att Wo
 * With T = 1 (decode of one sequence) rows need no gather: the per-head
 * products read and write the token-major buffers in place.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/log.h"

/* Sub-buffers of m->mla for up to T rows (floats, in this order). */
typedef struct mla_bufs {
    float *qa, *kva, *qabs, *aout, *hx, *hy;
} mla_bufs;

static size_t al16(size_t n) { return (n + 15) & ~(size_t)15; }

static void mla_sizes(const model_config *c, size_t T, size_t sz[6])
{
    size_t nh = (size_t)c->n_head, dl = (size_t)(c->kv_lora_rank + c->qk_rope_dim);
    size_t md = (size_t)c->kv_lora_rank;
    if ((size_t)c->qk_nope_dim > md) md = (size_t)c->qk_nope_dim;
    if ((size_t)c->v_head_dim > md) md = (size_t)c->v_head_dim;
    sz[0] = al16(T * (size_t)c->q_lora_rank);
    sz[1] = al16(T * dl);
    sz[2] = al16(T * nh * dl);
    sz[3] = al16(T * nh * dl);
    sz[4] = al16(T * nh * md);
    sz[5] = al16(T * nh * md);
}

size_t mla_scratch_floats(const model_config *c, size_t T)
{
    if (!c->arch || !c->arch->mla) return 0;
    size_t sz[6], n = 0;
    mla_sizes(c, T, sz);
    for (int i = 0; i < 6; i++) n += sz[i];
    return n;
}

static mla_bufs mla_carve(const model *m)
{
    size_t sz[6];
    mla_sizes(m->cfg, (size_t)m->cap_tokens, sz);
    float *p = m->mla;
    mla_bufs b;
    float **slot[6] = {&b.qa, &b.kva, &b.qabs, &b.aout, &b.hx, &b.hy};
    for (int i = 0; i < 6; i++) {
        *slot[i] = p;
        p += sz[i];
    }
    return b;
}

int mla_split_kv_b(model_layer *l, const model_config *c, const float *kvb, dtype wdt,
                   size_t *bytes)
{
    const int nh = c->n_head, kvr = c->kv_lora_rank, nope = c->qk_nope_dim, vd = c->v_head_dim;
    l->wkb_t = calloc((size_t)nh, sizeof(linear_weight));
    l->wvb = calloc((size_t)nh, sizeof(linear_weight));
    float *tr = malloc(sizeof(float) * (size_t)kvr * nope);
    int rc = -1;
    if (!l->wkb_t || !l->wvb || !tr) goto out;
    for (int h = 0; h < nh; h++) {
        const float *kn = kvb + (size_t)h * (nope + vd) * kvr; /* (nope, kvr) rows */
        for (int r = 0; r < kvr; r++)
            for (int d = 0; d < nope; d++) tr[(size_t)r * nope + d] = kn[(size_t)d * kvr + r];
        if (linear_init(&l->wkb_t[h], tr, DTYPE_F32, kvr, nope, wdt, 0)) goto out;
        if (linear_init(&l->wvb[h], kn + (size_t)nope * kvr, DTYPE_F32, vd, kvr, wdt, 0)) goto out;
        *bytes += linear_bytes(&l->wkb_t[h]) + linear_bytes(&l->wvb[h]);
    }
    rc = 0;
out:
    free(tr);
    return rc;
}

/* Copy a (rows, width) block between a token-major buffer (row stride
 * tstride, head h at h * hoff) and a head-major one ((nh, T, width)
 * contiguous): to_head = 1 gathers, 0 scatters.  Rows [lo, hi). */
static void head_copy(float *tok, size_t tstride, size_t hoff, float *hm, int T, int nh, int width,
                      int lo, int hi, int to_head)
{
    for (int t = lo; t < hi; t++)
        for (int h = 0; h < nh; h++) {
            float *a = tok + (size_t)t * tstride + (size_t)h * hoff;
            float *b = hm + ((size_t)h * T + t) * width;
            if (to_head) memcpy(b, a, sizeof(float) * (size_t)width);
            else memcpy(a, b, sizeof(float) * (size_t)width);
        }
}

/* LoRA: whether any adapter of b changes kv_b_proj of layer il. */
static int kvb_lora_any(const model_batch *b, const int32_t *row_ad, int il, int nh)
{
    if (!row_ad) return 0;
    for (int i = 0; i < b->n_adapters; i++)
        if (b->adapters[i]->kvb && b->adapters[i]->kvb[(size_t)il * nh * 2].rank > 0) return 1;
    return 0;
}

void mla_attention(model *m, model_kv *kv, const model_batch *b, const model_layer *l, int il,
                   const linear_exec *ex, const int32_t *row_ad, struct tpool *pool, int lo, int hi)
{
    const model_weights *w = m->w;
    const model_config *c = &w->cfg;
    const int T = b->n_tokens, nh = c->n_head, qr = c->q_lora_rank, kvr = c->kv_lora_rank;
    const int nope = c->qk_nope_dim, rope = c->qk_rope_dim, vd = c->v_head_dim;
    const int qhd = nope + rope, dl = kvr + rope, half = w->rot_dim / 2;
    const float eps = c->rms_norm_eps;
    const size_t qst = (size_t)nh * qhd, ast = (size_t)nh * dl;
    mla_bufs B = mla_carve(m);
    float *q = m->q, *att = m->att;
    /* LoRA: the execs of this layer's projections with the batch's adapters */
    linear_exec lx[2];
    linear_adapter lb[2][MODEL_MAX_BATCH_ADAPTERS];
#define MX(kind, p, i) model_lora_exec_at(b, row_ad, ex, (kind), il, (p), nh, &lx[i], lb[i])

    {
        const linear_exec *e[2] = {qr ? MX(MODEL_LORA_MLA, MODEL_MLA_Q_A, 0)
                                      : MX(MODEL_LORA_PROJ, MODEL_PROJ_Q, 0),
                                   MX(MODEL_LORA_MLA, MODEL_MLA_KV_A, 1)};
        float *const y[2] = {qr ? B.qa : q, B.kva};
        const linear_weight *const lw[2] = {qr ? &l->wq_a : &l->wq, &l->wkv_a};
        model_lora_linear_group(2, y, m->xn, T, lw, e);
    }
    if (qr) {
        tpool_barrier(pool);
        for (int t = lo; t < hi; t++)
            kern_rmsnorm(B.qa + (size_t)t * qr, B.qa + (size_t)t * qr, l->q_a_norm, qr, eps, 0.0f);
        tpool_barrier(pool);
        linear(q, B.qa, T, &l->wq_b, MX(MODEL_LORA_MLA, MODEL_MLA_Q_B, 0));
    }
    tpool_barrier(pool);
    const int kvb = kvb_lora_any(b, row_ad, il, nh);
    for (int t = lo; t < hi; t++) {
        const float *ct = m->cos_t + (size_t)t * half, *st = m->sin_t + (size_t)t * half;
        float *kr = B.kva + (size_t)t * dl;
        kern_rmsnorm(kr, kr, l->kv_a_norm, kvr, eps, 0.0f);
        kern_rope_apply(kr + kvr, 1, rope, rope, ct, st, 0);
        int32_t slot = b->seq_slots[m->tok_seq[t]][b->positions[t]];
        kern_kv_store_tok(kv->k[il], kv->k_tok ? kv->k_tok[il] : NULL, kv->dt, slot, 1, dl, kr, kv->k_scale[il]);
        float *qt = q + (size_t)t * qst, *qa = B.qabs + (size_t)t * ast;
        for (int h = 0; h < nh; h++) {
            float *qpe = qt + (size_t)h * qhd + nope;
            kern_rope_apply(qpe, 1, rope, rope, ct, st, 0);
            memcpy(qa + (size_t)h * dl + kvr, qpe, sizeof(float) * (size_t)rope);
        }
    }
    if (T > 1) head_copy(q, qst, (size_t)qhd, B.hx, T, nh, nope, lo, hi, 1);
    tpool_barrier(pool);
    /* absorbed query: qabs[t][h][:kvr] = Wk[h]^T q_nope[t][h] */
    for (int h = 0; h < nh; h++) {
        if (T == 1) linear(B.qabs + (size_t)h * dl, q + (size_t)h * qhd, 1, &l->wkb_t[h], ex);
        else linear(B.hy + (size_t)h * T * kvr, B.hx + (size_t)h * T * nope, T, &l->wkb_t[h], ex);
    }
    if (kvb) { /* kv_b_proj adapters: + scale Aᵀ (Bk[h]ᵀ q_nope[h]) */
        tpool_barrier(pool);
        for (int h = 0; h < nh; h++) {
            const linear_exec *e = MX(MODEL_LORA_KVB, h * 2, 0);
            if (T == 1) model_lora_apply(B.qabs + (size_t)h * dl, q + (size_t)h * qhd, 1, kvr, nope, e);
            else model_lora_apply(B.hy + (size_t)h * T * kvr, B.hx + (size_t)h * T * nope, T, kvr, nope, e);
        }
    }
    tpool_barrier(pool);
    if (T > 1) {
        head_copy(B.qabs, ast, (size_t)dl, B.hy, T, nh, kvr, lo, hi, 0);
        tpool_barrier(pool);
    }
    char *scr = ex->scratch;
    for (int s = 0; s < b->n_seqs; s++) {
        int r0 = b->seq_start[s], nq = b->seq_start[s + 1] - r0;
        kern_attn_args a = {
            .n_q = nq,
            .n_kv = b->seq_kv_len[s],
            .n_head = nh,
            .n_kv_head = 1,
            .head_dim = dl,
            .q = B.qabs + (size_t)r0 * ast,
            .q_stride = ast,
            .k_cache = kv->k[il],
            .v_cache = kv->k[il],
            .kv_dt = kv->dt,
            .k_scale = kv->k_scale[il],
            .v_scale = kv->k_scale[il],
            .k_tok_scale = kv->k_tok ? kv->k_tok[il] : NULL,
            .v_tok_scale = kv->k_tok ? kv->k_tok[il] : NULL, /* the latent row is K and V */
            .slots = b->seq_slots[s],
            .scale = c->mla_scale,
            .out = B.aout + (size_t)r0 * ast,
            .out_stride = ast,
        };
        kern_attention(&a, ex->ith, ex->nth, scr);
    }
    tpool_barrier(pool);
    if (T > 1) {
        head_copy(B.aout, ast, (size_t)dl, B.hx, T, nh, kvr, lo, hi, 1);
        tpool_barrier(pool);
    }
    /* values: att[t][h] = Wv[h] (latent attention output of head h) */
    for (int h = 0; h < nh; h++) {
        if (T == 1) linear(att + (size_t)h * vd, B.aout + (size_t)h * dl, 1, &l->wvb[h], ex);
        else linear(B.hy + (size_t)h * T * vd, B.hx + (size_t)h * T * kvr, T, &l->wvb[h], ex);
    }
    if (kvb) { /* + scale Bv[h] (A latent[h]) */
        tpool_barrier(pool);
        for (int h = 0; h < nh; h++) {
            const linear_exec *e = MX(MODEL_LORA_KVB, h * 2 + 1, 0);
            if (T == 1) model_lora_apply(att + (size_t)h * vd, B.aout + (size_t)h * dl, 1, vd, kvr, e);
            else model_lora_apply(B.hy + (size_t)h * T * vd, B.hx + (size_t)h * T * kvr, T, vd, kvr, e);
        }
    }
    tpool_barrier(pool);
    if (T > 1) {
        head_copy(att, (size_t)nh * vd, (size_t)vd, B.hy, T, nh, vd, lo, hi, 0);
        tpool_barrier(pool);
    }
    linear(m->xn, att, T, &l->wo, MX(MODEL_LORA_PROJ, MODEL_PROJ_O, 0));
#undef MX
}
