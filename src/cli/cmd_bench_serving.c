/* cmd_bench_serving — `sglc bench-serving`, a load generator for a running
 * server, as SGLang's `python -m sglang.bench_serving`.
 *
 * DESIGN: one thread drives every request through a libcurl multi handle.
 * Arrival times are drawn up front (Poisson process at --request-rate, all
 * at t = 0 for inf); request k starts at max(its arrival, a free slot under
 * --max-concurrency), in order, as SGLang's asyncio semaphore does.  Each
 * response body is fed to a cli_bserve_stream (cli_bserve.h) with the time its
 * bytes arrived, which yields TTFT, the inter-token latencies and the
 * generated text.  Output tokens are the server's count (native
 * meta_info.completion_tokens, OpenAI usage via stream_options) or, when a
 * server does not report it, the retokenized text.  Input tokens are
 * counted with the tokenizer as SGLang does (prompt text encoded with
 * special tokens; the ids themselves for random-ids).
 *
 * Datasets (prompts built from the tokenizer, seeded):
 *   random                   random non-special token ids decoded to text,
 *                            lengths uniform in [max(1, len*ratio), len]
 *   random-ids               the same ids sent as ids (input_ids / prompt
 *                            array; chat sends the decoded text)
 *   generated-shared-prefix  gsp_num_groups random system prompts, each with
 *                            gsp_prompts_per_group random questions, shuffled
 *   sharegpt                 --dataset-path FILE: first human turn = prompt,
 *                            output length = tokens of the gpt turn (or
 *                            --sharegpt-output-len), SGLang's filters
 * The OpenAI backends send only OpenAI fields plus `ignore_eos` (the
 * SGLang / vLLM extension that SGLang's benchmark sends too).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli/cli_args.h"
#include "cli/cli_bserve.h"
#include "cli/cli.h"
#include "cli/cli_model.h"
#include "tokenizer/tokenizer.h"
#include "util/timeutil.h"
#include "util/rng.h"

/* ---- small utilities ------------------------------------------------------- */

static double rng_unit(uint64_t *s) /* (0, 1] */
{
    return ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740992.0;
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static size_t buf_write(char *d, size_t sz, size_t nm, void *u)
{
    buf *b = u;
    size_t n = sz * nm;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap * 2 : 4096;
        while (c < b->n + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) return 0;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* GET base+path (POST `post` when not NULL); returns the parsed JSON body
 * (caller decrefs; a non-JSON 200 body gives json null) or NULL with a
 * reason in err. */
static json_t *http_json(const char *base, const char *path, const char *post, const char *key, char *err,
                         size_t errlen)
{
    char url[2048], auth[1024];
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "curl_easy_init failed");
        return NULL;
    }
    buf b = {0};
    struct curl_slist *h = NULL;
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (post) curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    json_t *o = NULL;
    if (rc != CURLE_OK) snprintf(err, errlen, "%s %.300s: %s", post ? "POST" : "GET", url, curl_easy_strerror(rc));
    else if (code != 200)
        snprintf(err, errlen, "%s %.300s: HTTP %ld %.200s", post ? "POST" : "GET", url, code, b.p ? b.p : "");
    else if (!(o = json_loadb(b.p ? b.p : "", b.n, 0, NULL))) o = json_null();
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(b.p);
    return o;
}

/* GET base+path; returns the parsed JSON body (caller decrefs) or NULL with
 * a reason in err. */
static json_t *http_get_json(const char *base, const char *path, const char *key, char *err, size_t errlen)
{
    return http_json(base, path, NULL, key, err, errlen);
}

/* ---- dataset ------------------------------------------------------------- */

typedef struct item {
    char *text;     /* prompt text (owned); NULL when only ids are sent */
    int32_t *ids;   /* (n_ids) prompt ids for random-ids (owned) or NULL */
    int64_t n_ids;
    int64_t prompt_len, output_len;
} item;

static void items_free(item *it, int64_t n)
{
    if (!it) return;
    for (int64_t i = 0; i < n; i++) {
        free(it[i].text);
        free(it[i].ids);
    }
    free(it);
}

/* n random ids that are not special tokens, appended to v. */
static int random_ids(const tok_tokenizer *t, uint64_t *st, int64_t n, tok_ids *v)
{
    int64_t V = (int64_t)tok_vocab_size(t);
    for (int64_t i = 0; i < n; i++) {
        int32_t id;
        int tries = 0;
        do {
            id = (int32_t)rng_range(st, 0, V - 1);
        } while ((tok_is_special(t, id) || !tok_id_to_token(t, id, &(size_t){0})) && ++tries < 100);
        if (tok_ids_push(v, id)) return -1;
    }
    return 0;
}

static char *decode(const tok_tokenizer *t, const int32_t *ids, size_t n)
{
    tok_decode_opts o = {.skip_special_tokens = false};
    char *s = NULL;
    if (tok_decode(t, ids, n, &o, &s, NULL)) return NULL;
    return s;
}

static int64_t count_tokens(const tok_tokenizer *t, const char *s, bool special)
{
    tok_ids v = {0};
    int64_t n = tok_encode(t, s, strlen(s), special, &v) ? -1 : (int64_t)v.n;
    tok_ids_free(&v);
    return n;
}

typedef struct bench_opts {
    cli_bserve_backend backend;
    const char *backend_name, *dataset, *dataset_path, *output_file, *api_key, *model;
    long long num_prompts, rin, rout, g_groups, g_per, g_sys, g_q, g_out, seed, max_conc, warmup, sg_out;
    double ratio, rate;
    bool ignore_eos, flush_cache;
    json_t *extra; /* --extra-request-body object or NULL */
    char base[1024];
} bench_opts;

static item *build_dataset(const bench_opts *o, const tok_tokenizer *t, int64_t *n_out)
{
    uint64_t st = (uint64_t)o->seed * 0x2545F4914F6CDD1Dull + 7;
    bool gsp = !strcmp(o->dataset, "generated-shared-prefix"), ids_mode = !strcmp(o->dataset, "random-ids");
    int64_t n = gsp ? o->g_groups * o->g_per : o->num_prompts;
    item *it = calloc((size_t)(n ? n : 1), sizeof *it);
    tok_ids v = {0};
    if (!it) return NULL;
    if (!strcmp(o->dataset, "sharegpt")) {
        FILE *f = fopen(o->dataset_path, "rb");
        char *data = NULL;
        size_t len = 0;
        if (f) {
            buf b = {0};
            char chunk[65536];
            size_t r;
            while ((r = fread(chunk, 1, sizeof chunk, f)) > 0)
                if (buf_write(chunk, 1, r, &b) != r) break;
            fclose(f);
            data = b.p;
            len = b.n;
        }
        if (!data) {
            fprintf(stderr, "error: cannot read --dataset-path %s\n", o->dataset_path);
            free(it);
            return NULL;
        }
        cli_bserve_conv *cv;
        size_t nc;
        char err[256];
        int prc = cli_bserve_sharegpt_parse(data, len, &cv, &nc, err, sizeof err);
        free(data);
        if (prc) {
            fprintf(stderr, "error: %s: %s\n", o->dataset_path, err);
            free(it);
            return NULL;
        }
        for (size_t a = nc; a > 1; a--) { /* seeded shuffle */
            size_t b = (size_t)rng_range(&st, 0, (int64_t)a - 1);
            cli_bserve_conv tmp = cv[a - 1];
            cv[a - 1] = cv[b];
            cv[b] = tmp;
        }
        int64_t k = 0;
        for (size_t i = 0; i < nc && k < n; i++) {
            int64_t pl = count_tokens(t, cv[i].prompt, true);
            int64_t ol = o->sg_out > 0 ? o->sg_out : count_tokens(t, cv[i].completion, true);
            if (pl < 2 || ol < 2) continue; /* SGLang's filters */
            if (o->sg_out <= 0 && (pl > 1024 || pl + ol > 2048)) continue;
            it[k].text = cv[i].prompt;
            cv[i].prompt = NULL;
            it[k].prompt_len = pl;
            it[k].output_len = ol;
            k++;
        }
        cli_bserve_convs_free(cv, nc);
        if (k == 0) {
            fprintf(stderr, "error: %s has no usable conversation\n", o->dataset_path);
            free(it);
            return NULL;
        }
        if (k < n) fprintf(stderr, "note: only %lld usable conversations in %s\n", (long long)k, o->dataset_path);
        *n_out = k;
        return it;
    }
    if (gsp) {
        tok_ids sys = {0};
        int64_t k = 0;
        for (int64_t g = 0; g < o->g_groups; g++) {
            sys.n = 0;
            if (random_ids(t, &st, o->g_sys, &sys)) goto oom;
            for (int64_t q = 0; q < o->g_per; q++, k++) {
                v.n = 0;
                for (size_t j = 0; j < sys.n; j++)
                    if (tok_ids_push(&v, sys.ids[j])) goto oom;
                if (random_ids(t, &st, o->g_q, &v)) goto oom;
                it[k].output_len = o->g_out;
                if (!(it[k].text = decode(t, v.ids, v.n))) goto oom;
                it[k].prompt_len = count_tokens(t, it[k].text, true);
            }
        }
        tok_ids_free(&sys);
        for (int64_t a = n - 1; a > 0; a--) { /* shuffle */
            int64_t b = rng_range(&st, 0, a);
            item tmp = it[a];
            it[a] = it[b];
            it[b] = tmp;
        }
        if (0) {
        oom:
            tok_ids_free(&sys);
            goto fail;
        }
    } else {
        int64_t lo_in = (int64_t)(o->rin * o->ratio), lo_out = (int64_t)(o->rout * o->ratio);
        for (int64_t k = 0; k < n; k++) {
            int64_t nin = rng_range(&st, lo_in > 1 ? lo_in : 1, o->rin);
            it[k].output_len = rng_range(&st, lo_out > 1 ? lo_out : 1, o->rout);
            v.n = 0;
            if (random_ids(t, &st, nin, &v)) goto fail;
            if (ids_mode && o->backend != CLI_BSERVE_OAI_CHAT) {
                it[k].ids = malloc(sizeof(int32_t) * v.n);
                if (!it[k].ids) goto fail;
                memcpy(it[k].ids, v.ids, sizeof(int32_t) * v.n);
                it[k].n_ids = (int64_t)v.n;
                it[k].prompt_len = (int64_t)v.n;
            } else {
                if (!(it[k].text = decode(t, v.ids, v.n))) goto fail;
                it[k].prompt_len = count_tokens(t, it[k].text, true);
            }
        }
    }
    tok_ids_free(&v);
    *n_out = n;
    return it;
fail:
    tok_ids_free(&v);
    items_free(it, n);
    fprintf(stderr, "error: out of memory building the dataset\n");
    return NULL;
}

/* ---- requests -------------------------------------------------------------- */

typedef struct req {
    const item *it;
    CURL *easy;
    struct curl_slist *hdr;
    char *body;
    cli_bserve_stream st;
    buf errbody;   /* body of a non-200 answer (first 4 KiB) */
    long status;
    bool started, finished, ok;
    double e2e;
    int64_t out_tokens, retok;
    char err[512];
} req;

static size_t req_write(char *d, size_t sz, size_t nm, void *u)
{
    req *r = u;
    size_t n = sz * nm;
    double t = time_now_sec();
    if (!r->status) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status != 200) {
        if (r->errbody.n < 4096) buf_write(d, 1, n < 4096 ? n : 4096, &r->errbody);
        return n;
    }
    cli_bserve_stream_feed(&r->st, d, n, t);
    return n;
}

static char *make_body(const bench_opts *o, const item *it)
{
    json_t *b = json_object();
    if (o->backend == CLI_BSERVE_SGLANG) {
        if (it->ids) {
            json_t *a = json_array();
            for (int64_t i = 0; i < it->n_ids; i++) json_array_append_new(a, json_integer(it->ids[i]));
            json_object_set_new(b, "input_ids", a);
        } else {
            json_object_set_new(b, "text", json_string(it->text));
        }
        json_object_set_new(b, "sampling_params",
                            json_pack("{s:f,s:I,s:b}", "temperature", 0.0, "max_new_tokens",
                                      (json_int_t)it->output_len, "ignore_eos", o->ignore_eos));
        json_object_set_new(b, "stream", json_true());
    } else {
        json_object_set_new(b, "model", json_string(o->model));
        if (o->backend == CLI_BSERVE_OAI) {
            if (it->ids) {
                json_t *a = json_array();
                for (int64_t i = 0; i < it->n_ids; i++) json_array_append_new(a, json_integer(it->ids[i]));
                json_object_set_new(b, "prompt", a);
            } else {
                json_object_set_new(b, "prompt", json_string(it->text));
            }
        } else {
            json_object_set_new(b, "messages", json_pack("[{s:s,s:s}]", "role", "user", "content", it->text));
        }
        json_object_set_new(b, "temperature", json_real(0.0));
        json_object_set_new(b, "max_tokens", json_integer(it->output_len));
        json_object_set_new(b, "stream", json_true());
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
        if (o->ignore_eos) json_object_set_new(b, "ignore_eos", json_true());
    }
    if (o->extra) json_object_update(b, o->extra);
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

static int req_start(CURLM *m, const bench_opts *o, req *r)
{
    static const char *paths[] = {"/generate", "/v1/completions", "/v1/chat/completions"};
    char url[1200], auth[1024];
    snprintf(url, sizeof url, "%s%s", o->base, paths[o->backend]);
    r->started = true;
    cli_bserve_stream_init(&r->st, o->backend, time_now_sec());
    if (!(r->body = make_body(o, r->it)) || !(r->easy = curl_easy_init())) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return -1;
    }
    r->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    r->hdr = curl_slist_append(r->hdr, "Expect:");
    if (o->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->api_key);
        r->hdr = curl_slist_append(r->hdr, auth);
    }
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->hdr);
    curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, req_write);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(r->easy, CURLOPT_TCP_NODELAY, 1L);
    r->st.t_start = time_now_sec();
    if (curl_multi_add_handle(m, r->easy) != CURLM_OK) {
        snprintf(r->err, sizeof r->err, "curl_multi_add_handle failed");
        return -1;
    }
    return 0;
}

static void req_finish(const tok_tokenizer *t, req *r, CURLcode cc)
{
    double now = time_now_sec();
    r->finished = true;
    cli_bserve_stream_finish(&r->st, now);
    r->e2e = now - r->st.t_start;
    if (r->err[0]) return;
    if (cc != CURLE_OK) {
        snprintf(r->err, sizeof r->err, "%s", curl_easy_strerror(cc));
    } else if (r->status != 200) {
        snprintf(r->err, sizeof r->err, "HTTP %ld: %.400s", r->status, r->errbody.p ? r->errbody.p : "");
    } else if (r->st.error) {
        snprintf(r->err, sizeof r->err, "server error in stream: %.400s", r->st.error);
    } else if (r->st.oom) {
        snprintf(r->err, sizeof r->err, "out of memory reading the stream");
    } else if (r->st.ttft < 0) {
        snprintf(r->err, sizeof r->err, "no output in the stream");
    } else {
        r->retok = r->st.text ? count_tokens(t, r->st.text, false) : 0;
        r->out_tokens = r->st.completion_tokens >= 0 ? r->st.completion_tokens : r->retok;
        r->ok = true;
    }
    size_t l = strlen(r->err); /* one line */
    for (size_t i = 0; i < l; i++)
        if (r->err[i] == '\n' || r->err[i] == '\r') r->err[i] = ' ';
}

static void req_cleanup(CURLM *m, req *r)
{
    if (r->easy) {
        curl_multi_remove_handle(m, r->easy);
        curl_easy_cleanup(r->easy);
    }
    curl_slist_free_all(r->hdr);
    free(r->body);
    free(r->errbody.p);
    r->easy = NULL;
    r->hdr = NULL;
    r->body = NULL;
    r->errbody = (buf){0};
}

/* Run n requests (arrival[k] seconds after the start, max_conc in flight,
 * 0 = unbounded).  Fills rs; returns the wall time. */
static double run_requests(const bench_opts *o, const tok_tokenizer *t, req *rs, int64_t n, const double *arrival,
                           int64_t max_conc)
{
    CURLM *m = curl_multi_init();
    double t0 = time_now_sec();
    if (!m) {
        for (int64_t k = 0; k < n; k++) snprintf(rs[k].err, sizeof rs[k].err, "curl_multi_init failed");
        return 0;
    }
    int64_t next = 0, inflight = 0, done = 0;
    while (done < n) {
        double now = time_now_sec() - t0;
        while (next < n && (max_conc <= 0 || inflight < max_conc) && arrival[next] <= now) {
            req *r = &rs[next++];
            if (req_start(m, o, r)) {
                req_finish(t, r, CURLE_OK);
                req_cleanup(m, r);
                done++;
            } else {
                inflight++;
            }
        }
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            req *r = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            CURLcode cc = msg->data.result;
            req_finish(t, r, cc);
            req_cleanup(m, r);
            inflight--;
            done++;
        }
        if (done >= n) break;
        int wait_ms = 100;
        if (next < n && (max_conc <= 0 || inflight < max_conc)) {
            double dt = arrival[next] - (time_now_sec() - t0);
            wait_ms = dt <= 0 ? 0 : dt * 1000 < 100 ? (int)(dt * 1000) + 1 : 100;
        }
        if (inflight > 0 || wait_ms > 0) curl_multi_poll(m, NULL, 0, wait_ms, NULL);
    }
    double dur = time_now_sec() - t0;
    curl_multi_cleanup(m);
    return dur;
}

/* ---- statistics ------------------------------------------------------------ */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct stats {
    double mean, median, std, p90, p95, p99, max;
} stats;

/* numpy-style (linear interpolation) percentiles of v (sorted in place),
 * in milliseconds. */
static stats stats_ms(double *v, size_t n)
{
    stats s = {0};
    if (!n) return s;
    qsort(v, n, sizeof *v, cmp_d);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    s.mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.std = sqrt(sq / (double)n);
    double *ps[] = {&s.median, &s.p90, &s.p95, &s.p99};
    double q[] = {50, 90, 95, 99};
    for (int k = 0; k < 4; k++) {
        double pos = q[k] / 100.0 * (double)(n - 1);
        size_t lo = (size_t)pos;
        size_t hi = lo + 1 < n ? lo + 1 : lo;
        *ps[k] = v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
    }
    s.max = v[n - 1];
    s.mean *= 1e3, s.median *= 1e3, s.std *= 1e3, s.p90 *= 1e3, s.p95 *= 1e3, s.p99 *= 1e3, s.max *= 1e3;
    return s;
}

static void put_stats(json_t *o, const char *name, const stats *s)
{
    char k[64];
    struct {
        const char *n;
        double v;
    } f[] = {{"mean", s->mean}, {"median", s->median}, {"std", s->std}, {"p90", s->p90},
             {"p95", s->p95},   {"p99", s->p99},       {"max", s->max}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        snprintf(k, sizeof k, "%s_%s_ms", f[i].n, name);
        json_object_set_new(o, k, json_real(f[i].v));
    }
}

/* ---- command --------------------------------------------------------------- */

static const char *rate_str(double rate, char *b, size_t n)
{
    if (isinf(rate)) snprintf(b, n, "inf");
    else if (rate == floor(rate)) snprintf(b, n, "%.1f", rate);
    else snprintf(b, n, "%g", rate);
    return b;
}

int cmd_bench_serving(int argc, char **argv)
{
    bench_opts o = {.backend = CLI_BSERVE_SGLANG, .backend_name = "sglang", .dataset = "random",
                    .num_prompts = 1000, .rin = 1024, .rout = 1024, .g_groups = 64, .g_per = 16,
                    .g_sys = 2048, .g_q = 128, .g_out = 256, .seed = 1, .warmup = 1, .rate = INFINITY,
                    .ignore_eos = true};
    const char *host = "127.0.0.1", *base_url = NULL, *tok_dir = NULL, *model_path = NULL;
    const char *rate_s = NULL, *extra_body = NULL;
    long long port = 30000;
    bool disable_stream = false;
    o.api_key = getenv("OPENAI_API_KEY");
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    cli_dataset_opts ds = CLI_DATASET_OPTS_INIT;
    const args_extra extra[] = {
        {.name = "--backend", .help = "sglang: POST /generate; sglang-oai: /v1/completions; "
                                      "sglang-oai-chat: /v1/chat/completions.",
         .value = &o.backend_name, .choices = "sglang|sglang-oai|sglang-oai-chat", .def = "sglang"},
        {.name = "--base-url", .metavar = "URL", .help = "The server.", .value = &base_url,
         .def = "http://HOST:PORT"},
        {.name = "--host", .metavar = "H", .help = "Server host.", .value = &host, .def = "127.0.0.1"},
        {.name = "--port", .metavar = "P", .help = "Server port.", .ival = &port, .lo = 1, .hi = 65535,
         .def = "30000"},
        {.name = "--model", .metavar = "NAME", .help = "The model field of OpenAI requests.",
         .value = &o.model, .def = "GET /v1/models"},
        {.name = "--tokenizer", .metavar = "DIR",
         .help = "Tokenizer folder to build and count prompts (default: --model-path, else the "
                 "server's /get_model_info tokenizer_path if local).",
         .value = &tok_dir},
        {.name = "--model-path", .metavar = "DIR", .help = "The served model folder (tokenizer default).",
         .value = &model_path},
        {.name = "--dataset-name", .help = "The dataset.", .value = &ds.name,
         .choices = "random|random-ids|generated-shared-prefix|sharegpt", .def = "random"},
        {.name = "--dataset-path", .metavar = "FILE", .help = "ShareGPT JSON file (sharegpt).",
         .value = &o.dataset_path},
        {.name = "--sharegpt-output-len", .metavar = "N",
         .help = "Override the output length of sharegpt prompts.", .ival = &o.sg_out, .lo = 1,
         .hi = 1 << 30},
        CLI_DATASET_EXTRAS(&ds),
        {.name = "--request-rate", .metavar = "R",
         .help = "Requests per second, Poisson arrivals; inf = all at once.", .value = &rate_s,
         .def = "inf"},
        {.name = "--max-concurrency", .metavar = "N", .help = "At most N requests in flight.",
         .ival = &o.max_conc, .lo = 1, .hi = 1 << 30, .def = "not set"},
        {.name = "--warmup-requests", .metavar = "N", .help = "Requests sent before the run.",
         .ival = &o.warmup, .lo = 0, .hi = 1 << 30, .def = "1"},
        {.name = "--flush-cache", .help = "POST /flush_cache after the warm-up (SGLang server API).",
         .flag = &o.flush_cache},
        {.name = "--disable-stream", .help = "Not supported: TTFT and ITL need streaming.",
         .flag = &disable_stream},
        {.name = "--extra-request-body", .metavar = "JSON", .help = "Merged into every request body.",
         .value = &extra_body},
        {.name = "--output-file", .metavar = "FILE", .help = "Append a JSON line with the results.",
         .value = &o.output_file},
        {.name = "--api-key", .metavar = "KEY", .help = "Authorization: Bearer KEY.", .value = &o.api_key,
         .def = "$OPENAI_API_KEY"},
        {0},
    };
    const args_cmd cmd = {
        .usage = "usage: sglc bench-serving [options]",
        .about = "Load generator for a running server (python -m sglang.bench_serving). It takes no "
                 "server arguments: start the server with `sglc serve`.",
        .extra = extra,
        .no_server_args = true,
    };
    args_server sargs;
    int prc = cli_args_parse("bench-serving", &cmd, false, &sargs, argc, argv);
    if (prc >= 0) return prc;
    args_server_free(&sargs);
    if (disable_stream) {
        fprintf(stderr, "sglc bench-serving: --disable-stream is not supported (TTFT/ITL need streaming)\n");
        return 2;
    }
    if (rate_s && strcmp(rate_s, "inf") && strcmp(rate_s, "Inf")) {
        char *end;
        o.rate = strtod(rate_s, &end);
        if (!*rate_s || *end || !(o.rate > 0) || !isfinite(o.rate)) {
            fprintf(stderr, "sglc bench-serving: --request-rate must be > 0 or inf, got '%s'\n", rate_s);
            return 2;
        }
    }
    if (extra_body) {
        o.extra = json_loads(extra_body, 0, NULL);
        if (!json_is_object(o.extra)) {
            fprintf(stderr, "sglc bench-serving: --extra-request-body must be a JSON object\n");
            json_decref(o.extra);
            return 2;
        }
    }
    o.dataset = ds.name;
    o.num_prompts = ds.num_prompts;
    o.rin = ds.random_input_len;
    o.rout = ds.random_output_len;
    o.ratio = ds.random_range_ratio;
    o.g_groups = ds.gsp_num_groups;
    o.g_per = ds.gsp_prompts_per_group;
    o.g_sys = ds.gsp_system_prompt_len;
    o.g_q = ds.gsp_question_len;
    o.g_out = ds.gsp_output_len;
    o.seed = ds.seed;
    o.ignore_eos = !ds.disable_ignore_eos;
    int rc = 2;
    tok_tokenizer *tok = NULL;
    item *items = NULL;
    int64_t n = 0;
    req *rs = NULL, *wr = NULL;
    double *arrival = NULL, *e2e = NULL, *ttft = NULL, *tpot = NULL, *itl = NULL;
    json_t *models = NULL, *info = NULL;
    char *model_owned = NULL;
    char err[1024];

    if (!strcmp(o.backend_name, "sglang")) o.backend = CLI_BSERVE_SGLANG;
    else if (!strcmp(o.backend_name, "sglang-oai")) o.backend = CLI_BSERVE_OAI;
    else if (!strcmp(o.backend_name, "sglang-oai-chat")) o.backend = CLI_BSERVE_OAI_CHAT;
    else /* unreachable: --backend is a choice */
        goto out;
    if (!strcmp(o.dataset, "sharegpt") && !o.dataset_path) {
        fprintf(stderr, "error: --dataset-name sharegpt needs --dataset-path FILE (ShareGPT JSON)\n");
        goto out;
    }
    if (base_url) snprintf(o.base, sizeof o.base, "%s", base_url);
    else snprintf(o.base, sizeof o.base, "http://%s:%lld", host, port);
    size_t bl = strlen(o.base);
    while (bl && o.base[bl - 1] == '/') o.base[--bl] = '\0';

    rc = 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "error: curl_global_init failed\n");
        goto out;
    }
    struct rlimit rl; /* many sockets at once: lift the soft open-files limit */
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (!o.model && o.backend != CLI_BSERVE_SGLANG) {
        models = http_get_json(o.base, "/v1/models", o.api_key, err, sizeof err);
        json_t *id = models ? json_object_get(json_array_get(json_object_get(models, "data"), 0), "id") : NULL;
        if (!json_is_string(id)) {
            fprintf(stderr, "error: cannot learn the model name (%s); pass --model\n",
                    models ? "no data[0].id in /v1/models" : err);
            goto out;
        }
        o.model = json_string_value(id);
    }
    if (!tok_dir) tok_dir = model_path;
    if (!tok_dir) {
        info = http_get_json(o.base, "/get_model_info", o.api_key, err, sizeof err);
        json_t *tp = info ? json_object_get(info, "tokenizer_path") : NULL;
        if (!json_is_string(tp) && info) tp = json_object_get(info, "model_path");
        struct stat sb;
        if (json_is_string(tp) && !stat(json_string_value(tp), &sb) && S_ISDIR(sb.st_mode)) tok_dir = json_string_value(tp);
        else if (o.model && !stat(o.model, &sb) && S_ISDIR(sb.st_mode)) tok_dir = o.model;
        if (!tok_dir) {
            fprintf(stderr, "error: no tokenizer: pass --tokenizer DIR (the server's /get_model_info %s)\n",
                    info ? "names no local folder" : err);
            goto out;
        }
    }
    tok = tok_load_dir(tok_dir, NULL, err, sizeof err);
    if (!tok) {
        fprintf(stderr, "error: tokenizer %s: %s\n", tok_dir, err);
        goto out;
    }
    if (!(items = build_dataset(&o, tok, &n))) goto out;
    if (!o.model) o.model = model_owned = strdup(tok_dir); /* only used by the OpenAI backends */

    printf("#Input tokens: ");
    int64_t tot_in = 0, tot_out_req = 0;
    for (int64_t k = 0; k < n; k++) tot_in += items[k].prompt_len, tot_out_req += items[k].output_len;
    printf("%lld\n#Output tokens: %lld\n", (long long)tot_in, (long long)tot_out_req);
    fflush(stdout);

    /* warm-up: the first prompt, o.warmup copies at once (SGLang's) */
    if (o.warmup > 0) {
        wr = calloc((size_t)o.warmup, sizeof *wr);
        double *wa = calloc((size_t)o.warmup, sizeof *wa);
        if (!wr || !wa) {
            free(wa);
            fprintf(stderr, "error: out of memory\n");
            goto out;
        }
        for (long long k = 0; k < o.warmup; k++) wr[k].it = &items[0];
        printf("Starting warmup with %lld sequences...\n", o.warmup);
        run_requests(&o, tok, wr, o.warmup, wa, 0);
        free(wa);
        for (long long k = 0; k < o.warmup; k++) {
            cli_bserve_stream_free(&wr[k].st);
            if (!wr[k].ok) {
                fprintf(stderr, "error: warm-up request to %s failed: %s\n", o.base, wr[k].err);
                goto out;
            }
        }
        printf("Warmup completed. Starting main benchmark run...\n");
        fflush(stdout);
    }

    if (o.flush_cache) {
        json_t *fr = http_json(o.base, "/flush_cache", "", o.api_key, err, sizeof err);
        if (!fr) {
            fprintf(stderr, "error: --flush-cache: %s\n", err);
            goto out;
        }
        json_decref(fr);
    }

    rs = calloc((size_t)n, sizeof *rs);
    arrival = calloc((size_t)n, sizeof *arrival);
    if (!rs || !arrival) {
        fprintf(stderr, "error: out of memory\n");
        goto out;
    }
    uint64_t ast = (uint64_t)o.seed * 0x9E3779B97F4A7C15ull + 13;
    double at = 0;
    for (int64_t k = 0; k < n; k++) {
        rs[k].it = &items[k];
        arrival[k] = at;
        if (!isinf(o.rate)) at += -log(rng_unit(&ast)) / o.rate;
    }
    double dur = run_requests(&o, tok, rs, n, arrival, o.max_conc);

    /* ---- metrics */
    int64_t ok = 0, failed = 0, in_tok = 0, out_tok = 0, retok = 0;
    size_t n_itl = 0, n_tpot = 0;
    for (int64_t k = 0; k < n; k++)
        if (rs[k].ok) n_itl += rs[k].st.n_itl;
    e2e = malloc(sizeof(double) * (size_t)(n + 1));
    ttft = malloc(sizeof(double) * (size_t)(n + 1));
    tpot = malloc(sizeof(double) * (size_t)(n + 1));
    itl = malloc(sizeof(double) * (n_itl + 1));
    if (!e2e || !ttft || !tpot || !itl) {
        fprintf(stderr, "error: out of memory\n");
        goto out;
    }
    n_itl = 0;
    const char *first_err = NULL;
    for (int64_t k = 0; k < n; k++) {
        req *r = &rs[k];
        if (!r->ok) {
            failed++;
            if (!first_err) first_err = r->err;
            continue;
        }
        e2e[ok] = r->e2e;
        ttft[ok] = r->st.ttft;
        ok++;
        in_tok += r->it->prompt_len;
        out_tok += r->out_tokens;
        retok += r->retok;
        if (r->out_tokens > 1) tpot[n_tpot++] = (r->e2e - r->st.ttft) / (double)(r->out_tokens - 1);
        memcpy(itl + n_itl, r->st.itl, sizeof(double) * r->st.n_itl);
        n_itl += r->st.n_itl;
    }
    double e2e_sum = 0;
    for (int64_t k = 0; k < ok; k++) e2e_sum += e2e[k];
    stats se = stats_ms(e2e, (size_t)ok), st = stats_ms(ttft, (size_t)ok), sp = stats_ms(tpot, n_tpot),
          si = stats_ms(itl, n_itl);
    double d = dur > 0 ? dur : 1e-9, conc = e2e_sum / d;
    char rb[64], mc[32];
    rate_str(o.rate, rb, sizeof rb);
    if (o.max_conc > 0) snprintf(mc, sizeof mc, "%lld", o.max_conc);
    else snprintf(mc, sizeof mc, "not set");

    printf("\n============ Serving Benchmark Result ============\n");
    printf("%-40s %-10s\n", "Backend:", o.backend_name);
    printf("%-40s %-10s\n", "Traffic request rate:", rb);
    printf("%-40s %-10s\n", "Max request concurrency:", mc);
    printf("%-40s %-10lld\n", "Successful requests:", (long long)ok);
    if (failed) printf("%-40s %-10lld\n", "Failed requests:", (long long)failed);
    printf("%-40s %-10.2f\n", "Benchmark duration (s):", dur);
    printf("%-40s %-10lld\n", "Total input tokens:", (long long)in_tok);
    printf("%-40s %-10lld\n", "Total generated tokens:", (long long)out_tok);
    printf("%-40s %-10lld\n", "Total generated tokens (retokenized):", (long long)retok);
    printf("%-40s %-10.2f\n", "Request throughput (req/s):", ok / d);
    printf("%-40s %-10.2f\n", "Input token throughput (tok/s):", in_tok / d);
    printf("%-40s %-10.2f\n", "Output token throughput (tok/s):", out_tok / d);
    printf("%-40s %-10.2f\n", "Total token throughput (tok/s):", (in_tok + out_tok) / d);
    printf("%-40s %-10.2f\n", "Concurrency:", conc);
    printf("----------------End-to-End Latency----------------\n");
    printf("%-40s %-10.2f\n", "Mean E2E Latency (ms):", se.mean);
    printf("%-40s %-10.2f\n", "Median E2E Latency (ms):", se.median);
    printf("%-40s %-10.2f\n", "P99 E2E Latency (ms):", se.p99);
    printf("---------------Time to First Token----------------\n");
    printf("%-40s %-10.2f\n", "Mean TTFT (ms):", st.mean);
    printf("%-40s %-10.2f\n", "Median TTFT (ms):", st.median);
    printf("%-40s %-10.2f\n", "P99 TTFT (ms):", st.p99);
    printf("-----Time per Output Token (excl. 1st token)------\n");
    printf("%-40s %-10.2f\n", "Mean TPOT (ms):", sp.mean);
    printf("%-40s %-10.2f\n", "Median TPOT (ms):", sp.median);
    printf("%-40s %-10.2f\n", "P99 TPOT (ms):", sp.p99);
    printf("---------------Inter-Token Latency----------------\n");
    printf("%-40s %-10.2f\n", "Mean ITL (ms):", si.mean);
    printf("%-40s %-10.2f\n", "Median ITL (ms):", si.median);
    printf("%-40s %-10.2f\n", "P95 ITL (ms):", si.p95);
    printf("%-40s %-10.2f\n", "P99 ITL (ms):", si.p99);
    printf("%-40s %-10.2f\n", "Max ITL (ms):", si.max);
    printf("==================================================\n");
    fflush(stdout);
    if (failed) fprintf(stderr, "error: %lld of %lld requests failed; first error: %s\n", (long long)failed, (long long)n,
                        first_err);

    rc = failed ? 1 : 0;
    if (o.output_file) {
        json_t *j = json_object();
        json_object_set_new(j, "backend", json_string(o.backend_name));
        json_object_set_new(j, "base_url", json_string(o.base));
        json_object_set_new(j, "model_id", json_string(o.model));
        json_object_set_new(j, "tokenizer_id", json_string(tok_dir));
        json_object_set_new(j, "dataset_name", json_string(o.dataset));
        json_object_set_new(j, "request_rate", isinf(o.rate) ? json_string("inf") : json_real(o.rate));
        json_object_set_new(j, "max_concurrency", o.max_conc > 0 ? json_integer(o.max_conc) : json_null());
        json_object_set_new(j, "num_prompts", json_integer(n));
        json_object_set_new(j, "random_input_len", json_integer(o.rin));
        json_object_set_new(j, "random_output_len", json_integer(o.rout));
        json_object_set_new(j, "random_range_ratio", json_real(o.ratio));
        if (!strcmp(o.dataset, "generated-shared-prefix")) {
            json_object_set_new(j, "gsp_num_groups", json_integer(o.g_groups));
            json_object_set_new(j, "gsp_prompts_per_group", json_integer(o.g_per));
            json_object_set_new(j, "gsp_system_prompt_len", json_integer(o.g_sys));
            json_object_set_new(j, "gsp_question_len", json_integer(o.g_q));
            json_object_set_new(j, "gsp_output_len", json_integer(o.g_out));
        }
        json_object_set_new(j, "seed", json_integer(o.seed));
        json_object_set_new(j, "flush_cache", json_boolean(o.flush_cache));
        json_object_set_new(j, "duration", json_real(dur));
        json_object_set_new(j, "completed", json_integer(ok));
        json_object_set_new(j, "failed", json_integer(failed));
        json_object_set_new(j, "total_input_tokens", json_integer(in_tok));
        json_object_set_new(j, "total_output_tokens", json_integer(out_tok));
        json_object_set_new(j, "total_output_tokens_retokenized", json_integer(retok));
        json_object_set_new(j, "request_throughput", json_real(ok / d));
        json_object_set_new(j, "input_throughput", json_real(in_tok / d));
        json_object_set_new(j, "output_throughput", json_real(out_tok / d));
        json_object_set_new(j, "total_throughput", json_real((in_tok + out_tok) / d));
        json_object_set_new(j, "concurrency", json_real(conc));
        put_stats(j, "e2e_latency", &se);
        put_stats(j, "ttft", &st);
        put_stats(j, "tpot", &sp);
        put_stats(j, "itl", &si);
        char *txt = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        FILE *f = fopen(o.output_file, "a");
        if (!f || !txt || fprintf(f, "%s\n", txt) < 0) {
            fprintf(stderr, "error: cannot append to %s\n", o.output_file);
            rc = 1;
        }
        if (f && fclose(f)) rc = 1;
        free(txt);
    }
out:
    if (rs)
        for (int64_t k = 0; k < n; k++) cli_bserve_stream_free(&rs[k].st);
    free(rs);
    free(wr);
    free(arrival);
    free(e2e), free(ttft), free(tpot), free(itl);
    items_free(items, n);
    tok_destroy(tok);
    free(model_owned);
    json_decref(models);
    json_decref(info);
    json_decref(o.extra);
    if (rc != 2) curl_global_cleanup();
    return rc;
}
