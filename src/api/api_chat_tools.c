/* api_chat_tools — tools, tool_choice and reasoning on /v1/chat/completions
 * (issue 10 §2): what the request asks (api_chat_tools_read), the tools
 * the chat template sees, the sampling changes (skip_special_tokens off;
 * the JSON schema of tool_choice required / named), the output parsers of
 * each slot (reasoning, then tool calls) and the `tool_calls` objects of
 * the answer and of the stream's deltas.
 *
 * DESIGN: as SGLang's serving_chat.  tool_choice "none" (or no tools):
 * the template gets no tools and no tool parser runs.  "auto": every
 * tool reaches the template (as the function objects, SGLang's
 * `item.function.model_dump()`), the output goes through
 * --tool-call-parser.  "required" / a named function: the template gets
 * all the tools (named: that one), the output is constrained by
 * api_toolcall_schema (sampling param json_schema) and parsed as the
 * JSON array of calls (the "json_array" format) whatever the parser.
 * parallel_tool_calls false: the schema allows one call and only the
 * first parsed call is returned.  Reasoning (--reasoning-parser): with
 * separate_reasoning (default true) and thinking on for the request
 * (api_reasoning_enabled over chat_template_kwargs enable_thinking /
 * thinking), the reasoning parser runs first, so the tool parser sees
 * only the content. */
#include "api/api_job.h"
#include "api/api_reasoning.h"
#include "api/api_toolcall.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -1 absent, 0 false, 1 true */
static int tri(const json_t *v) { return json_is_boolean(v) ? json_is_true(v) : -1; }

int api_chat_tools_read(const json_t *body, api_chat_tools *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->parallel = true;
    json_t *tools = json_object_get(body, "tools");
    json_t *tc = json_object_get(body, "tool_choice");
    json_t *par = json_object_get(body, "parallel_tool_calls");
    if (json_is_boolean(par)) t->parallel = json_is_true(par);
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) {
            snprintf(err, errlen, "tools must be a list");
            return -1;
        }
        size_t i;
        json_t *e;
        json_array_foreach(tools, i, e)
        {
            json_t *fn = json_object_get(e, "function");
            json_t *ty = json_object_get(e, "type");
            if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")) ||
                (ty && !json_is_null(ty) && (!json_is_string(ty) || strcmp(json_string_value(ty), "function")))) {
                snprintf(err, errlen, "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i);
                return -1;
            }
        }
        if (json_array_size(tools)) t->tools = tools;
    }
    if (tc && !json_is_null(tc)) {
        if (json_is_string(tc)) {
            const char *s = json_string_value(tc);
            if (!strcmp(s, "none")) t->none = true;
            else if (!strcmp(s, "required")) t->required = true;
            else if (strcmp(s, "auto")) {
                snprintf(err, errlen, "tool_choice must be 'none', 'auto', 'required' or a named function");
                return -1;
            }
        } else if (json_is_object(tc)) {
            json_t *nm = json_object_get(json_object_get(tc, "function"), "name");
            if (!json_is_string(nm)) {
                snprintf(err, errlen, "tool_choice must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
                return -1;
            }
            t->named = json_string_value(nm);
        } else {
            snprintf(err, errlen, "tool_choice must be a string or an object");
            return -1;
        }
    } else if (!t->tools) {
        t->none = true; /* OpenAI: "none" is the default without tools */
    }
    if ((t->required || t->named) && !t->tools) {
        snprintf(err, errlen, "tool_choice '%s' needs a non-empty tools list", t->named ? t->named : "required");
        return -1;
    }
    if (t->named && !api_toolcall_tool(t->tools, t->named)) {
        snprintf(err, errlen, "Tool '%s' not found in 'tools' list.", t->named);
        return -1;
    }
    t->active = t->tools && !t->none;
    return 0;
}

json_t *api_chat_template_tools(const api_chat_tools *t)
{
    if (!t->active) return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(t->tools, i, e)
    {
        json_t *fn = json_object_get(e, "function");
        if (t->named && strcmp(json_string_value(json_object_get(fn, "name")), t->named)) continue;
        json_array_append(out, fn);
    }
    return out;
}

int api_chat_tools_sampling(const api_chat_tools *t, json_t *sp, char *err, size_t errlen)
{
    if (!t->active) return 0;
    /* SGLang: tool markers are often special tokens; keep them in the text */
    json_object_set_new(sp, "skip_special_tokens", json_false());
    if (t->required || t->named) {
        json_t *schema = api_toolcall_schema(t->tools, t->named, t->parallel);
        char *s = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
        json_decref(schema);
        if (!s) {
            snprintf(err, errlen, "cannot build the tool_choice schema");
            return -1;
        }
        /* the forced call's schema replaces a response_format / regex / ebnf
         * constraint, as SGLang's chat serving overrides it */
        json_object_del(sp, "regex"), json_object_del(sp, "ebnf"), json_object_del(sp, "structural_tag");
        json_object_set_new(sp, "json_schema", json_string(s));
        free(s);
    }
    return 0;
}

int api_chat_tools_strict_tag(const api_chat_tools *t, const char *parser, json_t *sp, char *err, size_t errlen)
{
    if (!t->active || t->required || t->named || !parser || !parser[0]) return 0;
    bool strict = false;
    size_t i;
    json_t *e;
    json_array_foreach(t->tools, i, e)
    {
        json_t *fn = json_object_get(e, "function");
        strict |= json_is_true(json_object_get(json_is_object(fn) ? fn : e, "strict"));
    }
    const api_toolcall_format *f = strict ? api_toolcall_find(parser) : NULL;
    json_t *tag = f ? api_toolcall_structural_tag(f, t->tools) : NULL;
    if (!tag) return 0; /* no strict tool, or a format the tag cannot describe (SGLang: supports_structural_tag) */
    if (json_object_get(sp, "json_schema") || json_object_get(sp, "regex") || json_object_get(sp, "ebnf") ||
        json_object_get(sp, "structural_tag")) {
        /* SGLang: "Constrained decoding is not compatible with tool calls." (a warning; the request's own
         * constraint stays) */
        log_warn("tool_choice auto with strict tools: the request's own constraint is kept, the tool calls are not "
                 "constrained");
        json_decref(tag);
        return 0;
    }
    char *s = json_dumps(tag, JSON_COMPACT);
    json_decref(tag);
    if (!s) {
        snprintf(err, errlen, "cannot build the strict tools' structural tag");
        return -1;
    }
    json_object_set_new(sp, "structural_tag", json_string(s));
    free(s);
    return 1;
}

int api_chat_add_parsers(api_server *a, api_job *j, const json_t *body, const api_chat_tools *t)
{
    const api_reasoning_spec *rs = api_reasoning_find(a->cfg.reasoning_parser);
    json_t *kw = json_object_get(body, "chat_template_kwargs");
    json_t *sep = json_object_get(body, "separate_reasoning");
    json_t *srm = json_object_get(body, "stream_reasoning");
    bool reason = rs && !json_is_false(sep) &&
                  api_reasoning_enabled(rs, tri(json_object_get(kw, "enable_thinking")), tri(json_object_get(kw, "thinking")));
    const api_toolcall_format *tf = NULL;
    j->think_end = reason && !rs->harmony ? rs->end : NULL;
    /* chat and /v1/responses (function_call items, api_responses.c) */
    if (t->active)
        tf = t->required || t->named ? api_toolcall_find("json_array") : api_toolcall_find(a->cfg.tool_call_parser);
    j->tool_single = t->active && !t->parallel;
    if (tf && !strcmp(api_toolcall_format_name(tf), "kimi_k2")) { /* SGLang: functions.NAME:N ids */
        j->kimi_ids = true;
        j->tool_id_base = 0;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(body, "messages"), i, m)
        {
            json_t *tcs = json_object_get(m, "tool_calls");
            if (json_is_array(tcs)) j->tool_id_base += (int)json_array_size(tcs);
        }
    }
    for (int i = 0; i < j->n_slots; i++) {
        api_output *o = &j->outs[i];
        if (!o->tok) continue;
        if (reason) {
            api_output_parser *p = api_reasoning_parser_new(rs, !json_is_false(srm));
            if (!p || api_output_add_parser(o, p)) return -1;
        }
        if (tf) {
            api_output_parser *p = api_toolcall_parser_new(tf, t->tools);
            if (!p || api_output_add_parser(o, p)) return -1;
        }
    }
    return 0;
}

/* A tool call id as SGLang's: "call_" + 24 hex digits (kimi_k2:
 * "functions.NAME:N"). */
static json_t *call_id(api_job *j, const char *name, size_t nlen, int index)
{
    if (j->kimi_ids) {
        char id[600];
        snprintf(id, sizeof id, "functions.%.*s:%d", (int)(nlen < 512 ? nlen : 512), name, j->tool_id_base + index);
        return json_string(id);
    }
    char rid[64], id[40];
    api_new_rid(j->api, rid, sizeof rid);
    size_t l = strlen(rid); /* the last 24 digits: the counter part varies */
    snprintf(id, sizeof id, "call_%.24s", l > 24 ? rid + l - 24 : rid);
    return json_string(id);
}

int api_oai_parse_tools(api_job *j, api_slot *sl, const char *text, bool final, char **content, char **reasoning,
                        json_t **calls)
{
    api_output *o = api_slot_out(j, sl);
    *reasoning = NULL;
    if (calls) *calls = NULL;
    if (!o->n_parsers) {
        *content = api_strdup(text ? text : "");
        return *content ? 0 : -1;
    }
    api_pieces ps = {0};
    int rc = api_output_parse(o, text ? text : "", text ? strlen(text) : 0, final, &ps);
    *content = rc ? NULL : api_pieces_join(&ps, API_PIECE_CONTENT);
    bool any_reasoning = false;
    for (int i = 0; i < ps.n; i++) any_reasoning |= ps.v[i].kind == API_PIECE_REASONING;
    if (!rc && any_reasoning) *reasoning = api_pieces_join(&ps, API_PIECE_REASONING);
    /* tool-call pieces -> OpenAI's delta entries: {index, id, type, function: {name, arguments: ""}}
     * when a call opens, then {index, function: {arguments}} fragments (consecutive ones merged) */
    json_t *arr = calls ? json_array() : NULL;
    for (int i = 0; arr && !rc && i < ps.n; i++) {
        const api_piece *pc = &ps.v[i];
        if (pc->kind != API_PIECE_TOOL_NAME && pc->kind != API_PIECE_TOOL_CALL) continue;
        if (j->tool_single && pc->index > 0) continue; /* parallel_tool_calls false: the first call */
        if (pc->kind == API_PIECE_TOOL_NAME) {
            if (pc->index + 1 > sl->n_calls) sl->n_calls = pc->index + 1;
            json_array_append_new(arr, json_pack("{s:i,s:o,s:s,s:{s:s%,s:s}}", "index", pc->index, "id", call_id(j, pc->text, pc->len, pc->index),
                                                 "type", "function", "function", "name", pc->text, pc->len,
                                                 "arguments", ""));
            continue;
        }
        json_t *last = json_array_size(arr) ? json_array_get(arr, json_array_size(arr) - 1) : NULL;
        if (last && json_integer_value(json_object_get(last, "index")) == pc->index) {
            json_t *fn = json_object_get(last, "function");
            const char *prev = json_string_value(json_object_get(fn, "arguments"));
            size_t pl = prev ? strlen(prev) : 0;
            char *cat = malloc(pl + pc->len + 1);
            if (!cat) {
                rc = -1;
                break;
            }
            memcpy(cat, prev ? prev : "", pl);
            memcpy(cat + pl, pc->text, pc->len + 1);
            json_object_set_new(fn, "arguments", json_string(cat));
            free(cat);
        } else {
            json_array_append_new(arr, json_pack("{s:i,s:{s:s%}}", "index", pc->index, "function", "arguments", pc->text,
                                                 pc->len));
        }
    }
    api_pieces_free(&ps);
    if (rc || !*content || (any_reasoning && !*reasoning)) {
        free(*content), free(*reasoning);
        json_decref(arr);
        *content = *reasoning = NULL;
        return -1;
    }
    if (calls) {
        if (json_array_size(arr)) *calls = arr;
        else json_decref(arr);
    }
    return 0;
}

json_t *api_chat_message_tool_calls(json_t *deltas)
{
    /* the whole text was parsed in one call: one entry per call plus its argument entries */
    json_t *out = json_array();
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d)
    {
        json_t *fn = json_object_get(d, "function");
        if (json_object_get(d, "id")) {
            json_array_append_new(out, json_deep_copy(d));
            continue;
        }
        json_int_t idx = json_integer_value(json_object_get(d, "index"));
        for (size_t k = json_array_size(out); k-- > 0;) {
            json_t *c = json_array_get(out, k);
            if (json_integer_value(json_object_get(c, "index")) != idx) continue;
            json_t *cf = json_object_get(c, "function");
            const char *a = json_string_value(json_object_get(cf, "arguments")),
                       *b = json_string_value(json_object_get(fn, "arguments"));
            size_t al = a ? strlen(a) : 0, bl = b ? strlen(b) : 0;
            char *cat = malloc(al + bl + 1);
            if (cat) {
                memcpy(cat, a ? a : "", al);
                memcpy(cat + al, b ? b : "", bl + 1);
                json_object_set_new(cf, "arguments", json_string(cat));
                free(cat);
            }
            break;
        }
    }
    return out;
}

/* ---- histories ------------------------------------------------------------------------ */

json_t *api_chat_history_message(const json_t *m)
{
    json_t *c = json_deep_copy(m);
    if (!c) return NULL;
    /* SGLang: a null content is "" for the template */
    json_t *content = json_object_get(c, "content");
    if (!content || json_is_null(content)) json_object_set_new(c, "content", json_string(""));
    /* arguments given as a JSON string are an object for the template */
    json_t *tcs = json_object_get(c, "tool_calls");
    size_t i;
    json_t *tc;
    json_array_foreach(tcs, i, tc)
    {
        json_t *fn = json_object_get(tc, "function");
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args)) {
            json_t *obj = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            if (obj) json_object_set_new(fn, "arguments", obj);
        }
    }
    return c;
}

/* ---- POST /parse_function_call and /separate_reasoning ------------------------------------- */

void api_route_parse_function_call(api_server *a, http_req *r, json_t *body)
{
    json_t *text = json_object_get(body, "text"), *p = json_object_get(body, "tool_call_parser");
    json_t *tools = json_object_get(body, "tools");
    if (!json_is_string(text)) {
        api_native_error(r, 400, "text must be a string");
        return;
    }
    const char *pn = json_is_string(p) ? json_string_value(p) : a->cfg.tool_call_parser;
    const api_toolcall_format *f = api_toolcall_find(pn);
    if (!f) {
        char msg[300];
        snprintf(msg, sizeof msg, "Unsupported tool_call_parser: %.200s", pn ? pn : "(none)");
        api_native_error(r, 400, msg);
        return;
    }
    char *normal = NULL;
    json_t *calls = NULL;
    if (api_toolcall_parse(f, json_is_array(tools) ? tools : NULL, json_string_value(text), json_string_length(text),
                           &normal, &calls)) {
        api_native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    api_respond_json(r, 200, json_pack("{s:s,s:o}", "normal_text", normal, "calls", calls));
    free(normal);
}

void api_route_separate_reasoning(api_server *a, http_req *r, json_t *body)
{
    json_t *text = json_object_get(body, "text"), *p = json_object_get(body, "reasoning_parser");
    if (!json_is_string(text)) {
        api_native_error(r, 400, "text must be a string");
        return;
    }
    const char *pn = json_is_string(p) ? json_string_value(p) : a->cfg.reasoning_parser;
    const api_reasoning_spec *d = api_reasoning_find(pn);
    if (!d) {
        char msg[300];
        snprintf(msg, sizeof msg, "Unsupported reasoning_parser: %.200s", pn ? pn : "(none)");
        api_native_error(r, 400, msg);
        return;
    }
    char *normal = NULL, *reasoning = NULL;
    if (api_reasoning_separate(d, json_string_value(text), json_string_length(text), &normal, &reasoning)) {
        api_native_error(r, 500, "Internal error: out of memory.");
        return;
    }
    api_respond_json(r, 200, json_pack("{s:s,s:s}", "text", normal, "reasoning_text", reasoning));
    free(normal), free(reasoning);
}
