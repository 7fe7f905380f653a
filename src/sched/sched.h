/* sched — SGLang's scheduler: continuous batching over a paged KV cache
 * with a radix prefix cache, in one thread.
 *
 * DESIGN
 * One scheduler owns the model's KV tensors, the page pool (kv_pool), the
 * radix tree (kv_radix) and every request's state.  Nothing else touches
 * them.  Other threads talk to it through two queues:
 *
 *   front ── sched_submit / sched_abort ──▶ inbox (mutex + condvar)
 *                                            │
 *   scheduler thread: loop {                 ▼
 *     drain inbox (validate, queue-full check, aborts free pages now)
 *     prefill?  order the waiting queue by --schedule-policy, admit by
 *               token budget (PrefillAdder), chunk a long prompt,
 *               [mixed: + one decode token per running request]
 *     else decode: one token for every running request (retract the
 *               longest output when the pool runs dry), plus draft
 *               tokens when a draft hook is set
 *     one forward in three stages:
 *       assemble -> model_forward -> process results, where each request
 *       takes 0..k new tokens, each through: logit processors (penalties,
 *       logit_bias, next the grammar mask) -> sample or verify -> stop
 *       checks; then emit; finished prefixes are cached in the radix tree
 *   }                                        │
 *   front ◀── sched_poll / sched_wait ─── outbox (mutex + condvar + eventfd)
 *
 * The same loop runs synchronously with sched_step / sched_run_until_idle
 * (offline `generate --requests`, `bench-offline`, tests): then the caller
 * is the scheduler thread and must not call sched_start.
 *
 * Admission follows SGLang's PrefillAdder (schedule_policy.py):
 *   rem_total = free + evictable tokens
 *               - sum(running: min(max_new - out, 4096) * new_token_ratio)
 *               - sum(admitted this step: extend + min(max_new, 4096))
 *   a request is admitted when extend + min(max_new, 4096) < rem_total,
 *   the batch holds fewer than --max-prefill-tokens input tokens (the first
 *   request always goes), and at most --chunked-prefill-size tokens are
 *   prefilled (the last admitted prompt is cut to the rest: a "chunked"
 *   request continues first in the next prefill step).
 * new_token_ratio starts at 0.7 * conservativeness, decays linearly to
 * 0.14 x that over 600 decode steps, and jumps up after a retraction to
 * (decoded + 20 * running) / sum(max_new) (SGLang's retract_decode).
 *
 * Events (sched_event) carry the tokens produced since the previous event
 * of the request: streaming requests get one every stream_interval
 * tokens, every request gets a final SCHED_EV_FINISH.
 *
 * Output text is the front's: it installs an output hook
 * (sched_set_output_hook; api/api_output.h is the HTTP front's) and opts
 * a request in with sched_req_spec.output_ctx.  The scheduler calls it
 * after every token of a request that has stop strings (stop-string
 * check) and when it builds an event (the text since the previous event,
 * carried in sched_event.text), so each output token is detokenized once,
 * on this thread.  Requests with stop strings and no hook are refused at
 * submit.
 *
 * Embedding mode (sched_args.is_embedding, SGLang's --is-embedding): every
 * request is prefill only (max_new_tokens 0, no sampling).  The forward
 * asks the model for the final-normed hidden state of each prompt's last
 * token instead of logits (model_batch.want_hidden); the scheduler pools
 * it as SGLang's Pooler(LAST, normalize=True): first embed_dims values,
 * L2-normalized, and the FINISH event (finish LENGTH 0) carries it.
 * Prompts go through the radix tree like generation prompts (prefix hits
 * skip recomputing the shared part; the last token is always computed).
 *
 * Files: sched.c (create / thread) over sched_step, sched_ctl,
 * sched_inbox, sched_batch (assemble), sched_retract, sched_output
 * (process results), sched_req, sched_kv, sched_event, sched_policy,
 * sched_util: each includes only the layers below it (sched_impl.h lists
 * them; tests/scripts/test_sched_layers.sh checks).
 *
 * Ownership: sched borrows the model (must outlive it) and owns the KV,
 * pool, tree, compute pool, requests and queued events.  Events returned
 * by sched_poll/sched_wait belong to the caller (sched_event_free). */
#ifndef SGLC_SCHED_H
#define SGLC_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "grammar/grammar.h"
#include "grammar/grammar_queue.h"
#include "model/model.h"
#include "sampling/sampling_params.h"

typedef enum {
    SCHED_POLICY_FCFS = 0,
    SCHED_POLICY_LPM,
    SCHED_POLICY_DFS_WEIGHT,
    SCHED_POLICY_LOF,
    SCHED_POLICY_RANDOM,
} sched_policy;

/* Scheduler arguments, SGLang names (--max-total-tokens ...). 0 / -1
 * mean "derive as SGLang does" where the comment says so. */
typedef struct sched_args {
    int page_size;                    /* --page-size, default 1 */
    int64_t max_total_tokens;         /* --max-total-tokens, 0 = from mem_fraction_static */
    double mem_fraction_static;       /* --mem-fraction-static, <= 0 = default (0.3 on CPU) */
    int kv_cache_dtype;               /* --kv-cache-dtype: -1 auto, else DTYPE_BF16 */
    int max_running_requests;         /* --max-running-requests, 0 = derive */
    int max_queued_requests;          /* --max-queued-requests, 0 = unbounded */
    int max_prefill_tokens;           /* --max-prefill-tokens, default 16384 */
    int chunked_prefill_size;         /* --chunked-prefill-size, default 8192; -1 = off */
    int prefill_max_requests;         /* --prefill-max-requests, 0 = unbounded */
    double schedule_conservativeness; /* --schedule-conservativeness, default 1.0 */
    sched_policy schedule_policy;     /* --schedule-policy, default fcfs */
    bool disable_radix_cache;         /* --disable-radix-cache */
    int radix_eviction_policy;        /* --radix-eviction-policy lru|lfu (KV_EVICT_*) */
    bool enable_mixed_chunk;          /* --enable-mixed-chunk */
    bool enable_priority_scheduling;  /* --enable-priority-scheduling */
    bool schedule_low_priority_values_first; /* --schedule-low-priority-values-first */
    int priority_scheduling_preemption_threshold; /* default 10 */
    bool abort_on_priority_when_disabled;        /* --abort-on-priority-when-disabled */
    bool disable_priority_preemption; /* --disable-priority-preemption: order only, never retract */
    bool has_default_priority;        /* --default-priority-value given */
    int64_t default_priority_value;   /* priority of requests that set none (priority scheduling on) */
    bool log_time_stats;              /* --enable-request-time-stats-logging: "Req Time Stats(...)" lines */
    int decode_log_interval;          /* --decode-log-interval: batch log lines; 0 = none (library default) */
    int stream_interval;              /* --stream-interval, default 1 */
    int threads;                      /* compute threads, 0 = all cores */
    uint64_t random_seed;             /* --random-seed: unseeded sampling, random policy */
    bool sleep_on_idle;               /* --sleep-on-idle: park the compute workers at once when idle */
    bool is_embedding;                /* --is-embedding: every request is an embedding request
                                       * (prefill only, see "Embedding mode" above) */
    int max_loras_per_batch;          /* --max-loras-per-batch: distinct adapters (the base
                                       * counting as one, as SGLang) in a running batch; 0 = no limit */
    /* hybrid Mamba2 models (kv/mamba_state.h): */
    int max_mamba_cache_size;         /* --max-mamba-cache-size: states, 0 = derived */
    int mamba_ssm_dtype;              /* --mamba-ssm-dtype: DTYPE_F32 (default) or DTYPE_BF16 */
    double mamba_full_memory_ratio;   /* --mamba-full-memory-ratio: states / KV memory, default 0.9 */
    int mamba_strategy;               /* --mamba-scheduler-strategy: SCHED_MAMBA_AUTO (default),
                                       * _NO_BUFFER (radix cache off) or _EXTRA_BUFFER (state
                                       * checkpoints in the radix cache, see sched_kv.c) */
    int mamba_track_interval;         /* --mamba-track-interval: tokens between checkpoints, default 256 */
} sched_args;

enum { SCHED_MAMBA_AUTO = 0, SCHED_MAMBA_NO_BUFFER = 1, SCHED_MAMBA_EXTRA_BUFFER = 2 };

void sched_args_init(sched_args *a);
const char *sched_policy_name(sched_policy p);
/* "fcfs" ... "random" -> sched_policy, -1 when unknown. */
int sched_policy_parse(const char *name);

/* One request as the front hands it over.  sched_submit takes ownership of
 * every pointer (rid, input_ids, cache_salt, token_ids_logprob, params). */
typedef struct sched_req_spec {
    char *rid;                   /* owned; NULL = generated ("req-<id>") */
    int32_t *input_ids;          /* (n_input) owned */
    int64_t n_input;
    sampling_params params;      /* owned (moved in); parsed, verify() is done at submit */
    bool has_priority;
    int64_t priority;
    char *cache_salt;            /* owned or NULL: radix isolation key */
    bool return_logprob;
    int top_logprobs_num;
    int64_t logprob_start_len;   /* -1 = len(input) - 1 (output logprobs + one padded entry) */
    int32_t *token_ids_logprob;  /* (n_token_ids_logprob) owned or NULL */
    int n_token_ids_logprob;
    bool stream;                 /* token events every stream_interval tokens */
    int embed_dims;              /* embedding mode: keep the first embed_dims values before
                                  * normalizing (Matryoshka `dimensions`); 0 = all */
    int32_t *grammar_after;      /* (n_grammar_after) owned or NULL: with a grammar, the mask applies
                                  * only after the output holds this token sequence (the end of a
                                  * reasoning section, e.g. "</think>"); NULL = from the first token */
    int n_grammar_after;
    char *lora_name;             /* owned or NULL: the lora_path a codec read; the front resolves
                                  * it into `lora` (lora_resolve) before submit */
    struct lora_adapter *lora;   /* owned reference or NULL: the request's LoRA adapter (lora/lora.h;
                                  * each sibling takes its own reference) */
    void *output_ctx;            /* borrowed or NULL: the front's per-request output stage, passed to
                                  * the output hook (with the sibling index); must live until the
                                  * request's FINISH event (every sibling's) */
} sched_req_spec;

void sched_req_spec_init(sched_req_spec *s);
void sched_req_spec_free(sched_req_spec *s);

typedef enum { SCHED_EV_TOKENS = 0, SCHED_EV_FINISH = 1 } sched_event_kind;

typedef enum {
    SCHED_FINISH_NONE = 0,
    SCHED_FINISH_LENGTH,     /* {"type":"length","length":N} */
    SCHED_FINISH_STOP_TOKEN, /* {"type":"stop","matched":ID} */
    SCHED_FINISH_STOP_STR,   /* {"type":"stop","matched":"str"} */
    SCHED_FINISH_ABORT,      /* {"type":"abort","message":...} (also rejections) */
} sched_finish_kind;

/* One outbox message.  Arrays hold this event's tokens only. */
typedef struct sched_event {
    sched_event_kind kind;
    uint64_t id;                 /* sched_submit's return value */
    int index;                   /* n > 1: which sibling (0..n-1); else 0 */
    char *rid;                   /* owned copy */
    int32_t *ids;                /* (n_ids) new output ids */
    int n_ids;
    float *logprobs;             /* (n_ids) or NULL: chosen tokens' logprobs */
    int top_n;                   /* top_logprobs_num */
    int32_t *top_ids;            /* (n_ids, top_n) or NULL */
    float *top_logprobs;         /* (n_ids, top_n) */
    int n_tid;                   /* token_ids_logprob count */
    int32_t *tids;               /* (n_tid) the ids asked for */
    float *tid_logprobs;         /* (n_ids, n_tid) or NULL */
    int64_t completion_tokens;   /* output tokens so far, this event included */
    /* input logprobs, on the request's first event when return_logprob:
     * entries for input positions logprob_start_len .. n_input - 1; entry 0
     * is SGLang's None pad (NaN here) */
    int n_in;
    int32_t *in_ids;             /* (n_in) the input tokens */
    float *in_logprobs;          /* (n_in) */
    int32_t *in_top_ids;         /* (n_in, top_n) or NULL; row 0 = pad (-1) */
    float *in_top_logprobs;      /* (n_in, top_n) */
    float *in_tid_logprobs;      /* (n_in, n_tid) or NULL */
    /* FINISH only: */
    sched_finish_kind finish;
    int64_t finish_length;       /* LENGTH */
    int32_t finish_token;        /* STOP_TOKEN */
    char *finish_str;            /* STOP_STR: the string; ABORT: the message (owned) */
    int http_status;             /* ABORT: 400 bad request, 503 queue full, 500 internal */
    int64_t prompt_tokens;
    int32_t last_input_id;       /* the prompt's last token (input_token_logprobs) */
    int64_t cached_tokens;
    int num_retractions;
    double e2e_latency;          /* seconds from submit to finish */
    /* every event (not FINISH only): */
    bool spec_on;                /* a draft hook is set: the spec_* counters below are meaningful */
    int64_t spec_verify_ct;      /* decode (verify) forwards of this request so far (SGLang's spec_verify_ct) */
    int64_t spec_accepted;       /* draft tokens accepted so far (spec_accept_token_num) */
    int64_t spec_drafted;        /* draft tokens verified so far (spec_draft_token_num) */
    float *embedding;            /* (n_embedding) owned or NULL: embedding mode, FINISH (not abort) */
    int n_embedding;
    char *text;                  /* (text_len) owned or NULL: the output hook's text since the previous
                                  * event (requests with output_ctx); NUL-terminated */
    size_t text_len;
    struct sched_event *next;    /* queue link (internal) */
} sched_event;

void sched_event_free(sched_event *e);

typedef struct sched sched;

/* The output hook: the front's output stage, called on the scheduler
 * thread.  ctx is sched_set_output_hook's, req_ctx the request's
 * sched_req_spec.output_ctx (NULL when it has none), index its sibling;
 * p its sampling params, out/n_out all its output ids so far.
 *   check  after each new token of a request with stop strings that did
 *          not end it by length or stop token (SGLang's check_finished
 *          order): the index of the stop string the output text now
 *          holds, or -1.
 *   text   when an event of a request with output_ctx is built: the text
 *          of the output since the previous event (malloc'd, moved into
 *          sched_event.text; NULL = none).  finish is the FINISH event's
 *          reason, SCHED_FINISH_NONE for a TOKENS event.  May be NULL. */
typedef struct sched_output_hook {
    int (*check)(void *ctx, void *req_ctx, uint64_t id, int index, const sampling_params *p, const int32_t *out,
                 int64_t n_out);
    char *(*text)(void *ctx, void *req_ctx, int index, const sampling_params *p, const int32_t *out, int64_t n_out,
                  sched_finish_kind finish, size_t *text_len);
} sched_output_hook;

/* A stop-string predicate alone (no text; the scheduler's unit tests):
 * check's arguments without the request context. */
typedef int (*sched_stop_fn)(void *ctx, uint64_t id, const sampling_params *p, const int32_t *out,
                             int64_t n_out);

/* Build a scheduler for model m: sizes and allocates the KV pool (logs
 * "max_total_num_tokens=..."), the radix tree and the compute pool.  NULL
 * with a message in err on failure. */
sched *sched_create(model *m, const sched_args *a, char *err, size_t errlen);
/* Stops the thread if started; drops every request (their pages go back). */
void sched_destroy(sched *s);

/* Install the output hook (h is copied; NULL removes it); call before
 * sched_start and before any submit (the scheduler thread reads it
 * without locking). */
void sched_set_output_hook(sched *s, const sched_output_hook *h, void *ctx);
/* Install an output hook whose check is fn (and no text); same rules. */
void sched_set_stop_hook(sched *s, sched_stop_fn fn, void *ctx);

/* Speculative decoding seam (and the unit tests' verify entry): called on
 * the scheduler thread before each decode forward for every running
 * request (`id`, sibling `index`, its token sequence seq (len): input then
 * output ids).  It writes up to max_draft proposed next tokens to draft
 * and returns how many (0 = none).  The forward computes the draft tokens
 * too, and the process-results stage verifies them in order: each token is
 * sampled as usual and the next draft is used only when it equals the
 * sampled token, so outputs are the same with or without drafts (only the
 * number of forwards changes; at the default accept thresholds, see
 * sched_set_spec_accept).  With a hook set every decode forward
 * counts as a verify (sched_event.spec_*, sched_stats.spec_*; SGLang's
 * spec_verify_ct); on a dynamic-NTK rope model no drafts reach past
 * max_position_embeddings (the forward's length would change the rope).
 * The drafters are src/spec.  Set before sched_start; NULL removes it. */
typedef int (*sched_draft_fn)(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft,
                              int max_draft);
void sched_set_draft_hook(sched *s, sched_draft_fn fn, void *ctx, int max_draft);
/* --speculative-accept-threshold-single / -acc (SGLang's names; both in
 * (0, 1], checked by the caller).  At (1, 1), the default, drafts are
 * verified by sample-and-compare (outputs identical with or without
 * drafts).  Below, a sampled request (temperature > 0) verifies each
 * draft with sampling_verify_processed: taken when its target
 * probability p >= threshold_single or coin <= p / threshold_acc, else
 * the residual is sampled — longer accepts, but the output no longer
 * follows the target distribution exactly.  Greedy requests are not
 * affected.  Set before sched_start. */
void sched_set_spec_accept(sched *s, double threshold_single, double threshold_acc);
/* Tree drafts (SGLang's draft tree, verified in one forward): as
 * sched_draft_fn, and the hook also writes parent[k] for each draft token
 * k: the draft it follows (0 <= parent[k] < k) or -1 (it follows
 * seq[len - 1]).  The forward runs every node (a tree attention mask,
 * rope position = len - 1 + depth); the process-results stage samples the
 * root's row, then moves to the child whose token equals the sampled token
 * (the first such, in draft order) and samples its row, and so on: a
 * greedy request takes the target's argmax path (SGLang's
 * verify_tree_greedy), a sampled one draws each token from the target
 * distribution exactly as plain decoding does ("sample, then match a
 * child"), so outputs stay identical.  The accepted nodes' KV moves into
 * place (page size 1: their pages; larger pages: their rows are copied,
 * model_tree_copy_slot), the others are freed in the same step.  parent is
 * NULL when the scheduler needs a chain for this request (accept thresholds
 * below 1, a model without tree support: model_tree_ok, tensor / pipeline
 * parallelism, Mamba2): the hook then
 * returns a chain.  A request with a grammar gets its tree pruned to the
 * nodes the grammar allows (sched_grammar_prune_tree).  Replaces a
 * sched_set_draft_hook hook (and the other way round). */
typedef int (*sched_draft_tree_fn)(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len,
                                   int32_t *draft, int32_t *parent, int max_draft);
void sched_set_draft_tree_hook(sched *s, sched_draft_tree_fn fn, void *ctx, int max_draft);
/* Inside a draft hook call only (else NULL): the KV slots of the request
 * being drafted, one per position of seq (the last one's K/V not computed
 * yet).  EAGLE reads the target's hidden states of those slots. */
const int32_t *sched_draft_slots(const sched *s);

/* Constrained decoding (sampling_params json_schema / regex / ebnf /
 * structural_tag).  q compiles the grammars on its own thread(s) (its
 * compile function turns a grammar_key into a `grammar *` for vocabulary
 * v: grammar_compile_key); a request with a grammar waits in the
 * scheduler's grammar queue (sched_stats.n_grammar_queue, SGLang's
 * num_grammar_queue_reqs) until its job is done, then joins the waiting
 * queue with its own matcher; a grammar that fails, or is not ready
 * after timeout_s seconds, finishes that request with a 400 ("Failed to
 * compile json grammar: ...", "Grammar preprocessing timed out: ...").
 * Each new token is sampled under the mask (after the logit processors,
 * so logprobs are of the masked distribution as SGLang's) and accepted
 * by the matcher; when the matcher terminates the request finishes with
 * finish_reason stop (matched = the last token).  Without a queue
 * (--grammar-backend none) grammar requests are refused at submit.
 * Call before sched_start and before any submit; q and v are borrowed
 * (must outlive the scheduler). */
void sched_set_grammar(sched *s, grammar_queue *q, const grammar_vocab *v, double timeout_s);

/* Thread-safe.  Queue a request; returns its id (>= 1).  Validation
 * failures, queue-full rejections etc. come back as a FINISH event with
 * SCHED_FINISH_ABORT.  n > 1 produces n results (event.index). */
uint64_t sched_submit(sched *s, sched_req_spec *spec);
/* Thread-safe.  Abort every request with this rid (its pages are freed
 * in the scheduler's next step; a FINISH/ABORT event follows).  abort_all
 * when rid is NULL. */
void sched_abort(sched *s, const char *rid);
/* Thread-safe.  Abort the request(s) of one sched_submit id (all n
 * siblings): for a front whose client went away. */
void sched_abort_id(sched *s, uint64_t id);

/* Thread-safe outbox.  poll: next event or NULL.  wait: blocks up to
 * timeout_s seconds (< 0 = forever). */
sched_event *sched_poll(sched *s);
sched_event *sched_wait(sched *s, double timeout_s);
/* eventfd readable while events are queued (for an event loop); -1 if
 * unavailable. */
int sched_outbox_fd(const sched *s);

/* Threaded mode: run the loop on a new thread until sched_stop. */
int sched_start(sched *s);
void sched_stop(sched *s);

/* Synchronous mode.  One iteration (drain inbox, one batch).  Returns 1 if
 * it did something, 0 when idle, -1 on an internal failure (logged). */
int sched_step(sched *s);
/* Step until no request is queued or running.  0 or -1. */
int sched_run_until_idle(sched *s);

/* Idle leak check (SGLang's "KV cache pool leak detected"): 0 or -1 with
 * the message in err.  Only meaningful while idle. */
int sched_check_leak(sched *s, char *err, size_t errlen);

/* SGLang's flush_cache: empty the radix tree.  Only while idle (no request
 * queued or running); -1 otherwise.  Synchronous mode / scheduler thread. */
int sched_flush_cache(sched *s);

/* ---- control channel ----------------------------------------------------
 *
 * Control messages (SGLang's PauseGenerationReqInput, ContinueGeneration-
 * ReqInput, FlushCacheReqInput, UpdateWeightFromDiskReqInput) travel in the
 * inbox like requests and run on the scheduler thread between two steps,
 * after the requests and aborts queued before them.  sched_control blocks
 * its caller until the message is done.
 *
 * Pause: new requests submitted while paused are held (not queued, not
 * counted by --max-queued-requests) until continue, as SGLang's tokenizer
 * manager holds them on is_pause_cond; aborts still reach them.
 *   ABORT     every queued/running request finishes with abort; then paused
 *   RETRACT   running requests go back to the waiting queue (their KV goes
 *             to the radix tree, outputs and sampling state are kept); no
 *             request holds KV afterwards, so flush_cache works
 *   IN_PLACE  nothing moves; running requests keep their KV and resume
 * Swap model: the new model must have the old one's architecture and
 * shapes (refused otherwise, the old one stays).  When paused, it happens
 * at once (running requests are retracted: their KV came from the old
 * weights); otherwise new requests are held and the swap waits until the
 * requests already in flight finish (SGLang's model_update_lock writer).
 * The radix tree is flushed after the swap. */
typedef enum {
    SCHED_CTL_PAUSE = 1,
    SCHED_CTL_CONTINUE,
    SCHED_CTL_FLUSH_CACHE,
    SCHED_CTL_SWAP_MODEL,
} sched_ctl_kind;

typedef enum { SCHED_PAUSE_ABORT = 0, SCHED_PAUSE_RETRACT, SCHED_PAUSE_IN_PLACE } sched_pause_mode;

typedef struct sched_ctl {
    sched_ctl_kind kind;
    sched_pause_mode pause_mode; /* PAUSE */
    model *new_model;            /* SWAP_MODEL: in.  The scheduler only borrows models: on
                                  * success it runs new_model and hands back the old one in
                                  * old_model; on failure it keeps the old one (the caller
                                  * still owns new_model either way) */
    bool keep_cache;             /* SWAP_MODEL: keep the radix cache (SGLang's flush_cache=false) */
    bool stay_paused;            /* SWAP_MODEL: generation stays paused afterwards (keep_pause) */
    /* results */
    int rc;                      /* 0 done, -1 refused (msg says why) */
    char msg[512];
    model *old_model;            /* SWAP_MODEL success: the replaced model (now unused) */
    int n_affected;              /* PAUSE: requests aborted / retracted; SWAP: requests retracted */
} sched_ctl;

/* Thread-safe.  Send a control message and wait for it.  Threaded mode:
 * the scheduler thread runs it; synchronous mode (no thread): the caller
 * drives sched_step until it is done (a waiting swap runs the requests in
 * flight to completion).  Returns c->rc.  After the scheduler thread was
 * stopped, returns -1 ("The scheduler is stopped."). */
int sched_control(sched *s, sched_ctl *c);
/* Thread-safe.  Whether generation is paused (pause without continue). */
bool sched_is_paused(sched *s);
/* The model the scheduler runs now (changes with SWAP_MODEL).  Scheduler
 * thread, or any thread after sched_stop. */
model *sched_model(sched *s);

/* Watchdog view (thread-safe): steps finished so far and, while a step is
 * working (scheduling + forward), when it began and what it runs. */
typedef struct sched_progress {
    uint64_t steps;              /* steps that did work, finished */
    double busy_since;           /* time_now_sec() at the start of the step in progress; 0 = none */
    int batch_reqs;              /* requests in the step in progress */
    int64_t batch_tokens;        /* tokens in its forward (0 before the batch is built) */
    bool decode;                 /* the step is a decode step */
} sched_progress;
void sched_get_progress(sched *s, sched_progress *out);

typedef struct sched_stats {
    int64_t max_total_num_tokens;
    int64_t n_finished;
    int64_t prompt_tokens;        /* of finished requests */
    int64_t cached_tokens;        /* of finished requests */
    int64_t generated_tokens;
    int64_t num_retractions;
    int64_t num_preemptions;
    int64_t n_prefill_steps, n_decode_steps, n_mixed_steps;
    int64_t leak_checks, leak_failures;
    double forward_s, sched_s;    /* time in model_forward / in the rest of the steps */
    /* speculative decoding (a draft hook set): over all decode rows so far */
    int64_t spec_verify_ct;       /* request rows of decode forwards */
    int64_t spec_verify_tokens;   /* tokens those rows produced (accept length = tokens / rows) */
    int64_t spec_draft_tokens;    /* draft tokens they verified */
    int64_t spec_accepted_tokens; /* of them, accepted */
    int64_t spec_tree_verifies;   /* request rows whose drafts were a tree (not a chain) */
    int64_t spec_tree_off_branch; /* accepted drafts off the tree's first branch (a chain would have missed them) */
    int n_running, n_waiting;
    int n_grammar_queue;          /* requests waiting for their grammar (num_grammar_queue_reqs) */
    int64_t free_tokens, evictable_tokens, protected_tokens;
} sched_stats;

/* Counters and pool state.  Scheduler thread only (synchronous mode, or
 * after sched_stop): the scheduler updates them without locking. */
void sched_get_stats(sched *s, sched_stats *out);
/* Thread-safe: the counters as of the end of the last step in threaded
 * mode (zeros before the first step). */
void sched_get_stats_snapshot(sched *s, sched_stats *out);
/* scheduler thread only: refresh the snapshot now */
void sched_publish_stats(sched *s);

/* SGLang's max_req_input_len (the longest input the scheduler admits:
 * min(context_len - 1, pool tokens - 1) - 5).  Fixed at create; any thread. */
int64_t sched_max_req_input_len(const sched *s);

#endif
