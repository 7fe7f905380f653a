/* nemotron_h — NemotronHForCausalLM (NVIDIA Nemotron-H): a hybrid of
 * Mamba2 mixers, attention and MLP blocks over the shared decoder pass.
 *
 * DESIGN
 * config.json's hybrid_override_pattern (or the newer layers_block_type
 * list) names each layer's block; every block is
 *
 *     x = x + mixer(RMSNorm(x))          (backbone.layers.i.norm)
 *
 * with mixer one of
 *   'M'  Mamba2 (mamba2.c): in_proj -> z | xBC | dt, causal conv1d + silu,
 *        the selective scan over a per-request state, gated group RMSNorm,
 *        out_proj;
 *   '*'  attention: q/k/v/o projections, GQA over the KV pool, no
 *        positional encoding (transformers' NemotronHAttention is Jamba's:
 *        no rotary embedding);
 *   '-'  MLP: down(relu(up(x))^2), not gated (mlp_hidden_act relu2).
 * The embedding is backbone.embeddings, the final norm backbone.norm_f,
 * the LM head lm_head.  decoder.c's layer loop hands a layer whose `kind`
 * is set to nemotron_h_layer; its residual add of the previous block and
 * the final norm stay the decoder's.  MoE blocks ('E', Nemotron 3) are
 * refused.
 * Tensor parallelism (model_tp; vLLM's MambaMixer2 split): a rank keeps
 * its Mamba heads (mamba_num_heads / N) and their groups (n_groups / N, or
 * the one group its heads belong to when n_groups < N: B / C replicated):
 * in_proj keeps its rows of each segment z | x | B | C | dt, conv1d its
 * channels of x | B | C, A_log / D / dt_bias / the gated norm their heads;
 * out_proj is row-parallel and summed over the ranks (mamba2.c).
 * Attention and MLP blocks are sharded as llama's (heads, columns), their
 * o / down followed by the all-reduce.  Pipeline stages load their layers
 * only; a stage's state pool holds its own Mamba layers (mamba2.c).
 * LoRA: the attention blocks' q/k/v/o_proj and the MLP blocks' up/down_proj
 * take the batch's per-row adapters (model_lora_exec, as decoder.c; the
 * embedding and LM head adapters are the decoder's); adapters on a Mamba2
 * mixer are refused when they load (lora_adapter.c, model_proj_shape).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/arch.h"
#include "model/model_impl.h"
#include "model/model_load.h"
#include "util/errmsg.h"
#include "util/log.h"

/* ---- config ---------------------------------------------------------------- */

/* An integer key (or its legacy name alt), def when both are absent. */
static int jint(const json_t *root, const char *key, const char *alt, int def, int lo, int hi,
                int *bad, char *err, size_t errlen)
{
    const json_t *v = json_object_get(root, key);
    if ((!v || json_is_null(v)) && alt) v = json_object_get(root, alt);
    if (!v || json_is_null(v)) return def;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        if (!*bad) errmsg_set(err, errlen, "config.json: '%s' must be an integer in [%d, %d]", key, lo, hi);
        *bad = 1;
        return def;
    }
    return (int)json_integer_value(v);
}

static int jbool(const json_t *root, const char *key, const char *alt, int def)
{
    const json_t *v = json_object_get(root, key);
    if ((!v || json_is_null(v)) && alt) v = json_object_get(root, alt);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

/* layers_block_type names -> pattern characters */
static char kind_of_name(const char *s)
{
    if (!strcmp(s, "mamba") || !strcmp(s, "linear_attention")) return 'M';
    if (!strcmp(s, "attention") || !strcmp(s, "full_attention")) return '*';
    if (!strcmp(s, "mlp")) return '-';
    if (!strcmp(s, "moe")) return 'E';
    return 0;
}

static int nh_parse(model_config *c, const json_t *root, char *err, size_t errlen)
{
    const json_t *pat = json_object_get(root, "hybrid_override_pattern");
    const json_t *list = json_object_get(root, "layers_block_type");
    int n = 0;
    if (json_is_string(pat)) {
        const char *p = json_string_value(pat);
        for (; p[n] && n < (int)sizeof c->layer_kinds - 1; n++) c->layer_kinds[n] = p[n];
    } else if (json_is_array(list)) {
        for (size_t i = 0; i < json_array_size(list) && n < (int)sizeof c->layer_kinds - 1; i++) {
            const json_t *e = json_array_get(list, i);
            c->layer_kinds[n++] = json_is_string(e) ? kind_of_name(json_string_value(e)) : 0;
        }
    } else {
        errmsg_set(err, errlen, "config.json: %s needs hybrid_override_pattern (or layers_block_type)",
                   c->architecture);
        return -1;
    }
    c->layer_kinds[n] = 0;
    if (n != c->n_layer) {
        errmsg_set(err, errlen, "config.json: the layer pattern has %d layers, num_hidden_layers is %d", n,
                   c->n_layer);
        return -1;
    }
    c->n_mamba = c->n_attn = 0;
    for (int i = 0; i < n; i++) {
        char k = c->layer_kinds[i];
        if (k == 'E') {
            errmsg_set(err, errlen, "config.json: layer %d is a MoE block ('E'): NemotronH MoE layers "
                       "are not supported yet", i);
            return -1;
        }
        if (k != 'M' && k != '*' && k != '-') {
            errmsg_set(err, errlen, "config.json: layer %d has an unknown block type (pattern "
                       "characters: M Mamba2, * attention, - MLP)", i);
            return -1;
        }
        c->n_mamba += k == 'M';
        c->n_attn += k == '*';
    }
    if (!json_object_get(root, "mlp_hidden_act")) snprintf(c->hidden_act, sizeof c->hidden_act, "relu2");
    if (strcmp(c->hidden_act, "relu2")) {
        errmsg_set(err, errlen, "config.json: mlp_hidden_act '%s' is not supported (expected relu2)",
                   c->hidden_act);
        return -1;
    }
    const json_t *mact = json_object_get(root, "mamba_hidden_act");
    if (json_is_string(mact) && strcmp(json_string_value(mact), "silu")) {
        errmsg_set(err, errlen, "config.json: mamba_hidden_act '%s' is not supported (expected silu)",
                   json_string_value(mact));
        return -1;
    }
    const json_t *eps = json_object_get(root, "layer_norm_epsilon");
    c->rms_norm_eps = json_is_number(eps) ? (float)json_number_value(eps) : 1e-5f;
    if (!(c->rms_norm_eps > 0.0f && c->rms_norm_eps < 1.0f)) {
        errmsg_set(err, errlen, "config.json: layer_norm_epsilon must be in (0, 1)");
        return -1;
    }
    int bad = 0;
    if (!json_object_get(root, "head_dim"))
        c->head_dim = jint(root, "attention_head_dim", NULL, c->head_dim, 2, 1024, &bad, err, errlen);
    c->ssm_state = jint(root, "ssm_state_size", NULL, 128, 1, 1024, &bad, err, errlen);
    c->ssm_heads = jint(root, "mamba_num_heads", NULL, 128, 1, 4096, &bad, err, errlen);
    c->ssm_head_dim = jint(root, "mamba_head_dim", NULL, 64, 1, 1024, &bad, err, errlen);
    c->ssm_groups = jint(root, "n_groups", "mamba_n_groups", 8, 1, 4096, &bad, err, errlen);
    c->ssm_conv = jint(root, "conv_kernel", "mamba_d_conv", 4, 1, 64, &bad, err, errlen);
    c->ssm_chunk = jint(root, "chunk_size", "mamba_chunk_size", 128, 1, 1 << 20, &bad, err, errlen);
    c->ssm_conv_bias = jbool(root, "use_conv_bias", "mamba_conv_bias", 1);
    c->ssm_proj_bias = jbool(root, "use_bias", NULL, 0);
    if (bad) return -1;
    if (c->ssm_heads % c->ssm_groups) {
        errmsg_set(err, errlen, "config.json: mamba_num_heads (%d) is not a multiple of n_groups (%d)",
                   c->ssm_heads, c->ssm_groups);
        return -1;
    }
    if ((long long)c->ssm_heads * c->ssm_head_dim > (1 << 20)) {
        errmsg_set(err, errlen, "config.json: mamba_num_heads x mamba_head_dim is too large");
        return -1;
    }
    c->ssm_dt_lo = 0.0f, c->ssm_dt_hi = INFINITY;
    const json_t *lim = json_object_get(root, "time_step_limit");
    if (!lim) lim = json_object_get(root, "mamba_dt_limit");
    if (json_is_array(lim) && json_array_size(lim) == 2) {
        const json_t *a = json_array_get(lim, 0), *b = json_array_get(lim, 1);
        if (json_is_number(a)) c->ssm_dt_lo = (float)json_number_value(a);
        if (json_is_number(b)) c->ssm_dt_hi = (float)json_number_value(b);
        /* a non-number upper bound (null, or Infinity written as a string) = none */
    }
    return 0;
}

/* ---- loading ---------------------------------------------------------------- */

static const model_tensor_names nemotron_h_names = {
    .embed = "backbone.embeddings.weight",
    .final_norm = "backbone.norm_f.weight",
    .lm_head = "lm_head.weight",
    .attn_norm = "backbone.layers.%d.norm.weight",
};

#define MIX "backbone.layers.%d.mixer."

size_t nemotron_h_layer_floats(const model_config *c)
{
    if (!c->layer_kinds[0]) return 0;
    size_t di = (size_t)c->ssm_heads * c->ssm_head_dim;
    size_t cd = di + 2 * (size_t)c->ssm_groups * c->ssm_state;
    /* conv weight + bias, A, D, dt_bias, gated norm, in/out proj biases, padding */
    return cd * (size_t)c->ssm_conv + cd + 3 * (size_t)c->ssm_heads + di + (di + cd + c->ssm_heads) +
           (size_t)c->hidden_size + 16 * 10;
}

static void lfail(loader *L, const char *msg, const char *name)
{
    if (L->failed) return;
    errmsg_set(L->err, L->errlen, "%s: '%s'", msg, name);
    L->failed = 1;
}

/* The conv1d weight (conv_dim, 1, K) as f32 (conv_dim, K) in the arena. */
static const float *load_conv(loader *L, int il, int cd, int K, int nseg, const int *off, const int *len)
{
    char name[160];
    snprintf(name, sizeof name, MIX "conv1d.weight", il);
    const int64_t want[3] = {cd, 1, K};
    wsrc_tensor t;
    if (!wsrc_find(L->src, name, 3, want, &t)) {
        lfail(L, "tensor missing from the checkpoint", name);
        return NULL;
    }
    if (t.type < 0 || t.ndim != 3 || t.shape[0] != cd || t.shape[1] != 1 || t.shape[2] != K) {
        lfail(L, "tensor has an unsupported type or a shape other than (conv_dim, 1, conv_kernel)", name);
        return NULL;
    }
    model_weights *m = L->m;
    size_t n = (size_t)cd * K;
    SGLC_ASSERT(m->vecs_used + n <= m->vecs_cap);
    float *v = m->vecs + m->vecs_used;
    m->vecs_used += (n + 15) & ~(size_t)15;
    if (wsrc_read(L->src, &t, v, DTYPE_F32)) {
        lfail(L, "out of memory reading", name);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) v[i] = dtype_round(v[i], prec_dtype(m->prec));
    for (int j = 0, r = 0; j < nseg; r += len[j++]) /* this rank's channels */
        memmove(v + (size_t)r * K, v + (size_t)off[j] * K, sizeof(float) * (size_t)len[j] * K);
    return v;
}

/* A per-channel (or per-head) vector cut to the ranges [off[j], off[j] +
 * len[j]) of this rank, read whole (a dummy source stays in step). */
static const float *load_vec_segs(loader *L, const char *pat, int il, int n, int nseg, const int *off,
                                  const int *len)
{
    float *v = (float *)load_layer_vec(L, pat, il, n, 0);
    for (int j = 0, r = 0; v && j < nseg; r += len[j++])
        memmove(v + r, v + off[j], sizeof(float) * (size_t)len[j]);
    return v;
}

void nemotron_h_load_layer(loader *L, model_layer *l, int il)
{
    model_weights *m = L->m;
    const model_config *c = &m->cfg;
    const model_tp *tp = &m->tp;
    const int H = c->hidden_size, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    l->kind = c->layer_kinds[il];
    l->attn_norm = load_layer_vec(L, nemotron_h_names.attn_norm, il, H, 0);
    if (l->kind == 'M') {
        const int nh = c->ssm_heads, P = c->ssm_head_dim, N = c->ssm_state, di = nh * P;
        const int GN = c->ssm_groups * N, cd = di + 2 * GN;
        int idx = 0;
        for (int i = 0; i < il; i++) idx += c->layer_kinds[i] == 'M';
        l->ssm_idx = idx - tp->ssm_l0; /* in this stage's state pool */
        /* this rank's heads [h0, h0 + nhl) and groups [g0, g0 + ngl) */
        const int h0 = tp->ssm_h0, nhl = tp->ssm_nh, g0 = tp->ssm_g0, ngl = tp->ssm_ng;
        const int xo[3] = {h0 * P, di + g0 * N, di + GN + g0 * N}, xl[3] = {nhl * P, ngl * N, ngl * N};
        const int po[5] = {h0 * P, di + xo[0], di + xo[1], di + xo[2], di + cd + h0};
        const int pl[5] = {nhl * P, xl[0], xl[1], xl[2], nhl};
        load_proj_segs(L, &l->wq, MIX "in_proj", il, di + cd + nh, H, c->ssm_proj_bias, 5, po, pl);
        load_proj(L, &l->wo, MIX "out_proj", il, H, di, c->ssm_proj_bias, sh_cols(h0 * P, nhl * P));
        l->ssm_conv_w = load_conv(L, il, cd, c->ssm_conv, 3, xo, xl);
        l->ssm_conv_b = c->ssm_conv_bias ? load_vec_segs(L, MIX "conv1d.bias", il, cd, 3, xo, xl) : NULL;
        float *a = (float *)load_vec_segs(L, MIX "A_log", il, nh, 1, &h0, &nhl);
        if (a)
            for (int h = 0; h < nhl; h++) a[h] = -expf(a[h]);
        l->ssm_a = a;
        l->ssm_d = load_vec_segs(L, MIX "D", il, nh, 1, &h0, &nhl);
        l->ssm_dt_bias = load_vec_segs(L, MIX "dt_bias", il, nh, 1, &h0, &nhl);
        l->ssm_norm = load_vec_segs(L, MIX "norm.weight", il, di, 1, &xo[0], &xl[0]);
    } else if (l->kind == '*') { /* as llama's: q heads, kv heads (or one replicated), o by columns */
        int bias = c->attention_bias;
        shard_sel qs = sh_rows(tp->head0 * hd, tp->n_head * hd);
        shard_sel kvs = sh_rows(tp->kv_head0 * hd, tp->n_kv_head * hd);
        load_proj(L, &l->wq, MIX "q_proj", il, qd, H, bias, qs);
        load_proj(L, &l->wk, MIX "k_proj", il, kvd, H, bias, kvs);
        load_proj(L, &l->wv, MIX "v_proj", il, kvd, H, bias, kvs);
        load_proj(L, &l->wo, MIX "o_proj", il, H, qd, bias, sh_cols(qs.off, qs.len));
    } else {
        shard_sel ms = sh_rows(tp->tp_rank * tp->inter, tp->inter);
        load_proj(L, &l->wup, MIX "up_proj", il, c->intermediate_size, H, c->mlp_bias, ms);
        load_proj(L, &l->wdown, MIX "down_proj", il, H, c->intermediate_size, c->mlp_bias,
                  sh_cols(ms.off, ms.len));
    }
}

/* ---- forward ---------------------------------------------------------------- */

/* Attention without rope: q/k/v, store k/v at the slots, attend, o. */
static void attn_block(model *m, model_kv *kv, const model_batch *b, const model_layer *l, int il,
                       const linear_exec *ex, const int32_t *row_ad, struct tpool *pool, int lo, int hi)
{
    const model_config *c = m->cfg;
    const int T = b->n_tokens, hd = c->head_dim, nh = m->w->tp.n_head, nkv = m->w->tp.n_kv_head;
    const int qd = nh * hd, kvd = nkv * hd;
    linear_exec lx[3];
    linear_adapter lb[3][MODEL_MAX_BATCH_ADAPTERS];
    {   /* q, k, v: the base products, then one barrier for their adapter passes */
        const model_proj p[3] = {MODEL_PROJ_Q, MODEL_PROJ_K, MODEL_PROJ_V};
        float *const y[3] = {m->q, m->k, m->v};
        const linear_weight *const w[3] = {&l->wq, &l->wk, &l->wv};
        const linear_exec *e[3];
        for (int i = 0; i < 3; i++) e[i] = model_lora_exec(b, row_ad, ex, il, p[i], &lx[i], lb[i]);
        model_lora_linear_group(3, y, m->xn, T, w, e);
    }
    tpool_barrier(pool);
    for (int t = lo; t < hi; t++) {
        int32_t slot = b->seq_slots[m->tok_seq[t]][b->positions[t]];
        kern_kv_store_tok(kv->k[il], kv->k_tok ? kv->k_tok[il] : NULL, kv->dt, slot, nkv, hd,
                          m->k + (size_t)t * kvd, kv->k_scale[il]);
        kern_kv_store_tok(kv->v[il], kv->v_tok ? kv->v_tok[il] : NULL, kv->dt, slot, nkv, hd,
                          m->v + (size_t)t * kvd, kv->v_scale[il]);
    }
    tpool_barrier(pool);
    for (int s = 0; s < b->n_seqs; s++) {
        int r0 = b->seq_start[s];
        kern_attn_args a = {
            .n_q = b->seq_start[s + 1] - r0, .n_kv = b->seq_kv_len[s], .n_head = nh, .n_kv_head = nkv,
            .head_dim = hd, .q = m->q + (size_t)r0 * qd, .q_stride = (size_t)qd,
            .k_cache = kv->k[il], .v_cache = kv->v[il], .kv_dt = kv->dt,
            .k_scale = kv->k_scale[il], .v_scale = kv->v_scale[il],
            .k_tok_scale = kv->k_tok ? kv->k_tok[il] : NULL, .v_tok_scale = kv->v_tok ? kv->v_tok[il] : NULL,
            .slots = b->seq_slots[s],
            .sliding_window = l->window, .scale = 1.0f / sqrtf((float)hd),
            .out = m->att + (size_t)r0 * qd, .out_stride = (size_t)qd,
        };
        kern_attention(&a, ex->ith, ex->nth, ex->scratch);
    }
    tpool_barrier(pool);
    linear(m->xn, m->att, T, &l->wo, model_lora_exec(b, row_ad, ex, il, MODEL_PROJ_O, &lx[0], lb[0]));
    tpool_barrier(pool);
    model_tp_allreduce(m, m->xn, (size_t)T * c->hidden_size, ex->ith, pool); /* row-parallel o */
}

/* The non-gated MLP: down(relu(up x)^2). */
static void mlp_block(model *m, const model_batch *b, const model_layer *l, int il, const linear_exec *ex,
                      const int32_t *row_ad, struct tpool *pool, int lo, int hi)
{
    const int T = b->n_tokens, I = m->w->tp.inter; /* this rank's columns */
    linear_exec lx;
    linear_adapter lb[MODEL_MAX_BATCH_ADAPTERS];
    linear(m->up, m->xn, T, &l->wup, model_lora_exec(b, row_ad, ex, il, MODEL_PROJ_UP, &lx, lb));
    tpool_barrier(pool);
    for (int t = lo; t < hi; t++) {
        float *u = m->up + (size_t)t * I;
        for (int i = 0; i < I; i++) u[i] = u[i] > 0.0f ? u[i] * u[i] : 0.0f;
    }
    tpool_barrier(pool);
    linear(m->xn, m->up, T, &l->wdown, model_lora_exec(b, row_ad, ex, il, MODEL_PROJ_DOWN, &lx, lb));
    tpool_barrier(pool);
    model_tp_allreduce(m, m->xn, (size_t)T * m->cfg->hidden_size, ex->ith, pool); /* row-parallel down */
}

void nemotron_h_layer(model *m, model_kv *kv, const model_batch *b, const model_layer *l, int il,
                      const linear_exec *ex, const int32_t *row_ad, struct tpool *pool, int lo, int hi)
{
    const int H = m->cfg->hidden_size;
    for (int t = lo; t < hi; t++) {
        float *x = m->x + (size_t)t * H, *xn = m->xn + (size_t)t * H;
        if (il > m->w->tp.layer0) kern_add(x, x, xn, H);
        kern_rmsnorm(xn, x, l->attn_norm, H, m->cfg->rms_norm_eps, 0.0f);
    }
    tpool_barrier(pool);
    if (l->kind == 'M') mamba2_mixer(m, kv, b, l, ex, pool, lo, hi);
    else if (l->kind == '*') attn_block(m, kv, b, l, il, ex, row_ad, pool, lo, hi);
    else mlp_block(m, b, l, il, ex, row_ad, pool, lo, hi);
}

const model_arch model_arch_nemotron_h = {
    .hf_name = "NemotronHForCausalLM",
    .family = "nemotron_h",
    .qkv_bias = -1,
    .o_bias = -1,
    .mlp_bias = -1,
    .act = MODEL_ACT_RELU2,
    .act_key = "mlp_hidden_act",
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .hybrid = 1,
    .parse = nh_parse,
    .names = &nemotron_h_names,
};
