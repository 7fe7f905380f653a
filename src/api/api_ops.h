/* api_ops — the operations side of `sglc serve`, as SGLang's runtime does it:
 *
 *   auth      (api_auth.c)    --api-key / --admin-api-key: SGLang's three
 *                             per-route levels (utils/auth.py), routes
 *                             matched by method + path.
 *   reqlog    (api_log.c)     --log-requests*: "Receive:" / "Finish:"
 *                             lines (text) or request.received /
 *                             request.finished events (json) at levels
 *                             0..3, to stdout and/or folders; changed at
 *                             run time by /configure_logging.
 *   access    (api_log.c)     the uvicorn-style HTTP access log
 *                             (--log-level-http,
 *                             --uvicorn-access-log-exclude-prefixes).
 *   limits    (api_limits.c)  the context-length checks of SGLang's
 *                             tokenizer manager and scheduler, with
 *                             --allow-auto-truncate.
 *   metrics   (api_metrics.c) --enable-metrics: Prometheus text at
 *                             /metrics with SGLang's metric names.
 *
 * DESIGN: each piece is a small object (or pure function) the API layer
 * calls through a hook; none of them knows the job structures of api.c.
 * Objects are thread-safe (one mutex each): the polling thread, the
 * dispatcher thread and /configure_logging touch them concurrently.
 *
 * Ownership: objects are created by the caller (cmd_serve) and borrowed by
 * api_server through api_config; they must outlive it. */
#ifndef SGLC_API_OPS_H
#define SGLC_API_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "http/http.h"
#include "sched/sched.h"

/* ---- auth ------------------------------------------------------------------- */

typedef enum {
    API_AUTH_NORMAL = 0,    /* --api-key protects it when set */
    API_AUTH_ADMIN_OPTIONAL, /* admin key if set, else api key if set, else open */
    API_AUTH_ADMIN_FORCE,   /* admin key only; 403 when the server has none */
} api_auth_level;

/* The level SGLang attaches to (method, path): the control and weight
 * routes are ADMIN_OPTIONAL, everything else (and unknown paths) NORMAL.
 * A path whose method the route does not take is NORMAL (Starlette's
 * partial match carries no level). */
api_auth_level api_auth_level_of(const char *method, const char *path);

/* SGLang's decide_request_auth: 0 = allowed, else the status (401 or 403).
 * OPTIONS and /health*, /ready*, /metrics* are always allowed.  A token is
 * "Authorization: Bearer <key>" (scheme case-insensitive) or "x-api-key:
 * <key>"; keys are compared in constant time.  NULL/"" keys = not set. */
int api_auth_decide(const char *method, const char *path, const char *authorization,
                    const char *x_api_key, const char *api_key, const char *admin_api_key,
                    api_auth_level level);

/* ---- request log ------------------------------------------------------------- */

typedef struct api_reqlog api_reqlog;

/* targets: NULL or a JSON array of strings, each "stdout" (any case) or a
 * folder (created) that gets a "<hostname>_0.log" file; none = stdout.
 * level 0..3, format "text" or "json".  NULL with a message on error. */
api_reqlog *api_reqlog_create(bool on, int level, const char *format, const json_t *targets,
                              char *err, size_t errlen);
void api_reqlog_destroy(api_reqlog *l);

/* The whitelisted request headers to log (SGLang: x-smg-routing-key plus
 * the comma-separated names in $SGLANG_LOG_REQUEST_HEADERS, lower-cased),
 * as an object, or NULL when the request has none.  Polling thread, during
 * the handler call (http_req_header's rule). */
json_t *api_reqlog_headers(api_reqlog *l, http_req *r);

/* Is logging on right now?  (NULL -> false.) */
bool api_reqlog_enabled(api_reqlog *l);
/* The current level (for the caller's "decode the text at level >= 2"). */
int api_reqlog_level(api_reqlog *l);

/* Log one received request.  obj: the request as SGLang's
 * GenerateReqInput fields (text, input_ids, sampling_params, rid, ...),
 * headers: NULL or an object of whitelisted request headers. */
void api_reqlog_received(api_reqlog *l, const json_t *obj, const json_t *headers);
/* Log the raw body of an OpenAI request before it is adapted ("Receive
 * OpenAI: obj={...}" / event "request.received.openai", no rid; strings
 * and lists cut at 2048 items at level 2, no field skipped at any level). */
void api_reqlog_openai(api_reqlog *l, const json_t *body, const json_t *headers);
/* Log one finished request: obj as above, out = the native /generate
 * output object (text, output_ids, meta_info).  With
 * $SGLANG_LOG_REQUEST_EXCEEDED_MS > 0, only requests whose
 * meta_info.e2e_latency reaches it are logged. */
void api_reqlog_finished(api_reqlog *l, const json_t *obj, const json_t *headers,
                         const json_t *out);

/* ---- request metrics export (--export-metrics-to-file) ----------------------- */

typedef struct api_mexport api_mexport;

/* SGLang's FileRequestMetricsExporter: one JSON line per finished request
 * in DIR/sglang-request-metrics-YYYYmmdd_HH.log (local hour, appended, a
 * new file each hour), {"request_parameters": "<json.dumps of the request's
 * non-null GenerateReqInput fields>", <meta_info keys>...}.  Fields skipped
 * as the request log's metadata at `level` (--log-requests-level, fixed at
 * start-up as in SGLang).  dir is created.  NULL with a message on error. */
api_mexport *api_mexport_create(const char *dir, int level, char *err, size_t errlen);
void api_mexport_destroy(api_mexport *x);
/* Write one record: obj as for api_reqlog_received, out = the native
 * /generate output object.  Thread-safe; a write error is logged once. */
void api_mexport_write(api_mexport *x, const json_t *obj, const json_t *out);

/* ConfigureLoggingReq: apply the fields of `body` (all optional:
 * log_requests, log_requests_level, log_requests_format, log_level;
 * dump_requests_* and crash_dump_folder are refused as unsupported).
 * Atomic: on a bad field nothing changes.  0, or -1 with a message. */
int api_reqlog_configure(api_reqlog *l, const json_t *body, char *err, size_t errlen);

/* Formatting, exposed for tests.  Both honour SGLang's level rules
 * (_dataclass_to_string_truncated / _transform_data_for_logging):
 * strings and lists longer than max_len keep their two halves.
 *   api_log_repr:      Python-repr-like text; `cls` non-NULL renders an
 *                      object as cls(k=v, ...), else as {'k': v, ...};
 *                      top-level keys in `skip` (NULL-terminated) left out.
 *   api_log_transform: the JSON form. */
char *api_log_repr(const json_t *v, size_t max_len, const char *cls, const char *const *skip);
json_t *api_log_transform(const json_t *v, size_t max_len, const char *const *skip);

/* ---- access log -------------------------------------------------------------- */

typedef struct api_access_log api_access_log;

/* level: the --log-level-http (or --log-level) value, log_level_parse()'d;
 * lines are written at INFO, so only level <= LOG_INFO prints them.
 * exclude: NULL or a JSON array of path prefixes.  out: where lines go
 * (stdout in the server). */
api_access_log *api_access_log_create(int level, const json_t *exclude, FILE *out);
void api_access_log_destroy(api_access_log *l);
/* An http_access_fn (ctx = api_access_log): one uvicorn-style line
 * `[time] INFO:     client - "METHOD path HTTP/1.1" status phrase`. */
void api_access_log_line(void *ctx, const char *client, const char *method, const char *path,
                         const char *version, int status, const char *phrase);

/* ---- context-length limits ------------------------------------------------------- */

/* SGLang's tokenizer manager (_validate_one_request) then scheduler
 * (validate_input_length) checks on one parsed request:
 *   input >= context_len:                 truncate to context_len, or 400
 *   input + max_new_tokens > context_len: max_new_tokens = context_len -
 *                                         input, or 400 (only when the
 *                                         request sets max_new_tokens:
 *                                         max_new_given)
 *   input >= max_req_input_len:           truncate to it, or 400
 * The warnings SGLang logs are logged (log_warn).  Returns 0 (sp possibly
 * changed) or -1 with the 400 message. */
int api_limits_apply(sched_req_spec *sp, bool max_new_given, int64_t context_len,
                     int64_t max_req_input_len, bool allow_auto_truncate, char *err, size_t errlen);

/* ---- metrics -------------------------------------------------------------------- */

typedef struct api_metrics api_metrics;

/* Histogram options (all NULL/false = SGLang's defaults). */
typedef struct api_metrics_opts {
    const json_t *ttft_buckets, *itl_buckets, *e2e_buckets; /* JSON arrays of increasing numbers */
    bool collect_tokens_histogram;  /* --collect-tokens-histogram: prompt / uncached prompt /
                                     * generation token-count histograms */
    const json_t *prompt_tokens_rule, *generation_tokens_rule; /* --prompt-tokens-buckets,
                                     * --generation-tokens-buckets: SGLang's generate_buckets
                                     * rules ["default"], ["tse", middle, base, count],
                                     * ["custom", v, ...] */
    const json_t *extra_labels;     /* --extra-metric-labels: object of string values, appended to
                                     * every series' labels; NULL = none */
} api_metrics_opts;

/* NULL with a message on a bad bucket list or rule. */
api_metrics *api_metrics_create(const char *model_name, const api_metrics_opts *o, char *err,
                                size_t errlen);
void api_metrics_destroy(api_metrics *m);

/* Observations (any thread). */
void api_metrics_ttft(api_metrics *m, double seconds);
/* n_tokens arrived `interval` seconds after the previous ones (SGLang's
 * observe_inter_token_latency: n_tokens samples of interval / n_tokens). */
void api_metrics_itl(api_metrics *m, double interval, int64_t n_tokens);
void api_metrics_finished(api_metrics *m, int64_t prompt_tokens, int64_t generation_tokens,
                          int64_t cached_tokens, double e2e_seconds, bool aborted);

/* The Prometheus text exposition (malloc'd), gauges from `st` (may be
 * NULL: zeros). */
char *api_metrics_render(api_metrics *m, const sched_stats *st);
/* The same over n replicas (--dp-size): sts (n) one per dp_rank; n > 1
 * gives each scheduler gauge one line per replica, labelled dp_rank. */
char *api_metrics_render_dp(api_metrics *m, const sched_stats *sts, int n);

#endif
