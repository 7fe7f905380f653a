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
} model_layer;

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
    linear_weight lm_head;             /* (vocab, H); may borrow the same bytes as embed */
    const float *final_norm;           /* (H) */
    model_layer *layers;               /* (n_layer) owned */

    float *vecs;                       /* owned arena of all f32 vectors */
    size_t vecs_cap, vecs_used;        /* in floats */
    void **blocks;                     /* owned buffers that borrowed kern_mats point into */
    int n_blocks, cap_blocks;
    size_t weight_bytes;
    size_t expert_bytes;               /* bytes of one expert's gate+up+down (MoE) */
    size_t all_expert_bytes;           /* sum over MoE layers of E * expert_bytes */

    float *inv_freq;                   /* (rot_dim/2) owned; static rope types */
    float *inv_freq_local;             /* (rot_dim/2) owned, or NULL: layers with rope_local */
    float attn_factor;                 /* cos/sin scale (yarn) */
    int rot_dim;
} model_weights;

struct model {
    model_weights *w;                  /* shared (refcounted); read-only once loaded */
    const model_config *cfg;           /* = &w->cfg */
    int chunk_tokens;                  /* rows per internal forward (model_set_chunk_tokens) */
    float *kv_k_scale, *kv_v_scale;    /* (n_layer) owned or NULL: model_set_kv_scales */
    size_t touched_bytes;              /* expert bytes the current/last forward read */

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
    char *tscratch;                    /* (cap_threads, tstride) per-thread kernel scratch */
    size_t tstride;
};

/* model.c: free weights (refs already 0). */
void model_weights_free(model_weights *w);
/* model_run.c: a run state over w (takes one reference).  NULL on OOM. */
model *model_run_create(model_weights *w);

/* decoder.c: embedding row `token` (H values) as the decoder's input. */
void model_embed_row(const model_weights *w, int token, float *out);

#endif
