/* sched_json — see sched_json.h. */
#include "sched/sched_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int int_list(const json_t *v, const char *name, int32_t **out, int64_t *n_out, char *err, size_t errlen)
{
    if (!json_is_array(v)) {
        snprintf(err, errlen, "%s must be a list of integers", name);
        return -1;
    }
    size_t n = json_array_size(v);
    int32_t *a = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v, i);
        if (json_is_array(x)) {
            snprintf(err, errlen, "%s: batched input (a list of lists) is not supported here; one request per line",
                     name);
            free(a);
            return -1;
        }
        if (!json_is_integer(x) || json_integer_value(x) < INT32_MIN || json_integer_value(x) > INT32_MAX) {
            snprintf(err, errlen, "%s[%zu] must be an integer", name, i);
            free(a);
            return -1;
        }
        a[i] = (int32_t)json_integer_value(x);
    }
    *out = a;
    *n_out = (int64_t)n;
    return 0;
}

int sched_req_from_json(const json_t *obj, sched_req_spec *sp, char *err, size_t errlen)
{
    sched_req_spec_init(sp);
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "a request must be a JSON object");
        return -1;
    }
    const char *key;
    json_t *v;
    bool have_ids = false, have_text = false;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!strcmp(key, "input_ids")) {
            if (json_is_null(v)) continue;
            if (int_list(v, "input_ids", &sp->input_ids, &sp->n_input, err, errlen)) goto fail;
            have_ids = true;
        } else if (!strcmp(key, "text")) {
            if (json_is_null(v)) continue;
            have_text = true;
        } else if (!strcmp(key, "sampling_params")) {
            if (sampling_params_from_json(&sp->params, v, err, errlen)) goto fail;
        } else if (!strcmp(key, "rid")) {
            if (json_is_null(v)) continue;
            if (!json_is_string(v)) {
                snprintf(err, errlen, "rid must be a string");
                goto fail;
            }
            if (!(sp->rid = dup_str(json_string_value(v)))) goto oom;
        } else if (!strcmp(key, "priority")) {
            if (json_is_null(v)) continue;
            if (!json_is_integer(v) || json_integer_value(v) < -(1LL << 40) || json_integer_value(v) > (1LL << 40)) {
                snprintf(err, errlen, "priority must be an integer");
                goto fail;
            }
            sp->has_priority = true;
            sp->priority = json_integer_value(v);
        } else if (!strcmp(key, "cache_salt")) {
            if (json_is_null(v)) continue;
            if (!json_is_string(v)) {
                snprintf(err, errlen, "cache_salt must be a string");
                goto fail;
            }
            if (!(sp->cache_salt = dup_str(json_string_value(v)))) goto oom;
        } else if (!strcmp(key, "return_logprob")) {
            if (json_is_null(v)) continue;
            if (!json_is_boolean(v)) {
                snprintf(err, errlen, "return_logprob must be a boolean");
                goto fail;
            }
            sp->return_logprob = json_is_true(v);
        } else if (!strcmp(key, "stream")) {
            if (json_is_null(v)) continue;
            if (!json_is_boolean(v)) {
                snprintf(err, errlen, "stream must be a boolean");
                goto fail;
            }
            sp->stream = json_is_true(v);
        } else if (!strcmp(key, "top_logprobs_num")) {
            if (json_is_null(v)) continue;
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 20)) {
                snprintf(err, errlen, "top_logprobs_num must be a non-negative integer");
                goto fail;
            }
            sp->top_logprobs_num = (int)json_integer_value(v);
        } else if (!strcmp(key, "logprob_start_len")) {
            if (json_is_null(v)) continue;
            if (!json_is_integer(v) || json_integer_value(v) < -1) {
                snprintf(err, errlen, "logprob_start_len must be an integer >= -1");
                goto fail;
            }
            sp->logprob_start_len = json_integer_value(v);
        } else if (!strcmp(key, "token_ids_logprob")) {
            if (json_is_null(v)) continue;
            int64_t n = 0;
            if (int_list(v, "token_ids_logprob", &sp->token_ids_logprob, &n, err, errlen)) goto fail;
            if (n > (1 << 20)) {
                snprintf(err, errlen, "token_ids_logprob is too long");
                goto fail;
            }
            sp->n_token_ids_logprob = (int)n;
        } else if (!strcmp(key, "return_text_in_logprobs")) {
            if (!json_is_boolean(v) && !json_is_null(v)) {
                snprintf(err, errlen, "return_text_in_logprobs must be a boolean");
                goto fail;
            }
        } else if (!strcmp(key, "custom_logit_processor")) {
            /* SGLang's check (tokenizer_manager._validate_one_request); the
             * flag itself is not implemented, so a processor is always refused */
            if (json_is_null(v) || (json_is_string(v) && !json_string_length(v))) continue;
            snprintf(err, errlen, "The server is not configured to enable custom logit processor. "
                                  "Please set `--enable-custom-logit-processor` to enable this feature.");
            goto fail;
        } else if (!strcmp(key, "return_hidden_states")) {
            if (json_is_null(v) || json_is_false(v)) continue;
            snprintf(err, errlen, "The server is not configured to return the hidden states. "
                                  "Please set `--enable-return-hidden-states` to enable this feature.");
            goto fail;
        } else {
            snprintf(err, errlen, "unexpected field '%s' in the request", key);
            goto fail;
        }
    }
    if (have_text && have_ids) {
        snprintf(err, errlen, "Either text or input_ids should be provided, not both.");
        goto fail;
    }
    if (have_text) {
        snprintf(err, errlen, "'text' must be a string, and needs a tokenizer (none loaded: the model folder has no tokenizer.json, or --skip-tokenizer-init): give input_ids");
        goto fail;
    }
    if (!have_ids) {
        snprintf(err, errlen, "Either text or input_ids should be provided.");
        goto fail;
    }
    if (sp->n_input == 0) {
        snprintf(err, errlen, "input_ids must not be empty");
        goto fail;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    sched_req_spec_free(sp);
    sched_req_spec_init(sp);
    return -1;
}

void sched_result_init(sched_result *r, bool return_logprob)
{
    memset(r, 0, sizeof *r);
    r->return_logprob = return_logprob;
}

void sched_result_free(sched_result *r)
{
    free(r->ids);
    free(r->lp);
    free(r->top_ids);
    free(r->top_lp);
    free(r->tids);
    free(r->tid_lp);
    free(r->in_ids);
    free(r->in_lp);
    free(r->in_top_ids);
    free(r->in_top_lp);
    free(r->in_tid_lp);
    free(r->fin.rid);
    free(r->fin.finish_str);
    memset(r, 0, sizeof *r);
}

static int grow_to(void **p, size_t es, int64_t n)
{
    void *g = realloc(*p, es * (size_t)(n ? n : 1));
    if (!g) return -1;
    *p = g;
    return 0;
}

int sched_result_add(sched_result *r, const sched_event *e)
{
    int64_t need = r->n + e->n_ids;
    if (need > r->cap) {
        int64_t nc = r->cap ? r->cap : 16;
        while (nc < need) nc *= 2;
        if (grow_to((void **)&r->ids, sizeof(int32_t), nc)) return -1;
        if (r->return_logprob) {
            if (grow_to((void **)&r->lp, sizeof(float), nc)) return -1;
            if (e->top_n && (grow_to((void **)&r->top_ids, sizeof(int32_t), nc * e->top_n) ||
                             grow_to((void **)&r->top_lp, sizeof(float), nc * e->top_n)))
                return -1;
            if (e->n_tid && grow_to((void **)&r->tid_lp, sizeof(float), nc * e->n_tid)) return -1;
        }
        r->cap = nc;
    }
    if (e->n_ids && e->ids) memcpy(r->ids + r->n, e->ids, sizeof(int32_t) * (size_t)e->n_ids);
    if (r->return_logprob && e->n_ids) {
        if (e->logprobs) memcpy(r->lp + r->n, e->logprobs, sizeof(float) * (size_t)e->n_ids);
        if (e->top_n && e->top_ids) {
            r->top_n = e->top_n;
            memcpy(r->top_ids + r->n * e->top_n, e->top_ids, sizeof(int32_t) * (size_t)(e->n_ids * e->top_n));
            memcpy(r->top_lp + r->n * e->top_n, e->top_logprobs, sizeof(float) * (size_t)(e->n_ids * e->top_n));
        }
        if (e->n_tid && e->tid_logprobs) {
            if (!r->tids) {
                r->tids = malloc(sizeof(int32_t) * (size_t)e->n_tid);
                if (!r->tids) return -1;
                memcpy(r->tids, e->tids, sizeof(int32_t) * (size_t)e->n_tid);
                r->n_tid = e->n_tid;
            }
            memcpy(r->tid_lp + r->n * e->n_tid, e->tid_logprobs, sizeof(float) * (size_t)(e->n_ids * e->n_tid));
        }
    }
    r->n = need;
    if (e->n_in > 0 && r->n_in == 0 && e->in_ids && e->in_logprobs) {
        size_t m = (size_t)e->n_in;
        r->in_ids = malloc(sizeof(int32_t) * m);
        r->in_lp = malloc(sizeof(float) * m);
        if (!r->in_ids || !r->in_lp) return -1;
        memcpy(r->in_ids, e->in_ids, sizeof(int32_t) * m);
        memcpy(r->in_lp, e->in_logprobs, sizeof(float) * m);
        if (e->top_n && e->in_top_ids) {
            r->top_n = e->top_n;
            r->in_top_ids = malloc(sizeof(int32_t) * m * (size_t)e->top_n);
            r->in_top_lp = malloc(sizeof(float) * m * (size_t)e->top_n);
            if (!r->in_top_ids || !r->in_top_lp) return -1;
            memcpy(r->in_top_ids, e->in_top_ids, sizeof(int32_t) * m * (size_t)e->top_n);
            memcpy(r->in_top_lp, e->in_top_logprobs, sizeof(float) * m * (size_t)e->top_n);
        }
        if (e->n_tid && e->in_tid_logprobs) {
            if (!r->tids) {
                r->tids = malloc(sizeof(int32_t) * (size_t)e->n_tid);
                if (!r->tids) return -1;
                memcpy(r->tids, e->tids, sizeof(int32_t) * (size_t)e->n_tid);
                r->n_tid = e->n_tid;
            }
            r->in_tid_lp = malloc(sizeof(float) * m * (size_t)e->n_tid);
            if (!r->in_tid_lp) return -1;
            memcpy(r->in_tid_lp, e->in_tid_logprobs, sizeof(float) * m * (size_t)e->n_tid);
        }
        r->n_in = e->n_in;
    }
    if (e->kind == SCHED_EV_FINISH) {
        free(r->fin.rid);
        free(r->fin.finish_str);
        r->fin = *e;
        r->fin.rid = e->rid ? dup_str(e->rid) : NULL;
        r->fin.finish_str = e->finish_str ? dup_str(e->finish_str) : NULL;
        r->fin.ids = NULL, r->fin.logprobs = NULL, r->fin.top_ids = NULL, r->fin.top_logprobs = NULL;
        r->fin.tids = NULL, r->fin.tid_logprobs = NULL, r->fin.next = NULL;
        r->done = true;
    }
    return 0;
}

json_t *sched_finish_reason_json(const sched_event *e)
{
    json_t *o = json_object();
    switch (e->finish) {
    case SCHED_FINISH_LENGTH:
        json_object_set_new(o, "type", json_string("length"));
        json_object_set_new(o, "length", json_integer(e->finish_length));
        break;
    case SCHED_FINISH_STOP_TOKEN:
        json_object_set_new(o, "type", json_string("stop"));
        json_object_set_new(o, "matched", json_integer(e->finish_token));
        break;
    case SCHED_FINISH_STOP_STR:
        json_object_set_new(o, "type", json_string("stop"));
        json_object_set_new(o, "matched", json_string(e->finish_str ? e->finish_str : ""));
        break;
    case SCHED_FINISH_ABORT:
        json_object_set_new(o, "type", json_string("abort"));
        json_object_set_new(o, "message", json_string(e->finish_str ? e->finish_str : ""));
        json_object_set_new(o, "status_code", json_integer(e->http_status));
        break;
    case SCHED_FINISH_NONE:
        json_decref(o);
        return json_null();
    }
    return o;
}

/* [logprob, id, null]; -inf/NaN become null (JSON has no infinities). */
static json_t *lp_entry(float lp, int32_t id)
{
    json_t *a = json_array();
    json_array_append_new(a, isfinite(lp) && lp > -3.0e38f ? json_real(lp) : json_null());
    json_array_append_new(a, json_integer(id));
    json_array_append_new(a, json_null());
    return a;
}

json_t *sched_result_to_json(const sched_result *r)
{
    json_t *root = json_object(), *ids = json_array(), *meta = json_object();
    if (!root || !ids || !meta) {
        json_decref(root), json_decref(ids), json_decref(meta);
        return NULL;
    }
    for (int64_t i = 0; i < r->n; i++) json_array_append_new(ids, json_integer(r->ids[i]));
    json_object_set_new(root, "text", json_string(""));
    json_object_set_new(root, "output_ids", ids);
    json_object_set_new(meta, "id", json_string(r->fin.rid ? r->fin.rid : ""));
    json_object_set_new(meta, "finish_reason", sched_finish_reason_json(&r->fin));
    json_object_set_new(meta, "prompt_tokens", json_integer(r->fin.prompt_tokens));
    json_object_set_new(meta, "completion_tokens", json_integer(r->n));
    json_object_set_new(meta, "cached_tokens", json_integer(r->fin.cached_tokens));
    json_object_set_new(meta, "num_retractions", json_integer(r->fin.num_retractions));
    json_object_set_new(meta, "e2e_latency", json_real(r->fin.e2e_latency));
    if (r->return_logprob) {
        json_t *otl = json_array(), *otop = json_array(), *otid = json_array();
        for (int64_t i = 0; i < r->n; i++) {
            json_array_append_new(otl, lp_entry(r->lp ? r->lp[i] : NAN, r->ids[i]));
            json_t *t = json_array();
            for (int k = 0; k < r->top_n; k++)
                if (r->top_ids[i * r->top_n + k] >= 0)
                    json_array_append_new(t, lp_entry(r->top_lp[i * r->top_n + k], r->top_ids[i * r->top_n + k]));
            json_array_append_new(otop, r->top_n ? t : json_null());
            if (!r->top_n) json_decref(t);
            if (r->n_tid) {
                json_t *u = json_array();
                for (int k = 0; k < r->n_tid; k++)
                    json_array_append_new(u, lp_entry(r->tid_lp[i * r->n_tid + k], r->tids[k]));
                json_array_append_new(otid, u);
            }
        }
        /* input entries; SGLang pads the first with None.  Without input
         * data (aborted before its prefill): the default single entry */
        json_t *itl = json_array(), *itop = json_array(), *itid = json_array();
        if (r->n_in > 0) {
            for (int i = 0; i < r->n_in; i++) {
                json_array_append_new(itl, lp_entry(r->in_lp[i], r->in_ids[i]));
                if (i == 0 || !r->in_top_ids) {
                    json_array_append_new(itop, json_null());
                } else {
                    json_t *t = json_array();
                    for (int k = 0; k < r->top_n; k++)
                        if (r->in_top_ids[i * r->top_n + k] >= 0)
                            json_array_append_new(t, lp_entry(r->in_top_lp[i * r->top_n + k], r->in_top_ids[i * r->top_n + k]));
                    json_array_append_new(itop, t);
                }
                if (i == 0 || !r->in_tid_lp) {
                    json_array_append_new(itid, json_null());
                } else {
                    json_t *u = json_array();
                    for (int k = 0; k < r->n_tid; k++)
                        json_array_append_new(u, lp_entry(r->in_tid_lp[i * r->n_tid + k], r->tids[k]));
                    json_array_append_new(itid, u);
                }
            }
        } else if (r->fin.prompt_tokens > 0) {
            json_array_append_new(itl, lp_entry(NAN, r->fin.last_input_id));
            json_array_append_new(itop, json_null());
            json_array_append_new(itid, json_null());
        }
        json_object_set_new(meta, "input_token_logprobs", itl);
        json_object_set_new(meta, "output_token_logprobs", otl);
        if (r->top_n) {
            json_object_set_new(meta, "input_top_logprobs", itop);
            json_object_set_new(meta, "output_top_logprobs", otop);
        } else {
            json_decref(otop);
            json_decref(itop);
        }
        if (r->n_tid) {
            json_object_set_new(meta, "input_token_ids_logprobs", itid);
            json_object_set_new(meta, "output_token_ids_logprobs", otid);
        } else {
            json_decref(otid);
            json_decref(itid);
        }
    }
    json_object_set_new(root, "meta_info", meta);
    return root;
}
