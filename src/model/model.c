/* model — loading weights (safetensors or dummy) into a model.
 *
 * DESIGN: weights are resident once.  A matrix goes through kern_mat_init
 * with borrow_ok: if the kernels can use the checkpoint bytes as they are
 * (same dtype, row-major, aligned) the kern_mat points into the mmap and the
 * tensor is marked `keep`; otherwise it is converted/repacked into an owned
 * buffer.  After all weights are prepared st_release_unused() drops the
 * mapped pages of everything not kept, so a bf16 -> f32 or repacked
 * checkpoint does not stay resident twice.  The embedding table is read
 * row by row from its source (mmap or dummy buffer) and converted on
 * lookup, so it costs only the pages of tokens actually seen; when the
 * embeddings are tied and lm_head borrows, both share the same bytes.
 *
 * Tied embeddings come in two storage conventions: HF models store only
 * model.embed_tokens.weight; TinyStories-656K stores only lm_head.weight
 * (its metadata aliases the embedding to it).  Either one is used for both.
 *
 * Vectors (norms, biases) are converted to f32 into one arena.  All values
 * are rounded to the precision --dtype asked for (bf16 / f16), so results
 * match a reference that casts the model to that dtype.
 *
 * Missing tensors are collected and reported together by name.
 *
 * Block-quantized matrices (GGUF Q4_0 ... IQ4_XS whose kernels exist) stay
 * in their type: linear_init_kt borrows the file's blocks in place (the
 * embedding rows are dequantized on lookup); only the MoE router is turned
 * into f32 (no_quant), for the reason given at load_moe.
 *
 * The loader reads every tensor through a weight source (wsource.h):
 * safetensors or dummy weights today.  A tensor with bytes (`data`) goes
 * the borrow-or-convert way above; one without (dummy) is read through
 * the source into a buffer of the storage type.  Sizes come from the
 * type-traits table (kern_type_row_bytes), never from an element size.
 * The result is a model_weights (model_impl.h), immutable after load,
 * and a first run state over it.
 *
 * This file holds load() (config, precision, shards, the walk over the
 * layers, rope tables) and freeing; the per-tensor helpers and the MoE /
 * MLA / embedding loaders are in model_load.c (model_load.h).
 */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_model.h"
#include "model/hfq.h"
#include "model/model_impl.h"
#include "model/mamba2_ssd.h"
#include "model/model_load.h"
#include "model/model_ep.h"
#include "model/moe.h"
#include "util/errmsg.h"
#include "util/fileio.h"
#include "model/rope.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/rng.h"

/* A field ("VmRSS:", "RssAnon:") of /proc/self/status in bytes, 0 if absent. */
static size_t status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0, kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) {
            kb = strtoull(line + kl, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

size_t model_rss_bytes(void) { return status_bytes("VmRSS:"); }


static int choose_dtype(model_weights *m, int want, char *err, size_t errlen)
{
    int d = want >= 0 ? want : m->cfg.torch_dtype;
    switch (d) {
    case DTYPE_BF16:
        m->prec = MODEL_PREC_BF16;
        m->wdt = DTYPE_BF16;
        return 0;
    case DTYPE_F16:
        m->prec = MODEL_PREC_F16;
        m->wdt = DTYPE_F32;
        return 0;
    case DTYPE_F32:
    case -1:
        m->prec = MODEL_PREC_F32;
        m->wdt = DTYPE_F32;
        return 0;
    }
    errmsg_set(err, errlen, "unsupported --dtype");
    return -1;
}

void model_weights_free(model_weights *m)
{
    if (!m) return;
    model_tp_shutdown(&m->tp); /* rank 0 of the load's group: the workers exit (when model_free did not) */
    if (m->layers) {
        for (int i = 0; i < m->cfg.n_layer; i++) {
            model_layer *l = &m->layers[i];
            linear_free(&l->wq), linear_free(&l->wk), linear_free(&l->wv);
            linear_free(&l->wo), linear_free(&l->wgate), linear_free(&l->wup);
            linear_free(&l->wdown);
            linear_free(&l->wrouter);
            for (int e = 0; e < m->cfg.n_expert; e++) {
                if (l->egate) linear_free(&l->egate[e]);
                if (l->eup) linear_free(&l->eup[e]);
                if (l->edown) linear_free(&l->edown[e]);
            }
            free(l->egate), free(l->eup), free(l->edown);
            linear_free(&l->wsgate), linear_free(&l->wsup), linear_free(&l->wsdown);
            linear_free(&l->wssig);
            linear_free(&l->wq_a), linear_free(&l->wq_b), linear_free(&l->wkv_a);
            for (int h = 0; h < m->tp.n_head; h++) { /* this rank's heads (mla_split_kv_b) */
                if (l->wkb_t) linear_free(&l->wkb_t[h]);
                if (l->wvb) linear_free(&l->wvb[h]);
                if (l->wkb) linear_free(&l->wkb[h]);
            }
            free(l->wkb_t), free(l->wvb), free(l->wkb);
        }
    }
    linear_free(&m->lm_head);
    linear_free(&m->score);
    free(m->layers);
    model_ep_free(m->ep);
    for (int i = 0; i < m->n_blocks; i++) free(m->blocks[i]);
    free(m->blocks);
    free(m->vecs);
    free(m->inv_freq);
    free(m->inv_freq_local);
    free(m->inv_freq_long);
    wsrc_close(&m->src);
    free(m);
}

/* Load per o from `src` (taken over, closed on failure), or from the
 * source o->load_format names when src is NULL. */
static model *load(const model_load_opts *o, wsrc *src, char *err, size_t errlen)
{
    if (!o || !o->model_path) {
        errmsg_set(err, errlen, "no model path");
        if (src) wsrc_close(src);
        return NULL;
    }
    model_weights *m = calloc(1, sizeof *m);
    if (!m) {
        errmsg_set(err, errlen, "out of memory");
        if (src) wsrc_close(src);
        return NULL;
    }
    if (src) {
        m->src = *src;
        src->ops = NULL, src->self = NULL;
    }
    double t0 = time_now_sec(), t_open = 0, t_weights = 0;
    /* GGUF (a .gguf file, a folder holding one, or --load-format gguf): the
     * config comes from the file's metadata and the weights from the file */
    char gpath[4096];
    int gg = m->src.ops ? 0
                        : gguf_model_path(o->model_path, o->load_format == MODEL_LOAD_GGUF, gpath,
                                          sizeof gpath, err, errlen);
    if (gg < 0) goto fail;
    if (gg) {
        if (wsrc_open_gguf(&m->src, gpath, err, errlen) ||
            gguf_model_config(wsrc_gguf_file(&m->src), o->override_json, o->context_length,
                              &m->cfg, err, errlen))
            goto fail;
        if (o->load_format == MODEL_LOAD_DUMMY) wsrc_close(&m->src); /* the config only */
    } else if (model_config_load(&m->cfg, o->model_path, o->override_json, o->context_length, err,
                                 errlen)) {
        goto fail;
    }
    m->arch = m->cfg.arch;
    if (m->cfg.n_labels > m->cfg.hidden_size) {
        errmsg_set(err, errlen, "config.json: %d labels exceed hidden_size %d", m->cfg.n_labels,
                   m->cfg.hidden_size);
        goto fail;
    }
    if (choose_dtype(m, o->dtype, err, errlen)) goto fail;
    if (model_tp_setup(m, o->dist, o->dist_tp, o->pp_size, err, errlen)) goto fail;
    if (model_ep_setup(m, o->ep, err, errlen)) goto fail; /* experts split over the TP ranks */
    const model_config *c = &m->cfg;
    int H = c->hidden_size, I = c->intermediate_size, hd = c->head_dim;
    int qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    loader L = {.m = m, .src = &m->src, .err = err, .errlen = errlen};
    if (!m->src.ops) {
        if (o->load_format == MODEL_LOAD_DUMMY) {
            uint64_t seed = o->random_seed * 0x2545F4914F6CDD1Dull + 1;
            if (wsrc_open_dummy(&m->src, seed, prec_dtype(m->prec))) {
                errmsg_set(err, errlen, "out of memory");
                goto fail;
            }
            if (wsrc_wrap_hfq_at_load(&m->src, o->quantization, err, errlen)) goto fail; /* --quantization fp8 */
        } else if (wsrc_open_hfq(&m->src, o->model_path, o->quantization, err, errlen)) {
            goto fail;
        }
    }
    if (m->ep && m->ep->every && !strcmp(m->src.ops->kind, "dummy weights")) {
        errmsg_set(err, errlen, "--enable-eplb reloads the experts it moves from the checkpoint; "
                                "--load-format dummy has none");
        goto fail;
    }
    t_open = time_now_sec() - t0; /* the source opened, the config parsed */
    size_t anon_open = status_bytes("RssAnon:");

    /* vector arena: norms, biases, q/k norms (+ padding per vector) */
    /* norms (2H), q/k norms (2hd), q/k/v/o biases, gate/up/down biases, padding */
    size_t per_layer = 2 * ((size_t)H + 16) + 2 * ((size_t)hd + 16) + (size_t)qd + 2 * (size_t)kvd +
                       (size_t)H + 2 * (size_t)I + (size_t)H + 16 * 8;
    if (m->arch->names->post_attn_norm || m->arch->names->post_ffn_norm)
        per_layer += 2 * ((size_t)H + 16); /* Gemma's post-norms */
    /* MLA norms (q_lora_rank, kv_lora_rank) and DeepSeek V3's router bias (E) */
    per_layer += (size_t)c->q_lora_rank + (size_t)c->kv_lora_rank + (size_t)c->n_expert + 16 * 3;
    per_layer += nemotron_h_layer_floats(c); /* hybrid Mamba2 layers' vectors */
    m->vecs_cap = per_layer * (size_t)c->n_layer + (size_t)H + 16;
    m->vecs = aligned_alloc(64, ((m->vecs_cap * 4) + 63) & ~(size_t)63);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->vecs || !m->layers) {
        errmsg_set(err, errlen, "out of memory");
        goto fail;
    }
    if (m->arch->alt_layout) { /* the same architecture saved with other tensor names */
        wsrc_tensor t;
        const int64_t es[2] = {c->vocab_size, H};
        if (!wsrc_find(&m->src, m->arch->names->embed, 2, es, &t) &&
            wsrc_find(&m->src, m->arch->alt_layout->names->embed, 2, es, &t))
            m->arch = m->cfg.arch = m->arch->alt_layout;
    }
    const model_tensor_names *nm = m->arch->names;
    int qkv_bias = m->arch->qkv_bias < 0 ? c->attention_bias : m->arch->qkv_bias;
    int o_bias = m->arch->o_bias < 0 ? c->attention_bias : m->arch->o_bias;
    int mlp_bias = m->arch->mlp_bias < 0 ? c->mlp_bias : m->arch->mlp_bias;
    if (m->arch->mla && mla_expand_min_env(&m->mla_expand_min, err, errlen)) goto fail;
    if (c->n_mamba && mamba2_ssd_env(&m->mamba_ssd_min, &m->mamba_ssd_chunk, err, errlen)) goto fail;
    load_embeddings(&L);
    for (int il = 0; il < c->n_layer && !L.failed; il++) {
        model_layer *l = &m->layers[il];
        /* pipeline parallelism: another stage's layer (a dummy source still
         * makes every tensor, in order, so its values match one process) */
        if ((il < m->tp.layer0 || il >= m->tp.layer1) && strcmp(m->src.ops->kind, "dummy weights")) {
            l->window = model_config_layer_window(c, il) ? c->sliding_window : 0;
            continue;
        }
        if (m->arch->hybrid) { /* NemotronH: Mamba2 / attention / MLP blocks */
            nemotron_h_load_layer(&L, l, il);
            continue;
        }
        l->attn_norm = load_layer_vec(&L, nm->attn_norm, il, H, 0);
        l->ffn_norm = load_layer_vec(&L, nm->ffn_norm, il, H, 0);
        l->post_attn_norm = load_layer_vec(&L, nm->post_attn_norm, il, H, 0);
        l->post_ffn_norm = load_layer_vec(&L, nm->post_ffn_norm, il, H, 0);
        l->rope_local = c->rope_local_theta > 0 && model_config_layer_sliding(c, il);
        if (m->arch->qk_norm) {
            l->q_norm = load_layer_vec(&L, nm->q_norm, il, hd, 0);
            l->k_norm = load_layer_vec(&L, nm->k_norm, il, hd, 0);
        }
        /* this rank's heads and MLP columns (all of them in one process) */
        const model_tp *tp = &m->tp;
        shard_sel qs = sh_rows(tp->head0 * hd, tp->n_head * hd);
        shard_sel kvs = sh_rows(tp->kv_head0 * hd, tp->n_kv_head * hd);
        shard_sel mlp = sh_rows(tp->tp_rank * tp->inter, tp->inter);
        if (m->arch->mla) {
            load_mla(&L, l, il);
        } else {
            if (nm->qkv) { /* fused (Phi-3): no bias in the layouts that use it */
                linear_weight *const o3[3] = {&l->wq, &l->wk, &l->wv};
                const int r3[3] = {qd, kvd, kvd};
                const char *const n3[3] = {"q", "k", "v"};
                const shard_sel s3[3] = {qs, kvs, kvs};
                load_fused(&L, nm->qkv, il, 3, o3, r3, n3, s3, H);
            } else {
                load_proj(&L, &l->wq, nm->q, il, qd, H, qkv_bias, qs);
                load_proj(&L, &l->wk, nm->k, il, kvd, H, qkv_bias, kvs);
                load_proj(&L, &l->wv, nm->v, il, kvd, H, qkv_bias, kvs);
            }
            load_proj(&L, &l->wo, nm->o, il, H, qd, o_bias, sh_cols(qs.off, qs.len));
        }
        if (model_config_layer_moe(c, il)) {
            load_moe(&L, l, il);
        } else {
            if (nm->gate_up) {
                linear_weight *const o2[2] = {&l->wgate, &l->wup};
                const int r2[2] = {I, I};
                const shard_sel s2[2] = {mlp, mlp};
                const char *const n2[2] = {"gate", "up"};
                load_fused(&L, nm->gate_up, il, 2, o2, r2, n2, s2, H);
            } else {
                load_proj(&L, &l->wgate, nm->gate, il, I, H, mlp_bias, mlp);
                load_proj(&L, &l->wup, nm->up, il, I, H, mlp_bias, mlp);
            }
            load_proj(&L, &l->wdown, nm->down, il, H, I, mlp_bias, sh_cols(mlp.off, mlp.len));
        }
        l->window = model_config_layer_window(c, il) ? c->sliding_window : 0;
    }
    m->final_norm = L.failed ? NULL : load_vec(&L, nm->final_norm, H, 0);
    if (L.failed) goto fail;
    if (L.n_missing) {
        errmsg_set(err, errlen, "%s: %d tensor(s) missing from the checkpoint: %s", o->model_path,
               L.n_missing, L.missing);
        goto fail;
    }
    m->weight_bytes += m->vecs_used * sizeof(float);
    wsrc_release_unused(&m->src);
    /* the source's transient copies (GGUF's row-order attn_q / attn_k,
     * freed after their repack) back to the system, not kept by malloc */
    malloc_trim(0);
    t_weights = time_now_sec() - t0 - t_open;

    m->rot_dim = model_rope_dim(c);
    m->inv_freq = malloc(sizeof(float) * (size_t)(m->rot_dim / 2));
    if (!m->inv_freq) {
        errmsg_set(err, errlen, "out of memory");
        goto fail;
    }
    m->attn_factor = model_rope_inv_freq(c, 0, m->inv_freq);
    if (c->rope_local_theta > 0) { /* Gemma 3: sliding layers' own rope */
        m->inv_freq_local = malloc(sizeof(float) * (size_t)(m->rot_dim / 2));
        if (!m->inv_freq_local) {
            errmsg_set(err, errlen, "out of memory");
            goto fail;
        }
        model_rope_local_inv_freq(c, m->inv_freq_local);
    }
    if (c->rope.kind == MODEL_ROPE_LONGROPE) {
        m->inv_freq_long = malloc(sizeof(float) * (size_t)(m->rot_dim / 2));
        if (!m->inv_freq_long) {
            errmsg_set(err, errlen, "out of memory");
            goto fail;
        }
        model_rope_longrope_inv_freq(c, 1, m->inv_freq_long);
        m->rope_switch = model_rope_longrope_switch(c);
    }
    if (m->arch->mla) {
        int full = c->n_head * (c->qk_nope_dim + c->qk_rope_dim + c->v_head_dim);
        log_info("MLA: the KV cache keeps %d values per token per layer (latent %d + rope key "
                 "%d) where full attention would keep %d (%.1fx)", model_kv_row_len(c, c->n_kv_head),
                 c->kv_lora_rank, c->qk_rope_dim, full, (double)full / model_kv_row_len(c, c->n_kv_head));
    }
    model *run = model_run_create(m);
    if (!run) {
        errmsg_set(err, errlen, "out of memory");
        goto fail;
    }
    {
        double dt = time_now_sec() - t0;
        size_t rss = model_rss_bytes();
        char qnote[96] = "";
        if (L.n_quant)
            snprintf(qnote, sizeof qnote, " (%d block-quantized matrices: %d in place, %d repacked 8 rows at a time)",
                     L.n_quant, L.n_quant - L.n_repacked, L.n_repacked);
        /* named as before the source split: logs and scripts look for it */
        if (log_level_current <= LOG_INFO)
            log_write(LOG_INFO, "model_load", "loaded %s (%s, %d layers, hidden %d, vocab %d) from %s in %.2f s: weights %.1f "
                 "MiB as %s%s, VmRSS %.1f MiB (%.0f%% of weights)",
                 c->architecture, m->src.ops->kind, c->n_layer, H,
                 c->vocab_size, o->model_path, dt, m->weight_bytes / 1048576.0,
                 m->prec == MODEL_PREC_F16 ? "float16 values in float32" : dtype_name(m->wdt),
                 qnote,
                 rss / 1048576.0, m->weight_bytes ? 100.0 * rss / m->weight_bytes : 0.0);
        log_info("load breakdown: open + config %.3f s, weights %.3f s (block-quantized copies %.3f s), "
                 "rest %.3f s; RssAnon %.1f MiB (%.1f after open), RssFile %.1f MiB",
                 t_open, t_weights, L.t_quant, dt - t_open - t_weights,
                 status_bytes("RssAnon:") / 1048576.0, anon_open / 1048576.0, status_bytes("RssFile:") / 1048576.0);
    }
    return run;
fail:
    model_weights_free(m);
    return NULL;
}

model *model_load(const model_load_opts *o, char *err, size_t errlen)
{
    return load(o, NULL, err, errlen);
}

model *model_load_source(const model_load_opts *o, struct wsrc *src, char *err, size_t errlen)
{
    return load(o, src, err, errlen);
}
