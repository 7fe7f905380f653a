/* perf_kv_sampling — timings for the radix cache and the sampler (not a
 * test: nothing is asserted).  Build and run from the repo root:
 *
 *   make && cc -O2 -std=c11 -D_GNU_SOURCE -Isrc tests/perf/perf_kv_sampling.c \
 *       build/libsglc.a -ljansson -lm -pthread -o build/perf_kv_sampling && \
 *   ./build/perf_kv_sampling
 *
 * Prints medians of 5 repetitions of process CPU time (not wall time,
 * so that other load on a shared machine does not count).  (The lead may move this to bench/.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv/kv_pool.h"
#include "kv/kv_radix.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median5(double *v)
{
    qsort(v, 5, sizeof *v, cmp_d);
    return v[2];
}

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

/* generated-shared-prefix: groups x prompts, system + question tokens;
 * each request: match+lock, allocate the rest, finish (insert).  Returns
 * microseconds per request and the hit rate. */
static void gsp(int P, int groups, int per_group, int sys_len, int q_len, double *us, double *hit)
{
    int len = sys_len + q_len;
    kv_pool *pool = kv_pool_create((int64_t)groups * (sys_len + per_group * (q_len + P)) / P + 64, P);
    kv_radix *t = kv_radix_create(pool, KV_EVICT_LRU, false);
    int32_t *sys = malloc((size_t)groups * sys_len * sizeof *sys), *tok = malloc((size_t)len * sizeof *tok);
    int32_t *pages = malloc((size_t)(len / P + 2) * sizeof *pages);
    for (int i = 0; i < groups * sys_len; i++) sys[i] = (int32_t)(rnd() % 150000);
    int64_t cached = 0, total = 0;
    double t0 = now_s();
    for (int r = 0; r < per_group; r++)
        for (int g = 0; g < groups; g++) {
            memcpy(tok, sys + (size_t)g * sys_len, (size_t)sys_len * sizeof *tok);
            for (int i = sys_len; i < len; i++) tok[i] = (int32_t)(rnd() % 150000);
            kv_radix_req rr = {0};
            int64_t m = kv_radix_req_match(t, &rr, tok, len, pages);
            int64_t need = kv_pool_pages_for(pool, len) - m / P;
            if (kv_pool_alloc(pool, need, pages + m / P) != 0) {
                kv_radix_evict(t, need * P);
                if (kv_pool_alloc(pool, need, pages + m / P) != 0) abort();
            }
            kv_radix_req_cache_finished(t, &rr, tok, len, pages, true);
            cached += m;
            total += len;
        }
    *us = (now_s() - t0) * 1e6 / (groups * per_group);
    *hit = (double)cached / (double)total;
    kv_radix_destroy(t);
    kv_pool_destroy(pool);
    free(sys);
    free(tok);
    free(pages);
}

static double sample_us(const char *json, const float *logits, int64_t V, int iters, bool logprobs)
{
    sampling_params p;
    char err[256];
    if (sampling_params_parse(&p, json, strlen(json), err, sizeof err) != 0) abort();
    sampling_state st;
    sampling_state_init(&st, &p, V, NULL, 0, 1);
    void *scratch = malloc(sampling_scratch_bytes(V));
    float *row = malloc((size_t)V * sizeof *row);
    int32_t top_ids[5];
    float top_lp[5];
    sampling_logprob_req lp = {.want = true, .top_n = 5};
    double tot = 0;
    for (int i = 0; i < iters; i++) {
        memcpy(row, logits, (size_t)V * sizeof *row);
        sampling_result r = {.top_ids = top_ids, .top_logprobs = top_lp};
        double t0 = now_s();
        sampling_sample(&st, row, scratch, logprobs ? &lp : NULL, &r);
        tot += now_s() - t0;
        sampling_state_accept(&st, r.token);
    }
    sampling_state_free(&st);
    sampling_params_free(&p);
    free(scratch);
    free(row);
    return tot * 1e6 / iters;
}

int main(void)
{
    printf("radix cache, generated-shared-prefix 8 groups x 16 prompts, 1024 system + 128 question tokens\n");
    for (int P = 1; P <= 64; P *= 4) {
        double us[5], hit = 0;
        for (int k = 0; k < 5; k++) gsp(P, 8, 16, 1024, 128, &us[k], &hit);
        printf("  page_size %2d: %8.2f us per request (match + lock + insert + free), hit rate %.3f\n", P,
               median5(us), hit);
    }
    int64_t V = 151936;
    float *logits = malloc((size_t)V * sizeof *logits);
    for (int64_t i = 0; i < V; i++) { /* Gaussian-ish, sd ~2.5, a few peaks */
        double u1 = ((double)(rnd() >> 11) + 1) * 0x1.0p-53, u2 = (double)(rnd() >> 11) * 0x1.0p-53;
        logits[i] = (float)(2.5 * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
    }
    for (int i = 0; i < 8; i++) logits[rnd() % V] = 14.0f - i;
    printf("sampler, vocab %lld (Qwen2.5), per call:\n", (long long)V);
    const char *cases[] = {"{\"temperature\": 0}", "{\"temperature\": 0.7}", "{\"temperature\": 0.7, \"top_k\": 50}",
                           "{\"temperature\": 0.7, \"top_p\": 0.9}", "{\"temperature\": 1.0, \"top_p\": 0.95, \"top_k\": 50, \"min_p\": 0.05}",
                           "{\"temperature\": 0.8, \"frequency_penalty\": 0.5, \"repetition_penalty\": 1.1}"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        double a[5], b[5];
        for (int k = 0; k < 5; k++) {
            a[k] = sample_us(cases[c], logits, V, 40, false);
            b[k] = sample_us(cases[c], logits, V, 40, true);
        }
        printf("  %-80s %8.1f us  (+top-5 logprobs %8.1f us)\n", cases[c], median5(a), median5(b));
    }
    free(logits);
    return 0;
}
