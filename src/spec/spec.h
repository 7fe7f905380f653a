/* spec — speculative decoding drafters for the scheduler's draft hook
 * (sched_set_draft_hook): SGLang's --speculative-algorithm NGRAM (and
 * STANDALONE: a smaller draft model of the same vocabulary, spec_draft.h).
 *
 * DESIGN
 * The scheduler asks the hook, before every decode forward, for up to k
 * draft tokens per running request; the forward runs them too and the
 * process-results stage keeps each only while it equals the token the
 * target model samples (sched_output.c), so outputs are the same with or
 * without a drafter and only the number of forwards changes.  A drafter
 * here is
 *
 *   spec_drafter ── per-request table (id, sibling) -> { tokens already
 *        │            inserted in the trie, the last draft, back-off }
 *        ├── NGRAM       spec_ngram: one trie over every prompt and output
 *        ├── STANDALONE  spec_draft: greedy tokens of a draft model (its own
 *        │               run state, KV and pool; spec_draft.h)
 *        └── EAGLE(3)    spec_eagle: a one-layer head over the target's
 *                        captured hidden states (spec_eagle.h)
 *
 * Each call: (NGRAM) insert the tokens of the sequence not yet in the
 * trie; measure how many tokens of this request's previous draft came
 * true (the longest prefix of it that the sequence now continues with);
 * adapt; propose.
 *
 * Adaptive back-off (per request), so that a request whose drafts keep
 * failing pays almost nothing for them (a new request starts at k_cap =
 * min(k, 4): on a 2-core CPU a 12-token verify of Llama-3.2-1B costs ~5x
 * a decode, a 2-3-token one about the same, docs/notes/spec.md):
 *   all of the previous draft right   k_cap doubles (up to k)
 *   some right                        k_cap = right + 1
 *   none right                        k_cap = 1; when it already was 1,
 *                                     no drafts for `backoff` steps, then
 *                                     one probe; backoff doubles up to 64
 *                                     (reset by any right token)
 * A draft that finds no match costs nothing (no tokens proposed).
 *
 * Requests are never told to the drafter when they finish: entries not
 * called for a while (64 calls per live entry) are dropped.  A drafter
 * belongs to one scheduler and is called on its thread only.
 *
 * Ownership: the drafter owns its trie / draft state; a STANDALONE
 * drafter owns its draft model runner but borrows the draft model. */
#ifndef SGLC_SPEC_H
#define SGLC_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"
#include "spec/spec_ngram.h"
#include "spec/spec_tokmap.h"

typedef enum { SPEC_ALGO_NONE = 0, SPEC_ALGO_NGRAM, SPEC_ALGO_STANDALONE, SPEC_ALGO_EAGLE, SPEC_ALGO_EAGLE3 } spec_algo;

typedef struct spec_args {
    spec_algo algo;
    int num_draft_tokens;        /* --speculative-num-draft-tokens: tokens verified per step, the sampled
                                  * one included (SGLang's draft_token_num), so k = num_draft_tokens - 1
                                  * drafts; NGRAM default = max match window (SGLang) */
    spec_ngram_params ngram;     /* --speculative-ngram-* */
    bool adaptive;               /* the back-off above (default on) */
    bool tree;                   /* NGRAM: hand the scheduler the whole draft tree (default on; the
                                  * environment variable SGLC_SPEC_TREE=0 turns it off: the first
                                  * branch only, the chain of earlier sessions) */
    model *draft_model;          /* STANDALONE: borrowed, must outlive the drafter */
    int target_vocab;            /* STANDALONE: the target's vocabulary size (must equal the draft's) */
    int64_t draft_kv_tokens;     /* STANDALONE: draft KV slots over all requests (0 = 65536) */
    int draft_threads;           /* STANDALONE: compute threads of the draft runner (0 = 1) */
    const char *eagle_path;      /* EAGLE / EAGLE3: the head's folder (spec_eagle.h) */
    model *target_model;         /* EAGLE / EAGLE3: the scheduler's model (borrowed; capture installed on it) */
    int64_t target_slots;        /* EAGLE / EAGLE3: the scheduler's KV slots */
    const spec_tokmap *token_map; /* EAGLE: --speculative-token-map, borrowed and bound (spec_tokmap.h); NULL = none */
    int eagle_topk;              /* EAGLE / EAGLE3: --speculative-eagle-topk (1 = a chain of num_draft_tokens - 1;
                                  * > 1 = a tree of num_draft_tokens - 1 nodes, spec_eagle_propose_tree) */
    int eagle_steps;             /* EAGLE / EAGLE3 with topk > 1: --speculative-num-steps, the tree's depth (0 = 3) */
} spec_args;

void spec_args_init(spec_args *a);
/* "NGRAM" / "STANDALONE" / "EAGLE" / "EAGLE3" / "NEXTN" (= EAGLE, as
 * SGLang maps it) -> spec_algo; -1 for unknown names. */
int spec_algo_parse(const char *name);

typedef struct spec_drafter spec_drafter;

/* NULL with a message in err on bad arguments / out of memory. */
spec_drafter *spec_drafter_create(const spec_args *a, char *err, size_t errlen);
void spec_drafter_destroy(spec_drafter *d);
/* Install d as s's draft hook with k = num_draft_tokens - 1 (before
 * sched_start).  d must outlive s's use of it (destroy s first). */
void spec_drafter_attach(spec_drafter *d, sched *s);
/* The hook itself (sched_draft_fn); ctx is the drafter. */
int spec_drafter_draft(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft,
                       int max_draft);
/* The tree hook (sched_draft_tree_fn) spec_drafter_attach installs: NGRAM
 * writes its whole draft tree when parent is non-NULL, and so does EAGLE
 * with eagle_topk > 1 (asked for a chain, it drafts one of at most
 * eagle_steps tokens); the other algorithms (and NGRAM with tree off) a
 * chain, parent[k] = k - 1. */
int spec_drafter_draft_tree(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft,
                            int32_t *parent, int max_draft);

typedef struct spec_drafter_stats {
    int64_t calls;               /* hook calls */
    int64_t proposed;            /* draft tokens proposed */
    int64_t right;               /* of them, measured right at the next call */
    int64_t skipped;             /* calls answered 0 by the back-off */
    int64_t tracked;             /* requests in the table now */
    int64_t trie_nodes;          /* NGRAM: nodes in the trie */
    int64_t draft_slots;         /* STANDALONE / EAGLE: draft KV slots in use */
} spec_drafter_stats;
void spec_drafter_get_stats(const spec_drafter *d, spec_drafter_stats *st);

#endif
