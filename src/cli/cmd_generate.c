/* cmd_generate — `sglc generate`: offline generation for one prompt, no
 * HTTP (the job of sglang.Engine(...).generate for a single request).
 *
 * DESIGN: load the model, prefill the prompt in one forward, then decode one
 * token per forward until EOS or --max-new-tokens.  Slots are the identity
 * (position p at slot p) in a KV cache sized for prompt + new tokens.
 * --dump-logits writes the prefill logits of EVERY prompt position as raw
 * little-endian f32, shape (n_prompt, vocab), no header: the golden tests
 * compare it with a PyTorch reference.  --json prints one object shaped
 * like SGLang's /generate response.
 *
 * Sampling is the server's: the flags become SGLang's sampling_params keys
 * (temperature, top_p, top_k, min_p, max_new_tokens, ignore_eos,
 * sampling_seed), parsed and verified by src/sampling as a /generate body
 * is, and each token goes through sampling_sample then
 * sampling_state_accept, the scheduler's calls in the scheduler's order
 * (its per-request sample step).  The seed is the one sched_submit would give the
 * request: --seed is sampling_seed; without it, the first draw of the
 * scheduler's generator for --random-seed.  So `generate --seed S` and a
 * /generate with "sampling_seed": S give the same tokens, and `generate
 * --random-seed R` those of the first unseeded request to `serve
 * --random-seed R --skip-server-warmup` (tests/scripts/
 * test_generate_serve_same.sh).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_model.h"
#include "lora/lora.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"
#include "util/rng.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

/* Parse "1,2,3" into a new array; -1 on a bad list. */
static int parse_ids(const char *s, int32_t **out, int *n_out, int vocab)
{
    int cap = 16, n = 0;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids) return -1;
    const char *p = s;
    while (*p) {
        while (*p == ' ') p++;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v >= vocab) {
            fprintf(stderr, "error: --input-ids: '%s' is not a token id in [0, %d)\n", p, vocab);
            free(ids);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            int32_t *g = realloc(ids, sizeof(int32_t) * (size_t)cap);
            if (!g) {
                free(ids);
                return -1;
            }
            ids = g;
        }
        ids[n++] = (int32_t)v;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') {
            p++;
            if (!*p) break;
        } else if (*p) {
            fprintf(stderr, "error: --input-ids must be comma-separated integers\n");
            free(ids);
            return -1;
        }
    }
    if (!n) {
        fprintf(stderr, "error: --input-ids is empty\n");
        free(ids);
        return -1;
    }
    *out = ids;
    *n_out = n;
    return 0;
}

/* The seed sched_submit gives a request on a fresh scheduler created with
 * --random-seed R: sampling_seed when the request has one, else the first
 * draw of the scheduler's generator, which sched_create starts at
 * R ^ 0x5EED (sched_rand = rng_next).  Keep the two in step: the script
 * test compares generate with serve. */
static uint64_t generate_seed(const sampling_params *sp, uint64_t random_seed)
{
    if (sp->has_sampling_seed) return sp->sampling_seed;
    uint64_t g = random_seed ^ 0x5EEDull;
    return rng_next(&g);
}

/* sampling_params for generate's flags, built as the server builds them
 * from a /generate body's "sampling_params" object: the same keys through
 * sampling_params_from_json (SGLang's normalisation: temperature < 1e-6 ->
 * greedy, top_k -1 -> all) and sampling_params_verify.  top_k 0 means
 * "off" here as it always did for generate (SGLang refuses 0: it is sent
 * as -1).  seed < 0: no sampling_seed.  Returns 0, or -1 with the message
 * printed (sp is then re-initialised, safe to free). */
static int generate_params(sampling_params *sp, int64_t vocab, long long max_new, double temperature,
                           double top_p, long long top_k, double min_p, bool ignore_eos, long long seed)
{
    json_t *o = json_object();
    char err[512] = "out of memory";
    int rc = -1;
    if (o && !json_object_set_new(o, "max_new_tokens", json_integer(max_new)) &&
        !json_object_set_new(o, "temperature", json_real(temperature)) &&
        !json_object_set_new(o, "top_p", json_real(top_p)) &&
        !json_object_set_new(o, "top_k", json_integer(top_k == 0 ? -1 : top_k)) &&
        !json_object_set_new(o, "min_p", json_real(min_p)) &&
        !json_object_set_new(o, "ignore_eos", json_boolean(ignore_eos)) &&
        (seed < 0 || !json_object_set_new(o, "sampling_seed", json_integer(seed))))
        rc = sampling_params_from_json(sp, o, err, sizeof err) ? -1
             : sampling_params_verify(sp, vocab, err, sizeof err);
    else
        sampling_params_init(sp);
    json_decref(o);
    if (rc) {
        fprintf(stderr, "sglc generate: %s\n", err);
        sampling_params_free(sp);
        sampling_params_init(sp);
    }
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    /* --requests FILE.jsonl: many requests through the scheduler */
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--requests", 10) && (argv[i][10] == 0 || argv[i][10] == '='))
            return cmd_generate_requests(argc, argv);
    const char *prompt = NULL, *input_ids = NULL, *dump = NULL, *lora_path = NULL;
    long long max_new = 128, top_k = -1, seed = -1, threads = 0;
    double temperature = 1.0, top_p = 1.0, min_p = 0.0;
    bool ignore_eos = false, as_json = false;
    const args_extra extra[] = {
        {.name = "--prompt", .metavar = "TEXT",
         .help = "Text prompt, encoded with the model's tokenizer.json (special tokens added as the "
                 "tokenizer config says).",
         .value = &prompt},
        {.name = "--input-ids", .metavar = "LIST",
         .help = "Comma-separated prompt token ids; with neither this nor --prompt, generation "
                 "starts from BOS.",
         .value = &input_ids},
        {.name = "--requests", .metavar = "FILE",
         .help = "Run a JSONL file of /generate bodies through the scheduler instead (see "
                 "`sglc generate --requests F --help`)."},
        {.name = "--max-new-tokens", .metavar = "N", .help = "Tokens to generate.", .ival = &max_new,
         .lo = 0, .hi = 1 << 30, .def = "128"},
        {.name = "--temperature", .metavar = "T", .help = "0 = greedy.", .fval = &temperature, .lo = 0,
         .hi = ARGS_NO_MAX, .def = "1.0"},
        {.name = "--top-p", .metavar = "P", .help = "Nucleus sampling, in (0, 1]; 1 = off.",
         .fval = &top_p, .lo = 0, .hi = 1, .def = "1.0"},
        {.name = "--top-k", .metavar = "K", .help = "Keep the K most likely; -1 = off.", .ival = &top_k,
         .lo = -1, .hi = 1 << 30, .def = "-1"},
        {.name = "--min-p", .metavar = "M", .help = "Drop tokens below M x the top probability.",
         .fval = &min_p, .lo = 0, .hi = 1, .def = "0"},
        {.name = "--seed", .metavar = "S",
         .help = "Sampling seed: the request's sampling_seed, as in a /generate body.", .ival = &seed,
         .lo = 0, .hi = (double)(1ll << 62), .def = "the server's for --random-seed"},
        {.name = "--ignore-eos", .help = "Do not stop at EOS.", .flag = &ignore_eos},
        {.name = "--json", .help = "Print a JSON object like SGLang's /generate.", .flag = &as_json},
        {.name = "--dump-logits", .metavar = "FILE",
         .help = "Write the prefill logits of every prompt position, raw little-endian float32, "
                 "shape (n_prompt, vocab).",
         .value = &dump},
        {.name = "--lora-path", .metavar = "DIR",
         .help = "Run with this PEFT LoRA adapter folder (adapter_config.json + "
                 "adapter_model.safetensors), checked against --max-lora-rank.",
         .value = &lora_path},
        CLI_EXTRA_THREADS(&threads),
        {0},
    };
    static const int shown[] = {CLI_MODEL_ARG_IDS, ARG_ID_tokenizer_path, ARG_ID_skip_tokenizer_init,
                                ARG_ID_max_lora_rank, ARG_ID_config, ARG_COUNT};
    const args_cmd cmd = {
        .usage = "usage: sglc generate --model-path DIR [--prompt TEXT | --input-ids 1,2,3] [options]\n"
                 "       sglc generate --model-path DIR --requests FILE.jsonl [options]  (see --requests F "
                 "--help)",
        .about = "Generate tokens for one prompt offline (no server).",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("generate", &cmd, true, &a, argc, argv);
    if (prc >= 0) return prc;
    if (top_p <= 0) {
        fprintf(stderr, "sglc generate: --top-p must be in (0, 1], got %g\n", top_p);
        args_server_free(&a);
        return 2;
    }
    int rc = 2;
    cli_model_opts mo;
    cli_model_opts_from_args(&mo, &a, threads);
    bool skip_tok = a.skip_tokenizer_init;
    const char *tok_path = a.tokenizer_path;
    model *m = NULL;
    int32_t *ids = NULL, *slots = NULL;
    int n_prompt = 0;
    float *logits = NULL;
    model_kv *kv = NULL;
    tpool *pool = NULL;
    sampling_params sp;
    sampling_params_init(&sp);
    sampling_state st = {0}; /* zeroed: safe to free before init */
    void *scratch = NULL;
    json_t *out_ids = NULL;
    tok_tokenizer *tk = NULL;
    lora_adapter *lad = NULL;
    const model_adapter *lma[1] = {NULL};
    const int32_t lseq[1] = {0};
    char *text = NULL;
    if (prompt && input_ids) {
        fprintf(stderr, "sglc generate: give --prompt or --input-ids, not both\n");
        goto done;
    }
    if (prompt && skip_tok) {
        fprintf(stderr, "sglc generate: --prompt needs the tokenizer; drop --skip-tokenizer-init\n");
        goto done;
    }

    rc = 1;
    m = cli_model_load(&mo);
    if (!m) goto done;
    const model_config *c = model_get_config(m);
    int V = c->vocab_size;
    if (lora_path) {
        char lerr[1024];
        lora_limits lim = {.max_rank = a.max_lora_rank > 0 ? a.max_lora_rank : 0};
        if (!(lad = lora_adapter_load(lora_path, lora_path, m, &lim, lerr, sizeof lerr))) {
            fprintf(stderr, "error: %s\n", lerr);
            rc = 2;
            goto done;
        }
        lma[0] = &lad->ma;
        log_info("LoRA adapter %s: rank %d, lora_alpha %g%s, %.1f MiB, loaded in %.1f ms",
                 lora_path, lad->cfg.r, lad->cfg.alpha, lad->cfg.use_rslora ? " (rsLoRA)" : "",
                 lad->bytes / 1048576.0, lad->load_ms);
    }
    /* the tokenizer is optional unless --prompt or --tokenizer-path asks for it */
    if (!skip_tok && cli_tokenizer_load(tok_path ? tok_path : cli_model_dir(), tok_path || prompt, &tk))
        goto done;
    if (prompt) {
        tok_ids ti = {0};
        if (tok_encode(tk, prompt, strlen(prompt), true, &ti)) {
            fprintf(stderr, "error: cannot tokenize the prompt\n");
            tok_ids_free(&ti);
            goto done;
        }
        n_prompt = (int)ti.n;
        ids = malloc(sizeof(int32_t) * (size_t)(n_prompt > 0 ? n_prompt : 1));
        if (!ids) {
            tok_ids_free(&ti);
            goto done;
        }
        for (int i = 0; i < n_prompt; i++) {
            if (ti.ids[i] >= V) {
                fprintf(stderr, "error: token id %d from the tokenizer is outside the model's vocab (%d)\n",
                        ti.ids[i], V);
                tok_ids_free(&ti);
                rc = 2;
                goto done;
            }
            ids[i] = ti.ids[i];
        }
        tok_ids_free(&ti);
        if (n_prompt == 0) {
            fprintf(stderr, "error: the prompt encodes to no tokens\n");
            rc = 2;
            goto done;
        }
    } else if (input_ids) {
        if (parse_ids(input_ids, &ids, &n_prompt, V)) {
            rc = 2;
            goto done;
        }
    } else {
        if (c->bos_token_id < 0) {
            fprintf(stderr, "error: config.json has no bos_token_id; pass --input-ids\n");
            rc = 2;
            goto done;
        }
        ids = malloc(sizeof(int32_t));
        if (!ids) goto done;
        ids[0] = c->bos_token_id;
        n_prompt = 1;
    }
    if (n_prompt >= c->context_length) {
        fprintf(stderr, "error: the prompt (%d tokens) does not fit the context length %d\n",
                n_prompt, c->context_length);
        rc = 2;
        goto done;
    }
    if (max_new > c->context_length - n_prompt) {
        log_warn("max_new_tokens %lld exceeds the room left in the context (%d); clipped",
                 max_new, c->context_length - n_prompt);
        max_new = c->context_length - n_prompt;
    }
    int total = n_prompt + (int)max_new;
    ids = realloc(ids, sizeof(int32_t) * (size_t)total);
    slots = malloc(sizeof(int32_t) * (size_t)total);
    int n_logit_rows = dump ? n_prompt : 1;
    logits = malloc(sizeof(float) * (size_t)V * (size_t)n_logit_rows);
    pool = tpool_create(cli_threads(&mo));
    kv = model_kv_create(m, total, cli_kv_dtype(&mo, m));
    if (!ids || !slots || !logits || !pool || !kv) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    if (generate_params(&sp, V, max_new, temperature, top_p, top_k, min_p, ignore_eos, seed)) {
        rc = 2;
        goto done;
    }
    scratch = aligned_alloc(64, (sampling_scratch_bytes(V) + 63) & ~(size_t)63);
    if (!scratch || sampling_state_init(&st, &sp, V, c->eos_token_ids, c->n_eos,
                                        generate_seed(&sp, mo.load.random_seed))) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    for (int p = 0; p < total; p++) slots[p] = p;
    if (model_reserve(m, n_prompt < MODEL_DEFAULT_CHUNK ? n_prompt : MODEL_DEFAULT_CHUNK, total,
                      tpool_size(pool)))
        goto done;

    double t0 = time_now_sec();
    /* prefill */
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n_prompt);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)n_logit_rows);
    if (!pos || !rows) {
        free(pos), free(rows);
        goto done;
    }
    for (int p = 0; p < n_prompt; p++) pos[p] = p;
    for (int r = 0; r < n_logit_rows; r++) rows[r] = dump ? r : n_prompt - 1;
    int32_t seq_start[2] = {0, n_prompt}, kv_len = n_prompt;
    const int32_t *slot_list[1] = {slots};
    model_batch b = {.n_tokens = n_prompt, .tokens = ids, .positions = pos, .n_seqs = 1,
                     .seq_start = seq_start, .seq_kv_len = &kv_len, .seq_slots = slot_list,
                     .n_logits = n_logit_rows, .logit_rows = rows, .n_adapters = lad ? 1 : 0,
                     .adapters = lma, .seq_adapter = lad ? lseq : NULL};
    int frc = model_forward(m, kv, &b, logits, pool);
    free(pos);
    free(rows);
    if (frc) {
        fprintf(stderr, "error: forward failed\n");
        goto done;
    }
    double t_prefill = time_now_sec() - t0;
    if (dump) {
        FILE *f = fopen(dump, "wb");
        if (!f || fwrite(logits, sizeof(float) * (size_t)V, (size_t)n_prompt, f) != (size_t)n_prompt) {
            fprintf(stderr, "error: cannot write %s\n", dump);
            if (f) fclose(f);
            goto done;
        }
        if (fclose(f)) {
            fprintf(stderr, "error: cannot write %s\n", dump);
            goto done;
        }
    }
    /* decode */
    /* the processed logits are written back into the row: the dump is done */
    float *last = logits + (size_t)(n_logit_rows - 1) * V;
    int n_out = 0, matched = -1;
    while (n_out < max_new) {
        sampling_result res = {0};
        if (sampling_sample(&st, last, scratch, NULL, &res) || sampling_state_accept(&st, res.token)) {
            fprintf(stderr, "error: sampling failed\n");
            goto done;
        }
        int tok = res.token;
        ids[n_prompt + n_out++] = tok;
        if (!ignore_eos) {
            for (int e = 0; e < c->n_eos; e++)
                if (tok == c->eos_token_ids[e]) matched = tok;
            if (matched >= 0) break;
        }
        if (n_out == max_new) break;
        int32_t p1 = n_prompt + n_out - 1, kl = p1 + 1, ss[2] = {0, 1}, row0 = 0;
        model_batch d = {.n_tokens = 1, .tokens = &ids[p1], .positions = &p1, .n_seqs = 1,
                         .seq_start = ss, .seq_kv_len = &kl, .seq_slots = slot_list,
                         .n_logits = 1, .logit_rows = &row0, .n_adapters = lad ? 1 : 0,
                         .adapters = lma, .seq_adapter = lad ? lseq : NULL};
        if (model_forward(m, kv, &d, logits, pool)) {
            fprintf(stderr, "error: forward failed\n");
            goto done;
        }
        last = logits;
    }
    double e2e = time_now_sec() - t0;
    log_info("prefill %d tokens in %.3f s; %d new tokens in %.3f s (%.1f tok/s decode)", n_prompt,
             t_prefill, n_out, e2e - t_prefill,
             n_out > 1 ? (n_out - 1) / (e2e - t_prefill) : 0.0);
    {
        size_t rss = model_rss_bytes(), wb = model_weight_bytes(m);
        log_info("VmRSS after generation %.1f MiB = %.0f%% of weights (%.1f MiB) + KV (%.1f MiB)",
                 rss / 1048576.0, 100.0 * rss / (double)(wb + kv->bytes), wb / 1048576.0,
                 kv->bytes / 1048576.0);
    }
    if (tk) {
        tok_decode_opts dop = {.skip_special_tokens = true, .spaces_between_special_tokens = true};
        if (tok_decode(tk, ids + n_prompt, (size_t)n_out, &dop, &text, NULL)) {
            fprintf(stderr, "error: cannot decode the output ids\n");
            goto done;
        }
    }
    if (as_json) {
        json_t *root = json_object();
        out_ids = json_array();
        for (int i = 0; i < n_out; i++) json_array_append_new(out_ids, json_integer(ids[n_prompt + i]));
        json_t *fr = json_object();
        if (matched >= 0) {
            json_object_set_new(fr, "type", json_string("stop"));
            json_object_set_new(fr, "matched", json_integer(matched));
        } else {
            json_object_set_new(fr, "type", json_string("length"));
            json_object_set_new(fr, "length", json_integer(n_out));
        }
        json_t *meta = json_object();
        json_object_set_new(meta, "prompt_tokens", json_integer(n_prompt));
        json_object_set_new(meta, "completion_tokens", json_integer(n_out));
        json_object_set_new(meta, "cached_tokens", json_integer(0));
        json_object_set_new(meta, "finish_reason", fr);
        json_object_set_new(meta, "e2e_latency", json_real(e2e));
        json_object_set_new(root, "text", json_stringn(text ? text : "", text ? strlen(text) : 0));
        json_object_set(root, "output_ids", out_ids);
        json_object_set_new(root, "meta_info", meta);
        char *s = json_dumps(root, JSON_COMPACT);
        if (s) printf("%s\n", s);
        free(s);
        json_decref(root);
    } else if (text) {
        printf("%s\n", text);
    } else {
        for (int i = 0; i < n_out; i++) printf("%s%d", i ? " " : "", ids[n_prompt + i]);
        printf("\n");
    }
    rc = 0;
done:
    free(text);
    if (tk) tok_destroy(tk);
    json_decref(out_ids);
    sampling_state_free(&st);
    free(scratch);
    sampling_params_free(&sp);
    model_kv_destroy(kv);
    if (pool) tpool_destroy(pool);
    free(logits);
    free(slots);
    free(ids);
    model_free(m);
    lora_adapter_unref(lad);
    args_server_free(&a);
    return rc;
}
