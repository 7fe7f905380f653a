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
 * pp_rank="0" as SGLang's scheduler collector does on one GPU;
 * --extra-metric-labels are appended to both label sets.
 * cache_hit_rate is cumulative (cached prompt tokens / prompt tokens of
 * finished requests); SGLang averages over its recent batches. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_ops.h"
#include "util/strbuf.h"

typedef struct {
    double *le;       /* (n) upper bounds, ascending */
    uint64_t *count;  /* (n + 1) per-bucket counts, last = +Inf */
    int n;
    double sum;
} hist;

struct api_metrics {
    pthread_mutex_t mu;
    char *model;          /* owned, label-escaped */
    char *extra;          /* owned: ",k=\"v\"..." of --extra-metric-labels (escaped), "" = none */
    double prompt_tokens, generation_tokens, cached_tokens, num_requests, num_aborted;
    hist ttft, itl, e2e;
    bool tokens_hist;     /* --collect-tokens-histogram */
    hist prompt_h, uncached_h, gen_h;
};

static const double def_ttft[] = {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400};
static const double def_e2e[] = {0.1, 0.2, 0.4, 0.6, 0.8, 1,   2,   4,   6,    8,    10,
                                 20,  40,  60,  80,  100, 200, 400, 600, 1200, 1800, 2400};
static const double def_itl[] = {0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025,
                                 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400,
                                 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000};

/* SGLang's default_bucket_prompt_tokens (also the generation default) */
static const double def_tokens[] = {100,    300,    500,    700,    1000,   1500,   2000,   3000,   4000,
                                    5000,   6000,   7000,   8000,   9000,   10000,  12500,  15000,  17500,
                                    20000,  22500,  25000,  27500,  30000,  35000,  40000,  60000,  80000,
                                    100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* SGLang's generate_buckets: rule NULL/[] or ["default"] -> the defaults;
 * ["tse", middle, base, count] -> middle and middle +- base^k for k = 1 ..
 * ceil(count / 2) (floored at 0); ["custom", v...] -> the values; sorted,
 * duplicates dropped.  Result into h. */
static int rule_buckets(hist *h, const json_t *rule, const char *flag, char *err, size_t errlen)
{
    size_t n = json_is_array(rule) ? json_array_size(rule) : 0;
    const char *kind = n ? json_string_value(json_array_get(rule, 0)) : "default";
    double v[2048];
    int nv = 0;
    if (!kind) kind = "";
    if (!strcmp(kind, "default")) {
        for (size_t i = 0; i < sizeof def_tokens / sizeof def_tokens[0]; i++) v[nv++] = def_tokens[i];
    } else if (!strcmp(kind, "tse") || !strcmp(kind, "custom")) {
        double x[3];
        for (size_t i = 1; i < n; i++) {
            const char *t = json_string_value(json_array_get(rule, i));
            char *end = NULL;
            double d = t ? strtod(t, &end) : NAN;
            if (!t || end == t || *end || !isfinite(d)) {
                snprintf(err, errlen, "%s: '%s' is not a number", flag, t ? t : "?");
                return -1;
            }
            if (!strcmp(kind, "tse")) {
                if (i > 3) break;
                x[i - 1] = d;
            } else {
                if (nv >= 2000) {
                    snprintf(err, errlen, "%s: too many buckets", flag);
                    return -1;
                }
                v[nv++] = d;
            }
        }
        if (!strcmp(kind, "tse")) {
            if (n != 4 || x[1] <= 1.0 || x[2] < 0 || x[2] > 1000 || x[2] != floor(x[2])) {
                snprintf(err, errlen, "%s: tse needs MIDDLE BASE COUNT with BASE > 1.0", flag);
                return -1;
            }
            int half = (int)ceil(x[2] / 2);
            double dist = 1;
            v[nv++] = x[0];
            for (int i = 0; i < half; i++) {
                dist *= x[1];
                v[nv++] = x[0] + dist;
                v[nv++] = x[0] - dist > 0 ? x[0] - dist : 0;
            }
        } else if (nv == 0) {
            snprintf(err, errlen, "%s: custom needs at least one value", flag);
            return -1;
        }
    } else {
        snprintf(err, errlen, "%s: the rule must be default, tse or custom", flag);
        return -1;
    }
    qsort(v, (size_t)nv, sizeof v[0], cmp_double);
    int m = 0;
    for (int i = 0; i < nv; i++)
        if (m == 0 || v[i] != v[m - 1]) v[m++] = v[i];
    h->le = calloc((size_t)m, sizeof(double));
    h->count = calloc((size_t)m + 1, sizeof(uint64_t));
    if (!h->le || !h->count) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(h->le, v, sizeof(double) * (size_t)m);
    h->n = m;
    return 0;
}

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

/* Labels sglc sets itself: an extra label may not repeat one. */
static const char *const own_labels[] = {"model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank", "le", "cache_source",
                                         NULL};

/* --extra-metric-labels -> m->extra.  -1 with a message on a bad object. */
static int extra_labels_init(api_metrics *m, const json_t *o, char *err, size_t errlen)
{
    size_t cap = 1;
    const char *k;
    json_t *v;
    if (o && !json_is_object(o)) {
        snprintf(err, errlen, "--extra-metric-labels must be a JSON object of label: value");
        return -1;
    }
    json_object_foreach((json_t *)o, k, v)
    {
        bool ok = (k[0] == '_' || (k[0] >= 'a' && k[0] <= 'z') || (k[0] >= 'A' && k[0] <= 'Z')) &&
                  strncmp(k, "__", 2) != 0;
        for (const char *p = k; ok && *p; p++)
            ok = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (!ok) {
            snprintf(err, errlen, "--extra-metric-labels: '%.100s' is not a valid Prometheus label name", k);
            return -1;
        }
        for (int i = 0; own_labels[i]; i++)
            if (!strcmp(k, own_labels[i])) {
                snprintf(err, errlen, "--extra-metric-labels: '%s' is a label sglc sets itself", k);
                return -1;
            }
        if (!json_is_string(v)) {
            snprintf(err, errlen, "--extra-metric-labels: the value of '%.100s' must be a string", k);
            return -1;
        }
        cap += strlen(k) + 2 * json_string_length(v) + 5;
    }
    m->extra = malloc(cap);
    if (!m->extra) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *w = m->extra;
    json_object_foreach((json_t *)o, k, v)
    {
        w += sprintf(w, ",%s=\"", k);
        const char *s = json_string_value(v);
        for (size_t i = 0, n = json_string_length(v); i < n; i++) {
            if (s[i] == '\\' || s[i] == '"') *w++ = '\\', *w++ = s[i];
            else if (s[i] == '\n') *w++ = '\\', *w++ = 'n';
            else if (s[i]) *w++ = s[i];
        }
        *w++ = '"';
    }
    *w = 0;
    return 0;
}

api_metrics *api_metrics_create(const char *model_name, const api_metrics_opts *o, char *err,
                                size_t errlen)
{
    api_metrics_opts none;
    memset(&none, 0, sizeof none);
    if (!o) o = &none;
    const json_t *ttft = o->ttft_buckets, *itl = o->itl_buckets, *e2e = o->e2e_buckets;
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
    char *w = m->model;
    for (const char *p = name; *p; p++) {
        if (*p == '\\' || *p == '"') *w++ = '\\', *w++ = *p;
        else if (*p == '\n') *w++ = '\\', *w++ = 'n';
        else *w++ = *p;
    }
    *w = 0;
    if (extra_labels_init(m, o->extra_labels, err, errlen)) {
        api_metrics_destroy(m);
        return NULL;
    }
    if (hist_init(&m->ttft, ttft, def_ttft, (int)(sizeof def_ttft / sizeof def_ttft[0]),
                  "--bucket-time-to-first-token", err, errlen) ||
        hist_init(&m->itl, itl, def_itl, (int)(sizeof def_itl / sizeof def_itl[0]),
                  "--bucket-inter-token-latency", err, errlen) ||
        hist_init(&m->e2e, e2e, def_e2e, (int)(sizeof def_e2e / sizeof def_e2e[0]),
                  "--bucket-e2e-request-latency", err, errlen)) {
        api_metrics_destroy(m);
        return NULL;
    }
    m->tokens_hist = o->collect_tokens_histogram;
    if (m->tokens_hist &&
        (rule_buckets(&m->prompt_h, o->prompt_tokens_rule, "--prompt-tokens-buckets", err, errlen) ||
         rule_buckets(&m->uncached_h, o->prompt_tokens_rule, "--prompt-tokens-buckets", err, errlen) ||
         rule_buckets(&m->gen_h, o->generation_tokens_rule, "--generation-tokens-buckets", err, errlen))) {
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
    hist_free(&m->prompt_h);
    hist_free(&m->uncached_h);
    hist_free(&m->gen_h);
    free(m->model);
    free(m->extra);
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
        if (m->tokens_hist) {
            int64_t unc = prompt - (cached > 0 ? cached : 0);
            hist_observe(&m->prompt_h, (double)prompt, 1);
            m->prompt_h.sum += (double)prompt;
            hist_observe(&m->uncached_h, (double)unc, 1);
            m->uncached_h.sum += (double)unc;
            hist_observe(&m->gen_h, (double)gen, 1);
            m->gen_h.sum += (double)gen;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ------------------------------------------------------------------- */

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

static void metric_head(strbuf *b, const char *name, const char *type, const char *help)
{
    strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void simple(strbuf *b, const char *name, const char *type, const char *help, const char *labels,
                   double v)
{
    char t[64];
    fmt_num(t, sizeof t, v);
    metric_head(b, name, type, help);
    strbuf_printf(b, "%s{%s} %s\n", name, labels, t);
}

static void histogram(strbuf *b, const char *name, const char *help, const char *labels, const hist *h)
{
    char t[64], le[64];
    metric_head(b, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->count[i];
        fmt_num(le, sizeof le, i < h->n ? h->le[i] : INFINITY);
        fmt_num(t, sizeof t, (double)cum);
        strbuf_printf(b, "%s_bucket{%s,le=\"%s\"} %s\n", name, labels, le, t);
    }
    fmt_num(t, sizeof t, (double)cum);
    strbuf_printf(b, "%s_count{%s} %s\n", name, labels, t);
    fmt_num(t, sizeof t, h->sum);
    strbuf_printf(b, "%s_sum{%s} %s\n", name, labels, t);
}

/* One gauge over the replicas: line r has labels slab[r] and value v[r]. */
static void gauge_n(strbuf *b, const char *name, const char *help, char **slab, const double *v, int n)
{
    char t[64];
    metric_head(b, name, "gauge", help);
    for (int r = 0; r < n; r++) {
        fmt_num(t, sizeof t, v[r]);
        strbuf_printf(b, "%s{%s} %s\n", name, slab[r], t);
    }
}

char *api_metrics_render(api_metrics *m, const sched_stats *st) { return api_metrics_render_dp(m, st, 1); }

char *api_metrics_render_dp(api_metrics *m, const sched_stats *sts, int n)
{
    sched_stats z;
    memset(&z, 0, sizeof z);
    if (!sts || n < 1) sts = &z, n = 1;
    strbuf b = {0};
    size_t lcap = strlen(m->model) + strlen(m->extra) + 160;
    char *lab = malloc(lcap), *clab = malloc(lcap);
    char **slab = calloc((size_t)n, sizeof *slab);
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int r = 0; slab && r < n; r++) slab[r] = malloc(lcap);
    bool ok = lab && clab && slab && v;
    for (int r = 0; ok && r < n; r++) ok = slab[r] != NULL;
    if (!ok) {
        for (int r = 0; slab && r < n; r++) free(slab[r]);
        free(lab), free(clab), free(slab), free(v);
        return NULL;
    }
    snprintf(lab, lcap, "model_name=\"%s\"%s", m->model, m->extra);
    /* the scheduler gauges: with --dp-size > 1 one line per replica,
     * labelled dp_rank (SGLang adds the label when dp_rank is set) */
    for (int r = 0; r < n; r++) {
        char dl[32] = "";
        if (n > 1) snprintf(dl, sizeof dl, "dp_rank=\"%d\",", r);
        snprintf(slab[r], lcap, "%sengine_type=\"unified\",model_name=\"%s\",pp_rank=\"0\",tp_rank=\"0\"%s", dl, m->model,
                 m->extra);
    }
#define GAUGE(name, help, expr)                                                                                       \
    do {                                                                                                              \
        for (int r = 0; r < n; r++) {                                                                                 \
            const sched_stats *st = &sts[r];                                                                          \
            int64_t used = st->max_total_num_tokens - st->free_tokens - st->evictable_tokens;                        \
            if (used < 0) used = 0;                                                                                   \
            (void)used;                                                                                               \
            v[r] = (double)(expr);                                                                                    \
        }                                                                                                             \
        gauge_n(&b, name, help, slab, v, n);                                                                          \
    } while (0)
    GAUGE("sglang:num_running_reqs", "The number of running requests.", st->n_running);
    GAUGE("sglang:num_used_tokens", "The number of used tokens.", used);
    GAUGE("sglang:token_usage", "The token usage.",
          st->max_total_num_tokens > 0 ? (double)used / (double)st->max_total_num_tokens : 0.0);
    GAUGE("sglang:num_queue_reqs", "The number of requests in the waiting queue.", st->n_waiting);
    GAUGE("sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", st->n_grammar_queue);
    pthread_mutex_lock(&m->mu);
    /* one replica: the front's totals (as before); several: each replica's own finished requests */
    double hit1 = m->prompt_tokens > 0 ? m->cached_tokens / m->prompt_tokens : 0.0;
    GAUGE("sglang:cache_hit_rate", "The prefix cache hit rate.",
          n == 1 ? hit1 : st->prompt_tokens > 0 ? (double)st->cached_tokens / (double)st->prompt_tokens : 0.0);
    GAUGE("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", st->max_total_num_tokens);
    GAUGE("sglang:num_retracted_reqs", "The number of retracted requests.", st->num_retractions);
    /* speculative decoding (SGLang's spec_accept_length / spec_accept_rate gauges; here the means since
     * start: tokens per request per verify forward, accepted / verified draft tokens) */
    GAUGE("sglang:spec_accept_length", "The average acceptance length of speculative decoding.",
          st->spec_verify_ct > 0 ? (double)st->spec_verify_tokens / (double)st->spec_verify_ct : 0.0);
    GAUGE("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.",
          st->spec_draft_tokens > 0 ? (double)st->spec_accepted_tokens / (double)st->spec_draft_tokens : 0.0);
#undef GAUGE
    /* tokenizer-manager metrics */
    simple(&b, "sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", lab,
           m->prompt_tokens);
    simple(&b, "sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", lab,
           m->generation_tokens);
    snprintf(clab, lcap, "%s,cache_source=\"total\"", lab);
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
    if (m->tokens_hist) {
        histogram(&b, "sglang:prompt_tokens_histogram", "Histogram of prompt token length.", lab, &m->prompt_h);
        histogram(&b, "sglang:uncached_prompt_tokens_histogram",
                  "Histogram of uncached (compute) prompt token length.", lab, &m->uncached_h);
        histogram(&b, "sglang:generation_tokens_histogram", "Histogram of generation token length.", lab,
                  &m->gen_h);
    }
    pthread_mutex_unlock(&m->mu);
    for (int r = 0; r < n; r++) free(slab[r]);
    free(lab), free(slab), free(clab), free(v);
    return strbuf_take(&b);
}
