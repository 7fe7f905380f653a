/* cli_warmup — see cli_warmup.h.
 *
 * DESIGN: a warm-up is a list of requests, each built as the JSON a
 * client would send (so api_gen_req_from_json validates it exactly as it
 * would a real one), submitted to the scheduler and waited for before the
 * next (SGLang awaits each one in turn).  This runs before the http front
 * exists, so the caller's thread may read the scheduler's outbox. */
#include "cli/cli_warmup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/api_generate_json.h"
#include "util/log.h"
#include "util/rng.h"

typedef int (*warmup_fn)(sched *s, int64_t vocab, int64_t max_input, uint64_t *rng);

int cli_warmup_submit_wait(sched *s, sched_req_spec *sp)
{
    uint64_t id = sched_submit(s, sp);
    for (int tries = 0; tries < 600; tries++) {
        sched_event *e = sched_wait(s, 1.0);
        if (!e) continue;
        bool done = e->id == id && e->kind == SCHED_EV_FINISH;
        bool bad = done && e->finish == SCHED_FINISH_ABORT;
        if (bad) log_error("warm-up request failed: %s", e->finish_str ? e->finish_str : "?");
        sched_event_free(e);
        if (done) return bad ? -1 : 0;
    }
    log_error("warm-up request did not finish in 600 s");
    return -1;
}

/* Submit one request given as a client's JSON and wait for it.  0, or -1. */
static int run_one(sched *s, json_t *req)
{
    sched_req_spec sp;
    char err[256];
    if (api_gen_req_from_json(req, &sp, err, sizeof err)) {
        log_error("warm-up request: %s", err);
        return -1;
    }
    return cli_warmup_submit_wait(s, &sp);
}

static json_t *random_ids(int64_t n, int64_t vocab, uint64_t *rng)
{
    json_t *a = json_array();
    /* SGLang draws ids below 2**16; a smaller vocabulary bounds them here */
    int64_t hi = vocab < 65536 ? vocab : 65536;
    for (int64_t i = 0; i < n; i++) json_array_append_new(a, json_integer(rng_range(rng, 0, hi - 1)));
    return a;
}

static int warm_voice_chat(sched *s, int64_t vocab, int64_t max_input, uint64_t *rng)
{
    int done = 0;
    for (int i = 1; i < 512; i++) {
        int64_t size = (int64_t)i * 4;
        if (size >= max_input) break;
        json_t *q = json_pack("{s:o,s:{s:i,s:f,s:[i],s:f}}", "input_ids", random_ids(size, vocab, rng),
                              "sampling_params", "max_new_tokens", 30, "temperature", 0.8,
                              "stop_token_ids", 1, "min_p", 0.0);
        int rc = q ? run_one(s, q) : -1;
        json_decref(q);
        if (rc) return -1;
        done++;
    }
    log_info("warmup voice_chat: %d requests", done);
    return 0;
}

static int warm_prefill_shapes(sched *s, int64_t vocab, int64_t max_input, uint64_t *rng)
{
    /* powers of two from 64 to 32768 and the midpoints between them,
     * rounded up to a page of 64 (SGLang's list) */
    int64_t sizes[64];
    int n = 0;
    for (int64_t base = 64; base <= 32768; base *= 2) {
        sizes[n++] = base;
        int64_t mid = (base * 3 / 2 + 63) / 64 * 64;
        if (mid <= 32768) sizes[n++] = mid;
    }
    int done = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] >= max_input) continue;
        json_t *q = json_pack("{s:o,s:{s:i,s:f}}", "input_ids", random_ids(sizes[i], vocab, rng),
                              "sampling_params", "max_new_tokens", 1, "temperature", 0.0);
        int rc = q ? run_one(s, q) : -1;
        json_decref(q);
        if (rc) return -1;
        done++;
    }
    log_info("warmup prefill_shapes: %d sizes", done);
    return 0;
}

static const struct {
    const char *name;
    warmup_fn fn;
} registry[] = {
    {"voice_chat", warm_voice_chat},
    {"prefill_shapes", warm_prefill_shapes},
};

static warmup_fn lookup(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (strlen(registry[i].name) == len && !strncmp(registry[i].name, name, len)) return registry[i].fn;
    return NULL;
}

int cli_warmups_check(const char *list, char *err, size_t errlen)
{
    const char *p = list ? list : "";
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!lookup(p, len)) {
            char known[256] = "";
            for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
                if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
                strncat(known, registry[i].name, sizeof known - strlen(known) - 1);
            }
            snprintf(err, errlen, "--warmups: unknown warmup '%.*s' (known: %s)", (int)(len > 100 ? 100 : len), p,
                     known);
            return -1;
        }
        if (!c) return 0;
        p = c + 1;
    }
}

int cli_warmups_run(sched *s, const char *list, int64_t vocab, uint64_t seed)
{
    int64_t max_input = sched_max_req_input_len(s);
    uint64_t rng = seed ^ 0x5741524d55505321ull;
    const char *p = list;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        warmup_fn fn = lookup(p, len);
        if (!fn) return -1;
        log_info("Running warmup %.*s", (int)len, p);
        if (fn(s, vocab > 0 ? vocab : 1, max_input, &rng)) return -1;
        if (!c) break;
        p = c + 1;
    }
    log_info("Warmup ended");
    return 0;
}
