/* api_native — SGLang's native routes: /generate (text or input_ids,
 * batches, n > 1, streaming), /health_generate, /tokenize, /detokenize.
 *
 * DESIGN: a /generate body becomes one GenerateReqInput object per prompt
 * (text tokenized here, --preferred-sampling-params merged in, a rid
 * given), submitted as one job (api_job_submit).  The answer is the
 * /generate object of each slot, built from its sched_result. */
#include "api/api_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lora/lora.h"

json_t *api_native_obj(api_job *j, api_slot *sl, bool final)
{
    json_t *o = api_gen_result_json(&sl->res);
    if (!o) return NULL;
    if (final) {
        char *t = api_slot_final_text(j, sl);
        json_object_set_new(o, "text", json_string(t ? t : ""));
        free(t);
    } else {
        const api_output *out = api_slot_out(j, sl);
        json_object_set_new(o, "text", json_string(out->text ? out->text : ""));
        json_t *m = json_object_get(o, "meta_info");
        if (m) {
            json_object_set_new(m, "finish_reason", json_null());
            json_object_set_new(m, "id", json_string(j->rids[sl->prompt] ? j->rids[sl->prompt] : ""));
            json_object_set_new(m, "prompt_tokens", json_integer(j->prompt_tokens[sl->prompt]));
        }
    }
    if (j->text_in_logprobs && j->return_logprob && j->api->cfg.tok)
        api_fill_logprob_texts(j->api, json_object_get(o, "meta_info"));
    if (j->list_out) json_object_set_new(o, "index", json_integer((int64_t)(sl - j->slots)));
    return o;
}

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

typedef struct native_spec_ctx {
    json_t **reqs;               /* (n_prompt) GenerateReqInput objects, without the ids of text prompts */
    api_prompts *ps;             /* NULL, or (n_prompt) the tokenized text prompts */
} native_spec_ctx;

/* api_spec_fn of /generate: the codec over the prompt's request object,
 * with the tokenized ids handed over directly. */
static int native_spec(void *ctx, int i, sched_req_spec *spec, bool *max_new_given, json_t **log_req, char *err,
                       size_t errlen)
{
    native_spec_ctx *c = ctx;
    json_t *q = c->reqs[i];
    api_prompt *p = c->ps ? &c->ps->v[i] : NULL;
    if (log_req) {
        *log_req = p ? json_copy(q) : json_incref(q);
        if (p && *log_req) json_object_set_new(*log_req, "input_ids", api_ids_json(p->ids, p->n_ids));
    }
    *max_new_given = json_is_integer(json_object_get(json_object_get(q, "sampling_params"), "max_new_tokens"));
    int rc;
    if (!p) {
        rc = api_gen_req_from_json(q, spec, err, errlen);
    } else {
        int32_t *ids = p->ids;
        p->ids = NULL; /* moved into spec */
        rc = api_gen_req_from_json_ids(q, ids, p->n_ids, spec, err, errlen);
    }
    /* LoRA: lora_path names a loaded adapter (400 with SGLang's message otherwise) */
    if (rc == 0 && spec->lora_name && lora_resolve(spec->lora_name, &spec->lora, err, errlen)) {
        sched_req_spec_free(spec);
        rc = -1;
    }
    return rc;
}

void api_route_generate(api_server *a, http_req *r, json_t *body)
{
    char err[512];
    json_t *text = json_object_get(body, "text"), *ids = json_object_get(body, "input_ids");
    if (json_is_null(text)) text = NULL;
    if (json_is_null(ids)) ids = NULL;
    if (text && ids) {
        api_native_error(r, 400, "Either text or input_ids should be provided, not both.");
        return;
    }
    if (!text && !ids) {
        api_native_error(r, 400, "Either text or input_ids should be provided.");
        return;
    }
    if (text && !a->cfg.tok) {
        api_native_error(r, 400, "text needs the tokenizer, which --skip-tokenizer-init disabled: give input_ids");
        return;
    }
    bool batch;
    size_t n_prompt;
    if (text) {
        if (json_is_string(text)) batch = false, n_prompt = 1;
        else if (json_is_array(text)) batch = true, n_prompt = json_array_size(text);
        else {
            api_native_error(r, 400, "text must be a string or a list of strings");
            return;
        }
    } else {
        if (!json_is_array(ids)) {
            api_native_error(r, 400, "input_ids must be a list of integers or a list of lists");
            return;
        }
        batch = json_array_size(ids) > 0 && json_is_array(json_array_get(ids, 0));
        n_prompt = batch ? json_array_size(ids) : 1;
    }
    if (n_prompt == 0) {
        api_native_error(r, 400, "The batch is empty.");
        return;
    }
    if (n_prompt > 100000) {
        api_native_error(r, 400, "The batch is too large.");
        return;
    }
    json_t *sp = json_object_get(body, "sampling_params"), *rid = json_object_get(body, "rid");
    if (json_is_array(sp) && (!batch || json_array_size(sp) != n_prompt)) {
        api_native_error(r, 400, "sampling_params must be a dict, or a list with one dict per prompt");
        return;
    }
    if (json_is_array(rid) && (!batch || json_array_size(rid) != n_prompt)) {
        api_native_error(r, 400, "The rid should be a list with one rid per prompt.");
        return;
    }
    json_t *lp = json_object_get(body, "lora_path");
    if (json_is_array(lp) && (!batch || json_array_size(lp) != n_prompt)) {
        api_native_error(r, 400, "lora_path must be a string, or a list with one entry per prompt");
        return;
    }
    json_t *sp0 = json_is_array(sp) ? json_array_get(sp, 0) : sp;
    int64_t n_per = api_json_n_of(sp0);
    if (n_per > 1024 || (int64_t)n_prompt * n_per > 100000) {
        api_native_error(r, 400, "Too many samples requested.");
        return;
    }
    bool stream = json_is_true(json_object_get(body, "stream"));
    api_job *j = api_job_new(a, r, JOB_NATIVE, (int)n_prompt, (int)n_per);
    json_t **reqs = calloc(n_prompt, sizeof(json_t *));
    api_prompts ps = {0};
    if (!j || !reqs) {
        free(reqs);
        api_job_free(j);
        api_native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    j->stream = stream;
    j->list_out = batch || n_per > 1;
    j->text_in_logprobs = json_is_true(json_object_get(body, "return_text_in_logprobs"));
    for (size_t i = 0; i < n_prompt; i++) {
        json_t *q = json_copy(body);
        json_object_del(q, "text");
        if (text) {
            /* the ids go to the request directly (native_spec), not through q */
            json_t *t = batch ? json_array_get(text, i) : text;
            if (!json_is_string(t)) {
                snprintf(err, sizeof err, "text must be a string or a list of strings");
                json_decref(q);
                goto fail;
            }
            if (api_prompts_add_text(a, &ps, json_string_value(t), json_string_length(t), true, NULL) ||
                api_prompt_failed(&ps.v[ps.n - 1])) {
                snprintf(err, sizeof err, "tokenization failed");
                json_decref(q);
                goto fail;
            }
            j->prompt_text[i] = api_strdup(json_string_value(t)); /* request log (no echo on /generate) */
        } else if (batch) {
            json_object_set(q, "input_ids", json_array_get(ids, i));
        }
        json_t *spi = with_preferred(a, json_is_array(sp) ? json_array_get(sp, i) : sp);
        if (spi) json_object_set_new(q, "sampling_params", spi);
        if (json_is_array(lp)) json_object_set(q, "lora_path", json_array_get(lp, i));
        json_t *ri = json_is_array(rid) ? json_array_get(rid, i) : rid;
        char gen[48];
        if (json_is_string(ri) && !(batch && !json_is_array(rid))) {
            j->rids[i] = api_strdup(json_string_value(ri));
        } else {
            api_new_rid(a, gen, sizeof gen);
            j->rids[i] = api_strdup(gen);
        }
        json_object_set_new(q, "rid", json_string(j->rids[i]));
        reqs[i] = q;
    }
    native_spec_ctx c = {.reqs = reqs, .ps = text ? &ps : NULL};
    api_job_submit(a, j, native_spec, &c);
    for (size_t i = 0; i < n_prompt; i++) json_decref(reqs[i]);
    free(reqs);
    api_prompts_free(&ps);
    return;
fail:
    for (size_t i = 0; i < n_prompt; i++) json_decref(reqs[i]);
    free(reqs);
    api_prompts_free(&ps);
    api_job_free(j);
    api_native_error(r, 400, err);
}

typedef struct health_spec_ctx {
    const char *rid;
    int32_t tok0;
} health_spec_ctx;

/* api_spec_fn of /health_generate: one greedy token after BOS. */
static int health_spec(void *ctx, int i, sched_req_spec *spec, bool *max_new_given, json_t **log_req, char *err,
                       size_t errlen)
{
    health_spec_ctx *c = ctx;
    json_t *sp = json_pack("{s:i,s:f}", "max_new_tokens", 1, "temperature", 0.0);
    if (log_req)
        *log_req = json_pack("{s:[i],s:O,s:s}", "input_ids", c->tok0, "sampling_params", sp, "rid", c->rid);
    *max_new_given = true;
    int32_t *ids = malloc(sizeof *ids);
    if (ids) ids[0] = c->tok0;
    int rc = api_spec_simple(spec, ids, 1, sp, c->rid, err, errlen);
    json_decref(sp);
    return rc;
}

void api_route_health_generate(api_server *a, http_req *r)
{
    api_job *j = api_job_new(a, r, JOB_HEALTH, 1, 1);
    if (!j) {
        api_native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    char rid[48];
    snprintf(rid, sizeof rid, "HEALTH_CHECK_");
    api_new_rid(a, rid + strlen(rid), sizeof rid - strlen(rid));
    j->rids[0] = api_strdup(rid);
    int32_t tok0 = a->cfg.tok && tok_bos_id(a->cfg.tok) >= 0 ? tok_bos_id(a->cfg.tok) : 0;
    health_spec_ctx c = {.rid = j->rids[0], .tok0 = tok0};
    api_job_submit(a, j, health_spec, &c);
}

void api_route_tokenize(api_server *a, http_req *r, json_t *body)
{
    if (!a->cfg.tok) {
        api_native_error(r, 400, "the tokenizer is disabled (--skip-tokenizer-init)");
        return;
    }
    json_t *p = json_object_get(body, "prompt");
    json_t *ast = json_object_get(body, "add_special_tokens");
    bool add = !json_is_false(ast);
    json_t *out;
    if (json_is_string(p)) {
        json_t *ids = api_tokenize_json(a, json_string_value(p), json_string_length(p), add);
        if (!ids) {
            api_native_error(r, 500, "tokenization failed");
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
                api_native_error(r, 400, "prompt must be a string or a list of strings");
                return;
            }
            json_t *ids = api_tokenize_json(a, json_string_value(x), json_string_length(x), add);
            if (!ids) ids = json_array();
            json_array_append_new(counts, json_integer((json_int_t)json_array_size(ids)));
            json_array_append_new(all, ids);
        }
        out = json_pack("{s:o,s:o}", "tokens", all, "count", counts);
    } else {
        api_native_error(r, 400, "prompt must be a string or a list of strings");
        return;
    }
    json_object_set_new(out, "max_model_len", json_integer(a->cfg.context_length));
    api_respond_json(r, 200, out);
}

void api_route_detokenize(api_server *a, http_req *r, json_t *body)
{
    if (!a->cfg.tok) {
        api_native_error(r, 400, "the tokenizer is disabled (--skip-tokenizer-init)");
        return;
    }
    json_t *t = json_object_get(body, "tokens");
    if (!api_is_id_list(t)) {
        api_native_error(r, 400, "tokens must be a list of integers");
        return;
    }
    size_t n = json_array_size(t);
    int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!ids) {
        api_native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_int_t v = json_integer_value(json_array_get(t, i));
        if (v < 0 || v >= a->cfg.vocab_size) {
            free(ids);
            api_native_error(r, 400, "token id out of the vocabulary");
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
        api_native_error(r, 400, "token id out of the vocabulary");
        return;
    }
    api_respond_json(r, 200, json_pack("{s:s}", "text", txt));
    free(txt);
}


/* The non-streaming answer of a finished /generate job. */
void api_native_answer(api_job *j)
{
    json_t *out;
    if (j->list_out) {
        out = json_array();
        for (int i = 0; i < j->n_slots; i++) {
            json_t *o = api_native_obj(j, &j->slots[i], true);
            json_object_del(o, "index");
            json_array_append_new(out, o);
        }
    } else {
        out = api_native_obj(j, &j->slots[0], true);
    }
    api_respond_json(j->hr, 200, out);
}

/* Streaming: send what this event added to slot `si` of a /generate job. */
void api_native_stream_event(api_job *j, int si, const sched_event *e)
{
    api_slot *sl = &j->slots[si];
    bool fin = e->kind == SCHED_EV_FINISH;
    if (!e->n_ids && !fin) return;
    json_t *o = api_native_obj(j, sl, fin);
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
    if (o) api_job_sse(j, o);
}
