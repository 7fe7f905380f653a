/* api — see api.h.
 *
 * DESIGN: one HTTP request that generates is a job: n_prompt prompts, each
 * submitted once to the scheduler (sched handles n > 1 as siblings), so a
 * job has n_prompt * n slots, laid out prompt-major (SGLang's order for
 * batch x n).  The registry maps a submit id to (job, first slot); it is
 * filled under api->mu while submitting, so the dispatcher never sees an
 * event it cannot place.  After submission only the dispatcher touches a
 * job, except `gone` (set by the close hook) and the rids it reads. */
#include "api/api.h"
#include "api/api_ops.h"
#include "api/api_impl.h"
#include "api/api_tokq.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "sched/sched_json.h"
#include "util/log.h"
#include "util/timeutil.h"

enum { JOB_NATIVE = 0, JOB_COMPL, JOB_CHAT, JOB_HEALTH, JOB_ENCODE, JOB_EMBED };
/* JOB_ENCODE: SGLang's /encode; JOB_EMBED: OpenAI /v1/embeddings.  Each
 * input is one scheduler request (embedding mode) and one slot, whose
 * FINISH event carries the pooled vector. */

typedef struct api_slot {
    sched_result res;
    tok_stream *ts;              /* owned; streaming with a tokenizer */
    char *stext;                 /* (stext_len) owned: streamed text so far */
    size_t stext_len;
    size_t sent;                 /* bytes of text already sent as deltas */
    size_t ids_sent;             /* output ids already sent (incremental native streaming) */
    double t_last;               /* metrics: when its last tokens arrived, 0 = none yet */
    int prompt;
    bool done, role_sent;
    float *emb;                  /* (n_emb) owned or NULL: embedding jobs */
    int n_emb;
} api_slot;

typedef struct api_job {
    api_server *api;
    http_req *hr;                /* until the terminal call */
    int kind;
    bool stream, list_out, include_usage, echo, return_logprob;
    int top_logprobs;
    bool skip_special, spaces_between, no_stop_trim;
    bool text_in_logprobs;       /* return_text_in_logprobs */
    int n_prompt, n_per, n_slots, n_done;
    api_slot *slots;             /* (n_slots) */
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
};

/* ---- small helpers -------------------------------------------------------- */

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

static void native_error(http_req *r, int status, const char *msg)
{
    api_respond_json(r, status, json_pack("{s:{s:s}}", "error", "message", msg));
}

static json_t *oai_error_obj(int status, const char *type, const char *msg)
{
    return json_pack("{s:s,s:s,s:s,s:n,s:i}", "object", "error", "message", msg, "type", type,
                     "param", "code", status);
}

static const char *oai_error_type(int status)
{
    return status == 404 ? "NotFoundError"
           : status == 503 ? "ServiceUnavailableError"
           : status >= 500 ? "InternalServerError"
                           : "BadRequest";
}

static void oai_error(http_req *r, int status, const char *msg)
{
    api_respond_json(r, status, oai_error_obj(status, oai_error_type(status), msg));
}

static void job_error(api_job *j, int status, const char *msg)
{
    if (j->kind == JOB_COMPL || j->kind == JOB_CHAT || j->kind == JOB_EMBED) oai_error(j->hr, status, msg);
    else native_error(j->hr, status, msg);
}

static bool sse_write_json(http_req *r, json_t *j)
{
    char *txt = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(j);
    if (!txt) return false;
    size_t n = strlen(txt);
    char *buf = malloc(n + 9);
    if (!buf) {
        free(txt);
        return false;
    }
    memcpy(buf, "data: ", 6);
    memcpy(buf + 6, txt, n);
    memcpy(buf + 6 + n, "\n\n", 2);
    bool ok = http_stream_write(r, buf, n + 8);
    free(buf);
    free(txt);
    return ok;
}

static void new_rid(api_server *a, char *out, size_t len)
{
    unsigned long long c = atomic_fetch_add(&a->rid_counter, 1);
    snprintf(out, len, "%016" PRIx64 "%016llx", a->rid_salt, c);
}

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

static api_job *job_new(api_server *a, http_req *r, int kind, int n_prompt, int n_per)
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
    j->rids = calloc((size_t)n_prompt, sizeof(char *));
    j->prompt_text = calloc((size_t)n_prompt, sizeof(char *));
    j->prompt_tokens = calloc((size_t)n_prompt, sizeof(int64_t));
    j->sub_ids = calloc((size_t)n_prompt, sizeof(uint64_t));
    j->skip_special = true;
    j->spaces_between = true;
    j->created = (int64_t)time(NULL);
    if (!j->slots || !j->rids || !j->prompt_text || !j->prompt_tokens || !j->sub_ids) {
        free(j->slots), free(j->rids), free(j->prompt_text), free(j->prompt_tokens), free(j->sub_ids);
        free(j);
        return NULL;
    }
    for (int i = 0; i < j->n_slots; i++) j->slots[i].prompt = i / n_per;
    return j;
}

static void job_free(api_job *j)
{
    if (!j) return;
    for (int i = 0; i < j->n_slots; i++) {
        sched_result_free(&j->slots[i].res);
        free(j->slots[i].emb);
        if (j->slots[i].ts) tok_stream_destroy(j->slots[i].ts);
        free(j->slots[i].stext);
    }
    for (int i = 0; i < j->n_prompt; i++) {
        free(j->rids[i]);
        free(j->prompt_text[i]);
    }
    free(j->slots);
    free(j->rids);
    free(j->prompt_text);
    free(j->prompt_tokens);
    free(j->sub_ids);
    free(j->oai_id);
    free(j->err_msg);
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
            if (j->sub_ids[i]) sched_abort_id(j->api->cfg.s, j->sub_ids[i]);
}

/* Write one SSE event of a job; a client that cannot take it (gone, or
 * over the stream buffer limit) gets its requests aborted. */
static void job_sse(api_job *j, json_t *o)
{
    if (!sse_write_json(j->hr, o) && !atomic_exchange(&j->gone, true))
        for (int i = 0; i < j->n_prompt; i++)
            if (j->sub_ids[i] && j->api->cfg.s) sched_abort_id(j->api->cfg.s, j->sub_ids[i]);
}

/* ---- text ------------------------------------------------------------------------ */

/* Final text of a finished slot: decode, minus a matched stop token /
 * stop string unless no_stop_trim (SGLang's trim_matched_stop). */
static char *slot_final_text(api_job *j, api_slot *sl)
{
    const tok_tokenizer *tok = j->api->cfg.tok;
    if (!tok) return api_strdup("");
    const sched_result *r = &sl->res;
    int64_t n = r->n;
    if (!j->no_stop_trim && r->fin.finish == SCHED_FINISH_STOP_TOKEN && n > 0 &&
        r->ids[n - 1] == r->fin.finish_token)
        n--;
    tok_decode_opts o = {.skip_special_tokens = j->skip_special,
                         .spaces_between_special_tokens = j->spaces_between};
    char *txt = NULL;
    if (tok_decode(tok, r->ids, (size_t)n, &o, &txt, NULL)) return api_strdup("");
    if (!j->no_stop_trim && r->fin.finish == SCHED_FINISH_STOP_STR && r->fin.finish_str) {
        char *p = strstr(txt, r->fin.finish_str);
        if (p) *p = 0;
    }
    return txt;
}

static int slot_append(api_slot *sl, const char *s, size_t n)
{
    if (!n) return 0;
    char *g = realloc(sl->stext, sl->stext_len + n + 1);
    if (!g) return -1;
    memcpy(g + sl->stext_len, s, n);
    sl->stext = g;
    sl->stext_len += n;
    g[sl->stext_len] = 0;
    return 0;
}

/* Text of one token for logprob tables. */
static json_t *token_text(const api_server *a, int32_t id)
{
    if (!a->cfg.tok) return json_null();
    char *t = NULL;
    tok_decode_opts o = {.skip_special_tokens = false};
    if (tok_decode(a->cfg.tok, &id, 1, &o, &t, NULL)) return json_null();
    json_t *s = json_string(t);
    free(t);
    return s ? s : json_string("");
}

/* ---- rendering results ------------------------------------------------------------------ */

static const char *oai_finish(const sched_result *r)
{
    switch (r->fin.finish) {
    case SCHED_FINISH_LENGTH: return "length";
    case SCHED_FINISH_STOP_TOKEN:
    case SCHED_FINISH_STOP_STR: return "stop";
    case SCHED_FINISH_ABORT: return "abort";
    default: return NULL;
    }
}

static json_t *oai_matched(const sched_result *r)
{
    if (r->fin.finish == SCHED_FINISH_STOP_TOKEN) return json_integer(r->fin.finish_token);
    if (r->fin.finish == SCHED_FINISH_STOP_STR && r->fin.finish_str)
        return json_string(r->fin.finish_str);
    return json_null();
}

/* return_text_in_logprobs: fill the third element of every [logprob, id,
 * text] entry in the logprob arrays of meta_info (entries may be nested one
 * level: top logprobs). */
static void fill_logprob_texts(const api_server *a, json_t *meta)
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
                    json_array_set_new(e, 2, token_text(a, (int32_t)json_integer_value(id)));
            }
        }
    }
}

static json_t *native_obj(api_job *j, api_slot *sl, bool final)
{
    json_t *o = sched_result_to_json(&sl->res);
    if (!o) return NULL;
    if (final) {
        char *t = slot_final_text(j, sl);
        json_object_set_new(o, "text", json_string(t ? t : ""));
        free(t);
    } else {
        json_object_set_new(o, "text", json_string(sl->stext ? sl->stext : ""));
        json_t *m = json_object_get(o, "meta_info");
        if (m) {
            json_object_set_new(m, "finish_reason", json_null());
            json_object_set_new(m, "id", json_string(j->rids[sl->prompt] ? j->rids[sl->prompt] : ""));
            json_object_set_new(m, "prompt_tokens", json_integer(j->prompt_tokens[sl->prompt]));
        }
    }
    if (j->text_in_logprobs && j->return_logprob && j->api->cfg.tok)
        fill_logprob_texts(j->api, json_object_get(o, "meta_info"));
    if (j->list_out) json_object_set_new(o, "index", json_integer((int64_t)(sl - j->slots)));
    return o;
}

static json_t *usage_obj(api_job *j)
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
static json_t *compl_logprobs(api_job *j, api_slot *sl, size_t text_base, int64_t from)
{
    const sched_result *r = &sl->res;
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = text_base;
    for (int64_t i = from; i < r->n; i++) {
        json_t *tt = token_text(j->api, r->ids[i]);
        json_array_append(tokens, tt);
        json_array_append_new(offs, json_integer((json_int_t)off));
        if (json_is_string(tt)) off += json_string_length(tt);
        json_decref(tt);
        json_array_append_new(lps, r->lp && isfinite(r->lp[i]) ? json_real(r->lp[i]) : json_null());
        if (r->top_n && r->top_ids) {
            json_t *d = json_object();
            for (int k = 0; k < r->top_n; k++) {
                int32_t id = r->top_ids[i * r->top_n + k];
                if (id < 0) continue;
                json_t *s = token_text(j->api, id);
                float v = r->top_lp[i * r->top_n + k];
                if (json_is_string(s))
                    json_object_set_new(d, json_string_value(s), isfinite(v) ? json_real(v) : json_null());
                json_decref(s);
            }
            json_array_append_new(tops, d);
        } else {
            json_array_append_new(tops, json_null());
        }
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "text_offset", offs, "token_logprobs", lps, "tokens", tokens,
                     "top_logprobs", tops);
}

static json_t *bytes_of(json_t *s)
{
    json_t *b = json_array();
    if (json_is_string(s)) {
        const unsigned char *p = (const unsigned char *)json_string_value(s);
        for (size_t i = 0; i < json_string_length(s); i++) json_array_append_new(b, json_integer(p[i]));
    }
    return b;
}

/* OpenAI chat logprobs of output tokens [from, r->n). */
static json_t *chat_logprobs(api_job *j, api_slot *sl, int64_t from)
{
    const sched_result *r = &sl->res;
    json_t *content = json_array();
    for (int64_t i = from; i < r->n; i++) {
        json_t *tt = token_text(j->api, r->ids[i]);
        json_t *top = json_array();
        if (r->top_n && r->top_ids)
            for (int k = 0; k < r->top_n; k++) {
                int32_t id = r->top_ids[i * r->top_n + k];
                if (id < 0) continue;
                json_t *s = token_text(j->api, id);
                float v = r->top_lp[i * r->top_n + k];
                json_array_append_new(top, json_pack("{s:o,s:o,s:o}", "token", json_is_string(s) ? json_incref(s) : json_string(""),
                                                     "logprob", isfinite(v) ? json_real(v) : json_real(-9999.0),
                                                     "bytes", bytes_of(s)));
                json_decref(s);
            }
        float v = r->lp ? r->lp[i] : NAN;
        json_array_append_new(content, json_pack("{s:o,s:o,s:o,s:o}", "token",
                                                 json_is_string(tt) ? json_incref(tt) : json_string(""),
                                                 "logprob", isfinite(v) ? json_real(v) : json_real(-9999.0),
                                                 "bytes", bytes_of(tt), "top_logprobs", top));
        json_decref(tt);
    }
    return json_pack("{s:o,s:n}", "content", content, "refusal");
}

/* The whole non-streaming answer of a finished job. */
/* SGLang's embedding meta_info: id, finish_reason, prompt_tokens,
 * weight_version, total_retractions, e2e_latency (taken from the
 * generation form where they are the same). */
static json_t *embed_meta(api_job *j, api_slot *sl)
{
    json_t *full = sched_result_to_json(&sl->res);
    json_t *src = json_object_get(full, "meta_info");
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(j->rids[sl->prompt] ? j->rids[sl->prompt] : ""));
    json_t *fr = json_object_get(src, "finish_reason");
    json_object_set(m, "finish_reason", fr ? fr : json_null());
    json_object_set_new(m, "prompt_tokens", json_integer(j->prompt_tokens[sl->prompt]));
    json_object_set_new(m, "weight_version", json_string(j->api->weight_version ? j->api->weight_version : "default"));
    json_object_set_new(m, "total_retractions", json_integer(sl->res.fin.num_retractions));
    json_t *lat = json_object_get(src, "e2e_latency");
    if (lat) json_object_set(m, "e2e_latency", lat);
    json_decref(full);
    return m;
}

/* The final answer of an embedding job (new reference, NULL on OOM). */
static json_t *embed_answer(api_job *j)
{
    if (j->kind == JOB_ENCODE) {
        json_t *list = json_array();
        for (int i = 0; i < j->n_slots; i++) {
            api_slot *sl = &j->slots[i];
            json_array_append_new(list, json_pack("{s:o,s:o}", "embedding", api_embed_float_array(sl->emb, sl->n_emb),
                                                  "meta_info", embed_meta(j, sl)));
        }
        if (!j->list_out) {
            json_t *o = json_incref(json_array_get(list, 0));
            json_decref(list);
            return o;
        }
        return list;
    }
    json_t *data = json_array();
    int64_t pt = 0;
    for (int i = 0; i < j->n_slots; i++) {
        api_slot *sl = &j->slots[i];
        json_t *v;
        if (j->base64) {
            char *b = api_embed_base64(sl->emb, sl->n_emb);
            v = b ? json_string(b) : NULL;
            free(b);
        } else {
            v = api_embed_float_array(sl->emb, sl->n_emb);
        }
        json_array_append_new(data, json_pack("{s:o,s:i,s:s}", "embedding", v, "index", i, "object", "embedding"));
        pt += j->prompt_tokens[sl->prompt];
    }
    return json_pack("{s:o,s:s,s:s,s:{s:I,s:I,s:I,s:n}}", "data", data, "model", j->api->served, "object", "list",
                     "usage", "prompt_tokens", (json_int_t)pt, "total_tokens", (json_int_t)pt, "completion_tokens",
                     (json_int_t)0, "prompt_tokens_details");
}

static void job_answer(api_job *j)
{
    http_req *r = j->hr;
    if (j->err_status) {
        job_error(j, j->err_status, j->err_msg ? j->err_msg : "error");
        return;
    }
    if (j->kind == JOB_HEALTH) {
        http_respond(r, 200, "text/plain", "", 0, NULL);
        return;
    }
    if (j->kind == JOB_ENCODE || j->kind == JOB_EMBED) {
        api_respond_json(r, 200, embed_answer(j));
        return;
    }
    if (j->kind == JOB_NATIVE) {
        json_t *out;
        if (j->list_out) {
            out = json_array();
            for (int i = 0; i < j->n_slots; i++) {
                json_t *o = native_obj(j, &j->slots[i], true);
                json_object_del(o, "index");
                json_array_append_new(out, o);
            }
        } else {
            out = native_obj(j, &j->slots[0], true);
        }
        api_respond_json(r, 200, out);
        return;
    }
    json_t *choices = json_array();
    for (int i = 0; i < j->n_slots; i++) {
        api_slot *sl = &j->slots[i];
        char *t = slot_final_text(j, sl);
        json_t *c;
        const char *fr = oai_finish(&sl->res);
        if (j->kind == JOB_COMPL) {
            const char *pre = j->echo && j->prompt_text[sl->prompt] ? j->prompt_text[sl->prompt] : "";
            size_t pl = strlen(pre), tl = t ? strlen(t) : 0;
            char *full = malloc(pl + tl + 1);
            if (full) {
                memcpy(full, pre, pl);
                if (tl) memcpy(full + pl, t, tl);
                full[pl + tl] = 0;
            }
            c = json_pack("{s:i,s:s,s:o,s:o,s:o}", "index", i, "text", full ? full : "",
                          "logprobs", j->return_logprob ? compl_logprobs(j, sl, pl, 0) : json_null(),
                          "finish_reason", fr ? json_string(fr) : json_null(), "matched_stop",
                          oai_matched(&sl->res));
            free(full);
        } else {
            c = json_pack("{s:i,s:{s:s,s:s,s:n,s:n},s:o,s:o,s:o}", "index", i, "message", "role",
                          "assistant", "content", t ? t : "", "reasoning_content", "tool_calls",
                          "logprobs", j->return_logprob ? chat_logprobs(j, sl, 0) : json_null(),
                          "finish_reason", fr ? json_string(fr) : json_null(), "matched_stop",
                          oai_matched(&sl->res));
        }
        free(t);
        json_array_append_new(choices, c);
    }
    json_t *out = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", j->oai_id, "object",
                            j->kind == JOB_COMPL ? "text_completion" : "chat.completion", "created",
                            (json_int_t)j->created, "model", j->api->served, "choices", choices,
                            "usage", usage_obj(j));
    api_respond_json(r, 200, out);
}

static json_t *oai_chunk(api_job *j, json_t *choices)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->oai_id, "object",
                     j->kind == JOB_COMPL ? "text_completion" : "chat.completion.chunk", "created",
                     (json_int_t)j->created, "model", j->api->served, "choices", choices);
}

/* Streaming: send what this event added to slot `si`. */
static void job_stream_event(api_job *j, int si, const sched_event *e)
{
    api_slot *sl = &j->slots[si];
    bool fin = e->kind == SCHED_EV_FINISH;
    if (fin && e->finish == SCHED_FINISH_ABORT && e->http_status >= 400) {
        json_t *err = j->kind == JOB_NATIVE
                          ? json_pack("{s:{s:s,s:i}}", "error", "message", e->finish_str ? e->finish_str : "",
                                      "code", e->http_status)
                          : json_pack("{s:o}", "error", oai_error_obj(e->http_status, oai_error_type(e->http_status),
                                                                      e->finish_str ? e->finish_str : ""));
        job_sse(j, err);
        return;
    }
    if (j->kind == JOB_NATIVE) {
        if (!e->n_ids && !fin) return;
        json_t *o = native_obj(j, sl, fin);
        if (o && j->api->cfg.incremental_streaming) {
            /* deltas: the text and ids this chunk added */
            const char *full = json_string_value(json_object_get(o, "text"));
            size_t fl = full ? strlen(full) : 0;
            json_object_set_new(o, "text", json_string(fl > sl->sent ? full + sl->sent : ""));
            sl->sent = fl > sl->sent ? fl : sl->sent;
            json_t *ids = json_array();
            for (int64_t k = (int64_t)sl->ids_sent; k < sl->res.n; k++)
                json_array_append_new(ids, json_integer(sl->res.ids[k]));
            sl->ids_sent = (size_t)sl->res.n;
            json_object_set_new(o, "output_ids", ids);
        }
        if (o) job_sse(j, o);
        return;
    }
    /* OpenAI: text deltas */
    const char *delta = "";
    char *final = NULL;
    if (fin) {
        final = slot_final_text(j, sl);
        size_t fl = final ? strlen(final) : 0;
        delta = fl > sl->sent ? final + sl->sent : "";
        sl->sent = fl > sl->sent ? fl : sl->sent;
    } else {
        delta = sl->stext && sl->stext_len > sl->sent ? sl->stext + sl->sent : "";
        sl->sent = sl->stext_len > sl->sent ? sl->stext_len : sl->sent;
    }
    if (!fin && !*delta && sl->role_sent && !(j->return_logprob && e->n_ids)) {
        free(final);
        return;
    }
    json_t *c;
    const char *fr = fin ? oai_finish(&sl->res) : NULL;
    /* this event's tokens are the last e->n_ids of the result */
    int64_t from = sl->res.n - e->n_ids;
    char *echoed = NULL;
    if (j->kind == JOB_COMPL && j->echo && !sl->role_sent && j->prompt_text[sl->prompt]) {
        /* echo: the prompt leads the first chunk */
        const char *pt = j->prompt_text[sl->prompt];
        size_t pl = strlen(pt), dl = strlen(delta);
        echoed = malloc(pl + dl + 1);
        if (echoed) {
            memcpy(echoed, pt, pl);
            memcpy(echoed + pl, delta, dl + 1);
        }
    }
    if (j->kind == JOB_COMPL) {
        c = json_pack("{s:i,s:s,s:o,s:o,s:o}", "index", si, "text", echoed ? echoed : delta, "logprobs",
                      j->return_logprob ? compl_logprobs(j, sl, sl->sent - strlen(delta), from) : json_null(),
                      "finish_reason", fr ? json_string(fr) : json_null(), "matched_stop",
                      fin ? oai_matched(&sl->res) : json_null());
    } else {
        json_t *d = json_object();
        if (!sl->role_sent) json_object_set_new(d, "role", json_string("assistant"));
        json_object_set_new(d, "content", json_string(delta));
        c = json_pack("{s:i,s:o,s:o,s:o,s:o}", "index", si, "delta", d, "logprobs",
                      j->return_logprob ? chat_logprobs(j, sl, from) : json_null(), "finish_reason",
                      fr ? json_string(fr) : json_null(), "matched_stop",
                      fin ? oai_matched(&sl->res) : json_null());
    }
    sl->role_sent = true;
    free(final);
    free(echoed);
    json_t *arr = json_array();
    json_array_append_new(arr, c);
    job_sse(j, oai_chunk(j, arr));
}

static void job_stream_end(api_job *j)
{
    if ((j->kind == JOB_COMPL || j->kind == JOB_CHAT) && j->include_usage) {
        json_t *ch = oai_chunk(j, json_array());
        json_object_set_new(ch, "usage", usage_obj(j));
        job_sse(j, ch);
    }
    static const char done[] = "data: [DONE]\n\n";
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
    json_t *out = native_obj(j, sl, true);
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
    /* health checks are logged too (SGLang logs every generate_request);
     * --export-metrics-to-file needs the objects as well */
    bool logging = api_reqlog_enabled(a->cfg.reqlog);
    if (!logging && !(a->cfg.mexport && j->kind != JOB_HEALTH)) return;
    j->log_objs = json_array();
    json_t *headers = logging ? api_reqlog_headers(a->cfg.reqlog, j->hr) : NULL;
    int level = logging ? api_reqlog_level(a->cfg.reqlog) : 0;
    for (int i = 0; i < j->n_prompt; i++) {
        json_t *obj = ops_log_obj(reqs[i], j->prompt_text[i]);
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
static void ops_log_openai(api_server *a, http_req *r, const json_t *body)
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
    if (j->stream && !atomic_load(&j->gone)) {
        if (sl->ts && e->n_ids) {
            char *t = NULL;
            size_t tl = 0;
            if (!tok_stream_push(sl->ts, e->ids, (size_t)e->n_ids, &t, &tl)) slot_append(sl, t, tl);
            free(t);
        }
        if (sl->ts && e->kind == SCHED_EV_FINISH) {
            char *t = NULL;
            size_t tl = 0;
            if (!tok_stream_finish(sl->ts, &t, &tl)) slot_append(sl, t, tl);
            free(t);
        }
        job_stream_event(j, si, e);
    }
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
        job_free(j);
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
                if (j->sub_ids[i]) sched_abort_id(a->cfg.s, j->sub_ids[i]);
        }
    pthread_mutex_unlock(&a->mu);
}

static void *dispatcher_main(void *arg)
{
    api_server *a = arg;
    double last_reap = time_now_sec();
    while (!atomic_load(&a->stop)) {
        sched_event *e = sched_wait(a->cfg.s, 0.2);
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
    bool embed = j->kind == JOB_ENCODE || j->kind == JOB_EMBED;
    int dims = j->embed_dims > 0 && j->embed_dims < 4 ? j->embed_dims : 4;
    for (int i = 0; i < np; i++) {
        sched_req_spec *sp = &specs[i];
        int32_t out[2];
        for (int k = 0; k < 2; k++) out[k] = (int32_t)(sp->input_ids[k % sp->n_input] % vocab);
        if (a->cfg.tok && sp->params.n_stop) api_stop_hook((void *)a->cfg.tok, ids[i], &sp->params, out, 2);
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
            if (stream) {
                e.kind = SCHED_EV_TOKENS;
                e.ids = out;
                e.n_ids = 1;
                e.completion_tokens = 1;
                handle_event(a, &e);
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
            handle_event(a, &e);
        }
        sched_req_spec_free(sp);
    }
    free(ids);
}

/* Submit the job's prepared per-prompt request objects.  On a request
 * error before anything was submitted, answers 400 and frees the job. */
static void job_submit(api_server *a, api_job *j, json_t **reqs)
{
    sched_req_spec *specs = calloc((size_t)j->n_prompt, sizeof *specs);
    char err[512];
    if (!specs) {
        job_error(j, 500, "Internal error: out of memory.");
        job_free(j);
        return;
    }
    for (int i = 0; i < j->n_prompt; i++) {
        if (sched_req_from_json(reqs[i], &specs[i], err, sizeof err)) {
            for (int k = 0; k < i; k++) sched_req_spec_free(&specs[k]);
            free(specs);
            job_error(j, 400, err);
            job_free(j);
            return;
        }
        json_t *mnt = json_object_get(json_object_get(reqs[i], "sampling_params"), "max_new_tokens");
        if (api_limits_apply(&specs[i], json_is_integer(mnt), a->cfg.context_length, a->max_req_input_len,
                             a->cfg.allow_auto_truncate, err, sizeof err)) {
            for (int k = 0; k <= i; k++) sched_req_spec_free(&specs[k]);
            free(specs);
            job_error(j, 400, err);
            job_free(j);
            return;
        }
        int n = specs[i].params.n > 1 ? (int)specs[i].params.n : 1;
        if (n != j->n_per) {
            for (int k = 0; k <= i; k++) sched_req_spec_free(&specs[k]);
            free(specs);
            job_error(j, 400, "sampling_params.n must be the same for every prompt of a batch");
            job_free(j);
            return;
        }
        specs[i].embed_dims = j->embed_dims;
        j->skip_special = specs[i].params.skip_special_tokens;
        j->spaces_between = specs[i].params.spaces_between_special_tokens;
        j->no_stop_trim = specs[i].params.no_stop_trim;
        j->return_logprob = specs[i].return_logprob;
        j->top_logprobs = specs[i].top_logprobs_num;
        j->prompt_tokens[i] = specs[i].n_input;
    }
    for (int i = 0; i < j->n_slots; i++) {
        sched_result_init(&j->slots[i].res, j->return_logprob);
        if (j->stream && a->cfg.tok) {
            tok_decode_opts o = {.skip_special_tokens = j->skip_special,
                                 .spaces_between_special_tokens = j->spaces_between};
            j->slots[i].ts = tok_stream_create(a->cfg.tok, &o);
        }
    }
    ops_on_submit(a, j, reqs);
    if (j->stream) http_stream_begin(j->hr, "text/event-stream");
    if (!a->cfg.s) {
        dry_run(a, j, specs);
        free(specs);
        return;
    }
    http_req_on_close(j->hr, job_on_close, j);
    pthread_mutex_lock(&a->mu);
    a->n_jobs++;
    for (int i = 0; i < j->n_prompt; i++) {
        uint64_t id = sched_submit(a->cfg.s, &specs[i]);
        j->sub_ids[i] = id;
        reg_add(a, id, j, i * j->n_per, j->n_per);
        a->n_reqs++;
    }
    atomic_store(&j->submitted, true);
    if (atomic_load(&j->gone)) /* the client left meanwhile (see job_on_close) */
        for (int i = 0; i < j->n_prompt; i++) sched_abort_id(a->cfg.s, j->sub_ids[i]);
    pthread_mutex_unlock(&a->mu); /* from here on the dispatcher may free j */
    free(specs);
}

/* input ids of a text prompt (add_special_tokens as SGLang's tokenizer
 * manager: true for raw text, false after a chat template). */
static json_t *tokenize_json(api_server *a, const char *text, size_t len, bool add_special)
{
    tok_ids ids = {0};
    if (!api_tokq_pre_take(text, len, add_special, &ids) && tok_encode(a->cfg.tok, text, len, add_special, &ids)) {
        tok_ids_free(&ids);
        return NULL;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < ids.n; i++) json_array_append_new(arr, json_integer(ids.ids[i]));
    tok_ids_free(&ids);
    return arr;
}

static bool is_id_list(const json_t *v)
{
    if (!json_is_array(v)) return false;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (!json_is_integer(x)) return false;
    return true;
}

static int64_t json_n_of(const json_t *sp)
{
    json_t *n = sp ? json_object_get(sp, "n") : NULL;
    return json_is_integer(n) && json_integer_value(n) > 1 ? json_integer_value(n) : 1;
}

/* A copy of sampling params `sp` (object, null or absent) with the keys of
 * `pref` it lacks (SGLang: {**preferred_sampling_params, **sampling_params}).
 * Non-objects are returned as given so that validation reports them. */
static json_t *with_preferred(const api_server *a, json_t *sp)
{
    if (!a->cfg.preferred_sampling || (sp && !json_is_object(sp) && !json_is_null(sp)))
        return sp ? json_incref(sp) : NULL;
    json_t *o = sp && json_is_object(sp) ? json_copy(sp) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)a->cfg.preferred_sampling, k, v)
    if (!json_object_get(o, k)) json_object_set(o, k, v);
    return o;
}

/* ---- native /generate ------------------------------------------------------------------- */

static void route_generate(api_server *a, http_req *r, json_t *body)
{
    char err[512];
    json_t *text = json_object_get(body, "text"), *ids = json_object_get(body, "input_ids");
    if (json_is_null(text)) text = NULL;
    if (json_is_null(ids)) ids = NULL;
    if (text && ids) {
        native_error(r, 400, "Either text or input_ids should be provided, not both.");
        return;
    }
    if (!text && !ids) {
        native_error(r, 400, "Either text or input_ids should be provided.");
        return;
    }
    if (text && !a->cfg.tok) {
        native_error(r, 400, "text needs the tokenizer, which --skip-tokenizer-init disabled: give input_ids");
        return;
    }
    bool batch;
    size_t n_prompt;
    if (text) {
        if (json_is_string(text)) batch = false, n_prompt = 1;
        else if (json_is_array(text)) batch = true, n_prompt = json_array_size(text);
        else {
            native_error(r, 400, "text must be a string or a list of strings");
            return;
        }
    } else {
        if (!json_is_array(ids)) {
            native_error(r, 400, "input_ids must be a list of integers or a list of lists");
            return;
        }
        batch = json_array_size(ids) > 0 && json_is_array(json_array_get(ids, 0));
        n_prompt = batch ? json_array_size(ids) : 1;
    }
    if (n_prompt == 0) {
        native_error(r, 400, "The batch is empty.");
        return;
    }
    if (n_prompt > 100000) {
        native_error(r, 400, "The batch is too large.");
        return;
    }
    json_t *sp = json_object_get(body, "sampling_params"), *rid = json_object_get(body, "rid");
    if (json_is_array(sp) && (!batch || json_array_size(sp) != n_prompt)) {
        native_error(r, 400, "sampling_params must be a dict, or a list with one dict per prompt");
        return;
    }
    if (json_is_array(rid) && (!batch || json_array_size(rid) != n_prompt)) {
        native_error(r, 400, "The rid should be a list with one rid per prompt.");
        return;
    }
    json_t *sp0 = json_is_array(sp) ? json_array_get(sp, 0) : sp;
    int64_t n_per = json_n_of(sp0);
    if (n_per > 1024 || (int64_t)n_prompt * n_per > 100000) {
        native_error(r, 400, "Too many samples requested.");
        return;
    }
    bool stream = json_is_true(json_object_get(body, "stream"));
    api_job *j = job_new(a, r, JOB_NATIVE, (int)n_prompt, (int)n_per);
    json_t **reqs = calloc(n_prompt, sizeof(json_t *));
    if (!j || !reqs) {
        free(reqs);
        job_free(j);
        native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    j->stream = stream;
    j->list_out = batch || n_per > 1;
    j->text_in_logprobs = json_is_true(json_object_get(body, "return_text_in_logprobs"));
    for (size_t i = 0; i < n_prompt; i++) {
        json_t *q = json_copy(body);
        json_object_del(q, "text");
        if (text) {
            json_t *t = batch ? json_array_get(text, i) : text;
            if (!json_is_string(t)) {
                snprintf(err, sizeof err, "text must be a string or a list of strings");
                json_decref(q);
                goto fail;
            }
            json_t *arr = tokenize_json(a, json_string_value(t), json_string_length(t), true);
            if (!arr) {
                snprintf(err, sizeof err, "tokenization failed");
                json_decref(q);
                goto fail;
            }
            json_object_set_new(q, "input_ids", arr);
            j->prompt_text[i] = api_strdup(json_string_value(t)); /* request log (no echo on /generate) */
        } else if (batch) {
            json_object_set(q, "input_ids", json_array_get(ids, i));
        }
        json_t *spi = with_preferred(a, json_is_array(sp) ? json_array_get(sp, i) : sp);
        if (spi) json_object_set_new(q, "sampling_params", spi);
        json_t *ri = json_is_array(rid) ? json_array_get(rid, i) : rid;
        char gen[48];
        if (json_is_string(ri) && !(batch && !json_is_array(rid))) {
            j->rids[i] = api_strdup(json_string_value(ri));
        } else {
            new_rid(a, gen, sizeof gen);
            j->rids[i] = api_strdup(gen);
        }
        json_object_set_new(q, "rid", json_string(j->rids[i]));
        reqs[i] = q;
    }
    job_submit(a, j, reqs);
    for (size_t i = 0; i < n_prompt; i++) json_decref(reqs[i]);
    free(reqs);
    return;
fail:
    for (size_t i = 0; i < n_prompt; i++) json_decref(reqs[i]);
    free(reqs);
    job_free(j);
    native_error(r, 400, err);
}

/* ---- OpenAI ------------------------------------------------------------------------------- */

/* OpenAI request fields -> SGLang sampling_params (type checks are
 * sampling_params_from_json's). */
static const struct {
    const char *oai, *sgl;
} oai_map[] = {
    {"temperature", "temperature"},
    {"top_p", "top_p"},
    {"top_k", "top_k"},
    {"min_p", "min_p"},
    {"frequency_penalty", "frequency_penalty"},
    {"presence_penalty", "presence_penalty"},
    {"repetition_penalty", "repetition_penalty"},
    {"min_tokens", "min_new_tokens"},
    {"stop", "stop"},
    {"stop_token_ids", "stop_token_ids"},
    {"ignore_eos", "ignore_eos"},
    {"skip_special_tokens", "skip_special_tokens"},
    {"spaces_between_special_tokens", "spaces_between_special_tokens"},
    {"no_stop_trim", "no_stop_trim"},
    {"n", "n"},
    {"seed", "sampling_seed"},
    {"logit_bias", "logit_bias"},
};

static const char *const oai_unsupported[] = {"tools", "regex", "ebnf", "json_schema",
                                              "structural_tag", NULL};

static void route_openai(api_server *a, http_req *r, json_t *body, int kind)
{
    char err[512];
    for (int k = 0; oai_unsupported[k]; k++) {
        json_t *v = json_object_get(body, oai_unsupported[k]);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v))) {
            snprintf(err, sizeof err, "'%s' is not supported by sglc yet", oai_unsupported[k]);
            oai_error(r, 400, err);
            return;
        }
    }
    /* suffix: fill-in-the-middle through --completion-template (SGLang's
     * code_completion_parser); an empty suffix leaves the prompt alone */
    bool use_fim = false;
    json_t *sfx = json_object_get(body, "suffix");
    if (sfx && !json_is_null(sfx)) {
        json_t *p0 = json_object_get(body, "prompt");
        if (kind != JOB_COMPL || !json_is_string(sfx)) {
            oai_error(r, 400, kind != JOB_COMPL ? "'suffix' is only valid for /v1/completions"
                                                : "suffix must be a string");
            return;
        }
        if (json_string_length(sfx) > 0) {
            if (!a->cfg.completion) {
                oai_error(r, 400, "'suffix' needs a code-completion template: start the server with "
                                  "--completion-template");
                return;
            }
            if (!json_is_string(p0)) {
                oai_error(r, 400, "'suffix' needs a single string prompt");
                return;
            }
            use_fim = true;
        }
    }
    json_t *rf = json_object_get(body, "response_format");
    if (rf && !json_is_null(rf)) {
        json_t *t = json_object_get(rf, "type");
        if (!json_is_string(t) || strcmp(json_string_value(t), "text")) {
            oai_error(r, 400, "'response_format' other than text is not supported by sglc yet");
            return;
        }
    }
    if (!a->cfg.tok) {
        oai_error(r, 400, "the OpenAI routes need the tokenizer, which --skip-tokenizer-init disabled");
        return;
    }
    json_t *sp = json_object();
    for (size_t k = 0; k < sizeof oai_map / sizeof oai_map[0]; k++) {
        json_t *v = json_object_get(body, oai_map[k].oai);
        if (v && !json_is_null(v)) json_object_set(sp, oai_map[k].sgl, v);
    }
    /* SGLang: the model's recommended sampling parameters fill what the
     * request leaves out (--sampling-defaults model) */
    if (a->cfg.default_sampling) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a->cfg.default_sampling, k, v)
        if (!json_object_get(sp, k)) json_object_set(sp, k, v);
    }
    /* no --preferred-sampling-params here: SGLang's OpenAI layer sets every
     * sampling field explicitly (request, model default or OpenAI default),
     * so the preferred params never reach an OpenAI request */
    json_t *mt = json_object_get(body, "max_completion_tokens");
    if (!mt || json_is_null(mt)) mt = json_object_get(body, "max_tokens");
    if (mt && !json_is_null(mt)) json_object_set(sp, "max_new_tokens", mt);
    else if (kind == JOB_COMPL) json_object_set_new(sp, "max_new_tokens", json_integer(16));
    else json_object_set_new(sp, "max_new_tokens", json_null());

    bool stream = json_is_true(json_object_get(body, "stream"));
    bool logprob = false;
    int top = 0;
    json_t *lp = json_object_get(body, "logprobs");
    if (kind == JOB_COMPL) {
        if (json_is_integer(lp)) {
            logprob = true;
            top = (int)json_integer_value(lp);
            if (top < 0 || top > 20) {
                json_decref(sp);
                oai_error(r, 400, "logprobs must be between 0 and 20");
                return;
            }
        } else if (lp && !json_is_null(lp)) {
            json_decref(sp);
            oai_error(r, 400, "logprobs must be an integer");
            return;
        }
    } else {
        logprob = json_is_true(lp);
        json_t *tl = json_object_get(body, "top_logprobs");
        if (json_is_integer(tl)) {
            top = (int)json_integer_value(tl);
            if (top < 0 || top > 20) {
                json_decref(sp);
                oai_error(r, 400, "top_logprobs must be between 0 and 20");
                return;
            }
            if (top > 0 && !logprob) {
                json_decref(sp);
                oai_error(r, 400, "Top logprobs must be set when logprobs is true");
                return;
            }
        }
    }

    /* prompts -> json arrays of ids */
    json_t *prompts = json_array();
    json_t *texts = json_array(); /* echo */
    if (kind == JOB_COMPL) {
        json_t *p = json_object_get(body, "prompt");
        char *fim = NULL;
        size_t fim_len = 0;
        if (use_fim)
            fim = tmpl_completion_prompt(a->cfg.completion, json_string_value(p),
                                         json_string_length(p), json_string_value(sfx),
                                         json_string_length(sfx), &fim_len);
        if (use_fim && !fim) {
            json_decref(sp), json_decref(prompts), json_decref(texts);
            oai_error(r, 500, "out of memory");
            return;
        }
        if (fim) {
            json_array_append(texts, p);
            json_array_append_new(prompts, tokenize_json(a, fim, fim_len, true));
            free(fim);
        } else if (json_is_string(p)) {
            json_array_append(texts, p);
            json_array_append_new(prompts, tokenize_json(a, json_string_value(p), json_string_length(p), true));
        } else if (is_id_list(p) && json_array_size(p) > 0) {
            json_array_append(prompts, p);
            json_array_append_new(texts, json_null());
        } else if (json_is_array(p) && json_array_size(p) > 0) {
            size_t i;
            json_t *x;
            json_array_foreach(p, i, x)
            {
                if (json_is_string(x)) {
                    json_array_append(texts, x);
                    json_array_append_new(prompts, tokenize_json(a, json_string_value(x), json_string_length(x), true));
                } else if (is_id_list(x) && json_array_size(x) > 0) {
                    json_array_append(prompts, x);
                    json_array_append_new(texts, json_null());
                } else {
                    json_decref(sp), json_decref(prompts), json_decref(texts);
                    oai_error(r, 400, "prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids");
                    return;
                }
            }
        } else {
            json_decref(sp), json_decref(prompts), json_decref(texts);
            oai_error(r, 400, "prompt must be a non-empty string, a list of strings, a list of token ids or a list of lists of token ids");
            return;
        }
    } else {
        json_t *msgs = json_object_get(body, "messages");
        if (!json_is_array(msgs) || !json_array_size(msgs)) {
            json_decref(sp), json_decref(prompts), json_decref(texts);
            oai_error(r, 400, "messages must be a non-empty list");
            return;
        }
        if (!a->cfg.chat) {
            json_decref(sp), json_decref(prompts), json_decref(texts);
            oai_error(r, 400, "This model has no chat template: start the server with --chat-template");
            return;
        }
        tmpl_content_format fmt = tmpl_detect_content_format(a->cfg.chat->tmpl);
        json_t *pm = json_array();
        size_t i;
        json_t *m;
        json_array_foreach(msgs, i, m)
        {
            json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
            json_t *pmsg = json_is_string(role) ? tmpl_process_message(m, fmt, NULL) : NULL;
            if (!pmsg) {
                json_decref(pm), json_decref(sp), json_decref(prompts), json_decref(texts);
                oai_error(r, 400, "each message must be an object with a role");
                return;
            }
            json_array_append_new(pm, pmsg);
        }
        bool cont = json_is_true(json_object_get(body, "continue_final_message"));
        json_t *kw = json_object_get(body, "chat_template_kwargs");
        char *out = NULL, *terr = NULL;
        size_t olen = 0;
        int rc = tmpl_chat_render(a->cfg.chat, pm, NULL, NULL, cont ? 0 : 1,
                                  json_is_object(kw) ? kw : NULL, &out, &olen, &terr);
        json_decref(pm);
        if (rc) {
            snprintf(err, sizeof err, "chat template error: %s", terr ? terr : "?");
            free(terr);
            json_decref(sp), json_decref(prompts), json_decref(texts);
            oai_error(r, 400, err);
            return;
        }
        if (cont && json_array_size(msgs)) {
            /* continue_final_message: cut the template's end-of-turn after the
             * last message's content */
            json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
            json_t *c = json_object_get(last, "content");
            if (json_is_string(c) && json_string_length(c)) {
                const char *cs = json_string_value(c);
                char *p = NULL, *q = out;
                while ((q = strstr(q, cs))) p = q++;
                if (p) olen = (size_t)(p - out) + strlen(cs);
            }
        }
        json_array_append_new(prompts, tokenize_json(a, out, olen, false));
        json_array_append_new(texts, json_null());
        free(out);
    }
    size_t n_prompt = json_array_size(prompts);
    for (size_t i = 0; i < n_prompt; i++)
        if (!json_is_array(json_array_get(prompts, i))) {
            json_decref(sp), json_decref(prompts), json_decref(texts);
            oai_error(r, 500, "tokenization failed");
            return;
        }
    int64_t n_per = json_n_of(sp);
    if (n_per > 1024 || (int64_t)n_prompt * n_per > 100000) {
        json_decref(sp), json_decref(prompts), json_decref(texts);
        oai_error(r, 400, "Too many samples requested.");
        return;
    }
    api_job *j = job_new(a, r, kind, (int)n_prompt, (int)n_per);
    json_t **reqs = calloc(n_prompt, sizeof(json_t *));
    if (!j || !reqs) {
        free(reqs);
        job_free(j);
        json_decref(sp), json_decref(prompts), json_decref(texts);
        oai_error(r, 500, "Internal error: out of memory.");
        return;
    }
    j->stream = stream;
    j->echo = kind == JOB_COMPL && json_is_true(json_object_get(body, "echo"));
    json_t *so = json_object_get(body, "stream_options");
    j->include_usage = json_is_object(so) && json_is_true(json_object_get(so, "include_usage"));
    char idbuf[64];
    new_rid(a, idbuf, sizeof idbuf);
    char oid[80];
    snprintf(oid, sizeof oid, "%s%s", kind == JOB_COMPL ? "cmpl-" : "chatcmpl-", idbuf);
    j->oai_id = api_strdup(oid);
    json_t *rid = json_object_get(body, "rid");
    for (size_t i = 0; i < n_prompt; i++) {
        json_t *t = json_array_get(texts, i);
        if (json_is_string(t)) j->prompt_text[i] = api_strdup(json_string_value(t));
        if (json_is_string(rid) && n_prompt == 1) j->rids[i] = api_strdup(json_string_value(rid));
        else {
            new_rid(a, idbuf, sizeof idbuf);
            j->rids[i] = api_strdup(idbuf);
        }
        json_t *q = json_pack("{s:O,s:O,s:s,s:b,s:b}", "input_ids", json_array_get(prompts, i),
                              "sampling_params", sp, "rid", j->rids[i], "stream", stream,
                              "return_logprob", logprob);
        if (logprob && top > 0) json_object_set_new(q, "top_logprobs_num", json_integer(top));
        json_t *pr = json_object_get(body, "priority");
        if (json_is_integer(pr)) json_object_set(q, "priority", pr);
        reqs[i] = q;
    }
    json_decref(sp), json_decref(prompts), json_decref(texts);
    job_submit(a, j, reqs);
    for (size_t i = 0; i < n_prompt; i++) json_decref(reqs[i]);
    free(reqs);
}

/* ---- embeddings: /encode and /v1/embeddings ------------------------------------------------ */

/* One scheduler request per input (embedding mode: prefill only, the
 * FINISH event carries the vector).  Texts are tokenized with the special
 * tokens, as SGLang's tokenizer manager does for raw text. */
static void route_embed(api_server *a, http_req *r, json_t *body, bool oai)
{
    char err[512];
    void (*errf)(http_req *, int, const char *) = oai ? oai_error : native_error;
    if (!a->cfg.is_embedding) {
        errf(r, 400,
             "This model does not appear to be an embedding model by default. Please add `--is-embedding` when "
             "launching the server or try another model.");
        return;
    }
    api_embed_req q;
    if (api_embed_parse(body, oai, &q, err, sizeof err)) {
        errf(r, 400, err);
        return;
    }
    if (q.has_dims && api_embed_check_dims(&a->cfg.embed, q.dims, err, sizeof err)) {
        api_embed_req_free(&q);
        errf(r, 400, err);
        return;
    }
    bool need_tok = false;
    for (int i = 0; i < q.n; i++) need_tok |= q.items[i].text != NULL;
    if (need_tok && !a->cfg.tok) {
        api_embed_req_free(&q);
        errf(r, 400, "text needs the tokenizer, which --skip-tokenizer-init disabled: give input_ids");
        return;
    }
    api_job *j = job_new(a, r, oai ? JOB_EMBED : JOB_ENCODE, q.n, 1);
    json_t **reqs = calloc((size_t)q.n, sizeof *reqs);
    if (!j || !reqs) {
        free(reqs);
        job_free(j);
        api_embed_req_free(&q);
        errf(r, 500, "Internal error: out of memory.");
        return;
    }
    j->list_out = !q.single;
    j->base64 = q.base64;
    j->embed_dims = q.has_dims ? (int)q.dims : 0;
    int bad = 0;
    for (int i = 0; i < q.n && !bad; i++) {
        char rid[48];
        if (q.rids && q.rids[i]) {
            j->rids[i] = api_strdup(q.rids[i]);
        } else {
            new_rid(a, rid, sizeof rid);
            j->rids[i] = api_strdup(rid);
        }
        json_t *ids = q.items[i].text ? tokenize_json(a, q.items[i].text, q.items[i].text_len, true) : json_array();
        if (!ids) {
            bad = 1;
            break;
        }
        for (int64_t k = 0; !q.items[i].text && k < q.items[i].n_ids; k++)
            json_array_append_new(ids, json_integer(q.items[i].ids[k]));
        if (json_array_size(ids) == 0) {
            json_decref(ids);
            bad = 2;
            break;
        }
        reqs[i] = json_pack("{s:o,s:{s:i},s:s?}", "input_ids", ids, "sampling_params", "max_new_tokens", 0, "rid",
                            j->rids[i]);
        if (!reqs[i]) bad = 1;
    }
    api_embed_req_free(&q);
    if (bad) {
        for (int i = 0; i < j->n_prompt; i++) json_decref(reqs[i]);
        free(reqs);
        errf(r, bad == 2 ? 400 : 500,
             bad == 2 ? "The input has no tokens (empty text)." : "Internal error: cannot tokenize the input.");
        job_free(j);
        return;
    }
    int n = j->n_prompt;
    job_submit(a, j, reqs); /* j may be answered and freed from here on */
    for (int i = 0; i < n; i++) json_decref(reqs[i]);
    free(reqs);
}

/* ---- small routes ---------------------------------------------------------------------------- */

static void route_health_generate(api_server *a, http_req *r)
{
    api_job *j = job_new(a, r, JOB_HEALTH, 1, 1);
    if (!j) {
        native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    char rid[48];
    snprintf(rid, sizeof rid, "HEALTH_CHECK_");
    new_rid(a, rid + strlen(rid), sizeof rid - strlen(rid));
    j->rids[0] = api_strdup(rid);
    int32_t tok0 = a->cfg.tok && tok_bos_id(a->cfg.tok) >= 0 ? tok_bos_id(a->cfg.tok) : 0;
    json_t *q = json_pack("{s:[i],s:{s:i,s:f},s:s}", "input_ids", tok0, "sampling_params",
                          "max_new_tokens", 1, "temperature", 0.0, "rid", j->rids[0]);
    json_t *reqs[1] = {q};
    job_submit(a, j, reqs);
    json_decref(q);
}

static json_t *models_entry(api_server *a)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:s,s:n,s:I}", "id", a->served, "object", "model", "created",
                     (json_int_t)time(NULL), "owned_by", "sglang", "root", a->served, "parent",
                     "max_model_len", (json_int_t)a->cfg.context_length);
}

static void route_tokenize(api_server *a, http_req *r, json_t *body)
{
    if (!a->cfg.tok) {
        native_error(r, 400, "the tokenizer is disabled (--skip-tokenizer-init)");
        return;
    }
    json_t *p = json_object_get(body, "prompt");
    json_t *ast = json_object_get(body, "add_special_tokens");
    bool add = !json_is_false(ast);
    json_t *out;
    if (json_is_string(p)) {
        json_t *ids = tokenize_json(a, json_string_value(p), json_string_length(p), add);
        if (!ids) {
            native_error(r, 500, "tokenization failed");
            return;
        }
        out = json_pack("{s:o,s:I}", "tokens", ids, "count", (json_int_t)json_array_size(ids));
    } else if (json_is_array(p)) {
        json_t *all = json_array(), *counts = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(p, i, x)
        {
            if (!json_is_string(x)) {
                json_decref(all), json_decref(counts);
                native_error(r, 400, "prompt must be a string or a list of strings");
                return;
            }
            json_t *ids = tokenize_json(a, json_string_value(x), json_string_length(x), add);
            if (!ids) ids = json_array();
            json_array_append_new(counts, json_integer((json_int_t)json_array_size(ids)));
            json_array_append_new(all, ids);
        }
        out = json_pack("{s:o,s:o}", "tokens", all, "count", counts);
    } else {
        native_error(r, 400, "prompt must be a string or a list of strings");
        return;
    }
    json_object_set_new(out, "max_model_len", json_integer(a->cfg.context_length));
    api_respond_json(r, 200, out);
}

static void route_detokenize(api_server *a, http_req *r, json_t *body)
{
    if (!a->cfg.tok) {
        native_error(r, 400, "the tokenizer is disabled (--skip-tokenizer-init)");
        return;
    }
    json_t *t = json_object_get(body, "tokens");
    if (!is_id_list(t)) {
        native_error(r, 400, "tokens must be a list of integers");
        return;
    }
    size_t n = json_array_size(t);
    int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!ids) {
        native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_int_t v = json_integer_value(json_array_get(t, i));
        if (v < 0 || v >= a->cfg.vocab_size) {
            free(ids);
            native_error(r, 400, "token id out of the vocabulary");
            return;
        }
        ids[i] = (int32_t)v;
    }
    bool skip = json_is_true(json_object_get(body, "skip_special_tokens"));
    tok_decode_opts o = {.skip_special_tokens = skip, .spaces_between_special_tokens = true};
    char *txt = NULL;
    int rc = tok_decode(a->cfg.tok, ids, n, &o, &txt, NULL);
    free(ids);
    if (rc) {
        native_error(r, 400, "token id out of the vocabulary");
        return;
    }
    api_respond_json(r, 200, json_pack("{s:s}", "text", txt));
    free(txt);
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
        if (oai) oai_error(r, 400, msg);
        else native_error(r, 400, msg);
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
    if (oai) oai_error(r, st, err);
    else native_error(r, st, err);
    return true;
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
    int denied = auth_check(a, r, method, path);
    if (denied) {
        api_respond_json(r, denied, json_pack("{s:s}", "error", denied == 403 ? "Forbidden" : "Unauthorized"));
        return;
    }
    bool draining = atomic_load(&a->draining), starting = atomic_load(&a->starting);
    if (api_admin_handle(a->admin, r, method, path, body, body_len, starting)) return;
    if (!strcmp(path, "/health") || !strcmp(path, "/v1/health")) {
        if (draining) native_error(r, 503, "The server is shutting down.");
        else if (starting) native_error(r, 503, "The server is starting.");
        else http_respond(r, 200, "text/plain", "", 0, NULL);
        return;
    }
    if (!strcmp(path, "/health_generate")) {
        if (draining) native_error(r, 503, "The server is shutting down.");
        else if (starting) native_error(r, 503, "The server is starting.");
        else route_health_generate(a, r);
        return;
    }
    if (!strcmp(path, "/get_server_info") || !strcmp(path, "/server_info")) {
        json_t *o = json_deep_copy(a->cfg.server_info);
        if (!o) o = json_object();
        json_object_set_new(o, "version", json_string(SGLC_VERSION));
        if (a->cfg.s) {
            sched_stats st;
            sched_get_stats_snapshot(a->cfg.s, &st);
            json_object_set_new(o, "max_total_num_tokens", json_integer(st.max_total_num_tokens));
        }
        api_respond_json(r, 200, o);
        return;
    }
    if (!strcmp(path, "/get_load")) {
        pthread_mutex_lock(&a->mu);
        int64_t n = a->n_reqs;
        pthread_mutex_unlock(&a->mu);
        sched_stats st;
        memset(&st, 0, sizeof st);
        if (a->cfg.s) sched_get_stats_snapshot(a->cfg.s, &st);
        int64_t used = st.max_total_num_tokens - st.free_tokens - st.evictable_tokens;
        api_respond_json(r, 200, json_pack("[{s:i,s:I,s:i,s:i,s:I}]", "dp_rank", 0, "num_reqs", (json_int_t)n,
                                       "num_running_reqs", st.n_running, "num_waiting_reqs", st.n_waiting,
                                       "num_tokens", (json_int_t)(used > 0 ? used : 0)));
        return;
    }
    if (!strcmp(path, "/v1/models") && get) {
        json_t *o = json_pack("{s:s,s:[o]}", "object", "list", "data", models_entry(a));
        api_respond_json(r, 200, o);
        return;
    }
    if (!strncmp(path, "/v1/models/", 11) && get) {
        const char *id = path + 11;
        if (strcmp(id, a->served)) {
            char msg[600];
            snprintf(msg, sizeof msg, "The model '%.500s' does not exist", id);
            api_respond_json(r, 404, json_pack("{s:{s:s,s:s,s:s,s:s}}", "error", "message", msg, "type",
                                           "invalid_request_error", "param", "model", "code",
                                           "model_not_found"));
            return;
        }
        api_respond_json(r, 200, models_entry(a));
        return;
    }
    bool is_gen = !strcmp(path, "/generate"), is_compl = !strcmp(path, "/v1/completions"),
         is_chat = !strcmp(path, "/v1/chat/completions");
    if ((is_gen || is_compl || is_chat) && !post) {
        native_error(r, 405, "Method Not Allowed");
        return;
    }
    if (is_gen || is_compl || is_chat) {
        bool oai = !is_gen;
        if (draining || starting) {
            const char *m = draining ? "The server is shutting down." : "The server is starting.";
            if (oai) oai_error(r, 503, m);
            else native_error(r, 503, m);
            return;
        }
        if (a->cfg.is_embedding) {
            /* SGLang has no explicit check here; sglc answers clearly */
            const char *m = "This model does not appear to be a generation model: the server was launched with "
                            "--is-embedding. Use /encode or /v1/embeddings.";
            if (oai) oai_error(r, 400, m);
            else native_error(r, 400, m);
            return;
        }
        json_t *j = parse_body(r, body, body_len, oai, false);
        if (!j) return;
        if (encode_ahead(a, r, path, j, oai)) {
        } else if (is_gen) route_generate(a, r, j);
        else {
            ops_log_openai(a, r, j);
            route_openai(a, r, j, is_compl ? JOB_COMPL : JOB_CHAT);
        }
        api_tokq_pre_clear();
        json_decref(j);
        return;
    }
    bool is_enc = !strcmp(path, "/encode"), is_emb = !strcmp(path, "/v1/embeddings");
    if ((is_enc || is_emb) && !post) {
        native_error(r, 405, "Method Not Allowed");
        return;
    }
    if (is_enc || is_emb) {
        if (draining || starting) {
            const char *m = draining ? "The server is shutting down." : "The server is starting.";
            if (is_emb) oai_error(r, 503, m);
            else native_error(r, 503, m);
            return;
        }
        json_t *j = parse_body(r, body, body_len, is_emb, false);
        if (!j) return;
        if (!encode_ahead(a, r, path, j, is_emb)) {
            if (is_emb) ops_log_openai(a, r, j);
            route_embed(a, r, j, is_emb);
        }
        api_tokq_pre_clear();
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/tokenize") || !strcmp(path, "/v1/tokenize") || !strcmp(path, "/detokenize") ||
        !strcmp(path, "/v1/detokenize")) {
        json_t *j = parse_body(r, body, body_len, false, false);
        if (!j) return;
        if (strstr(path, "detokenize")) route_detokenize(a, r, j);
        else route_tokenize(a, r, j);
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/abort_request")) {
        json_t *j = parse_body(r, body, body_len, false, true);
        if (!j) return;
        json_t *rid = json_object_get(j, "rid");
        if (!a->cfg.s) {
        } else if (json_is_true(json_object_get(j, "abort_all"))) {
            sched_abort(a->cfg.s, NULL);
        } else if (json_is_string(rid)) {
            sched_abort(a->cfg.s, json_string_value(rid));
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
        if (api_reqlog_configure(a->cfg.reqlog, j, err, sizeof err)) native_error(r, 400, err);
        else http_respond(r, 200, "text/plain", "", 0, NULL);
        json_decref(j);
        return;
    }
    if (!strcmp(path, "/metrics") && get && a->cfg.metrics) {
        sched_stats st;
        memset(&st, 0, sizeof st);
        if (a->cfg.s) sched_get_stats_snapshot(a->cfg.s, &st);
        char *txt = api_metrics_render(a->cfg.metrics, &st);
        if (!txt) native_error(r, 500, "Internal error: out of memory.");
        else http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", txt, strlen(txt), NULL);
        free(txt);
        return;
    }
    api_respond_json(r, 404, json_pack("{s:s}", "detail", "Not Found"));
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

/* ---- stop strings ------------------------------------------------------------------------------ */

int api_stop_hook(void *ctx, uint64_t id, const sampling_params *p, const int32_t *out,
                  int64_t n_out)
{
    const tok_tokenizer *tok = ctx;
    if (!tok || p->n_stop <= 0 || n_out <= 0) return -1;
    size_t maxlen = 0;
    for (int i = 0; i < p->n_stop; i++)
        if (strlen(p->stop[i]) > maxlen) maxlen = strlen(p->stop[i]);
    /* the tail of the output that can hold a stop string completed by the
     * newest token: every token decodes to at least one character or byte
     * sequence, so maxlen + 2 tokens cover it */
    int64_t k = (int64_t)maxlen + 2;
    if (k > n_out) k = n_out;
    tok_decode_opts o = {.skip_special_tokens = p->skip_special_tokens,
                         .spaces_between_special_tokens = p->spaces_between_special_tokens};
    char *txt = NULL;
    if (tok_decode(tok, out + n_out - k, (size_t)k, &o, &txt, NULL)) return -1;
    int hit = -1;
    for (int i = 0; i < p->n_stop && hit < 0; i++)
        if (p->stop[i][0] && strstr(txt, p->stop[i])) hit = i;
    free(txt);
    return hit;
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
    a->max_req_input_len = cfg->s ? sched_max_req_input_len(cfg->s) : cfg->context_length - 6;
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
    a->admin = api_admin_create(&a->cfg);
    if (!a->admin) {
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
    free(a);
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
