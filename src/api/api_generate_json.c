/* api_generate_json — see api_generate_json.h. */
#include "api/api_generate_json.h"

#include <stdio.h>

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

int api_gen_id_list(const json_t *v, const char *name, int32_t **out, int64_t *n_out, char *err, size_t errlen)
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

int api_gen_req_from_json(const json_t *obj, sched_req_spec *sp, char *err, size_t errlen)
{
    return api_gen_req_from_json_ids(obj, NULL, 0, sp, err, errlen);
}

int api_gen_req_from_json_ids(const json_t *obj, int32_t *ids, int64_t n_ids, sched_req_spec *sp, char *err,
                              size_t errlen)
{
    sched_req_spec_init(sp);
    bool have_ids = ids != NULL, have_text = false;
    sp->input_ids = ids;
    sp->n_input = ids ? n_ids : 0;
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "a request must be a JSON object");
        goto fail;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!strcmp(key, "input_ids")) {
            if (json_is_null(v) || ids) continue;
            if (api_gen_id_list(v, "input_ids", &sp->input_ids, &sp->n_input, err, errlen)) goto fail;
            have_ids = true;
        } else if (!strcmp(key, "text")) {
            if (json_is_null(v)) continue;
            have_text = true;
        } else if (!strcmp(key, "data_parallel_rank") || !strcmp(key, "bootstrap_room") ||
                   !strcmp(key, "bootstrap_host") || !strcmp(key, "bootstrap_port")) {
            continue; /* the replica of --dp-size: the server's front reads and checks them (api_dp.c) */
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
        } else if (!strcmp(key, "lora_path")) {
            /* the adapter by name (--lora-paths / /load_lora_adapter), SGLang's field */
            if (json_is_null(v)) continue;
            if (!json_is_string(v)) {
                snprintf(err, errlen, "lora_path must be a string (or a list with one per prompt)");
                goto fail;
            }
            free(sp->lora_name);
            if (!(sp->lora_name = dup_str(json_string_value(v)))) goto oom;
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
            if (api_gen_id_list(v, "token_ids_logprob", &sp->token_ids_logprob, &n, err, errlen)) goto fail;
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

json_t *api_gen_finish_reason_json(const sched_event *e)
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

json_t *api_gen_result_json(const sched_result *r)
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
    json_object_set_new(meta, "finish_reason", api_gen_finish_reason_json(&r->fin));
    json_object_set_new(meta, "prompt_tokens", json_integer(r->fin.prompt_tokens));
    json_object_set_new(meta, "completion_tokens", json_integer(r->n));
    json_object_set_new(meta, "cached_tokens", json_integer(r->fin.cached_tokens));
    json_object_set_new(meta, "num_retractions", json_integer(r->fin.num_retractions));
    json_object_set_new(meta, "e2e_latency", json_real(r->fin.e2e_latency));
    if (r->fin.spec_on) { /* SGLang's _calculate_spec_decoding_metrics */
        double vct = (double)r->fin.spec_verify_ct;
        json_object_set_new(meta, "spec_verify_ct", json_integer(r->fin.spec_verify_ct));
        json_object_set_new(meta, "spec_accept_length", json_real(vct > 0 ? (double)r->n / vct : 0.0));
        json_object_set_new(meta, "spec_accept_rate",
                            json_real(r->fin.spec_drafted > 0 ? (double)r->fin.spec_accepted / (double)r->fin.spec_drafted
                                                              : 0.0));
        json_object_set_new(meta, "spec_accept_token_num", json_integer(r->fin.spec_accepted));
        json_object_set_new(meta, "spec_draft_token_num", json_integer(r->fin.spec_drafted));
    }
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
