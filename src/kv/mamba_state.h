/* mamba_state — the per-request recurrent-state slots of hybrid Mamba2
 * models: ids only, no tensor memory (the states are model_kv's, see
 * model/mamba2.c), and the sizing rule of SGLang's mamba arguments.
 *
 * DESIGN
 * A Mamba layer keeps no per-token cache: each running request owns one
 * fixed-size state (conv window + SSM state of every Mamba layer).  This
 * pool hands out slot ids [0, n) from a LIFO free stack; a byte per slot
 * catches double frees.  A slot is a running request's live state (from
 * admission to finish / abort / retraction) or, with the extra_buffer
 * strategy, a checkpoint: a copy of a request's state at a multiple of
 * --mamba-track-interval, held by the radix node ending there
 * (kv_radix_node_set_state) and given back when the tree drops it.  A
 * state summarises its whole prefix, so it cannot be shared page by page
 * like KV: a request resuming a cached prefix gets a copy of the deepest
 * checkpoint (sched_kv.c has the strategies).
 *
 * Sizing (mamba_state_count), as SGLang's model runner does it:
 *   --max-mamba-cache-size N          -> N states;
 *   else --max-running-requests R     -> R states (no_buffer only: the
 *                                        scheduler passes 0 with checkpoints);
 *   else the memory budget B is split so that states / KV =
 *        --mamba-full-memory-ratio r:  states get B * r / (1 + r).
 * Single owner thread (the scheduler); no locking. */
#ifndef SGLC_KV_MAMBA_STATE_H
#define SGLC_KV_MAMBA_STATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct mamba_state_pool mamba_state_pool;

/* n slots; NULL (logged) when n < 1 or out of memory. */
mamba_state_pool *mamba_state_pool_create(int n);
void mamba_state_pool_destroy(mamba_state_pool *p);
/* A free slot id, or -1 when none is left (a normal scheduling state). */
int32_t mamba_state_alloc(mamba_state_pool *p);
/* Return slot id; -1 (logged, nothing changed) for an id out of range or
 * already free. */
int mamba_state_free(mamba_state_pool *p, int32_t id);
int mamba_state_n_free(const mamba_state_pool *p);
int mamba_state_n_total(const mamba_state_pool *p);

/* How many states to make: explicit (> 0) wins, then max_running (> 0),
 * else floor(budget_bytes * ratio / (1 + ratio) / state_bytes).  Sets
 * *kv_budget_left to the bytes left for the KV cache: budget_bytes minus
 * the states (0 when they take it all).  Returns the count (>= 0; 0 = not
 * even one state fits). */
int64_t mamba_state_count(int64_t explicit_n, int64_t max_running, double budget_bytes, double ratio,
                          size_t state_bytes, double *kv_budget_left);

#endif
