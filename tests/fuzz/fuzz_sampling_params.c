/* fuzz_sampling_params — the sampling_params JSON parser and verify(), and
 * then the sampler itself with whatever parameters passed verification
 * (logits derived from the input, 64-token vocabulary).  Checks: no crash,
 * no leak (ASan), errors always come with a message, a verified request
 * always samples an in-vocabulary token with finite-or-clamped logprobs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "util/log.h"

#define V 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_CRITICAL);
    sampling_params p;
    char err[512];
    err[0] = 0;
    if (sampling_params_parse(&p, (const char *)data, size, err, sizeof err) != 0) {
        if (!err[0]) abort(); /* an error must say why */
        sampling_params_free(&p);
        return 0;
    }
    err[0] = 0;
    if (sampling_params_verify(&p, V, err, sizeof err) != 0) {
        if (!err[0]) abort();
        sampling_params_free(&p);
        return 0;
    }
    sampling_params_check_supported(&p, err, sizeof err);
    sampling_state st;
    int32_t eos = 3;
    if (sampling_state_init(&st, &p, V, &eos, 1, size) != 0) abort();
    static float scratch[4096];
    float logits[V];
    int32_t prompt[16];
    for (int i = 0; i < 16; i++) prompt[i] = (int32_t)(data[i % size] % V);
    sampling_state_add_prompt(&st, prompt, 16);
    int32_t top_ids[8], ids[2] = {1, 70};
    float top_lp[8], ids_lp[2];
    sampling_logprob_req lp = {.want = true, .top_n = 8, .ids = ids, .n_ids = 2};
    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < V; i++) logits[i] = (float)(data[(i * 7 + step) % size]) / 16.0f - 8.0f;
        if (size > 3 && data[size - 1] == 0xff) logits[step] = NAN;
        sampling_result r = {.top_ids = top_ids, .top_logprobs = top_lp, .ids_logprobs = ids_lp};
        if (sampling_sample(&st, logits, scratch, &lp, &r) != 0) abort();
        if (r.token < 0 || r.token >= V) abort();
        if (isnan(r.logprob) || r.logprob > 1e-4f) abort();
        if (r.n_top != 8) abort();
        if (!isnan(ids_lp[1])) abort();
        if (sampling_state_accept(&st, r.token) != 0) abort();
    }
    sampling_state_free(&st);
    sampling_params_free(&p);
    return 0;
}
