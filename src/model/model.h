/* model — load a checkpoint and run batched forward passes.
 *
 * DESIGN: the seam between the scheduler and the math.  model_load reads
 * config.json, picks the architecture from the registry and loads weights
 * (safetensors, memory-mapped and borrowed where the kernel layout fits,
 * else converted/repacked once with the source pages dropped; or random
 * "dummy" weights of the real shapes).  model_forward runs one batch of
 * any mix of prefill chunks and decode tokens over a slot-addressed KV
 * cache and returns logits for the rows asked for.  The model knows no
 * requests, pages or queues: the caller (scheduler, `sglc generate`, the
 * benchmark) owns slot allocation and passes each sequence's slot list.
 *
 * Batch layout (n_tokens rows, sequences contiguous):
 *
 *   tokens    [ a0 a1 a2 | b0 | c0 c1 ]        n_tokens = 6
 *   seq_start [ 0,        3,   4,     6 ]      n_seqs = 3
 *   seq_kv_len[ 3,        9,   7 ]             kv length after this step
 *   positions [ 0 1 2 | 8 | 5 6 ]              = kv_len - n_new + i
 *   seq_slots [s] -> int32[seq_kv_len[s]]      slot of every position
 *
 * The new tokens' K/V are written at seq_slots[s][positions[t]]; earlier
 * positions must already hold that sequence's K/V (its cached prefix).
 *
 * A `model` handle is a run state (scratch, counters) over weights that are
 * immutable after load and may be shared by several run states
 * (model_share); see model_impl.h.
 *
 * Threading: model_forward runs on the caller plus the pool's workers; one
 * model + kv is driven by one thread at a time.
 */
#ifndef SGLC_MODEL_MODEL_H
#define SGLC_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/linear.h"
#include "util/dtype.h"
#include "util/threadpool.h"

struct dist_group;

typedef enum model_load_format {
    MODEL_LOAD_AUTO = 0,        /* safetensors */
    MODEL_LOAD_SAFETENSORS = 1,
    MODEL_LOAD_DUMMY = 2,       /* random weights from config.json alone */
    MODEL_LOAD_GGUF = 3,        /* a GGUF file (auto detects *.gguf and folders holding one) */
} model_load_format;

typedef struct model_load_opts {
    const char *model_path;     /* directory with config.json (+ *.safetensors), or a .gguf file */
    int dtype;                  /* -1 = auto (config torch_dtype), else DTYPE_* (see below) */
    model_load_format load_format;
    const char *override_json;  /* --json-model-override-args, or NULL */
    int context_length;         /* --context-length, 0 = from config */
    uint64_t random_seed;       /* dummy weights */
    const char *quantization;   /* --quantization (SGLang's method name), or NULL: see model/hfq.h */
    struct dist_group *dist;    /* tensor parallelism: this rank's group (dist/dist.h), or NULL
                                 * (one process).  Borrowed; must outlive the model */
    int pp_size;                /* > 1: the group's ranks are pipeline stages (layers split);
                                 * with dist_tp, size / pp_size tensor-parallel ranks each */
    struct dist_group *dist_tp; /* TP x PP: this rank's stage group (dist_split of dist: the
                                 * stage's tensor-parallel ranks), or NULL.  Borrowed */
    const struct model_ep_opts *ep; /* expert parallelism / EPLB (model_ep.h), or NULL; borrowed */
} model_load_opts;
/* Weight storage by dtype: float32 -> f32; bfloat16 -> bf16; float16 ->
 * values rounded to f16 precision and stored as f32 (the kernels have no
 * f16 matmul; f16 -> f32 is exact, f16 -> bf16 would lose 3 mantissa bits).
 * auto follows config.json's torch_dtype (f32 when absent).  Activations
 * are always f32. */

typedef struct model model;

typedef struct model_kv {
    int n_layer;
    int n_slots;
    dtype dt;                   /* DTYPE_F32, DTYPE_BF16, DTYPE_F8_E4M3, DTYPE_F8_E5M2 or DTYPE_I8 */
    int row_len;                /* n_kv_head * head_dim */
    void **k, **v;              /* (n_layer) -> (n_slots, n_kv_head, head_dim) of dt; owned */
    float *k_scale, *v_scale;   /* (n_layer) 8-bit caches: stored value * scale (1 unless
                                 * model_set_kv_scales gave others); owned */
    int n_tok_head;             /* DTYPE_I8: scales per token (n_kv_head of this rank; 1 for MLA) */
    float **k_tok, **v_tok;     /* DTYPE_I8: (n_layer) -> (n_slots, n_tok_head) f32 scales, in
                                 * mem (MLA: v_tok = k_tok); NULL for the other types */
    void *mem;                  /* one owned allocation holding all of them */
    size_t bytes;
    int tp_id;                  /* tensor parallelism: the workers' copy of this cache (model_tp.c) */
    struct mamba2_cache *ssm;   /* hybrid Mamba2 models: the per-request conv + SSM states
                                 * (mamba2.c), owned; NULL for other models */
    void *tp_w;                 /* rank 0: the weights whose workers hold that copy; else NULL */
} model_kv;

/* LoRA (src/lora): the projections an adapter may change, per layer. */
typedef enum model_proj {
    MODEL_PROJ_Q = 0, MODEL_PROJ_K, MODEL_PROJ_V, MODEL_PROJ_O,
    MODEL_PROJ_GATE, MODEL_PROJ_UP, MODEL_PROJ_DOWN,
    MODEL_NPROJ
} model_proj;

/* One adapter's low-rank deltas as model_forward uses them.  Immutable
 * while any batch names it. */
typedef struct model_adapter {
    int n_layer;
    uint64_t tp_uid;            /* rank 0 of a tensor/pipeline-parallel group: the id the worker
                                 * ranks hold their shard of this adapter under (0 = not shipped;
                                 * model_tp_lora_load) */
    const linear_adapter *proj; /* (n_layer * MODEL_NPROJ), [layer * MODEL_NPROJ + p];
                                 * rank 0 = that projection is unchanged; borrowed */
    linear_adapter lm_head;     /* rank 0 = none */
    linear_adapter embed;       /* embed_tokens, rank 0 = none: a = Aᵀ (vocab, r) f32 (row = a
                                 * token's r values), bt = Bᵀ (r, hidden) f32; the row of token t
                                 * gains scale · a[t] · bt before the model's embedding scaling */
    /* DeepSeek MLA layers, NULL when the adapter has none: */
    const linear_adapter *mla;  /* (n_layer * MODEL_NMLA), [layer * MODEL_NMLA + MODEL_MLA_*] */
    const linear_adapter *kvb;  /* (n_layer * n_head * 2): kv_b_proj's delta on the absorbed
                                 * per-head matrices, [(layer * n_head + h) * 2] on Wk[h]ᵀ
                                 * (kvr, nope), + 1 on Wv[h] (v_head_dim, kvr) */
    /* MoE layers, NULL when none: (n_layer * (n_expert + 1) * 3),
     * [(layer * (n_expert + 1) + e) * 3 + MODEL_EXPERT_*], e = n_expert the shared expert */
    const linear_adapter *moe;
    int n_expert;
} model_adapter;

/* MLA-only projections (DeepSeek), model_adapter.mla's slots. */
typedef enum model_mla_proj {
    MODEL_MLA_Q_A = 0, MODEL_MLA_Q_B, MODEL_MLA_KV_A, MODEL_NMLA
} model_mla_proj;
/* An expert's parts, model_adapter.moe's slots. */
enum { MODEL_EXPERT_GATE = 0, MODEL_EXPERT_UP, MODEL_EXPERT_DOWN };

typedef struct model_batch {
    int n_tokens;
    const int32_t *tokens;      /* (n_tokens) */
    const int32_t *positions;   /* (n_tokens) */
    int n_seqs;
    const int32_t *seq_start;   /* (n_seqs + 1): sequence s owns rows [seq_start[s], seq_start[s+1]) */
    const int32_t *seq_kv_len;  /* (n_seqs): kv length after this step, incl. new tokens */
    const int32_t *const *seq_slots; /* (n_seqs) -> (seq_kv_len[s]) slot per position */
    int n_logits;
    const int32_t *logit_rows;  /* (n_logits) token rows whose logits are wanted */
    const int32_t *rope_pos;    /* (n_tokens) or NULL (= positions): the position rope turns
                                 * each row by (multi-item scoring's segments, multi_item.c) */
    const int32_t *seq_rope_len; /* (n_seqs) or NULL (= seq_kv_len): the length that picks
                                 * longrope's short or long table -- the whole prompt's
                                 * length while a prompt runs in chunks (see decoder.c) */
    int want_hidden;            /* 0: logits.  1: the output rows are the final-normed hidden
                                 * states (n_logits, hidden_size), lm_head is skipped
                                 * (embedding models: the scheduler pools them) */
    /* LoRA: sequence s runs with adapters[seq_adapter[s]] (-1 = the base
     * model alone).  seq_adapter NULL or n_adapters 0: every sequence is
     * base.  Rows of different adapters share the base product; each adds
     * its own delta (linear.c), so a row's result does not depend on the
     * other rows' adapters. */
    int n_adapters;
    const model_adapter *const *adapters; /* (n_adapters) borrowed */
    const int32_t *seq_adapter;  /* (n_seqs) index into adapters or -1; NULL = all base */
    /* Hybrid Mamba2 models: the recurrent-state slot of each sequence
     * (model_kv_mamba_states of them).  A sequence whose first new row is
     * position 0 starts from a zero state; any other continues its slot,
     * which must hold exactly the kv_len - n_new tokens before (checked:
     * a recurrent state cannot be rolled back or shared like KV pages).
     * NULL = sequence s uses slot s. */
    const int32_t *seq_state;    /* (n_seqs) or NULL */
    /* Hybrid Mamba2 models: state checkpoints (--mamba-scheduler-strategy
     * extra_buffer).  NULL, or (n_seqs + 1) offsets: sequence s copies its
     * recurrent state, as it stands after the tokens before position
     * snap_pos[k], into state slot snap_state[k] for k in [seq_snap[s],
     * seq_snap[s + 1]).  A sequence's positions strictly increase inside
     * (its first new position, seq_kv_len]; the slots are distinct and no
     * sequence's own slot.  Afterwards slot snap_state[k] holds snap_pos[k]
     * tokens, and a sequence can continue from it (model_kv_mamba_copy). */
    const int32_t *seq_snap;     /* (n_seqs + 1) or NULL */
    const int32_t *snap_pos;     /* (seq_snap[n_seqs]) */
    const int32_t *snap_state;   /* (seq_snap[n_seqs]) */
    /* Tree verification (speculative decoding).  NULL, or (n_seqs) with entry s NULL (causal)
     * or the parent of each of sequence s's new rows among them: parent[i] in [-1, i), -1 = a
     * root (it hangs off the cached prefix).  Row i then attends to the prefix, its ancestors
     * and itself only, and rope turns it by (the first new row's position) + its depth; its KV
     * is still stored at the slot of its index (positions[] stay kv_len - n_new + i).  Refused
     * (an error) under tensor / pipeline parallelism, for Mamba2 hybrids and with multi-item
     * scoring (model_tree_ok). */
    const int32_t *const *seq_tree_parent;
    /* Internal, set by model_forward from seq_tree_parent (callers leave it NULL): (n_seqs)
     * per-sequence masks for the attention kernel. */
    const struct model_tree *const *seq_tree;
} model_batch;

/* One sequence's draft tree as the attention kernels take it (kern_attn_args.tree_*). */
typedef struct model_tree {
    const uint8_t *mask;    /* (n, n): row u sees node v */
    const int32_t *depth;   /* (n) */
    int base, n;            /* kv positions [base, base + n) are the nodes */
} model_tree;

/* 1 when m can verify draft trees (model_batch.seq_tree_parent): one process (no tensor or
 * pipeline parallelism: the tree does not travel to other ranks) and no Mamba2 layers (a
 * recurrent state cannot branch). */
int model_tree_ok(const model *m);
/* Tree verification at page size > 1: the KV an accepted tree node computed
 * at slot src (every attention layer's K and V rows, an int8 cache's token
 * scales, and the EAGLE capture rows of model_set_capture) is copied to
 * slot dst, the slot of the position its token now has.  0, or -1
 * (logged: a slot outside the cache). */
int model_tree_copy_slot(model *m, model_kv *kv, int32_t dst, int32_t src);

/* Load per opts.  NULL on failure with a message in err (names the file
 * and the problem).  Logs weight bytes and VmRSS after load. */
model *model_load(const model_load_opts *opts, char *err, size_t errlen);
/* As model_load, with the weights read from `src` (a weight source, see
 * model/wsource.h; taken over: closed on failure, else owned by the
 * weights) instead of the one opts->load_format names.  config.json still
 * comes from opts->model_path. */
struct wsrc;
model *model_load_source(const model_load_opts *opts, struct wsrc *src, char *err,
                         size_t errlen);
/* A second run state over m's weights (no copy): its own scratch, chunk
 * size and read-bytes counter; make its KV caches with model_kv_create.
 * Run states sharing weights may run forwards at the same time (each still
 * driven by one thread at a time).  The weights are freed with the last
 * of them (model_free, any order).  NULL when out of memory. */
model *model_share(model *m);
/* Another run state over m's weights (no copy) that drives a group of its
 * own: g (and, TP x PP, its stage group tg) of the same size with this
 * process at the same rank as m's group (--dp-size with --tp-size: the
 * replicas' rank-r shards are one copy, each replica's group in its own
 * run state).  Rank 0: its forwards, KV caches and shutdown (at
 * model_free) go to g's workers; a worker rank: model_tp_worker_loop over
 * it serves g.  m's chunk size, micro-batch size and KV scales are kept.
 * NULL with a message in err (a group that does not match, expert
 * parallelism, out of memory). */
model *model_share_group(model *m, struct dist_group *g, struct dist_group *tg, char *err, size_t errlen);
/* Free a run state (and the weights with the last one). */
void model_free(model *m);

const model_config *model_get_config(const model *m);
/* Bytes of weights resident for compute (matrices + vectors). */
size_t model_weight_bytes(const model *m);
/* Weight bytes the last model_forward read: everything except the
 * experts of MoE layers, plus the experts that at least one row of that
 * forward was routed to (per layer; chunks of one call add up).  Equals
 * model_weight_bytes() for dense models. */
size_t model_last_read_bytes(const model *m);
/* dtype the weight matrices are stored in. */
dtype model_weight_dtype(const model *m);

/* Bytes one token's K and V take in a KV cache of kv_dt over all layers
 * (the memory accounting unit of a KV pool; sized by the type-traits
 * table, so a block-quantized KV type fits). */
size_t model_kv_token_bytes(const model *m, dtype kv_dt);

/* Hybrid Mamba2 models (mamba2.c): bytes of one request's recurrent state
 * (conv window + SSM state of every Mamba layer) with SSM states stored as
 * ssm_dt (DTYPE_F32 or DTYPE_BF16); 0 for a model without Mamba layers. */
size_t model_mamba_state_bytes(const model *m, dtype ssm_dt);
/* Replace kv's recurrent states with n_states zeroed ones of ssm_dt (a
 * new cache has min(n_slots, MODEL_MAMBA_DEFAULT_STATES) f32 ones, enough
 * for the callers that pass no seq_state: generate, bench-one-batch; their
 * memory is committed only as slots get used).  0, or -1 (logged: not a
 * Mamba model, bad dtype, out of memory). */
#define MODEL_MAMBA_DEFAULT_STATES 64
int model_kv_set_mamba_states(model *m, model_kv *kv, int n_states, dtype ssm_dt);
/* Recurrent-state slots of kv (0 for a model without Mamba layers). */
int model_kv_mamba_states(const model_kv *kv);
/* Copy state slot src (conv windows, SSM states and token count) into
 * slot dst: a request resuming a cached prefix continues from a
 * checkpoint's copy.  0, or -1 (logged: bad slots, no states). */
int model_kv_mamba_copy(model_kv *kv, int dst, int src);
/* Tokens state slot `slot` has absorbed (-1 for a bad slot). */
int model_kv_mamba_len(const model_kv *kv, int slot);

/* KV cache of n_slots slots for every layer, zero-filled.  NULL on error. */
model_kv *model_kv_create(model *m, int n_slots, dtype kv_dt);
/* Per-layer K and V scales for 8-bit KV caches created afterwards
 * (--quantization-param-path); n must be the model's layer count.  0/-1. */
int model_set_kv_scales(model *m, const float *k_scale, const float *v_scale, int n);
void model_kv_destroy(model_kv *kv);

/* Size scratch for up to max_tokens rows per forward and kv lengths up to
 * max_kv on n_threads threads (model_forward grows it on demand before its
 * hot loop; calling this first avoids the growth).  0 or -1 (OOM). */
int model_reserve(model *m, int max_tokens, int max_kv, int n_threads);

/* Rows run per internal pass (default MODEL_DEFAULT_CHUNK): larger batches
 * are split into consecutive row ranges (chunked prefill), which bounds the
 * scratch memory; results are the same as one pass.  n <= 0: default. */
#define MODEL_DEFAULT_CHUNK 2048
void model_set_chunk_tokens(model *m, int n);

/* Pipeline parallelism (--pp-max-micro-batch-size): rank 0 splits each
 * forward of more than n sequences into micro-batches of at most n and
 * the stages pipeline them (stage p runs micro-batch i while stage p + 1
 * runs i - 1); n <= 0: unset (one micro-batch).  Outputs are the
 * one-micro-batch run's.  No effect without --pp-size.
 * model_pp_default_micro: when unset, SGLang's default,
 * max(max_running_requests / pp_size, 1) (the scheduler calls it). */
void model_set_pp_micro(model *m, int n);
void model_pp_default_micro(model *m, int max_running);

/* MLA (DeepSeek): n >= 1: sequences with at least n new tokens in a
 * forward run the expanded attention (per-head K/V decompressed from the
 * latent cache, mla.c), the others (decode included) absorbed; n = 0: the
 * automatic rule (mla.c exp_wins: long enough chunks whose expansion costs
 * fewer FLOPs than absorbing); n < 0: the value SGLC_MLA_EXPAND_MIN gave at
 * load (unset / "auto": 0).  No effect on models without MLA. */
void model_set_mla_expand_min(model *m, int n);

/* --multi-item-scoring-delimiter: prompts (whole, uncached) holding token
 * `id` run with SGLang's multi-item scoring mask -- each item after a
 * delimiter attends to the query and itself only (model/multi_item.c).
 * id < 0: off (the default). */
void model_set_multi_item_delimiter(model *m, int32_t id);

/* Run one batch.  logits: (n_logits, vocab) f32, row i for logit_rows[i]
 * ((n_logits, hidden_size) of final-normed hidden states when want_hidden).
 * Returns 0, or -1 after logging why (malformed batch, out of memory); the
 * KV cache is untouched when the batch is rejected. */
int model_forward(model *m, model_kv *kv, const model_batch *b, float *logits, tpool *pool);

/* ---- EAGLE speculative decoding (model_run.c) ------------------------------
 * Hidden-state capture: after model_set_capture every forward writes, for
 * each token row at KV slot s, n_at rows of hidden_size floats into
 * store + s * n_at * H: for each capture point, the residual stream entering
 * layer at[i] (0 = the embeddings), or (MODEL_CAPTURE_FINAL_NORM) the
 * final-normed last hidden state (what the LM head reads).  The store
 * mirrors the KV cache: a slot's rows are those of the token whose K/V the
 * slot holds.  Slots >= n_slots are skipped.  store NULL turns it off.
 * -1 (bad point, tensor / pipeline parallelism). */
#define MODEL_CAPTURE_MAX 4
#define MODEL_CAPTURE_FINAL_NORM (-1)
int model_set_capture(model *m, float *store, int64_t n_slots, const int *at, int n_at);
/* The embedding rows of tokens tok[0..n) (n x hidden_size, as the decoder's input). */
void model_embed_tokens(const model *m, const int32_t *tok, int n, float *out);
/* logits (n, vocab) = the LM head over x (n, hidden_size), one thread (no
 * logit scaling / soft-cap: a draft's argmax only).  0, or -1 (OOM / TP). */
int model_lm_head_rows(const model *m, const float *x, int n, float *logits);
/* The LM head model_lm_head_rows multiplies by, (vocab, hidden_size),
 * borrowed; NULL under tensor parallelism or with a bias. */
const kern_mat *model_lm_head_mat(const model *m);

/* ---- tensor parallelism (model_tp.c; see model_impl.h) ------------------
 * A model loaded with opts.dist holds this rank's shard.  Rank 0 is driven
 * as usual (model_forward, model_kv_create ... broadcast what the other
 * ranks need); every other rank runs model_tp_worker_loop. */
/* 1 when m is one rank of a tensor-parallel group of more than one. */
int model_tp_size(const model *m);
int model_tp_rank(const model *m);
/* Ranks > 0: receive and run rank 0's commands until it shuts the group
 * down (0) or a collective fails (-1, the reason logged). */
int model_tp_worker_loop(model *m, tpool *pool);
/* The group's failure ("" when none): a forward that returned -1 on a
 * broken group says which rank failed here. */
const char *model_tp_error(const model *m);
/* Seconds this rank spent in the forward's all-reduces so far (waiting for
 * the slowest rank included), their count, and of those seconds the ones
 * spent waiting for the other ranks to arrive (*wait_s; 0 for MPI). */
double model_tp_comm_seconds(const model *m, long *n_allreduce, double *wait_s);
/* LoRA under tensor / pipeline parallelism (model_tp.c; the adapter side is
 * lora/lora_shard.c).  Every rank holds its own shard of an adapter under
 * the id rank 0 gave it; rank 0's batches name adapters by that id
 * (model_adapter.tp_uid), which the workers map to their copies.
 * Worker ranks: load(m, msg, len, uid) makes this rank's shard of the
 * adapter rank 0 described in msg (NULL with a message); release frees
 * one.  Set before model_tp_worker_loop. */
typedef struct model_tp_lora_hooks {
    const model_adapter *(*load)(model *m, const void *msg, size_t len, uint64_t uid, char *err,
                                 size_t errlen);
    void (*release)(const model_adapter *ad);
} model_tp_lora_hooks;
void model_tp_set_lora_hooks(const model_tp_lora_hooks *h);
/* Rank 0 (after loading its own shard): every worker loads its shard of
 * the adapter msg describes as uid (waits for the running step).  0, or
 * -1 with the first failing rank's message; then no worker keeps it. */
int model_tp_lora_load(model *m, uint64_t uid, const void *msg, size_t len, char *err, size_t errlen);
/* Rank 0, any thread (never a collective): the adapter uid is gone; the
 * workers free their shards with the next step. */
void model_tp_lora_release(uint64_t uid);
/* LoRA: the (n, k) shape of projection p of layer `layer` (n outputs, k
 * inputs); nonzero when the model runs no such adaptable dense projection
 * there: -2 an MoE layer's dense MLP (its experts: model_expert_shape),
 * -3 k_proj / v_proj of a multi-head latent attention layer (DeepSeek;
 * its q_proj and o_proj are adaptable), -1 otherwise.  Used to check
 * adapters against the model. */
int model_proj_shape(const model *m, int layer, model_proj p, int *n, int *k);
/* The LM head's (vocab, hidden). */
void model_lm_head_shape(const model *m, int *n, int *k);
/* LoRA on MLA: the (n, k) of layer `layer`'s q_a_proj / q_b_proj /
 * kv_a_proj_with_mqa (which = MODEL_MLA_*) or, which = MODEL_NMLA,
 * kv_b_proj (n_head * (nope + v), kv_lora_rank).  -3 when the layer is not
 * MLA, -1 when it has no such projection (q_a / q_b without q_lora_rank). */
int model_mla_shape(const model *m, int layer, int which, int *n, int *k);
/* LoRA on experts: the (n, k) of part MODEL_EXPERT_* of expert e of layer
 * `layer` (e = -1: the shared expert).  -2 when the layer is not MoE, -4 e
 * >= the number of experts, -1 no shared expert (or a packed layout). */
int model_expert_shape(const model *m, int layer, int e, int part, int *n, int *k);

/* VmRSS of this process in bytes (0 if unknown). */
size_t model_rss_bytes(void);

#endif
