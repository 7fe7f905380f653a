/* api_reply — the response pieces every route family shares: errors in
 * the native and OpenAI shapes, SSE writes, request ids, output text,
 * token texts, finish reasons, usage (see api_job.h).
 *
 * DESIGN: pure helpers over one job or one http_req; they make the
 * terminal call on the request only where the name says so (…_error,
 * api_respond_json).  Called on the polling thread (errors while parsing)
 * and on the dispatcher (answers, stream chunks). */
#include "api/api_job.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *api_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

void api_respond_json(http_req *r, int status, json_t *j)
{
    char *txt = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    if (!txt) {
        const char *m = "{\"error\": {\"message\": \"Internal error: out of memory.\"}}";
        http_respond(r, 500, "application/json", m, strlen(m), NULL);
    } else {
        http_respond(r, status, "application/json", txt, strlen(txt), NULL);
    }
    free(txt);
    json_decref(j);
}

void api_native_error(http_req *r, int status, const char *msg)
{
    api_respond_json(r, status, json_pack("{s:{s:s}}", "error", "message", msg));
}

json_t *api_oai_error_fields(int status, const char *type, const char *msg)
{
    return json_pack("{s:s,s:s,s:s,s:n,s:i}", "object", "error", "message", msg, "type", type,
                     "param", "code", status);
}

/* SGLang's ErrorResponse fields at the top level, plus the same facts as
 * OpenAI's {"error": {...}}, which the OpenAI SDKs read (body.error.message). */
json_t *api_oai_error_obj(int status, const char *type, const char *msg)
{
    json_t *o = api_oai_error_fields(status, type, msg);
    if (o) json_object_set_new(o, "error", json_pack("{s:s,s:s,s:n,s:i}", "message", msg, "type", type,
                                                     "param", "code", status));
    return o;
}

const char *api_oai_error_type(int status)
{
    return status == 404 ? "NotFoundError"
           : status == 503 ? "ServiceUnavailableError"
           : status >= 500 ? "InternalServerError"
           : status == 401 ? "Unauthorized"
           : status == 403 ? "Forbidden"
           : status == 405 ? "MethodNotAllowed"
                           : "BadRequest";
}

void api_oai_error(http_req *r, int status, const char *msg)
{
    api_respond_json(r, status, api_oai_error_obj(status, api_oai_error_type(status), msg));
}

void api_job_error(api_job *j, int status, const char *msg)
{
    if (j->kind == JOB_COMPL || j->kind == JOB_CHAT || j->kind == JOB_EMBED || j->kind == JOB_RESP ||
        j->kind >= JOB_SCORE)
        api_oai_error(j->hr, status, msg);
    else api_native_error(j->hr, status, msg);
}

/* One SSE event: [event: NAME\n]data: JSON\n\n (takes j). */
static bool sse_write_json(http_req *r, const char *event, json_t *j)
{
    char *txt = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(j);
    if (!txt) return false;
    size_t n = strlen(txt), el = event ? strlen(event) + 8 : 0; /* "event: " NAME "\n" */
    char *buf = malloc(el + n + 9);
    if (!buf) {
        free(txt);
        return false;
    }
    if (event) snprintf(buf, el + 1, "event: %s\n", event);
    memcpy(buf + el, "data: ", 6);
    memcpy(buf + el + 6, txt, n);
    memcpy(buf + el + 6 + n, "\n\n", 2);
    bool ok = http_stream_write(r, buf, el + n + 8);
    free(buf);
    free(txt);
    return ok;
}

void api_new_rid(api_server *a, char *out, size_t len)
{
    unsigned long long c = atomic_fetch_add(&a->rid_counter, 1);
    snprintf(out, len, "%016" PRIx64 "%016llx", a->rid_salt, c);
}

void api_job_sse(api_job *j, json_t *o)
{
    api_job_sse_event(j, NULL, o);
}

void api_job_sse_event(api_job *j, const char *event, json_t *o)
{
    if (!sse_write_json(j->hr, event, o) && !atomic_exchange(&j->gone, true))
        for (int i = 0; i < j->n_prompt; i++)
            if (j->sub_ids[i] && j->api->dp) dp_abort_id(j->api->dp, j->sub_ids[i]);
}

/* ---- text ------------------------------------------------------------------------ */

char *api_slot_final_text(api_job *j, api_slot *sl)
{
    const api_output *o = api_slot_out(j, sl);
    char *t = api_output_final(o, sl->res.fin.finish, sl->res.fin.finish_str, o->no_stop_trim);
    return t ? t : api_strdup("");
}

/* Text of one token for logprob tables. */
json_t *api_token_text(const api_server *a, int32_t id)
{
    if (!a->cfg.tok) return json_null();
    char *t = NULL;
    tok_decode_opts o = {.skip_special_tokens = false};
    if (tok_decode(a->cfg.tok, &id, 1, &o, &t, NULL)) return json_null();
    json_t *s = json_string(t);
    free(t);
    return s ? s : json_string("");
}

const char *api_oai_finish(const sched_result *r)
{
    switch (r->fin.finish) {
    case SCHED_FINISH_LENGTH: return "length";
    case SCHED_FINISH_STOP_TOKEN:
    case SCHED_FINISH_STOP_STR: return "stop";
    case SCHED_FINISH_ABORT: return "abort";
    default: return NULL;
    }
}

json_t *api_oai_matched(const sched_result *r)
{
    if (r->fin.finish == SCHED_FINISH_STOP_TOKEN) return json_integer(r->fin.finish_token);
    if (r->fin.finish == SCHED_FINISH_STOP_STR && r->fin.finish_str)
        return json_string(r->fin.finish_str);
    return json_null();
}

/* return_text_in_logprobs: fill the third element of every [logprob, id,
 * text] entry in the logprob arrays of meta_info (entries may be nested one
 * level: top logprobs). */
void api_fill_logprob_texts(const api_server *a, json_t *meta)
{
    static const char *const keys[] = {"input_token_logprobs", "output_token_logprobs",
                                       "input_top_logprobs", "output_top_logprobs",
                                       "input_token_ids_logprobs", "output_token_ids_logprobs", NULL};
    for (int k = 0; keys[k]; k++) {
        json_t *arr = json_object_get(meta, keys[k]);
        size_t i;
        json_t *x;
        json_array_foreach(arr, i, x)
        {
            bool nested = json_is_array(x) && json_is_array(json_array_get(x, 0));
            size_t n = nested ? json_array_size(x) : 1;
            for (size_t m = 0; m < n; m++) {
                json_t *e = nested ? json_array_get(x, m) : x;
                json_t *id = json_array_get(e, 1);
                if (json_array_size(e) == 3 && json_is_integer(id))
                    json_array_set_new(e, 2, api_token_text(a, (int32_t)json_integer_value(id)));
            }
        }
    }
}

json_t *api_usage_obj(api_job *j)
{
    int64_t pt = 0, ct = 0, cached = 0;
    for (int i = 0; i < j->n_prompt; i++) pt += j->prompt_tokens[i];
    for (int i = 0; i < j->n_slots; i++) {
        ct += j->slots[i].res.n;
        cached += j->slots[i].res.fin.cached_tokens;
    }
    json_t *u = json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)pt, "completion_tokens",
                          (json_int_t)ct, "total_tokens", (json_int_t)(pt + ct));
    json_object_set_new(u, "prompt_tokens_details",
                        j->api->cfg.enable_cache_report
                            ? json_pack("{s:I}", "cached_tokens", (json_int_t)cached)
                            : json_null());
    return u;
}

/* OpenAI completions logprobs of output tokens [from, r->n). */
json_t *api_oai_chunk(api_job *j, json_t *choices)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->oai_id, "object",
                     j->kind == JOB_COMPL ? "text_completion" : "chat.completion.chunk", "created",
                     (json_int_t)j->created, "model", j->api->served, "choices", choices);
}

/* The route's one tokenize step: ids encoded ahead by
 * --enable-tokenizer-batch-encode (api_tokq_pre_take), else tok_encode.
 * 0, or -1 (ids may hold a partial result: free them). */
static int encode_text(api_server *a, const char *text, size_t len, bool add_special, tok_ids *ids)
{
    if (api_tokq_pre_take(text, len, add_special, ids)) return 0;
    return tok_encode(a->cfg.tok, text, len, add_special, ids) ? -1 : 0;
}

json_t *api_tokenize_json(api_server *a, const char *text, size_t len, bool add_special)
{
    tok_ids ids = {0};
    if (encode_text(a, text, len, add_special, &ids)) {
        tok_ids_free(&ids);
        return NULL;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < ids.n; i++) json_array_append_new(arr, json_integer(ids.ids[i]));
    tok_ids_free(&ids);
    return arr;
}

bool api_is_id_list(const json_t *v)
{
    if (!json_is_array(v)) return false;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (!json_is_integer(x)) return false;
    return true;
}

int64_t api_json_n_of(const json_t *sp)
{
    json_t *n = sp ? json_object_get(sp, "n") : NULL;
    return json_is_integer(n) && json_integer_value(n) > 1 ? json_integer_value(n) : 1;
}

/* ---- prompts ---------------------------------------------------------------------- */

static api_prompt *prompts_push(api_prompts *ps)
{
    if (ps->n == ps->cap) {
        int nc = ps->cap ? ps->cap * 2 : 4;
        api_prompt *g = realloc(ps->v, sizeof *g * (size_t)nc);
        if (!g) return NULL;
        ps->v = g;
        ps->cap = nc;
    }
    api_prompt *p = &ps->v[ps->n++];
    memset(p, 0, sizeof *p);
    return p;
}

int api_prompts_add_text(api_server *a, api_prompts *ps, const char *text, size_t len, bool add_special,
                         const char *shown)
{
    api_prompt *p = prompts_push(ps);
    if (!p) return -1;
    if (shown && !(p->text = api_strdup(shown))) return -1;
    tok_ids ids = {0};
    if (encode_text(a, text, len, add_special, &ids)) {
        tok_ids_free(&ids);
        return 0; /* api_prompt_failed */
    }
    if (!ids.ids && !(ids.ids = malloc(sizeof(int32_t)))) return -1; /* no tokens: still "tokenized" */
    p->ids = ids.ids; /* taken over from the tok_ids */
    p->n_ids = (int64_t)ids.n;
    return 0;
}

int api_prompts_add_ids(api_prompts *ps, const json_t *ids)
{
    api_prompt *p = prompts_push(ps);
    if (!p) return -1;
    p->ids_json = ids;
    return 0;
}

int api_prompts_add_owned(api_prompts *ps, int32_t *ids, int64_t n)
{
    api_prompt *p = prompts_push(ps);
    if (!p) return -1;
    p->ids = ids ? ids : malloc(sizeof(int32_t));
    p->n_ids = n;
    return p->ids ? 0 : -1;
}

void api_prompts_free(api_prompts *ps)
{
    for (int i = 0; i < ps->n; i++) {
        free(ps->v[i].ids);
        free(ps->v[i].text);
    }
    free(ps->v);
    memset(ps, 0, sizeof *ps);
}

json_t *api_ids_json(const int32_t *ids, int64_t n)
{
    json_t *arr = json_array();
    for (int64_t i = 0; arr && i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    return arr;
}

int api_spec_simple(sched_req_spec *spec, int32_t *ids, int64_t n, const json_t *sampling, const char *rid,
                    char *err, size_t errlen)
{
    sched_req_spec_init(spec);
    spec->input_ids = ids, spec->n_input = n;
    if (sampling_params_from_json(&spec->params, sampling, err, errlen)) goto fail;
    if (rid && !(spec->rid = api_strdup(rid))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (!ids || n == 0) {
        snprintf(err, errlen, "input_ids must not be empty");
        goto fail;
    }
    return 0;
fail:
    sched_req_spec_free(spec);
    return -1;
}
