/* model_load.h — the loader state and helpers model.c shares with
 * model_load.c (internal to src/model; not part of model.h).
 *
 * DESIGN: one `loader` per model_load call; every helper returns nothing
 * and records a hard error once in L->err (L->failed) or a missing
 * tensor in L->missing, so load() checks L->failed / L->n_missing after
 * a batch of calls.
 */
#ifndef SGLC_MODEL_LOAD_H
#define SGLC_MODEL_LOAD_H

#include "model/model_impl.h"

/* ---- loader state ------------------------------------------------------ */

typedef struct loader {
    model_weights *m;
    const wsrc *src;    /* = &m->src */
    char *err;
    size_t errlen;
    int failed;          /* a hard error is in err */
    int no_quant;        /* the matrix being loaded is wanted as float even from a block type */
    int keep_f32;        /* the vector being loaded keeps its f32 values (not rounded to --dtype) */
    int n_quant;         /* block-quantized matrices kept in their type */
    int n_repacked;      /* of those, owned copies in an 8-row layout */
    double t_quant;      /* seconds in the block-quantized matrices' copy / repack (the load log) */
    char missing[1024];  /* names of missing tensors, comma-separated */
    int n_missing;
    void *shard_buf;     /* tensor parallelism: the owned bytes of the slice being loaded */
} loader;

/* Tensor parallelism: the part of a matrix this rank loads (model_tp in
 * model_impl.h says which); rows = an output slice (column-parallel),
 * cols = an input slice (row-parallel). */
typedef enum { SH_FULL = 0, SH_ROWS, SH_COLS } shard_kind;
typedef struct shard_sel {
    shard_kind kind;
    int off, len;
} shard_sel;
#define SH_ALL ((shard_sel){SH_FULL, 0, 0})
static inline shard_sel sh_rows(int off, int len) { return (shard_sel){SH_ROWS, off, len}; }
static inline shard_sel sh_cols(int off, int len) { return (shard_sel){SH_COLS, off, len}; }

/* The model precision as a storage type (what dummy tensors report). */
dtype prec_dtype(model_prec p);
/* A vector weight (n) as rounded f32 in the arena; NULL if absent (or
 * optional and missing).  load_layer_vec formats pat with layer il. */
const float *load_vec(loader *L, const char *name, int n, int optional);
const float *load_layer_vec(loader *L, const char *pat, int il, int n, int optional);
/* Projection pat.weight (n, k) of layer il (+ its bias when bias), this
 * rank's slice sel. */
void load_proj(loader *L, linear_weight *w, const char *pat, int il, int n, int k, int bias,
               shard_sel sel);
/* Projection pat.weight (n, k) keeping only the row ranges [off[j], off[j]
 * + len[j]) (ascending), concatenated (a column-parallel slice of several
 * output segments); the bias cut the same way. */
void load_proj_segs(loader *L, linear_weight *w, const char *pat, int il, int n, int k, int has_bias,
                    int nseg, const int *off, const int *len);
/* A fused projection split into n parts of rows[j] rows each (slices s). */
void load_fused(loader *L, const char *pat, int il, int n, linear_weight *const *out,
                const int *rows, const char *const *names, const shard_sel *s, int k);
/* Multi-head latent attention weights of layer il. */
void load_mla(loader *L, model_layer *l, int il);
/* Router, experts and shared expert of MoE layer il. */
void load_moe(loader *L, model_layer *l, int il);
/* Expert e of MoE layer il again from w's source (EPLB moves).  0 or -1 (err). */
int model_load_expert(model_weights *w, int il, int e, char *err, size_t errlen);
/* Embedding table and LM head (tied conventions, vocabulary slice). */
void load_embeddings(loader *L);

#endif
