/* api — SGLang's native routes and the OpenAI-compatible routes, over the
 * http front and the scheduler's queues.
 *
 * DESIGN
 *   polling thread (http):  api_handle: requests without a body are
 *                           answered here; those with one are queued for
 *                           the tokenizer workers (api_tokq.h).
 *   tokenizer workers:      auth, route, parse JSON, chat template,
 *                           tokenize, build sched_req_specs, register the
 *                           job, sched_submit; never wait on the model.
 *   dispatcher thread:      sched_wait -> find the job by submit id ->
 *                           accumulate (sched_result, the event's text),
 *                           output parsers, write SSE chunks or the final
 *                           JSON (http_respond / http_stream_*).
 *   scheduler thread:       the output stage's hook (api_output.h):
 *                           detokenizes each output token once, matches
 *                           stop strings, puts the text in the events;
 *                           install it with api_install_output_hook.
 * A client that disconnects aborts all of its job's requests by rid.
 * Start-up (SGLang's ServerStatus.Starting): the front listens while the
 * server warms up; /health, /health_generate and the generation routes
 * answer 503 "The server is starting." until api_set_ready.
 *
 * Errors: native routes answer {"error": {"message": ...}} with SGLang's
 * status codes; every error on a /v1 path (OpenAI routes, 401/403, 404,
 * 405, 503) is api_oai_error_obj: SGLang's {"object": "error", "message",
 * "type", "param", "code"} plus OpenAI's "error": {"message", "type",
 * "param", "code"}; elsewhere 401 {"error": "Unauthorized"} / 403
 * {"error": "Forbidden"} by SGLang's --api-key / --admin-api-key rules
 * (api_ops.h).
 *
 * Data parallelism (--dp-size): requests go to the replica the controller
 * picks (or the one a request's data_parallel_rank names: 400 when out of
 * range); the dispatcher reads every replica's outbox through it; aborts,
 * /abort_request, the control routes reach every replica; /get_load has
 * one entry per dp_rank and /metrics one scheduler gauge line per dp_rank
 * (label dp_rank, as SGLang's scheduler metrics).
 *
 * Ownership: api_server borrows the scheduler, tokenizer, chat template
 * and args (all must outlive it) and owns its jobs and its thread. */
#ifndef SGLC_API_H
#define SGLC_API_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "api/api_embed.h"
#include "api/api_score.h"
#include "http/http.h"
#include "sched/sched.h"
#include "template/completion.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

struct dp;

typedef struct api_config {
    sched *s;                        /* borrowed, started by the caller */
    struct dp *dp;                   /* borrowed or NULL: the data-parallel controller (dp/dp.h,
                                      * --dp-size); every request goes through it (s is then its
                                      * replica 0); NULL = s alone (api_create wraps it) */
    const tok_tokenizer *tok;        /* borrowed; NULL = --skip-tokenizer-init */
    const tmpl_chat *chat;           /* borrowed; NULL = no chat template */
    const tmpl_completion *completion; /* borrowed; NULL = no --completion-template (suffix -> 400) */
    const char *served_model_name;
    const char *model_path;
    const char *tokenizer_path;
    const char *architecture;
    const char *model_type;          /* config.json's model_type (/get_model_info), or NULL */
    const char *api_key;             /* NULL = no authentication */
    const char *admin_api_key;       /* --admin-api-key; NULL = none (see api_ops.h for the rules) */
    bool allow_auto_truncate;        /* --allow-auto-truncate (api_limits_apply) */
    bool is_embedding;               /* --is-embedding: /encode and /v1/embeddings answer, the
                                      * generation routes 400 (the scheduler runs in embedding mode) */
    api_embed_model embed;           /* --is-embedding: hidden size, Matryoshka support */
    api_score_model score;           /* classifier labels, --multi-item-scoring-delimiter (api_score.h) */
    struct api_reqlog *reqlog;       /* borrowed or NULL: --log-requests, /configure_logging */
    struct api_metrics *metrics;     /* borrowed or NULL: --enable-metrics (/metrics is 404 without) */
    struct api_mexport *mexport;     /* borrowed or NULL: --export-metrics-to-file */
    const char *tool_call_parser;    /* --tool-call-parser (api_toolcall.h names) or NULL */
    const char *reasoning_parser;    /* --reasoning-parser (api_reasoning.h names) or NULL */
    int64_t context_length;
    int64_t vocab_size;
    bool incremental_streaming;      /* --incremental-streaming-output */
    bool enable_cache_report;        /* usage.prompt_tokens_details.cached_tokens */
    int tokenizer_workers;           /* --tokenizer-worker-num: requests with a body are served
                                      * by this many worker threads plus an express thread
                                      * (api_tokq.h); 0 = on the calling thread (tests) */
    bool batch_encode;               /* --enable-tokenizer-batch-encode (api_tokq.h) */
    const char *root_path;           /* --fastapi-root-path: prefix stripped from paths */
    const char *weight_version;      /* --weight-version */
    const json_t *default_sampling;  /* borrowed or NULL: --sampling-defaults model, from
                                      * generation_config.json; OpenAI routes only */
    const json_t *preferred_sampling; /* borrowed or NULL: --preferred-sampling-params, fills
                                       * a /generate request's missing sampling params */
    json_t *server_info;             /* owned by the caller: args_to_json of the effective args */
    bool start_later;                /* api_create leaves the server "starting" (health and
                                      * generation routes 503, no dispatcher: the caller may
                                      * read the scheduler's outbox) until api_set_ready */
    /* POST /update_weights_from_disk: load a model from a folder / hub id
     * (load_format NULL = as at start-up; called on an admin thread, may be
     * slow) and free one.  NULL load_model: the route answers 400. */
    model *(*load_model)(void *ctx, const char *model_path, const char *load_format, char *err, size_t errlen);
    void (*free_model)(void *ctx, model *m);
    void *load_ctx;
} api_config;

typedef struct api_server api_server;

/* Starts the dispatcher thread.  NULL with a message in err. */
api_server *api_create(const api_config *cfg, char *err, size_t errlen);
/* Leave the "starting" state: start the dispatcher thread (from now on it
 * alone reads the scheduler's outbox).  0, or -1 with a message in err. */
int api_set_ready(api_server *a, char *err, size_t errlen);
/* Stops the dispatcher (after the jobs are done: see api_active). */
void api_destroy(api_server *a);

/* The http handler (ctx = api_server). */
void api_handle(void *ctx, http_req *r, const char *method, const char *path, const char *body,
                size_t body_len);

/* Install the output stage's hook (api_output.h) on s: the front of a
 * server with a tokenizer calls it before sched_start. */
void api_install_output_hook(sched *s);

/* Refuse new generation work with 503 (shutdown). */
void api_set_draining(api_server *a, bool on);
/* Jobs not finished yet. */
int api_active(api_server *a);

#endif
