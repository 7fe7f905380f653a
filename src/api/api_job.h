/* api_job — the generation job and the seams between the route files.
 * Internal to src/api; not for other modules.
 *
 * DESIGN: one HTTP request that generates (or embeds) is a job: n_prompt
 * prompts, each submitted once to the scheduler (sched handles n > 1 as
 * siblings), so a job has n_prompt * n slots, laid out prompt-major
 * (SGLang's order for batch x n).  The files:
 *
 *   api.c             api_handle (polling thread: auth, route), the job
 *                     registry, submission, the dispatcher thread
 *                     (events -> slots -> answers), lifecycle
 *   api_reply.c       shared response helpers: errors in the native and
 *                     OpenAI shapes, SSE writes, usage, token texts
 *   api_native.c      /generate, /health_generate, /tokenize, /detokenize
 *   api_openai.c      what /v1/completions and /v1/chat/completions share:
 *                     the request -> sampling params, the answer and the
 *                     stream chunks
 *   api_completions.c /v1/completions: prompts, suffix (FIM), echo,
 *                     logprobs
 *   api_chat.c        /v1/chat/completions: messages -> chat template ->
 *                     prompt, message / delta objects, logprobs
 *   api_embed_job.c   /encode and /v1/embeddings jobs (parsing is
 *                     api_embed.c)
 *   api_output.c      the output stage of each slot: detokenize once (on
 *                     the scheduler thread, through the output hook),
 *                     stop strings, output parsers
 *   api_generate_json.c  the /generate wire codec
 *
 * After submission only the dispatcher touches a job, except `gone` (set
 * by the close hook) and the rids it reads. */
#ifndef SGLC_API_JOB_H
#define SGLC_API_JOB_H

#include <pthread.h>
#include <stdatomic.h>

#include "api/api.h"
#include "api/api_impl.h"
#include "api/api_output.h"
#include "api/api_generate_json.h"
#include "api/api_tokq.h"

#include "dp/dp.h"
#include "util/timeutil.h"

enum { JOB_NATIVE = 0, JOB_COMPL, JOB_CHAT, JOB_HEALTH, JOB_ENCODE, JOB_EMBED, JOB_RESP, JOB_SCORE, JOB_RERANK,
       JOB_CLASSIFY };
/* JOB_SCORE, JOB_RERANK, JOB_CLASSIFY: /v1/score, /v1/rerank, /v1/classify (api_score.c); the last two
 * are embedding jobs (one slot per input, the FINISH event carries the score head's output). */
/* JOB_RESP: /v1/responses, a chat job answered as a Response (api_responses.c). */
/* JOB_ENCODE: SGLang's /encode; JOB_EMBED: OpenAI /v1/embeddings.  Each
 * input is one scheduler request (embedding mode) and one slot, whose
 * FINISH event carries the pooled vector. */

typedef struct api_slot {
    sched_result res;
    size_t sent;                 /* bytes of text already sent as deltas */
    size_t ids_sent;             /* output ids already sent (incremental native streaming) */
    double t_last;               /* metrics: when its last tokens arrived, 0 = none yet */
    int prompt;
    bool done, role_sent;
    int n_calls;                 /* tool calls opened so far (finish_reason "tool_calls") */
    float *emb;                  /* (n_emb) owned or NULL: embedding jobs */
    int n_emb;
} api_slot;

typedef struct api_job {
    api_server *api;
    http_req *hr;                /* until the terminal call */
    int kind;
    bool stream, list_out, include_usage, echo, return_logprob;
    int top_logprobs;
    bool text_in_logprobs;       /* return_text_in_logprobs */
    int n_prompt, n_per, n_slots, n_done;
    api_slot *slots;             /* (n_slots) */
    api_output *outs;            /* (n_slots) owned: the output stage of each slot (api_output.h);
                                  * prompt i's siblings are outs[i * n_per ...], its output_ctx */
    char **rids;                 /* (n_prompt) owned */
    uint64_t *sub_ids;           /* (n_prompt) sched_submit ids, 0 = not submitted */
    char **prompt_text;          /* (n_prompt) owned or NULL (echo) */
    int64_t *prompt_tokens;      /* (n_prompt) */
    char *oai_id;                /* owned */
    int64_t created;
    atomic_bool gone;
    atomic_bool submitted;       /* sub_ids are final (see job_on_close) */
    double t_submit;             /* metrics: submission time */
    json_t *log_objs;            /* owned or NULL: per prompt {"obj", "headers"} for --log-requests */
    bool base64;                 /* JOB_EMBED: encoding_format base64 */
    int embed_dims;              /* embedding jobs: Matryoshka dimensions, 0 = all */
    json_t *resp;                /* JOB_RESP: the answer's state (api_responses.c), owned */
    json_t *score;               /* JOB_SCORE / _RERANK / _CLASSIFY: the answer's state (api_score.c), owned */
    bool tool_single;            /* parallel_tool_calls false: only the first tool call is returned */
    const char *think_end;       /* a reasoning parser is on: its end tag (static); a grammar applies after it */
    bool kimi_ids;               /* kimi_k2: call ids "functions.NAME:N" (SGLang), N = tool_id_base +
                                  * the call's index; else "call_<24 hex>" */
    int tool_id_base;            /* the history's tool-call count */
    int err_status;              /* first error (non-streaming answer) */
    char *err_msg;               /* owned */
} api_job;

typedef struct reg_ent {
    uint64_t id;
    api_job *job;
    int base;                    /* first slot */
    int remaining;               /* siblings not finished */
    struct reg_ent *next;
} reg_ent;

#define REG_BUCKETS 4096

typedef struct api_resp_store api_resp_store; /* api_responses.c */

struct api_server {
    api_config cfg;
    char *served, *model_path, *tok_path, *arch, *api_key, *root_path, *weight_version; /* owned copies */
    char *admin_api_key;         /* owned copy or NULL */
    int64_t max_req_input_len;   /* the scheduler's (context_length - 6 in dry runs) */
    pthread_mutex_t mu;          /* registry and counters */
    reg_ent *reg[REG_BUCKETS];
    int n_jobs;
    int64_t n_reqs;              /* scheduler requests in flight */
    atomic_bool draining, stop;
    atomic_bool starting;        /* until api_set_ready: health 503, no generation */
    pthread_t thread;
    bool thread_started;
    atomic_ullong rid_counter;
    uint64_t dry_id;             /* dry run: fake submit ids */
    uint64_t rid_salt;
    api_admin *admin;            /* owned: control routes (api_admin.c) */
    api_tokq *tokq;              /* owned or NULL (routes run on the polling thread) */
    api_resp_store *resps;       /* owned: stored /v1/responses answers (its own lock) */
    dp *dp;                      /* cfg.dp, or owned (own_dp) around cfg.s; NULL = dry run */
    bool own_dp;
};


/* ---- api_reply.c: shared response helpers ------------------------------------ */

/* {"error": {"message": msg}}: the native routes' error (terminal call on r). */
void api_native_error(http_req *r, int status, const char *msg);
/* SGLang's ErrorResponse {"object": "error", "message", "type", "param",
 * "code"} (the streaming error chunk's "error" member). */
json_t *api_oai_error_fields(int status, const char *type, const char *msg);
/* The one error body of every /v1 route: api_oai_error_fields plus OpenAI's
 * "error": {"message", "type", "param", "code"} with the same values, so
 * OpenAI clients show the message. New object (NULL on OOM). */
json_t *api_oai_error_obj(int status, const char *type, const char *msg);
const char *api_oai_error_type(int status);
void api_oai_error(http_req *r, int status, const char *msg);
/* The error in the job's route style (terminal call on j->hr). */
void api_job_error(api_job *j, int status, const char *msg);
/* Write one SSE event of a job (takes o); a client that cannot take it
 * (gone, or over the stream buffer limit) gets its requests aborted. */
void api_job_sse(api_job *j, json_t *o);
/* The same with an SSE `event:` line (the Responses API's typed events). */
void api_job_sse_event(api_job *j, const char *event, json_t *o);
/* A fresh request id (32 hex digits) in out. */
void api_new_rid(api_server *a, char *out, size_t len);
/* Final text of a finished slot (its output stage's text minus a matched
 * stop string unless no_stop_trim: api_output_final).  malloc'd. */
char *api_slot_final_text(api_job *j, api_slot *sl);
/* The slot's output stage. */
static inline api_output *api_slot_out(api_job *j, api_slot *sl) { return &j->outs[sl - j->slots]; }
/* Text of one token for logprob tables (JSON null without a tokenizer). */
json_t *api_token_text(const api_server *a, int32_t id);
/* OpenAI finish_reason ("length", "stop", "abort") or NULL while running. */
const char *api_oai_finish(const sched_result *r);
/* matched_stop: the stop token id, the stop string, or JSON null. */
json_t *api_oai_matched(const sched_result *r);
/* return_text_in_logprobs: fill the text element of every logprob entry
 * of meta_info. */
void api_fill_logprob_texts(const api_server *a, json_t *meta);
/* OpenAI usage object of a job. */
json_t *api_usage_obj(api_job *j);
/* One OpenAI stream chunk of the job around `choices` (taken). */
json_t *api_oai_chunk(api_job *j, json_t *choices);
/* One prompt of a request before submission: token ids from the
 * tokenizer, or the client's own list of ids (checked when the request
 * is built), and the prompt text (echo, request log). */
typedef struct api_prompt {
    int32_t *ids;                /* (n_ids) owned, or NULL with ids_json */
    int64_t n_ids;
    const json_t *ids_json;      /* borrowed from the request body: a list of integers */
    char *text;                  /* owned or NULL */
} api_prompt;

typedef struct api_prompts {
    api_prompt *v;               /* (n) owned */
    int n, cap;
} api_prompts;

/* Append a text prompt: tokenize text[0..len) (add_special as SGLang's
 * tokenizer manager: true for raw text, false after a chat template);
 * shown (NUL-terminated, or NULL) is kept as the prompt's text.  A prompt
 * the tokenizer fails on is appended with neither ids nor ids_json (see
 * api_prompt_failed).  0, or -1 on OOM. */
int api_prompts_add_text(api_server *a, api_prompts *ps, const char *text, size_t len, bool add_special,
                         const char *shown);
/* Append the client's list of ids (borrowed).  0 or -1 (OOM). */
int api_prompts_add_ids(api_prompts *ps, const json_t *ids);
/* Append ids (n, malloc'd) the caller hands over.  0 or -1 (OOM). */
int api_prompts_add_owned(api_prompts *ps, int32_t *ids, int64_t n);
void api_prompts_free(api_prompts *ps);
static inline bool api_prompt_failed(const api_prompt *p) { return !p->ids && !p->ids_json; }
/* The ids of a prompt as a JSON array (request log objects). */
json_t *api_ids_json(const int32_t *ids, int64_t n);
/* A request of fixed shape (health check, embedding input): ids (n,
 * malloc'd) moved into spec (freed on failure too), sampling params from
 * the SGLang object `sampling`, rid copied.  0, or -1 with a message. */
int api_spec_simple(sched_req_spec *spec, int32_t *ids, int64_t n, const json_t *sampling, const char *rid,
                    char *err, size_t errlen);
/* input ids of a text prompt as a JSON array (NULL on failure): /tokenize. */
json_t *api_tokenize_json(api_server *a, const char *text, size_t len, bool add_special);
bool api_is_id_list(const json_t *v);
/* sampling_params.n of a params object (1 when absent or < 2). */
int64_t api_json_n_of(const json_t *sp);

/* ---- api.c: submission ------------------------------------------------------- */

api_job *api_job_new(api_server *a, http_req *r, int kind, int n_prompt, int n_per);
void api_job_free(api_job *j);
/* The scheduler request of prompt i of a job, built by its route
 * (api_job_submit calls it for i = 0 .. n_prompt - 1, in order, before it
 * submits anything).  Fills spec (the builder initialises it) and
 * *max_new_given (the request gave an integer max_new_tokens: for
 * api_limits_apply).  When log_req is non-NULL (--log-requests or
 * --export-metrics-to-file), also stores the request as SGLang's
 * GenerateReqInput object (new reference) for the request log.  0, or -1
 * with a message in err (spec freed; the job answers 400). */
typedef int (*api_spec_fn)(void *ctx, int i, sched_req_spec *spec, bool *max_new_given, json_t **log_req,
                           char *err, size_t errlen);
/* Build every prompt's request (build), check them (limits, n), log and
 * submit them.  On a request error before anything was submitted,
 * answers and frees the job.  The job may be answered and freed before
 * this returns. */
void api_job_submit(api_server *a, api_job *j, api_spec_fn build, void *ctx);
/* --log-requests: the raw OpenAI body, before it is adapted. */
void api_ops_log_openai(api_server *a, http_req *r, const json_t *body);

/* ---- api_dp.c: data parallelism at the front ------------------------------------- */

/* A request's data_parallel_rank (SGLang's GenerateReqInput field: null,
 * or an integer in [0, dp_size)) into *rank and bootstrap_room (null or a
 * non-negative integer: follow_bootstrap_room) into *room; -1 = absent.
 * 0, or -1 with the 400 message. */
int api_dp_fields(api_server *a, const json_t *body, int *rank, int64_t *room, char *err, size_t errlen);
/* /get_load: one object per dp_rank (new reference). */
json_t *api_dp_load_json(api_server *a);

/* ---- route families ------------------------------------------------------------ */

/* api_native.c */
void api_route_generate(api_server *a, http_req *r, json_t *body);
void api_route_health_generate(api_server *a, http_req *r);
void api_route_tokenize(api_server *a, http_req *r, json_t *body);
void api_route_detokenize(api_server *a, http_req *r, json_t *body);
/* The /generate response object of a slot (final: the finished text). */
json_t *api_native_obj(api_job *j, api_slot *sl, bool final);
void api_native_answer(api_job *j);
void api_native_stream_event(api_job *j, int si, const sched_event *e);

/* api_openai.c (kind JOB_COMPL or JOB_CHAT) */
void api_route_openai(api_server *a, http_req *r, json_t *body, int kind);
/* The same for kind JOB_RESP too: resp (borrowed, may be NULL) becomes
 * the job's j->resp (a new reference). */
void api_route_openai_ex(api_server *a, http_req *r, json_t *body, int kind, json_t *resp);
/* The slot's output parsers over one delta of the client's text:
 * *content (malloc'd) and *reasoning (malloc'd, or NULL when no parser
 * made any).  0 or -1 (OOM). */
int api_oai_parse(api_job *j, api_slot *sl, const char *text, bool final, char **content, char **reasoning);
void api_oai_answer(api_job *j);
void api_oai_stream_event(api_job *j, int si, const sched_event *e);
/* api_grammar.c: response_format / regex / ebnf into SGLang's sampling
 * params sp (json_schema, regex, ebnf, structural_tag); *strict for a
 * strict json_schema.  0, or -1 with a 400 message. */
int api_oai_grammar_params(const json_t *body, json_t *sp, bool *strict, char *err, size_t errlen);
/* LoRA (api_lora.c): /load_lora_adapter and /unload_lora_adapter
 * (true when path is one of them: answered), the adapters' /v1/models
 * cards appended to data (only the one called `only` when non-NULL), and
 * the adapter an OpenAI body picks for its prompt i of n_prompt ("model":
 * "BASE:ADAPTER", else "lora_path": a string, or a list with one entry
 * per prompt, null = the base): *out a reference or NULL; -1 with a
 * message (400). */
struct lora_adapter;
bool api_lora_route(http_req *r, const char *method, const char *path, const char *body, size_t body_len);
void api_lora_models(json_t *data, const char *served, const char *only);
/* api_expert.c: the expert distribution routes (true when path is one:
 * answered), and /metrics text txt (owned) with the expert lines added. */
bool api_expert_route(http_req *r, const char *method, const char *path);
char *api_expert_metrics_append(char *txt);
int api_lora_pick_openai(const json_t *body, int i, int n_prompt, struct lora_adapter **out, char *err,
                         size_t errlen);

/* The /v1/models entry of the served model. */
json_t *api_models_entry(api_server *a);

/* api_completions.c: the prompts of a /v1/completions body (texts kept
 * for echo); use_fim with the suffix sfx.  0, or -1 after answering the
 * error. */
int api_compl_prompts(api_server *a, http_req *r, json_t *body, bool use_fim, json_t *sfx, api_prompts *ps);
/* OpenAI completions logprobs of output tokens [from, n). */
json_t *api_compl_logprobs(api_job *j, api_slot *sl, size_t text_base, int64_t from);

/* api_chat.c: the prompt of a /v1/chat/completions body (messages through
 * the chat template), appended to ps.  0, or -1 after answering the
 * error. */
int api_chat_prompt(api_server *a, http_req *r, json_t *body, api_prompts *ps);
/* OpenAI chat logprobs of output tokens [from, n). */
json_t *api_chat_logprobs(api_job *j, api_slot *sl, int64_t from);

/* api_responses.c: /v1/responses and its stored answers */
api_resp_store *api_resp_store_new(void);
void api_resp_store_free(api_resp_store *s);
void api_route_responses(api_server *a, http_req *r, json_t *body);
/* GET/DELETE /v1/responses/{id}, GET .../input_items, POST .../cancel:
 * true when answered. */
bool api_route_responses_id(api_server *a, http_req *r, const char *method, const char *path);
void api_resp_answer(api_job *j);
void api_resp_stream_event(api_job *j, int si, const sched_event *e);

/* api_chat_tools.c: tools, tool_choice and reasoning on the chat route */
typedef struct api_chat_tools {
    const json_t *tools;         /* borrowed from the body: a non-empty list, or NULL */
    bool none, required, parallel;
    const char *named;           /* tool_choice {"type": "function", "function": {"name"}}, borrowed */
    bool active;                 /* tools given and tool_choice is not "none" */
} api_chat_tools;
/* Read tools / tool_choice / parallel_tool_calls.  0, or -1 with the 400 message. */
int api_chat_tools_read(const json_t *body, api_chat_tools *t, char *err, size_t errlen);
/* The template's `tools` (new list of function objects) or NULL. */
json_t *api_chat_template_tools(const api_chat_tools *t);
/* SGLang's sampling changes for tools: skip_special_tokens false, the
 * json_schema of tool_choice required / named.  0 or -1 (message). */
int api_chat_tools_sampling(const api_chat_tools *t, json_t *sp, char *err, size_t errlen);
/* SGLang's get_structure_constraint for tool_choice "auto": when a tool is
 * strict and the --tool-call-parser's format has JSON arguments between
 * a begin and an end, sp gets api_toolcall_structural_tag (a call, once
 * the model starts one, follows its tool's schema; free text otherwise),
 * unless sp already holds a constraint (kept, with a warning, as
 * SGLang).  1 when set, 0 when not, -1 (message). */
int api_chat_tools_strict_tag(const api_chat_tools *t, const char *parser, json_t *sp, char *err, size_t errlen);
/* Register each slot's reasoning parser (--reasoning-parser, when the
 * request's thinking is on and separate_reasoning is not false) and tool
 * parser.  0 or -1 (OOM). */
int api_chat_add_parsers(api_server *a, api_job *j, const json_t *body, const api_chat_tools *t);
/* api_oai_parse plus the tool calls of the delta: *calls a new list of
 * OpenAI delta entries ({index, id, type, function: {name, arguments}}
 * when a call opens, {index, function: {arguments}} after), or NULL. */
int api_oai_parse_tools(api_job *j, api_slot *sl, const char *text, bool final, char **content, char **reasoning,
                        json_t **calls);
/* The message's tool_calls from the delta entries of a whole-text parse. */
json_t *api_chat_message_tool_calls(json_t *deltas);
/* A history message as the template gets it (SGLang): null content ->
 * "", tool_calls arguments given as a JSON string -> the object.  New. */
json_t *api_chat_history_message(const json_t *m);
void api_route_parse_function_call(api_server *a, http_req *r, json_t *body);
void api_route_separate_reasoning(api_server *a, http_req *r, json_t *body);

/* api_embed_job.c */
void api_route_embed(api_server *a, http_req *r, json_t *body, bool oai);
json_t *api_embed_answer(api_job *j);
/* SGLang's embedding meta_info of a finished slot (new reference). */
json_t *api_embed_meta(api_job *j, api_slot *sl);

/* api_score.c: the scoring routes (api_score.h) and their answers */
void api_route_score(api_server *a, http_req *r, json_t *body);
void api_route_rerank(api_server *a, http_req *r, json_t *body);
void api_route_classify(api_server *a, http_req *r, json_t *body);
void api_score_answer(api_job *j);

#endif
