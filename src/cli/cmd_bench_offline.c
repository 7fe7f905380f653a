/* cmd_bench_offline — `sglc bench-offline`, as sglang.bench_offline_throughput:
 * a synthetic dataset pushed through the scheduler at once, throughput and
 * prefix-cache hit rate reported.
 *
 * DESIGN: datasets as SGLang's bench_serving builds them, with random token
 * ids instead of tokenized text (no tokenizer needed):
 *   random                   num_prompts requests; input / output lengths
 *                            uniform in [max(1, len * range_ratio), len]
 *   generated-shared-prefix  gsp_num_groups system prompts of
 *                            gsp_system_prompt_len tokens, each followed by
 *                            gsp_prompts_per_group questions of
 *                            gsp_question_len tokens, gsp_output_len output
 *                            tokens; requests shuffled (seeded)
 * Greedy, ignore_eos (unless --disable-ignore-eos), as SGLang's benchmark.
 * A short warm-up runs first (--skip-warmup to skip) and the radix cache
 * is flushed after it.  Results print like SGLang's and --result-filename
 * appends one JSON line.
 *
 * --dp-size N > 1: the N replicas of the data-parallel controller (dp/dp.h,
 * --load-balance-method) on their own threads; the warm-up runs on every
 * replica, the requests are submitted to the controller at once and the
 * clock stops when the last one finishes; throughput and the step
 * counters are over all replicas (max_total_num_tokens: the pools
 * together).  N = 1 keeps the synchronous driver in this thread. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_dp_tp.h"
#include "cli/cli_grammar.h"
#include "cli/cli_sched.h"
#include "cli/cli_spec.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/rng.h"

typedef struct item {
    int32_t *ids;
    int64_t n_in, n_out;
} item;

int cmd_bench_offline(int argc, char **argv)
{
    cli_dataset_opts d = CLI_DATASET_OPTS_INIT;
    const char *result_file = NULL;
    bool skip_warmup = false;
    long long threads = 0;
    const char *schema_file = NULL, *regex = NULL;
    const args_extra extra[] = {
        {.name = "--json-schema", .metavar = "FILE", .help = "Constrain every request by this JSON Schema (needs the "
         "tokenizer: --tokenizer-path or the model folder's).", .value = &schema_file},
        {.name = "--regex", .metavar = "PATTERN", .help = "Constrain every request by this regular expression.",
         .value = &regex},
        {.name = "--dataset-name", .help = "The synthetic dataset.", .value = &d.name,
         .choices = "random|generated-shared-prefix", .def = "random"},
        CLI_DATASET_EXTRAS(&d),
        {.name = "--skip-warmup", .help = "No warm-up request.", .flag = &skip_warmup},
        {.name = "--result-filename", .metavar = "FILE", .help = "Append a JSON line with the results.",
         .value = &result_file},
        CLI_EXTRA_THREADS(&threads),
        {0},
    };
    static const int shown[] = {CLI_MODEL_ARG_IDS, CLI_SCHED_ARG_IDS, CLI_GRAMMAR_ARG_IDS, CLI_SPEC_ARG_IDS, ARG_ID_tokenizer_path,
                                ARG_ID_dp_size, ARG_ID_load_balance_method, ARG_ID_config, ARG_COUNT};
    const args_cmd cmd = {
        .usage = "usage: sglc bench-offline --model-path DIR [options]",
        .about = "Offline throughput through the scheduler (sglang.bench_offline_throughput): a "
                 "synthetic dataset of random token ids, submitted at once; greedy, ignore_eos.",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("bench-offline", &cmd, true, &a, argc, argv);
    if (prc >= 0) return prc;
    cli_model_opts mo;
    cli_model_opts_from_args(&mo, &a, threads);
    sched_args sa;
    cli_sched_args_from_args(&sa, &a);
    if (cli_dp_check(&a, "bench-offline")) {
        args_server_free(&a);
        return 2;
    }
    int n_dp = cli_dp_size(&a);
    cli_spec *specs = calloc((size_t)n_dp, sizeof *specs);     /* one drafter per replica */
    cli_grammar *grams = calloc((size_t)n_dp, sizeof *grams);  /* one grammar queue per replica */
    if (!specs || !grams) {
        free(specs), free(grams);
        args_server_free(&a);
        return 1;
    }
    for (int r = 0; r < n_dp; r++)
        if (cli_spec_args_from_args(&specs[r], &a, "bench-offline")) {
            free(specs), free(grams);
            args_server_free(&a);
            return 2;
        }
    cli_spec spec = specs[0]; /* the arguments, for the report */
    const char *dataset = d.name;
    long long num_prompts = d.num_prompts, rin = d.random_input_len, rout = d.random_output_len,
              g_groups = d.gsp_num_groups, g_per = d.gsp_prompts_per_group, g_sys = d.gsp_system_prompt_len,
              g_q = d.gsp_question_len, g_out = d.gsp_output_len, seed = d.seed;
    double ratio = d.random_range_ratio;
    int ignore_eos = !d.disable_ignore_eos, warmup = !skip_warmup;
    model **dp_models = NULL; /* DP x TP: the replicas' own models (cli_dp_tp.h) */
    model *m = cli_dp_tp_load(&mo, &a, &dp_models);
    if (!m) {
        free(specs), free(grams);
        args_server_free(&a);
        return 1;
    }
    int V = model_get_config(m)->vocab_size;
    int rc = 1;
    bool gsp = !strcmp(dataset, "generated-shared-prefix");
    int64_t n_req = gsp ? g_groups * g_per : num_prompts;
    item *items = calloc((size_t)n_req, sizeof *items);
    uint64_t *ids = malloc(sizeof *ids * (size_t)n_req);
    int *n_per = malloc(sizeof *n_per * (size_t)n_req);
    cli_results res = {0};
    sched *s = NULL;
    dp *dpc = NULL; /* n_dp > 1 */
    tok_tokenizer *tk = NULL;
    char *schema_text = NULL;
    if (!items || !ids || !n_per) goto done;
    uint64_t st = (uint64_t)seed * 0x2545F4914F6CDD1Dull + 7;
    if (gsp) {
        int32_t *sys = malloc(sizeof(int32_t) * (size_t)(g_sys ? g_sys : 1));
        if (!sys) goto done;
        int64_t k = 0;
        for (int g = 0; g < g_groups; g++) {
            for (int t = 0; t < g_sys; t++) sys[t] = (int32_t)rng_range(&st, 0, V - 1);
            for (int q = 0; q < g_per; q++, k++) {
                item *it = &items[k];
                it->n_in = g_sys + g_q;
                it->n_out = g_out;
                it->ids = malloc(sizeof(int32_t) * (size_t)it->n_in);
                if (!it->ids) {
                    free(sys);
                    goto done;
                }
                memcpy(it->ids, sys, sizeof(int32_t) * (size_t)g_sys);
                for (int t = 0; t < g_q; t++) it->ids[g_sys + t] = (int32_t)rng_range(&st, 0, V - 1);
            }
        }
        free(sys);
        for (int64_t a = n_req - 1; a > 0; a--) { /* shuffle */
            int64_t b = rng_range(&st, 0, a);
            item t = items[a];
            items[a] = items[b];
            items[b] = t;
        }
    } else {
        for (int64_t k = 0; k < n_req; k++) {
            item *it = &items[k];
            int64_t lo_in = (int64_t)(rin * ratio), lo_out = (int64_t)(rout * ratio);
            it->n_in = rng_range(&st, lo_in > 1 ? lo_in : 1, rin);
            it->n_out = rng_range(&st, lo_out > 1 ? lo_out : 1, rout);
            it->ids = malloc(sizeof(int32_t) * (size_t)it->n_in);
            if (!it->ids) goto done;
            for (int64_t t = 0; t < it->n_in; t++) it->ids[t] = (int32_t)rng_range(&st, 0, V - 1);
        }
    }
    if (n_dp > 1) {
        dpc = cli_dp_create(m, &mo, &sa, &a, dp_models);
        free(dp_models);
        dp_models = NULL;
        if (!dpc) goto done;
        s = dp_sched(dpc, 0);
    } else {
        s = cli_sched_create(m, &mo, &sa);
    }
    if (!s) goto done;
    for (int r = 0; r < n_dp; r++)
        if (cli_spec_setup(&specs[r], dpc ? dp_sched(dpc, r) : s, m, &mo)) goto done;
    spec.drafter = specs[0].drafter;
    if (schema_file || regex) { /* constrained decoding: tokenizer bytes + the grammar thread */
        const char *tp = a.tokenizer_path ? a.tokenizer_path : mo.load.model_path;
        if (schema_file && !(schema_text = fileio_read(schema_file, 1 << 24, NULL))) {
            fprintf(stderr, "error: cannot read --json-schema %s\n", schema_file);
            goto done;
        }
        if (cli_tokenizer_load(tp, true, &tk) || !tk) goto done;
        for (int r = 0; r < n_dp; r++)
            if (cli_grammar_setup(&grams[r], &a, tk, dpc ? dp_sched(dpc, r) : s, m)) goto done;
        if (!grams[0].queue) {
            fprintf(stderr, "error: --json-schema / --regex need constrained decoding (not --grammar-backend none)\n");
            goto done;
        }
    }
    if (dpc && dp_start(dpc)) goto done;
    for (int r = 0; warmup && r < n_dp; r++) { /* one warm-up request per replica */
        sched_req_spec sp;
        sched_req_spec_init(&sp);
        sp.n_input = 16;
        sp.input_ids = malloc(sizeof(int32_t) * 16);
        if (!sp.input_ids) goto done;
        for (int t = 0; t < 16; t++) sp.input_ids[t] = (int32_t)rng_range(&st, 0, V - 1);
        sp.params.has_max_new_tokens = true;
        sp.params.max_new_tokens = 8;
        sp.params.top_k = 1;
        sp.params.ignore_eos = true;
        if (!dpc) {
            sched_submit(s, &sp);
            sched_run_until_idle(s);
            sched_event *e;
            while ((e = sched_poll(s))) sched_event_free(e);
            sched_flush_cache(s);
            break;
        }
        dp_submit(dpc, &sp, r, -1, NULL);
        if (r < n_dp - 1) continue;
        for (int fin = 0; fin < n_dp;) { /* every replica's FINISH, then flush them all */
            sched_event *e = dp_wait(dpc, 600, NULL);
            if (!e) {
                fprintf(stderr, "error: the warm-up did not finish\n");
                goto done;
            }
            fin += e->kind == SCHED_EV_FINISH;
            sched_event_free(e);
        }
        sched_ctl fc = {.kind = SCHED_CTL_FLUSH_CACHE};
        if (dp_control(dpc, &fc)) {
            fprintf(stderr, "error: cannot flush the replicas' caches after the warm-up: %s\n", fc.msg);
            goto done;
        }
    }
    sched_stats s0;
    if (dpc) cli_dp_stats(dpc, true, &s0); /* each replica is between two steps after the flush */
    else sched_get_stats(s, &s0);
    int64_t total_in = 0;
    double t0 = time_now_sec();
    for (int64_t k = 0; k < n_req; k++) {
        sched_req_spec sp;
        sched_req_spec_init(&sp);
        sp.input_ids = items[k].ids;
        items[k].ids = NULL;
        sp.n_input = items[k].n_in;
        sp.params.has_max_new_tokens = true;
        sp.params.max_new_tokens = items[k].n_out;
        sp.params.top_k = 1; /* temperature 0 -> greedy, as SGLang normalises it */
        sp.params.ignore_eos = ignore_eos;
        if (schema_text) sp.params.json_schema = strdup(schema_text);
        else if (regex) sp.params.regex = strdup(regex);
        total_in += items[k].n_in;
        ids[k] = dpc ? dp_submit(dpc, &sp, -1, -1, NULL) : sched_submit(s, &sp);
        n_per[k] = 1;
    }
    if (cli_results_init(&res, (int)n_req, ids, n_per, NULL)) goto done;
    int crc = dpc ? cli_dp_collect(dpc, &res, 600) : cli_sched_collect(s, &res);
    double dur = time_now_sec() - t0;
    sched_stats s1;
    if (dpc) {
        dp_stop(dpc); /* the counters are read after the threads stop */
        cli_dp_stats(dpc, false, &s1);
    } else {
        sched_get_stats(s, &s1);
    }
    int64_t ok = 0, out_tok = 0, prompt = 0, cached = 0, failed = 0;
    for (int k = 0; k < res.total; k++) {
        sched_result *r = &res.res[k];
        if (!r->done || r->fin.finish == SCHED_FINISH_ABORT) {
            failed++;
            continue;
        }
        ok++;
        out_tok += r->n;
        prompt += r->fin.prompt_tokens;
        cached += r->fin.cached_tokens;
    }
    double hit = prompt ? (double)cached / (double)prompt : 0.0;
    printf("\n====== Offline Throughput Benchmark Result =======\n");
    printf("%-40s %s\n", "Backend:", "sglc");
    printf("%-40s %s\n", "Dataset:", dataset);
    if (dpc) printf("%-40s %d (%s)\n", "Data parallel replicas:", n_dp, dp_lb_name(dp_method(dpc)));
    printf("%-40s %lld\n", "Successful requests:", (long long)ok);
    if (failed) printf("%-40s %lld\n", "Failed requests:", (long long)failed);
    printf("%-40s %.2f\n", "Benchmark duration (s):", dur);
    printf("%-40s %lld\n", "Total input tokens:", (long long)total_in);
    printf("%-40s %lld\n", "Total generated tokens:", (long long)out_tok);
    printf("%-40s %.2f\n", "Request throughput (req/s):", ok / dur);
    printf("%-40s %.2f\n", "Input token throughput (tok/s):", total_in / dur);
    printf("%-40s %.2f\n", "Output token throughput (tok/s):", out_tok / dur);
    printf("%-40s %.2f\n", "Total token throughput (tok/s):", (total_in + out_tok) / dur);
    printf("%-40s %.4f\n", "Cache hit rate:", hit);
    printf("%-40s %lld\n", "Retractions:", (long long)(s1.num_retractions - s0.num_retractions));
    printf("%-40s %lld / %lld / %lld\n", "Prefill / decode / mixed steps:",
           (long long)(s1.n_prefill_steps - s0.n_prefill_steps), (long long)(s1.n_decode_steps - s0.n_decode_steps),
           (long long)(s1.n_mixed_steps - s0.n_mixed_steps));
    double fw = s1.forward_s - s0.forward_s, sc = s1.sched_s - s0.sched_s;
    printf("%-40s %.2f%%\n", "Scheduler overhead (% of step time):", fw + sc > 0 ? 100.0 * sc / (fw + sc) : 0.0);
    int64_t sv = s1.spec_verify_ct - s0.spec_verify_ct, stk = s1.spec_verify_tokens - s0.spec_verify_tokens;
    double accept_len = sv > 0 ? (double)stk / (double)sv : 0.0;
    if (spec.drafter) printf("%-40s %.2f\n", "Accept length:", accept_len);
    if (spec.drafter)
        printf("%-40s %lld / %lld\n", "Tree verifies / off-first-branch tokens:",
               (long long)(s1.spec_tree_verifies - s0.spec_tree_verifies),
               (long long)(s1.spec_tree_off_branch - s0.spec_tree_off_branch));
    printf("==================================================\n");
    if (result_file) {
        json_t *o = json_object();
        json_object_set_new(o, "backend", json_string("sglc"));
        json_object_set_new(o, "model_path", json_string(mo.load.model_path));
        json_object_set_new(o, "dataset_name", json_string(dataset));
        if (gsp) {
            json_object_set_new(o, "gsp_num_groups", json_integer(g_groups));
            json_object_set_new(o, "gsp_prompts_per_group", json_integer(g_per));
            json_object_set_new(o, "gsp_system_prompt_len", json_integer(g_sys));
            json_object_set_new(o, "gsp_question_len", json_integer(g_q));
            json_object_set_new(o, "gsp_output_len", json_integer(g_out));
        } else {
            json_object_set_new(o, "num_prompts", json_integer(num_prompts));
            json_object_set_new(o, "random_input_len", json_integer(rin));
            json_object_set_new(o, "random_output_len", json_integer(rout));
            json_object_set_new(o, "random_range_ratio", json_real(ratio));
        }
        json_object_set_new(o, "disable_radix_cache", json_boolean(sa.disable_radix_cache));
        json_object_set_new(o, "page_size", json_integer(sa.page_size));
        json_object_set_new(o, "schedule_policy", json_string(sched_policy_name(sa.schedule_policy)));
        json_object_set_new(o, "max_total_num_tokens", json_integer(s1.max_total_num_tokens));
        json_object_set_new(o, "threads", json_integer(sa.threads));
        json_object_set_new(o, "dp_size", json_integer(n_dp));
        json_object_set_new(o, "load_balance_method",
                            dpc ? json_string(dp_lb_name(dp_method(dpc))) : json_null());
        json_object_set_new(o, "constraint", schema_file ? json_pack("{s:s}", "json_schema", schema_file)
                                             : regex      ? json_pack("{s:s}", "regex", regex)
                                                          : json_null());
        json_object_set_new(o, "successful_requests", json_integer(ok));
        json_object_set_new(o, "total_latency", json_real(dur));
        json_object_set_new(o, "total_input_tokens", json_integer(total_in));
        json_object_set_new(o, "total_output_tokens", json_integer(out_tok));
        json_object_set_new(o, "request_throughput", json_real(ok / dur));
        json_object_set_new(o, "input_throughput", json_real(total_in / dur));
        json_object_set_new(o, "output_throughput", json_real(out_tok / dur));
        json_object_set_new(o, "total_throughput", json_real((total_in + out_tok) / dur));
        json_object_set_new(o, "cache_hit_rate", json_real(hit));
        json_object_set_new(o, "num_retractions", json_integer(s1.num_retractions - s0.num_retractions));
        json_object_set_new(o, "speculative_algorithm", spec.drafter ? json_string(a.speculative_algorithm) : json_null());
        if (spec.drafter) json_object_set_new(o, "accept_length", json_real(accept_len));
        if (spec.drafter)
            json_object_set_new(o, "spec_tree_verifies", json_integer(s1.spec_tree_verifies - s0.spec_tree_verifies));
        json_object_set_new(o, "decode_steps", json_integer(s1.n_decode_steps - s0.n_decode_steps));
        char *txt = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        FILE *f = fopen(result_file, "a");
        if (!f || !txt || fprintf(f, "%s\n", txt) < 0) {
            fprintf(stderr, "error: cannot append to %s\n", result_file);
            if (f) fclose(f);
            free(txt);
            goto done;
        }
        free(txt);
        if (fclose(f)) goto done;
    }
    rc = (crc == 0 && failed == 0 && s1.leak_failures == 0) ? 0 : 1;
done:
    cli_results_free(&res);
    if (dpc) dp_destroy(dpc);
    else sched_destroy(s);
    for (int r = 0; r < n_dp; r++) cli_spec_free(&specs[r]);
    for (int r = 0; r < n_dp; r++) cli_grammar_free(&grams[r]);
    free(specs);
    free(grams);
    if (tk) tok_destroy(tk);
    free(schema_text);
    if (items)
        for (int64_t k = 0; k < n_req; k++) free(items[k].ids);
    free(items);
    free(ids);
    free(n_per);
    cli_dp_tp_free_rest(dp_models, &a);
    model_free(m);
    args_server_free(&a);
    return rc;
}
