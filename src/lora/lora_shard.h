/* lora_shard — a LoRA adapter's slice on one rank of a tensor- or
 * pipeline-parallel group (lora_shard.c; see its DESIGN comment).  Used by
 * lora_adapter.c; lora_shard_install by the worker ranks' start-up. */
#ifndef SGLC_LORA_SHARD_H
#define SGLC_LORA_SHARD_H

#include <stdbool.h>

#include "lora/lora.h"
#include "model/safetensors.h"

/* Where projection p of layer `layer` lives on this rank: 0 with *sh the
 * base weight's slice (rows / cols of the full (n, k); the whole matrix in
 * one process), 1 when the layer is another pipeline stage's (this rank
 * keeps nothing of it and does not check it: that stage does), or
 * model_proj_shape's nonzero codes (-1 no such projection, -2 MoE MLP, -3
 * MLA attention). */
int lora_shard_proj(const model *m, int layer, model_proj p, linear_shard *sh);
/* The LM head's slice (vocabulary rows under TP): 0, or 1 when another
 * stage runs it. */
int lora_shard_lm_head(const model *m, linear_shard *sh);
/* 1 when another stage embeds (stage 0 does), else 0: the embedding is
 * replicated, its adapter kept whole. */
int lora_shard_embed_elsewhere(const model *m);

/* Under TP / PP, an adapter tensor this file cannot slice (an MoE expert's
 * or shared expert's, by name) is refused: -1 with a message naming it;
 * else 0.  (Multi-head latent attention models are refused for TP and PP
 * at model load, so their adapters never get here.) */
int lora_shard_name_ok(const model *m, const char *aname, const char *tname, char *err, size_t errlen);

/* Bytes of one pair sliced to sh: A (r, sh->cols), Bᵀ (r, sh->rows). */
size_t lora_shard_pair_bytes(const linear_shard *sh, int r, bool bf16);
/* Copy the pair A (r, full_cols), B (full_rows, r) of the file, sliced to
 * sh, to p as A's columns [col0, col0 + cols) (r, cols) and Bᵀ's columns
 * [row0, row0 + rows) (r, rows), bf16 kept when bf16 (both halves BF16),
 * else f32; sets la->a / la->bt.  Returns the end of what it wrote. */
char *lora_shard_copy(const st_tensor *A, const st_tensor *B, int r, const linear_shard *sh,
                      bool bf16, char *p, linear_adapter *la);

/* Rank 0 of a group, after loading its own shard of a: every worker rank
 * loads its shard from a->path with the same limits (model_tp_lora_load),
 * and a->ma.tp_uid = a->uid names it in batches.  0, or -1 with the
 * failing rank's message (no worker keeps it). */
int lora_shard_ship(lora_adapter *a, const model *m, const lora_limits *lim, char *err,
                    size_t errlen);
/* Worker ranks: install the hooks model_tp_worker_loop loads and frees
 * adapter shards through (model_tp_set_lora_hooks). */
void lora_shard_install(void);

#endif
