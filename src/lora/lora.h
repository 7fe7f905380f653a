/* lora — PEFT LoRA adapters: parse, load, keep a registry of them.
 *
 * DESIGN: an adapter is a PEFT folder (adapter_config.json +
 * adapter_model.safetensors, what PeftModel.save_pretrained writes).  The
 * config is parsed strictly (lora_config_parse, the fuzz entry): plain
 * LoRA only, every variant that changes the math (DoRA, rank/alpha
 * patterns, LoRA biases, modules_to_save, fan_in_fan_out, ...) is refused
 * with a message naming the key.  The weights are read by name,
 *
 *   base_model.model.model.layers.N.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight
 *   base_model.model.model.layers.N.mlp.{gate,up,down}_proj.lora_{A,B}.weight
 *   base_model.model.model.layers.N.mlp.experts.E.{gate,up,down}_proj.lora_{A,B}.weight
 *       (Mixtral: block_sparse_moe.experts.E.{w1,w3,w2}; shared experts:
 *       mlp.shared_expert.* (Qwen2-MoE), mlp.shared_experts.* (DeepSeek))
 *   base_model.model.model.layers.N.self_attn.{q_a_proj,q_b_proj,kv_a_proj_with_mqa,
 *       kv_b_proj}.lora_{A,B}.weight  (DeepSeek MLA)
 *   base_model.model.lm_head.lora_{A,B}.weight
 *   base_model.model.model.embed_tokens.lora_embedding_{A,B}   (r, vocab) / (hidden, r)
 *
 * lora_A (r, in), lora_B (out, r), f32/bf16/f16; each pair is checked
 * against the base model's projection shape and converted once: A as is
 * (r, k), B transposed (r, n) so the expand step is a run of contiguous
 * row updates (linear.c); a pair stored in BF16 stays bf16 (exact, half
 * the bytes a decode step reads), F32 and F16 pairs become f32.  scale = lora_alpha / r, or
 * lora_alpha / sqrt(r) with use_rslora.  The result is a model_adapter
 * (model.h), what model_forward takes per batch.
 *
 * Registry (lora_registry_*): named adapters, shared by the HTTP threads
 * (resolve a request's lora_path, load / unload routes) and the scheduler
 * (runs them).  An adapter is reference-counted: a request holds a
 * reference from submit to its end, so unloading while requests run only
 * removes the name; the memory goes with the last request.  Each load gets
 * a fresh uid (never reused), the radix cache's isolation key, so a prefix
 * computed under one adapter is never reused under another, nor under a
 * later adapter that reuses the name.  Loaded adapters are limited by
 * --max-loaded-loras: a load beyond it evicts an unpinned adapter by
 * --lora-eviction-policy (lru: least recently resolved; fifo: oldest load),
 * or fails when every loaded adapter is pinned.
 *
 * Threading: registry calls take its mutex; lora_adapter contents are
 * immutable after load (any thread may read them while holding a ref).
 */
#ifndef SGLC_LORA_H
#define SGLC_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* target_modules bits (MODEL_PROJ_* of model.h, plus the LM head) */
#define LORA_T_LM_HEAD MODEL_NPROJ
#define LORA_T_EMBED (MODEL_NPROJ + 1)
/* DeepSeek MLA projections */
#define LORA_T_Q_A (MODEL_NPROJ + 2)  /* q_a_proj */
#define LORA_T_Q_B (MODEL_NPROJ + 3)  /* q_b_proj */
#define LORA_T_KV_A (MODEL_NPROJ + 4) /* kv_a_proj_with_mqa */
#define LORA_T_KV_B (MODEL_NPROJ + 5) /* kv_b_proj */
/* q k v o gate up down + the MLA ones (experts are gate / up / down) */
#define LORA_T_ALL_LINEAR (((1u << MODEL_NPROJ) - 1u) | (1u << LORA_T_Q_A) | (1u << LORA_T_Q_B) | \
                           (1u << LORA_T_KV_A) | (1u << LORA_T_KV_B))

typedef struct lora_config {
    int r;                      /* rank */
    double alpha;               /* lora_alpha (default 8, as PEFT) */
    bool use_rslora;
    unsigned targets;           /* bits 1 << MODEL_PROJ_* / LORA_T_* */
    char base_model[256];       /* base_model_name_or_path, "" when absent */
} lora_config;

/* Parse adapter_config.json text (len bytes, need not be NUL-terminated).
 * Returns 0, or -1 with a message naming the key (DoRA and other variants
 * are refused here).  The fuzz entry. */
int lora_config_parse(const char *json, size_t len, lora_config *out, char *err, size_t errlen);

/* Module name ("q_proj", "qkv_proj", "gate_up_proj", "lm_head", "all", ...)
 * -> target bits, 0 = unknown.  Used for --lora-target-modules too. */
unsigned lora_target_bits(const char *name);

/* Names of the bits in t, comma-separated ("q_proj,v_proj"), into buf. */
void lora_targets_str(unsigned t, char *buf, size_t len);

typedef struct lora_limits {
    int max_rank;               /* --max-lora-rank, 0 = no limit (LINEAR_MAX_RANK) */
    unsigned allowed;           /* --lora-target-modules bits, 0 = any */
} lora_limits;

typedef struct lora_adapter {
    char *name;                 /* owned */
    char *path;                 /* owned: the folder */
    uint64_t uid;               /* unique per load (radix isolation key) */
    bool pinned;
    lora_config cfg;
    model_adapter ma;           /* proj (n_layer * MODEL_NPROJ) owned */
    void *mem;                  /* owned: every A and Bᵀ (f32, or bf16 for pairs stored so) */
    size_t bytes;               /* of mem */
    double load_ms;
    /* registry bookkeeping */
    int refs;                   /* registry's own + requests' (atomic) */
    uint64_t last_use, loaded_seq;
    bool listed;                /* still in the registry */
} lora_adapter;

/* Load the PEFT folder `path` (or the adapter_model.safetensors inside it)
 * for model m.  Checks: config as lora_config_parse, rank <= lim->max_rank,
 * targets within lim->allowed, every tensor named as PEFT names it and
 * shaped (r, k) / (n, r) for that projection of m, no projection of m
 * missing (a target the model lacks: a dense gate_proj of an MoE layer,
 * an expert of a dense layer or beyond n_experts, k_proj of an MLA layer,
 * an MLA module without MLA; the message names tensor and module), no
 * tensor left unused.  Experts (mlp.experts.E.*, Mixtral's
 * block_sparse_moe.experts.E.w1/w3/w2) and shared experts become
 * model_adapter.moe slots; q_a / q_b / kv_a_proj_with_mqa model_adapter.mla
 * slots; kv_b_proj (n_head (nope + v), kvr) becomes per-head views on the
 * absorbed matrices (model_adapter.kvb: A shared, B's rows per head), f32.  Fused modules (Phi-3's self_attn.qkv_proj, mlp.gate_up_proj):
 * one A (r, k) shared, B (n_q + n_k + n_v, r) / (2 I, r) split by rows
 * into the parts' pairs.  Multimodal wrappers' text names
 * (language_model.model.*, model.language_model.*,
 * language_model.lm_head) read as the plain ones.  adapter_model.bin is refused (pickle).  Returns the
 * adapter with refs = 1, or NULL with a message. */
lora_adapter *lora_adapter_load(const char *name, const char *path, const model *m,
                                const lora_limits *lim, char *err, size_t errlen);
void lora_adapter_ref(lora_adapter *a);
/* Drop a reference; frees the adapter with the last one.  NULL is a no-op. */
void lora_adapter_unref(lora_adapter *a);

/* ---- registry ---------------------------------------------------------- */

typedef enum { LORA_EVICT_LRU = 0, LORA_EVICT_FIFO = 1 } lora_evict_policy;

typedef struct lora_registry lora_registry;

typedef struct lora_registry_opts {
    const model *m;             /* borrowed: the base model */
    lora_limits lim;
    int max_loaded;             /* --max-loaded-loras, 0 = unlimited */
    lora_evict_policy policy;
} lora_registry_opts;

lora_registry *lora_registry_create(const lora_registry_opts *o);
void lora_registry_destroy(lora_registry *r);

/* Load an adapter under `name` (unique: an existing name is an error, as
 * SGLang's "already loaded").  Returns 0 or -1 with a message. */
int lora_registry_load(lora_registry *r, const char *name, const char *path, bool pinned,
                       char *err, size_t errlen);
/* Remove `name`: running requests keep their reference.  0 or -1. */
int lora_registry_unload(lora_registry *r, const char *name, char *err, size_t errlen);
/* The adapter called `name`, with a reference for the caller, or NULL. */
lora_adapter *lora_registry_get(lora_registry *r, const char *name);
/* Snapshot of the loaded adapters, each with a reference: *out (owned
 * array, free with lora_registry_list_free).  Returns the count or -1. */
int lora_registry_list(lora_registry *r, lora_adapter ***out);
void lora_registry_list_free(lora_adapter **v, int n);
/* Adapters loaded now. */
int lora_registry_count(lora_registry *r);

/* The process's registry (serve / generate --requests set it at start-up;
 * NULL = LoRA not enabled): what request codecs resolve lora_path names
 * against.  Set before any request thread starts. */
void lora_set_global(lora_registry *r);
lora_registry *lora_global(void);
/* A request's adapter by name through the global registry, with a
 * reference in *out.  0, or -1 with SGLang's message: "LoRA is not
 * enabled. Please set `--enable-lora` to enable LoRA." or "The following
 * requested LoRA adapters are not loaded: NAME\nLoaded adapters:
 * odict_keys([...])." */
int lora_resolve(const char *name, lora_adapter **out, char *err, size_t errlen);

/* Parse one --lora-paths entry: "NAME=PATH", a bare "PATH" (name = the
 * path), or a JSON object {"lora_name":..., "lora_path":..., "pinned":...}.
 * Writes owned strings to *name / *path.  0 or -1 with a message. */
int lora_parse_path_arg(const char *s, char **name, char **path, bool *pinned, char *err,
                        size_t errlen);

#endif
