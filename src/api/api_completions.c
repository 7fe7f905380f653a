/* api_completions — /v1/completions: the prompt forms (a string, strings,
 * token ids, lists of ids), fill-in-the-middle through
 * --completion-template, and the completions logprobs object. */
#include "api/api_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *api_compl_logprobs(api_job *j, api_slot *sl, size_t text_base, int64_t from)
{
    const sched_result *r = &sl->res;
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = text_base;
    for (int64_t i = from; i < r->n; i++) {
        json_t *tt = api_token_text(j->api, r->ids[i]);
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
                json_t *s = api_token_text(j->api, id);
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


int api_compl_prompts(api_server *a, http_req *r, json_t *body, bool use_fim, json_t *sfx, api_prompts *ps)
{
    json_t *p = json_object_get(body, "prompt");
    char *fim = NULL;
    size_t fim_len = 0;
    if (use_fim)
        fim = tmpl_completion_prompt(a->cfg.completion, json_string_value(p),
                                     json_string_length(p), json_string_value(sfx),
                                     json_string_length(sfx), &fim_len);
    if (use_fim && !fim) {
        api_oai_error(r, 500, "out of memory");
        return -1;
    }
    int rc = 0;
    if (fim) {
        rc = api_prompts_add_text(a, ps, fim, fim_len, true, json_string_value(p));
        free(fim);
    } else if (json_is_string(p)) {
        rc = api_prompts_add_text(a, ps, json_string_value(p), json_string_length(p), true, json_string_value(p));
    } else if (api_is_id_list(p) && json_array_size(p) > 0) {
        rc = api_prompts_add_ids(ps, p);
    } else if (json_is_array(p) && json_array_size(p) > 0) {
        size_t i;
        json_t *x;
        json_array_foreach(p, i, x)
        {
            if (json_is_string(x)) {
                rc |= api_prompts_add_text(a, ps, json_string_value(x), json_string_length(x), true,
                                           json_string_value(x));
            } else if (api_is_id_list(x) && json_array_size(x) > 0) {
                rc |= api_prompts_add_ids(ps, x);
            } else {
                api_oai_error(r, 400, "prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids");
                return -1;
            }
        }
    } else {
        api_oai_error(r, 400, "prompt must be a non-empty string, a list of strings, a list of token ids or a list of lists of token ids");
        return -1;
    }
    if (rc) {
        api_oai_error(r, 500, "Internal error: out of memory.");
        return -1;
    }
    return 0;
}
