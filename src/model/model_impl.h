/* model_impl — private to src/model: the loaded weights and the run state,
 * shared by the loader (model.c), the run state (model_run.c) and the
 * decoder core (decoder.c).
 *
 * DESIGN: a `struct model` (the public handle) is a run state that borrows
 * one model_weights.  The weights are written only while loading and
 * immutable afterwards, so several run states (model_share: replicas, one
 * per worker) read them at once; they are reference-counted and freed with
 * the last run state.  Everything a forward writes lives in the run state:
 * scratch, its reservation sizes, the chunk size, the read-bytes counter.
 * The KV tensors (model_kv) are created per run state by the caller.
 */
#ifndef SGLC_MODEL_IMPL_H
#define SGLC_MODEL_IMPL_H

#include "dist/dist.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "model/linear.h"
#include "model/model.h"
#include "model/wsource.h"

/* Precision the weights were rounded to (what --dtype asked for). */
typedef enum model_prec { MODEL_PREC_F32 = 0, MODEL_PREC_BF16 = 1, MODEL_PREC_F16 = 2 } model_prec;

typedef struct model_layer {
    const float *attn_norm, *ffn_norm; /* (hidden) f32; in weights.vecs */
    const float *q_norm, *k_norm;      /* (head_dim) f32, or NULL */
    const float *post_attn_norm, *post_ffn_norm; /* (hidden) f32, or NULL (Gemma) */
    int rope_local;                    /* rotate with inv_freq_local (Gemma 3 sliding layers) */
    /* projections (bias, when present, inside: (n) f32 in weights.vecs) */
    linear_weight wq, wk, wv, wo;      /* (n_head*hd, H) (n_kv*hd, H) (n_kv*hd, H) (H, n_head*hd) */
    linear_weight wgate, wup, wdown;   /* (I, H) (I, H) (H, I) */
    int window;                        /* sliding window of this layer, 0 = full */
    /* MoE layers (moe = 1): the dense wgate/wup/wdown are unused */
    int moe;
    linear_weight wrouter;             /* (E, H) */
    linear_weight *egate, *eup, *edown; /* (E) owned arrays: (Ie, H) (Ie, H) (H, Ie) */
    int has_shared;                    /* shared expert (Qwen2-MoE, DeepSeek), width Is */
    linear_weight wsgate, wsup, wsdown; /* (Is, H) (Is, H) (H, Is) */
    int has_ssig;                      /* Qwen2-MoE shared_expert_gate */
    linear_weight wssig;               /* (1, H), f32 */
    const float *router_bias;          /* (E) DeepSeek V3 e_score_correction_bias, or NULL */
    /* MLA layers (arch->mla): wq = q_proj when q_lora_rank is 0; wo = o_proj */
    linear_weight wq_a, wq_b, wkv_a;   /* (qr, H) (nh*(nope+rope), qr) (kvr+rope, H) */
    const float *q_a_norm, *kv_a_norm; /* (qr) (kvr) */
    linear_weight *wkb_t, *wvb;        /* (nh) owned, from kv_b_proj: per head its k_nope rows
                                        * transposed (kvr, nope), its v rows (v, kvr) */
    linear_weight *wkb;                /* (nh) owned: per head its k_nope rows (nope, kvr), for
                                        * the expanded prefill (mla.c); NULL when it is off */
    /* hybrid layers (arch->hybrid, nemotron_h.c): kind 'M' Mamba2 mixer
     * (wq = in_proj (di + conv_dim + nh, H), wo = out_proj (H, di)), '*'
     * attention without rope (wq wk wv wo), '-' MLP (wup, wdown); attn_norm
     * is the block's pre-norm.  0 = a plain decoder layer */
    char kind;
    int ssm_idx;                       /* 'M': index among the Mamba layers (its state) */
    const float *ssm_conv_w;           /* (conv_dim, conv_kernel) depthwise causal conv */
    const float *ssm_conv_b;           /* (conv_dim) or NULL */
    const float *ssm_a;                /* (nh) A = -exp(A_log) */
    const float *ssm_d, *ssm_dt_bias;  /* (nh) */
    const float *ssm_norm;             /* (di) gated RMSNorm weight (groups of di / G) */
} model_layer;

/* Tensor parallelism (model_tp.c): this rank's part of the model.  With
 * size 1 the local counts equal the config's.  Column-parallel q/k/v and
 * gate/up hold output rows, row-parallel o/down input columns (their
 * partial sums are all-reduced after the projection; their bias lives on
 * rank 0 only); KV heads are split, or replicated when fewer than the
 * ranks (rank r uses head r * n_kv / size); the embedding is replicated
 * (rows read on lookup), the LM head holds a vocabulary slice whose
 * logits are gathered to rank 0. */
typedef struct model_tp {
    struct dist_group *g;              /* borrowed; NULL = one process.  All ranks: commands, stage
                                        * boundaries, LoRA status */
    struct dist_group *tg;             /* this stage's tensor-parallel ranks (all-reduce, logits
                                        * gather): g without PP, a sub-group of g under TP x PP,
                                        * NULL when tp_n is 1.  Borrowed */
    int rank, size;                    /* in g: rank = stage * tp_n + tp_rank */
    int n_head, n_kv_head;             /* local heads */
    int head0, kv_head0;               /* first local q / kv head */
    int inter, moe_inter;              /* local MLP / expert widths */
    int shared_inter;                  /* local shared-expert width (0: none) */
    int vocab0, vocab_n, vocab_max;    /* LM head rows [vocab0, vocab0 + vocab_n); vocab_max =
                                        * the widest rank's (gather block) */
    int tp_n, tp_rank;                 /* tensor-parallel ranks of a stage (size / pp_n) */
    int pp_n, stage;                   /* pipeline stages (1 = none) and this rank's */
    int layer0, layer1;                /* this stage's layers [layer0, layer1) */
    int ssm_nh, ssm_h0;                /* Mamba2 (NemotronH): local heads, the first one */
    int ssm_ng, ssm_g0;                /* local groups, the first (1 shared group when
                                        * n_groups < tp_n: its B / C replicated) */
    int ssm_l0, ssm_nl, ssm_nl_max;    /* Mamba layers: this stage's first index and count,
                                        * the most any stage holds (state pool sizing) */
    int pp_mb;                         /* rank 0: --pp-max-micro-batch-size (0 = unset: one
                                        * micro-batch; model_set_pp_micro / _default_micro) */
    int next_kv_id;                    /* rank 0: ids of the KV caches the workers mirror */
} model_tp;

typedef struct model_weights {
    int refs;                          /* run states borrowing these weights (atomic) */
    model_config cfg;
    const model_arch *arch;            /* borrowed from the registry */
    model_prec prec;
    dtype wdt;                         /* storage of the matrices: F32 or BF16 */

    wsrc src;                          /* owned; holds borrowed weight bytes and embedding rows */

    const void *embed;                 /* (vocab, H) row-major of embed_t.type; borrowed (src or
                                        * blocks); NULL: rows are read through src (dummy) */
    wsrc_tensor embed_t;               /* the embedding tensor as the source gave it */
    linear_weight lm_head;             /* (vocab, H); may borrow the same bytes as embed; empty
                                        * for a classifier (cfg.n_labels > 0) */
    linear_weight score;               /* (n_labels, H) f32: *ForSequenceClassification's head */
    const float *final_norm;           /* (H) */
    model_layer *layers;               /* (n_layer) owned */

    float *vecs;                       /* owned arena of all f32 vectors */
    size_t vecs_cap, vecs_used;        /* in floats */
    void **blocks;                     /* owned buffers that borrowed kern_mats point into */
    int n_blocks, cap_blocks;
    size_t weight_bytes;
    size_t expert_bytes;               /* bytes of one expert's gate+up+down (MoE) */
    size_t all_expert_bytes;           /* sum over MoE layers of E * expert_bytes */

    model_tp tp;                       /* tensor-parallel shard (size 1: the whole model) */
    struct model_ep *ep;               /* owned; expert parallelism (model_ep.h), NULL = none */
    float *inv_freq;                   /* (rot_dim/2) owned; static rope types (longrope: short) */
    float *inv_freq_long;              /* (rot_dim/2) owned; longrope's long factors, else NULL */
    int rope_switch;                   /* longrope: sequences longer than this use inv_freq_long */
    float *inv_freq_local;             /* (rot_dim/2) owned, or NULL: layers with rope_local */
    float attn_factor;                 /* cos/sin scale (yarn) */
    int rot_dim;
    int mla_expand_min;                /* MLA: SGLC_MLA_EXPAND_MIN at load, the run states' default:
                                        * a sequence with at least this many new tokens in a
                                        * forward runs the expanded attention; 0 = automatic (mla.c) */
    int mamba_ssd_min, mamba_ssd_chunk; /* Mamba2: SGLC_MAMBA_SSD_MIN_TOKENS (0 = off) and
                                        * SGLC_MAMBA_SSD_CHUNK at load (mamba2_ssd.h) */
} model_weights;

struct model {
    model_weights *w;                  /* shared (refcounted); read-only once loaded */
    const model_config *cfg;           /* = &w->cfg */
    model_tp tp;                       /* the group this run state drives: a copy of w->tp (the
                                        * shard, the same for every group over w) with its own g /
                                        * tg (model_share_group) and rank 0's command state
                                        * (pp_mb, next_kv_id).  Runtime code reads m->tp */
    int chunk_tokens;                  /* rows per internal forward (model_set_chunk_tokens) */
    int pp_mb_rx;                      /* a worker: the micro-batch size of the FORWARD it runs */
    int mla_expand_min;                /* MLA: model_set_mla_expand_min (from w's at creation) */
    float *kv_k_scale, *kv_v_scale;    /* (n_layer) owned or NULL: model_set_kv_scales */
    size_t touched_bytes;              /* expert bytes the current/last forward read */
    int mi_on;                         /* multi-item scoring: split prompts at mi_delim */
    int32_t mi_delim;                  /* (model_set_multi_item_delimiter, multi_item.c) */

    /* scratch, sized by model_reserve for cap_tokens rows */
    int cap_tokens, cap_kv, cap_threads;
    void *scratch_mem;                 /* owned, holds all of the below */
    float *x;                          /* (cap_tokens, H) residual stream */
    float *xn;                         /* (cap_tokens, H) normed input, then o/down projection out */
    float *q;                          /* (cap_tokens, n_head*hd) */
    float *k, *v;                      /* (cap_tokens, n_kv*hd) */
    float *att;                        /* (cap_tokens, n_head*hd) */
    float *gate, *up;                  /* (cap_tokens, I) */
    float *cos_t, *sin_t;              /* (cap_tokens, rot_dim/2) */
    float *cos_l, *sin_l;              /* the same for inv_freq_local, or NULL */
    float *lrows;                      /* (cap_tokens, H) normed rows that need logits */
    int32_t *tok_seq;                  /* (cap_tokens) sequence of each row */
    /* MoE scratch (NULL when the model has no MoE layer); A = cap_tokens * K */
    float *rlog;                       /* (cap_tokens, E) router logits */
    int32_t *esel, *eorder, *einv;     /* (A) expert of assignment, sorted ids, position */
    float *ew;                         /* (A) routing weight of assignment */
    int32_t *ecnt, *eoff;              /* (E), (E+1) */
    float *ex;                         /* (A, H) gathered inputs, then expert outputs */
    float *eg, *eu;                    /* (A, Ie) */
    float *sg, *su;                    /* (cap_tokens, Is) shared expert gate / up */
    float *sout;                       /* (cap_tokens, H) shared expert output */
    float *ssig;                       /* (cap_tokens) Qwen2-MoE shared gate logits */
    float *mla;                        /* MLA scratch (mla_scratch_floats), NULL otherwise */
    struct mla_plan *mla_plan;         /* owned, MLA: this forward's expanded / absorbed split and
                                        * the expansion buffer (mla_prepare); NULL before */
    float *ssm;                        /* Mamba2 scratch (mamba2_scratch_floats), or unused */
    char *tscratch;                    /* (cap_threads, tstride) per-thread kernel scratch */
    size_t tstride;
    /* tensor parallelism (model_tp.c): local logits and the gather buffer */
    float *tp_logits, *tp_gather;
    size_t tp_cap;                     /* floats in tp_logits */
    double tp_comm_s;                  /* seconds thread 0 spent in all-reduces (waits included) */
    long tp_n_allreduce;
    long pp_fwd_micro, pp_n_micro;     /* pipelined forwards and the micro-batches they ran */
    /* hidden-state capture for EAGLE drafters (model_set_capture): per
     * token row, the rows at the capture points go to store[slot] */
    struct {
        float *store;                  /* (n_slots, n_at * H) borrowed, NULL = off */
        int64_t n_slots;
        int n_at;
        int at[MODEL_CAPTURE_MAX];     /* layer whose input is captured, or MODEL_CAPTURE_FINAL_NORM */
    } capture;
};
/* model_run.c: the decoder's capture hook: rows [lo, hi) of m->x at point
 * `at` (a layer's input; n_layer = after the last layer, when the final
 * norm is also applied for MODEL_CAPTURE_FINAL_NORM points). */
void model_capture_rows(model *m, const model_batch *b, int at, int lo, int hi);

/* multi_item.c: the rewritten sequence arrays of a multi-item batch (owned). */
typedef struct model_mi_buf {
    int32_t *start, *kvl, *rl;         /* (n_seqs + 1), (n_seqs), (n_seqs) */
    int32_t *pos, *rpos;               /* (n_tokens): kv positions, rope positions */
    const int32_t **slots;             /* (n_seqs): the batch's lists or into slot_mem */
    int32_t *slot_mem;                 /* the segments' slot lists */
} model_mi_buf;
/* Rewrite b's whole-prompt sequences that hold delim into query and
 * segment sub-sequences (see multi_item.c) into *out (arrays in *mb).
 * 1 rewritten, 0 nothing to do (*mb empty), -1 out of memory. */
int model_mi_split(const model_batch *b, int32_t delim, model_batch *out, model_mi_buf *mb);
void model_mi_buf_free(model_mi_buf *mb);

/* model_tree.c: the draft trees of a batch (model_batch.seq_tree_parent) turned into the
 * attention kernel's masks and rope positions (owned arrays). */
typedef struct model_tree_buf {
    model_tree *trees;                 /* (n_seqs) */
    const model_tree **seq;            /* (n_seqs): &trees[s] or NULL */
    uint8_t *mask;                     /* every tree's (n, n) mask */
    int32_t *depth;                    /* every tree's (n) depths */
    int32_t *rpos;                     /* (n_tokens): rope positions */
} model_tree_buf;
/* Check b's trees and fill *out (= *b with rope_pos and seq_tree set) from *tb.  1 done, 0 no
 * tree in b (*tb empty), -1 bad tree / unsupported model / out of memory (logged). */
int model_tree_prepare(const model *m, const model_batch *b, model_batch *out, model_tree_buf *tb);
void model_tree_buf_free(model_tree_buf *tb);
/* Set a's tree fields for sequence s of b (nothing when s has no tree). */
void model_tree_args(const model_batch *b, int s, kern_attn_args *a);

/* model.c: free weights (refs already 0). */
void model_weights_free(model_weights *w);
/* model_run.c: a run state over w (takes one reference).  NULL on OOM. */
model *model_run_create(model_weights *w);

/* model_tp.c: the local counts of w->tp from the config and group (all
 * 1/size checks; 0, or -1 with a message). */
int model_tp_setup(model_weights *w, struct dist_group *g, struct dist_group *tg, int pp_size, char *err,
                   size_t errlen);
/* Pipeline parallelism around the decoder pass: stage > 0 receives the
 * previous stage's residual rows into m->x before it (model_pp_before);
 * after it a stage sends them on and every rank takes the last stage's
 * output rows into `out` (model_pp_after).  No-ops without PP.  0/-1. */
int model_pp_before(model *m, const model_batch *b);
int model_pp_after(model *m, const model_batch *b, float *out);
/* One pipeline broadcast over the whole group from stage `stage`'s TP rank
 * 0 (the stage-boundary timeout); every rank calls it.  0/-1. */
int model_pp_bcast(model *m, void *buf, size_t bytes, int stage);
/* Rank 0 before a checked forward of b: send it to the workers; pp_mb > 0:
 * the stages pipeline it in micro-batches of pp_mb sequences (decoder.c
 * forward_pp_micro; the workers read it into m->pp_mb_rx).  0/-1. */
int model_tp_send_forward(model *m, model_kv *kv, const model_batch *b, int pp_mb);
/* After the decoder: the LM head rows of every rank into logits (rank 0)
 * or to rank 0 (workers).  0/-1. */
int model_tp_gather_logits(model *m, const model_batch *b, float *logits);
/* Sum of partial rows over the group (thread ith of the pool; thread 0
 * talks to the group, the others wait at the pool barrier). */
void model_tp_allreduce(model *m, float *x, size_t n, int ith, tpool *pool);
/* Where the decoder writes the LM head's output: the local slice buffer
 * (size > 1) or logits. */
float *model_tp_logits_out(model *m, const model_batch *b, float *logits);
/* A collective of this model's group failed (the forward's result is void). */
static inline int model_tp_failed(const model *m)
{
    return (m->tp.g && dist_broken(m->tp.g)) || (m->tp.tg && dist_broken(m->tp.tg));
}
/* TP x PP: when this stage's group broke, break the whole group with its
 * error (the other stages stop waiting).  1 when either is broken. */
int model_tp_stage_failed(model *m);
/* Rank 0: a KV cache was made / is freed; the workers mirror it. */
int model_tp_kv_created(model *m, model_kv *kv);
void model_tp_kv_destroyed(model_kv *kv);
/* Mamba2 (NemotronH) under TP / PP: rank 0 tells the workers to make a
 * state pool of n_states (model_kv_set_mamba_states) or to copy a slot
 * (model_kv_mamba_copy) in their caches; no-ops elsewhere.  0 or -1. */
int model_tp_mamba_states(model *m, model_kv *kv, int n_states, dtype ssm_dt);
int model_tp_mamba_copy(model_kv *kv, int dst, int src);
/* mamba2.c, from model_tp_setup: this rank's Mamba heads, groups and
 * layers (all of them in one process).  0, or -1 with err. */
int model_tp_setup_mamba(model_weights *w, char *err, size_t errlen);
/* Rank 0: tell t's group's workers to exit (once per group; model_free
 * calls it for its run state's group, model_weights_free for the load's). */
void model_tp_shutdown(model_tp *t);
/* Rank 0: hold the group for one command sequence (a forward, a LoRA load)
 * against another thread's (recursive; no-ops in one process). */
void model_tp_lock(const model *m);
void model_tp_unlock(const model *m);
/* model_run.c: values per slot per layer in a KV cache of the model's
 * layout (n_kv_head * head_dim; MLA: kv_lora_rank + qk_rope_head_dim, one
 * row per slot, no separate V). */
int model_kv_row_len(const model_config *c, int n_kv_head);

/* mla.c: multi-head latent attention of layer il over the rows of b
 * (xn normed input in, xn = o_proj(attention) out), run by all nth
 * threads of the forward like the rest of fwd_task; stores each new
 * token's latent + rope key into kv->k[il] at its slot.  row_ad (LoRA,
 * model_lora_rows; NULL = none): b's adapters on q / q_a / q_b / kv_a /
 * o_proj and kv_b_proj (on the absorbed per-head matrices). */
struct tpool;
void mla_attention(model *m, model_kv *kv, const model_batch *b, const model_layer *l, int il,
                   const linear_exec *ex, const int32_t *row_ad, struct tpool *pool, int lo, int hi);
/* mla.c: before the threads of a forward of b start: choose per sequence
 * the expanded attention (m->mla_expand_min new tokens, or the automatic rule; no kv_b
 * LoRA in the batch, the expansion fits MLA_EXPAND_BYTES) or the absorbed
 * one, and grow m's expansion buffer.  0, or -1 (out of memory; logged). */
int mla_prepare(model *m, const model_batch *b, const int32_t *row_ad);
void mla_plan_free(struct mla_plan *p);
/* mla.c: SGLC_MLA_EXPAND_MIN into *out (unset or "auto": 0, the automatic
 * rule); 0, or -1 with a message in err when it is not auto or an integer >= 1. */
int mla_expand_min_env(int *out, char *err, size_t errlen);
/* mla.c: floats of MLA scratch for T rows (0 when c has no MLA). */
size_t mla_scratch_floats(const model_config *c, size_t T);
/* mla.c: per-head matrices of layer l from kv_b_proj as f32 (nh*(nope+v),
 * kvr), stored as wdt.  Adds their bytes to *bytes.  0, or -1 (OOM). */
int mla_split_kv_b(model_layer *l, const model_config *c, int nh, const float *kvb, dtype wdt,
                   size_t *bytes);

/* nemotron_h.c / mamba2.c: hybrid Mamba2 models (see those files). */
struct loader;
/* Load hybrid layer il (kind per cfg.layer_kinds) through the loader. */
void nemotron_h_load_layer(struct loader *L, model_layer *l, int il);
/* f32 vectors the hybrid layers add to the loader's arena, per layer. */
size_t nemotron_h_layer_floats(const model_config *c);
/* One hybrid block of layer il over b's rows: x += xn (il > layer0);
 * xn = mixer(norm(x)).  row_ad: LoRA, the adapter of each row or NULL
 * (attention and MLP blocks; Mamba2 mixers take none, refused at load).
 * Run by all threads of fwd_task (as mla_attention). */
void nemotron_h_layer(model *m, model_kv *kv, const model_batch *b, const model_layer *l, int il,
                      const linear_exec *ex, const int32_t *row_ad, struct tpool *pool, int lo, int hi);
/* mamba2.c: floats of Mamba2 scratch for T rows on nth threads (0 when c
 * has no Mamba layer); ssd_chunk: the chunked scan's chunk size, 0 when it
 * is off. */
size_t mamba2_scratch_floats(const model_config *c, size_t T, int nth, int ssd_chunk);
/* mamba2.c: before a checked forward of b (thread of the caller): check
 * each sequence's state slot and length, zero the states of sequences
 * that start at position 0.  0, or -1 logged. */
int mamba2_begin(const model *m, model_kv *kv, const model_batch *b);
/* mamba2.c: after it: each sequence's slot now holds seq_kv_len tokens. */
void mamba2_end(model_kv *kv, const model_batch *b);
/* mamba2.c: the Mamba2 mixer of layer l on xn (T, H) normed rows ->
 * xn = out_proj(y), all threads (as nemotron_h_layer). */
void mamba2_mixer(model *m, model_kv *kv, const model_batch *b, const model_layer *l,
                  const linear_exec *ex, struct tpool *pool, int lo, int hi);
/* mamba2.c: a KV cache's recurrent states (model_kv.ssm). */
struct mamba2_cache *mamba2_cache_create(const model *m, int n_states, dtype ssm_dt);
void mamba2_cache_free(struct mamba2_cache *mc);

/* decoder.c: embedding row `token` (H values) as the decoder's input. */
void model_embed_row(const model_weights *w, int token, float *out);

/* model_lora.c: LoRA per batch (model.h's model_batch adapters). */
/* Add adapter `ad`'s embedding delta for token `tok` to the embedded row
 * out (H values, already scaled as model_embed_row scales). */
void model_lora_embed(const model_weights *w, const model_adapter *ad, int tok, float *out);
#define MODEL_MAX_BATCH_ADAPTERS 64
/* 0, or -1 after logging a malformed adapter part of b. */
int model_lora_check(const model *m, const model_batch *b);
/* Adapter index per token row (*row_ad, n_tokens) and per logit row
 * (*lrow_ad, n_logits), one owned allocation in *row_ad (free it), with
 * room after them for n_tokens * k_moe more (MoE: the adapter of each
 * routed assignment in expert order, filled by the MoE block); both
 * NULL when no sequence has an adapter.  0 or -1 (OOM). */
int model_lora_rows(const model_batch *b, const int32_t *tok_seq, int k_moe, int32_t **row_ad,
                    int32_t **lrow_ad);
/* The exec for projection p of layer il (il < 0: the LM head, rows =
 * logit rows) with b's adapters of it: ex itself when none applies, else
 * buf (a copy of ex) pointing at abuf ((MODEL_MAX_BATCH_ADAPTERS) filled
 * here) and row_ad. */
const linear_exec *model_lora_exec(const model_batch *b, const int32_t *row_ad,
                                   const linear_exec *ex, int il, int p, linear_exec *buf,
                                   linear_adapter *abuf);
/* Slot kinds of model_lora_exec_at: p is a model_proj (il < 0: LM head),
 * a model_mla_proj, the kv_b view index (h * 2 + 0 for Wk[h]ᵀ, + 1 for
 * Wv[h]; nh = n_head) or the expert slot (e * 3 + MODEL_EXPERT_*, e =
 * n_expert: shared). */
enum { MODEL_LORA_PROJ = 0, MODEL_LORA_MLA, MODEL_LORA_KVB, MODEL_LORA_EXPERT };
/* model_lora_exec for any slot kind (rows = row_ad). */
const linear_exec *model_lora_exec_at(const model_batch *b, const int32_t *row_ad,
                                      const linear_exec *ex, int kind, int il, int p, int nh,
                                      linear_exec *buf, linear_adapter *abuf);
/* Only the adapter pass of ex (none when ex carries no adapters) on y (m,
 * n) from x (m, k); the base product must be complete (a barrier after
 * it).  This thread's columns. */
void model_lora_apply(float *y, const float *x, int m, int n, int k, const linear_exec *ex);
/* n projections of the same input x (q/k/v, gate/up): every base product
 * first, then, when any has adapters, one barrier and their adapter passes
 * (one barrier for the group instead of one per projection).  Same
 * threading contract as linear(). */
void model_lora_linear_group(int n, float *const *y, const float *x, int m, const linear_weight *const *w,
                             const linear_exec *const *ex);

#endif
