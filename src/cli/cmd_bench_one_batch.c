/* cmd_bench_one_batch — `sglc bench-one-batch`: latency of one static batch,
 * as sglang.bench_one_batch measures it.
 *
 * DESIGN: for each (batch_size, input_len, output_len) combination: random
 * input ids (seeded), one prefill forward of all B sequences together, then
 * output_len - 1 decode steps of B tokens (greedy).  A short warmup (one
 * small prefill + decode) runs first so page faults and thread start-up are
 * not timed.  Prints prefill latency/throughput, every decode step, median
 * decode latency/throughput, total, plus weight bytes and the effective
 * weight-streaming bandwidth of a decode step (weight bytes / median decode
 * latency) to judge the kernels.  --result-filename appends one JSON line
 * per run.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_model.h"
#include "cli/cli_spec.h"
#include "kernels/kernels.h"
#include "util/log.h"
#include "util/threadpool.h"
#include "util/timeutil.h"
#include "util/rng.h"

#define MAX_LIST 16

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct run_result {
    double prefill_latency, median_decode;
    int decode_steps;
} run_result;

/* One prefill + (O-1) decodes of B sequences; verbose prints each step. */
static int run_once(model *m, tpool *pool, dtype kv_dt, int B, int I, int O, uint64_t seed,
                    int verbose, run_result *res)
{
    const model_config *c = model_get_config(m);
    int V = c->vocab_size, L = I + O, rc = -1;
    size_t nt = (size_t)B * I;
    int32_t *tokens = malloc(sizeof(int32_t) * nt), *pos = malloc(sizeof(int32_t) * nt);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)B * L);
    int32_t *start = malloc(sizeof(int32_t) * (size_t)(B + 1)), *kvl = malloc(sizeof(int32_t) * B);
    int32_t *rows = malloc(sizeof(int32_t) * B), *next = malloc(sizeof(int32_t) * B);
    const int32_t **sl = malloc(sizeof(int32_t *) * B);
    float *logits = malloc(sizeof(float) * (size_t)B * V);
    double *lat = malloc(sizeof(double) * (O > 1 ? O : 1));
    model_kv *kv = model_kv_create(m, B * L, kv_dt);
    if (!tokens || !pos || !slots || !start || !kvl || !rows || !next || !sl || !logits || !lat ||
        !kv) {
        fprintf(stderr, "error: out of memory for batch %d x (%d + %d)\n", B, I, O);
        goto out;
    }
    uint64_t rs = seed;
    for (int s = 0; s < B; s++) {
        for (int p = 0; p < L; p++) slots[(size_t)s * L + p] = s * L + p;
        sl[s] = slots + (size_t)s * L;
        start[s] = s * I;
        kvl[s] = I;
        rows[s] = s * I + I - 1;
        for (int p = 0; p < I; p++) {
            tokens[(size_t)s * I + p] = (int32_t)(rng_next(&rs) % (uint64_t)(V < 10000 ? V : 10000));
            pos[(size_t)s * I + p] = p;
        }
    }
    start[B] = B * I;
    if (model_reserve(m, B * I < MODEL_DEFAULT_CHUNK ? B * I : MODEL_DEFAULT_CHUNK, L, tpool_size(pool)))
        goto out;
    model_batch b = {.n_tokens = B * I, .tokens = tokens, .positions = pos, .n_seqs = B,
                     .seq_start = start, .seq_kv_len = kvl, .seq_slots = sl, .n_logits = B,
                     .logit_rows = rows};
    double t0 = time_now_sec();
    if (model_forward(m, kv, &b, logits, pool)) goto out;
    res->prefill_latency = time_now_sec() - t0;
    if (verbose)
        printf("Prefill. latency: %.5f s, throughput: %9.2f token/s\n", res->prefill_latency,
               (double)B * I / res->prefill_latency);
    for (int s = 0; s < B; s++) next[s] = kern_argmax(logits + (size_t)s * V, V);
    int steps = 0;
    for (int step = 0; step < O - 1; step++) {
        for (int s = 0; s < B; s++) {
            tokens[s] = next[s];
            pos[s] = I + step;
            start[s] = s;
            kvl[s] = I + step + 1;
            rows[s] = s;
        }
        start[B] = B;
        b.n_tokens = B;
        double t1 = time_now_sec();
        if (model_forward(m, kv, &b, logits, pool)) goto out;
        lat[steps] = time_now_sec() - t1;
        if (verbose && (step < 5 || step % 10 == 0))
            printf("Decode %d. Batch size: %d, latency: %.5f s, throughput: %9.2f token/s\n", step,
                   B, lat[steps], B / lat[steps]);
        steps++;
        for (int s = 0; s < B; s++) next[s] = kern_argmax(logits + (size_t)s * V, V);
    }
    res->decode_steps = steps;
    res->median_decode = 0;
    if (steps) {
        qsort(lat, (size_t)steps, sizeof(double), cmp_double);
        res->median_decode = steps % 2 ? lat[steps / 2] : 0.5 * (lat[steps / 2 - 1] + lat[steps / 2]);
    }
    rc = 0;
out:
    model_kv_destroy(kv);
    free(tokens), free(pos), free(slots), free(start), free(kvl), free(rows), free(next);
    free(sl), free(logits), free(lat);
    return rc;
}

int cmd_bench_one_batch(int argc, char **argv)
{
    int bs[MAX_LIST] = {1}, il[MAX_LIST] = {1024}, ol[MAX_LIST] = {16};
    int nbs = 1, nil = 1, nol = 1;
    bool no_warmup = false;
    const char *result_file = NULL, *run_name = "before";
    long long seed = 42, threads = 0;
    const args_extra extra[] = {
        {.name = "--batch-size", .metavar = "B", .help = "Batch sizes.", .ilist = bs, .n_ilist = &nbs,
         .max_ilist = MAX_LIST, .lo = 1, .hi = 1 << 24, .def = "1"},
        {.name = "--input-len", .metavar = "I", .help = "Prompt lengths.", .ilist = il, .n_ilist = &nil,
         .max_ilist = MAX_LIST, .lo = 1, .hi = 1 << 24, .def = "1024"},
        {.name = "--output-len", .metavar = "O", .help = "Generated lengths, the prefill token included.",
         .ilist = ol, .n_ilist = &nol, .max_ilist = MAX_LIST, .lo = 1, .hi = 1 << 24, .def = "16"},
        {.name = "--result-filename", .metavar = "FILE", .help = "Append one JSON line per run.",
         .value = &result_file},
        {.name = "--run-name", .metavar = "NAME", .help = "Stored in the JSON lines.", .value = &run_name,
         .def = "before"},
        {.name = "--seed", .metavar = "S", .help = "Seed of the random input ids.", .ival = &seed, .lo = 0,
         .hi = (double)(1ll << 62), .def = "42"},
        {.name = "--no-warmup", .help = "Skip the warm-up run.", .flag = &no_warmup},
        CLI_EXTRA_THREADS(&threads),
        {0},
    };
    static const int shown[] = {CLI_MODEL_ARG_IDS, ARG_ID_dp_size, ARG_ID_config, CLI_SPEC_ARG_IDS, ARG_COUNT};
    const args_cmd cmd = {
        .usage = "usage: sglc bench-one-batch --model-path DIR --batch-size B [B ...] --input-len I [I ...]\n"
                 "                            --output-len O [O ...] [options]",
        .about = "Time one prefill of B sequences of I random tokens, then O-1 decode steps "
                 "(sglang.bench_one_batch), for every combination of the lists.",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("bench-one-batch", &cmd, true, &a, argc, argv);
    if (prc >= 0) return prc;
    if (a.dp_size != ARGS_INT_NONE && a.dp_size > 1) {
        /* taken only to say why: one static batch through the model, no
         * scheduler to replicate (docs/notes/dp.md) */
        fprintf(stderr, "sglc bench-one-batch: --dp-size %lld is not supported: this command runs one static batch "
                        "straight through the model (no scheduler to replicate); use bench-offline --dp-size %lld "
                        "for data-parallel throughput\n", (long long)a.dp_size, (long long)a.dp_size);
        args_server_free(&a);
        return 2;
    }
    if (a.speculative_algorithm) {
        /* taken (the offline commands share serve's speculative arguments)
         * only to say why: drafts are proposed and verified by the
         * scheduler's decode hook, and this command has no scheduler */
        fprintf(stderr, "sglc bench-one-batch: --speculative-algorithm %s is not supported: this command runs one "
                        "static batch straight through the model (no scheduler, so no draft / verify step); use "
                        "bench-offline --speculative-algorithm %s, which reports the accept length\n",
                a.speculative_algorithm, a.speculative_algorithm);
        args_server_free(&a);
        return 2;
    }
    cli_model_opts mo;
    cli_model_opts_from_args(&mo, &a, threads);
    int warmup = !no_warmup;
    model *m = cli_model_load(&mo);
    args_server_free(&a); /* mo's strings are not read after the load */
    if (!m) return 1;
    const model_config *c = model_get_config(m);
    for (int x = 0; x < nbs; x++)
        for (int a = 0; a < nil; a++)
            for (int o = 0; o < nol; o++)
                if ((long long)bs[x] * (il[a] + ol[o]) > (1LL << 28)) {
                    fprintf(stderr, "error: batch %d x (%d + %d) tokens is too large\n", bs[x],
                            il[a], ol[o]);
                    model_free(m);
                    return 2;
                }
    for (int a = 0; a < nil; a++)
        for (int o = 0; o < nol; o++)
            if (il[a] + ol[o] > c->context_length) {
                fprintf(stderr, "error: input_len %d + output_len %d exceeds the context length %d\n",
                        il[a], ol[o], c->context_length);
                model_free(m);
                return 2;
            }
    int nth = cli_threads(&mo);
    tpool *pool = tpool_create(nth);
    if (!pool) {
        model_free(m);
        return 1;
    }
    dtype kv_dt = cli_kv_dtype(&mo, m);
    size_t wbytes = model_weight_bytes(m);
    printf("model: %s, %d layers, weights %.1f MiB (%s), kv %s, threads %d\n", c->architecture,
           c->n_layer, wbytes / 1048576.0, dtype_name(model_weight_dtype(m)), dtype_name(kv_dt),
           nth);
    int rc = 0;
    run_result res;
    if (warmup) {
        printf("Warmup ...\n");
        if (run_once(m, pool, kv_dt, bs[0], il[0] < 32 ? il[0] : 32, 2, (uint64_t)seed, 0, &res))
            rc = 1;
    }
    for (int x = 0; x < nbs && !rc; x++)
        for (int y = 0; y < nil && !rc; y++)
            for (int z = 0; z < nol && !rc; z++) {
                int B = bs[x], I = il[y], O = ol[z];
                printf("Benchmark batch_size=%d input_len=%d output_len=%d ...\n", B, I, O);
                long n_ar0;
                double w0, ar0 = model_tp_comm_seconds(m, &n_ar0, &w0);
                if (run_once(m, pool, kv_dt, B, I, O, (uint64_t)seed, 1, &res)) {
                    fprintf(stderr, "error: run failed\n");
                    rc = 1;
                    break;
                }
                double pt = (double)B * I / res.prefill_latency;
                double dt = res.median_decode > 0 ? B / res.median_decode : 0.0;
                double total = res.prefill_latency + res.median_decode * res.decode_steps;
                if (res.decode_steps)
                    printf("Decode.  median latency: %.5f s, median throughput: %9.2f token/s\n",
                           res.median_decode, dt);
                printf("Total. latency: %.3f s, throughput: %9.2f token/s\n", total,
                       (double)B * (I + O) / total);
                if (model_tp_size(m) > 1) { /* tensor parallelism: rank 0's time in all-reduces */
                    long n_ar;
                    double w1, ar = model_tp_comm_seconds(m, &n_ar, &w1) - ar0, wt = w1 - w0;
                    n_ar -= n_ar0;
                    printf("Tensor parallelism: %d ranks; all-reduce %.2f%% of the run (%ld calls, "
                           "%.1f us each); without waiting for the other ranks to arrive %.2f%% "
                           "(%.1f us each)\n",
                           model_tp_size(m), 100.0 * ar / total, n_ar, n_ar ? 1e6 * ar / n_ar : 0.0,
                           100.0 * (ar - wt) / total, n_ar ? 1e6 * (ar - wt) / n_ar : 0.0);
                }
                /* bytes the last decode step read: all of a dense model;
                 * for MoE only the experts that step routed to */
                size_t rbytes = res.decode_steps ? model_last_read_bytes(m) : wbytes;
                if (res.decode_steps && rbytes != wbytes)
                    printf("Weights: %.1f MiB, read per decode step: %.1f MiB (active experts); "
                           "effective decode weight bandwidth: %.2f GB/s\n",
                           wbytes / 1048576.0, rbytes / 1048576.0,
                           rbytes / res.median_decode / 1e9);
                else if (res.decode_steps)
                    printf("Weights: %.1f MiB; effective decode weight bandwidth: %.2f GB/s\n",
                           wbytes / 1048576.0, wbytes / res.median_decode / 1e9);
                if (result_file) {
                    json_t *j = json_object();
                    json_object_set_new(j, "run_name", json_string(run_name));
                    json_object_set_new(j, "batch_size", json_integer(B));
                    json_object_set_new(j, "input_len", json_integer(I));
                    json_object_set_new(j, "output_len", json_integer(O));
                    json_object_set_new(j, "prefill_latency", json_real(res.prefill_latency));
                    json_object_set_new(j, "prefill_throughput", json_real(pt));
                    json_object_set_new(j, "median_decode_latency", json_real(res.median_decode));
                    json_object_set_new(j, "median_decode_throughput", json_real(dt));
                    json_object_set_new(j, "total_latency", json_real(total));
                    json_object_set_new(j, "overall_throughput",
                                        json_real((double)B * (I + O) / total));
                    json_object_set_new(j, "weight_bytes", json_integer((json_int_t)wbytes));
                    json_object_set_new(j, "decode_read_bytes", json_integer((json_int_t)rbytes));
                    json_object_set_new(j, "decode_weight_gbps",
                                        json_real(res.median_decode > 0
                                                      ? rbytes / res.median_decode / 1e9
                                                      : 0.0));
                    json_object_set_new(j, "threads", json_integer(nth));
                    char *s = json_dumps(j, JSON_COMPACT);
                    FILE *f = fopen(result_file, "a");
                    if (!f || !s || fprintf(f, "%s\n", s) < 0) {
                        fprintf(stderr, "error: cannot append to %s\n", result_file);
                        rc = 1;
                    }
                    if (f) fclose(f);
                    free(s);
                    json_decref(j);
                }
            }
    tpool_destroy(pool);
    model_free(m);
    return rc;
}
