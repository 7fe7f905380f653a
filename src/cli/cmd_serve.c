/* cmd_serve — `sglc serve`: SGLang's launch_server.
 *
 * DESIGN: parse every server argument with args_parse (the args table; an
 * argument whose feature is missing is refused there with exit 2), load
 * the model, tokenizer and chat template, build and start the scheduler
 * thread, listen (health and generation routes answer 503 "starting"),
 * warm up with one generation (unless --skip-server-warmup), then serve.  SIGINT/SIGTERM: stop accepting, refuse new generation work
 * with 503, let in-flight requests finish (bounded by --watchdog-timeout
 * style grace of 60 s, then abort them), stop, exit 0.
 *
 * Idle keep-alive connections close after 5 s without traffic (uvicorn's
 * default); requests waiting for the model are suspended and never time out.
 *
 * Extra options (not SGLang arguments): --threads N compute threads,
 * --max-payload-size BYTES body limit.
 *
 * Control: /update_weights_from_disk loads through serve_load_model (the
 * start-up model options with another folder / format) on an admin
 * thread; the model the scheduler runs at exit (sched_model) is the one
 * freed here.  --watchdog-timeout / --soft-watchdog-timeout start
 * cli_watchdog; --sleep-on-idle is a scheduler argument. */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/api.h"
#include "api/api_ops.h"
#include "args/args.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_dp_tp.h"
#include "cli/cli_gguf.h"
#include "cli/cli_grammar.h"
#include "cli/cli_spec.h"
#include "cli/cli_lora.h"
#include "cli/cli_model.h"
#include "cli/cli_warmup.h"
#include "cli/cli_watchdog.h"
#include "cli/cli_sched.h"
#include "http/http.h"
#include "hub/hub.h"
#include "kv/kv_radix.h"
#include "model/gguf_model.h"
#include "sched/sched.h"
#include "template/completion.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/timeutil.h"

/* config.json's model_type of the model folder (hub ids through the
 * cache, no download of weights), for /get_model_info; NULL when there is
 * none (a GGUF file).  Caller frees. */
static char *serve_model_type(const args_server *a)
{
    char dir[4096], err[512], path[4200];
    hub_opts ho = {0};
    ho.revision = a->revision;
    ho.cache_dir = a->download_dir;
    ho.skip_weights = true;
    if (!a->model_path || hub_resolve(a->model_path, &ho, dir, sizeof dir, err, sizeof err)) return NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *c = json_load_file(path, 0, NULL);
    const char *t = json_string_value(json_object_get(c, "model_type"));
    char *out = t ? strdup(t) : NULL;
    json_decref(c);
    return out;
}

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One greedy token through the running scheduler (SGLang's warm-up
 * request); waits for its FINISH.  Called before api_set_ready starts the
 * dispatcher, so this thread may read the outbox. */
static int warmup(sched *s, const tok_tokenizer *tok)
{
    sched_req_spec sp;
    sched_req_spec_init(&sp);
    sp.input_ids = malloc(sizeof(int32_t) * 4);
    if (!sp.input_ids) return -1;
    int32_t t0 = tok && tok_bos_id(tok) >= 0 ? tok_bos_id(tok) : 1;
    for (int i = 0; i < 4; i++) sp.input_ids[i] = t0;
    sp.n_input = 4;
    sp.params.max_new_tokens = 2;
    sp.params.has_max_new_tokens = true;
    sp.params.top_k = 1;
    sp.rid = strdup("WARMUP");
    return cli_warmup_submit_wait(s, &sp);
}

/* The operations objects (request log, metrics, access log) live for the
 * whole command; cmd_serve frees them after serve() returns, whatever
 * path it returned by. */
static api_reqlog *g_reqlog;
static api_mexport *g_mexport;
static api_metrics *g_metrics;
static api_access_log *g_access;

/* /update_weights_from_disk's loader: the start-up model options with
 * another folder (or hub id, resolved through the cache) and format. */
typedef struct serve_loader {
    cli_model_opts mo;          /* copy of the start-up options (strings borrowed from args) */
    int32_t mi_delim;           /* --multi-item-scoring-delimiter, -1 none: set on new weights too */
} serve_loader;

static model *serve_load_model(void *ctx, const char *path, const char *load_format, char *err, size_t errlen)
{
    const serve_loader *L = ctx;
    if (L->mo.dist.tp_size > 1) { /* every rank would have to load its new shard */
        snprintf(err, errlen, "updating weights with --tp-size %d is not supported yet", L->mo.dist.tp_size);
        return NULL;
    }
    model_load_opts lo = L->mo.load;
    if (load_format && !strcmp(load_format, "dummy")) lo.load_format = MODEL_LOAD_DUMMY;
    else if (load_format && !strcmp(load_format, "safetensors")) lo.load_format = MODEL_LOAD_SAFETENSORS;
    else if (load_format) lo.load_format = MODEL_LOAD_AUTO;
    char dir[4096];
    hub_opts ho = {0};
    ho.revision = L->mo.revision;
    ho.cache_dir = L->mo.download_dir;
    ho.skip_weights = lo.load_format == MODEL_LOAD_DUMMY;
    char gg[4096], gerr[256];
    if (gguf_model_path(path, 0, gg, sizeof gg, gerr, sizeof gerr) == 1) snprintf(dir, sizeof dir, "%s", gg); /* a GGUF file */
    else if (hub_resolve(path, &ho, dir, sizeof dir, err, errlen) != 0) return NULL;
    lo.model_path = dir;
    double t0 = time_now_sec();
    model *m = model_load(&lo, err, errlen);
    if (m && L->mi_delim >= 0) model_set_multi_item_delimiter(m, L->mi_delim);
    if (m) log_info("loaded new weights from %s in %.2f s (%.2f GiB)", dir, time_now_sec() - t0,
                    (double)model_weight_bytes(m) / 1073741824.0);
    return m;
}

static void serve_free_model(void *ctx, model *m)
{
    (void)ctx;
    model_free(m);
}

static int serve(int argc, char **argv)
{
    long long threads = 0, max_body = 64ll << 20;
    const args_extra extra[] = {
        CLI_EXTRA_THREADS(&threads),
        {.name = "--max-payload-size", .metavar = "BYTES",
         .help = "Largest request body accepted; larger ones get 413 (sglc's own option).",
         .ival = &max_body, .lo = 1024, .hi = (double)(1ll << 40), .def = "67108864 (64 MiB)"},
        {0},
    };
    const args_cmd cmd = {.usage = "usage: sglc serve --model-path DIR [ARGS]", .extra = extra};
    args_server a;
    char err[1024];
    int prc = cli_args_parse("serve", &cmd, true, &a, argc, argv);
    if (prc >= 0) return prc;
    if (args_finalize(&a) != ARGS_OK) {
        fprintf(stderr, "sglc serve: out of memory\n");
        args_server_free(&a);
        return 1;
    }
    /* operations: checked before the (slow) model load */
    {
        cli_spec chk; /* speculative arguments: a usage error before loading (set up again below) */
        if (cli_spec_args_from_args(&chk, &a, "serve")) {
            args_server_free(&a);
            return 2;
        }
    }
    int http_level = log_level_current;
    if (a.log_level_http) {
        /* uvicorn's levels; "trace" is below debug */
        http_level = !strcmp(a.log_level_http, "trace") ? LOG_DEBUG : log_level_parse(a.log_level_http);
        if (http_level < 0) {
            fprintf(stderr, "sglc serve: --log-level-http must be one of critical, error, warning, info, debug, trace (got '%s')\n",
                    a.log_level_http);
            args_server_free(&a);
            return 2;
        }
    }
    if (a.warmups && cli_warmups_check(a.warmups, err, sizeof err)) {
        fprintf(stderr, "sglc serve: %s\n", err);
        args_server_free(&a);
        return 2;
    }
    /* tokenizer workers (api_tokq.h); SGLang's _handle_tokenizer_batching */
    if (a.tokenizer_worker_num < 1) {
        fprintf(stderr, "sglc serve: --tokenizer-worker-num must be at least 1, got %d\n", a.tokenizer_worker_num);
        args_server_free(&a);
        return 2;
    }
    if (a.enable_tokenizer_batch_encode && a.enable_dynamic_batch_tokenizer) {
        fprintf(stderr, "sglc serve: Cannot enable both --enable-tokenizer-batch-encode and --enable-dynamic-batch-tokenizer. "
                        "Please choose one tokenizer batching approach.\n");
        args_server_free(&a);
        return 2;
    }
    if (a.skip_tokenizer_init && a.tokenizer_worker_num != 1) {
        log_warn("skip_tokenizer_init=True disables tokenizer workers; forcing tokenizer_worker_num=1 (requested %d).",
                 a.tokenizer_worker_num);
        a.tokenizer_worker_num = 1;
    }
    if (a.skip_tokenizer_init && a.enable_tokenizer_batch_encode) {
        log_warn("skip_tokenizer_init=True ignores --enable-tokenizer-batch-encode; disabling it.");
        a.enable_tokenizer_batch_encode = false;
    }
    api_reqlog *reqlog = g_reqlog = api_reqlog_create(a.log_requests, (int)a.log_requests_level, a.log_requests_format,
                                           a.log_requests_target, err, sizeof err);
    api_metrics *metrics = NULL;
    if (reqlog && a.enable_metrics)
    {
        api_metrics_opts mopts = {.ttft_buckets = a.bucket_time_to_first_token,
                                  .itl_buckets = a.bucket_inter_token_latency,
                                  .e2e_buckets = a.bucket_e2e_request_latency,
                                  .collect_tokens_histogram = a.collect_tokens_histogram,
                                  .prompt_tokens_rule = a.prompt_tokens_buckets,
                                  .generation_tokens_rule = a.generation_tokens_buckets};
        json_t *extra = a.extra_metric_labels ? json_loads(a.extra_metric_labels, 0, NULL) : NULL;
        mopts.extra_labels = extra;
        metrics = g_metrics = api_metrics_create(a.served_model_name ? a.served_model_name : a.model_path,
                                                 &mopts, err, sizeof err);
        json_decref(extra);
    }
    api_mexport *mexport = NULL;
    if (reqlog && (!a.enable_metrics || metrics) && a.export_metrics_to_file)
        mexport = g_mexport = api_mexport_create(a.export_metrics_to_file_dir, (int)a.log_requests_level, err, sizeof err);
    if (!reqlog || (a.enable_metrics && !metrics) || (a.export_metrics_to_file && !mexport)) {
        fprintf(stderr, "sglc serve: %s\n", err);
        args_server_free(&a);
        return 2;
    }
    api_access_log *access = g_access = api_access_log_create(http_level, a.uvicorn_access_log_exclude_prefixes, stdout);
    /* --completion-template: checked before the (slow) model load */
    static tmpl_completion completion;
    bool have_completion = false;
    if (a.completion_template) {
        if (tmpl_completion_load(a.completion_template, &completion, err, sizeof err)) {
            fprintf(stderr, "sglc serve: --completion-template: %s\n", err);
            args_server_free(&a);
            return 2;
        }
        have_completion = true;
        log_info("completion template: %s", completion.name);
    }

    /* model; --dp-size with --tp-size: each replica's rank-0 shard
     * (cli_dp_tp.h), given to the controller below */
    cli_model_opts mo;
    cli_model_opts_from_args(&mo, &a, threads);
    model **dp_models = NULL;
    model *m = cli_dp_tp_load(&mo, &a, &dp_models);
    if (!m) {
        args_server_free(&a);
        return 1;
    }
    const model_config *mc = model_get_config(m);
    /* *ForSequenceClassification has no LM head: SGLang serves it as an
     * embedding model (its "embedding" is the score head's output) */
    if (mc->n_labels > 0 && !a.is_embedding) {
        log_info("%s is a sequence-classification model (%d labels): serving it as --is-embedding",
                 mc->architecture, mc->n_labels);
        a.is_embedding = true;
    }
    /* --multi-item-scoring-delimiter: prompts must reach the model whole
     * and uncached (model/multi_item.c), as SGLang requires */
    int32_t mi_delim = a.multi_item_scoring_delimiter == ARGS_INT_NONE ? -1 : a.multi_item_scoring_delimiter;
    if (mi_delim >= mc->vocab_size) {
        fprintf(stderr, "sglc serve: --multi-item-scoring-delimiter %d is not a token id (vocab size %d)\n",
                (int)mi_delim, mc->vocab_size);
        cli_dp_tp_free_rest(dp_models, &a);
        model_free(m);
        args_server_free(&a);
        return 2;
    }
    if (mi_delim >= 0) {
        model_set_multi_item_delimiter(m, mi_delim);
        if (!a.disable_radix_cache) log_warn("Radix cache is disabled because --multi-item-scoring-delimiter is set.");
        if (a.chunked_prefill_size != -1)
            log_warn("Chunked prefill is disabled because --multi-item-scoring-delimiter is set.");
        a.disable_radix_cache = true;
        a.chunked_prefill_size = -1;
    }
    /* the tokenizer folder: --tokenizer-path or the model's, resolved
     * through the hub cache as the model was (cached by now) */
    char tok_dir[4096];
    /* a GGUF file (the model's, or --tokenizer-path FILE.gguf) carries its
     * tokenizer and chat template */
    char gguf_tok[4096];
    const char *tp0 = a.tokenizer_path ? a.tokenizer_path : a.model_path;
    bool tok_gguf = gguf_model_path(tp0, 0, gguf_tok, sizeof gguf_tok, err, sizeof err) == 1;
    if (tok_gguf) {
        snprintf(tok_dir, sizeof tok_dir, "%s", gguf_tok);
    } else {
        hub_opts ho = {0};
        ho.revision = a.revision;
        ho.cache_dir = a.download_dir;
        ho.skip_weights = true;
        const char *tp = a.tokenizer_path ? a.tokenizer_path : a.model_path;
        if (hub_resolve(tp, &ho, tok_dir, sizeof tok_dir, err, sizeof err) != 0) {
            fprintf(stderr, "sglc serve: %s\n", err);
            cli_dp_tp_free_rest(dp_models, &a);
            model_free(m);
            args_server_free(&a);
            return 1;
        }
    }

    /* tokenizer + chat template */
    tok_tokenizer *tok = NULL;
    tmpl_chat chat;
    memset(&chat, 0, sizeof chat);
    bool have_chat = false;
    if (!a.skip_tokenizer_init) {
        tok_load_opts to = {.mode = a.tokenizer_mode && !strcmp(a.tokenizer_mode, "slow") ? TOK_MODE_SLOW : TOK_MODE_AUTO};
        if (tok_gguf) {
            if (cli_tokenizer_load_gguf(tok_dir, true, &tok)) {
                cli_dp_tp_free_rest(dp_models, &a);
                model_free(m);
                args_server_free(&a);
                return 1;
            }
        } else {
            tok = tok_load_dir(tok_dir, &to, err, sizeof err);
        }
        if (!tok) {
            fprintf(stderr, "sglc serve: cannot load the tokenizer from %s: %s\n", tok_dir, err);
            cli_dp_tp_free_rest(dp_models, &a);
            model_free(m);
            args_server_free(&a);
            return 1;
        }
        char *terr = NULL;
        if ((tok_gguf ? cli_gguf_chat_load(&chat, tok_dir, a.chat_template, &terr)
                      : tmpl_chat_load(&chat, tok_dir, a.chat_template, a.hf_chat_template_name, &terr)) == 0) {
            have_chat = true;
        } else if (a.chat_template || a.hf_chat_template_name) {
            fprintf(stderr, "sglc serve: %s: %s\n",
                    a.chat_template ? "--chat-template" : "--hf-chat-template-name",
                    terr ? terr : "cannot load");
            free(terr);
            tok_destroy(tok);
            cli_dp_tp_free_rest(dp_models, &a);
            model_free(m);
            args_server_free(&a);
            return 2;
        } else {
            log_info("no chat template (%s): /v1/chat/completions answers 400", terr ? terr : "none");
            free(terr);
        }
    }

    /* scheduler: --dp-size replicas behind one front (dp/dp.h); s is
     * replica 0, the one the single-scheduler paths read */
    sched_args sa;
    cli_sched_args_from_args(&sa, &a);
    sa.sleep_on_idle = a.sleep_on_idle;
    sa.is_embedding = a.is_embedding;
    /* (LoRA is refused with DP x TP: cli_dp_create takes dp_models) */
    dp *d = cli_lora_setup(&a, m, &sa) ? NULL : cli_dp_create(m, &mo, &sa, &a, dp_models);
    free(dp_models);
    dp_models = NULL;
    sched *s = d ? dp_sched(d, 0) : NULL;
    int n_dp = d ? dp_size(d) : 0;
    if (!s) {
        cli_lora_teardown();
        if (have_chat) tmpl_chat_free(&chat);
        tok_destroy(tok);
        model_free(m);
        args_server_free(&a);
        return 1;
    }

    json_t *preferred = NULL;
    if (a.preferred_sampling_params) {
        preferred = json_loads(a.preferred_sampling_params, 0, NULL);
        if (!json_is_object(preferred)) {
            fprintf(stderr, "sglc serve: --preferred-sampling-params must be a JSON object\n");
            json_decref(preferred);
            dp_destroy(d);
            cli_lora_teardown();
            if (have_chat) tmpl_chat_free(&chat);
            tok_destroy(tok);
            model_free(m);
            args_server_free(&a);
            return 2;
        }
    }
    /* --sampling-defaults model: temperature, top_p, top_k, min_p,
     * repetition_penalty of generation_config.json (SGLang's
     * get_default_sampling_params) */
    json_t *gen_defaults = NULL;
    if (!a.sampling_defaults || !strcmp(a.sampling_defaults, "model")) {
        char mdir[4096];
        hub_opts ho = {0};
        ho.revision = a.revision;
        ho.cache_dir = a.download_dir;
        ho.skip_weights = true;
        if (hub_resolve(a.model_path, &ho, mdir, sizeof mdir, err, sizeof err) == 0) {
            char gp[4200];
            snprintf(gp, sizeof gp, "%s/generation_config.json", mdir);
            json_t *g = json_load_file(gp, 0, NULL);
            static const char *const keys[] = {"repetition_penalty", "temperature", "top_k", "top_p",
                                               "min_p", NULL};
            for (int k = 0; g && keys[k]; k++) {
                json_t *v = json_object_get(g, keys[k]);
                if (!json_is_number(v)) continue;
                if (!gen_defaults) gen_defaults = json_object();
                json_object_set(gen_defaults, keys[k], v);
            }
            json_decref(g);
            if (gen_defaults) {
                char *t = json_dumps(gen_defaults, JSON_COMPACT);
                log_info("default sampling parameters from generation_config.json: %s", t ? t : "");
                free(t);
            }
        }
    }
    /* --is-embedding: Matryoshka support from config.json (is_matryoshka,
     * matryoshka_dimensions), as SGLang's model config reads it; the
     * --json-model-override-args keys win */
    int mdims[64];
    api_embed_model em = {.model_path = a.model_path, .hidden_size = mc->hidden_size, .mdims = mdims};
    if (a.is_embedding) {
        char mdir[4096];
        hub_opts ho = {0};
        ho.revision = a.revision;
        ho.cache_dir = a.download_dir;
        ho.skip_weights = true;
        json_t *cfgs[2] = {NULL, a.json_model_override_args ? json_loads(a.json_model_override_args, 0, NULL) : NULL};
        if (hub_resolve(a.model_path, &ho, mdir, sizeof mdir, err, sizeof err) == 0) {
            char cp[4200];
            snprintf(cp, sizeof cp, "%s/config.json", mdir);
            cfgs[0] = json_load_file(cp, 0, NULL);
        }
        for (int k = 0; k < 2; k++) {
            json_t *im = json_object_get(cfgs[k], "is_matryoshka"), *md = json_object_get(cfgs[k], "matryoshka_dimensions");
            if (im) em.is_matryoshka = json_is_true(im);
            if (json_is_array(md)) {
                em.is_matryoshka = true;
                em.n_mdims = 0;
                size_t i;
                json_t *v;
                json_array_foreach(md, i, v) if (json_is_integer(v) && em.n_mdims < 64) mdims[em.n_mdims++] = (int)json_integer_value(v);
            }
            json_decref(cfgs[k]);
        }
        log_info("embedding model: last-token pooling, normalized, %d dims (matryoshka: %s)", mc->hidden_size,
                 em.is_matryoshka ? "yes" : "no");
    }
    char *model_type = serve_model_type(&a);
    /* the classifier's id2label, copied: the routes outlive a weight swap's config */
    static char label_buf[MODEL_MAX_LABELS][MODEL_LABEL_LEN];
    static const char *labels[MODEL_MAX_LABELS];
    for (int i = 0; i < mc->n_labels; i++) {
        memcpy(label_buf[i], mc->labels[i], MODEL_LABEL_LEN);
        labels[i] = label_buf[i];
    }
    json_t *info = args_to_json(&a);
    /* /get_server_info is a normal route: api-key holders (or anyone, with
     * only --admin-api-key) read it, so the admin key must not be in it */
    if (info && a.admin_api_key) json_object_set_new(info, "admin_api_key", json_string("<redacted>"));
    serve_loader loader = {.mo = mo, .mi_delim = mi_delim};
    api_config ac = {
        .s = s,
        .dp = d,
        .tok = tok,
        .chat = have_chat ? &chat : NULL,
        .completion = have_completion ? &completion : NULL,
        .served_model_name = a.served_model_name ? a.served_model_name : a.model_path,
        .model_path = a.model_path,
        .tokenizer_path = a.tokenizer_path ? a.tokenizer_path : a.model_path,
        .architecture = mc->architecture,
        .model_type = model_type,
        .api_key = a.api_key,
        .admin_api_key = a.admin_api_key,
        .allow_auto_truncate = a.allow_auto_truncate,
        .is_embedding = a.is_embedding,
        .embed = em,
        .score = {.n_labels = mc->n_labels, .labels = labels, .mi_on = mi_delim >= 0, .mi_delim = mi_delim},
        .reqlog = reqlog,
        .metrics = metrics,
        .mexport = mexport,
        .context_length = mc->context_length,
        .vocab_size = mc->vocab_size,
        .incremental_streaming = a.incremental_streaming_output,
        .enable_cache_report = a.enable_cache_report,
        .tokenizer_workers = a.tokenizer_worker_num,
        .batch_encode = a.enable_tokenizer_batch_encode,
        .root_path = a.fastapi_root_path,
        .weight_version = a.weight_version,
        .tool_call_parser = a.tool_call_parser,
        .reasoning_parser = a.reasoning_parser,
        .server_info = info,
        .default_sampling = gen_defaults,
        .preferred_sampling = preferred,
        .load_model = serve_load_model,
        .free_model = serve_free_model,
        .load_ctx = &loader,
    };
    int exit_code = 1;
    /* set up before the replicas start; freed after they are destroyed */
    cli_grammar *gram = calloc((size_t)n_dp, sizeof *gram);
    cli_spec *spec = calloc((size_t)n_dp, sizeof *spec);
    cli_watchdog **wd = calloc((size_t)n_dp, sizeof *wd);
    api_server *api = NULL;
    http_server *hs = NULL;
    char *tls_pem[3] = {NULL, NULL, NULL}; /* --ssl-certfile, --ssl-keyfile, --ssl-ca-certs contents */
    if (!gram || !spec || !wd) goto out;
    /* each replica: the output stage's hook, its grammar queue (a queue
     * wakes one scheduler), its drafter (per-scheduler state), its watchdog */
    for (int r = 0; r < n_dp; r++) {
        if (tok) api_install_output_hook(dp_sched(d, r));
        if (cli_grammar_setup(&gram[r], &a, tok, dp_sched(d, r), m)) goto out;
        if (cli_spec_args_from_args(&spec[r], &a, "serve")) {
            exit_code = 2;
            goto out;
        }
        if (cli_spec_setup(&spec[r], dp_sched(d, r), m, &mo)) goto out; /* STANDALONE: a draft model each */
    }
    if (dp_start(d)) goto out;
    for (int r = 0; r < n_dp; r++)
        wd[r] = cli_watchdog_start(dp_sched(d, r), args_float_is_none(a.watchdog_timeout) ? 0 : a.watchdog_timeout,
                                   args_float_is_none(a.soft_watchdog_timeout) ? 0 : a.soft_watchdog_timeout);
    /* listen first, answering 503 "starting" while the warm-ups run (as
     * SGLang's ServerStatus.Starting); the warm-ups read the outbox
     * themselves, so the dispatcher starts only after them */
    ac.start_later = true;
    api = api_create(&ac, err, sizeof err);
    if (!api) {
        fprintf(stderr, "sglc serve: %s\n", err);
        goto out;
    }
    /* one descriptor per client: lift the soft limit to the hard one */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    http_config hc = {.host = a.host, .port = a.port, .max_body = (size_t)max_body,
                      .max_conns = 0, .idle_timeout_s = 5,
                      .access_fn = api_access_log_line, .access_ctx = access,
                      .cors = 1 /* SGLang's server allows every origin */};
    const char *tls_path[3] = {a.ssl_certfile, a.ssl_keyfile, a.ssl_ca_certs};
    for (int i = 0; i < 3; i++) {
        if (!tls_path[i]) continue;
        tls_pem[i] = fileio_read(tls_path[i], (size_t)16 << 20, NULL);
        if (!tls_pem[i]) {
            fprintf(stderr, "sglc serve: %s: %s\n", tls_path[i], strerror(errno));
            goto out;
        }
    }
    hc.tls_cert_pem = tls_pem[0];
    hc.tls_key_pem = tls_pem[1];
    hc.tls_trust_pem = tls_pem[2];
    hc.tls_key_password = a.ssl_keyfile_password;
    hs = http_start(&hc, api_handle, api, err, sizeof err);
    if (!hs) {
        fprintf(stderr, "sglc serve: %s\n", err);
        goto out;
    }
    /* every replica warms up (its own outbox: the dispatcher is not started) */
    for (int r = 0; r < n_dp; r++) {
        if (!a.skip_server_warmup && warmup(dp_sched(d, r), tok)) goto out;
        /* --warmups: SGLang runs them whether or not the standard warm-up ran */
        if (a.warmups && cli_warmups_run(dp_sched(d, r), a.warmups, mc->vocab_size, mo.load.random_seed)) {
            fprintf(stderr, "sglc serve: --warmups failed\n");
            goto out;
        }
    }
    if (api_set_ready(api, err, sizeof err)) {
        fprintf(stderr, "sglc serve: %s\n", err);
        goto out;
    }
    struct sigaction sact;
    memset(&sact, 0, sizeof sact);
    sact.sa_handler = on_signal;
    sigaction(SIGINT, &sact, NULL);
    sigaction(SIGTERM, &sact, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *scheme = a.ssl_certfile ? "https" : "http";
    log_info("The server is fired up and ready to roll! %s://%s:%d (model %s)", scheme, a.host, a.port,
             ac.served_model_name);
    fprintf(stderr, "sglc serve: listening on %s://%s:%d\n", scheme, a.host, a.port);
    while (!g_stop) sleep_ms(100);

    log_info("shutting down: draining %d request(s)", api_active(api));
    api_set_draining(api, true);
    http_quiesce(hs);
    double t0 = time_now_sec();
    bool aborted = false;
    while (api_active(api) > 0 || http_inflight(hs) > 0) {
        /* paused requests cannot finish: abort them at once */
        if (!aborted && (time_now_sec() - t0 > 60.0 || dp_is_paused(d))) {
            dp_abort(d, NULL);
            aborted = true;
        }
        if (time_now_sec() - t0 > 90.0) break;
        sleep_ms(20);
    }
    log_info("drained in %.1f s (jobs %d, http requests %d left)", time_now_sec() - t0, api_active(api),
             http_inflight(hs));
    sleep_ms(100); /* let the last answers flush */
    exit_code = 0;
out:
    if (hs) http_stop(hs);
    for (int i = 0; i < 3; i++) {
        if (tls_pem[i]) explicit_bzero(tls_pem[i], strlen(tls_pem[i]));
        free(tls_pem[i]);
    }
    for (int r = 0; wd && r < n_dp; r++) cli_watchdog_stop(wd[r]);
    dp_stop(d);
    if (api) api_destroy(api);
    m = dp_model(d); /* a weight update may have replaced the model loaded here */
    dp_destroy(d);   /* and the other replicas' run states */
    for (int r = 0; spec && r < n_dp; r++) cli_spec_free(&spec[r]);
    cli_lora_teardown();
    for (int r = 0; gram && r < n_dp; r++) cli_grammar_free(&gram[r]);
    free(gram);
    free(spec);
    free(wd);
    json_decref(info);
    free(model_type);
    json_decref(gen_defaults);
    json_decref(preferred);
    if (have_chat) tmpl_chat_free(&chat);
    if (have_completion) tmpl_completion_free(&completion);
    tok_destroy(tok);
    model_free(m);
    args_server_free(&a);
    return exit_code;
}

int cmd_serve(int argc, char **argv)
{
    int rc = serve(argc, argv);
    api_access_log_destroy(g_access);
    api_metrics_destroy(g_metrics);
    api_reqlog_destroy(g_reqlog);
    api_mexport_destroy(g_mexport);
    g_access = NULL, g_metrics = NULL, g_reqlog = NULL, g_mexport = NULL;
    return rc;
}
