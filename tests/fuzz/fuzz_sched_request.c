/* fuzz_sched_request — a /generate request body (one line of
 * `generate --requests`) through api_gen_req_from_json, then a response built
 * from a synthetic event with the request's logprob options.  Checks: no
 * crash, no leak (ASan), an error always says why, a parsed request has
 * input ids, and the response renders as JSON. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"
#include "api/api_generate_json.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_CRITICAL);
    json_t *obj = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!obj) return 0;
    sched_req_spec sp;
    char err[512];
    err[0] = 0;
    if (api_gen_req_from_json(obj, &sp, err, sizeof err) != 0) {
        if (!err[0]) abort();
        sched_req_spec_free(&sp);
        json_decref(obj);
        return 0;
    }
    if (sp.n_input < 1 || !sp.input_ids) abort();
    /* a response with this request's logprob shape */
    int top = sp.top_logprobs_num > 8 ? 8 : sp.top_logprobs_num;
    int n_tid = sp.n_token_ids_logprob > 8 ? 8 : sp.n_token_ids_logprob;
    sched_event e;
    memset(&e, 0, sizeof e);
    int32_t ids[3] = {sp.input_ids[0], 1, 2}, top_ids[24] = {0}, tids[8] = {0};
    float lps[3] = {-0.5f, -1.0f, -2.0f}, top_lp[24] = {0}, tid_lp[24] = {0};
    e.kind = SCHED_EV_FINISH;
    e.rid = sp.rid;
    e.ids = ids;
    e.n_ids = 3;
    e.logprobs = sp.return_logprob ? lps : NULL;
    e.top_n = sp.return_logprob ? top : 0;
    e.top_ids = top_ids;
    e.top_logprobs = top_lp;
    e.n_tid = sp.return_logprob ? n_tid : 0;
    e.tids = tids;
    e.tid_logprobs = tid_lp;
    e.finish = SCHED_FINISH_LENGTH;
    e.finish_length = 3;
    e.prompt_tokens = sp.n_input;
    sched_result r;
    sched_result_init(&r, sp.return_logprob);
    if (sched_result_add(&r, &e) == 0) {
        json_t *o = api_gen_result_json(&r);
        if (!o) abort();
        char *txt = json_dumps(o, JSON_COMPACT);
        if (!txt) abort();
        free(txt);
        json_decref(o);
    }
    sched_result_free(&r);
    sched_req_spec_free(&sp);
    json_decref(obj);
    return 0;
}
