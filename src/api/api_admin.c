/* api_admin — SGLang's scheduler-control routes: /pause_generation,
 * /continue_generation, /flush_cache, /update_weights_from_disk, /ready,
 * and the metadata they change (/get_model_info, /get_weight_version),
 * and /get_server_info: the worker routes SGLang's Model Gateway polls
 * answer in the shapes its discovery parses (docs/notes/pargs.md).
 *
 * DESIGN: every route that needs the scheduler hands the work to a
 * short-lived admin thread, which sends a control message (sched_control,
 * blocking until the scheduler thread ran it between two steps) and then
 * answers the HTTP request (http_respond works from any thread).  The
 * polling thread only parses and validates, so /health keeps answering
 * while a model loads or a swap waits for the requests in flight.
 *
 *   polling thread: parse body ─▶ spawn admin thread ─▶ (returns)
 *   admin thread:   [load model via cfg.load_model]  sched_control  answer
 *
 * update_weights_from_disk (UpdateWeightFromDiskReqInput): the new model
 * is loaded completely beside the running one (old + new weights are
 * resident for a moment, unlike SGLang's in-place load into the existing
 * tensors), checked for the same architecture and shapes by the
 * scheduler, swapped in between steps, the radix cache flushed, and the
 * old model freed.  One update at a time.
 *
 * With --dp-size > 1 every control message goes to every replica
 * (dp_control: a flush succeeds only when each replica flushed; a weight
 * update loads once and each replica runs the same weights).
 *
 * Ownership: api_admin borrows the api_config (scheduler, callbacks) and
 * owns its strings, its threads' jobs and the lock that guards them. */
#include "api/api_impl.h"
#include "dp/dp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/version.h"
#include "util/timeutil.h"

struct api_admin {
    const api_config *cfg;       /* borrowed */
    pthread_mutex_t mu;          /* guards everything below */
    pthread_cond_t cv;           /* n_threads reached 0 */
    char *model_path;            /* owned: changes with a weight update */
    char *weight_version;        /* owned */
    char *tok_path, *arch;       /* owned */
    char *model_type;            /* owned, NULL = unknown */
    int n_threads;               /* admin threads running */
    bool updating;               /* a weight update is in progress */
    bool draining;
};

typedef enum { JOB_PAUSE, JOB_CONTINUE, JOB_FLUSH, JOB_UPDATE } admin_job_kind;

typedef struct admin_job {
    api_admin *ad;
    http_req *r;
    admin_job_kind kind;
    sched_pause_mode mode;
    /* update_weights_from_disk */
    char *model_path;            /* owned */
    char *load_format;           /* owned or NULL (= as at start-up) */
    char *weight_version;        /* owned or NULL */
    bool abort_all, flush, keep_pause;
} admin_job;

/* FastAPI's request-validation answer, as SGLang rewrites it (400). */
static void validation_error(http_req *r, const char *msg)
{
    api_respond_json(r, 400, json_pack("{s:s,s:s,s:s,s:n,s:i}", "object", "error", "message", msg, "type",
                                   "Bad Request", "param", "code", 400));
}

/* ---- lifecycle ------------------------------------------------------------ */

api_admin *api_admin_create(const api_config *cfg)
{
    api_admin *ad = calloc(1, sizeof *ad);
    if (!ad) return NULL;
    ad->cfg = cfg;
    pthread_mutex_init(&ad->mu, NULL);
    pthread_cond_init(&ad->cv, NULL);
    ad->model_path = api_strdup(cfg->model_path ? cfg->model_path : "");
    ad->tok_path = api_strdup(cfg->tokenizer_path ? cfg->tokenizer_path : ad->model_path);
    ad->arch = api_strdup(cfg->architecture ? cfg->architecture : "");
    ad->model_type = cfg->model_type ? api_strdup(cfg->model_type) : NULL;
    ad->weight_version = api_strdup(cfg->weight_version && *cfg->weight_version ? cfg->weight_version : "default");
    if (!ad->model_path || !ad->tok_path || !ad->arch || !ad->weight_version) {
        api_admin_destroy(ad);
        return NULL;
    }
    return ad;
}

void api_admin_destroy(api_admin *ad)
{
    if (!ad) return;
    pthread_mutex_lock(&ad->mu);
    while (ad->n_threads > 0) pthread_cond_wait(&ad->cv, &ad->mu);
    pthread_mutex_unlock(&ad->mu);
    pthread_mutex_destroy(&ad->mu);
    pthread_cond_destroy(&ad->cv);
    free(ad->model_path), free(ad->weight_version), free(ad->tok_path), free(ad->arch);
    free(ad->model_type);
    free(ad);
}

void api_admin_set_draining(api_admin *ad, bool on)
{
    pthread_mutex_lock(&ad->mu);
    ad->draining = on;
    pthread_mutex_unlock(&ad->mu);
}

/* ---- admin threads ---------------------------------------------------------- */

static void job_free(admin_job *j)
{
    free(j->model_path);
    free(j->load_format);
    free(j->weight_version);
    free(j);
}

static int send_ctl(api_admin *ad, sched_ctl *c)
{
    if (!ad->cfg->s) { /* dry run (unit tests, fuzzing): no scheduler */
        c->rc = 0;
        snprintf(c->msg, sizeof c->msg, "%s",
                 c->kind == SCHED_CTL_PAUSE      ? "Generation paused successfully."
                 : c->kind == SCHED_CTL_CONTINUE ? "Generation continued successfully."
                                                 : "Cache flushed.");
        return 0;
    }
    return dp_control(ad->cfg->dp, c); /* every replica (dp.h) */
}

static void run_update(admin_job *j)
{
    api_admin *ad = j->ad;
    const api_config *cfg = ad->cfg;
    char msg[1024];
    bool ok = false;
    double t0 = time_now_sec();
    log_info("Start update_weights. Load format=%s, model_path=%s", j->load_format ? j->load_format : "(as at start-up)",
             j->model_path);
    if (j->abort_all && cfg->dp) dp_abort(cfg->dp, NULL);
    char err[768] = "";
    model *nm = cfg->load_model && cfg->s ? cfg->load_model(cfg->load_ctx, j->model_path, j->load_format, err, sizeof err) : NULL;
    if (!nm) {
        snprintf(msg, sizeof msg, "Failed to load the weights from %s: %s", j->model_path,
                 cfg->load_model && cfg->s ? err : "weight loading is not available on this server");
    } else {
        sched_ctl c;
        memset(&c, 0, sizeof c);
        c.kind = SCHED_CTL_SWAP_MODEL;
        c.new_model = nm;
        c.keep_cache = !j->flush;
        c.stay_paused = j->keep_pause;
        if (dp_control(cfg->dp, &c) == 0) { /* each replica: the new weights, one copy */
            ok = true;
            snprintf(msg, sizeof msg, "%s", c.msg);
            if (c.old_model) cfg->free_model(cfg->load_ctx, c.old_model);
        } else {
            snprintf(msg, sizeof msg, "%s", c.msg);
            cfg->free_model(cfg->load_ctx, nm);
        }
    }
    if (ok) {
        pthread_mutex_lock(&ad->mu);
        char *p = api_strdup(j->model_path);
        if (p) free(ad->model_path), ad->model_path = p;
        if (j->weight_version) {
            char *v = api_strdup(j->weight_version);
            if (v) free(ad->weight_version), ad->weight_version = v;
        }
        pthread_mutex_unlock(&ad->mu);
        if (j->weight_version) {
            size_t n = strlen(msg);
            snprintf(msg + n, sizeof msg - n, " Weight version updated to %s.", j->weight_version);
        }
        log_info("update_weights_from_disk: %s (%.2f s)", msg, time_now_sec() - t0);
    } else {
        log_error("update_weights_from_disk failed: %s", msg);
    }
    api_respond_json(j->r, ok ? 200 : 400,
                 json_pack("{s:b,s:s,s:i}", "success", ok, "message", msg, "num_paused_requests", 0));
    pthread_mutex_lock(&ad->mu);
    ad->updating = false;
    pthread_mutex_unlock(&ad->mu);
}

static void *admin_main(void *arg)
{
    admin_job *j = arg;
    api_admin *ad = j->ad;
    if (j->kind == JOB_UPDATE) {
        run_update(j);
    } else {
        sched_ctl c;
        memset(&c, 0, sizeof c);
        c.kind = j->kind == JOB_PAUSE ? SCHED_CTL_PAUSE : j->kind == JOB_CONTINUE ? SCHED_CTL_CONTINUE : SCHED_CTL_FLUSH_CACHE;
        c.pause_mode = j->mode;
        int rc = send_ctl(ad, &c);
        if (j->kind == JOB_FLUSH) {
            /* SGLang answers the same text either way; the status tells */
            const char *m = "Cache flushed.\nPlease check backend logs for more details. (When there are running "
                            "or waiting requests, the operation will not be performed.)\n";
            http_respond(j->r, rc == 0 ? 200 : 400, "text/plain", m, strlen(m), NULL);
        } else if (rc == 0) {
            api_respond_json(j->r, 200, json_pack("{s:s,s:s}", "message", c.msg, "status", "ok"));
        } else {
            api_respond_json(j->r, 503, json_pack("{s:{s:s}}", "error", "message", c.msg));
        }
    }
    job_free(j);
    pthread_mutex_lock(&ad->mu);
    if (--ad->n_threads == 0) pthread_cond_broadcast(&ad->cv);
    pthread_mutex_unlock(&ad->mu);
    return NULL;
}

/* Hand j to a new detached admin thread (answers 500 if none can start).
 * Dry run (no scheduler: unit tests, fuzzing): nothing can block, run it
 * here so the answer is there when api_handle returns. */
static void spawn(api_admin *ad, admin_job *j)
{
    if (!ad->cfg->s) {
        pthread_mutex_lock(&ad->mu);
        ad->n_threads++;
        pthread_mutex_unlock(&ad->mu);
        admin_main(j);
        return;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&ad->mu);
    ad->n_threads++;
    pthread_mutex_unlock(&ad->mu);
    pthread_t th;
    if (pthread_create(&th, &at, admin_main, j)) {
        log_error("cannot start an admin thread");
        pthread_mutex_lock(&ad->mu);
        if (--ad->n_threads == 0) pthread_cond_broadcast(&ad->cv);
        if (j->kind == JOB_UPDATE) ad->updating = false;
        pthread_mutex_unlock(&ad->mu);
        api_respond_json(j->r, 500, json_pack("{s:{s:s}}", "error", "message", "Internal error: cannot start a thread."));
        job_free(j);
    }
    pthread_attr_destroy(&at);
}

/* ---- request parsing ---------------------------------------------------------- */

/* An object body ({} when empty).  NULL after answering 400. */
static json_t *object_body(http_req *r, const char *body, size_t len)
{
    if (len == 0) return json_object();
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    if (!j || !json_is_object(j)) {
        char msg[300];
        if (!j) snprintf(msg, sizeof msg, "Invalid JSON body: %s (line %d, column %d)", je.text, je.line, je.column);
        else snprintf(msg, sizeof msg, "The request body must be a JSON object");
        json_decref(j);
        validation_error(r, msg);
        return NULL;
    }
    return j;
}

/* Optional typed fields: 0 ok (absent or null leaves *out), -1 after 400. */
static int opt_bool(http_req *r, json_t *o, const char *key, bool *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) {
        char m[160];
        snprintf(m, sizeof m, "%s: Input should be a valid boolean", key);
        validation_error(r, m);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static int opt_str(http_req *r, json_t *o, const char *key, const char **out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) {
        char m[160];
        snprintf(m, sizeof m, "%s: Input should be a valid string", key);
        validation_error(r, m);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

static bool refuse_if_draining(api_admin *ad, http_req *r)
{
    pthread_mutex_lock(&ad->mu);
    bool d = ad->draining;
    pthread_mutex_unlock(&ad->mu);
    if (d) api_respond_json(r, 503, json_pack("{s:{s:s}}", "error", "message", "The server is shutting down."));
    return d;
}

static void route_pause(api_admin *ad, http_req *r, const char *body, size_t len)
{
    json_t *o = object_body(r, body, len);
    if (!o) return;
    const char *mode = "abort"; /* PauseGenerationReqInput.mode default */
    if (opt_str(r, o, "mode", &mode)) {
        json_decref(o);
        return;
    }
    sched_pause_mode m;
    if (!strcmp(mode, "abort")) m = SCHED_PAUSE_ABORT;
    else if (!strcmp(mode, "retract")) m = SCHED_PAUSE_RETRACT;
    else if (!strcmp(mode, "in_place")) m = SCHED_PAUSE_IN_PLACE;
    else {
        char msg[300];
        snprintf(msg, sizeof msg, "Invalid mode: '%.100s'. Expected one of ['abort', 'retract', 'in_place'].", mode);
        json_decref(o);
        validation_error(r, msg);
        return;
    }
    json_decref(o);
    admin_job *j = calloc(1, sizeof *j);
    if (!j) {
        api_respond_json(r, 500, json_pack("{s:{s:s}}", "error", "message", "Internal error: out of memory."));
        return;
    }
    j->ad = ad, j->r = r, j->kind = JOB_PAUSE, j->mode = m;
    spawn(ad, j);
}

static void route_simple(api_admin *ad, http_req *r, admin_job_kind kind, const char *body, size_t len)
{
    if (kind == JOB_CONTINUE) { /* ContinueGenerationReqInput: torch_empty_cache (no effect here) */
        json_t *o = object_body(r, body, len);
        if (!o) return;
        bool dummy = true;
        int bad = opt_bool(r, o, "torch_empty_cache", &dummy);
        json_decref(o);
        if (bad) return;
    }
    admin_job *j = calloc(1, sizeof *j);
    if (!j) {
        api_respond_json(r, 500, json_pack("{s:{s:s}}", "error", "message", "Internal error: out of memory."));
        return;
    }
    j->ad = ad, j->r = r, j->kind = kind;
    spawn(ad, j);
}

/* UpdateWeightFromDiskReqInput.  Honoured: model_path, load_format
 * (auto | safetensors | dummy), abort_all_requests, weight_version,
 * flush_cache, keep_pause; accepted without effect (no CUDA here):
 * torch_empty_cache, recapture_cuda_graph, token_step; refused: is_async
 * true, a manifest. */
static void route_update(api_admin *ad, http_req *r, const char *body, size_t len)
{
    json_t *o = object_body(r, body, len);
    if (!o) return;
    const char *path = NULL, *fmt = NULL, *ver = NULL;
    bool abort_all = false, is_async = false, flush = true, keep_pause = false, dummy = false;
    json_t *mp = json_object_get(o, "model_path");
    if (!mp || json_is_null(mp)) {
        validation_error(r, "model_path: Field required");
        json_decref(o);
        return;
    }
    if (opt_str(r, o, "model_path", &path) || opt_str(r, o, "load_format", &fmt) ||
        opt_str(r, o, "weight_version", &ver) || opt_bool(r, o, "abort_all_requests", &abort_all) ||
        opt_bool(r, o, "is_async", &is_async) || opt_bool(r, o, "flush_cache", &flush) ||
        opt_bool(r, o, "keep_pause", &keep_pause) || opt_bool(r, o, "torch_empty_cache", &dummy) ||
        opt_bool(r, o, "recapture_cuda_graph", &dummy)) {
        json_decref(o);
        return;
    }
    json_t *ts = json_object_get(o, "token_step");
    const char *refuse = NULL;
    char rbuf[300];
    if (ts && !json_is_null(ts) && !json_is_integer(ts)) refuse = "token_step: Input should be a valid integer";
    else if (!*path) refuse = "model_path must not be empty.";
    else if (is_async) refuse = "is_async=true is not supported by sglc: the update completes before the answer.";
    else if (json_object_get(o, "manifest") && !json_is_null(json_object_get(o, "manifest")))
        refuse = "manifest is not supported by sglc: weights are read from model_path.";
    else if (fmt && strcmp(fmt, "auto") && strcmp(fmt, "safetensors") && strcmp(fmt, "dummy")) {
        snprintf(rbuf, sizeof rbuf, "load_format '%.100s' is not supported by sglc (auto, safetensors, dummy).", fmt);
        refuse = rbuf;
    }
    if (refuse) {
        api_respond_json(r, 400, json_pack("{s:b,s:s,s:i}", "success", 0, "message", refuse, "num_paused_requests", 0));
        json_decref(o);
        return;
    }
    pthread_mutex_lock(&ad->mu);
    bool busy = ad->updating;
    if (!busy) ad->updating = true;
    pthread_mutex_unlock(&ad->mu);
    if (busy) {
        api_respond_json(r, 400, json_pack("{s:b,s:s,s:i}", "success", 0, "message",
                                       "Another weight update is in progress.", "num_paused_requests", 0));
        json_decref(o);
        return;
    }
    admin_job *j = calloc(1, sizeof *j);
    if (j) {
        j->ad = ad, j->r = r, j->kind = JOB_UPDATE;
        j->model_path = api_strdup(path);
        j->load_format = fmt ? api_strdup(fmt) : NULL;
        j->weight_version = ver ? api_strdup(ver) : NULL;
        j->abort_all = abort_all, j->flush = flush, j->keep_pause = keep_pause;
    }
    json_decref(o);
    if (!j || !j->model_path || (fmt && !j->load_format) || (ver && !j->weight_version)) {
        if (j) job_free(j);
        pthread_mutex_lock(&ad->mu);
        ad->updating = false;
        pthread_mutex_unlock(&ad->mu);
        api_respond_json(r, 500, json_pack("{s:{s:s}}", "error", "message", "Internal error: out of memory."));
        return;
    }
    spawn(ad, j);
}

/* ---- routing ------------------------------------------------------------------ */

/* GET /get_server_info (/server_info): SGLang's body, the server arguments
 * (args_to_json, from cmd_serve) followed by the scheduler info
 * (status, max_total_num_tokens, max_req_input_len), one internal state
 * per data-parallel rank and the version.  The Model Gateway's worker
 * discovery reads model_path, served_model_name, dp_size (a DP-aware
 * worker must have it), max_total_tokens, max_prefill_tokens,
 * max_running_requests: integers or null, never floats or negatives
 * (serde's Option<usize>). */
static void route_server_info(api_admin *ad, http_req *r)
{
    json_t *o = json_deep_copy(ad->cfg->server_info);
    if (!o) o = json_object();
    json_object_set_new(o, "status", json_string("ready"));
    if (ad->cfg->s) {
        sched_stats st;
        sched_get_stats_snapshot(ad->cfg->s, &st);
        json_object_set_new(o, "max_total_num_tokens", json_integer(st.max_total_num_tokens));
        json_object_set_new(o, "max_req_input_len", json_integer(sched_max_req_input_len(ad->cfg->s)));
        /* one entry per dp_rank, as SGLang's list of schedulers' states */
        json_t *states = json_array();
        int n = ad->cfg->dp ? dp_size(ad->cfg->dp) : 1;
        for (int k = 0; k < n; k++) {
            if (k > 0) sched_get_stats_snapshot(dp_sched(ad->cfg->dp, k), &st);
            json_array_append_new(states, json_pack("{s:{s:I},s:i,s:i}", "memory_usage", "token_capacity",
                                                    (json_int_t)st.max_total_num_tokens, "#running-req",
                                                    st.n_running, "#queue-req", st.n_waiting));
        }
        json_object_set_new(o, "internal_states", states);
    }
    json_object_set_new(o, "version", json_string(SGLC_VERSION));
    api_respond_json(r, 200, o);
}

bool api_admin_handle(api_admin *ad, http_req *r, const char *method, const char *path, const char *body,
                      size_t body_len, bool starting)
{
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    bool post = !strcmp(method, "POST") || !strcmp(method, "PUT");
    bool paused = ad->cfg->dp && dp_is_paused(ad->cfg->dp);
    if (!strcmp(path, "/get_server_info") || !strcmp(path, "/server_info")) {
        route_server_info(ad, r);
        return true;
    }
    if (!strcmp(path, "/get_model_info") || !strcmp(path, "/model_info")) {
        pthread_mutex_lock(&ad->mu);
        json_t *o = json_pack("{s:s,s:s,s:b,s:O?,s:s,s:b,s:b,s:s?,s:[s]}", "model_path", ad->model_path,
                              "tokenizer_path", ad->tok_path, "is_generation", !ad->cfg->is_embedding, "preferred_sampling_params",
                              ad->cfg->preferred_sampling, "weight_version", ad->weight_version,
                              "has_image_understanding", 0, "has_audio_understanding", 0, "model_type",
                              ad->model_type, "architectures", ad->arch);
        pthread_mutex_unlock(&ad->mu);
        api_respond_json(r, 200, o);
        return true;
    }
    if (!strcmp(path, "/get_weight_version")) {
        pthread_mutex_lock(&ad->mu);
        json_t *o = json_pack("{s:s}", "weight_version", ad->weight_version);
        pthread_mutex_unlock(&ad->mu);
        api_respond_json(r, 200, o);
        return true;
    }
    if (!strcmp(path, "/ready")) { /* SGLang: 503 while paused (or shutting down) */
        pthread_mutex_lock(&ad->mu);
        bool d = ad->draining;
        pthread_mutex_unlock(&ad->mu);
        http_respond(r, paused || d || starting ? 503 : 200, "text/plain", "", 0, NULL);
        return true;
    }
    if (!strcmp(path, "/health_generate") && paused) {
        /* SGLang's health generation waits for continue and fails after
         * its timeout; answer that at once */
        http_respond(r, 503, "text/plain", "", 0, NULL);
        return true;
    }
    admin_job_kind kind;
    if (!strcmp(path, "/flush_cache")) kind = JOB_FLUSH; /* GET or POST, as SGLang */
    else if (!strcmp(path, "/pause_generation")) kind = JOB_PAUSE;
    else if (!strcmp(path, "/continue_generation")) kind = JOB_CONTINUE;
    else if (!strcmp(path, "/update_weights_from_disk")) kind = JOB_UPDATE;
    else return false;
    if (!post && !(kind == JOB_FLUSH && get)) {
        api_respond_json(r, 405, json_pack("{s:s}", "detail", "Method Not Allowed"));
        return true;
    }
    if (starting) { /* the warm-up owns the scheduler until the server is up */
        api_respond_json(r, 503, json_pack("{s:{s:s}}", "error", "message", "The server is starting."));
        return true;
    }
    if (refuse_if_draining(ad, r)) return true;
    if (kind == JOB_PAUSE) route_pause(ad, r, body, body_len);
    else if (kind == JOB_UPDATE) route_update(ad, r, body, body_len);
    else route_simple(ad, r, kind, body, body_len);
    return true;
}
