/* api_log — request logging (--log-requests*, /configure_logging) and the
 * HTTP access log (--log-level-http), as SGLang's request_logger.py and
 * uvicorn's access logger write them.
 *
 * DESIGN: one mutex per logger guards both its settings and its writes, so
 * /configure_logging (polling thread) can change level or format while the
 * dispatcher thread is writing a "Finish:" line: every line is written
 * whole, with the settings of the moment it is written (SGLang reads its
 * settings at each call too).  Lines are formatted outside the lock when
 * possible: the lock is taken to read the settings, released while
 * rendering, and taken again to write.
 *
 * Request-log levels (SGLang's _compute_metadata):
 *   0  metadata only: obj without text, input_ids, input_embeds,
 *      image_data, audio_data, lora_path, sampling_params; out without
 *      text, output_ids, embedding
 *   1  as 0 but with sampling_params
 *   2  everything, strings and lists longer than 2048 cut to their first
 *      and last 1024 items ("a" ... "b")
 *   3  everything, uncut
 * Text format: "Receive: obj=GenerateReqInput(k=v, ...)" and "Finish:
 * obj=..., out={...}" in Python repr style; json format: one object per
 * line {"timestamp", "event": "request.received"|"request.finished", "rid",
 * "obj", ["headers"], ["out"]}.  Targets: "stdout" and/or folders, each
 * getting "<hostname>_0.log" (appended; SGLang rotates it hourly, sglc
 * does not rotate).  Lines are the bare message (no timestamp prefix), so
 * a json line is a JSON document. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "api/api_ops.h"
#include "util/log.h"
#include "util/strbuf.h"

/* ---- Python-style rendering -------------------------------------------------- */

/* UTF-8 code points of s[0, n) (Python slices strings by code point). */
static size_t u8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    return c;
}

/* Byte offset of code point k. */
static size_t u8_offset(const char *s, size_t n, size_t k)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (c == k) return i;
            c++;
        }
    }
    return n;
}

static void repr_str(strbuf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    strbuf_put(b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '\\') strbuf_puts(b, "\\\\");
        else if (c == (unsigned char)q) {
            e[0] = '\\', e[1] = q;
            strbuf_put(b, e, 2);
        } else if (c == '\n') strbuf_puts(b, "\\n");
        else if (c == '\r') strbuf_puts(b, "\\r");
        else if (c == '\t') strbuf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) {
            snprintf(e, sizeof e, "\\x%02x", c);
            strbuf_puts(b, e);
        } else strbuf_put(b, (const char *)&s[i], 1);
    }
    strbuf_put(b, &q, 1);
}

/* Python's repr(float): the shortest text that reads back the same. */
static void repr_real(strbuf *b, double v)
{
    char t[64];
    if (isnan(v)) {
        strbuf_puts(b, "nan");
        return;
    }
    if (isinf(v)) {
        strbuf_puts(b, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0) {
        strbuf_puts(b, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    int p = 1;
    for (; p < 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, v);
        if (strtod(t, NULL) == v) break;
    }
    int e10 = (int)floor(log10(fabs(v)));
    if (e10 >= -4 && e10 < 16) {
        int dec = p - 1 - e10;
        snprintf(t, sizeof t, "%.*f", dec < 1 ? 1 : dec, v);
    } else {
        snprintf(t, sizeof t, "%.*e", p - 1, v);
        /* C writes 1.5e+20 / 1e-05 as Python does, but "%.0e" of 1e20 is "1e+20": fine */
    }
    strbuf_puts(b, t);
}

static void repr_full(strbuf *b, const json_t *v);

static void repr_list_range(strbuf *b, const json_t *v, size_t from, size_t to)
{
    strbuf_puts(b, "[");
    for (size_t i = from; i < to; i++) {
        if (i > from) strbuf_puts(b, ", ");
        repr_full(b, json_array_get(v, i));
    }
    strbuf_puts(b, "]");
}

/* repr() of any value, untruncated (what str(list) does to its items). */
static void repr_full(strbuf *b, const json_t *v)
{
    char t[32];
    switch (json_typeof(v)) {
    case JSON_STRING: repr_str(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
        snprintf(t, sizeof t, "%lld", (long long)json_integer_value(v));
        strbuf_puts(b, t);
        break;
    case JSON_REAL: repr_real(b, json_real_value(v)); break;
    case JSON_TRUE: strbuf_puts(b, "True"); break;
    case JSON_FALSE: strbuf_puts(b, "False"); break;
    case JSON_ARRAY: repr_list_range(b, v, 0, json_array_size(v)); break;
    case JSON_OBJECT: {
        strbuf_puts(b, "{");
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!first) strbuf_puts(b, ", ");
            first = false;
            repr_str(b, k, strlen(k));
            strbuf_puts(b, ": ");
            repr_full(b, x);
        }
        strbuf_puts(b, "}");
        break;
    }
    default: strbuf_puts(b, "None"); break;
    }
}

static bool skipped(const char *k, const char *const *skip)
{
    for (int i = 0; skip && skip[i]; i++)
        if (!strcmp(k, skip[i])) return true;
    return false;
}

/* _dataclass_to_string_truncated */
static void repr_trunc(strbuf *b, const json_t *v, size_t max_len, const char *cls, const char *const *skip)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v), cp = u8_count(s, n);
        if (cp > max_len) {
            size_t half = max_len / 2;
            size_t a = u8_offset(s, n, half), z = u8_offset(s, n, cp - half);
            repr_str(b, s, a);
            strbuf_puts(b, " ... ");
            repr_str(b, s + z, n - z);
        } else {
            repr_str(b, s, n);
        }
    } else if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n > max_len) {
            size_t half = max_len / 2;
            repr_list_range(b, v, 0, half);
            strbuf_puts(b, " ... ");
            repr_list_range(b, v, n - half, n);
        } else {
            repr_list_range(b, v, 0, n);
        }
    } else if (json_is_object(v)) {
        strbuf_puts(b, cls ? cls : "");
        strbuf_puts(b, cls ? "(" : "{");
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach((json_t *)v, k, x)
        {
            if (skipped(k, skip)) continue;
            if (!first) strbuf_puts(b, ", ");
            first = false;
            if (cls) {
                strbuf_puts(b, k);
                strbuf_puts(b, "=");
            } else {
                strbuf_puts(b, "'");
                strbuf_puts(b, k);
                strbuf_puts(b, "': ");
            }
            repr_trunc(b, x, max_len, NULL, NULL);
        }
        strbuf_puts(b, cls ? ")" : "}");
    } else {
        repr_full(b, v);
    }
}

char *api_log_repr(const json_t *v, size_t max_len, const char *cls, const char *const *skip)
{
    strbuf b = {0};
    repr_trunc(&b, v, max_len, cls, skip);
    return strbuf_take(&b);
}

json_t *api_log_transform(const json_t *v, size_t max_len, const char *const *skip)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v), cp = u8_count(s, n);
        if (cp <= max_len) return json_incref((json_t *)v);
        size_t half = max_len / 2;
        size_t a = u8_offset(s, n, half), z = u8_offset(s, n, cp - half);
        strbuf b = {0};
        strbuf_put(&b, s, a);
        strbuf_puts(&b, "...");
        strbuf_put(&b, s + z, n - z);
        char *t = strbuf_take(&b);
        json_t *o = t ? json_stringn(t, strlen(t)) : NULL;
        free(t);
        return o ? o : json_string("");
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        json_t *o = json_array();
        if (n > max_len) {
            size_t half = max_len / 2;
            for (size_t i = 0; i < half; i++) json_array_append(o, json_array_get(v, i));
            json_array_append_new(o, json_string("..."));
            for (size_t i = n - half; i < n; i++) json_array_append(o, json_array_get(v, i));
        } else {
            for (size_t i = 0; i < n; i++)
                json_array_append_new(o, api_log_transform(json_array_get(v, i), max_len, NULL));
        }
        return o;
    }
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            if (skipped(k, skip)) continue;
            json_object_set_new(o, k, api_log_transform(x, max_len, NULL));
        }
        return o;
    }
    return json_incref((json_t *)v);
}

/* ---- request logger ------------------------------------------------------------- */

struct api_reqlog {
    pthread_mutex_t mu;     /* settings and writes */
    bool on;
    int level;              /* 0..3 */
    bool json;              /* format */
    bool to_stdout;
    FILE **files;           /* (n_files) owned, one per folder target */
    int n_files;
    char **headers;         /* (n_headers) owned lower-case names to log */
    int n_headers;
    double exceeded_ms;     /* $SGLANG_LOG_REQUEST_EXCEEDED_MS, <= 0 = off */
};

static const char *const obj_skip_l0[] = {"text",       "input_ids", "input_embeds", "image_data",
                                          "audio_data", "lora_path", "sampling_params", NULL};
static const char *const obj_skip_l1[] = {"text",       "input_ids", "input_embeds", "image_data",
                                          "audio_data", "lora_path", NULL};
static const char *const out_skip[] = {"text", "output_ids", "embedding", NULL};

static void level_meta(int level, size_t *max_len, const char *const **skip, const char *const **oskip)
{
    *max_len = level == 2 ? 2048 : (size_t)1 << 30;
    *skip = level == 0 ? obj_skip_l0 : level == 1 ? obj_skip_l1 : NULL;
    *oskip = level <= 1 ? out_skip : NULL;
}

static int mkdir_p(const char *dir)
{
    char tmp[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            tmp[i] = c;
        }
    }
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

api_reqlog *api_reqlog_create(bool on, int level, const char *format, const json_t *targets,
                              char *err, size_t errlen)
{
    if (level < 0 || level > 3) {
        snprintf(err, errlen, "Invalid --log-requests-level: %d (0, 1, 2 or 3)", level);
        return NULL;
    }
    if (format && strcmp(format, "text") && strcmp(format, "json")) {
        snprintf(err, errlen, "--log-requests-format must be text or json (got '%s')", format);
        return NULL;
    }
    if (targets && !json_is_array(targets)) {
        snprintf(err, errlen, "--log-requests-target must be a list");
        return NULL;
    }
    api_reqlog *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    l->on = on;
    l->level = level;
    l->json = format && !strcmp(format, "json");
    size_t nt = targets ? json_array_size(targets) : 0;
    if (nt == 0) l->to_stdout = true;
    l->files = calloc(nt ? nt : 1, sizeof(FILE *));
    if (!l->files) {
        api_reqlog_destroy(l);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* header whitelist: SGLang's default plus $SGLANG_LOG_REQUEST_HEADERS */
    const char *env = getenv("SGLANG_LOG_REQUEST_HEADERS");
    size_t cap = 2 + (env ? strlen(env) : 0);
    l->headers = calloc(cap, sizeof(char *));
    if (l->headers) l->headers[l->n_headers++] = strdup("x-smg-routing-key");
    for (const char *p = env; l->headers && p && *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        while (n && (*p == ' ')) p++, n--;
        while (n && p[n - 1] == ' ') n--;
        if (n && (size_t)l->n_headers < cap) {
            char *h = strndup(p, n);
            for (char *q = h; q && *q; q++) *q = (char)((*q >= 'A' && *q <= 'Z') ? *q + 32 : *q);
            if (h) l->headers[l->n_headers++] = h;
        }
        if (!c) break;
        p = c + 1;
    }
    const char *ex = getenv("SGLANG_LOG_REQUEST_EXCEEDED_MS");
    l->exceeded_ms = ex ? strtod(ex, NULL) : -1;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    for (size_t i = 0; i < nt; i++) {
        json_t *t = json_array_get(targets, i);
        if (!json_is_string(t) || !json_string_length(t)) {
            snprintf(err, errlen, "--log-requests-target: each target must be 'stdout' or a folder");
            api_reqlog_destroy(l);
            return NULL;
        }
        const char *dir = json_string_value(t);
        if (!strcasecmp(dir, "stdout")) {
            l->to_stdout = true;
            continue;
        }
        if (mkdir_p(dir)) {
            snprintf(err, errlen, "--log-requests-target: cannot create the folder %s: %s", dir, strerror(errno));
            api_reqlog_destroy(l);
            return NULL;
        }
        char path[4600];
        snprintf(path, sizeof path, "%s/%s_0.log", dir, host);
        FILE *f = fopen(path, "a");
        if (!f) {
            snprintf(err, errlen, "--log-requests-target: cannot open %s: %s", path, strerror(errno));
            api_reqlog_destroy(l);
            return NULL;
        }
        l->files[l->n_files++] = f;
    }
    return l;
}

void api_reqlog_destroy(api_reqlog *l)
{
    if (!l) return;
    for (int i = 0; i < l->n_files; i++) fclose(l->files[i]);
    free(l->files);
    for (int i = 0; i < l->n_headers; i++) free(l->headers[i]);
    free(l->headers);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

json_t *api_reqlog_headers(api_reqlog *l, http_req *r)
{
    if (!l || !r) return NULL;
    json_t *o = NULL;
    for (int i = 0; i < l->n_headers; i++) {
        const char *v = http_req_header(r, l->headers[i]);
        if (!v || !*v) continue;
        if (!o) o = json_object();
        json_object_set_new(o, l->headers[i], json_string(v));
    }
    return o;
}

bool api_reqlog_enabled(api_reqlog *l)
{
    if (!l) return false;
    pthread_mutex_lock(&l->mu);
    bool on = l->on;
    pthread_mutex_unlock(&l->mu);
    return on;
}

int api_reqlog_level(api_reqlog *l)
{
    if (!l) return 0;
    pthread_mutex_lock(&l->mu);
    int v = l->level;
    pthread_mutex_unlock(&l->mu);
    return v;
}

/* The whole line in one write(2) where the kernel takes it: stdio splits a
 * line longer than its buffer into several writes, and a reader of the file
 * (a log shipper, a test) could see half a line, or another writer of the
 * same file (stderr, redirected with it) could land in the middle. */
static int write_line(FILE *f, const char *line)
{
    int rc = 0;
    size_t n = strlen(line);
    char *buf = malloc(n + 1);
    flockfile(f);
    if (!buf || fflush(f)) {
        rc = fprintf(f, "%s\n", line) < 0 || fflush(f) ? -1 : 0;
    } else {
        memcpy(buf, line, n);
        buf[n] = '\n';
        for (size_t off = 0; off <= n;) {
            ssize_t w = write(fileno(f), buf + off, n + 1 - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                rc = -1;
                break;
            }
            off += (size_t)w;
        }
    }
    funlockfile(f);
    free(buf);
    return rc;
}

static void emit(api_reqlog *l, const char *line)
{
    /* stdout is shared with the access log: the FILE's lock is held for the
     * whole line (write_line) */
    pthread_mutex_lock(&l->mu);
    if (l->to_stdout) (void)write_line(stdout, line);
    for (int i = 0; i < l->n_files; i++) (void)write_line(l->files[i], line);
    pthread_mutex_unlock(&l->mu);
}

/* datetime.now().isoformat() */
static void iso_now(char *out, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%06ld", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

static void log_event(api_reqlog *l, bool finished, const json_t *obj, const json_t *headers,
                      const json_t *out)
{
    if (!l || !obj) return;
    pthread_mutex_lock(&l->mu);
    bool on = l->on, js = l->json;
    int level = l->level;
    pthread_mutex_unlock(&l->mu);
    if (!on) return;
    if (finished && out && l->exceeded_ms > 0) {
        json_t *lat = json_object_get(json_object_get(out, "meta_info"), "e2e_latency");
        if (json_number_value(lat) * 1000.0 < l->exceeded_ms) return;
    }
    size_t max_len;
    const char *const *skip, *const *oskip;
    level_meta(level, &max_len, &skip, &oskip);
    bool have_headers = json_is_object(headers) && json_object_size(headers) > 0;
    char *line = NULL;
    if (js) {
        char ts[64];
        iso_now(ts, sizeof ts);
        json_t *rid = json_object_get(obj, "rid");
        json_t *ev = json_pack("{s:s,s:s,s:O?}", "timestamp", ts, "event",
                               finished ? "request.finished" : "request.received", "rid", rid);
        if (ev) {
            json_object_set_new(ev, "obj", api_log_transform(obj, max_len, skip));
            if (have_headers) json_object_set(ev, "headers", (json_t *)headers);
            if (finished && out) json_object_set_new(ev, "out", api_log_transform(out, max_len, oskip));
            line = json_dumps(ev, JSON_PRESERVE_ORDER);
            json_decref(ev);
        }
    } else {
        strbuf b = {0};
        strbuf_puts(&b, finished ? "Finish: obj=" : "Receive: obj=");
        char *o = api_log_repr(obj, max_len, "GenerateReqInput", skip);
        if (o) strbuf_puts(&b, o);
        free(o);
        if (have_headers) {
            strbuf_puts(&b, ", headers=");
            repr_full(&b, headers);
        }
        if (finished && out) {
            char *r = api_log_repr(out, max_len, NULL, oskip);
            strbuf_puts(&b, ", out=");
            if (r) strbuf_puts(&b, r);
            free(r);
        }
        line = strbuf_take(&b);
    }
    if (line) emit(l, line);
    free(line);
}

void api_reqlog_openai(api_reqlog *l, const json_t *body, const json_t *headers)
{
    if (!l || !body) return;
    pthread_mutex_lock(&l->mu);
    bool on = l->on, js = l->json;
    int level = l->level;
    pthread_mutex_unlock(&l->mu);
    if (!on) return;
    size_t max_len;
    const char *const *skip, *const *oskip;
    level_meta(level, &max_len, &skip, &oskip);
    bool have_headers = json_is_object(headers) && json_object_size(headers) > 0;
    char *line = NULL;
    if (js) {
        char ts[64];
        iso_now(ts, sizeof ts);
        json_t *ev = json_pack("{s:s,s:s,s:o}", "timestamp", ts, "event", "request.received.openai", "obj",
                               api_log_transform(body, max_len, NULL));
        if (ev && have_headers) json_object_set(ev, "headers", (json_t *)headers);
        line = ev ? json_dumps(ev, JSON_PRESERVE_ORDER) : NULL;
        json_decref(ev);
    } else {
        strbuf b = {0};
        strbuf_puts(&b, "Receive OpenAI: obj=");
        char *o = api_log_repr(body, max_len, NULL, NULL);
        if (o) strbuf_puts(&b, o);
        free(o);
        if (have_headers) {
            strbuf_puts(&b, ", headers=");
            repr_full(&b, headers);
        }
        line = strbuf_take(&b);
    }
    if (line) emit(l, line);
    free(line);
}

void api_reqlog_received(api_reqlog *l, const json_t *obj, const json_t *headers)
{
    log_event(l, false, obj, headers, NULL);
}

void api_reqlog_finished(api_reqlog *l, const json_t *obj, const json_t *headers, const json_t *out)
{
    log_event(l, true, obj, headers, out);
}

/* ---- request metrics export ----------------------------------------------- */

struct api_mexport {
    pthread_mutex_t mu; /* guards f, hour and the writes */
    char *dir;          /* owned */
    const char *const *skip, *const *oskip;
    FILE *f;            /* the current hour's file or NULL */
    char hour[16];      /* "YYYYmmdd_HH" of f */
    bool warned;
};

api_mexport *api_mexport_create(const char *dir, int level, char *err, size_t errlen)
{
    if (!dir || !*dir) {
        snprintf(err, errlen, "--export-metrics-to-file-dir is required with --export-metrics-to-file");
        return NULL;
    }
    if (mkdir_p(dir)) {
        snprintf(err, errlen, "--export-metrics-to-file-dir %s: cannot create the folder: %s", dir, strerror(errno));
        return NULL;
    }
    api_mexport *x = calloc(1, sizeof *x);
    if (!x || !(x->dir = strdup(dir))) {
        free(x);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t max_len;
    level_meta(level, &max_len, &x->skip, &x->oskip);
    pthread_mutex_init(&x->mu, NULL);
    return x;
}

void api_mexport_destroy(api_mexport *x)
{
    if (!x) return;
    if (x->f) fclose(x->f);
    pthread_mutex_destroy(&x->mu);
    free(x->dir);
    free(x);
}

/* jansson writes \\u00E9, Python's json.dumps \\u00e9: lower-case the hex
 * digits of every \\u escape of a dumped document (in place). */
static void py_hex_lower(char *s)
{
    for (; s && *s; s++) {
        if (*s != '\\') continue;
        if (s[1] == 'u') {
            int i = 2;
            for (; i < 6 && s[i]; i++)
                if (s[i] >= 'A' && s[i] <= 'F') s[i] = (char)(s[i] - 'A' + 'a');
            s += i - 1;
        } else if (s[1]) {
            s++; /* an escaped backslash or quote: skip it */
        }
    }
}

void api_mexport_write(api_mexport *x, const json_t *obj, const json_t *out)
{
    if (!x || !json_is_object(obj)) return;
    /* SGLang skips health checks by rid; sglc's callers skip them by kind */
    const char *rid = json_string_value(json_object_get(obj, "rid"));
    if (rid && strstr(rid, "HEALTH_CHECK")) return;
    /* request_parameters: the non-None fields, as json.dumps writes them
     * (", " / ": " separators, ASCII escapes) */
    json_t *params = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    if (!json_is_null(v) && !skipped(k, x->skip)) json_object_set(params, k, v);
    char *ps = json_dumps(params, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(params);
    py_hex_lower(ps);
    json_t *rec = json_object();
    json_object_set_new(rec, "request_parameters", json_string(ps ? ps : "{}"));
    free(ps);
    json_object_foreach(json_object_get(out, "meta_info"), k, v)
    if (!skipped(k, x->oskip)) json_object_set(rec, k, v);
    char *line = json_dumps(rec, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(rec);
    if (!line) return;
    py_hex_lower(line);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char hour[16];
    strftime(hour, sizeof hour, "%Y%m%d_%H", &tm);
    pthread_mutex_lock(&x->mu);
    if (!x->f || strcmp(hour, x->hour)) {
        if (x->f) fclose(x->f);
        char path[4096];
        snprintf(path, sizeof path, "%s/sglang-request-metrics-%s.log", x->dir, hour);
        x->f = fopen(path, "a");
        if (x->f) memcpy(x->hour, hour, sizeof hour);
        else if (!x->warned) {
            x->warned = true;
            log_error("cannot open %s: %s (request metrics are not exported)", path, strerror(errno));
        }
    }
    if (x->f && write_line(x->f, line) && !x->warned) {
        x->warned = true;
        log_error("writing the request metrics failed: %s", strerror(errno));
    }
    pthread_mutex_unlock(&x->mu);
    free(line);
}

int api_reqlog_configure(api_reqlog *l, const json_t *body, char *err, size_t errlen)
{
    if (!json_is_object(body)) {
        snprintf(err, errlen, "The request body must be a JSON object");
        return -1;
    }
    json_t *on = json_object_get(body, "log_requests"), *lv = json_object_get(body, "log_requests_level"),
           *fmt = json_object_get(body, "log_requests_format"), *ll = json_object_get(body, "log_level");
    if (json_is_null(on)) on = NULL;
    if (json_is_null(lv)) lv = NULL;
    if (json_is_null(fmt)) fmt = NULL;
    if (json_is_null(ll)) ll = NULL;
    if (on && !json_is_boolean(on)) {
        snprintf(err, errlen, "log_requests must be a boolean");
        return -1;
    }
    if (lv && (!json_is_integer(lv) || json_integer_value(lv) < 0 || json_integer_value(lv) > 3)) {
        snprintf(err, errlen, "Invalid --log-requests-level: log_requests_level must be 0, 1, 2 or 3");
        return -1;
    }
    if (fmt && (!json_is_string(fmt) || (strcmp(json_string_value(fmt), "text") &&
                                         strcmp(json_string_value(fmt), "json")))) {
        snprintf(err, errlen, "log_requests_format must be 'text' or 'json'");
        return -1;
    }
    int new_level = -1;
    if (ll) {
        new_level = json_is_string(ll) ? log_level_parse(json_string_value(ll)) : -1;
        if (new_level < 0) {
            snprintf(err, errlen, "log_level must be one of debug, info, warning, error, critical");
            return -1;
        }
    }
    static const char *const unsupported[] = {"dump_requests_folder", "dump_requests_threshold",
                                              "crash_dump_folder", "dump_requests_exclude_meta_keys", NULL};
    for (int i = 0; unsupported[i]; i++) {
        json_t *v = json_object_get(body, unsupported[i]);
        if (v && !json_is_null(v)) {
            snprintf(err, errlen, "%s is not supported by sglc yet", unsupported[i]);
            return -1;
        }
    }
    pthread_mutex_lock(&l->mu);
    if (on) l->on = json_is_true(on);
    if (lv) l->level = (int)json_integer_value(lv);
    if (fmt) l->json = !strcmp(json_string_value(fmt), "json");
    pthread_mutex_unlock(&l->mu);
    if (new_level >= 0) log_set_level(new_level);
    /* SGLang: logging.info(f"Config logging: {obj=}") */
    static const char *const fields[] = {"log_requests", "log_requests_level", "log_requests_format",
                                         "log_level", "dump_requests_folder", "dump_requests_threshold",
                                         "crash_dump_folder", "dump_requests_exclude_meta_keys", NULL};
    json_t *o = json_object();
    for (int i = 0; fields[i]; i++) {
        json_t *v = json_object_get(body, fields[i]);
        json_object_set(o, fields[i], v ? v : json_null());
    }
    char *r = api_log_repr(o, (size_t)1 << 30, "ConfigureLoggingReq", NULL);
    log_info("Config logging: obj=%s", r ? r : "");
    free(r);
    json_decref(o);
    return 0;
}

/* ---- access log ------------------------------------------------------------------ */

struct api_access_log {
    pthread_mutex_t mu;   /* writes */
    bool enabled;         /* the http level lets INFO through */
    char **prefixes;      /* (n_prefixes) owned */
    size_t n_prefixes;
    FILE *out;            /* borrowed */
};

api_access_log *api_access_log_create(int level, const json_t *exclude, FILE *out)
{
    api_access_log *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    pthread_mutex_init(&l->mu, NULL);
    l->enabled = level <= LOG_INFO;
    l->out = out ? out : stdout;
    size_t n = json_is_array(exclude) ? json_array_size(exclude) : 0;
    l->prefixes = calloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; l->prefixes && i < n; i++) {
        json_t *p = json_array_get(exclude, i);
        /* SGLang drops empty prefixes (they would hide every line) */
        if (!json_is_string(p) || !json_string_length(p)) continue;
        char *d = strdup(json_string_value(p));
        if (d) l->prefixes[l->n_prefixes++] = d;
    }
    return l;
}

void api_access_log_destroy(api_access_log *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n_prefixes; i++) free(l->prefixes[i]);
    free(l->prefixes);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void api_access_log_line(void *ctx, const char *client, const char *method, const char *path,
                         const char *version, int status, const char *phrase)
{
    api_access_log *l = ctx;
    if (!l || !l->enabled) return;
    for (size_t i = 0; i < l->n_prefixes; i++)
        if (path && !strncmp(path, l->prefixes[i], strlen(l->prefixes[i]))) return;
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    pthread_mutex_lock(&l->mu);
    fprintf(l->out, "[%04d-%02d-%02d %02d:%02d:%02d] INFO:     %s - \"%s %s %s\" %d %s\n",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            client ? client : "-", method ? method : "-", path ? path : "-",
            version ? version : "HTTP/1.1", status, phrase ? phrase : "");
    fflush(l->out);
    pthread_mutex_unlock(&l->mu);
}
