/* api_openai — what /v1/completions and /v1/chat/completions share: the
 * OpenAI request fields mapped to SGLang's sampling params (with the
 * model's --sampling-defaults), logprobs options, the job, the answer
 * (choices + usage) and the stream chunks.  The prompt and the choice
 * details of each route are in api_completions.c and api_chat.c.
 *
 * DESIGN: the request is adapted to one GenerateReqInput object per
 * prompt and submitted as a job (api_job_submit), as SGLang's
 * serving_chat / serving_completions adapt to GenerateReqInput. */
#include "api/api_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* OpenAI fields sglc refuses (none now: tools are api_chat_tools.c's,
 * grammars api_grammar.c's); kept as the one place to list the next one */
static const char *const oai_unsupported[] = {NULL};

typedef struct oai_spec_ctx {
    api_job *j;
    api_prompts *ps;
    const json_t *sp;            /* SGLang sampling params */
    bool stream, logprob;
    int top;
    json_t *priority;            /* borrowed, or NULL */
    bool json_strict;            /* response_format json_schema strict (api_grammar.c) */
    bool json_compact;           /* the json_schema is a forced tool call's: no whitespace */
    const json_t *body;          /* borrowed: the request (LoRA: "model" / "lora_path") */
} oai_spec_ctx;

/* api_spec_fn of the OpenAI routes: the GenerateReqInput fields SGLang's
 * serving layer sets (input_ids, sampling_params, rid, stream,
 * return_logprob, top_logprobs_num, priority), with the codec's checks
 * and messages in the same order. */
static int oai_spec(void *ctx, int i, sched_req_spec *spec, bool *max_new_given, json_t **log_req, char *err,
                    size_t errlen)
{
    oai_spec_ctx *c = ctx;
    api_prompt *p = &c->ps->v[i];
    const char *rid = c->j->rids[i];
    if (log_req) {
        *log_req = json_pack("{s:o,s:O,s:s,s:b,s:b}", "input_ids",
                             p->ids ? api_ids_json(p->ids, p->n_ids) : json_incref((json_t *)p->ids_json),
                             "sampling_params", c->sp, "rid", rid ? rid : "", "stream", c->stream,
                             "return_logprob", c->logprob);
        if (*log_req && c->logprob && c->top > 0)
            json_object_set_new(*log_req, "top_logprobs_num", json_integer(c->top));
        if (*log_req && json_is_integer(c->priority)) json_object_set(*log_req, "priority", c->priority);
    }
    sched_req_spec_init(spec);
    if (p->ids) { /* moved */
        spec->input_ids = p->ids, spec->n_input = p->n_ids;
        p->ids = NULL, p->ids_json = json_null(); /* not "failed" */
    } else if (api_gen_id_list(p->ids_json, "input_ids", &spec->input_ids, &spec->n_input, err, errlen)) {
        goto fail;
    }
    if (sampling_params_from_json(&spec->params, c->sp, err, errlen)) goto fail;
    if (api_lora_pick_openai(c->body, i, c->ps->n, &spec->lora, err, errlen)) goto fail; /* "BASE:ADAPTER" */
    spec->params.json_strict = c->json_strict;
    spec->params.json_compact = c->json_compact;
    if (rid && !(spec->rid = api_strdup(rid))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    spec->stream = c->stream;
    spec->return_logprob = c->logprob;
    if (c->logprob && c->top > 0) spec->top_logprobs_num = c->top;
    if (json_is_integer(c->priority)) {
        json_int_t v = json_integer_value(c->priority);
        if (v < -(1LL << 40) || v > (1LL << 40)) {
            snprintf(err, errlen, "priority must be an integer");
            goto fail;
        }
        spec->has_priority = true;
        spec->priority = v;
    }
    if (spec->n_input == 0) {
        snprintf(err, errlen, "input_ids must not be empty");
        goto fail;
    }
    /* with a reasoning parser on, the grammar applies after the reasoning
     * ends (SGLang's think_end_id): the end tag's ids, which the scheduler
     * also emits itself when the budget left is only enough for the
     * grammar (sched_grammar.c) */
    if (c->j->think_end && c->j->api->cfg.tok &&
        (json_object_get(c->sp, "json_schema") || json_object_get(c->sp, "regex") ||
         json_object_get(c->sp, "ebnf") || json_object_get(c->sp, "structural_tag"))) {
        tok_ids te = {0};
        if (!tok_encode(c->j->api->cfg.tok, c->j->think_end, strlen(c->j->think_end), false, &te) && te.n > 0) {
            spec->grammar_after = malloc(sizeof(int32_t) * te.n);
            if (spec->grammar_after) {
                memcpy(spec->grammar_after, te.ids, sizeof(int32_t) * te.n);
                spec->n_grammar_after = (int)te.n;
            }
        }
        tok_ids_free(&te);
    }
    *max_new_given = json_is_integer(json_object_get(c->sp, "max_new_tokens"));
    return 0;
fail:
    sched_req_spec_free(spec);
    return -1;
}

void api_route_openai(api_server *a, http_req *r, json_t *body, int kind)
{
    api_route_openai_ex(a, r, body, kind, NULL);
}

void api_route_openai_ex(api_server *a, http_req *r, json_t *body, int kind, json_t *resp)
{
    char err[512];
    for (int k = 0; oai_unsupported[k]; k++) {
        json_t *v = json_object_get(body, oai_unsupported[k]);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v))) {
            snprintf(err, sizeof err, "'%s' is not supported by sglc yet", oai_unsupported[k]);
            api_oai_error(r, 400, err);
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
            api_oai_error(r, 400, kind != JOB_COMPL ? "'suffix' is only valid for /v1/completions"
                                                : "suffix must be a string");
            return;
        }
        if (json_string_length(sfx) > 0) {
            if (!a->cfg.completion) {
                api_oai_error(r, 400, "'suffix' needs a code-completion template: start the server with "
                                  "--completion-template");
                return;
            }
            if (!json_is_string(p0)) {
                api_oai_error(r, 400, "'suffix' needs a single string prompt");
                return;
            }
            use_fim = true;
        }
    }
    if (!a->cfg.tok) {
        api_oai_error(r, 400, "the OpenAI routes need the tokenizer, which --skip-tokenizer-init disabled");
        return;
    }
    api_chat_tools tools = {0};
    if (kind != JOB_COMPL && api_chat_tools_read(body, &tools, err, sizeof err)) {
        api_oai_error(r, 400, err);
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
    bool json_strict = false; /* constrained decoding: response_format, regex, ebnf */
    if (api_oai_grammar_params(body, sp, &json_strict, err, sizeof err)) {
        json_decref(sp);
        api_oai_error(r, 400, err);
        return;
    }
    /* then tool_choice required / named (SGLang: the tool constraint comes last) */
    if (kind != JOB_COMPL && api_chat_tools_sampling(&tools, sp, err, sizeof err)) {
        json_decref(sp);
        api_oai_error(r, 400, err);
        return;
    }
    /* a forced call's JSON array is compiled without whitespace (with any
     * whitespace a weak or random model may emit nothing else) and strict
     * (no keys beyond the tool's parameters, as SGLang's xgrammar compiles
     * it: strict_mode) */
    bool json_compact = kind != JOB_COMPL && tools.active && (tools.required || tools.named);
    /* tool_choice auto with strict tools: the calls' structural tag (compact and strict likewise) */
    int stag = kind != JOB_COMPL ? api_chat_tools_strict_tag(&tools, a->cfg.tool_call_parser, sp, err, sizeof err) : 0;
    if (stag < 0) {
        json_decref(sp);
        api_oai_error(r, 400, err);
        return;
    }
    if (stag > 0) json_compact = true;
    if (json_compact) json_strict = true;

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
                api_oai_error(r, 400, "logprobs must be between 0 and 20");
                return;
            }
        } else if (lp && !json_is_null(lp)) {
            json_decref(sp);
            api_oai_error(r, 400, "logprobs must be an integer");
            return;
        }
    } else {
        logprob = json_is_true(lp);
        json_t *tl = json_object_get(body, "top_logprobs");
        if (json_is_integer(tl)) {
            top = (int)json_integer_value(tl);
            if (top < 0 || top > 20) {
                json_decref(sp);
                api_oai_error(r, 400, "top_logprobs must be between 0 and 20");
                return;
            }
            if (top > 0 && !logprob) {
                json_decref(sp);
                api_oai_error(r, 400, "Top logprobs must be set when logprobs is true");
                return;
            }
        }
    }

    /* the prompts: token ids (tokenized here) or the client's lists */
    api_prompts ps = {0};
    int prc = kind == JOB_COMPL ? api_compl_prompts(a, r, body, use_fim, sfx, &ps) : api_chat_prompt(a, r, body, &ps);
    if (prc) {
        json_decref(sp);
        api_prompts_free(&ps);
        return;
    }
    size_t n_prompt = (size_t)ps.n;
    for (size_t i = 0; i < n_prompt; i++)
        if (api_prompt_failed(&ps.v[i])) {
            json_decref(sp);
            api_prompts_free(&ps);
            api_oai_error(r, 500, "tokenization failed");
            return;
        }
    int64_t n_per = kind == JOB_RESP ? 1 : api_json_n_of(sp);
    if (n_per > 1024 || (int64_t)n_prompt * n_per > 100000) {
        json_decref(sp);
        api_prompts_free(&ps);
        api_oai_error(r, 400, "Too many samples requested.");
        return;
    }
    api_job *j = api_job_new(a, r, kind, (int)n_prompt, (int)n_per);
    if (!j) {
        json_decref(sp);
        api_prompts_free(&ps);
        api_oai_error(r, 500, "Internal error: out of memory.");
        return;
    }
    if (kind != JOB_COMPL && api_chat_add_parsers(a, j, body, &tools)) {
        json_decref(sp);
        api_prompts_free(&ps);
        api_job_free(j);
        api_oai_error(r, 500, "Internal error: out of memory.");
        return;
    }
    j->stream = stream;
    j->echo = kind == JOB_COMPL && json_is_true(json_object_get(body, "echo"));
    json_t *so = json_object_get(body, "stream_options");
    j->include_usage = json_is_object(so) && json_is_true(json_object_get(so, "include_usage"));
    char idbuf[64];
    api_new_rid(a, idbuf, sizeof idbuf);
    char oid[80];
    snprintf(oid, sizeof oid, "%s%s", kind == JOB_COMPL ? "cmpl-" : kind == JOB_RESP ? "resp_" : "chatcmpl-", idbuf);
    if (resp) j->resp = json_incref(resp);
    j->oai_id = api_strdup(oid);
    json_t *rid = json_object_get(body, "rid");
    for (size_t i = 0; i < n_prompt; i++) {
        if (ps.v[i].text) j->prompt_text[i] = api_strdup(ps.v[i].text);
        if (json_is_string(rid) && n_prompt == 1) j->rids[i] = api_strdup(json_string_value(rid));
        else {
            api_new_rid(a, idbuf, sizeof idbuf);
            j->rids[i] = api_strdup(idbuf);
        }
    }
    oai_spec_ctx c = {.j = j, .ps = &ps, .sp = sp, .stream = stream, .logprob = logprob, .top = top,
                      .priority = json_object_get(body, "priority"), .json_strict = json_strict,
                      .json_compact = json_compact, .body = body};
    api_job_submit(a, j, oai_spec, &c); /* j may be answered and freed from here on */
    json_decref(sp);
    api_prompts_free(&ps);
}

json_t *api_models_entry(api_server *a)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:s,s:n,s:I}", "id", a->served, "object", "model", "created",
                     (json_int_t)time(NULL), "owned_by", "sglang", "root", a->served, "parent",
                     "max_model_len", (json_int_t)a->cfg.context_length);
}


/* The slot's output parsers over one delta of the client's text (tool
 * calls left out: api_oai_parse_tools). */
int api_oai_parse(api_job *j, api_slot *sl, const char *text, bool final, char **content, char **reasoning)
{
    return api_oai_parse_tools(j, sl, text, final, content, reasoning, NULL);
}

/* The non-streaming answer of a finished OpenAI job. */
void api_oai_answer(api_job *j)
{
    http_req *r = j->hr;
    json_t *choices = json_array();
    for (int i = 0; i < j->n_slots; i++) {
        api_slot *sl = &j->slots[i];
        char *raw = api_slot_final_text(j, sl), *t = NULL, *reasoning = NULL;
        json_t *calls = NULL;
        if (api_oai_parse_tools(j, sl, raw, true, &t, &reasoning, &calls)) {
            free(raw);
            json_decref(choices);
            api_job_error(j, 500, "Internal error: out of memory.");
            return;
        }
        free(raw);
        json_t *c;
        const char *fr = api_oai_finish(&sl->res);
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
                          "logprobs", j->return_logprob ? api_compl_logprobs(j, sl, pl, 0) : json_null(),
                          "finish_reason", fr ? json_string(fr) : json_null(), "matched_stop",
                          api_oai_matched(&sl->res));
            free(full);
        } else {
            /* tool calls: SGLang's message (content null when only calls), finish_reason "tool_calls" */
            json_t *tcs = calls ? api_chat_message_tool_calls(calls) : NULL;
            c = json_pack("{s:i,s:{s:s,s:o,s:o,s:o},s:o,s:o,s:o}", "index", i, "message", "role",
                          "assistant", "content", tcs && !(t && *t) ? json_null() : json_string(t ? t : ""),
                          "reasoning_content", reasoning ? json_string(reasoning) : json_null(), "tool_calls",
                          tcs ? tcs : json_null(), "logprobs",
                          j->return_logprob ? api_chat_logprobs(j, sl, 0) : json_null(), "finish_reason",
                          tcs && fr ? json_string("tool_calls") : fr ? json_string(fr) : json_null(),
                          "matched_stop", tcs ? json_null() : api_oai_matched(&sl->res));
        }
        free(t);
        free(reasoning);
        json_decref(calls);
        json_array_append_new(choices, c);
    }
    json_t *out = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", j->oai_id, "object",
                            j->kind == JOB_COMPL ? "text_completion" : "chat.completion", "created",
                            (json_int_t)j->created, "model", j->api->served, "choices", choices,
                            "usage", api_usage_obj(j));
    api_respond_json(r, 200, out);
}

/* Streaming: send what this event added to slot `si` of an OpenAI job. */
void api_oai_stream_event(api_job *j, int si, const sched_event *e)
{
    api_slot *sl = &j->slots[si];
    bool fin = e->kind == SCHED_EV_FINISH;
    /* OpenAI: text deltas */
    const char *delta = "";
    char *final = NULL;
    if (fin) {
        final = api_slot_final_text(j, sl);
        size_t fl = final ? strlen(final) : 0;
        delta = fl > sl->sent ? final + sl->sent : "";
        sl->sent = fl > sl->sent ? fl : sl->sent;
    } else {
        const api_output *o = api_slot_out(j, sl);
        delta = o->text && o->len > sl->sent ? o->text + sl->sent : "";
        sl->sent = o->len > sl->sent ? o->len : sl->sent;
    }
    if (!fin && !*delta && sl->role_sent && !(j->return_logprob && e->n_ids)) {
        free(final);
        return;
    }
    /* the raw delta through the output parsers: what the client sees */
    char *content = NULL, *reasoning = NULL;
    json_t *calls = NULL;
    if (api_oai_parse_tools(j, sl, delta, fin, &content, &reasoning, j->kind == JOB_COMPL ? NULL : &calls)) {
        free(final);
        return; /* out of memory: this chunk is dropped */
    }
    json_t *c;
    const char *fr = fin ? api_oai_finish(&sl->res) : NULL;
    /* this event's tokens are the last e->n_ids of the result */
    int64_t from = sl->res.n - e->n_ids;
    char *echoed = NULL;
    if (j->kind == JOB_COMPL && j->echo && !sl->role_sent && j->prompt_text[sl->prompt]) {
        /* echo: the prompt leads the first chunk */
        const char *pt = j->prompt_text[sl->prompt];
        size_t pl = strlen(pt), dl = strlen(content);
        echoed = malloc(pl + dl + 1);
        if (echoed) {
            memcpy(echoed, pt, pl);
            memcpy(echoed + pl, content, dl + 1);
        }
    }
    if (j->kind == JOB_COMPL) {
        c = json_pack("{s:i,s:s,s:o,s:o,s:o}", "index", si, "text", echoed ? echoed : content, "logprobs",
                      j->return_logprob ? api_compl_logprobs(j, sl, sl->sent - strlen(delta), from) : json_null(),
                      "finish_reason", fr ? json_string(fr) : json_null(), "matched_stop",
                      fin ? api_oai_matched(&sl->res) : json_null());
    } else {
        json_t *d = json_object();
        if (!sl->role_sent) json_object_set_new(d, "role", json_string("assistant"));
        /* a delta with tool calls and no text: content null, as OpenAI */
        json_object_set_new(d, "content", calls && !*content ? json_null() : json_string(content));
        if (reasoning) json_object_set_new(d, "reasoning_content", json_string(reasoning));
        if (calls) json_object_set_new(d, "tool_calls", calls);
        bool tool_fin = fr && sl->n_calls > 0;
        c = json_pack("{s:i,s:o,s:o,s:o,s:o}", "index", si, "delta", d, "logprobs",
                      j->return_logprob ? api_chat_logprobs(j, sl, from) : json_null(), "finish_reason",
                      tool_fin ? json_string("tool_calls") : fr ? json_string(fr) : json_null(), "matched_stop",
                      fin && !tool_fin ? api_oai_matched(&sl->res) : json_null());
    }
    sl->role_sent = true;
    free(final);
    free(echoed);
    free(content);
    free(reasoning);
    json_t *arr = json_array();
    json_array_append_new(arr, c);
    api_job_sse(j, api_oai_chunk(j, arr));
}

