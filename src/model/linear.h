/* linear — the decoder's one projection step: y = x · Wᵀ (+ bias) (+ adapters).
 *
 * DESIGN: every weight projection of the decoder (q/k/v/o, gate/up/down,
 * the MoE router and experts, the LM head) is a linear_weight and runs
 * through linear().  The weight object carries what later features need
 * to hook in, so each lands here instead of at the call sites:
 *   - storage type: the kern_mat's type (f32, bf16, or a block-quantized
 *     GGUF type run by the int8 kernels of kernels/quant_dot*.c); linear()
 *     dispatches through the type-traits table (kernels/kern_types.h) to
 *     the matmul of that type for the ISA the weight was packed for, so a
 *     block-quantized type adds a traits entry, not a branch here;
 *   - adapters (LoRA, issue 14): a list of low-rank pairs (A, B); rows of
 *     the batch name their adapter in linear_exec.row_adapter and get
 *     y += scale · B (A x) after the base product.  Empty today;
 *   - shard (tensor parallelism, issue 12): which output rows and input
 *     columns of the full matrix this object holds.  Full today; a
 *     column-parallel weight holds a row range of W (an output slice), a
 *     row-parallel one a column range (its partial sums are all-reduced by
 *     the caller after the step).
 * The base product is the same kernel call as before: linear() adds one
 * table lookup, nothing per element.
 *
 * Threading: like kern_matmul, each of nth threads calls linear() with the
 * same arguments and its own ith/scratch; thread ith computes its share of
 * output columns.  The adapter pass needs the base product of all threads
 * first, so it runs after exec->barrier (only when adapters exist).
 */
#ifndef SGLC_MODEL_LINEAR_H
#define SGLC_MODEL_LINEAR_H

#include <stdint.h>

#include "kernels/kern_types.h"
#include "util/dtype.h"
#include "kernels/kernels.h"

/* Which part of the full (full_rows, full_cols) matrix a weight holds:
 * rows [row0, row0 + rows) and columns [col0, col0 + cols). */
typedef struct linear_shard {
    int row0, rows, full_rows;
    int col0, cols, full_cols;
} linear_shard;

/* One low-rank adapter of a projection: delta W = scale · B A. */
typedef struct linear_adapter {
    int id;             /* the value linear_exec.row_adapter uses for it */
    int rank;           /* r, 1..LINEAR_MAX_RANK */
    float scale;        /* lora_alpha / r (or / sqrt(r) for rsLoRA) */
    dtype dt;           /* storage of a and bt: DTYPE_F32 or DTYPE_BF16 (bf16 halves the bytes
                         * a decode step reads; used when the file holds bf16) */
    const void *a;      /* (r, k) of dt, borrowed */
    const void *bt;     /* (r, n) of dt = Bᵀ, borrowed (n = the shard's rows): the expand
                         * step adds scale · u[j] · bt[j, :] per rank j, contiguous rows */
} linear_adapter;

#define LINEAR_MAX_RANK 512

typedef struct linear_weight {
    kern_mat mat;                   /* (n, k) in its ISA's layout; owns its copy (kern_mat_free) */
    const float *bias;              /* (n) f32, or NULL; borrowed (the model's vector arena) */
    int n_adapters;
    const linear_adapter *adapters; /* (n_adapters), borrowed; NULL today */
    linear_shard shard;             /* full matrix today */
} linear_weight;

/* Per-thread call context. */
typedef struct linear_exec {
    int ith, nth;
    void *scratch;                  /* kern_matmul_scratch(m, k) bytes of this thread */
    const int32_t *row_adapter;     /* (m) adapter id per row, -1 = none; NULL = no row has one */
    int n_adapters;                 /* > 0: this call's adapters, used instead of the weight's */
    const linear_adapter *adapters; /* (n_adapters) borrowed; entries of rank 0 are skipped */
    void (*barrier)(void *arg);     /* meets all nth threads; needed only with adapters */
    void *barrier_arg;
} linear_exec;

/* Storage type of the weight. */
static inline kern_type linear_type(const linear_weight *w)
{
    return w->mat.qtype ? (kern_type)w->mat.qtype : kern_type_of_dtype(w->mat.dt);
}

/* The whole (n, k) matrix, unsharded. */
static inline linear_shard linear_shard_full(int n, int k)
{
    linear_shard s = {0, n, n, 0, k, k};
    return s;
}

/* Prepare w from row-major (n, k) src of src_dt, stored as `want` (see
 * kern_mat_init for borrowing); no bias, no adapters, full shard.
 * Returns 0 or -1. */
int linear_init(linear_weight *w, const void *src, dtype src_dt, int n, int k, dtype want,
                int borrow_ok);
/* As linear_init over storage types (kern_mat_init_kt): src of src_t
 * (f32, f16, bf16 or a block-quantized type such as a GGUF tensor's),
 * stored as want (f32, bf16, or a quantized weight type: borrowed in
 * place when src_t == want and borrow_ok, else converted or quantized at
 * load).  Returns 0, or -1 with a message. */
int linear_init_kt(linear_weight *w, const void *src, kern_type src_t, int n, int k, kern_type want,
                   int borrow_ok);
void linear_free(linear_weight *w);
/* Bytes resident for the weight (the matrix; bias and adapters are
 * counted by their owners). */
static inline size_t linear_bytes(const linear_weight *w) { return w->mat.bytes; }

/* The adapter pass alone: y (m, n) += scale · (x Aᵀ) Bᵀ for each row t
 * whose row_adapter[t] names one of ads (rows grouped by adapter, up to 4
 * rows per pass over A), on this thread's kern_split share of the output
 * columns.  No barrier.  Scalar reference and AVX2 (chosen at run time,
 * or forced with isa: 0 auto, 1 scalar, 2 AVX2 when the CPU has it). */
void linear_adapters_apply(float *y, const float *x, int m, int n, int k,
                           const linear_adapter *ads, int n_ads, const int32_t *row_adapter,
                           int ith, int nth, int isa);

/* y (m, n) = x (m, k) · Wᵀ (+ bias) (+ adapters of each row).  Thread
 * exec->ith's share of the output columns (all columns after the adapter
 * pass's barrier). */
void linear(float *y, const float *x, int m, const linear_weight *w, const linear_exec *exec);

#endif
