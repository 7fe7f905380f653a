/* cmd_generate_requests — `sglc generate --requests FILE.jsonl`: a batch of
 * SGLang /generate bodies run concurrently through the scheduler, offline.
 *
 * DESIGN: read every line (one request object each; blank lines skipped),
 * submit all of them at once, run the synchronous scheduler loop until
 * idle, then write one response line per request in input order: SGLang's
 * response object, or a list of n objects when sampling_params.n > 1, or
 * {"error": {"message": ..., "line": N}} for a line that could not be
 * parsed.  Scheduler arguments use SGLang's names.
 *
 * --dp-size N > 1: the requests go through the data-parallel controller
 * (dp/dp.h: N scheduler replicas over one copy of the weights, each on its
 * own threads, --load-balance-method); a line's data_parallel_rank (0 to
 * N-1) pins it to a replica and bootstrap_room feeds
 * follow_bootstrap_room, as on the server.  The responses are still
 * written in input order; the log line sums every replica's counters.
 * N = 1 keeps the synchronous driver in this thread. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_dp_tp.h"
#include "cli/cli_grammar.h"
#include "cli/cli_spec.h"
#include "cli/cli_lora.h"
#include "lora/lora.h"
#include "api/api.h"
#include "api/api_generate_json.h"
#include "api/api_output.h"
#include "cli/cli_sched.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"
#include "util/timeutil.h"

typedef struct line_req {
    int line_no;
    char *error;      /* owned: parse error, or NULL */
    uint64_t id;
    int n;            /* results (sampling_params.n) */
    bool logprob;
    bool skip_special, spaces_special; /* detokenization options of the request */
    bool no_stop_trim;
    int dp_rank;      /* data_parallel_rank, -1 = the load balancer's choice */
    int64_t room;     /* bootstrap_room, -1 = none */
    api_output *outs; /* (n) owned or NULL: output stages for the stop strings (api_output.h) */
} line_req;

/* Fill a response's "text" with the detokenized output_ids (no-op without
 * a tokenizer: ids in, ids out). */
static void set_text(json_t *o, const tok_tokenizer *tk, const tok_decode_opts *dop, bool trim)
{
    json_t *ids = o ? json_object_get(o, "output_ids") : NULL;
    if (!tk || !json_is_array(ids)) return;
    size_t n = json_array_size(ids);
    int32_t *v = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!v) return;
    for (size_t i = 0; i < n; i++) v[i] = (int32_t)json_integer_value(json_array_get(ids, i));
    char *text = NULL;
    size_t len = 0;
    if (tok_decode(tk, v, n, dop, &text, &len) == 0) {
        /* a matched stop string is cut from the text with what follows it,
         * unless no_stop_trim (SGLang's detokenizer does the same) */
        json_t *fr = json_object_get(json_object_get(o, "meta_info"), "finish_reason");
        json_t *m = json_object_get(fr, "matched");
        if (trim && json_is_string(m) && json_string_length(m) > 0) {
            const char *hit = memmem(text, len, json_string_value(m), json_string_length(m));
            if (hit) len = (size_t)(hit - text);
        }
        json_object_set_new(o, "text", json_stringn(text, len));
    }
    free(text);
    free(v);
}

static int cmd_generate_requests_run(const args_server *a, long long threads, const char *req_path,
                                     const char *out_path);

/* A line's data_parallel_rank and bootstrap_room (absent or null: -1),
 * with the server's messages (api_dp.c).  0, or -1 with err set. */
static int line_dp_fields(const json_t *obj, int n_dp, int *rank, int64_t *room, char *err, size_t errlen)
{
    *rank = -1, *room = -1;
    const json_t *v = json_object_get(obj, "data_parallel_rank");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) {
            snprintf(err, errlen, "data_parallel_rank must be an integer or null");
            return -1;
        }
        json_int_t x = json_integer_value(v);
        if (x < 0 || x >= n_dp) {
            snprintf(err, errlen, "data_parallel_rank %lld is out of range: --dp-size is %d (ranks 0 to %d)",
                     (long long)x, n_dp, n_dp - 1);
            return -1;
        }
        *rank = (int)x;
    }
    v = json_object_get(obj, "bootstrap_room");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(err, errlen, "bootstrap_room must be a non-negative integer or null");
            return -1;
        }
        *room = (int64_t)json_integer_value(v);
    }
    return 0;
}

int cmd_generate_requests(int argc, char **argv)
{
    const char *req_path = NULL, *out_path = NULL;
    long long threads = 0;
    const args_extra extra[] = {
        {.name = "--requests", .metavar = "FILE", .help = "The requests, one JSON object per line ('-' = stdin).",
         .value = &req_path},
        {.name = "--output", .metavar = "FILE", .help = "Where the responses go.", .value = &out_path,
         .def = "stdout"},
        CLI_EXTRA_THREADS(&threads),
        {0},
    };
    static const int shown[] = {CLI_MODEL_ARG_IDS, CLI_GRAMMAR_ARG_IDS, ARG_ID_tokenizer_path, ARG_ID_skip_tokenizer_init,
                                CLI_SCHED_ARG_IDS, CLI_SPEC_ARG_IDS, CLI_LORA_ARG_IDS, ARG_ID_dp_size,
                                ARG_ID_load_balance_method, ARG_ID_config, ARG_COUNT};
    const args_cmd cmd = {
        .usage = "usage: sglc generate --model-path DIR --requests FILE.jsonl [--output FILE] [options]",
        .about = "Run every line of FILE.jsonl (a /generate body: input_ids or text, sampling_params, "
                 "rid, priority, cache_salt, lora_path, return_logprob, top_logprobs_num, token_ids_logprob) "
                 "concurrently through the scheduler; write one response line per request, in order.",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("generate", &cmd, true, &a, argc, argv);
    if (prc >= 0) return prc;
    if (!req_path) {
        fprintf(stderr, "sglc generate: --requests needs a file\n");
        args_server_free(&a);
        return 2;
    }
    int ret = cmd_generate_requests_run(&a, threads, req_path, out_path);
    args_server_free(&a);
    return ret;
}

/* The command after parsing; `a` stays owned by the caller. */
static int cmd_generate_requests_run(const args_server *a, long long threads, const char *req_path,
                                     const char *out_path)
{
    cli_model_opts mo;
    cli_model_opts_from_args(&mo, a, threads);
    sched_args sa;
    cli_sched_args_from_args(&sa, a);
    if (cli_dp_check(a, "generate")) return 2;
    int n_dp = cli_dp_size(a);
    cli_spec spec; /* the arguments, checked before anything loads */
    if (cli_spec_args_from_args(&spec, a, "generate")) return 2;
    bool skip_tok = a->skip_tokenizer_init;
    const char *tok_path = a->tokenizer_path;
    /* The tokenizer (optional: dummy-weight config folders have none) turns
     * "text" lines into input_ids and output ids back into "text". */
    tok_tokenizer *tk = NULL;
    if (!skip_tok && cli_tokenizer_load(tok_path ? tok_path : mo.load.model_path, tok_path != NULL, &tk))
        return 1;
    FILE *in = strcmp(req_path, "-") ? fopen(req_path, "r") : stdin;
    if (!in) {
        fprintf(stderr, "error: cannot open %s\n", req_path);
        if (tk) tok_destroy(tk);
        return 2;
    }
    /* parse every line first: bad input fails before the model loads */
    line_req *lines = NULL;
    sched_req_spec *specs = NULL;
    int n_lines = 0, cap = 0, rc = 1;
    char *buf = NULL;
    size_t bcap = 0;
    ssize_t len;
    int line_no = 0;
    while ((len = getline(&buf, &bcap, in)) >= 0) {
        line_no++;
        size_t k = 0;
        while (k < (size_t)len && (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\n' || buf[k] == '\r')) k++;
        if (k == (size_t)len) continue;
        if (n_lines == cap) {
            cap = cap ? 2 * cap : 64;
            line_req *g = realloc(lines, sizeof *lines * (size_t)cap);
            sched_req_spec *h = g ? realloc(specs, sizeof *specs * (size_t)cap) : NULL;
            if (g) lines = g;
            if (h) specs = h;
            if (!g || !h) {
                fprintf(stderr, "error: out of memory\n");
                goto done_lines;
            }
        }
        line_req *L = &lines[n_lines];
        memset(L, 0, sizeof *L);
        L->line_no = line_no;
        sched_req_spec_init(&specs[n_lines]);
        json_error_t je;
        json_t *obj = json_loadb(buf, (size_t)len, 0, &je);
        char err[512];
        json_t *text = obj ? json_object_get(obj, "text") : NULL;
        tok_ids ti = {0};
        bool have_ti = false; /* a text prompt, tokenized here: the ids go to the spec directly */
        if (tk && json_is_string(text) && !json_object_get(obj, "input_ids")) {
            if (tok_encode(tk, json_string_value(text), json_string_length(text), true, &ti) == 0) {
                if (!ti.ids) ti.ids = malloc(sizeof(int32_t));
                have_ti = ti.ids != NULL;
                if (have_ti) json_object_del(obj, "text");
            }
            if (!have_ti) tok_ids_free(&ti);
        }
        int prc = !obj ? -1
                  : have_ti ? api_gen_req_from_json_ids(obj, ti.ids, (int64_t)ti.n, &specs[n_lines], err, sizeof err)
                            : api_gen_req_from_json(obj, &specs[n_lines], err, sizeof err);
        if (!obj) {
            snprintf(err, sizeof err, "invalid JSON: %s", je.text);
            L->error = strdup(err);
        } else if (prc) {
            L->error = strdup(err);
        } else if (line_dp_fields(obj, n_dp, &L->dp_rank, &L->room, err, sizeof err)) {
            L->error = strdup(err);
        } else {
            L->n = specs[n_lines].params.n > 1 ? (int)specs[n_lines].params.n : 1;
            L->logprob = specs[n_lines].return_logprob;
            L->skip_special = specs[n_lines].params.skip_special_tokens;
            L->no_stop_trim = specs[n_lines].params.no_stop_trim;
            L->spaces_special = specs[n_lines].params.spaces_between_special_tokens;
        }
        json_decref(obj);
        n_lines++;
    }
    if (in != stdin) fclose(in);
    in = NULL;
    if (n_lines == 0) {
        fprintf(stderr, "error: %s holds no requests\n", req_path);
        rc = 2;
        goto done_lines;
    }

    model **dp_models = NULL; /* DP x TP: the replicas' own models (cli_dp_tp.h) */
    model *m = cli_dp_tp_load(&mo, a, &dp_models);
    if (!m) goto done_lines;
    dp *d = NULL; /* n_dp > 1: the controller; s is its replica 0 */
    sched *s = NULL;
    if (!cli_lora_setup(a, m, &sa)) { /* (LoRA is refused with DP x TP) */
        if (n_dp > 1) {
            d = cli_dp_create(m, &mo, &sa, a, dp_models);
            free(dp_models);
            dp_models = NULL;
            s = d ? dp_sched(d, 0) : NULL;
        } else {
            s = cli_sched_create(m, &mo, &sa);
        }
    }
    cli_spec *drafts = calloc((size_t)n_dp, sizeof *drafts);  /* a drafter per replica */
    cli_grammar *grams = calloc((size_t)n_dp, sizeof *grams); /* a grammar queue per replica */
    FILE *out = NULL;
    uint64_t *ids = NULL;
    int *n_per = NULL;
    bool *lps = NULL;
    cli_results res = {0};
    if (!s || !drafts || !grams) goto done_model;
    /* LoRA: each line's lora_path names an adapter of --lora-paths (an
     * unknown one is that line's error, SGLang's message) */
    for (int k = 0; k < n_lines; k++) {
        char lerr[1200];
        if (lines[k].error || !specs[k].lora_name) continue;
        if (lora_resolve(specs[k].lora_name, &specs[k].lora, lerr, sizeof lerr)) {
            lines[k].error = strdup(lerr);
            sched_req_spec_free(&specs[k]);
        }
    }
    /* each replica: the output hook, the grammar queue of sampling_params
     * json_schema / regex / ebnf / structural_tag lines, the drafter */
    for (int r = 0; r < n_dp; r++) {
        sched *sr = d ? dp_sched(d, r) : s;
        if (tk) api_install_output_hook(sr);
        drafts[r] = spec;
        if (cli_grammar_setup(&grams[r], a, tk, sr, m) || cli_spec_setup(&drafts[r], sr, m, &mo)) goto done_model;
    }
    /* requests with stop strings get output stages (the hook matches them
     * in the decoded text); the response text is decoded below */
    for (int k = 0; tk && k < n_lines; k++) {
        if (lines[k].error || specs[k].params.n_stop <= 0) continue;
        lines[k].outs = calloc((size_t)lines[k].n, sizeof(api_output));
        if (!lines[k].outs) goto done_model;
        for (int q = 0; q < lines[k].n; q++) api_output_init(&lines[k].outs[q], tk);
        specs[k].output_ctx = lines[k].outs;
    }
    int n_ok = 0;
    ids = malloc(sizeof *ids * (size_t)n_lines);
    n_per = malloc(sizeof *n_per * (size_t)n_lines);
    lps = malloc(sizeof *lps * (size_t)n_lines);
    if (!ids || !n_per || !lps) goto done_model;
    if (d && dp_start(d)) goto done_model;
    double t0 = time_now_sec();
    for (int k = 0; k < n_lines; k++) {
        if (lines[k].error) continue;
        lines[k].id = d ? dp_submit(d, &specs[k], lines[k].dp_rank, lines[k].room, NULL) : sched_submit(s, &specs[k]);
        ids[n_ok] = lines[k].id;
        n_per[n_ok] = lines[k].n;
        lps[n_ok] = lines[k].logprob;
        n_ok++;
    }
    if (cli_results_init(&res, n_ok, ids, n_per, lps)) {
        fprintf(stderr, "error: out of memory\n");
        goto done_model;
    }
    if (d ? cli_dp_collect(d, &res, 600) : cli_sched_collect(s, &res))
        fprintf(stderr, "warning: the scheduler reported an internal error\n");
    double dt = time_now_sec() - t0;
    sched_stats st;
    if (d) {
        dp_stop(d); /* the counters are read after the threads stop */
        cli_dp_stats(d, false, &st);
    } else {
        sched_get_stats(s, &st);
    }
    if (d) log_info("dp: %d replicas (%s)", n_dp, dp_lb_name(dp_method(d)));
    log_info("%d requests in %.3f s: %lld prompt tokens (%lld cached), %lld generated, %lld retractions, "
             "%lld prefill / %lld decode / %lld mixed steps, leak checks %lld (%lld failed)",
             n_ok, dt, (long long)st.prompt_tokens, (long long)st.cached_tokens, (long long)st.generated_tokens,
             (long long)st.num_retractions, (long long)st.n_prefill_steps, (long long)st.n_decode_steps,
             (long long)st.n_mixed_steps, (long long)st.leak_checks, (long long)st.leak_failures);
    if (st.spec_verify_ct > 0)
        log_info("speculative: %lld verify rows, %lld draft tokens, %lld accepted, %lld tree verifies, "
                 "%lld accepted off the first branch",
                 (long long)st.spec_verify_ct, (long long)st.spec_draft_tokens, (long long)st.spec_accepted_tokens,
                 (long long)st.spec_tree_verifies, (long long)st.spec_tree_off_branch);
    out = out_path ? fopen(out_path, "w") : stdout;
    if (!out) {
        fprintf(stderr, "error: cannot write %s\n", out_path);
        goto done_model;
    }
    int j = 0;
    bool all_done = true;
    for (int k = 0; k < n_lines; k++) {
        json_t *o;
        if (lines[k].error) {
            o = json_object();
            json_t *e = json_object();
            json_object_set_new(e, "message", json_string(lines[k].error));
            json_object_set_new(e, "line", json_integer(lines[k].line_no));
            json_object_set_new(o, "error", e);
        } else {
            int off = res.offset[j];
            tok_decode_opts dop = {.skip_special_tokens = lines[k].skip_special,
                                   .spaces_between_special_tokens = lines[k].spaces_special};
            if (lines[k].n == 1) {
                o = api_gen_result_json(&res.res[off]);
                set_text(o, tk, &dop, !lines[k].no_stop_trim);
                all_done &= res.res[off].done;
            } else {
                o = json_array();
                for (int q = 0; q < lines[k].n; q++) {
                    json_t *one = api_gen_result_json(&res.res[off + q]);
                    set_text(one, tk, &dop, !lines[k].no_stop_trim);
                    json_array_append_new(o, one);
                    all_done &= res.res[off + q].done;
                }
            }
            j++;
        }
        char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        if (txt) fprintf(out, "%s\n", txt);
        free(txt);
        json_decref(o);
    }
    if (out != stdout && fclose(out)) {
        fprintf(stderr, "error: cannot write %s\n", out_path);
        out = NULL;
        goto done_model;
    }
    out = NULL;
    if (!all_done) {
        fprintf(stderr, "error: some requests did not finish\n");
        goto done_model;
    }
    if (st.leak_failures) {
        fprintf(stderr, "error: KV cache pool leak detected\n");
        goto done_model;
    }
    rc = 0;
done_model:
    cli_results_free(&res);
    free(ids);
    free(n_per);
    free(lps);
    if (d) dp_destroy(d);
    else sched_destroy(s);
    for (int r = 0; drafts && r < n_dp; r++) cli_spec_free(&drafts[r]);
    free(drafts);
    cli_lora_teardown();
    for (int r = 0; grams && r < n_dp; r++) cli_grammar_free(&grams[r]);
    free(grams);
    cli_dp_tp_free_rest(dp_models, a);
    model_free(m);
done_lines:
    if (in && in != stdin) fclose(in);
    for (int k = 0; k < n_lines; k++) {
        for (int q = 0; lines[k].outs && q < lines[k].n; q++) api_output_free(&lines[k].outs[q]);
        free(lines[k].outs);
        free(lines[k].error);
        if (lines[k].error) sched_req_spec_free(&specs[k]);
    }
    free(lines);
    free(specs);
    free(buf);
    if (tk) tok_destroy(tk);
    return rc;
}
