/* sched_impl — the scheduler's private structures, shared by the
 * src/sched/sched_*.c files below.  Not for other modules (the unit tests
 * excepted).
 *
 * Layers (bottom to top): impl util policy event kv req grammar output retract batch inbox ctl step sched
 *
 *   sched_impl.h   the structs below, constants              (no code)
 *   sched_util     grow, strdup, request arrays, random numbers
 *   sched_policy   waiting-queue order (--schedule-policy)
 *   sched_event    specs, the outbox, event builders
 *   sched_kv       a request's pages / slots, release, cache a prefill
 *   sched_req      request new / free / enqueue / finish / abort
 *   sched_grammar  constrained decoding: the grammar queue, matchers, masks
 *   sched_output   stage 3 "process results": the per-request order
 *   sched_retract  retraction for decode, priority preemption, retract all
 *   sched_batch    stage 1 "assemble": admission, decode pages, drafts, layout
 *   sched_inbox    submit + validation, aborts, draining the inbox
 *   sched_ctl      control messages (pause, continue, flush, weight swap)
 *   sched_step     one step: stage 2 "forward", run_batch, drivers, stats
 *   sched (.c)     create / destroy, the thread, sched_control, accessors
 *
 * The direction rule: a file includes the internal header (sched_X.h) of
 * its own layer or of a layer below it, never above; so the include graph
 * has no cycle, and a new feature adds a file (and a layer) where its
 * dependencies put it.  tests/scripts/test_sched_layers.sh checks it
 * against the list above (keep the two in step).  sched.h, the public
 * API, may be included anywhere; sched_result.{c,h} (the event
 * accumulator for fronts; the /generate codec is api/api_generate_json)
 * and sched_args.c sit outside the layers.
 *
 * A step (sched_step): drain inbox and control messages; build a prefill
 * batch (or, with nothing to prefill, retract for decode, allocate decode
 * pages, ask for draft tokens); then one forward in three stages:
 *
 *   assemble  (sched_batch_assemble)  requests -> model_batch + logits-row map
 *   forward   (sched_step.c)          model_forward
 *   process   (sched_process_results) 0..k new tokens per request, each
 *             through: logit processors -> sample or verify -> stop
 *             checks; then emit (see sched_output.c)
 *
 * A request's token sequence and KV:
 *
 *   seq   [ in0 in1 ... in(n_input-1) | out0 out1 ... out(k-1) ]   len = n_input + k
 *   KV    [ 0 ................................ kv_len )            kv_len <= len
 *   pages [ tree pages (locked, protected_len) | own pages ]       n_pages = ceil(kv_len'/P)
 *   slots [ pages[i / P] * P + i % P  for i < n_pages * P ]
 *
 * Waiting: kv_len 0, no pages, no lock.  Prefill (extend): KV grows from
 * the matched prefix to len (one chunk per step when chunked).  Decode:
 * seq[len - 1] goes in at position kv_len = len - 1, followed by the
 * step's n_draft draft tokens at len .. len + n_draft - 1 (pages for them
 * allocated by sched_batch_draft); after m accepted tokens kv_len =
 * len - 1 again, a rejected draft's KV lies past it.  A retracted request
 * keeps seq (its outputs) and is prefilled again over input + output. */
#ifndef SGLC_SCHED_IMPL_H
#define SGLC_SCHED_IMPL_H

#include <pthread.h>

#include "grammar/grammar.h"
#include "grammar/grammar_queue.h"
#include "kv/kv_pool.h"
#include "kv/kv_radix.h"
#include "kv/mamba_state.h"
#include "sampling/sampler.h"
#include "sched/sched.h"

/* SGLang's CLIP_MAX_NEW_TOKENS (schedule_policy.py): admission reserves
 * at most this many future tokens per request. */
#define CLIP_MAX_NEW_TOKENS 4096

typedef enum { RS_WAITING = 0, RS_PREFILL, RS_RUNNING, RS_DONE } sched_rstate;

/* One request.  Fields are grouped by concern; a feature adds its own
 * group (a grammar state, a LoRA adapter id ...) instead of loose fields. */
typedef struct sreq {
    struct {                    /* identity */
        uint64_t id;            /* sched_submit's return value (shared by n > 1 siblings) */
        int index;              /* n > 1 sibling index */
        char *rid;              /* owned */
        bool internal;          /* n > 1 prefix warm-up: no events */
    } who;
    struct {                    /* the token sequence (diagram above) */
        int32_t *seq;           /* (cap) owned: input then output ids */
        int64_t n_input, len, cap;
        int64_t max_new;        /* effective max_new_tokens (clipped to the context) */
    } tok;
    struct {                    /* sampling */
        sampling_params params; /* owned */
        sampling_state st;      /* owned; borrows params */
    } samp;
    struct {                    /* output events */
        bool stream;
        int stream_interval;
        int64_t n_sent;         /* output tokens already sent in events */
        void *output_ctx;       /* borrowed or NULL: the front's output stage (sched_output_hook) */
    } out;
    struct {                    /* logprobs (return_logprob) */
        bool return_logprob;
        int top_n;
        int32_t *tids;          /* (n_tid) owned: token_ids_logprob */
        int n_tid;
        /* per output token (cap - n_input rows) */
        float *lp;              /* (out_cap) */
        int32_t *top_ids;       /* (out_cap, top_n) */
        float *top_lp;          /* (out_cap, top_n) */
        float *tid_lp;          /* (out_cap, n_tid) */
        /* input logprobs (logprob_start_len < n_input - 1): entry k is
         * position lp_start + k predicting seq[lp_start + k + 1] */
        int64_t lp_start;       /* SGLang's logprob_start_len (n_input - 1 by default) */
        int64_t n_in_lp;        /* n_input - 1 - lp_start rows */
        float *in_lp;           /* (n_in_lp) */
        int32_t *in_top_ids;    /* (n_in_lp, top_n) */
        float *in_top_lp;       /* (n_in_lp, top_n) */
        float *in_tid_lp;       /* (n_in_lp, n_tid) */
        bool in_lp_done;        /* every row computed */
        bool in_lp_sent;        /* attached to an event */
    } lpr;
    struct {                    /* embedding mode */
        int embed_dims;         /* values kept before normalizing, 0 = all */
        float *emb;             /* (n_emb) owned or NULL: the pooled embedding, until its event */
        int n_emb;
    } embd;
    struct {                    /* KV (sched_kv) */
        char *cache_salt;       /* owned or NULL: radix namespace */
        int32_t *pages;         /* (pages_cap) owned */
        int64_t n_pages, pages_cap;
        int32_t *slots;         /* (pages_cap * P) owned */
        kv_radix_req rr;
        bool holds_kv;          /* admitted: rr lock / pages to release */
        bool kv_broken;         /* cache_unfinished failed: release without insert */
        int64_t kv_len;
        int64_t extend;         /* tokens prefilled in the current step */
        int64_t already_computed; /* most KV ever computed (cached_tokens accounting) */
        int64_t cached_tokens;
        bool holds_mamba;       /* hybrid Mamba2 models: mamba_slot is this request's state */
        int32_t mamba_slot;
    } kv;
    struct {                    /* LoRA */
        struct lora_adapter *ad; /* owned reference or NULL (base model) */
    } lora;
    struct {                    /* speculative decoding: this step's draft tokens */
        int32_t *draft;         /* (cap_draft) owned */
        int n_draft, cap_draft;
        int64_t verify_ct;      /* decode forwards of this request with a draft hook set (SGLang's spec_verify_ct) */
        int64_t accepted;       /* draft tokens confirmed (spec_accept_token_num) */
        int64_t drafted;        /* draft tokens the forwards ran (spec_draft_token_num) */
        int32_t *parent;        /* (cap_draft) owned: tree drafts' parents (sched_draft_tree_fn) */
        int32_t *mpar;          /* (cap_draft + 1) owned: the forward's rows as a tree
                                 * (model_batch.seq_tree_parent: row 0 = seq[len - 1]) */
        bool tree;              /* this step's drafts are a tree (parent / mpar valid) */
    } spec;
    struct {                    /* policy and priority (sched_policy, sched_retract) */
        int64_t priority;
        bool has_priority;
        uint64_t seq_no;        /* arrival order */
        int64_t est_prefix;     /* cached prefix estimate */
        kv_radix_node *est_node;/* deepest matched node (borrowed from the tree) */
        int64_t order;          /* rank scratch */
        int64_t prio_key;       /* smaller = admitted first */
    } pol;
    struct {                    /* constrained decoding (sched_grammar) */
        grammar_kind kind;
        char *text;             /* (len + 1) owned, or NULL: no grammar */
        size_t len;
        uint32_t opts;          /* GRAMMAR_OPT_* */
        grammar_job *job;       /* owned while in the grammar queue */
        double t_queued;        /* when it entered the grammar queue (timeout) */
        grammar_entry *entry;   /* owned reference once compiled (keeps the grammar alive) */
        grammar_matcher *m;     /* owned: this request's position in the grammar */
        int32_t *after;         /* (n_after) owned: the grammar starts after this output
                                 * token sequence (end of a reasoning section); NULL = at once */
        int n_after;
        bool active;            /* the mask applies (after seen, or none) */
        int64_t start;          /* seq index of the grammar's first token (set when active) */
    } gram;
    struct {                    /* timing */
        double t_submit;
        double t_forward;       /* first admitted into a forward (0 = never): time stats log */
    } time;
    struct {                    /* life cycle */
        sched_rstate state;
        int num_retractions;
        bool to_abort;
        char *abort_msg;        /* owned or NULL */
        int abort_status;
        /* n > 1: the warm-up request holds its siblings until it finishes */
        struct sreq **children; /* (n_children) owned array of owned requests */
        int n_children;
        struct sreq *next;      /* inbox / held-list link */
    } life;
} sreq;

/* a control message waiting in the inbox (the caller's sched_ctl) */
typedef struct ctl_msg {
    sched_ctl *c;               /* borrowed from the waiting caller */
    bool done;
    struct ctl_msg *next;
} ctl_msg;

typedef struct abort_msg {
    char *rid;                  /* owned; NULL = all (unless id) */
    uint64_t id;                /* > 0: abort by submit id instead */
    struct abort_msg *next;
} abort_msg;

/* The scheduler.  Fields are grouped by concern (and by the thread /
 * lock that guards them); a feature adds its own group. */
struct sched {
    sched_args a;               /* configuration (copied at create) */
    struct {                    /* the engine objects */
        model *m;               /* borrowed (swapped by SWAP_MODEL) */
        const model_config *c;  /* borrowed from m */
        model_kv *kv;           /* owned */
        kv_pool *pool;          /* owned */
        kv_radix *tree;         /* owned */
        tpool *tp;              /* owned */
        mamba_state_pool *mpool; /* owned; hybrid Mamba2 models' state slots, else NULL */
        int32_t *b_state;       /* (buf.cap_seqs of the step) the batch's state slots (owned) */
        int cap_state;
        /* extra_buffer: this step's checkpoints (model_batch.seq_snap), owned; the slots are
         * taken at assembly and belong to the step until sched_kv_mamba_commit / _drop */
        int32_t *b_snap;        /* (cap_state + 1) per sequence offsets into b_snap_pos / _slot */
        int32_t *b_snap_pos, *b_snap_slot; /* (cap_snap) */
        int n_snap, cap_snap;
    } eng;
    struct {                    /* sizes and limits derived at create */
        int P;                  /* page size */
        int V;                  /* vocabulary */
        int64_t capacity;       /* max_total_num_tokens */
        int64_t max_req_len, max_req_input_len;
        int max_running;
        int mtrack;             /* hybrid Mamba2, extra_buffer: checkpoint interval in tokens; 0 = no
                                 * checkpoints (no_buffer: the radix cache is off) */
        int32_t eos[MODEL_MAX_EOS];
        int n_eos;
    } lim;
    struct {                    /* request queues (scheduler thread) */
        sreq **waiting;         /* (n_waiting) owned requests */
        int n_waiting, cap_waiting;
        sreq **running;         /* (n_running) owned: decoding */
        int n_running, cap_running;
        sreq *chunked;          /* owned: prompt prefilled across steps */
        uint64_t next_seq_no;
        bool was_busy;          /* the last step had work (idle leak check) */
    } q;
    struct {                    /* admission's new_token_ratio (SGLang) */
        double new_token_ratio, init_ratio, min_ratio, ratio_decay;
    } adm;
    struct {                    /* step buffers, grown on demand (assemble -> process) */
        sreq **batch;           /* (n_batch) prefill requests of this step, borrowed */
        int n_batch, cap_batch;
        int32_t *b_tokens, *b_pos, *b_rows;          /* (cap_tok) */
        int32_t *b_start, *b_kvlen;                  /* (cap_seq + 1) */
        int32_t *b_ropelen;                          /* (cap_seq): model_batch.seq_rope_len (the
                                                      * whole sequence's length, chunks included) */
        int32_t *b_lp_row, *b_lp_n, *b_sample_row;   /* (cap_seq): input-logprob rows, sampling row (-1 none) */
        int32_t *b_n_rows;                           /* (cap_seq): sampling rows from b_sample_row (1 + drafts) */
        const int32_t **b_slots;                     /* (cap_seq) borrowed from the requests */
        int32_t *b_seq_ad;                           /* (cap_seq) LoRA: index into b_ads, -1 base */
        const model_adapter **b_ads;                 /* (cap_seq) LoRA: this step's adapters, borrowed */
        const int32_t **b_tree;                      /* (cap_seq) model_batch.seq_tree_parent, borrowed */
        int cap_tok, cap_seq;
        float *logits;          /* (cap_logits, max(V, H)): logits, or hidden rows in embedding mode */
        int cap_logits;
        void *scratch;          /* (sampling_scratch_bytes(V)) sampling scratch */
        int32_t *tmp_top_ids;   /* (tmp_cap) */
        float *tmp_top_lp, *tmp_tid_lp; /* (tmp_cap) */
        int tmp_cap;
    } buf;
    struct {                    /* constrained decoding (sched_grammar; scheduler thread but `wake`) */
        grammar_queue *q;       /* borrowed (sched_set_grammar), NULL = grammars refused */
        const grammar_vocab *v; /* borrowed */
        int32_t gv;             /* grammar_vocab_size(v) */
        double timeout_s;       /* compile wait before "Grammar preprocessing timed out" */
        sreq **waiting;         /* (n_waiting) owned: requests whose grammar is compiling */
        int n_waiting, cap_waiting;
        uint32_t *mask;         /* (grammar_mask_words(v)) scratch */
        bool wake;              /* under in.mu: a job finished (the grammar thread's notify) */
        bool close_full;        /* SGLC_GRAMMAR_CLOSE_FULL=1: no lazy close check (tests compare) */
    } gram;
    struct {                    /* batch log lines (--decode-log-interval): SGLang's log_prefill_stats / log_decode_stats */
        int64_t log_new_tokens, log_hit_tokens; /* this step's prefill: extend / prefix-hit tokens */
        int64_t log_decode_ct;                  /* decode forwards so far */
        int64_t log_gen_tokens;                 /* decode tokens since the last Decode line */
        double log_decode_tic;                  /* time of the last Decode line (or creation) */
    } blog;
    struct {
        sched_stats st;         /* scheduler thread */
        sched_stats st_pub;     /* snapshot after each step, under out.mu (threaded readers) */
    } stats;
    struct {                    /* inbox (in.mu) */
        pthread_mutex_t mu;     /* guards this group, hooks.stop_*, thr.stop*, ctl queue */
        pthread_cond_t cv;
        sreq *head, *tail;      /* owned requests */
        abort_msg *ab_head, *ab_tail; /* owned */
        uint64_t next_id;
        uint64_t rng;           /* seeds for unseeded requests (and the random policy) */
    } in;
    struct {                    /* front hooks (set before the thread starts; output hook under in.mu) */
        sched_output_hook output; /* the front's output stage (check / text) */
        void *output_ctx;       /* borrowed */
        sched_stop_fn stop_fn;  /* sched_set_stop_hook: output.check calls it */
        void *stop_ctx;         /* borrowed */
        sched_draft_fn draft_fn; /* speculative decoding seam (set with a tree hook too) */
        sched_draft_tree_fn draft_tree_fn; /* tree drafts, or NULL */
        bool tree_ok;           /* the model verifies trees (model_tree_ok); any page size */
        void *draft_ctx;        /* borrowed */
        int max_draft;
        const int32_t *draft_slots; /* during a draft hook call: that request's KV slots (EAGLE) */
        bool accept_relaxed;    /* sched_set_spec_accept below (1, 1): verify with SGLang's thresholds */
        double accept_single, accept_acc; /* the thresholds when accept_relaxed */
    } hooks;
    struct {                    /* outbox (out.mu) */
        pthread_mutex_t mu;     /* guards this group and stats.st_pub */
        pthread_cond_t cv;
        sched_event *head, *tail; /* owned events */
        int efd;                /* eventfd, owned (-1 none) */
    } out;
    struct {                    /* the thread (stop / stopped under in.mu) */
        pthread_t thread;
        bool thread_started, stop;
        bool stopped;           /* the thread ran and was stopped: control messages refused */
    } thr;
    struct {                    /* control (in.mu guards the queue and `done`; the rest is scheduler-thread state) */
        ctl_msg *head, *tail;   /* borrowed from the waiting callers */
        pthread_cond_t cv;      /* broadcast when a message is done */
        bool paused;            /* also read by sched_is_paused under in.mu */
        ctl_msg *swap_wait;     /* SWAP_MODEL waiting for the requests in flight */
        sreq *held_head, *held_tail; /* requests that arrived while paused / a swap waits (owned) */
        int rsv_tok, rsv_kv, rsv_nth; /* model_reserve sizes (applied to a swapped-in model) */
    } ctl;
    struct {                    /* progress for the watchdog (prog.mu) */
        pthread_mutex_t mu;
        sched_progress pg;
    } prog;
};

#endif
