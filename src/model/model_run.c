/* model_run — the run state: what one driver of the model writes (see
 * model_impl.h).  Scratch reservation, the chunk size, the read-bytes
 * counter, KV caches, and the run states that share one set of weights.
 *
 * DESIGN: model_load makes the weights and a first run state; model_share
 * makes more over the same weights (one per worker or replica).  The
 * weights hold a reference count of their run states, taken and dropped
 * atomically, so the run states may be freed in any order and from any
 * thread; the last one frees the weights.  Nothing here touches weights
 * after load.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kern_types.h"
#include "model/model_impl.h"
#include "util/log.h"

model *model_run_create(model_weights *w)
{
    model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->w = w;
    m->cfg = &w->cfg;
    m->chunk_tokens = MODEL_DEFAULT_CHUNK;
    m->mla_expand_min = w->mla_expand_min;
    m->tp = w->tp; /* the load's group; model_share_group puts another one in */
    __atomic_add_fetch(&w->refs, 1, __ATOMIC_ACQ_REL);
    return m;
}

/* The new run state keeps m's settings that are not scratch: its chunk
 * size and its KV scales (fp8 KV caches of a data-parallel replica must
 * quantize as the first one does). */
model *model_share(model *m)
{
    if (m && m->w->tp.size > 1) { /* the workers mirror one driver's commands */
        log_error("a tensor-parallel model has one run state: replicas over it are not supported yet");
        return NULL;
    }
    model *s = m ? model_run_create(m->w) : NULL;
    if (!s) return NULL;
    s->chunk_tokens = m->chunk_tokens;
    s->mla_expand_min = m->mla_expand_min;
    if (m->kv_k_scale && m->kv_v_scale && model_set_kv_scales(s, m->kv_k_scale, m->kv_v_scale, m->cfg->n_layer)) {
        model_free(s);
        return NULL;
    }
    return s;
}

model *model_share_group(model *m, struct dist_group *g, struct dist_group *tg, char *err, size_t errlen)
{
    const model_tp *t = m ? &m->w->tp : NULL;
    if (!t || t->size <= 1 || !g) {
        snprintf(err, errlen, "model_share_group: the model is not tensor- or pipeline-parallel");
        return NULL;
    }
    if (dist_size(g) != t->size || dist_rank(g) != t->rank) {
        snprintf(err, errlen, "model_share_group: the group has rank %d of %d, the shard is rank %d of %d",
                 dist_rank(g), dist_size(g), t->rank, t->size);
        return NULL;
    }
    if (t->tp_n > 1 && t->pp_n > 1 && (!tg || dist_size(tg) != t->tp_n || dist_rank(tg) != t->tp_rank)) {
        snprintf(err, errlen, "model_share_group: no stage group of %d ranks with rank %d", t->tp_n, t->tp_rank);
        return NULL;
    }
    if (m->w->ep) { /* EPLB moves experts in the weights: one driver per copy */
        snprintf(err, errlen, "model_share_group: expert parallelism (--ep-size) keeps one group per copy of the "
                 "weights");
        return NULL;
    }
    model *s = model_run_create(m->w);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->tp.g = g;
    s->tp.tg = t->tp_n > 1 ? (t->pp_n > 1 ? tg : g) : NULL;
    s->tp.pp_mb = m->tp.pp_mb;
    s->tp.next_kv_id = 0;
    s->chunk_tokens = m->chunk_tokens;
    s->mla_expand_min = m->mla_expand_min;
    if (m->kv_k_scale && m->kv_v_scale && model_set_kv_scales(s, m->kv_k_scale, m->kv_v_scale, m->cfg->n_layer)) {
        model_free(s);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return s;
}

void model_free(model *m)
{
    if (!m) return;
    if (m->pp_fwd_micro && m->tp.rank == 0)
        log_info("pipeline parallelism: %ld forwards ran as %ld micro-batches", m->pp_fwd_micro, m->pp_n_micro);
    /* rank 0: this run state's group ends with it (model_share refuses
     * tensor-parallel models, so each rank-0 run state drives a group of
     * its own: the load's, or model_share_group's) */
    model_tp_shutdown(&m->tp);
    free(m->scratch_mem);
    mla_plan_free(m->mla_plan);
    free(m->kv_k_scale), free(m->kv_v_scale);
    free(m->tp_logits), free(m->tp_gather);
    if (m->w && __atomic_sub_fetch(&m->w->refs, 1, __ATOMIC_ACQ_REL) == 0)
        model_weights_free(m->w);
    free(m);
}

const model_config *model_get_config(const model *m) { return &m->w->cfg; }
size_t model_weight_bytes(const model *m) { return m->w->weight_bytes; }
size_t model_last_read_bytes(const model *m)
{
    return m->w->weight_bytes - m->w->all_expert_bytes + m->touched_bytes;
}
dtype model_weight_dtype(const model *m) { return m->w->wdt; }

void model_set_chunk_tokens(model *m, int n) { m->chunk_tokens = n > 0 ? n : MODEL_DEFAULT_CHUNK; }
void model_set_pp_micro(model *m, int n) { m->tp.pp_mb = n > 0 ? n : 0; }
void model_pp_default_micro(model *m, int max_running)
{
    model_tp *t = &m->tp;
    if (t->pp_n > 1 && t->pp_mb <= 0) t->pp_mb = max_running / t->pp_n > 1 ? max_running / t->pp_n : 1;
}
void model_set_mla_expand_min(model *m, int n) { m->mla_expand_min = n >= 0 ? n : m->w->mla_expand_min; }

/* ---- KV cache ------------------------------------------------------------ */

int model_set_kv_scales(model *m, const float *k_scale, const float *v_scale, int n)
{
    if (!m || n != m->cfg->n_layer || !k_scale || !v_scale) return -1;
    float *k = malloc(sizeof(float) * (size_t)n), *v = malloc(sizeof(float) * (size_t)n);
    if (!k || !v) {
        free(k), free(v);
        return -1;
    }
    memcpy(k, k_scale, sizeof(float) * (size_t)n);
    memcpy(v, v_scale, sizeof(float) * (size_t)n);
    free(m->kv_k_scale), free(m->kv_v_scale);
    m->kv_k_scale = k, m->kv_v_scale = v;
    return 0;
}

int model_kv_row_len(const model_config *c, int n_kv_head)
{
    if (c->arch && c->arch->mla) return c->kv_lora_rank + c->qk_rope_dim;
    return n_kv_head * c->head_dim;
}

/* K and V rows per slot per layer: 2, or 1 for MLA's latent row. */
static int kv_rows(const model_config *c) { return c->arch && c->arch->mla ? 1 : 2; }

/* Layers with a KV cache: all, or a hybrid model's attention layers only. */
static int kv_layers(const model_config *c) { return c->layer_kinds[0] ? c->n_attn : c->n_layer; }
static int kv_layer_has(const model_config *c, int l) { return !c->layer_kinds[0] || c->layer_kinds[l] == '*'; }
/* sglc's int8 cache: scales per token (one per kv head; MLA's latent row is one head) */
static int kv_tok_heads(const model *m) { return m->cfg->arch && m->cfg->arch->mla ? 1 : m->w->tp.n_kv_head; }

/* Bytes of one token's row of one layer's K (or V), the int8 scales included. */
static size_t kv_row_bytes(const model *m, dtype kv_dt)
{
    int len = model_kv_row_len(m->cfg, m->w->tp.n_kv_head);
    if (kv_dt == DTYPE_I8) return (size_t)len + sizeof(float) * (size_t)kv_tok_heads(m);
    return kern_type_row_bytes(kern_type_of_dtype(kv_dt), (int64_t)len);
}

size_t model_kv_token_bytes(const model *m, dtype kv_dt)
{
    const model_config *c = m->cfg;
    return (size_t)kv_rows(c) * (size_t)kv_layers(c) * kv_row_bytes(m, kv_dt);
}

model_kv *model_kv_create(model *m, int n_slots, dtype kv_dt)
{
    if (n_slots <= 0 || (kv_dt != DTYPE_F32 && kv_dt != DTYPE_BF16 && kv_dt != DTYPE_F8_E4M3 && kv_dt != DTYPE_F8_E5M2 &&
                         kv_dt != DTYPE_I8)) {
        log_error("bad KV cache request: %d slots of %s", n_slots, dtype_name(kv_dt));
        return NULL;
    }
    const model_config *c = m->cfg;
    model_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->n_layer = c->n_layer;
    kv->n_slots = n_slots;
    kv->dt = kv_dt;
    kv->row_len = model_kv_row_len(c, m->w->tp.n_kv_head);
    const int rows = kv_rows(c);
    const int i8 = kv_dt == DTYPE_I8;
    /* int8: the values, then that layer's (n_slots, n_tok_head) f32 scales */
    size_t vals = i8 ? (size_t)n_slots * (size_t)kv->row_len
                     : kern_type_mat_bytes(kern_type_of_dtype(kv_dt), n_slots, kv->row_len);
    vals = (vals + 63) & ~(size_t)63;
    kv->n_tok_head = i8 ? kv_tok_heads(m) : 0;
    size_t per = vals + ((sizeof(float) * (size_t)n_slots * (size_t)kv->n_tok_head + 63) & ~(size_t)63);
    kv->bytes = per * (size_t)rows * (size_t)kv_layers(c);
    if (!kv->bytes) kv->bytes = 64; /* a hybrid model without attention layers */
    kv->k = calloc((size_t)c->n_layer, sizeof(void *));
    kv->v = calloc((size_t)c->n_layer, sizeof(void *));
    kv->k_scale = malloc(sizeof(float) * (size_t)(c->n_layer > 0 ? c->n_layer : 1));
    kv->v_scale = malloc(sizeof(float) * (size_t)(c->n_layer > 0 ? c->n_layer : 1));
    for (int l = 0; kv->k_scale && kv->v_scale && l < c->n_layer; l++) {
        kv->k_scale[l] = m->kv_k_scale ? m->kv_k_scale[l] : 1.0f;
        kv->v_scale[l] = m->kv_v_scale ? m->kv_v_scale[l] : 1.0f;
    }
    /* anonymous mmap: zero-filled and committed lazily, so a pool sized
     * from --mem-fraction-static costs RAM only as pages get used */
    kv->mem = mmap(NULL, kv->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (kv->mem == MAP_FAILED) kv->mem = NULL;
    if (i8) {
        kv->k_tok = calloc((size_t)c->n_layer, sizeof(float *));
        kv->v_tok = calloc((size_t)c->n_layer, sizeof(float *));
    }
    if (c->n_mamba) /* hybrid Mamba2: per-request recurrent states (mamba2.c) */
        kv->ssm = mamba2_cache_create(m, n_slots < MODEL_MAMBA_DEFAULT_STATES ? n_slots : MODEL_MAMBA_DEFAULT_STATES,
                                      DTYPE_F32);
    if (!kv->k || !kv->v || !kv->mem || !kv->k_scale || !kv->v_scale || (i8 && (!kv->k_tok || !kv->v_tok)) ||
        (c->n_mamba && !kv->ssm)) {
        log_error("out of memory for a KV cache of %zu bytes", kv->bytes);
        model_kv_destroy(kv);
        return NULL;
    }
    for (int l = 0, j = 0; l < c->n_layer; l++) {
        if (!kv_layer_has(c, l)) continue; /* hybrid Mamba / MLP layer: no KV (NULL) */
        kv->k[l] = (char *)kv->mem + per * ((size_t)rows * j);
        /* MLA: no V rows; the latent row is both (mla.c) */
        kv->v[l] = rows == 2 ? (char *)kv->mem + per * (2 * (size_t)j + 1) : kv->k[l];
        if (i8) {
            kv->k_tok[l] = (float *)((char *)kv->k[l] + vals);
            kv->v_tok[l] = (float *)((char *)kv->v[l] + vals);
        }
        j++;
    }
    if (model_tp_kv_created(m, kv)) { /* rank 0: the workers make theirs */
        kv->tp_w = NULL;
        model_kv_destroy(kv);
        return NULL;
    }
    return kv;
}

void model_kv_destroy(model_kv *kv)
{
    if (!kv) return;
    model_tp_kv_destroyed(kv);
    free(kv->k);
    free(kv->v);
    free(kv->k_scale);
    free(kv->v_scale);
    mamba2_cache_free(kv->ssm);
    free(kv->k_tok);
    free(kv->v_tok);
    if (kv->mem) munmap(kv->mem, kv->bytes);
    free(kv);
}

/* ---- scratch ------------------------------------------------------------- */

static size_t al64(size_t b) { return (b + 63) & ~(size_t)63; }

int model_reserve(model *m, int max_tokens, int max_kv, int n_threads)
{
    if (max_tokens <= m->cap_tokens && max_kv <= m->cap_kv && n_threads <= m->cap_threads)
        return 0;
    const model_weights *w = m->w;
    const model_config *c = &w->cfg;
    if (max_tokens < m->cap_tokens) max_tokens = m->cap_tokens;
    if (max_kv < m->cap_kv) max_kv = m->cap_kv;
    if (n_threads < m->cap_threads) n_threads = m->cap_threads;
    if (max_tokens < 1) max_tokens = 1;
    if (max_kv < max_tokens) max_kv = max_tokens;
    size_t T = (size_t)max_tokens;
    /* this rank's heads and widths (tensor parallelism) */
    int H = c->hidden_size, I = w->tp.inter, hd = c->head_dim;
    int qd = w->tp.n_head * hd, kvd = w->tp.n_kv_head * hd, half = w->rot_dim / 2;
    size_t nrope = w->inv_freq_local ? 2 : 1; /* rope tables per row: global (+ local) */
    int any_moe = 0, any_dense = 0;
    for (int il = 0; il < c->n_layer; il++) {
        if (w->layers[il].moe) any_moe = 1;
        else any_dense = 1;
    }
    int Id = any_dense ? I : 0; /* dense MLP width the scratch must hold */
    int Is = any_moe ? c->shared_inter : 0; /* shared expert width */
    int mla = w->arch->mla;
    if (mla) { /* q holds (nh, nope + rope), att (nh, v); the attention runs at kvr + rope */
        int mq = c->n_head * (c->qk_nope_dim + c->qk_rope_dim), mv = c->n_head * c->v_head_dim;
        qd = mq > mv ? mq : mv;
        hd = c->kv_lora_rank + c->qk_rope_dim;
    }
    int E = any_moe ? c->n_expert : 0, Ie = any_moe ? w->tp.moe_inter : 0; /* this rank's expert width */
    size_t A = any_moe ? T * (size_t)c->n_expert_used : 0; /* expert assignments */
    int maxk = H > qd ? H : qd;
    if (Id > maxk) maxk = Id;
    if (Ie > maxk) maxk = Ie;
    if (Is > maxk) maxk = Is;
    if (mla && c->kv_lora_rank > maxk) maxk = c->kv_lora_rank;
    if (mla && c->q_lora_rank > maxk) maxk = c->q_lora_rank;
    if (c->n_mamba && c->ssm_heads * c->ssm_head_dim > maxk) maxk = c->ssm_heads * c->ssm_head_dim;
    size_t ts = kern_matmul_scratch(max_tokens, maxk);
    size_t as = kern_attention_scratch(max_kv, hd);
    if (as > ts) ts = as;
    ts = al64(ts + sizeof(float) * (size_t)(half + 16) + 64);
    size_t sizes[] = {
        al64(T * H * 4),        al64(T * H * 4),     al64(T * qd * 4),  al64(T * kvd * 4),
        al64(T * kvd * 4),      al64(T * qd * 4),    al64(T * Id * 4),  al64(T * Id * 4),
        al64(T * half * 4 * nrope), al64(T * half * 4 * nrope), al64(T * H * 4),
        /* MoE: rlog, ew, ex, eg, eu (floats) */
        al64(T * E * 4),        al64(A * 4),         al64(A * H * 4),   al64(A * Ie * 4),
        al64(A * Ie * 4),
        /* shared expert: sg, su, sout, ssig; MLA arena */
        al64(T * Is * 4),       al64(T * Is * 4),    al64(T * H * 4),   al64(T * 4),
        al64(mla_scratch_floats(c, T) * 4), al64(mamba2_scratch_floats(c, T, n_threads, w->mamba_ssd_min ? w->mamba_ssd_chunk : 0) * 4),
        /* int32: tok_seq, esel, eorder, einv, ecnt, eoff */
        al64(T * 4),            al64(A * 4),         al64(A * 4),       al64(A * 4),
        al64((size_t)E * 4),    al64((size_t)(E + 1) * 4),
        ts * (size_t)n_threads,
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += sizes[i];
    char *mem = aligned_alloc(64, total);
    if (!mem) {
        log_error("out of memory for forward scratch (%zu bytes for %d tokens)", total,
                  max_tokens);
        return -1;
    }
    free(m->scratch_mem);
    m->scratch_mem = mem;
    float **slots[] = {&m->x,     &m->xn,    &m->q,  &m->k,    &m->v,  &m->att,
                       &m->gate,  &m->up,    &m->cos_t, &m->sin_t, &m->lrows,
                       &m->rlog,  &m->ew,    &m->ex, &m->eg,   &m->eu,
                       &m->sg,    &m->su,    &m->sout, &m->ssig, &m->mla,  &m->ssm};
    int32_t **islots[] = {&m->tok_seq, &m->esel, &m->eorder, &m->einv, &m->ecnt, &m->eoff};
    size_t off = 0, i = 0;
    for (size_t j = 0; j < sizeof slots / sizeof slots[0]; j++, i++) {
        *slots[j] = (float *)(mem + off);
        off += sizes[i];
    }
    for (size_t j = 0; j < sizeof islots / sizeof islots[0]; j++, i++) {
        *islots[j] = (int32_t *)(mem + off);
        off += sizes[i];
    }
    m->cos_l = w->inv_freq_local ? m->cos_t + T * (size_t)half : NULL;
    m->sin_l = w->inv_freq_local ? m->sin_t + T * (size_t)half : NULL;
    m->tscratch = mem + off;
    m->tstride = ts;
    m->cap_tokens = max_tokens;
    m->cap_kv = max_kv;
    m->cap_threads = n_threads;
    return 0;
}

/* ---- EAGLE: hidden-state capture, embeddings and LM head (model.h) ------- */

int model_set_capture(model *m, float *store, int64_t n_slots, const int *at, int n_at)
{
    if (!store) {
        m->capture.store = NULL;
        m->capture.n_at = 0;
        return 0;
    }
    if (m->w->tp.size > 1 || m->w->tp.layer0 != 0 || m->w->tp.layer1 != m->cfg->n_layer) {
        log_error("hidden-state capture (EAGLE) is not supported with tensor or pipeline parallelism");
        return -1;
    }
    if (n_at < 1 || n_at > MODEL_CAPTURE_MAX || n_slots < 1) return -1;
    for (int i = 0; i < n_at; i++)
        if (at[i] != MODEL_CAPTURE_FINAL_NORM && (at[i] < 0 || at[i] > m->cfg->n_layer)) {
            log_error("hidden-state capture point %d outside [0, %d]", at[i], m->cfg->n_layer);
            return -1;
        }
    memcpy(m->capture.at, at, sizeof(int) * (size_t)n_at);
    m->capture.n_at = n_at;
    m->capture.n_slots = n_slots;
    m->capture.store = store;
    return 0;
}

void model_capture_rows(model *m, const model_batch *b, int at, int lo, int hi)
{
    const int H = m->cfg->hidden_size, n = m->capture.n_at;
    const model_weights *w = m->w;
    for (int j = 0; j < n; j++) {
        int p = m->capture.at[j];
        bool fin = p == MODEL_CAPTURE_FINAL_NORM;
        if (fin ? at != m->cfg->n_layer : p != at) continue;
        for (int t = lo; t < hi; t++) {
            int32_t slot = b->seq_slots[m->tok_seq[t]][b->positions[t]];
            if (slot < 0 || slot >= m->capture.n_slots) continue;
            float *dst = m->capture.store + ((size_t)slot * n + j) * H;
            const float *x = m->x + (size_t)t * H;
            if (fin) kern_rmsnorm(dst, x, w->final_norm, H, m->cfg->rms_norm_eps, w->arch->norm_offset);
            else memcpy(dst, x, sizeof(float) * H);
        }
    }
}

void model_embed_tokens(const model *m, const int32_t *tok, int n, float *out)
{
    const int H = m->cfg->hidden_size;
    for (int i = 0; i < n; i++) model_embed_row(m->w, tok[i], out + (size_t)i * H);
}

const kern_mat *model_lm_head_mat(const model *m)
{
    const linear_weight *lw = &m->w->lm_head;
    return m->w->tp.size > 1 || lw->bias || lw->n_adapters || lw->mat.n <= 0 ? NULL : &lw->mat;
}

int model_lm_head_rows(const model *m, const float *x, int n, float *logits)
{
    const model_weights *w = m->w;
    if (w->tp.size > 1 || n < 1) return -1;
    void *scr = aligned_alloc(64, (kern_matmul_scratch(n, m->cfg->hidden_size) + 63) & ~(size_t)63);
    if (!scr) return -1;
    const linear_exec ex = {.ith = 0, .nth = 1, .scratch = scr};
    linear(logits, x, n, &w->lm_head, &ex);
    free(scr);
    return 0;
}
