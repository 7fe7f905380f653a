/* api_embed_job — the jobs of /encode (SGLang's native embedding route)
 * and /v1/embeddings: one scheduler request per input (embedding mode:
 * prefill only), whose FINISH event carries the pooled vector; the
 * answers in both shapes.  Request parsing is api_embed.c. */
#include "api/api_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SGLang's embedding meta_info: id, finish_reason, prompt_tokens,
 * weight_version, total_retractions, e2e_latency (taken from the
 * generation form where they are the same). */
json_t *api_embed_meta(api_job *j, api_slot *sl)
{
    json_t *full = api_gen_result_json(&sl->res);
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
json_t *api_embed_answer(api_job *j)
{
    if (j->kind == JOB_ENCODE) {
        json_t *list = json_array();
        for (int i = 0; i < j->n_slots; i++) {
            api_slot *sl = &j->slots[i];
            json_array_append_new(list, json_pack("{s:o,s:o}", "embedding", api_embed_float_array(sl->emb, sl->n_emb),
                                                  "meta_info", api_embed_meta(j, sl)));
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

/* ---- embeddings: /encode and /v1/embeddings ------------------------------------------------ */

/* One scheduler request per input (embedding mode: prefill only, the
 * FINISH event carries the vector).  Texts are tokenized with the special
 * tokens, as SGLang's tokenizer manager does for raw text. */
typedef struct embed_spec_ctx {
    api_job *j;
    api_prompts *ps;             /* (n_prompt) */
} embed_spec_ctx;

/* api_spec_fn of the embedding routes: prefill only (max_new_tokens 0). */
static int embed_spec(void *ctx, int i, sched_req_spec *spec, bool *max_new_given, json_t **log_req, char *err,
                      size_t errlen)
{
    embed_spec_ctx *c = ctx;
    api_prompt *p = &c->ps->v[i];
    const char *rid = c->j->rids[i];
    json_t *sp = json_pack("{s:i}", "max_new_tokens", 0);
    if (log_req)
        *log_req = json_pack("{s:o,s:O,s:s?}", "input_ids", api_ids_json(p->ids, p->n_ids), "sampling_params", sp,
                             "rid", rid);
    *max_new_given = true;
    int32_t *ids = p->ids;
    p->ids = NULL; /* moved into spec */
    int rc = api_spec_simple(spec, ids, p->n_ids, sp, rid, err, errlen);
    json_decref(sp);
    return rc;
}

void api_route_embed(api_server *a, http_req *r, json_t *body, bool oai)
{
    char err[512];
    void (*errf)(http_req *, int, const char *) = oai ? api_oai_error : api_native_error;
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
    api_job *j = api_job_new(a, r, oai ? JOB_EMBED : JOB_ENCODE, q.n, 1);
    if (!j) {
        api_embed_req_free(&q);
        errf(r, 500, "Internal error: out of memory.");
        return;
    }
    j->list_out = !q.single;
    j->base64 = q.base64;
    j->embed_dims = q.has_dims ? (int)q.dims : 0;
    api_prompts ps = {0};
    int bad = 0;
    for (int i = 0; i < q.n && !bad; i++) {
        char rid[48];
        if (q.rids && q.rids[i]) {
            j->rids[i] = api_strdup(q.rids[i]);
        } else {
            api_new_rid(a, rid, sizeof rid);
            j->rids[i] = api_strdup(rid);
        }
        api_embed_item *it = &q.items[i];
        if (it->text ? api_prompts_add_text(a, &ps, it->text, it->text_len, true, NULL)
                     : api_prompts_add_owned(&ps, it->ids, it->n_ids)) {
            bad = 1;
            break;
        }
        if (!it->text) it->ids = NULL; /* moved */
        api_prompt *p = &ps.v[ps.n - 1];
        if (api_prompt_failed(p)) bad = 1;
        else if (p->n_ids == 0) bad = 2;
    }
    api_embed_req_free(&q);
    if (bad) {
        api_prompts_free(&ps);
        errf(r, bad == 2 ? 400 : 500,
             bad == 2 ? "The input has no tokens (empty text)." : "Internal error: cannot tokenize the input.");
        api_job_free(j);
        return;
    }
    embed_spec_ctx c = {.j = j, .ps = &ps};
    api_job_submit(a, j, embed_spec, &c); /* j may be answered and freed from here on */
    api_prompts_free(&ps);
}

