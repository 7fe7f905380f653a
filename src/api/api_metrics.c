/* api_metrics — /metrics in the Prometheus text format, with SGLang's
 * metric names (python/sglang/srt/metrics/collector.py).
 *
 * DESIGN: the tokenizer-manager metrics (token counters, request counters
 * and the latency histograms) are observed by the API dispatcher as events
 * arrive: time to first token when a request's first tokens arrive
 * (streaming or not, as SGLang's tokenizer manager sees its first output),
 * inter-token latency for every later batch of tokens (n tokens after dt
 * count as n samples of dt/n in one bucket and add dt to the sum, SGLang's
 * observe_inter_token_latency), end-to-end latency, prompt / generation /
 * cached token counters and the request counters at finish.  The
 * scheduler gauges (running and queued requests, token usage, cache hit
 * rate, ...) are read from the scheduler's stats snapshot when /metrics is
 * rendered.  One mutex guards the counters.
 *
 * Labels: model_name on every series (SGLang's TokenizerMetricsCollector);
 * the scheduler gauges add engine_type="unified", tp_rank="0",
 * pp_rank="0" as SGLang's scheduler collector does on one GPU.
 * cache_hit_rate is cumulative (cached prompt tokens / prompt tokens of
 * finished requests); SGLang averages over its recent batches. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_ops.h"

typedef struct {
    double *le;       /* (n) upper bounds, ascending */
    uint64_t *count;  /* (n + 1) per-bucket counts, last = +Inf */
    int n;
    double sum;
} hist;

struct api_metrics {
    pthread_mutex_t mu;
    char *model;          /* owned, label-escaped */
    double prompt_tokens, generation_tokens, cached_tokens, num_requests, num_aborted;
    hist ttft, itl, e2e;
};

static const double def_ttft[] = {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400};
static const double def_e2e[] = {0.1, 0.2, 0.4, 0.6, 0.8, 1,   2,   4,   6,    8,    10,
                                 20,  40,  60,  80,  100, 200, 400, 600, 1200, 1800, 2400};
static const double def_itl[] = {0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025,
                                 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400,
                                 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000};

static int hist_init(hist *h, const json_t *custom, const double *def, int ndef, const char *flag,
                     char *err, size_t errlen)
{
    int n = custom ? (int)json_array_size(custom) : ndef;
    if (custom && (!json_is_array(custom) || n == 0)) {
        snprintf(err, errlen, "%s needs a non-empty list of numbers", flag);
        return -1;
    }
    h->le = calloc((size_t)n, sizeof(double));
    h->count = calloc((size_t)n + 1, sizeof(uint64_t));
    if (!h->le || !h->count) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->n = n;
    for (int i = 0; i < n; i++) {
        if (custom) {
            json_t *v = json_array_get(custom, (size_t)i);
            if (!json_is_number(v) || !isfinite(json_number_value(v))) {
                snprintf(err, errlen, "%s: bucket %d is not a number", flag, i);
                return -1;
            }
            h->le[i] = json_number_value(v);
        } else {
            h->le[i] = def[i];
        }
        if (i > 0 && h->le[i] <= h->le[i - 1]) {
            snprintf(err, errlen, "%s: buckets must be in increasing order", flag);
            return -1;
        }
    }
    return 0;
}

static void hist_free(hist *h)
{
    free(h->le);
    free(h->count);
}

/* n samples of value v */
static void hist_observe(hist *h, double v, uint64_t n)
{
    int i = 0;
    while (i < h->n && v > h->le[i]) i++;
    h->count[i] += n;
}

api_metrics *api_metrics_create(const char *model_name, const json_t *ttft, const json_t *itl,
                                const json_t *e2e, char *err, size_t errlen)
{
    api_metrics *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->mu, NULL);
    const char *name = model_name ? model_name : "default";
    m->model = malloc(strlen(name) * 2 + 1);
    if (!m->model) {
        snprintf(err, errlen, "out of memory");
        api_metrics_destroy(m);
        return NULL;
    }
    /* label values escape backslash, double quote and newline */
    char *o = m->model;
    for (const char *p = name; *p; p++) {
        if (*p == '\\' || *p == '"') *o++ = '\\', *o++ = *p;
        else if (*p == '\n') *o++ = '\\', *o++ = 'n';
        else *o++ = *p;
    }
    *o = 0;
    if (hist_init(&m->ttft, ttft, def_ttft, (int)(sizeof def_ttft / sizeof def_ttft[0]),
                  "--bucket-time-to-first-token", err, errlen) ||
        hist_init(&m->itl, itl, def_itl, (int)(sizeof def_itl / sizeof def_itl[0]),
                  "--bucket-inter-token-latency", err, errlen) ||
        hist_init(&m->e2e, e2e, def_e2e, (int)(sizeof def_e2e / sizeof def_e2e[0]),
                  "--bucket-e2e-request-latency", err, errlen)) {
        api_metrics_destroy(m);
        return NULL;
    }
    return m;
}

void api_metrics_destroy(api_metrics *m)
{
    if (!m) return;
    hist_free(&m->ttft);
    hist_free(&m->itl);
    hist_free(&m->e2e);
    free(m->model);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void api_metrics_ttft(api_metrics *m, double s)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->ttft, s, 1);
    m->ttft.sum += s;
    pthread_mutex_unlock(&m->mu);
}

void api_metrics_itl(api_metrics *m, double interval, int64_t n)
{
    if (!m || n <= 0) return;
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->itl, interval / (double)n, (uint64_t)n);
    m->itl.sum += interval;
    pthread_mutex_unlock(&m->mu);
}

void api_metrics_finished(api_metrics *m, int64_t prompt, int64_t gen, int64_t cached, double e2e,
                          bool aborted)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    if (aborted) {
        m->num_aborted += 1;
    } else {
        m->prompt_tokens += (double)prompt;
        m->generation_tokens += (double)gen;
        m->cached_tokens += (double)(cached > 0 ? cached : 0);
        m->num_requests += 1;
        hist_observe(&m->e2e, e2e, 1);
        m->e2e.sum += e2e;
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} tbuf;

static void tb_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_printf(tbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 8192;
        while (nc < b->len + (size_t)n + 1) nc *= 2;
        char *g = realloc(b->p, nc);
        if (!g) {
            b->oom = true;
            return;
        }
        b->p = g;
        b->cap = nc;
    }
}

/* prometheus_client's float text: integers as "3.0", +Inf, else repr */
static void fmt_num(char *out, size_t n, double v)
{
    if (isinf(v)) snprintf(out, n, v > 0 ? "+Inf" : "-Inf");
    else if (isnan(v)) snprintf(out, n, "NaN");
    else if (v == floor(v) && fabs(v) < 1e15) snprintf(out, n, "%.1f", v);
    else {
        for (int p = 1; p <= 17; p++) {
            snprintf(out, n, "%.*g", p, v);
            if (strtod(out, NULL) == v) break;
        }
    }
}

static void metric_head(tbuf *b, const char *name, const char *type, const char *help)
{
    tb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void simple(tbuf *b, const char *name, const char *type, const char *help, const char *labels,
                   double v)
{
    char t[64];
    fmt_num(t, sizeof t, v);
    metric_head(b, name, type, help);
    tb_printf(b, "%s{%s} %s\n", name, labels, t);
}

static void histogram(tbuf *b, const char *name, const char *help, const char *labels, const hist *h)
{
    char t[64], le[64];
    metric_head(b, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->count[i];
        fmt_num(le, sizeof le, i < h->n ? h->le[i] : INFINITY);
        fmt_num(t, sizeof t, (double)cum);
        tb_printf(b, "%s_bucket{%s,le=\"%s\"} %s\n", name, labels, le, t);
    }
    fmt_num(t, sizeof t, (double)cum);
    tb_printf(b, "%s_count{%s} %s\n", name, labels, t);
    fmt_num(t, sizeof t, h->sum);
    tb_printf(b, "%s_sum{%s} %s\n", name, labels, t);
}

char *api_metrics_render(api_metrics *m, const sched_stats *st)
{
    sched_stats z;
    memset(&z, 0, sizeof z);
    if (!st) st = &z;
    tbuf b = {0};
    char lab[600], slab[700];
    snprintf(lab, sizeof lab, "model_name=\"%.500s\"", m->model);
    snprintf(slab, sizeof slab, "engine_type=\"unified\",model_name=\"%.500s\",pp_rank=\"0\",tp_rank=\"0\"", m->model);
    /* scheduler gauges */
    int64_t used = st->max_total_num_tokens - st->free_tokens - st->evictable_tokens;
    if (used < 0) used = 0;
    double usage = st->max_total_num_tokens > 0 ? (double)used / (double)st->max_total_num_tokens : 0.0;
    simple(&b, "sglang:num_running_reqs", "gauge", "The number of running requests.", slab, st->n_running);
    simple(&b, "sglang:num_used_tokens", "gauge", "The number of used tokens.", slab, (double)used);
    simple(&b, "sglang:token_usage", "gauge", "The token usage.", slab, usage);
    simple(&b, "sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", slab,
           st->n_waiting);
    pthread_mutex_lock(&m->mu);
    double hit = m->prompt_tokens > 0 ? m->cached_tokens / m->prompt_tokens : 0.0;
    simple(&b, "sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", slab, hit);
    simple(&b, "sglang:max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache pool.",
           slab, (double)st->max_total_num_tokens);
    simple(&b, "sglang:num_retracted_reqs", "gauge", "The number of retracted requests.", slab,
           (double)st->num_retractions);
    /* tokenizer-manager metrics */
    simple(&b, "sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", lab,
           m->prompt_tokens);
    simple(&b, "sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", lab,
           m->generation_tokens);
    char clab[700];
    snprintf(clab, sizeof clab, "%s,cache_source=\"total\"", lab);
    simple(&b, "sglang:cached_tokens_total", "counter", "Number of cached prompt tokens by source (device/host/storage).",
           clab, m->cached_tokens);
    simple(&b, "sglang:num_requests_total", "counter", "Number of requests processed.", lab, m->num_requests);
    simple(&b, "sglang:num_aborted_requests_total", "counter", "Number of requests aborted.", lab,
           m->num_aborted);
    histogram(&b, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", lab,
              &m->ttft);
    histogram(&b, "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", lab,
              &m->itl);
    histogram(&b, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
              lab, &m->e2e);
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (!b.p) tb_printf(&b, "%s", "");
    return b.p;
}
