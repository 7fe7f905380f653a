/* api_responses — OpenAI's Responses API as SGLang serves it:
 * POST /v1/responses (create, streaming events), GET /v1/responses/{id}
 * (retrieve), GET /v1/responses/{id}/input_items, DELETE and
 * POST .../cancel.
 *
 * DESIGN: a Responses request is adapted to a chat-completions body
 * (instructions -> a system message, input items -> messages: message
 * items, function_call items -> an assistant message's tool_calls,
 * function_call_output items -> tool messages; flat function tools ->
 * chat tools; text.format -> response_format; max_output_tokens ->
 * max_tokens) and runs as a chat job of kind JOB_RESP through
 * api_route_openai_ex, so templates, sampling, parsers and grammars are
 * the chat route's.  Only the answer differs: this file renders the
 * finished slot as a Response object (reasoning and message output
 * items, usage in input/output tokens) or, streaming, as the typed event
 * sequence (response.created, response.in_progress, output_item.added,
 * content_part.added, output_text.delta ..., the .done events,
 * response.completed), each SSE event with its `event:` line and a
 * sequence_number, no [DONE].
 *
 * State: the job's `resp` JSON object carries what the answer needs
 * (the request's echo fields, the ids, the streamed text so far, the
 * sequence number); it is touched only by the thread that owns the job
 * (the route, then the dispatcher).  Finished responses with store (the
 * default) go into the server's store: a mutex-guarded FIFO of at most
 * RESP_STORE_MAX entries (the oldest is dropped), read by the HTTP
 * workers (retrieve, previous_response_id) and written by the dispatcher.
 * It lives while the server runs, as SGLang's in-memory store. */
#include "api/api_job.h"

#include "util/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RESP_STORE_MAX 1024

typedef struct resp_entry {
    char *id;
    json_t *response;            /* the Response object */
    json_t *history;             /* chat messages: the input (without instructions) then the output */
    json_t *input_items;         /* the input items, with ids */
} resp_entry;

struct api_resp_store {
    pthread_mutex_t mu;
    resp_entry v[RESP_STORE_MAX]; /* ring: oldest at head */
    int head, n;
};

api_resp_store *api_resp_store_new(void)
{
    api_resp_store *s = calloc(1, sizeof *s);
    if (s) pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void entry_clear(resp_entry *e)
{
    free(e->id);
    json_decref(e->response);
    json_decref(e->history);
    json_decref(e->input_items);
    memset(e, 0, sizeof *e);
}

void api_resp_store_free(api_resp_store *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) entry_clear(&s->v[(s->head + i) % RESP_STORE_MAX]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Index of id in the ring or -1; caller holds mu. */
static int store_find_locked(api_resp_store *s, const char *id)
{
    for (int i = 0; i < s->n; i++) {
        int k = (s->head + i) % RESP_STORE_MAX;
        if (!strcmp(s->v[k].id, id)) return k;
    }
    return -1;
}

/* Takes the three references. */
static void store_put(api_resp_store *s, const char *id, json_t *response, json_t *history, json_t *items)
{
    if (!s || !id) {
        json_decref(response), json_decref(history), json_decref(items);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n == RESP_STORE_MAX) {
        entry_clear(&s->v[s->head]);
        s->head = (s->head + 1) % RESP_STORE_MAX;
        s->n--;
    }
    resp_entry *e = &s->v[(s->head + s->n) % RESP_STORE_MAX];
    e->id = api_strdup(id);
    e->response = response, e->history = history, e->input_items = items;
    s->n++;
    pthread_mutex_unlock(&s->mu);
}

/* New references to what the store holds for id (any out pointer may be
 * NULL); 0 found, -1 not. */
static int store_get(api_resp_store *s, const char *id, json_t **response, json_t **history, json_t **items)
{
    if (!s) return -1;
    pthread_mutex_lock(&s->mu);
    int k = store_find_locked(s, id);
    if (k >= 0) {
        if (response) *response = json_deep_copy(s->v[k].response);
        if (history) *history = json_deep_copy(s->v[k].history);
        if (items) *items = json_deep_copy(s->v[k].input_items);
    }
    pthread_mutex_unlock(&s->mu);
    return k >= 0 ? 0 : -1;
}

static int store_delete(api_resp_store *s, const char *id)
{
    if (!s) return -1;
    pthread_mutex_lock(&s->mu);
    int k = store_find_locked(s, id);
    if (k >= 0) {
        /* close the gap: move the later entries down one place */
        int pos = (k - s->head + RESP_STORE_MAX) % RESP_STORE_MAX;
        entry_clear(&s->v[k]);
        for (int i = pos; i + 1 < s->n; i++)
            s->v[(s->head + i) % RESP_STORE_MAX] = s->v[(s->head + i + 1) % RESP_STORE_MAX];
        memset(&s->v[(s->head + s->n - 1) % RESP_STORE_MAX], 0, sizeof(resp_entry));
        s->n--;
    }
    pthread_mutex_unlock(&s->mu);
    return k >= 0 ? 0 : -1;
}

/* ---- request: Responses -> chat --------------------------------------------------------- */

static void new_id(api_server *a, const char *prefix, char *out, size_t len)
{
    char rid[64];
    api_new_rid(a, rid, sizeof rid);
    snprintf(out, len, "%s%s", prefix, rid);
}

/* The text of a message item's content: a string, or the text parts
 * (input_text / output_text / text) joined.  NULL with err on a part sglc
 * cannot take (images, files). */
static json_t *content_text(const json_t *content, char *err, size_t errlen)
{
    if (json_is_string(content)) return json_incref((json_t *)content);
    if (!json_is_array(content)) {
        snprintf(err, errlen, "input message content must be a string or a list of content parts");
        return NULL;
    }
    strbuf b = {0};
    size_t i;
    json_t *p;
    json_array_foreach(content, i, p)
    {
        const char *t = json_string_value(json_object_get(p, "type"));
        const char *tx = json_string_value(json_object_get(p, "text"));
        if (t && (!strcmp(t, "input_text") || !strcmp(t, "output_text") || !strcmp(t, "text")) && tx) {
            strbuf_puts(&b, tx);
            continue;
        }
        free(strbuf_take(&b));
        snprintf(err, errlen, "content part type '%.60s' is not supported by sglc (text only)", t ? t : "?");
        return NULL;
    }
    char *s = strbuf_take(&b);
    json_t *o = json_string(s ? s : "");
    free(s);
    return o;
}

/* Append the chat messages of the input items (or string) to msgs, and
 * the items themselves (with ids) to items.  0, or -1 with err. */
static int input_to_messages(api_server *a, const json_t *input, json_t *msgs, json_t *items, char *err,
                             size_t errlen)
{
    char id[96];
    if (json_is_string(input)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", input));
        new_id(a, "msg_", id, sizeof id);
        json_array_append_new(items, json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:O}]}", "id", id, "type", "message",
                                               "status", "completed", "role", "user", "content", "type",
                                               "input_text", "text", input));
        return 0;
    }
    if (!json_is_array(input)) {
        snprintf(err, errlen, "input must be a string or a list of input items");
        return -1;
    }
    size_t i;
    json_t *it;
    json_t *pending_calls = NULL; /* consecutive function_call items -> one assistant message */
    json_array_foreach(input, i, it)
    {
        if (!json_is_object(it)) {
            snprintf(err, errlen, "input[%zu] must be an object", i);
            json_decref(pending_calls);
            return -1;
        }
        const char *type = json_string_value(json_object_get(it, "type"));
        const char *role = json_string_value(json_object_get(it, "role"));
        if (!type) type = role ? "message" : "";
        if (strcmp(type, "function_call") && pending_calls) {
            json_array_append_new(msgs, json_pack("{s:s,s:s,s:o}", "role", "assistant", "content", "",
                                                  "tool_calls", pending_calls));
            pending_calls = NULL;
        }
        json_t *copy = json_deep_copy(it);
        if (!json_object_get(copy, "id")) {
            new_id(a, !strcmp(type, "message") ? "msg_" : "item_", id, sizeof id);
            json_object_set_new(copy, "id", json_string(id));
        }
        json_array_append_new(items, copy);
        if (!strcmp(type, "message")) {
            if (!role) {
                snprintf(err, errlen, "input[%zu]: a message item needs a role", i);
                return -1;
            }
            json_t *text = content_text(json_object_get(it, "content"), err, errlen);
            if (!text) return -1;
            /* developer instructions are the system turn of chat templates */
            json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", !strcmp(role, "developer") ? "system" : role,
                                                  "content", text));
        } else if (!strcmp(type, "function_call")) {
            const char *name = json_string_value(json_object_get(it, "name"));
            const char *args = json_string_value(json_object_get(it, "arguments"));
            const char *cid = json_string_value(json_object_get(it, "call_id"));
            if (!name || !args || !cid) {
                snprintf(err, errlen, "input[%zu]: a function_call item needs call_id, name and arguments (a string)", i);
                json_decref(pending_calls);
                return -1;
            }
            if (!pending_calls) pending_calls = json_array();
            json_array_append_new(pending_calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", cid, "type", "function",
                                                           "function", "name", name, "arguments", args));
        } else if (!strcmp(type, "function_call_output")) {
            const char *cid = json_string_value(json_object_get(it, "call_id"));
            json_t *out = json_object_get(it, "output");
            if (!cid || !json_is_string(out)) {
                snprintf(err, errlen, "input[%zu]: a function_call_output item needs call_id and output (a string)", i);
                return -1;
            }
            json_array_append_new(msgs, json_pack("{s:s,s:s,s:O}", "role", "tool", "tool_call_id", cid, "content", out));
        } else if (!strcmp(type, "reasoning")) {
            /* earlier reasoning is not replayed into the prompt (as chat templates drop it) */
        } else {
            snprintf(err, errlen, "input item type '%.60s' is not supported by sglc", type);
            json_decref(pending_calls);
            return -1;
        }
    }
    if (pending_calls)
        json_array_append_new(msgs, json_pack("{s:s,s:s,s:o}", "role", "assistant", "content", "", "tool_calls",
                                              pending_calls));
    return 0;
}

/* Flat Responses function tools -> chat tools.  NULL (err set) on a tool
 * type sglc has no way to run. */
static json_t *tools_to_chat(const json_t *tools, char *err, size_t errlen)
{
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, "function")) {
            snprintf(err, errlen, "tool type '%.60s' is not supported by sglc (function tools only)", type ? type : "?");
            json_decref(out);
            return NULL;
        }
        json_t *fn = json_object();
        const char *keys[] = {"name", "description", "parameters", "strict"};
        for (size_t k = 0; k < 4; k++) {
            json_t *v = json_object_get(t, keys[k]);
            if (v && !json_is_null(v)) json_object_set(fn, keys[k], v);
        }
        json_array_append_new(out, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    }
    return out;
}

static void resp_error(http_req *r, int status, const char *msg)
{
    api_oai_error(r, status, msg);
}

/* The Response object's fields that echo the request. */
static json_t *echo_fields(const json_t *body)
{
    json_t *o = json_object();
    const char *keys[] = {"instructions", "max_output_tokens", "previous_response_id", "temperature", "top_p",
                          "tool_choice", "tools", "parallel_tool_calls", "metadata", "user", "text",
                          "reasoning", "truncation", "store"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        json_t *v = json_object_get(body, keys[k]);
        json_object_set(o, keys[k], v ? v : json_null());
    }
    if (json_is_null(json_object_get(o, "tool_choice"))) json_object_set_new(o, "tool_choice", json_string("auto"));
    if (json_is_null(json_object_get(o, "tools"))) json_object_set_new(o, "tools", json_array());
    if (json_is_null(json_object_get(o, "parallel_tool_calls"))) json_object_set_new(o, "parallel_tool_calls", json_true());
    if (json_is_null(json_object_get(o, "metadata"))) json_object_set_new(o, "metadata", json_object());
    if (json_is_null(json_object_get(o, "text"))) json_object_set_new(o, "text", json_pack("{s:{s:s}}", "format", "type", "text"));
    if (json_is_null(json_object_get(o, "truncation"))) json_object_set_new(o, "truncation", json_string("disabled"));
    if (json_is_null(json_object_get(o, "store"))) json_object_set_new(o, "store", json_true());
    return o;
}

void api_route_responses(api_server *a, http_req *r, json_t *body)
{
    char err[512];
    if (json_is_true(json_object_get(body, "background"))) {
        resp_error(r, 400, "background responses are not supported by sglc");
        return;
    }
    json_t *input = json_object_get(body, "input");
    if (!input || json_is_null(input)) {
        resp_error(r, 400, "input is required");
        return;
    }
    json_t *chat = json_object(), *msgs = json_array(), *items = json_array(), *history = json_array();
    json_t *ins = json_object_get(body, "instructions");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) {
            snprintf(err, sizeof err, "instructions must be a string");
            goto bad;
        }
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", ins));
    }
    json_t *prev = json_object_get(body, "previous_response_id");
    if (prev && !json_is_null(prev)) {
        json_t *ph = NULL;
        if (!json_is_string(prev) || store_get(a->resps, json_string_value(prev), NULL, &ph, NULL)) {
            json_decref(chat), json_decref(msgs), json_decref(items), json_decref(history);
            snprintf(err, sizeof err, "Previous response with id '%.200s' not found.",
                     json_is_string(prev) ? json_string_value(prev) : "?");
            resp_error(r, 404, err);
            return;
        }
        json_array_extend(msgs, ph);
        json_array_extend(history, ph);
        json_decref(ph);
    }
    size_t first_new = json_array_size(msgs);
    if (input_to_messages(a, input, msgs, items, err, sizeof err)) goto bad;
    for (size_t i = first_new; i < json_array_size(msgs); i++) json_array_append(history, json_array_get(msgs, i));
    json_object_set_new(chat, "messages", msgs);
    msgs = NULL;
    json_t *tools = json_object_get(body, "tools");
    if (json_is_array(tools) && json_array_size(tools)) {
        json_t *ct = tools_to_chat(tools, err, sizeof err);
        if (!ct) goto bad;
        json_object_set_new(chat, "tools", ct);
    }
    json_t *tc = json_object_get(body, "tool_choice");
    if (json_is_string(tc)) json_object_set(chat, "tool_choice", tc);
    else if (json_is_object(tc)) {
        const char *name = json_string_value(json_object_get(tc, "name"));
        if (!name) {
            snprintf(err, sizeof err, "tool_choice must be 'none', 'auto', 'required' or a function with a name");
            goto bad;
        }
        json_object_set_new(chat, "tool_choice", json_pack("{s:s,s:{s:s}}", "type", "function", "function", "name", name));
    }
    json_t *fmt = json_object_get(json_object_get(body, "text"), "format");
    if (json_is_object(fmt)) {
        const char *ft = json_string_value(json_object_get(fmt, "type"));
        if (ft && !strcmp(ft, "json_schema")) {
            json_t *js = json_object();
            const char *keys[] = {"name", "schema", "strict", "description"};
            for (size_t k = 0; k < 4; k++) {
                json_t *v = json_object_get(fmt, keys[k]);
                if (v) json_object_set(js, keys[k], v);
            }
            json_object_set_new(chat, "response_format", json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", js));
        } else if (ft && strcmp(ft, "text")) {
            json_object_set_new(chat, "response_format", json_pack("{s:s}", "type", ft));
        }
    }
    /* sampling: the chat route's names */
    const char *pass[] = {"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
                          "presence_penalty", "stop", "seed", "parallel_tool_calls", "stream", "priority",
                          "chat_template_kwargs", "separate_reasoning", "stream_reasoning"};
    for (size_t k = 0; k < sizeof pass / sizeof pass[0]; k++) {
        json_t *v = json_object_get(body, pass[k]);
        if (v && !json_is_null(v)) json_object_set(chat, pass[k], v);
    }
    json_t *mot = json_object_get(body, "max_output_tokens");
    if (mot && !json_is_null(mot)) json_object_set(chat, "max_tokens", mot);

    json_t *state = json_object();
    json_object_set_new(state, "echo", echo_fields(body));
    json_object_set_new(state, "history", history);
    json_object_set_new(state, "items", items);
    json_object_set_new(state, "seq", json_integer(0));
    history = items = NULL;
    api_route_openai_ex(a, r, chat, JOB_RESP, state);
    json_decref(state);
    json_decref(chat);
    return;
bad:
    json_decref(chat), json_decref(msgs), json_decref(items), json_decref(history);
    resp_error(r, 400, err);
}

/* ---- answer ------------------------------------------------------------------------------ */

static json_t *resp_usage(api_job *j)
{
    int64_t pt = j->prompt_tokens[0], ct = j->slots[0].res.n, cached = j->slots[0].res.fin.cached_tokens;
    return json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens", (json_int_t)pt, "input_tokens_details",
                     "cached_tokens", (json_int_t)cached, "output_tokens", (json_int_t)ct,
                     "output_tokens_details", "reasoning_tokens", (json_int_t)0, "total_tokens",
                     (json_int_t)(pt + ct));
}

/* A function_call output item of a chat tool call {id, function {name, arguments}}. */
static json_t *call_item(const json_t *tc, const char *item_id, const char *status)
{
    json_t *fn = json_object_get(tc, "function");
    const char *args = json_string_value(json_object_get(fn, "arguments"));
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "id", item_id, "type", "function_call", "call_id",
                     json_string_value(json_object_get(tc, "id")), "name",
                     json_string_value(json_object_get(fn, "name")), "arguments", args ? args : "", "status", status);
}

/* The output items: reasoning (when any), the message (when it has text,
 * or when there is nothing else), then one function_call per tool call
 * (tcs: chat tool_calls entries, or NULL). */
static json_t *output_items(api_job *j, const char *text, const char *reasoning, const json_t *tcs, const char *status)
{
    json_t *st = j->resp, *out = json_array();
    if (reasoning && *reasoning)
        json_array_append_new(out, json_pack("{s:s,s:s,s:[],s:[{s:s,s:s}],s:s}", "id",
                                             json_string_value(json_object_get(st, "rs_id")), "type", "reasoning",
                                             "summary", "content", "type", "reasoning_text", "text", reasoning,
                                             "status", status));
    if ((text && *text) || !json_array_size(tcs))
        json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:s,s:[],s:[]}]}", "id",
                                             json_string_value(json_object_get(st, "msg_id")), "type", "message",
                                             "status", status, "role", "assistant", "content", "type", "output_text",
                                             "text", text ? text : "", "annotations", "logprobs"));
    size_t i;
    json_t *tc;
    json_array_foreach(tcs, i, tc)
    {
        char id[96];
        snprintf(id, sizeof id, "fc_%s_%zu", j->oai_id + 5, i); /* after "resp_" */
        json_array_append_new(out, call_item(tc, id, status));
    }
    return out;
}

/* The Response object: status "in_progress" (no output, no usage yet),
 * or the finished one of slot 0. */
static json_t *response_obj(api_job *j, const char *status, json_t *output)
{
    json_t *st = j->resp;
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:n,s:n,s:s}", "id", j->oai_id, "object", "response", "created_at",
                          (json_int_t)j->created, "status", status, "error", "incomplete_details", "model",
                          j->api->served);
    json_object_update(o, json_object_get(st, "echo"));
    json_object_set_new(o, "output", output ? output : json_array());
    json_object_set_new(o, "usage", strcmp(status, "in_progress") ? resp_usage(j) : json_null());
    if (!strcmp(status, "incomplete"))
        json_object_set_new(o, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    return o;
}

static const char *final_status(const api_slot *sl)
{
    const char *fr = api_oai_finish(&sl->res);
    return fr && !strcmp(fr, "length") ? "incomplete" : "completed";
}

/* Store the finished response (store != false) with its history (the
 * assistant turn: its text and tool calls). */
static void store_finished(api_job *j, json_t *response, const char *text, const json_t *tcs)
{
    json_t *st = j->resp;
    if (json_is_false(json_object_get(json_object_get(st, "echo"), "store"))) return;
    json_t *hist = json_deep_copy(json_object_get(st, "history"));
    json_t *msg = json_pack("{s:s,s:s}", "role", "assistant", "content", text ? text : "");
    if (json_array_size(tcs)) {
        json_t *calls = json_array();
        size_t i;
        json_t *tc;
        json_array_foreach(tcs, i, tc)
        json_array_append_new(calls, json_pack("{s:O,s:s,s:O}", "id", json_object_get(tc, "id"), "type", "function",
                                               "function", json_object_get(tc, "function")));
        json_object_set_new(msg, "tool_calls", calls);
    }
    json_array_append_new(hist, msg);
    store_put(j->api->resps, j->oai_id, json_deep_copy(response), hist,
              json_deep_copy(json_object_get(st, "items")));
}

static void ensure_ids(api_job *j)
{
    char id[96];
    if (!json_object_get(j->resp, "msg_id")) {
        new_id(j->api, "msg_", id, sizeof id);
        json_object_set_new(j->resp, "msg_id", json_string(id));
        new_id(j->api, "rs_", id, sizeof id);
        json_object_set_new(j->resp, "rs_id", json_string(id));
    }
}

void api_resp_answer(api_job *j)
{
    api_slot *sl = &j->slots[0];
    ensure_ids(j);
    char *raw = api_slot_final_text(j, sl), *t = NULL, *reasoning = NULL;
    json_t *calls = NULL;
    if (api_oai_parse_tools(j, sl, raw, true, &t, &reasoning, &calls)) {
        free(raw);
        api_job_error(j, 500, "Internal error: out of memory.");
        return;
    }
    free(raw);
    json_t *tcs = calls ? api_chat_message_tool_calls(calls) : NULL;
    json_decref(calls);
    const char *status = final_status(sl);
    json_t *o = response_obj(j, status, output_items(j, t, reasoning, tcs, "completed"));
    store_finished(j, o, t, tcs);
    json_decref(tcs);
    free(t), free(reasoning);
    api_respond_json(j->hr, 200, o);
}

/* One typed event (takes o): type and sequence_number set here. */
static void resp_event(api_job *j, const char *type, json_t *o)
{
    json_int_t seq = json_integer_value(json_object_get(j->resp, "seq"));
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "sequence_number", json_integer(seq));
    json_object_set_new(j->resp, "seq", json_integer(seq + 1));
    api_job_sse_event(j, type, o);
}

static void append_text(json_t *st, const char *key, const char *delta)
{
    const char *old = json_string_value(json_object_get(st, key));
    size_t ol = old ? strlen(old) : 0, dl = strlen(delta);
    char *s = malloc(ol + dl + 1);
    if (!s) return;
    if (ol) memcpy(s, old, ol);
    memcpy(s + ol, delta, dl + 1);
    json_object_set_new(st, key, json_string(s));
    free(s);
}

/* Open the reasoning (kind 0) or message (kind 1) output item. */
static void open_item(api_job *j, int kind)
{
    json_t *st = j->resp;
    const char *flag = kind ? "msg_open" : "rs_open";
    if (json_is_true(json_object_get(st, flag))) return;
    json_int_t idx = json_integer_value(json_object_get(st, "n_items"));
    json_object_set_new(st, kind ? "msg_index" : "rs_index", json_integer(idx));
    json_object_set_new(st, "n_items", json_integer(idx + 1));
    json_object_set_new(st, flag, json_true());
    const char *id = json_string_value(json_object_get(st, kind ? "msg_id" : "rs_id"));
    json_t *item = kind ? json_pack("{s:s,s:s,s:s,s:s,s:[]}", "id", id, "type", "message", "status", "in_progress",
                                    "role", "assistant", "content")
                        : json_pack("{s:s,s:s,s:[],s:[],s:s}", "id", id, "type", "reasoning", "summary", "content",
                                    "status", "in_progress");
    resp_event(j, "response.output_item.added", json_pack("{s:I,s:o}", "output_index", idx, "item", item));
    json_t *part = kind ? json_pack("{s:s,s:s,s:[],s:[]}", "type", "output_text", "text", "", "annotations", "logprobs")
                        : json_pack("{s:s,s:s}", "type", "reasoning_text", "text", "");
    resp_event(j, "response.content_part.added",
               json_pack("{s:s,s:I,s:i,s:o}", "item_id", id, "output_index", idx, "content_index", 0, "part", part));
}

static void close_item(api_job *j, int kind)
{
    json_t *st = j->resp;
    if (!json_is_true(json_object_get(st, kind ? "msg_open" : "rs_open"))) return;
    const char *id = json_string_value(json_object_get(st, kind ? "msg_id" : "rs_id"));
    json_int_t idx = json_integer_value(json_object_get(st, kind ? "msg_index" : "rs_index"));
    const char *text = json_string_value(json_object_get(st, kind ? "text" : "reasoning"));
    if (!text) text = "";
    resp_event(j, kind ? "response.output_text.done" : "response.reasoning_text.done",
               json_pack("{s:s,s:I,s:i,s:s}", "item_id", id, "output_index", idx, "content_index", 0, "text", text));
    json_t *part = kind ? json_pack("{s:s,s:s,s:[],s:[]}", "type", "output_text", "text", text, "annotations", "logprobs")
                        : json_pack("{s:s,s:s}", "type", "reasoning_text", "text", text);
    resp_event(j, "response.content_part.done",
               json_pack("{s:s,s:I,s:i,s:O}", "item_id", id, "output_index", idx, "content_index", 0, "part", part));
    json_t *item = kind ? json_pack("{s:s,s:s,s:s,s:s,s:[o]}", "id", id, "type", "message", "status", "completed",
                                    "role", "assistant", "content", part)
                        : json_pack("{s:s,s:s,s:[],s:[o],s:s}", "id", id, "type", "reasoning", "summary", "content",
                                    part, "status", "completed");
    resp_event(j, "response.output_item.done", json_pack("{s:I,s:o}", "output_index", idx, "item", item));
}

/* The tool-call delta entries of one stream event: a call that opens
 * (id, name) opens its function_call item; argument fragments become
 * response.function_call_arguments.delta events.  The calls so far are
 * kept in state "calls" as chat tool_calls entries (with their item id
 * and output index). */
static void stream_calls(api_job *j, json_t *deltas)
{
    json_t *st = j->resp;
    json_t *calls = json_object_get(st, "calls");
    if (!calls) {
        json_object_set_new(st, "calls", json_array());
        calls = json_object_get(st, "calls");
    }
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d)
    {
        json_int_t idx = json_integer_value(json_object_get(d, "index"));
        json_t *fn = json_object_get(d, "function");
        if (json_object_get(d, "id")) {
            close_item(j, 0);
            close_item(j, 1); /* text before the calls is done */
            json_int_t oi = json_integer_value(json_object_get(st, "n_items"));
            json_object_set_new(st, "n_items", json_integer(oi + 1));
            char id[96];
            snprintf(id, sizeof id, "fc_%s_%zu", j->oai_id + 5, json_array_size(calls));
            json_t *tc = json_pack("{s:O,s:s,s:{s:O,s:s},s:I,s:s,s:I}", "id", json_object_get(d, "id"), "type", "function",
                                   "function", "name", json_object_get(fn, "name"), "arguments", "", "output_index", oi,
                                   "item_id", id, "index", idx);
            json_array_append_new(calls, tc);
            resp_event(j, "response.output_item.added",
                       json_pack("{s:I,s:o}", "output_index", oi, "item", call_item(tc, id, "in_progress")));
        }
        const char *frag = json_string_value(json_object_get(fn, "arguments"));
        if (!frag || !*frag) continue;
        json_t *tc = NULL;
        for (size_t k = json_array_size(calls); k-- > 0;)
            if (json_integer_value(json_object_get(json_array_get(calls, k), "index")) == idx) {
                tc = json_array_get(calls, k);
                break;
            }
        if (!tc) continue;
        append_text(json_object_get(tc, "function"), "arguments", frag);
        resp_event(j, "response.function_call_arguments.delta",
                   json_pack("{s:O,s:O,s:s}", "item_id", json_object_get(tc, "item_id"), "output_index",
                             json_object_get(tc, "output_index"), "delta", frag));
    }
}

/* At the end: each call's arguments.done and output_item.done. */
static void close_calls(api_job *j)
{
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(j->resp, "calls"), i, tc)
    {
        const char *id = json_string_value(json_object_get(tc, "item_id"));
        json_t *fn = json_object_get(tc, "function");
        resp_event(j, "response.function_call_arguments.done",
                   json_pack("{s:s,s:O,s:O}", "item_id", id, "output_index", json_object_get(tc, "output_index"),
                             "arguments", json_object_get(fn, "arguments")));
        resp_event(j, "response.output_item.done",
                   json_pack("{s:O,s:o}", "output_index", json_object_get(tc, "output_index"), "item",
                             call_item(tc, id, "completed")));
    }
}

void api_resp_stream_event(api_job *j, int si, const sched_event *e)
{
    api_slot *sl = &j->slots[si];
    json_t *st = j->resp;
    ensure_ids(j);
    if (!json_is_true(json_object_get(st, "started"))) {
        json_object_set_new(st, "started", json_true());
        resp_event(j, "response.created", json_pack("{s:o}", "response", response_obj(j, "in_progress", NULL)));
        resp_event(j, "response.in_progress", json_pack("{s:o}", "response", response_obj(j, "in_progress", NULL)));
    }
    bool fin = e->kind == SCHED_EV_FINISH;
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
    char *content = NULL, *reasoning = NULL;
    json_t *calls = NULL;
    if (api_oai_parse_tools(j, sl, delta, fin, &content, &reasoning, &calls)) {
        free(final);
        return;
    }
    free(final);
    if (reasoning && *reasoning) {
        open_item(j, 0);
        append_text(st, "reasoning", reasoning);
        resp_event(j, "response.reasoning_text.delta",
                   json_pack("{s:s,s:O,s:i,s:s}", "item_id", json_string_value(json_object_get(st, "rs_id")),
                             "output_index", json_object_get(st, "rs_index"), "content_index", 0, "delta", reasoning));
    }
    if (*content) {
        close_item(j, 0); /* reasoning ends where content starts */
        open_item(j, 1);
        append_text(st, "text", content);
        resp_event(j, "response.output_text.delta",
                   json_pack("{s:s,s:O,s:i,s:s,s:[]}", "item_id", json_string_value(json_object_get(st, "msg_id")),
                             "output_index", json_object_get(st, "msg_index"), "content_index", 0, "delta", content,
                             "logprobs"));
    }
    free(content), free(reasoning);
    if (calls) stream_calls(j, calls);
    json_decref(calls);
    if (fin) {
        close_item(j, 0);
        json_t *tcs = json_object_get(st, "calls");
        if (!json_array_size(tcs)) open_item(j, 1); /* a response always has an item, maybe an empty message */
        close_item(j, 1);
        close_calls(j);
        const char *status = final_status(sl);
        const char *text = json_string_value(json_object_get(st, "text"));
        json_t *o = response_obj(j, status, output_items(j, text, json_string_value(json_object_get(st, "reasoning")),
                                                         tcs, "completed"));
        store_finished(j, o, text, tcs);
        resp_event(j, !strcmp(status, "completed") ? "response.completed" : "response.incomplete",
                   json_pack("{s:o}", "response", o));
    }
}

/* ---- retrieval ---------------------------------------------------------------------------- */

static void not_found(http_req *r, const char *id)
{
    char msg[400];
    snprintf(msg, sizeof msg, "Response with id '%.300s' not found.", id);
    api_oai_error(r, 404, msg);
}

bool api_route_responses_id(api_server *a, http_req *r, const char *method, const char *path)
{
    const char *rest = path + strlen("/v1/responses/");
    const char *slash = strchr(rest, '/');
    char id[256];
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (!n || n >= sizeof id) return false;
    memcpy(id, rest, n);
    id[n] = 0;
    const char *tail = slash ? slash : "";
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!*tail && get) {
        json_t *o = NULL;
        if (store_get(a->resps, id, &o, NULL, NULL)) not_found(r, id);
        else api_respond_json(r, 200, o);
        return true;
    }
    if (!*tail && !strcmp(method, "DELETE")) {
        if (store_delete(a->resps, id)) not_found(r, id);
        else api_respond_json(r, 200, json_pack("{s:s,s:s,s:b}", "id", id, "object", "response", "deleted", 1));
        return true;
    }
    if (!strcmp(tail, "/input_items") && get) {
        json_t *items = NULL;
        if (store_get(a->resps, id, NULL, NULL, &items)) {
            not_found(r, id);
            return true;
        }
        size_t k = json_array_size(items);
        json_t *first = k ? json_object_get(json_array_get(items, 0), "id") : NULL;
        json_t *last = k ? json_object_get(json_array_get(items, k - 1), "id") : NULL;
        api_respond_json(r, 200, json_pack("{s:s,s:o,s:O,s:O,s:b}", "object", "list", "data", items, "first_id",
                                           first ? first : json_null(), "last_id", last ? last : json_null(),
                                           "has_more", 0));
        return true;
    }
    if (!strcmp(tail, "/cancel") && !strcmp(method, "POST")) {
        if (store_get(a->resps, id, NULL, NULL, NULL)) not_found(r, id);
        else api_oai_error(r, 400, "Cannot cancel a synchronous response.");
        return true;
    }
    return false;
}
