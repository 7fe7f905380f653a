/* cmd_perplexity — `sglc perplexity --model-path M --file TEXT [--ctx-size N]`:
 * the perplexity of a model on a text file, computed the way llama.cpp's
 * `llama-perplexity` computes it, so quantized files can be compared with
 * the f32 model (and with llama.cpp) on the same text.
 *
 * DESIGN (llama.cpp's perplexity(), restated):
 *   1. the whole file is tokenized once with the model's tokenizer and its
 *      special tokens (BOS first when the tokenizer adds one);
 *   2. the ids are cut into n_chunk = n_tokens / ctx non-overlapping
 *      windows of ctx tokens (the tail that does not fill a window is
 *      dropped; --chunks N keeps the first N); at least 2 windows'
 *      worth of tokens are required, as llama.cpp requires;
 *   3. each window is run as one prefill at positions 0..ctx-1 on an
 *      empty KV cache, with its first token replaced by BOS when the
 *      tokenizer adds BOS;
 *   4. only the second half is scored: for j in [ctx/2, ctx-2] the logits
 *      at position j give -log softmax(logits)[token j+1]; that is
 *      ctx - ctx/2 - 1 tokens per window, each with at least ctx/2 tokens
 *      of context;
 *   5. ppl = exp(sum / count), with llama.cpp's uncertainty estimate
 *      ppl * sqrt((E[nll^2] - E[nll]^2) / (count - 1)).
 * The log-softmax is computed in double over the f32 logits (max shifted).
 * The default ctx is 256 (half of TinyStories-656K's 512-token context;
 * llama.cpp's own default is the model's training context), capped by the
 * model's context length.  Every weight format the loader takes works
 * (folder or .gguf, --load-format, --dtype, --kv-cache-dtype,
 * --quantization), since the model comes from cli_model_load.
 * --result-filename appends one JSON line per run.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_model.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

/* -log softmax(row)[target] over V logits, in double. */
static double nll_of(const float *row, int V, int target)
{
    float mx = row[0];
    for (int i = 1; i < V; i++)
        if (row[i] > mx) mx = row[i];
    double s = 0.0;
    for (int i = 0; i < V; i++) s += exp((double)row[i] - (double)mx);
    return -(((double)row[target] - (double)mx) - log(s));
}

typedef struct ppl_result {
    int n_tokens, n_chunks, scored;
    double nll_sum, nll2_sum;
    double seconds;
} ppl_result;

/* Score the windows of ids (n ids) per the DESIGN comment.  bos < 0: the
 * first token of a window is kept.  0, or -1 after printing the error. */
static int ppl_run(model *m, tpool *pool, dtype kv_dt, const int32_t *ids, int n, int ctx,
                   int n_chunk, int bos, int verbose, ppl_result *r)
{
    const model_config *c = model_get_config(m);
    int V = c->vocab_size, first = ctx / 2, nl = ctx - first - 1, rc = -1;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)ctx), *pos = malloc(sizeof(int32_t) * (size_t)ctx);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)ctx), *rows = malloc(sizeof(int32_t) * (size_t)nl);
    float *logits = malloc(sizeof(float) * (size_t)nl * (size_t)V);
    model_kv *kv = model_kv_create(m, ctx, kv_dt);
    memset(r, 0, sizeof *r);
    r->n_tokens = n;
    r->n_chunks = n_chunk;
    if (!tok || !pos || !slots || !rows || !logits || !kv) {
        fprintf(stderr, "error: out of memory for a window of %d tokens\n", ctx);
        goto out;
    }
    for (int p = 0; p < ctx; p++) pos[p] = slots[p] = p;
    for (int j = 0; j < nl; j++) rows[j] = first + j;
    if (model_reserve(m, ctx, ctx, tpool_size(pool))) {
        fprintf(stderr, "error: out of memory for the forward scratch\n");
        goto out;
    }
    const int32_t *sl[1] = {slots};
    int32_t start[2] = {0, ctx}, kvl[1] = {ctx};
    model_batch b = {.n_tokens = ctx, .tokens = tok, .positions = pos, .n_seqs = 1,
                     .seq_start = start, .seq_kv_len = kvl, .seq_slots = sl, .n_logits = nl,
                     .logit_rows = rows};
    double t0 = time_now_sec();
    for (int ch = 0; ch < n_chunk; ch++) {
        const int32_t *w = ids + (size_t)ch * ctx;
        memcpy(tok, w, sizeof(int32_t) * (size_t)ctx);
        if (bos >= 0) tok[0] = bos;
        if (model_forward(m, kv, &b, logits, pool)) {
            fprintf(stderr, "error: forward of window %d failed\n", ch);
            goto out;
        }
        for (int j = 0; j < nl; j++) {
            double x = nll_of(logits + (size_t)j * V, V, w[first + j + 1]);
            r->nll_sum += x;
            r->nll2_sum += x * x;
        }
        r->scored += nl;
        if (verbose) {
            printf("[%d]%.4f,", ch + 1, exp(r->nll_sum / r->scored));
            fflush(stdout);
        }
    }
    if (verbose) printf("\n");
    r->seconds = time_now_sec() - t0;
    rc = 0;
out:
    model_kv_destroy(kv);
    free(tok), free(pos), free(slots), free(rows), free(logits);
    return rc;
}

/* Read `path` whole and tokenize it with add_special_tokens.  0 / -1. */
static int tokenize_file(const tok_tokenizer *tk, const char *path, int V, tok_ids *out)
{
    size_t len = 0;
    char *text = fileio_read(path, (size_t)1 << 30, &len);
    if (!text) {
        fprintf(stderr, "error: --file %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = tok_encode(tk, text, len, true, out);
    free(text);
    if (rc) {
        fprintf(stderr, "error: cannot tokenize %s\n", path);
        return -1;
    }
    for (size_t i = 0; i < out->n; i++)
        if (out->ids[i] < 0 || out->ids[i] >= V) {
            fprintf(stderr, "error: token id %d from the tokenizer is outside the model's vocab (%d)\n",
                    out->ids[i], V);
            return -1;
        }
    return 0;
}

static int append_json(const char *file, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    FILE *f = fopen(file, "a");
    int rc = (!f || !s || fprintf(f, "%s\n", s) < 0) ? -1 : 0;
    if (f && fclose(f)) rc = -1;
    free(s);
    if (rc) fprintf(stderr, "error: cannot append to %s\n", file);
    return rc;
}

int cmd_perplexity(int argc, char **argv)
{
    const char *file = NULL, *result_file = NULL, *run_name = "ppl";
    long long ctx = 256, chunks = -1, threads = 0;
    bool quiet = false;
    const args_extra extra[] = {
        {.name = "--file", .metavar = "FILE", .help = "The text to score (UTF-8), read whole.", .value = &file},
        {.name = "--ctx-size", .metavar = "N",
         .help = "Window length in tokens; the second half of each window is scored (llama.cpp's -c).",
         .ival = &ctx, .lo = 4, .hi = 1 << 20, .def = "256 (capped at the context length)"},
        {.name = "--chunks", .metavar = "N", .help = "Score only the first N windows (-1: all).",
         .ival = &chunks, .lo = -1, .hi = 1 << 30, .def = "-1"},
        {.name = "--result-filename", .metavar = "FILE", .help = "Append one JSON line with the result.",
         .value = &result_file},
        {.name = "--run-name", .metavar = "NAME", .help = "Stored in the JSON line.", .value = &run_name,
         .def = "ppl"},
        {.name = "--quiet", .help = "Do not print the running perplexity per window.", .flag = &quiet},
        CLI_EXTRA_THREADS(&threads),
        {0},
    };
    static const int shown[] = {CLI_MODEL_ARG_IDS, ARG_ID_tokenizer_path, ARG_ID_config, ARG_COUNT};
    const args_cmd cmd = {
        .usage = "usage: sglc perplexity --model-path DIR|FILE.gguf --file TEXT [--ctx-size N] [options]",
        .about = "Perplexity of the model on a text file, as llama.cpp's llama-perplexity computes it: "
                 "the file is tokenized (BOS first), cut into windows of --ctx-size tokens (each "
                 "starting with BOS), and the second half of every window is scored.",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("perplexity", &cmd, true, &a, argc, argv);
    if (prc >= 0) return prc;
    if (!file) {
        fprintf(stderr, "sglc perplexity: --file is required\n");
        args_server_free(&a);
        return 2;
    }
    cli_model_opts mo;
    cli_model_opts_from_args(&mo, &a, threads);
    char model_path[4096], tok_path[4096] = "";
    snprintf(model_path, sizeof model_path, "%s", a.model_path ? a.model_path : "");
    if (a.tokenizer_path) snprintf(tok_path, sizeof tok_path, "%s", a.tokenizer_path);
    const char *q = mo.load.quantization;
    char quant[128] = "";
    if (q) snprintf(quant, sizeof quant, "%s", q);
    int kv_req = mo.kv_dtype;
    model *m = cli_model_load(&mo);
    args_server_free(&a);
    if (!m) return 1;
    int rc = 1;
    tok_tokenizer *tk = NULL;
    tok_ids ids = {0};
    tpool *pool = NULL;
    const model_config *c = model_get_config(m);
    if (cli_tokenizer_load(tok_path[0] ? tok_path : cli_model_dir(), true, &tk)) goto done;
    if (tokenize_file(tk, file, c->vocab_size, &ids)) goto done;
    if (ctx > c->context_length) {
        log_info("--ctx-size %lld exceeds the context length %d; using %d", ctx, c->context_length,
                 c->context_length);
        ctx = c->context_length;
    }
    if ((long long)ids.n < 2 * ctx) {
        fprintf(stderr, "error: %s tokenizes to %zu tokens; a context of %lld needs at least %lld\n", file,
                ids.n, ctx, 2 * ctx);
        rc = 2;
        goto done;
    }
    int n_chunk = (int)(ids.n / (size_t)ctx);
    if (chunks >= 0 && chunks < n_chunk) n_chunk = (int)chunks;
    if (n_chunk < 1) {
        fprintf(stderr, "error: --chunks 0 scores nothing\n");
        rc = 2;
        goto done;
    }
    int bos = tok_add_bos(tk) ? tok_bos_id(tk) : -1;
    int nth = cli_threads(&mo);
    pool = tpool_create(nth);
    if (!pool) goto done;
    dtype kv_dt = cli_kv_dtype(&mo, m);
    printf("perplexity: %s, %zu tokens, %d windows of %lld, %lld scored per window, weights %s, kv %s%s%s\n",
           file, ids.n, n_chunk, ctx, ctx - ctx / 2 - 1, dtype_name(model_weight_dtype(m)),
           dtype_name(kv_dt), quant[0] ? ", quantization " : "", quant);
    ppl_result r;
    if (ppl_run(m, pool, kv_dt, ids.ids, (int)ids.n, (int)ctx, n_chunk, bos, !quiet, &r)) goto done;
    double mean = r.nll_sum / r.scored, ppl = exp(mean);
    double var = r.nll2_sum / r.scored - mean * mean;
    double err = (var > 0 && r.scored > 1) ? ppl * sqrt(var / (r.scored - 1)) : 0.0;
    printf("Final estimate: PPL = %.4f +/- %.5f (nll_mean %.6f over %d tokens, %.2f s)\n", ppl, err, mean,
           r.scored, r.seconds);
    rc = 0;
    if (result_file) {
        json_t *j = json_object();
        json_object_set_new(j, "run_name", json_string(run_name));
        json_object_set_new(j, "model", json_string(model_path));
        json_object_set_new(j, "file", json_string(file));
        json_object_set_new(j, "tokens", json_integer(r.n_tokens));
        json_object_set_new(j, "ctx_size", json_integer(ctx));
        json_object_set_new(j, "chunks", json_integer(r.n_chunks));
        json_object_set_new(j, "tokens_scored", json_integer(r.scored));
        json_object_set_new(j, "nll_mean", json_real(mean));
        json_object_set_new(j, "ppl", json_real(ppl));
        json_object_set_new(j, "ppl_stderr", json_real(err));
        json_object_set_new(j, "weight_dtype", json_string(dtype_name(model_weight_dtype(m))));
        json_object_set_new(j, "weight_bytes", json_integer((json_int_t)model_weight_bytes(m)));
        json_object_set_new(j, "kv_cache_dtype", json_string(kv_req >= 0 ? dtype_name(kv_dt) : "auto"));
        json_object_set_new(j, "kv_dtype", json_string(dtype_name(kv_dt)));
        json_object_set_new(j, "quantization", quant[0] ? json_string(quant) : json_null());
        json_object_set_new(j, "threads", json_integer(nth));
        json_object_set_new(j, "seconds", json_real(r.seconds));
        if (append_json(result_file, j)) rc = 1;
        json_decref(j);
    }
done:
    tok_ids_free(&ids);
    if (tk) tok_destroy(tk);
    if (pool) tpool_destroy(pool);
    model_free(m);
    return rc;
}
