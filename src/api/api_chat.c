/* api_chat — /v1/chat/completions: messages through the chat template
 * (content format detection, continue_final_message,
 * chat_template_kwargs, tools and tool histories: api_chat_tools.c) to
 * one prompt, and the chat logprobs object. */
#include "api/api_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
json_t *api_chat_logprobs(api_job *j, api_slot *sl, int64_t from)
{
    const sched_result *r = &sl->res;
    json_t *content = json_array();
    for (int64_t i = from; i < r->n; i++) {
        json_t *tt = api_token_text(j->api, r->ids[i]);
        json_t *top = json_array();
        if (r->top_n && r->top_ids)
            for (int k = 0; k < r->top_n; k++) {
                int32_t id = r->top_ids[i * r->top_n + k];
                if (id < 0) continue;
                json_t *s = api_token_text(j->api, id);
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

int api_chat_prompt(api_server *a, http_req *r, json_t *body, api_prompts *ps)
{
    char err[512];
    json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs) || !json_array_size(msgs)) {
        api_oai_error(r, 400, "messages must be a non-empty list");
        return -1;
    }
    if (!a->cfg.chat) {
        api_oai_error(r, 400, "This model has no chat template: start the server with --chat-template");
        return -1;
    }
    tmpl_content_format fmt = tmpl_detect_content_format(a->cfg.chat->tmpl);
    json_t *pm = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
        /* SGLang: null content -> "", string tool-call arguments -> objects (api_chat_tools.c) */
        json_t *hm = json_is_string(role) ? api_chat_history_message(m) : NULL;
        json_t *pmsg = hm ? tmpl_process_message(hm, fmt, NULL) : NULL;
        json_decref(hm);
        if (!pmsg) {
            json_decref(pm);
            api_oai_error(r, 400, "each message must be an object with a role");
            return -1;
        }
        json_array_append_new(pm, pmsg);
    }
    /* continue_final_message: transformers' (tmpl_chat_prompt, as `sglc
     * chat-template`); an explicit add_generation_prompt: true with it is refused */
    bool cont = json_is_true(json_object_get(body, "continue_final_message"));
    json_t *kw = json_object_get(body, "chat_template_kwargs");
    char *out = NULL, *terr = NULL;
    size_t olen = 0;
    /* tools: the template sees them unless tool_choice is "none" (SGLang) */
    api_chat_tools tt;
    json_t *ttools = api_chat_tools_read(body, &tt, err, sizeof err) ? NULL : api_chat_template_tools(&tt);
    int rc = tmpl_chat_prompt(a->cfg.chat, pm, ttools, NULL,
                              cont ? json_is_true(json_object_get(body, "add_generation_prompt")) : 1, cont,
                              json_is_object(kw) ? kw : NULL, &out, &olen, &terr);
    json_decref(pm);
    json_decref(ttools);
    if (rc) {
        snprintf(err, sizeof err, "chat template error: %s", terr ? terr : "?");
        free(terr);
        api_oai_error(r, 400, err);
        return -1;
    }
    rc = api_prompts_add_text(a, ps, out, olen, false, NULL);
    free(out);
    if (rc) {
        api_oai_error(r, 500, "Internal error: out of memory.");
        return -1;
    }
    return 0;
}
