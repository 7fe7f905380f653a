/* api_score — SGLang's scoring routes (see api_score.h).
 *
 * DESIGN: each route is a job of scheduler requests like the others
 * (api_job.h); what its answer needs beyond the slots is kept in the job's
 * `score` JSON object (owned).
 *
 *   /v1/score (TokenizerManagerScoreMixin.score_request): the probability
 *     of each label token as the next token after query + item (item +
 *     query with item_first), exp(logprob), or a softmax over the labels'
 *     logprobs with apply_softmax.  One request per item, max_new_tokens 1
 *     with token_ids_logprob = the labels: the first output token's
 *     label logprobs are the distribution after the prompt (SGLang asks
 *     max_new_tokens 0 and reads the same entry; sglc's scheduler computes
 *     output logprobs only for a sampled token).  With
 *     --multi-item-scoring-delimiter D: ONE request
 *       query D item1 D item2 ... D itemN D
 *     (text: D's decoded text between the texts; ids: the token itself),
 *     whose input logprobs at the delimiters are the scores: position p of
 *     the k-th delimiter (k >= 1) holds the distribution of the row before
 *     it, item k's last token.  The model runs such a prompt with the
 *     multi-item mask (model/multi_item.c: each item sees the query and
 *     itself).  logprob_start_len is the first delimiter's position: no
 *     logits rows for the query.
 *   /v1/rerank (OpenAIServingRerank, cross-encoder path): one embedding
 *     request per document on a *ForSequenceClassification model; the
 *     score is its head's first output (SGLang: embedding[0]); the list is
 *     sorted by score, highest first (stable), cut to top_n; documents
 *     echoed unless return_documents is false.  The pair is the query's
 *     tokens (with the tokenizer's special tokens) followed by the
 *     document's (without): sglc's tokenizer has no text-pair template.
 *     A generation model whose chat template says the answer can only be
 *     "yes" or "no" (Qwen3-Reranker; SGLang's text_decoder backend)
 *     instead renders that template per document (messages [query,
 *     document], `instruct`) and scores p(yes) / (p(yes) + p(no)) through
 *     the single-item /v1/score path.
 *   /v1/classify, /classify (OpenAIServingClassify): one embedding request
 *     per input; probs = softmax of the head's outputs, label =
 *     id2label[argmax].
 * Bad input answers 400 with SGLang's messages (ValueErrors of
 * score_request, the _validate_request checks). */
#include "api/api_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"

/* ---- shared ------------------------------------------------------------------------------------ */

typedef struct score_ctx {
    api_job *j;
    api_prompts *ps;
    const json_t *labels;        /* /v1/score: label_token_ids, else NULL */
    int mode;                    /* 0 embedding (rerank, classify), 1 single-item score, 2 multi-item */
    int64_t lp_start;            /* mode 2 */
} score_ctx;

/* api_spec_fn of the scoring routes. */
static int score_spec(void *ctx, int i, sched_req_spec *spec, bool *max_new_given, json_t **log_req, char *err,
                      size_t errlen)
{
    score_ctx *c = ctx;
    api_prompt *p = &c->ps->v[i];
    json_t *sp = json_pack("{s:i}", "max_new_tokens", c->mode == 1 ? 1 : 0);
    if (log_req)
        *log_req = json_pack("{s:o,s:O,s:s?}", "input_ids", api_ids_json(p->ids, p->n_ids), "sampling_params", sp,
                             "rid", c->j->rids[i]);
    *max_new_given = true;
    int32_t *ids = p->ids;
    p->ids = NULL; /* moved into spec */
    int rc = api_spec_simple(spec, ids, p->n_ids, sp, c->j->rids[i], err, errlen);
    json_decref(sp);
    if (rc || !c->labels) return rc;
    size_t n = json_array_size(c->labels);
    spec->return_logprob = true;
    spec->logprob_start_len = c->mode == 2 ? c->lp_start : -1;
    spec->token_ids_logprob = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!spec->token_ids_logprob) {
        snprintf(err, errlen, "out of memory");
        sched_req_spec_free(spec);
        return -1;
    }
    for (size_t k = 0; k < n; k++)
        spec->token_ids_logprob[k] = (int32_t)json_integer_value(json_array_get(c->labels, k));
    spec->n_token_ids_logprob = (int)n;
    return 0;
}

/* Make the job (one slot per prompt, rids fresh) and submit ps. */
static void score_submit(api_server *a, http_req *r, int kind, api_prompts *ps, json_t *state, score_ctx *c)
{
    api_job *j = api_job_new(a, r, kind, ps->n, 1);
    if (!j) {
        json_decref(state);
        api_oai_error(r, 500, "Internal error: out of memory.");
        return;
    }
    j->score = state;
    j->list_out = true;
    for (int i = 0; i < ps->n; i++) {
        char rid[48];
        api_new_rid(a, rid, sizeof rid);
        j->rids[i] = api_strdup(rid);
    }
    c->j = j;
    c->ps = ps;
    api_job_submit(a, j, score_spec, c); /* j may be answered and freed from here on */
}

/* A text prompt into ps: 0, or -1 after answering (tokenizer missing / failed / empty). */
static int add_text(api_server *a, http_req *r, api_prompts *ps, const char *text, size_t len, bool add_special)
{
    if (!a->cfg.tok) {
        api_oai_error(r, 400, "text needs the tokenizer, which --skip-tokenizer-init disabled: give token ids");
        return -1;
    }
    if (api_prompts_add_text(a, ps, text, len, add_special, NULL) || api_prompt_failed(&ps->v[ps->n - 1])) {
        api_oai_error(r, 500, "Internal error: cannot tokenize the input.");
        return -1;
    }
    return 0;
}

/* Append the ints of a JSON list to *v (grown).  0 or -1 (OOM). */
static int ids_append(int32_t **v, int64_t *n, int64_t *cap, const json_t *list)
{
    size_t m = json_array_size(list);
    if (*n + (int64_t)m + 1 > *cap) {
        int64_t nc = (*n + (int64_t)m + 1) * 2;
        int32_t *g = realloc(*v, sizeof(int32_t) * (size_t)nc);
        if (!g) return -1;
        *v = g, *cap = nc;
    }
    for (size_t i = 0; i < m; i++) (*v)[(*n)++] = (int32_t)json_integer_value(json_array_get(list, i));
    return 0;
}

/* Append one id.  0 or -1 (OOM). */
static int ids_push(int32_t **v, int64_t *n, int64_t *cap, int32_t id)
{
    if (ids_append(v, n, cap, NULL)) return -1; /* room for one more */
    (*v)[(*n)++] = id;
    return 0;
}

static bool is_str_list(const json_t *v)
{
    if (!json_is_array(v)) return false;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
    return true;
}

static bool is_ids_list_list(const json_t *v)
{
    if (!json_is_array(v)) return false;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (!api_is_id_list(x)) return false;
    return true;
}

/* SGLang's ErrorResponse fields in an answer built by a finished job. */
static void job_fail(api_job *j, int status, const char *msg)
{
    api_oai_error(j->hr, status, msg);
}

/* ---- /v1/score --------------------------------------------------------------------------------- */

void api_route_score(api_server *a, http_req *r, json_t *body)
{
    if (a->cfg.is_embedding) {
        api_oai_error(r, 400, "This model does not appear to be a generation model: the server was launched with "
                              "--is-embedding, and /v1/score needs the next-token distribution.");
        return;
    }
    const json_t *query = json_object_get(body, "query"), *items = json_object_get(body, "items");
    const json_t *labels = json_object_get(body, "label_token_ids");
    const json_t *sm = json_object_get(body, "apply_softmax"), *ifst = json_object_get(body, "item_first");
    const json_t *model = json_object_get(body, "model");
    if (json_is_null(query)) query = NULL;
    if (json_is_null(items)) items = NULL;
    if (json_is_null(labels)) labels = NULL;
    /* ScoringRequest's field types (pydantic) */
    if ((query && !json_is_string(query) && !api_is_id_list(query)) ||
        (items && !json_is_string(items) && !is_str_list(items) && !is_ids_list_list(items)) ||
        (labels && !api_is_id_list(labels)) || (sm && !json_is_boolean(sm)) || (ifst && !json_is_boolean(ifst)) ||
        (model && !json_is_string(model))) {
        api_oai_error(r, 400, "Invalid ScoringRequest: query must be a string or a list of token ids, items a "
                              "string, a list of strings or a list of token id lists, label_token_ids a list of "
                              "token ids, apply_softmax and item_first booleans, model a string.");
        return;
    }
    if (!labels) {
        api_oai_error(r, 400, "label_token_ids must be provided");
        return;
    }
    if (!items) {
        api_oai_error(r, 400, "items must be provided");
        return;
    }
    const char *mname = model ? json_string_value(model) : "default";
    if ((json_is_string(items) && !json_string_length(items)) || (json_is_array(items) && !json_array_size(items))) {
        api_respond_json(r, 200, json_pack("{s:[],s:s,s:{s:i,s:i,s:i,s:n},s:s}", "scores", "model", mname, "usage",
                                           "prompt_tokens", 0, "total_tokens", 0, "completion_tokens", 0,
                                           "prompt_tokens_details", "object", "scoring"));
        return;
    }
    int64_t vocab = a->cfg.tok ? (int64_t)tok_vocab_size(a->cfg.tok) : a->cfg.vocab_size;
    size_t k;
    json_t *v;
    json_array_foreach(labels, k, v) {
        json_int_t id = json_integer_value(v);
        if (id >= vocab || id < 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "Token ID %lld is out of vocabulary (vocab size: %lld)", (long long)id,
                     (long long)vocab);
            api_oai_error(r, 400, msg);
            return;
        }
    }
    bool text = json_is_string(query) && (json_is_string(items) || is_str_list(items));
    bool toks = api_is_id_list(query) && json_is_array(items) && is_ids_list_list(items);
    if (!text && !toks) {
        api_oai_error(r, 400, "Invalid combination of query/items types for score_request.");
        return;
    }
    bool multi = a->cfg.score.mi_on, item_first = json_is_true(ifst);
    int n_items = json_is_string(items) ? 1 : (int)json_array_size(items);
    api_prompts ps = {0};
    json_t *state = json_pack("{s:O,s:b,s:s,s:i}", "labels", labels, "softmax", json_is_true(sm), "model", mname,
                              "n_items", n_items);
    score_ctx c = {.labels = labels, .mode = multi ? 2 : 1};
    if (!state) goto oom;
    if (text) {
        const char *q = json_string_value(query);
        size_t ql = json_string_length(query);
        char *dtext = NULL;
        if (multi) { /* the delimiter's text (skip_special_tokens false), as SGLang decodes it */
            tok_decode_opts o = {.skip_special_tokens = false};
            if (!a->cfg.tok || tok_decode(a->cfg.tok, &a->cfg.score.mi_delim, 1, &o, &dtext, NULL) || !dtext) {
                free(dtext);
                json_decref(state);
                api_oai_error(r, 400, a->cfg.tok ? "cannot decode the --multi-item-scoring-delimiter token"
                                                 : "text needs the tokenizer, which --skip-tokenizer-init "
                                                   "disabled: give token ids");
                return;
            }
        }
        {
            /* single: one prompt per item; multi: query D item1 D ... itemN D */
            size_t cap = ql + 64, len = 0;
            char *buf = NULL;
            for (int i = 0; i < n_items; i++) {
                const json_t *it = json_is_string(items) ? items : json_array_get(items, (size_t)i);
                const char *s = json_string_value(it);
                size_t sl = json_string_length(it), dl = dtext ? strlen(dtext) : 0;
                if (!multi) len = 0;
                size_t need = ql + sl + 2 * dl + 1 + len;
                if (!buf || need > cap) {
                    cap = need * 2;
                    char *g = realloc(buf, cap);
                    if (!g) {
                        free(buf), free(dtext);
                        goto oom;
                    }
                    buf = g;
                }
                if (!multi) {
                    if (item_first) memcpy(buf, s, sl), memcpy(buf + sl, q, ql);
                    else memcpy(buf, q, ql), memcpy(buf + ql, s, sl);
                    if (add_text(a, r, &ps, buf, ql + sl, true)) {
                        free(buf), free(dtext);
                        json_decref(state);
                        api_prompts_free(&ps);
                        return;
                    }
                    continue;
                }
                if (i == 0) memcpy(buf, q, ql), len = ql;
                memcpy(buf + len, dtext, dl), len += dl;
                memcpy(buf + len, s, sl), len += sl;
                if (i == n_items - 1) memcpy(buf + len, dtext, dl), len += dl;
            }
            if (multi && add_text(a, r, &ps, buf, len, true)) {
                free(buf), free(dtext);
                json_decref(state);
                api_prompts_free(&ps);
                return;
            }
            free(buf);
            free(dtext);
        }
    } else if (multi) {
        int32_t *ids = NULL;
        int64_t n = 0, cap = 0;
        if (ids_append(&ids, &n, &cap, query)) goto oom_ids;
        for (int i = 0; i < n_items; i++)
            if (ids_push(&ids, &n, &cap, a->cfg.score.mi_delim) ||
                ids_append(&ids, &n, &cap, json_array_get(items, (size_t)i)))
                goto oom_ids;
        if (ids_push(&ids, &n, &cap, a->cfg.score.mi_delim) || api_prompts_add_owned(&ps, ids, n)) goto oom_ids;
        goto built;
    oom_ids:
        free(ids);
        goto oom;
    } else {
        for (int i = 0; i < n_items; i++) {
            int32_t *ids = NULL;
            int64_t n = 0, cap = 0;
            const json_t *it = json_array_get(items, (size_t)i);
            if (ids_append(&ids, &n, &cap, item_first ? it : query) || ids_append(&ids, &n, &cap, item_first ? query : it) ||
                api_prompts_add_owned(&ps, ids, n)) {
                free(ids);
                goto oom;
            }
        }
    }
built:
    for (int i = 0; i < ps.n; i++)
        if (ps.v[i].n_ids == 0) {
            json_decref(state);
            api_prompts_free(&ps);
            api_oai_error(r, 400, "The input has no tokens (empty text).");
            return;
        }
    if (multi) { /* the delimiter positions: N + 1 of them, as SGLang checks */
        api_prompt *p = &ps.v[0];
        json_t *pos = json_array();
        for (int64_t t = 0; t < p->n_ids; t++)
            if (p->ids[t] == a->cfg.score.mi_delim) json_array_append_new(pos, json_integer(t));
        if ((int)json_array_size(pos) != n_items + 1) {
            char msg[200];
            snprintf(msg, sizeof msg, "Expected %d input_token_ids_logprobs for multi-item scoring with %d items, "
                     "but got %d.", n_items + 1, n_items, (int)json_array_size(pos));
            json_decref(pos);
            json_decref(state);
            api_prompts_free(&ps);
            api_oai_error(r, 500, msg);
            return;
        }
        c.lp_start = json_integer_value(json_array_get(pos, 0));
        json_object_set_new(state, "pos", pos);
        json_object_set_new(state, "lp_start", json_integer(c.lp_start));
    }
    score_submit(a, r, JOB_SCORE, &ps, state, &c);
    api_prompts_free(&ps);
    return;
oom:
    json_decref(state);
    api_prompts_free(&ps);
    api_oai_error(r, 500, "Internal error: out of memory.");
}

/* Scores of one item from its label logprobs (-inf when absent). */
static json_t *score_list(const float *lp, int n, bool softmax)
{
    json_t *o = json_array();
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) if (lp[i] > mx) mx = lp[i];
    if (softmax)
        for (int i = 0; i < n; i++) sum += isfinite(lp[i]) ? exp(lp[i] - mx) : 0.0;
    for (int i = 0; i < n; i++) {
        double p = !isfinite(lp[i]) ? 0.0 : softmax ? exp(lp[i] - mx) / sum : exp(lp[i]);
        json_array_append_new(o, json_real(p));
    }
    return o;
}

static void score_answer(api_job *j)
{
    json_t *st = j->score;
    int n = (int)json_array_size(json_object_get(st, "labels"));
    bool sm = json_is_true(json_object_get(st, "softmax"));
    json_t *scores = json_array();
    float *lp = malloc(sizeof(float) * (size_t)(n ? n : 1));
    int64_t pt = 0;
    if (!lp || !scores) {
        free(lp);
        json_decref(scores);
        job_fail(j, 500, "Internal error: out of memory.");
        return;
    }
    json_t *pos = json_object_get(st, "pos");
    for (int s = 0; s < j->n_slots; s++) pt += j->prompt_tokens[j->slots[s].prompt];
    if (pos) { /* multi-item: input logprobs at delimiters 1..N */
        sched_result *res = &j->slots[0].res;
        int64_t base = json_integer_value(json_object_get(st, "lp_start"));
        for (size_t k = 1; k < json_array_size(pos); k++) {
            int64_t e = json_integer_value(json_array_get(pos, k)) - base;
            if (!res->in_tid_lp || res->n_tid != n || e < 1 || e >= res->n_in) {
                free(lp);
                json_decref(scores);
                job_fail(j, 500, "input_token_ids_logprobs is empty for multi-item scoring request. This indicates "
                                 "token_ids_logprobs were not computed properly for Multi-Item Scoring.");
                return;
            }
            for (int i = 0; i < n; i++) lp[i] = res->in_tid_lp[(size_t)e * n + i];
            json_array_append_new(scores, score_list(lp, n, sm));
        }
    } else {
        for (int s = 0; s < j->n_slots; s++) {
            sched_result *res = &j->slots[s].res;
            if (!res->tid_lp || res->n < 1 || res->n_tid != n) {
                free(lp);
                json_decref(scores);
                job_fail(j, 500, "output_logprobs is empty for a scoring request.");
                return;
            }
            for (int i = 0; i < n; i++) lp[i] = res->tid_lp[i];
            json_array_append_new(scores, score_list(lp, n, sm));
        }
    }
    free(lp);
    api_respond_json(j->hr, 200, json_pack("{s:o,s:O,s:{s:I,s:I,s:i,s:n},s:s}", "scores", scores, "model",
                                           json_object_get(st, "model"), "usage", "prompt_tokens", (json_int_t)pt,
                                           "total_tokens", (json_int_t)pt, "completion_tokens", 0,
                                           "prompt_tokens_details", "object", "scoring"));
}

/* ---- /v1/rerank and /v1/classify --------------------------------------------------------------- */

/* 0 when the server runs a sequence classifier, else -1 after answering. */
static int need_classifier(api_server *a, http_req *r, const char *route)
{
    if (!a->cfg.is_embedding) {
        api_oai_error(r, 400, "This model does not appear to be an embedding model by default. Please add "
                              "`--is-embedding` when launching the server or try another model.");
        return -1;
    }
    if (a->cfg.score.n_labels <= 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s needs a sequence-classification model (*ForSequenceClassification, a score "
                 "head); this embedding model has none.", route);
        api_oai_error(r, 400, msg);
        return -1;
    }
    return 0;
}

static bool blank(const char *s)
{
    for (; *s; s++)
        if (!strchr(" \t\n\r\f\v", *s)) return false;
    return true;
}

/* SGLang's _is_qwen3_reranker_template: the chat template says the answer
 * can only be "yes" or "no" (case-insensitive). */
static bool reranker_template(const tmpl_chat *c)
{
    if (!c || !c->source) return false;
    size_t n = strlen(c->source);
    char *t = malloc(n + 1);
    if (!t) return false;
    for (size_t i = 0; i <= n; i++) t[i] = (char)((c->source[i] >= 'A' && c->source[i] <= 'Z') ? c->source[i] + 32 : c->source[i]);
    bool yes = strstr(t, "answer can only be \"yes\" or \"no\"") ||
               (strstr(t, "answer can only be") && strstr(t, "\"yes\"") && strstr(t, "\"no\""));
    free(t);
    return yes;
}

/* SGLang's _get_yes_no_token_ids: "yes" / "no" encoded without special
 * tokens when each is one token, else the vocabulary's tokens, else
 * Qwen3's ids (9693 / 2152, with a warning). */
static void yes_no_ids(const tok_tokenizer *tok, int32_t *yes, int32_t *no)
{
    tok_ids y = {0}, n = {0};
    bool one = tok_encode(tok, "yes", 3, false, &y) == 0 && tok_encode(tok, "no", 2, false, &n) == 0 && y.n == 1 &&
               n.n == 1;
    *yes = one ? y.ids[0] : tok_token_to_id(tok, "yes", 3);
    *no = one ? n.ids[0] : tok_token_to_id(tok, "no", 2);
    tok_ids_free(&y), tok_ids_free(&n);
    if (*yes < 0 || *no < 0) {
        log_warn("Using fallback token IDs for yes/no (9693/2152)");
        *yes = 9693, *no = 2152;
    }
}

/* The decoder-only reranker (Qwen3-Reranker): each document's prompt is
 * the chat template rendered with messages [query, document] (both user)
 * and `instruct` when given; score = p(yes) / (p(yes) + p(no)) of the
 * next token (/v1/score's single-item path). */
static void rerank_decoder(api_server *a, http_req *r, const json_t *q, const json_t *docs, const json_t *body,
                           json_t *state)
{
    if (a->cfg.is_embedding) {
        json_decref(state);
        api_oai_error(r, 400, "Detected Qwen3 reranker chat template, but the server is not in generation mode. "
                              "Please relaunch without --is-embedding for Qwen3-Reranker models.");
        return;
    }
    int32_t yes, no;
    yes_no_ids(a->cfg.tok, &yes, &no);
    int64_t vocab = (int64_t)tok_vocab_size(a->cfg.tok);
    if (yes >= vocab || no >= vocab) {
        char msg[160];
        snprintf(msg, sizeof msg, "Token ID %d is out of vocabulary (vocab size: %lld)", yes >= vocab ? yes : no,
                 (long long)vocab);
        json_decref(state);
        api_oai_error(r, 400, msg);
        return;
    }
    const json_t *ins = json_object_get(body, "instruct");
    json_t *kw = json_is_string(ins) && json_string_length(ins) ? json_pack("{s:O}", "instruct", ins) : NULL;
    json_t *labels = json_pack("[i,i]", yes, no);
    api_prompts ps = {0};
    size_t i;
    json_t *d;
    json_array_foreach(docs, i, d) {
        json_t *msgs = json_pack("[{s:s,s:O},{s:s,s:O}]", "role", "user", "content", q, "role", "user", "content", d);
        char *out = NULL, *err = NULL;
        size_t len = 0;
        int rc = msgs ? tmpl_chat_render(a->cfg.chat, msgs, NULL, NULL, 0, kw, &out, &len, &err) : -1;
        json_decref(msgs);
        if (rc || add_text(a, r, &ps, out, len, true)) {
            if (rc) api_oai_error(r, 400, err ? err : "cannot render the reranker template");
            free(out), free(err);
            json_decref(kw), json_decref(labels), json_decref(state);
            api_prompts_free(&ps);
            return;
        }
        free(out);
    }
    json_decref(kw);
    json_object_set_new(state, "decoder", json_true());
    json_object_set(state, "labels", labels);
    score_ctx c = {.labels = labels, .mode = 1};
    score_submit(a, r, JOB_RERANK, &ps, state, &c);
    json_decref(labels);
    api_prompts_free(&ps);
}

void api_route_rerank(api_server *a, http_req *r, json_t *body)
{
    const json_t *q = json_object_get(body, "query"), *docs = json_object_get(body, "documents");
    const json_t *top = json_object_get(body, "top_n"), *rd = json_object_get(body, "return_documents");
    if (!json_is_string(q) || !is_str_list(docs) || (top && !json_is_null(top) && !json_is_integer(top)) ||
        (rd && !json_is_boolean(rd))) {
        api_oai_error(r, 400, "Invalid V1RerankReqInput: query must be a string, documents a list of strings, "
                              "top_n an integer, return_documents a boolean.");
        return;
    }
    if (json_is_integer(top) && json_integer_value(top) < 1) {
        api_oai_error(r, 400, "Value error, parameter top_n should be larger than 0.");
        return;
    }
    const char *err = NULL;
    size_t i;
    json_t *d;
    if (!json_string_length(q)) err = "Query cannot be empty";
    else if (blank(json_string_value(q))) err = "Query cannot be empty or whitespace only";
    else if (!json_array_size(docs)) err = "Documents cannot be empty";
    else json_array_foreach(docs, i, d) {
        if (!json_string_length(d)) {
            err = "Each document must be a non-empty string";
            break;
        }
        if (blank(json_string_value(d))) {
            err = "Each document cannot be empty or whitespace only";
            break;
        }
    }
    if (err) {
        api_oai_error(r, 400, err);
        return;
    }
    if (!a->cfg.tok) {
        api_oai_error(r, 400, "text needs the tokenizer, which --skip-tokenizer-init disabled");
        return;
    }
    if (reranker_template(a->cfg.chat)) { /* SGLang's text_decoder backend */
        json_t *st = json_pack("{s:O,s:b}", "documents", docs, "return_documents", !rd || json_is_true(rd));
        if (st && json_is_integer(top)) json_object_set_new(st, "top_n", json_integer(json_integer_value(top)));
        if (!st) {
            api_oai_error(r, 500, "Internal error: out of memory.");
            return;
        }
        rerank_decoder(a, r, q, docs, body, st);
        return;
    }
    if (need_classifier(a, r, "/v1/rerank")) return;
    /* the pair: query (with special tokens) then document (without) */
    tok_ids qi = {0};
    if (tok_encode(a->cfg.tok, json_string_value(q), json_string_length(q), true, &qi)) {
        api_oai_error(r, 500, "Internal error: cannot tokenize the input.");
        return;
    }
    api_prompts ps = {0};
    json_array_foreach(docs, i, d) {
        tok_ids di = {0};
        int32_t *ids = NULL;
        if (tok_encode(a->cfg.tok, json_string_value(d), json_string_length(d), false, &di) ||
            !(ids = malloc(sizeof(int32_t) * (qi.n + di.n + 1)))) {
            tok_ids_free(&di), tok_ids_free(&qi), api_prompts_free(&ps);
            api_oai_error(r, 500, "Internal error: cannot tokenize the input.");
            return;
        }
        memcpy(ids, qi.ids, sizeof(int32_t) * qi.n);
        memcpy(ids + qi.n, di.ids, sizeof(int32_t) * di.n);
        int64_t n = (int64_t)(qi.n + di.n);
        tok_ids_free(&di);
        if (api_prompts_add_owned(&ps, ids, n)) {
            free(ids), tok_ids_free(&qi), api_prompts_free(&ps);
            api_oai_error(r, 500, "Internal error: out of memory.");
            return;
        }
    }
    tok_ids_free(&qi);
    json_t *state = json_pack("{s:O,s:b}", "documents", docs, "return_documents", !rd || json_is_true(rd));
    if (state && json_is_integer(top)) json_object_set_new(state, "top_n", json_integer(json_integer_value(top)));
    score_ctx c = {.mode = 0};
    score_submit(a, r, JOB_RERANK, &ps, state, &c);
    api_prompts_free(&ps);
}

typedef struct rr_ent {
    double score;
    int index;
} rr_ent;

static int rr_cmp(const void *x, const void *y)
{
    const rr_ent *a = x, *b = y;
    if (a->score != b->score) return a->score < b->score ? 1 : -1;
    return a->index - b->index; /* stable: Python's sort keeps equal scores in order */
}

static void rerank_answer(api_job *j)
{
    json_t *st = j->score, *docs = json_object_get(st, "documents");
    rr_ent *e = malloc(sizeof *e * (size_t)j->n_slots);
    if (!e) {
        job_fail(j, 500, "Internal error: out of memory.");
        return;
    }
    bool dec = json_is_true(json_object_get(st, "decoder"));
    for (int s = 0; s < j->n_slots; s++) {
        api_slot *sl = &j->slots[s];
        if (dec) { /* p(yes) / (p(yes) + p(no)), 0 when both vanish */
            const sched_result *res = &sl->res;
            if (!res->tid_lp || res->n < 1 || res->n_tid != 2) {
                free(e);
                job_fail(j, 500, "output_logprobs is empty for a rerank request.");
                return;
            }
            double py = exp(res->tid_lp[0]), pn = exp(res->tid_lp[1]);
            e[s].score = py + pn > 0 ? py / (py + pn) : 0.0, e[s].index = s;
            continue;
        }
        if (!sl->emb || sl->n_emb < 1) {
            free(e);
            job_fail(j, 500, "Invalid embedding score for rerank: the request returned no score.");
            return;
        }
        e[s].score = sl->emb[0], e[s].index = s;
    }
    qsort(e, (size_t)j->n_slots, sizeof *e, rr_cmp);
    int n = j->n_slots;
    json_t *top = json_object_get(st, "top_n");
    if (json_is_integer(top) && json_integer_value(top) < n) n = (int)json_integer_value(top);
    bool rd = json_is_true(json_object_get(st, "return_documents"));
    json_t *out = json_array();
    for (int k = 0; k < n; k++) {
        api_slot *sl = &j->slots[e[k].index];
        json_t *o = json_pack("{s:f,s:i,s:o}", "score", e[k].score, "index", e[k].index, "meta_info",
                              dec ? json_null() : api_embed_meta(j, sl)); /* SGLang: none on the decoder path */
        if (rd) json_object_set(o, "document", json_array_get(docs, (size_t)e[k].index));
        json_array_append_new(out, o);
    }
    free(e);
    api_respond_json(j->hr, 200, out);
}

void api_route_classify(api_server *a, http_req *r, json_t *body)
{
    const json_t *in = json_object_get(body, "input");
    const char *err = NULL;
    char msg[160];
    /* OpenAIServingClassify._validate_request */
    if (!in || json_is_null(in) || (json_is_string(in) && !json_string_length(in)) ||
        (json_is_array(in) && !json_array_size(in))) {
        err = "Input cannot be empty";
    } else if (json_is_string(in)) {
        if (blank(json_string_value(in))) err = "Input cannot be empty or whitespace only";
    } else if (json_is_array(in)) {
        const json_t *first = json_array_get(in, 0);
        size_t i;
        json_t *x;
        if (json_is_string(first)) {
            json_array_foreach(in, i, x) {
                if (!json_is_string(x)) {
                    err = "All items in input list must be strings";
                    break;
                }
                if (blank(json_string_value(x))) {
                    snprintf(msg, sizeof msg, "Input at index %zu cannot be empty or whitespace only", i);
                    err = msg;
                    break;
                }
            }
        } else if (json_is_integer(first)) {
            json_array_foreach(in, i, x) {
                if (!json_is_integer(x)) {
                    err = "All items in input list must be integers";
                    break;
                }
                if (json_integer_value(x) < 0) {
                    snprintf(msg, sizeof msg, "Token ID at index %zu must be non-negative", i);
                    err = msg;
                    break;
                }
            }
        } else if (!is_ids_list_list(in)) {
            err = "Invalid ClassifyRequest: input must be a string, a list of strings or a list of token ids.";
        }
    } else {
        err = "Invalid ClassifyRequest: input must be a string, a list of strings or a list of token ids.";
    }
    if (err) {
        api_oai_error(r, 400, err);
        return;
    }
    if (need_classifier(a, r, "/v1/classify")) return;
    api_prompts ps = {0};
    int bad = 0;
    if (json_is_string(in)) {
        bad = add_text(a, r, &ps, json_string_value(in), json_string_length(in), true);
    } else if (json_is_string(json_array_get(in, 0))) {
        size_t i;
        json_t *x;
        json_array_foreach(in, i, x) if (!bad) bad = add_text(a, r, &ps, json_string_value(x), json_string_length(x), true);
    } else if (json_is_integer(json_array_get(in, 0))) {
        int32_t *ids = NULL;
        int64_t n = 0, cap = 0;
        if (ids_append(&ids, &n, &cap, in) || api_prompts_add_owned(&ps, ids, n)) {
            free(ids);
            api_oai_error(r, 500, "Internal error: out of memory.");
            bad = 1;
        }
    } else {
        size_t i;
        json_t *x;
        json_array_foreach(in, i, x) {
            int32_t *ids = NULL;
            int64_t n = 0, cap = 0;
            if (!bad && (ids_append(&ids, &n, &cap, x) || api_prompts_add_owned(&ps, ids, n))) {
                free(ids);
                api_oai_error(r, 500, "Internal error: out of memory.");
                bad = 1;
            }
        }
    }
    if (bad) {
        api_prompts_free(&ps);
        return;
    }
    for (int i = 0; i < ps.n; i++)
        if (ps.v[i].n_ids == 0) {
            api_prompts_free(&ps);
            api_oai_error(r, 400, "Input cannot be empty");
            return;
        }
    json_t *state = json_object();
    score_ctx c = {.mode = 0};
    score_submit(a, r, JOB_CLASSIFY, &ps, state, &c);
    api_prompts_free(&ps);
}

static void classify_answer(api_job *j)
{
    const api_score_model *sm = &j->api->cfg.score;
    json_t *data = json_array();
    int64_t pt = 0;
    for (int s = 0; s < j->n_slots; s++) {
        api_slot *sl = &j->slots[s];
        pt += j->prompt_tokens[sl->prompt];
        json_t *probs = json_array();
        const char *label = "Default";
        if (sl->emb && sl->n_emb > 0) {
            double mx = -INFINITY, sum = 0;
            int am = 0;
            for (int i = 0; i < sl->n_emb; i++)
                if (sl->emb[i] > mx) mx = sl->emb[i], am = i;
            for (int i = 0; i < sl->n_emb; i++) sum += exp(sl->emb[i] - mx);
            for (int i = 0; i < sl->n_emb; i++) json_array_append_new(probs, json_real(exp(sl->emb[i] - mx) / sum));
            if (am < sm->n_labels) label = sm->labels[am];
        } else {
            json_array_append_new(probs, json_real(1.0));
        }
        json_array_append_new(data, json_pack("{s:i,s:s,s:o,s:I}", "index", s, "label", label, "probs", probs,
                                              "num_classes", (json_int_t)json_array_size(probs)));
    }
    char rid[48], id[64];
    api_new_rid(j->api, rid, sizeof rid);
    snprintf(id, sizeof id, "classify-%s", rid);
    api_respond_json(j->hr, 200, json_pack("{s:s,s:s,s:I,s:s,s:o,s:{s:I,s:I,s:i,s:n}}", "id", id, "object", "list",
                                           "created", (json_int_t)time(NULL), "model", j->api->served, "data", data,
                                           "usage", "prompt_tokens", (json_int_t)pt, "total_tokens", (json_int_t)pt,
                                           "completion_tokens", 0, "prompt_tokens_details"));
}

void api_score_answer(api_job *j)
{
    if (j->kind == JOB_SCORE) score_answer(j);
    else if (j->kind == JOB_RERANK) rerank_answer(j);
    else classify_answer(j);
}
