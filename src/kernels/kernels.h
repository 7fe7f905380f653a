/* kernels — the CPU math of a forward pass.
 *
 * DESIGN: every kernel is a plain function over pointers and sizes.  Kernels
 * that are worth splitting across threads take (ith, nth) and do the share
 * of thread ith out of nth; they never create threads and never allocate —
 * per-thread scratch is handed in, sized by the matching *_scratch()
 * function.  Each kernel has a portable scalar reference (kern_ref_*, in
 * kernels_ref.c) and ISA variants (kernels_avx2.c, kernels_avx512.c)
 * selected once by kernels_init() from the CPU's features.  Tests check
 * every SIMD variant against its reference on odd sizes.
 *
 * Conventions:
 *   - activations are f32, row-major; a "row" is one token;
 *   - weights follow Hugging Face's Linear: W is (n, k) = (out, in), and
 *     y = x · Wᵀ (+ bias);
 *   - the KV cache is addressed by slot: K and V of one layer are
 *     (n_slots, n_kv_head, head_dim) of kv dtype; a sequence's position p
 *     lives at slot slots[p].  Pages are a scheduler concept: a page of
 *     size P is P consecutive slots.
 */
#ifndef SGLC_KERNELS_H
#define SGLC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "util/dtype.h"

/* ---- dispatch ---------------------------------------------------------- */

typedef enum kern_isa { KERN_ISA_SCALAR = 0, KERN_ISA_AVX2 = 1, KERN_ISA_AVX512 = 2 } kern_isa;

/* Choose the best ISA this CPU supports, or `force` ("scalar", "avx2",
 * "avx512", "amx" = avx512 + AMX tiles; NULL or "auto" = best; the SGLC_KERNELS environment variable
 * is read when force is NULL).  Returns 0, or -1 if the forced ISA is not
 * supported here (the selection is left unchanged). Safe to call again. */
int kernels_init(const char *force);
kern_isa kernels_isa(void);
const char *kernels_isa_name(kern_isa isa);
/* 1 when the AVX-512 selection also uses AMX tiles for bf16 prefill
 * matmuls ("amx", or auto on a CPU with AMX-TILE + AMX-BF16 whose OS
 * grants the tile state); "avx512" forces it off. */
int kernels_amx(void);
/* "avx512+amx", "avx512", "avx2" or "scalar": the current selection. */
const char *kernels_desc(void);

/* ---- kernel path choice (per CPU, at start-up) -------------------------
 * On AVX-512 a bf16-weight matmul has two bodies: widen bf16 -> f32 and
 * vfmadd231ps on f32 activations ("fma", exact in x), or vdpbf16ps on
 * activations rounded to bf16 ("dot").  Which one is faster depends on the
 * core (Sapphire Rapids: dot at half the FMA rate; Zen 4: at twice), so
 * kernels_init() decides once per process: SGLC_BF16_DOT=0 / 1 forces;
 * otherwise (unset or "auto") it times a small packed GEMM through each
 * body, single thread, best of several interleaved runs
 * (kern_bf16_decide), with a CPU-model table as the prior that wins near
 * ties.  One path for every m of a weight type (batch invariance).  In
 * auto mode weights with x_exact (the LM head) keep the fma body (f32
 * logits); SGLC_BF16_DOT=1 rounds them too.  AMX (m >= KERN_AMX_MIN_M on
 * CPUs with tiles) keeps its rule: on unless SGLC_KERNELS=avx512. */
typedef struct kern_choice {
    int bf16_dot;          /* 0 = fma body, 1 = dot body (x_exact weights: fma), 2 = dot for all */
    const char *bf16_why;  /* "measured", "measured: tie, table", "SGLC_BF16_DOT=1", "not avx512", ... */
    double fma_gflops, dot_gflops; /* best measured rates (1 thread); 0 = not measured */
    double measure_ms;     /* wall time the measurement took */
    const char *table;     /* CPU-model table entry ("amd-zen4", ...) or NULL */
    int table_dot;         /* the table's prior: -1 none, 0 fma, 1 dot */
    int amx;               /* kernels_amx() */
    const char *amx_why;   /* "cpuid + OS grant", "SGLC_KERNELS=avx512", "no AMX", ... */
} kern_choice;

/* The choice in force (valid after kernels_init). */
const kern_choice *kernels_choice(void);
/* One line describing it ("bf16 matmul: dot (measured 1 thread: fma 101.2, dot
 * 190.3 GFLOP/s; table amd-zen4: dot); amx: off (no AMX)"); returns buf. */
char *kernels_choice_line(char *buf, size_t n);

/* The decision rule of the measurement, exposed for tests.  t_fma[0..nf)
 * and t_dot[0..nd): times (any unit) of the same work through each body;
 * entries <= 0 or NaN are ignored, the best (smallest) of each counts.
 * The dot body wins when best_fma > best_dot * (1 + margin), the fma body
 * when best_dot > best_fma * (1 + margin); otherwise (a near tie, or no
 * valid time on a side) the prior wins: 1 = dot, 0 or -1 (none) = fma.
 * Returns 1 for dot, 0 for fma. */
int kern_bf16_decide(const double *t_fma, int nf, const double *t_dot, int nd, int prior, double margin);

/* ---- weight matrices --------------------------------------------------- */

typedef struct kern_mat {
    int n, k;          /* (out, in) */
    dtype dt;          /* DTYPE_F32 or DTYPE_BF16 (unused when qtype != 0) */
    int qtype;         /* 0: a float weight of dt; else the block-quantized kern_type
                        * (kern_types.h) of data: row-major GGUF blocks, layout 0 */
    int layout;        /* 0 = row-major (n, k); other values are private to an ISA file */
    int panel_nb;      /* > 0: a float weight in kern_pack_panels' column panels of panel_nb rows */
    kern_isa isa;      /* the ISA whose layout `data` is in */
    const void *data;  /* borrowed (e.g. mmap) unless owned != NULL */
    void *owned;       /* allocated copy (converted or repacked); freed by kern_mat_free */
    size_t bytes;      /* bytes resident at data */
    int x_exact;       /* 1: keep activations f32 (no AMX bf16 rounding), e.g. the LM head;
                        * set by the caller after kern_mat_init */
    const int32_t *perm; /* (k) or NULL; block-quantized weights only: stored column c is input
                          * perm[c] (act-order GPTQ sorted by group), y = W'·x[perm]; borrowed,
                          * set by the caller after kern_mat_init_kt */
} kern_mat;

/* Prepare a weight for kern_matmul.  src is row-major (n, k) of src_dt.
 * want is DTYPE_F32 or DTYPE_BF16.  If the current ISA wants another
 * layout, or src_dt != want, the weight is converted/repacked into an owned
 * buffer (and src is no longer needed); otherwise, when borrow_ok, data
 * points into src.  Returns 0, or -1 (bad args, out of memory). */
int kern_mat_init(kern_mat *m, const void *src, dtype src_dt, int n, int k, dtype want,
                  int borrow_ok);
/* kern_mat_init over storage types (kern_type ids of kern_types.h, as int
 * so this header stays below kern_types.h): src is row-major (n, k) of
 * src_t; want is F32, BF16 or a block-quantized weight type.
 *   - float src, float want: kern_mat_init;
 *   - src_t == want (quantized): borrowed in place when borrow_ok (a GGUF
 *     mmap; blocks need no alignment), else copied;
 *   - float src, quantized want: quantized at load, row by row (the type's
 *     row_from_f32; Q8_0 also without it), into an owned buffer;
 *   - quantized src, other want: dequantized (row_to_f32, else the
 *     kernels' own decoder) and converted / requantized.
 * An owned Q4_0, Q4_K, Q5_K, Q6_K or Q8_0 weight with n % 8 == 0 on an AVX2 / AVX-512
 * CPU is repacked 8 rows at a time (layout != 0, kernels/quant_dot.h):
 * about 2x the plain layout's GEMV compute rate; pass borrow_ok = 0 to
 * get it for a mapped GGUF tensor (costs a copy; Q4_K +2.8% bytes, Q5_K +2.3%,
 * the others keep their size).
 * k must be a multiple of want's (and src_t's) block size.  Returns 0, or
 * -1 with a message (bad shape, a type with no kernel, out of memory). */
int kern_mat_init_kt(kern_mat *m, const void *src, int src_t, int n, int k, int want_t,
                     int borrow_ok);
/* 1 when an owned weight of quantized type t with n rows gets a repacked
 * layout on this CPU (so borrow_ok = 0 is worth its copy), else 0. */
int kern_quant_repacks(int t, int n);
void kern_mat_free(kern_mat *m);
/* Row r of m as k floats into out, whatever ISA layout m was packed into
 * (float panels, row-major float or block-quantized): the stored values,
 * exactly.  0, or -1 where the layout cannot be read back (a repacked
 * block-quantized weight, an act-order permutation, r out of range). */
int kern_mat_row_f32(const kern_mat *m, int r, float *out);
/* Threads kern_mat_init may use to pack one large weight (default 1;
 * clamped to 1..256).  Set before loading, not while weights are packed. */
void kern_set_pack_threads(int n);
int kern_pack_threads(void);

/* Allocate `bytes` for weights: 64-byte aligned; buffers of 1 MiB and more
 * are 2 MiB aligned and advised onto transparent huge pages (weights are
 * streamed once per decode step, and 4 KiB pages cost a TLB walk every
 * 4 KiB).  Contents undefined; release with free().  NULL on failure. */
void *kern_weight_alloc(size_t bytes);

/* Per-thread scratch bytes kern_matmul needs for m rows of k inputs. */
size_t kern_matmul_scratch(int m, int k);

/* y (m, w->n) = x (m, w->k) · Wᵀ (+ bias (n) if non-NULL).  Thread ith
 * computes its share of output columns for all rows. */
void kern_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                 int nth, void *scratch);

/* ---- attention --------------------------------------------------------- */

typedef struct kern_attn_args {
    int n_q;               /* new query tokens of this sequence */
    int n_kv;              /* kv length including the new tokens: query i is at position n_kv - n_q + i */
    int n_head, n_kv_head, head_dim;
    const float *q;        /* (n_q, q_stride) : head h at q + i*q_stride + h*head_dim */
    size_t q_stride;
    const void *k_cache;   /* (n_slots, n_kv_head, head_dim) of kv_dt */
    const void *v_cache;   /* (n_slots, n_kv_head, head_dim) of kv_dt */
    dtype kv_dt;           /* DTYPE_F32, DTYPE_BF16, DTYPE_F8_E4M3, DTYPE_F8_E5M2 or DTYPE_I8 */
    float k_scale, v_scale; /* 8-bit float caches: a stored value means value * scale (0 = 1) */
    /* DTYPE_I8 (sglc's int8 cache): (n_slots, n_kv_head) f32 scales, one per token and kv
     * head; K[slot][h][d] = (int8) k_cache[slot][h][d] * k_tok_scale[slot * n_kv_head + h]
     * (likewise V).  Unused (may be NULL) for the other types. */
    const float *k_tok_scale, *v_tok_scale;
    const int32_t *slots;  /* (n_kv) slot of each position */
    int sliding_window;    /* 0 = none; else query at p sees positions > p - window */
    float scale;           /* usually 1/sqrt(head_dim) */
    float softcap;         /* 0 = none; else scores = softcap * tanh(s / softcap) */
    float *out;            /* (n_q, out_stride): head h at out + i*out_stride + h*head_dim */
    size_t out_stride;
    /* Tree verification (speculative decoding); tree_mask NULL = plain causal.  The kv
     * positions [tree_base, tree_base + tree_n) hold the nodes of a draft tree in an order
     * where every node comes after its parent.  A query at node u (kv position tree_base + u)
     * sees every position < tree_base (the prefix, subject to the sliding window) and node v
     * only when tree_mask[u * tree_n + v] (v is u's ancestor or u itself; the mask must be 0
     * for v > u).  tree_depth (tree_n): each node's depth (the root 0); the sliding window
     * measures distance in depth (a node's position is tree_base + its depth, not its index).
     * The n_q queries must be tree nodes or lie before tree_base. */
    const uint8_t *tree_mask;
    const int32_t *tree_depth;
    int tree_base, tree_n;
} kern_attn_args;

/* Tree masks (see kern_attn_args): the query at kv position qp sees the key at kv position
 * p <= qp.  Shared by every attention path. */
static inline int kern_attn_tree_sees(const kern_attn_args *a, int qp, int p)
{
    if (!a->tree_mask || p < a->tree_base || qp < a->tree_base) return 1;
    int u = qp - a->tree_base, v = p - a->tree_base;
    if (u >= a->tree_n || v >= a->tree_n || !a->tree_mask[(size_t)u * (size_t)a->tree_n + (size_t)v]) return 0;
    return a->sliding_window <= 0 || a->tree_depth[u] - a->tree_depth[v] < a->sliding_window;
}

/* The first kv position the query at kv position qp may see: 0, or the sliding window's
 * start, which for a tree node counts from its true position tree_base + depth (tree keys
 * inside the window are then decided by kern_attn_tree_sees). */
static inline int kern_attn_first_key(const kern_attn_args *a, int qp)
{
    if (a->sliding_window <= 0) return 0;
    int tp = qp;
    if (a->tree_mask && qp >= a->tree_base && qp - a->tree_base < a->tree_n)
        tp = a->tree_base + a->tree_depth[qp - a->tree_base];
    int start = tp - a->sliding_window + 1;
    if (start < 0) start = 0;
    if (a->tree_mask && start > a->tree_base) start = a->tree_base; /* the tree keys: by depth */
    return start;
}

/* Per-thread scratch bytes for kern_attention with kv length n_kv. */
size_t kern_attention_scratch(int n_kv, int head_dim);
/* Causal (or tree-masked) attention of the n_q new queries over positions [0, n_kv); GQA
 * maps query head h to kv head h / (n_head / n_kv_head).  Work is split
 * over (query, head) pairs. */
void kern_attention(const kern_attn_args *a, int ith, int nth, void *scratch);

/* Store one token's K or V row (n_kv_head*head_dim f32) at a slot. */
void kern_kv_store(void *cache, dtype kv_dt, int32_t slot, int row_len, const float *src);
/* The same for a cache with a scale (8-bit floats store src / scale,
 * rounded to nearest even and saturated; other types ignore it). */
void kern_kv_store_scaled(void *cache, dtype kv_dt, int32_t slot, int row_len, const float *src, float scale);
/* sglc's int8 cache: quantize one token's row of n_kv_head heads of head_dim f32 at a slot,
 * symmetric per head: scale = absmax / 127, q = round-half-even(x / scale) clamped to
 * [-127, 127] (a head of zeros gets scale 0 and zeros); cache (n_slots, n_kv_head,
 * head_dim) int8, tok_scale (n_slots, n_kv_head) f32. */
void kern_kv_store_i8(int8_t *cache, float *tok_scale, int32_t slot, int n_kv_head, int head_dim,
                      const float *src);
/* One token's row for any cache type: DTYPE_I8 goes to kern_kv_store_i8 (tok_scale used,
 * scale ignored), the others to kern_kv_store_scaled (tok_scale ignored). */
void kern_kv_store_tok(void *cache, float *tok_scale, dtype kv_dt, int32_t slot, int n_kv_head,
                       int head_dim, const float *src, float scale);

/* ---- elementwise / row ops (single row; callers split rows) ------------ */

/* y = x / rms(x) * (w + w_offset); w_offset is 0 (Llama) or 1 (Gemma). y may alias x. */
void kern_rmsnorm(float *y, const float *x, const float *w, int n, float eps, float w_offset);
/* cos/sin tables for one position: (rot_dim/2) each; angle_i = pos * inv_freq[i]; both scaled by mscale. */
void kern_rope_cache(float *cos_out, float *sin_out, int pos, const float *inv_freq, int half,
                     float mscale);
/* Rotate n_head heads of head_dim in x (heads contiguous), the first rot_dim
 * dims of each.  neox=1: pairs (i, i+rot_dim/2) (HF rotate_half);
 * neox=0: pairs (2i, 2i+1) (GPT-J / llama2.c). */
void kern_rope_apply(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                     const float *sin_t, int neox);
/* y = silu(gate) * up */
void kern_silu_mul(float *y, const float *gate, const float *up, int n);
/* y = gelu_tanh(gate) * up */
void kern_gelu_tanh_mul(float *y, const float *gate, const float *up, int n);
/* y = a + b (y may alias a) */
void kern_add(float *y, const float *a, const float *b, int n);
/* in-place softmax */
void kern_softmax(float *x, int n);
/* index of the max (first on ties) */
int kern_argmax(const float *x, int n);
/* dot product of f32 vectors */
float kern_dot_f32(const float *a, const float *b, int n);

/* ---- scalar references (always available; used by tests) -------------- */

void kern_ref_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                     int ith, int nth, void *scratch);
void kern_ref_attention(const kern_attn_args *a, int ith, int nth, void *scratch);
/* The int8-q ("qdot") attention over sglc's int8 cache, the AVX-512 VNNI kernel's numerics
 * (on unless SGLC_KV_INT8_QDOT=0): each query row q (head_dim) times the softmax scale is
 * quantized once, qs = absmax / 127, qi = round-half-even(q * scale / qs) clamped to
 * [-127, 127] (kern_attn_quant_q_i8); the score of key k (int8 ki, token-head scale ks) is
 * (float)(sum qi ki) * (qs * ks), the integer sum exact; softmax and P.V as kern_ref_attention. */
void kern_ref_attention_i8q(const kern_attn_args *a, int ith, int nth, void *scratch);
/* kern_ref_attention_i8q's scores with integer P.V (the AVX-512 kernel's numerics for head_dim a
 * multiple of 64 when every row of a kernel work unit starts at the same key, i.e. no sliding
 * window; on unless SGLC_KV_INT8_PDOT=0): each row's keys [start, pos] go in blocks of 16 from
 * start with the online softmax: block max bm, running max m' = max(m, bm), alpha = e^(m - m')
 * (1 for the first), p_j = e^(s_j - m'), sum = sum * alpha + sum_j p_j; p'_j = p_j * vs_j (V's
 * token-head scale) quantized per block to u8 (kern_attn_quant_p_u8: ps = max p' / 255, pu =
 * round-half-even(p' / ps)); acc_d = acc_d * alpha + (float)(sum_j pu_j v_jd) * ps, the integer
 * sum exact; out = acc / sum. */
void kern_ref_attention_i8qp(const kern_attn_args *a, int ith, int nth, void *scratch);
/* pu[0..n) = p (>= 0) quantized to u8 as above; returns ps (0 when every p is 0). */
float kern_attn_quant_p_u8(uint8_t *pu, const float *p, int n);
/* 1 unless the environment has SGLC_KV_INT8_PDOT=0 (read at each call). */
int kern_attn_i8pdot_on(void);
/* qi[0..hd) = the quantized q * scale as above; returns qs (0 for a row of zeros). */
float kern_attn_quant_q_i8(int8_t *qi, const float *q, float scale, int hd);
/* 1 unless the environment has SGLC_KV_INT8_QDOT=0 (read at each call). */
int kern_attn_i8qdot_on(void);
void kern_ref_rmsnorm(float *y, const float *x, const float *w, int n, float eps, float w_offset);
void kern_ref_rope_apply(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                         const float *sin_t, int neox);
void kern_ref_silu_mul(float *y, const float *gate, const float *up, int n);
void kern_ref_gelu_tanh_mul(float *y, const float *gate, const float *up, int n);
void kern_ref_add(float *y, const float *a, const float *b, int n);
void kern_ref_softmax(float *x, int n);
int kern_ref_argmax(const float *x, int n);
float kern_ref_dot_f32(const float *a, const float *b, int n);

/* Split [0, total) into nth near-equal parts; part ith is [*lo, *hi). */
static inline void kern_split(int total, int ith, int nth, int *lo, int *hi)
{
    int base = total / nth, rem = total % nth;
    *lo = ith * base + (ith < rem ? ith : rem);
    *hi = *lo + base + (ith < rem ? 1 : 0);
}

#endif
