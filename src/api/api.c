/* api — see api.h and api_job.h (the file map of the generation routes).
 *
 * DESIGN: this file holds the entry (api_handle, on the HTTP polling
 * thread), the job registry, submission and the dispatcher thread.  The
 * registry maps a submit id to (job, first slot); it is filled under
 * api->mu while submitting, so the dispatcher never sees an event it
 * cannot place.  After submission only the dispatcher touches a job,
 * except `gone` (set by the close hook) and the rids it reads. */
#include "api/api_job.h"
#include "api/api_ops.h"
#include "api/api_tokq.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/version.h"
#include "util/log.h"
#include "util/timeutil.h"

/* ---- registry --------------------------------------------------------------- */

static int reg_add(api_server *a, uint64_t id, api_job *j, int base, int n)
{
    reg_ent *e = malloc(sizeof *e);
    if (!e) return -1;
    e->id = id, e->job = j, e->base = base, e->remaining = n;
    size_t b = id % REG_BUCKETS;
    e->next = a->reg[b];
    a->reg[b] = e;
    return 0;
}

/* Find (and, on the last FINISH of an id, remove) the entry of an event.
 * Caller holds a->mu. */
static api_job *reg_find(api_server *a, const sched_event *ev, int *slot)
{
    size_t b = ev->id % REG_BUCKETS;
    for (reg_ent **pp = &a->reg[b]; *pp; pp = &(*pp)->next) {
        reg_ent *e = *pp;
        if (e->id != ev->id) continue;
        api_job *j = e->job;
        *slot = e->base + ev->index;
        if (ev->kind == SCHED_EV_FINISH && --e->remaining <= 0) {
            *pp = e->next;
            free(e);
            a->n_reqs--;
        }
        return j;
    }
    return NULL;
}

/* ---- jobs ---------------------------------------------------------------------- */

api_job *api_job_new(api_server *a, http_req *r, int kind, int n_prompt, int n_per)
{
    api_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->api = a;
    j->hr = r;
    j->kind = kind;
    j->n_prompt = n_prompt;
    j->n_per = n_per;
    j->n_slots = n_prompt * n_per;
    j->slots = calloc((size_t)j->n_slots, sizeof(api_slot));
    j->outs = calloc((size_t)j->n_slots, sizeof(api_output));
    j->rids = calloc((size_t)n_prompt, sizeof(char *));
    j->prompt_text = calloc((size_t)n_prompt, sizeof(char *));
    j->prompt_tokens = calloc((size_t)n_prompt, sizeof(int64_t));
    j->sub_ids = calloc((size_t)n_prompt, sizeof(uint64_t));
    j->created = (int64_t)time(NULL);
    if (!j->slots || !j->outs || !j->rids || !j->prompt_text || !j->prompt_tokens || !j->sub_ids) {
        free(j->slots), free(j->outs), free(j->rids), free(j->prompt_text), free(j->prompt_tokens), free(j->sub_ids);
        free(j);
        return NULL;
    }
    /* generation jobs with a tokenizer get an output stage per slot */
    bool text = kind == JOB_NATIVE || kind == JOB_COMPL || kind == JOB_CHAT || kind == JOB_RESP;
    for (int i = 0; i < j->n_slots; i++) {
        j->slots[i].prompt = i / n_per;
        api_output_init(&j->outs[i], text ? a->cfg.tok : NULL);
    }
    return j;
}

void api_job_free(api_job *j)
{
    if (!j) return;
    for (int i = 0; i < j->n_slots; i++) {
        sched_result_free(&j->slots[i].res);
        free(j->slots[i].emb);
        api_output_free(&j->outs[i]);
    }
    for (int i = 0; i < j->n_prompt; i++) {
        free(j->rids[i]);
        free(j->prompt_text[i]);
    }
    free(j->slots);
    free(j->outs);
    free(j->rids);
    free(j->prompt_text);
    free(j->prompt_tokens);
    free(j->sub_ids);
    free(j->oai_id);
    free(j->err_msg);
    json_decref(j->resp);
    json_decref(j->score);
    json_decref(j->log_objs);
    free(j);
}

/* Close hook: the client left; abort every request of the job (the
 * scheduler frees their pages in its next step; FINISH events follow and
 * complete the job as usual). */
static void job_on_close(void *arg)
{
    api_job *j = arg;
    /* the submitting thread (a tokenizer worker, maybe now) writes
     * sub_ids, then sets `submitted`, then reads `gone`; this sets `gone`,
     * then reads `submitted` (all seq_cst): one of the two sees the other
     * and aborts.  (No api->mu here: the dispatcher takes it before the
     * request's lock, in reap_gone_clients.) */
    atomic_store(&j->gone, true);
    if (atomic_load(&j->submitted))
        for (int i = 0; i < j->n_prompt; i++)
            if (j->sub_ids[i]) dp_abort_id(j->api->dp, j->sub_ids[i]);
}

/* Write one SSE event of a job; a client that cannot take it (gone, or
 * over the stream buffer limit) gets its requests aborted. */
static void job_answer(api_job *j)
{
    http_req *r = j->hr;
    if (j->err_status) {
        api_job_error(j, j->err_status, j->err_msg ? j->err_msg : "error");
        return;
    }
    if (j->kind == JOB_HEALTH) {
        http_respond(r, 200, "text/plain", "", 0, NULL);
        return;
    }
    if (j->kind == JOB_ENCODE || j->kind == JOB_EMBED) {
        api_respond_json(r, 200, api_embed_answer(j));
        return;
    }
    if (j->kind == JOB_SCORE || j->kind == JOB_RERANK || j->kind == JOB_CLASSIFY) {
        api_score_answer(j);
        return;
    }
    if (j->kind == JOB_NATIVE) api_native_answer(j);
    else if (j->kind == JOB_RESP) api_resp_answer(j);
    else api_oai_answer(j);
}

/* Streaming: send what this event added to slot `si`. */
static void job_stream_event(api_job *j, int si, const sched_event *e)
{
    bool fin = e->kind == SCHED_EV_FINISH;
    if (fin && e->finish == SCHED_FINISH_ABORT && e->http_status >= 400) {
        json_t *err = j->kind == JOB_NATIVE
                          ? json_pack("{s:{s:s,s:i}}", "error", "message", e->finish_str ? e->finish_str : "",
                                      "code", e->http_status)
                          : json_pack("{s:o}", "error", api_oai_error_fields(e->http_status, api_oai_error_type(e->http_status),
                                                                      e->finish_str ? e->finish_str : ""));
        api_job_sse(j, err);
        return;
    }
    if (j->kind == JOB_NATIVE) api_native_stream_event(j, si, e);
    else if (j->kind == JOB_RESP) api_resp_stream_event(j, si, e);
    else api_oai_stream_event(j, si, e);
}

static void job_stream_end(api_job *j)
{
    if ((j->kind == JOB_COMPL || j->kind == JOB_CHAT) && j->include_usage) {
        json_t *ch = api_oai_chunk(j, json_array());
        json_object_set_new(ch, "usage", api_usage_obj(j));
        api_job_sse(j, ch);
    }
    static const char done[] = "data: [DONE]\n\n";
    if (j->kind != JOB_RESP) /* the Responses stream ends with response.completed */
        http_stream_write(j->hr, done, sizeof done - 1);
    http_stream_end(j->hr);
}


/* ---- operations hooks (metrics, request log: api_ops.h) ---------------------------- */

/* Metrics of an event before it is added to the slot: time to first
 * token, then inter-token latency of every later batch of tokens. */
static void ops_on_event(api_server *a, api_job *j, api_slot *sl, const sched_event *e)
{
    /* health checks are not counted (SGLang sends them with log_metrics=False) */
    if (!a->cfg.metrics || j->kind == JOB_HEALTH || (e->n_ids <= 0 && e->kind != SCHED_EV_FINISH)) return;
    double now = time_now_sec();
    if (sl->t_last == 0) {
        if (e->n_ids > 0 || e->finish != SCHED_FINISH_ABORT) api_metrics_ttft(a->cfg.metrics, now - j->t_submit);
    } else if (e->n_ids > 0) {
        api_metrics_itl(a->cfg.metrics, now - sl->t_last, e->n_ids);
    }
    sl->t_last = now;
}

/* A slot finished: count it, and log it ("Finish:") with its native
 * output object (SGLang logs the /generate form for every route). */
static void ops_on_finish(api_server *a, api_job *j, api_slot *sl, const sched_event *e)
{
    if (a->cfg.metrics && j->kind != JOB_HEALTH)
        api_metrics_finished(a->cfg.metrics, e->prompt_tokens, sl->res.n, sl->res.fin.cached_tokens,
                             time_now_sec() - j->t_submit, e->finish == SCHED_FINISH_ABORT);
    json_t *lo = j->log_objs ? json_array_get(j->log_objs, (size_t)sl->prompt) : NULL;
    bool logging = api_reqlog_enabled(a->cfg.reqlog), exporting = a->cfg.mexport && j->kind != JOB_HEALTH;
    if (!lo || (!logging && !exporting)) return;
    bool list_out = j->list_out;
    j->list_out = false; /* no "index" in the logged output */
    json_t *out = api_native_obj(j, sl, true);
    j->list_out = list_out;
    if (logging)
        api_reqlog_finished(a->cfg.reqlog, json_object_get(lo, "obj"), json_object_get(lo, "headers"), out);
    if (exporting) api_mexport_write(a->cfg.mexport, json_object_get(lo, "obj"), out);
    json_decref(out);
}

/* The request as SGLang's GenerateReqInput fields, for the request log. */
static json_t *ops_log_obj(const json_t *q, const char *text)
{
    static const char *const keys[] = {"input_ids", "sampling_params", "rid", "return_logprob",
                                       "logprob_start_len", "top_logprobs_num", "token_ids_logprob",
                                       "return_text_in_logprobs", "stream", "priority", NULL};
    json_t *o = json_object();
    json_object_set_new(o, "text", text ? json_string(text) : json_null());
    for (int k = 0; keys[k]; k++) {
        json_t *v = json_object_get(q, keys[k]);
        /* GenerateReqInput's defaults: stream and return_text_in_logprobs False, the rest None */
        bool flag = !strcmp(keys[k], "stream") || !strcmp(keys[k], "return_text_in_logprobs");
        json_object_set_new(o, keys[k], v ? json_incref(v) : flag ? json_false() : json_null());
    }
    return o;
}

/* Log every prompt of a job as received (polling thread: the request
 * headers are readable) and keep what "Finish:" will print.  At level 2
 * and up a prompt given as ids gets its decoded text afterwards, as
 * SGLang's log_received_request does. */
static void ops_on_submit(api_server *a, api_job *j, json_t **reqs)
{
    j->t_submit = time_now_sec();
    if (!reqs) return;
    /* health checks are logged too (SGLang logs every generate_request);
     * --export-metrics-to-file needs the objects as well */
    bool logging = api_reqlog_enabled(a->cfg.reqlog);
    if (!logging && !(a->cfg.mexport && j->kind != JOB_HEALTH)) return;
    j->log_objs = json_array();
    json_t *headers = logging ? api_reqlog_headers(a->cfg.reqlog, j->hr) : NULL;
    int level = logging ? api_reqlog_level(a->cfg.reqlog) : 0;
    for (int i = 0; i < j->n_prompt; i++) {
        json_t *obj = ops_log_obj(reqs[i], j->prompt_text[i]); /* reqs[i] NULL (OOM): all null */
        if (logging) api_reqlog_received(a->cfg.reqlog, obj, headers);
        json_t *ids = json_object_get(obj, "input_ids");
        if (level >= 2 && !j->prompt_text[i] && a->cfg.tok && json_is_array(ids)) {
            size_t n = json_array_size(ids);
            int32_t *v = malloc(sizeof(int32_t) * (n ? n : 1));
            char *txt = NULL;
            for (size_t k = 0; v && k < n; k++) v[k] = (int32_t)json_integer_value(json_array_get(ids, k));
            tok_decode_opts o = {.skip_special_tokens = false, .spaces_between_special_tokens = true};
            if (v && !tok_decode(a->cfg.tok, v, n, &o, &txt, NULL)) json_object_set_new(obj, "text", json_string(txt));
            free(txt);
            free(v);
        }
        json_array_append_new(j->log_objs, json_pack("{s:o,s:O?}", "obj", obj, "headers", headers));
    }
    json_decref(headers);
}

/* --log-requests: the raw OpenAI body, before it is adapted. */
void api_ops_log_openai(api_server *a, http_req *r, const json_t *body)
{
    if (!api_reqlog_enabled(a->cfg.reqlog)) return;
    json_t *headers = api_reqlog_headers(a->cfg.reqlog, r);
    api_reqlog_openai(a->cfg.reqlog, body, headers);
    json_decref(headers);
}

/* Dispatcher: apply one event to its job; finish the job when complete. */
static void handle_event(api_server *a, const sched_event *e)
{
    int si = -1;
    pthread_mutex_lock(&a->mu);
    api_job *j = reg_find(a, e, &si);
    pthread_mutex_unlock(&a->mu);
    if (!j || si < 0 || si >= j->n_slots) {
        log_warn("event for an unknown request %" PRIu64, e->id);
        return;
    }
    api_slot *sl = &j->slots[si];
    ops_on_event(a, j, sl, e);
    if (sched_result_add(&sl->res, e)) {
        if (!j->err_status) {
            j->err_status = 500;
            j->err_msg = api_strdup("Internal error: out of memory.");
        }
    }
    if (e->kind == SCHED_EV_FINISH && e->embedding && e->n_embedding > 0 && !sl->emb) {
        sl->emb = malloc(sizeof(float) * (size_t)e->n_embedding);
        if (sl->emb) {
            memcpy(sl->emb, e->embedding, sizeof(float) * (size_t)e->n_embedding);
            sl->n_emb = e->n_embedding;
        } else if (!j->err_status) {
            j->err_status = 500;
            j->err_msg = api_strdup("Internal error: out of memory.");
        }
    }
    if (e->kind == SCHED_EV_FINISH) {
        j->prompt_tokens[sl->prompt] = e->prompt_tokens;
        if (e->finish == SCHED_FINISH_ABORT && e->http_status >= 400 && !j->err_status) {
            j->err_status = e->http_status;
            j->err_msg = api_strdup(e->finish_str ? e->finish_str : "error");
        }
    }
    /* the text of these tokens, decoded once by the slot's output stage on
     * the scheduler thread (api_output.h) */
    if (api_output_add(&j->outs[si], e->text, e->text_len) && !j->err_status) {
        j->err_status = 500;
        j->err_msg = api_strdup("Internal error: out of memory.");
    }
    if (j->stream && !atomic_load(&j->gone)) job_stream_event(j, si, e);
    if (e->kind == SCHED_EV_FINISH && !sl->done) {
        sl->done = true;
        j->n_done++;
        ops_on_finish(a, j, sl, e);
    }
    if (j->n_done == j->n_slots) {
        if (j->stream) job_stream_end(j);
        else job_answer(j);
        pthread_mutex_lock(&a->mu);
        a->n_jobs--;
        pthread_mutex_unlock(&a->mu);
        api_job_free(j);
    }
}

/* Non-streaming clients wait on suspended connections, which the http
 * library does not watch: every 200 ms the dispatcher asks the socket of
 * each waiting job whether its client hung up, and aborts those requests.
 * (Streaming clients are noticed when their next chunk fails.)  Only the
 * dispatcher makes terminal calls, so every job it sees here still has an
 * open connection. */
static void reap_gone_clients(api_server *a)
{
    pthread_mutex_lock(&a->mu);
    for (int b = 0; b < REG_BUCKETS; b++)
        for (reg_ent *e = a->reg[b]; e; e = e->next) {
            api_job *j = e->job;
            if (j->stream || atomic_load(&j->gone) || !http_req_peer_gone(j->hr)) continue;
            atomic_store(&j->gone, true);
            for (int i = 0; i < j->n_prompt; i++)
                if (j->sub_ids[i]) dp_abort_id(a->dp, j->sub_ids[i]);
        }
    pthread_mutex_unlock(&a->mu);
}

static void *dispatcher_main(void *arg)
{
    api_server *a = arg;
    double last_reap = time_now_sec();
    while (!atomic_load(&a->stop)) {
        sched_event *e = dp_wait(a->dp, 0.2, NULL);
        if (e) {
            handle_event(a, e);
            sched_event_free(e);
        }
        if (time_now_sec() - last_reap >= 0.2) {
            reap_gone_clients(a);
            last_reap = time_now_sec();
        }
    }
    return NULL;
}

/* ---- submission ----------------------------------------------------------------------- */

/* No scheduler (api_config.s == NULL: tests and the fuzzer): answer every
 * request with synthetic events -- tokens taken from the prompt, a finish
 * reason picked from its first id -- through the same dispatcher code.
 * Runs on the calling thread; frees the specs. */
static void dry_run(api_server *a, api_job *j, sched_req_spec *specs)
{
    int np = j->n_prompt, nper = j->n_per;
    uint64_t *ids = calloc((size_t)np, sizeof *ids);
    pthread_mutex_lock(&a->mu);
    a->n_jobs++;
    for (int i = 0; i < np; i++) {
        ids[i] = ++a->dry_id;
        reg_add(a, ids[i], j, i * nper, nper);
        a->n_reqs++;
    }
    pthread_mutex_unlock(&a->mu);
    int64_t vocab = a->cfg.vocab_size > 0 ? a->cfg.vocab_size : 1;
    /* the job is freed by the last handle_event: read what is needed first */
    bool stream = j->stream;
    bool embed = j->kind == JOB_ENCODE || j->kind == JOB_EMBED || j->kind == JOB_RERANK || j->kind == JOB_CLASSIFY;
    int dims = j->embed_dims > 0 && j->embed_dims < 4 ? j->embed_dims : 4;
    for (int i = 0; i < np; i++) {
        sched_req_spec *sp = &specs[i];
        int32_t out[2];
        for (int k = 0; k < 2; k++) out[k] = (int32_t)(sp->input_ids[k % sp->n_input] % vocab);
        /* the output stage runs as the scheduler would run it */
        void *octx = sp->output_ctx;
        const sched_output_hook *h = &api_output_hook;
        int top = sp->return_logprob ? (sp->top_logprobs_num > 4 ? 4 : sp->top_logprobs_num) : 0;
        float lps[2] = {-0.5f, -1.5f}, tlp[8] = {-0.5f, -1.f, -2.f, -3.f, -0.5f, -1.f, -2.f, -3.f};
        int32_t tids[8];
        for (int k = 0; k < 8; k++) tids[k] = out[k % 2];
        int sel = (int)(sp->input_ids[0] % 4);
        for (int k = 0; k < nper; k++) {
            sched_event e;
            memset(&e, 0, sizeof e);
            e.id = ids[i];
            e.index = k;
            e.rid = sp->rid;
            e.logprobs = sp->return_logprob ? lps : NULL;
            e.top_n = top;
            e.top_ids = top ? tids : NULL;
            e.top_logprobs = top ? tlp : NULL;
            if (sp->params.n_stop) h->check(NULL, octx, ids[i], k, &sp->params, out, 1);
            if (stream) {
                e.kind = SCHED_EV_TOKENS;
                e.ids = out;
                e.n_ids = 1;
                e.completion_tokens = 1;
                e.text = h->text(NULL, octx, k, &sp->params, out, 1, SCHED_FINISH_NONE, &e.text_len);
                handle_event(a, &e);
                free(e.text);
                e.text = NULL, e.text_len = 0;
                e.ids = out + 1;
            } else {
                e.ids = out;
                e.n_ids = 2;
            }
            if (stream) e.n_ids = 1;
            e.kind = SCHED_EV_FINISH;
            e.completion_tokens = 2;
            e.prompt_tokens = sp->n_input;
            e.finish = sel == 0 ? SCHED_FINISH_LENGTH
                       : sel == 1 ? SCHED_FINISH_STOP_TOKEN
                       : sel == 2 ? SCHED_FINISH_STOP_STR
                                  : SCHED_FINISH_ABORT;
            e.finish_length = 2;
            e.finish_token = out[1];
            e.finish_str = sel == 2 ? (sp->params.n_stop ? sp->params.stop[0] : (char *)"x")
                           : sel == 3 ? (char *)"aborted (dry run)"
                                      : NULL;
            e.http_status = sel == 3 ? (out[0] % 2 ? 400 : 200) : 0;
            float emb[4] = {0.5f, -0.5f, 0.5f, (float)(sp->input_ids[0] % 7) / 7.0f};
            if (embed && sel != 3) {
                e.finish = SCHED_FINISH_LENGTH;
                e.finish_length = 0;
                e.n_ids = 0;
                e.embedding = emb;
                e.n_embedding = dims;
            }
            if (sp->params.n_stop && (e.finish == SCHED_FINISH_STOP_STR || e.finish == SCHED_FINISH_ABORT))
                h->check(NULL, octx, ids[i], k, &sp->params, out, 2);
            e.text = h->text(NULL, octx, k, &sp->params, out, 2, e.finish, &e.text_len);
            handle_event(a, &e);
            free(e.text);
        }
        sched_req_spec_free(sp);
    }
    free(ids);
}

/* data_parallel_rank / bootstrap_room of the request being routed on this
 * thread: api_route reads them from the body (with_dp_fields) around the
 * route call and api_job_submit hands them to the controller, so the
 * route files build their jobs without knowing about replicas.  -1 = none. */
static _Thread_local struct { int rank; int64_t room; } tl_dp = {-1, -1};

/* Build, check, log and submit every prompt of a job (api_job.h). */
void api_job_submit(api_server *a, api_job *j, api_spec_fn build, void *ctx)
{
    sched_req_spec *specs = calloc((size_t)j->n_prompt, sizeof *specs);
    /* the request log and --export-metrics-to-file need the request objects */
    bool want_log = api_reqlog_enabled(a->cfg.reqlog) || (a->cfg.mexport && j->kind != JOB_HEALTH);
    json_t **logs = want_log ? calloc((size_t)j->n_prompt, sizeof *logs) : NULL;
    char err[512];
    if (!specs || (want_log && !logs)) {
        free(specs), free(logs);
        api_job_error(j, 500, "Internal error: out of memory.");
        api_job_free(j);
        return;
    }
    const char *bad = NULL;
    int i = 0;
    for (; i < j->n_prompt; i++) {
        bool max_new_given = false;
        if (build(ctx, i, &specs[i], &max_new_given, logs ? &logs[i] : NULL, err, sizeof err)) {
            bad = err;
            break;
        }
        if (api_limits_apply(&specs[i], max_new_given, a->cfg.context_length, a->max_req_input_len,
                             a->cfg.allow_auto_truncate, err, sizeof err)) {
            bad = err;
            i++;
            break;
        }
        int n = specs[i].params.n > 1 ? (int)specs[i].params.n : 1;
        if (n != j->n_per) {
            bad = "sampling_params.n must be the same for every prompt of a batch";
            i++;
            break;
        }
        specs[i].embed_dims = j->embed_dims;
        for (int k = 0; k < j->n_per; k++) j->outs[i * j->n_per + k].no_stop_trim = specs[i].params.no_stop_trim;
        if (j->outs[i * j->n_per].tok) specs[i].output_ctx = &j->outs[i * j->n_per]; /* siblings by index */
        j->return_logprob = specs[i].return_logprob;
        j->top_logprobs = specs[i].top_logprobs_num;
        j->prompt_tokens[i] = specs[i].n_input;
    }
    if (bad) { /* specs [0, i) hold requests */
        for (int k = 0; k < i; k++) sched_req_spec_free(&specs[k]);
        for (int k = 0; logs && k < j->n_prompt; k++) json_decref(logs[k]);
        free(specs), free(logs);
        api_job_error(j, 400, bad);
        api_job_free(j);
        return;
    }
    for (int s = 0; s < j->n_slots; s++) sched_result_init(&j->slots[s].res, j->return_logprob);
    ops_on_submit(a, j, logs);
    for (int k = 0; logs && k < j->n_prompt; k++) json_decref(logs[k]);
    free(logs);
    if (j->stream) http_stream_begin(j->hr, "text/event-stream");
    if (!a->cfg.s) {
        dry_run(a, j, specs);
        free(specs);
        return;
    }
    http_req_on_close(j->hr, job_on_close, j);
    pthread_mutex_lock(&a->mu);
    a->n_jobs++;
    for (int k = 0; k < j->n_prompt; k++) {
        uint64_t id = dp_submit(a->dp, &specs[k], tl_dp.rank, tl_dp.room, NULL);
        j->sub_ids[k] = id;
        reg_add(a, id, j, k * j->n_per, j->n_per);
        a->n_reqs++;
    }
    atomic_store(&j->submitted, true);
    if (atomic_load(&j->gone)) /* the client left meanwhile (see job_on_close) */
        for (int k = 0; k < j->n_prompt; k++) dp_abort_id(a->dp, j->sub_ids[k]);
    pthread_mutex_unlock(&a->mu); /* from here on the dispatcher may free j */
    free(specs);
}

/* ---- routing ------------------------------------------------------------------------------------ */

/* 0 = allowed, else 401 / 403 (SGLang's rules: api_auth.c). */
static int auth_check(api_server *a, http_req *r, const char *method, const char *path)
{
    if (!a->api_key && !a->admin_api_key) return 0;
    return api_auth_decide(method, path, http_req_header(r, "Authorization"), http_req_header(r, "x-api-key"),
                           a->api_key, a->admin_api_key, api_auth_level_of(method, path));
}

/* Parse a JSON object body; on failure answers 400 in the route's style. */
static json_t *parse_body(http_req *r, const char *body, size_t len, bool oai, bool allow_empty)
{
    if (allow_empty && len == 0) return json_object();
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES * 0, &je);
    if (!j || !json_is_object(j)) {
        char msg[300];
        if (!j) snprintf(msg, sizeof msg, "Invalid JSON body: %s (line %d, column %d)", je.text, je.line, je.column);
        else snprintf(msg, sizeof msg, "The request body must be a JSON object");
        json_decref(j);
        if (oai) api_oai_error(r, 400, msg);
        else api_native_error(r, 400, msg);
        return NULL;
    }
    return j;
}

/* path without the --fastapi-root-path prefix */
static const char *strip_root(const api_server *a, const char *path)
{
    size_t rl = a->root_path ? strlen(a->root_path) : 0;
    if (rl && !strncmp(path, a->root_path, rl) && (path[rl] == '/' || !path[rl])) {
        path += rl;
        if (!*path) path = "/";
    }
    return path;
}

/* --enable-tokenizer-batch-encode: encode a batch's texts ahead of its
 * route (api_tokq.h).  true when the request was refused (answered). */
static bool encode_ahead(api_server *a, http_req *r, const char *path, const json_t *j, bool oai)
{
    if (!a->cfg.batch_encode) return false;
    char err[300];
    int st = api_tokq_encode_ahead(a->tokq, a->cfg.tok, path, j, err, sizeof err);
    if (!st) return false;
    if (oai) api_oai_error(r, st, err);
    else api_native_error(r, st, err);
    return true;
}

/* data_parallel_rank and bootstrap_room of a request body into tl_dp
 * (api_dp_fields checks them).  false after answering 400. */
static bool with_dp_fields(api_server *a, http_req *r, const json_t *j, bool oai)
{
    char err[300];
    int rank = -1;
    int64_t room = -1;
    if (api_dp_fields(a, j, &rank, &room, err, sizeof err)) {
        if (oai) api_oai_error(r, 400, err);
        else api_native_error(r, 400, err);
        return false;
    }
    tl_dp.rank = rank, tl_dp.room = room;
    return true;
}

/* SGLang's routes that sglc does not answer yet, with what they wait
 * for: a client that calls one gets a 404 whose message names the route
 * and why, not a bare "Not Found".
 * NULL for any other path. */
static const char *api_route_not_yet(const char *path)
{
    static const struct { const char *path; int prefix; const char *why; } later[] = {
        {"/generate_from_file", 0, "file uploads are not parsed"},
        {"/open_session", 0, "sessions are not implemented"},
        {"/close_session", 0, "sessions are not implemented"},
        {"/vertex_generate", 0, "the Vertex AI request format is not parsed"},
    };
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++) {
        size_t n = strlen(later[i].path);
        if (!strncmp(path, later[i].path, n) && (!path[n] || (later[i].prefix && path[n] == '/')))
            return later[i].why;
    }
    return NULL;
}

/* The handler proper: on a tokenizer worker for requests with a body, on
 * the polling thread for the others (see api_handle). */
static void api_route(void *ctx, http_req *r, const char *method, const char *path, const char *body,
                      size_t body_len)
{
    api_server *a = ctx;
    path = strip_root(a, path);
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    bool post = !strcmp(method, "POST") || !strcmp(method, "PUT");
    bool is_v1 = !strncmp(path, "/v1/", 4);
    int denied = auth_check(a, r, method, path);
    if (denied) {
        const char *m = denied == 403 ? "Forbidden" : "Unauthorized";
        if (is_v1) api_oai_error(r, denied, m); /* error.message: OpenAI clients read it */
        else api_respond_json(r, denied, json_pack("{s:s}", "error", m));
        return;
    }
    bool draining = atomic_load(&a->draining), starting = atomic_load(&a->starting);
    if (api_admin_handle(a->admin, r, method, path, body, body_len, starting)) return;
    if (api_lora_route(r, method, path, body, body_len)) return;
    if (api_expert_route(r, method, path)) return;
    if (!strcmp(path, "/health") || !strcmp(path, "/v1/health") || !strcmp(path, "/ping")) {
        void (*errf)(http_req *, int, const char *) = is_v1 ? api_oai_error : api_native_error;
        if (draining) errf(r, 503, "The server is shutting down.");
        else if (starting) errf(r, 503, "The server is starting.");
        else http_respond(r, 200, "text/plain", "", 0, NULL);
        return;
    }
    if (!strcmp(path, "/health_generate")) {
        if (draining) api_native_error(r, 503, "The server is shutting down.");
        else if (starting) api_native_error(r, 503, "The server is starting.");
        else api_route_health_generate(a, r);
        return;
    }
    if (!strcmp(path, "/get_load")) {
        api_respond_json(r, 200, api_dp_load_json(a));
        return;
    }
    if (!strcmp(path, "/v1/models") && get) {
        json_t *o = json_pack("{s:s,s:[o]}", "object", "list", "data", api_models_entry(a));
        if (o) api_lora_models(json_object_get(o, "data"), a->served, NULL); /* + the LoRA adapters */
        api_respond_json(r, 200, o);
        return;
    }
    if (!strncmp(path, "/v1/models/", 11) && get) {
        const char *id = path + 11;
        json_t *ad = json_array();
        api_lora_models(ad, a->served, id); /* a LoRA adapter's card */
        if (strcmp(id, a->served) && json_array_size(ad)) {
            api_respond_json(r, 200, json_incref(json_array_get(ad, 0)));
            json_decref(ad);
            return;
        }
        json_decref(ad);
        if (strcmp(id, a->served)) {
            char msg[600];
            snprintf(msg, sizeof msg, "The model '%.500s' does not exist", id);
            json_t *o = api_oai_error_obj(404, api_oai_error_type(404), msg);
            if (o) json_object_set_new(o, "error", json_pack("{s:s,s:s,s:s,s:s}", "message", msg, "type",
                                                             "invalid_request_error", "param", "model", "code",
                                                             "model_not_found"));
            api_respond_json(r, 404, o);
            return;
        }
        api_respond_json(r, 200, api_models_entry(a));
        return;
    }
    bool is_gen = !strcmp(path, "/generate"), is_compl = !strcmp(path, "/v1/completions"),
         is_chat = !strcmp(path, "/v1/chat/completions") || !strcmp(path, "/invocations"); /* SageMaker's */
    if ((is_gen || is_compl || is_chat) && !post) {
        if (is_gen) api_native_error(r, 405, "Method Not Allowed");
        else api_oai_error(r, 405, "Method Not Allowed");
        return;
    }
    if (is_gen || is_compl || is_chat) {
        bool oai = !is_gen;
        if (draining || starting) {
            const char *m = draining ? "The server is shutting down." : "The server is starting.";
            if (oai) api_oai_error(r, 503, m);
            else api_native_error(r, 503, m);
            return;
        }
        if (a->cfg.is_embedding) {
            /* SGLang has no explicit check here; sglc answers clearly */
            const char *m = "This model does not appear to be a generation model: the server was launched with "
                            "--is-embedding. Use /encode or /v1/embeddings.";
            if (oai) api_oai_error(r, 400, m);
            else api_native_error(r, 400, m);
            return;
        }
        json_t *j = parse_body(r, body, body_len, oai, false);
        if (!j) return;
        if (!with_dp_fields(a, r, j, oai)) {
        } else if (encode_ahead(a, r, path, j, oai)) {
        } else if (is_gen) api_route_generate(a, r, j);
        else {
            api_ops_log_openai(a, r, j);
            api_route_openai(a, r, j, is_compl ? JOB_COMPL : JOB_CHAT);
        }
        api_tokq_pre_clear();
        tl_dp.rank = -1, tl_dp.room = -1;
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/v1/responses")) {
        if (!post) {
            api_oai_error(r, 405, "Method Not Allowed");
            return;
        }
        if (draining || starting) {
            api_oai_error(r, 503, draining ? "The server is shutting down." : "The server is starting.");
            return;
        }
        json_t *j = parse_body(r, body, body_len, true, false);
        if (!j) return;
        if (with_dp_fields(a, r, j, true)) {
            api_ops_log_openai(a, r, j);
            api_route_responses(a, r, j);
        }
        tl_dp.rank = -1, tl_dp.room = -1;
        json_decref(j);
        return;
    }
    if (!strncmp(path, "/v1/responses/", 14) && api_route_responses_id(a, r, method, path)) return;
    bool is_enc = !strcmp(path, "/encode"), is_emb = !strcmp(path, "/v1/embeddings");
    if ((is_enc || is_emb) && !post) {
        if (is_enc) api_native_error(r, 405, "Method Not Allowed");
        else api_oai_error(r, 405, "Method Not Allowed");
        return;
    }
    if (is_enc || is_emb) {
        if (draining || starting) {
            const char *m = draining ? "The server is shutting down." : "The server is starting.";
            if (is_emb) api_oai_error(r, 503, m);
            else api_native_error(r, 503, m);
            return;
        }
        json_t *j = parse_body(r, body, body_len, is_emb, false);
        if (!j) return;
        if (with_dp_fields(a, r, j, is_emb) && !encode_ahead(a, r, path, j, is_emb)) {
            if (is_emb) api_ops_log_openai(a, r, j);
            api_route_embed(a, r, j, is_emb);
        }
        tl_dp.rank = -1, tl_dp.room = -1;
        api_tokq_pre_clear();
        json_decref(j);
        return;
    }
    bool is_score = !strcmp(path, "/v1/score"), is_rerank = !strcmp(path, "/v1/rerank"),
         is_cls = !strcmp(path, "/v1/classify") || !strcmp(path, "/classify");
    if (is_score || is_rerank || is_cls) { /* api_score.c */
        if (!post) {
            api_oai_error(r, 405, "Method Not Allowed");
            return;
        }
        if (draining || starting) {
            api_oai_error(r, 503, draining ? "The server is shutting down." : "The server is starting.");
            return;
        }
        json_t *j = parse_body(r, body, body_len, true, false);
        if (!j) return;
        api_ops_log_openai(a, r, j);
        if (is_score) api_route_score(a, r, j);
        else if (is_rerank) api_route_rerank(a, r, j);
        else api_route_classify(a, r, j);
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/tokenize") || !strcmp(path, "/v1/tokenize") || !strcmp(path, "/detokenize") ||
        !strcmp(path, "/v1/detokenize")) {
        json_t *j = parse_body(r, body, body_len, false, false);
        if (!j) return;
        if (strstr(path, "detokenize")) api_route_detokenize(a, r, j);
        else api_route_tokenize(a, r, j);
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/parse_function_call") || !strcmp(path, "/separate_reasoning")) {
        if (!post) {
            api_native_error(r, 405, "Method Not Allowed");
            return;
        }
        json_t *j = parse_body(r, body, body_len, false, false);
        if (!j) return;
        if (path[1] == 'p') api_route_parse_function_call(a, r, j); /* api_chat_tools.c */
        else api_route_separate_reasoning(a, r, j);
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/abort_request")) {
        json_t *j = parse_body(r, body, body_len, false, true);
        if (!j) return;
        json_t *rid = json_object_get(j, "rid");
        if (!a->dp) {
        } else if (json_is_true(json_object_get(j, "abort_all"))) {
            dp_abort(a->dp, NULL); /* every replica */
        } else if (json_is_string(rid)) {
            dp_abort(a->dp, json_string_value(rid));
        }
        json_decref(j);
        http_respond(r, 200, "text/plain", "", 0, NULL);
        return;
    }
    if (!strcmp(path, "/configure_logging") && (get || post) && a->cfg.reqlog) {
        /* ConfigureLoggingReq body; 200 with an empty body, as SGLang */
        json_t *j = parse_body(r, body, body_len, false, false);
        if (!j) return;
        char err[300];
        if (api_reqlog_configure(a->cfg.reqlog, j, err, sizeof err)) api_native_error(r, 400, err);
        else http_respond(r, 200, "text/plain", "", 0, NULL);
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/metrics") && get && a->cfg.metrics) {
        int n = a->dp ? dp_size(a->dp) : 1;
        sched_stats *st = calloc((size_t)n, sizeof *st);
        for (int k = 0; st && a->dp && k < n; k++) sched_get_stats_snapshot(dp_sched(a->dp, k), &st[k]);
        /* one scheduler gauge line per dp_rank with --dp-size > 1 (SGLang labels them dp_rank) */
        char *txt = st ? api_metrics_render_dp(a->cfg.metrics, st, n) : NULL;
        txt = api_expert_metrics_append(txt); /* --enable-expert-distribution-metrics */
        free(st);
        if (!txt) api_native_error(r, 500, "Internal error: out of memory.");
        else http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", txt, strlen(txt), NULL);
        free(txt);
        return;
    }
    const char *later = api_route_not_yet(path);
    if (later) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s is an SGLang route that sglc does not serve yet (%s).", path, later);
        /* 404, not 501: OpenAI clients retry every 5xx */
        if (is_v1) api_oai_error(r, 404, msg);
        else api_native_error(r, 404, msg);
        return;
    }
    json_t *nf = is_v1 ? api_oai_error_obj(404, api_oai_error_type(404), "Not Found") : json_object();
    if (nf) json_object_set_new(nf, "detail", json_string("Not Found")); /* FastAPI's, kept */
    api_respond_json(r, 404, nf);
}

void api_handle(void *ctx, http_req *r, const char *method, const char *path, const char *body,
                size_t body_len)
{
    api_server *a = ctx;
    /* parsing, templates and tokenizing leave the polling thread; a
     * request refused by authentication is answered here, unqueued */
    if (a->tokq && body_len && !auth_check(a, r, method, strip_root(a, path)) &&
        api_tokq_offer(a->tokq, r, method, path, body, body_len))
        return;
    api_route(a, r, method, path, body, body_len);
}

/* ---- lifecycle ---------------------------------------------------------------------------------- */

api_server *api_create(const api_config *cfg, char *err, size_t errlen)
{
    api_server *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->cfg = *cfg;
    a->served = api_strdup(cfg->served_model_name ? cfg->served_model_name : "default");
    a->model_path = api_strdup(cfg->model_path ? cfg->model_path : "");
    a->tok_path = api_strdup(cfg->tokenizer_path ? cfg->tokenizer_path : a->model_path);
    a->arch = api_strdup(cfg->architecture ? cfg->architecture : "");
    a->api_key = cfg->api_key && *cfg->api_key ? api_strdup(cfg->api_key) : NULL;
    a->admin_api_key = cfg->admin_api_key && *cfg->admin_api_key ? api_strdup(cfg->admin_api_key) : NULL;
    /* "/prefix/" and "/prefix" both mean the prefix "/prefix" */
    if (cfg->root_path && *cfg->root_path && strcmp(cfg->root_path, "/")) {
        a->root_path = api_strdup(cfg->root_path);
        size_t n = strlen(a->root_path);
        while (n > 1 && a->root_path[n - 1] == '/') a->root_path[--n] = 0;
    }
    a->weight_version = api_strdup(cfg->weight_version && *cfg->weight_version ? cfg->weight_version : "default");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    a->rid_salt = ((uint64_t)ts.tv_sec * 1000000007ull) ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)a;
    pthread_mutex_init(&a->mu, NULL);
    /* one path for one scheduler or many: a lone scheduler gets a
     * controller of size 1; the admin routes see it as cfg.dp */
    if (cfg->dp) {
        a->dp = cfg->dp;
        if (!a->cfg.s) a->cfg.s = dp_sched(a->dp, 0);
    } else if (cfg->s) {
        a->dp = dp_wrap(cfg->s);
        a->own_dp = true;
        if (!a->dp) {
            snprintf(err, errlen, "out of memory");
            api_destroy(a);
            return NULL;
        }
    }
    a->cfg.dp = a->dp;
    a->max_req_input_len = a->cfg.s ? sched_max_req_input_len(a->cfg.s) : cfg->context_length - 6;
    a->admin = api_admin_create(&a->cfg);
    a->resps = api_resp_store_new();
    if (!a->admin || !a->resps) {
        snprintf(err, errlen, "out of memory");
        api_destroy(a);
        return NULL;
    }
    if (cfg->tokenizer_workers > 0 && !(a->tokq = api_tokq_create(cfg->tokenizer_workers, api_route, a, err, errlen))) {
        api_destroy(a);
        return NULL;
    }
    atomic_store(&a->starting, true);
    if (cfg->start_later) return a;
    if (api_set_ready(a, err, errlen)) {
        api_destroy(a);
        return NULL;
    }
    return a;
}

int api_set_ready(api_server *a, char *err, size_t errlen)
{
    if (a->cfg.s && !a->thread_started) { /* dry run: no scheduler, no dispatcher */
        if (pthread_create(&a->thread, NULL, dispatcher_main, a)) {
            snprintf(err, errlen, "cannot start the dispatcher thread");
            return -1;
        }
        a->thread_started = true;
    }
    atomic_store(&a->starting, false);
    return 0;
}

void api_destroy(api_server *a)
{
    if (!a) return;
    atomic_store(&a->draining, true); /* jobs still queued for the workers answer 503 */
    if (a->admin) api_admin_set_draining(a->admin, true);
    api_tokq_destroy(a->tokq);
    api_admin_destroy(a->admin); /* its threads answer their requests first */
    atomic_store(&a->stop, true);
    if (a->thread_started) pthread_join(a->thread, NULL);
    for (int b = 0; b < REG_BUCKETS; b++)
        for (reg_ent *e = a->reg[b], *n; e; e = n) {
            n = e->next;
            free(e);
        }
    pthread_mutex_destroy(&a->mu);
    free(a->served), free(a->model_path), free(a->tok_path), free(a->arch), free(a->api_key), free(a->admin_api_key);
    free(a->root_path), free(a->weight_version);
    api_resp_store_free(a->resps);
    if (a->own_dp) dp_destroy(a->dp);
    free(a);
}

void api_install_output_hook(sched *s)
{
    sched_set_output_hook(s, &api_output_hook, NULL);
}

void api_set_draining(api_server *a, bool on)
{
    atomic_store(&a->draining, on);
    api_admin_set_draining(a->admin, on);
}

int api_active(api_server *a)
{
    pthread_mutex_lock(&a->mu);
    int n = a->n_jobs;
    pthread_mutex_unlock(&a->mu);
    return n;
}
