/* http — see http.h.
 *
 * DESIGN: per connection one http_req, created on the first access-handler
 * call and freed when both libmicrohttpd (request completed) and the
 * handler (terminal call) have let go of it: a reference count under the
 * request's mutex.  Every state change that another thread makes
 * (answer ready, stream bytes queued) resumes the connection if it is
 * suspended; the polling thread suspends it whenever it has nothing to
 * send.  libmicrohttpd allows MHD_suspend_connection only from the access
 * handler and the content reader, which is exactly where it is called.
 *
 * Detached requests (http_req_detach): libmicrohttpd's header lists are
 * the polling thread's, so the handler copies them (kv_copy) before it
 * hands r to a worker; the body is r's own buffer and is never written
 * after the handler call.  A worker may see the connection end before it
 * installs the close hook or polls the socket: `closed` (set under r->mu
 * by on_completed) answers both, and r->conn is never used once it is
 * set. */
#include "http/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "util/log.h"

struct http_server {
    struct MHD_Daemon *d;
    http_handler_fn fn;
    void *ctx;
    size_t max_body;
    int cors;
    atomic_int inflight;
    http_access_fn access_fn;
    void *access_ctx;
};

enum { RESP_NONE = 0, RESP_FULL, RESP_STREAM };

/* A copy of one libmicrohttpd value list (headers or query arguments). */
typedef struct kv_copy {
    size_t n, cap;
    char **key;                  /* (n) owned */
    char **val;                  /* (n) owned; NULL = a query argument without '=' */
} kv_copy;

/* Bytes a streaming answer may hold for a client that does not read
 * (Redis-style output-buffer limit): past it, writes fail and the owner
 * aborts the work. */
#define HTTP_STREAM_BUF_MAX ((size_t)32 << 20)

struct http_req {
    pthread_mutex_t mu;
    struct MHD_Connection *conn; /* borrowed from the daemon */
    http_server *srv;
    char *body;                  /* (len) owned, NUL-terminated */
    size_t len, cap;
    bool too_large, dispatched, queued, suspended, closed, terminal;
    bool v1;                     /* path under /v1/: OpenAI-shaped 413 */
    int refs;                    /* daemon + handler */
    int resp;                    /* RESP_* */
    int status;
    char *ctype;                 /* owned */
    char *rbody;                 /* (rlen) owned */
    size_t rlen;
    char **hdrs;                 /* owned NULL-terminated name/value list */
    char *sbuf;                  /* (s_len) owned stream bytes, s_off already sent */
    size_t s_len, s_off, s_cap;
    bool s_end;
    http_close_fn on_close;
    void *close_arg;
    char *a_method, *a_path, *a_version; /* owned copies for the access log (NULL without one) */
    int a_status;                        /* status queued to the client, 0 = none yet */
    char *cors_origin;                   /* owned: the request's Origin when CORS answers it, else NULL */
    bool cors_cookie;                    /* the request carried a Cookie (CORS echoes the origin) */
    bool kv_detached;                    /* http_req_detach ran: headers/args below, not conn's */
    kv_copy hdr, arg;                    /* copies made by http_req_detach */
};

static void kv_free(kv_copy *kv)
{
    for (size_t i = 0; i < kv->n; i++) {
        free(kv->key[i]);
        free(kv->val[i]);
    }
    free(kv->key);
    free(kv->val);
    memset(kv, 0, sizeof *kv);
}

static void req_unref_locked(http_req *r)
{
    /* caller holds r->mu; frees r when the count drops to zero */
    if (--r->refs > 0) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_destroy(&r->mu);
    free(r->body);
    free(r->ctype);
    free(r->rbody);
    if (r->hdrs)
        for (char **h = r->hdrs; *h; h++) free(*h);
    free(r->hdrs);
    free(r->sbuf);
    free(r->cors_origin);
    free(r->a_method);
    free(r->a_path);
    free(r->a_version);
    kv_free(&r->hdr);
    kv_free(&r->arg);
    free(r);
}

/* The 413 body (into buf[cap]): {"error": {"message"}} for the native
 * routes; on /v1 the API's one OpenAI shape (api_oai_error_obj: SGLang's
 * top-level fields and OpenAI's error object), spelled here because this
 * answer comes before routing. */
static void too_large_body(char *buf, size_t cap, bool v1, size_t limit)
{
    if (v1)
        snprintf(buf, cap,
                 "{\"object\": \"error\", \"message\": \"Request body too large (limit %zu bytes).\", "
                 "\"type\": \"BadRequest\", \"param\": null, \"code\": 413, \"error\": {\"message\": "
                 "\"Request body too large (limit %zu bytes).\", \"type\": \"BadRequest\", \"param\": null, "
                 "\"code\": 413}}",
                 limit, limit);
    else
        snprintf(buf, cap, "{\"error\": {\"message\": \"Request body too large (limit %zu bytes).\"}}", limit);
}

/* CORS as SGLang's server (FastAPI's CORSMiddleware with every origin,
 * method and header allowed, credentials on): an answer to a request that
 * named its Origin allows any origin ("*"), or echoes the origin when the
 * request carried cookies (a browser rejects "*" with credentials). */
static void add_cors(struct MHD_Response *resp, const http_req *r)
{
    if (!r || !r->cors_origin) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->cors_cookie ? r->cors_origin : "*");
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    if (r->cors_cookie) MHD_add_response_header(resp, "Vary", "Origin");
}

/* A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method):
 * answered here, never reaching the handler: 200 "OK" with what may be
 * sent, as Starlette answers it. */
static enum MHD_Result queue_preflight(struct MHD_Connection *c, const char *origin)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(2, (void *)"OK", MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    const char *req_hdrs = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    if (req_hdrs && *req_hdrs) MHD_add_response_header(resp, "Access-Control-Allow-Headers", req_hdrs);
    MHD_add_response_header(resp, "Vary", "Origin");
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result queue_simple(struct MHD_Connection *c, const http_req *r, int status, const char *json)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    add_cors(resp, r);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    http_req *r = cls;
    pthread_mutex_lock(&r->mu);
    if (r->s_len > r->s_off) {
        size_t n = r->s_len - r->s_off;
        if (n > max) n = max;
        memcpy(buf, r->sbuf + r->s_off, n);
        r->s_off += n;
        if (r->s_off == r->s_len) r->s_off = r->s_len = 0;
        pthread_mutex_unlock(&r->mu);
        return (ssize_t)n;
    }
    if (r->s_end) {
        pthread_mutex_unlock(&r->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    r->suspended = true;
    MHD_suspend_connection(r->conn);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Queue the answer if one is ready, else suspend.  Polling thread only. */
static enum MHD_Result try_queue(http_req *r)
{
    pthread_mutex_lock(&r->mu);
    enum MHD_Result ret = MHD_YES;
    if (r->queued) {
        pthread_mutex_unlock(&r->mu);
        return MHD_YES;
    }
    struct MHD_Response *resp = NULL;
    if (r->resp == RESP_FULL) {
        resp = MHD_create_response_from_buffer(r->rlen, r->rbody, MHD_RESPMEM_MUST_COPY);
    } else if (r->resp == RESP_STREAM) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, r, NULL);
        if (resp) {
            MHD_add_response_header(resp, "Cache-Control", "no-cache");
            MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        }
    } else {
        r->suspended = true;
        MHD_suspend_connection(r->conn);
        pthread_mutex_unlock(&r->mu);
        return MHD_YES;
    }
    if (!resp) {
        pthread_mutex_unlock(&r->mu);
        return MHD_NO;
    }
    if (r->ctype) MHD_add_response_header(resp, "Content-Type", r->ctype);
    if (r->hdrs)
        for (char **h = r->hdrs; h[0] && h[1]; h += 2) MHD_add_response_header(resp, h[0], h[1]);
    add_cors(resp, r);
    r->queued = true;
    r->a_status = r->resp == RESP_FULL ? r->status : 200;
    ret = MHD_queue_response(r->conn, (unsigned)(r->resp == RESP_FULL ? r->status : 200), resp);
    MHD_destroy_response(resp);
    pthread_mutex_unlock(&r->mu);
    return ret;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    http_server *s = cls;
    http_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        pthread_mutex_init(&r->mu, NULL);
        r->conn = c;
        r->srv = s;
        r->refs = 1;
        r->v1 = url && !strncmp(url, "/v1/", 4);
        *con_cls = r;
        if (s->access_fn) {
            r->a_method = strdup(method);
            r->a_path = strdup(url);
            r->a_version = strdup(version);
        }
        const char *origin = s->cors ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin") : NULL;
        if (origin) {
            if (!strcmp(method, "OPTIONS") &&
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
                r->dispatched = r->terminal = r->queued = true;
                r->a_status = 200;
                return queue_preflight(c, origin);
            }
            r->cors_origin = strdup(origin);
            r->cors_cookie = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Cookie") != NULL;
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->max_body) {
            r->too_large = r->dispatched = true;
            char msg[400];
            too_large_body(msg, sizeof msg, r->v1, s->max_body);
            r->a_status = 413;
            return queue_simple(c, r, 413, msg);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->too_large) return MHD_YES;
        if (r->len + n > s->max_body) {
            r->too_large = true;
            free(r->body);
            r->body = NULL;
            r->len = r->cap = 0;
            return MHD_YES;
        }
        if (r->len + n + 1 > r->cap) {
            size_t nc = r->cap ? r->cap : 1024;
            while (nc < r->len + n + 1) nc *= 2;
            char *g = realloc(r->body, nc);
            if (!g) return MHD_NO;
            r->body = g;
            r->cap = nc;
        }
        memcpy(r->body + r->len, upload_data, n);
        r->len += n;
        r->body[r->len] = 0;
        return MHD_YES;
    }
    if (!r->dispatched) {
        r->dispatched = true;
        if (r->too_large) {
            char msg[400];
            too_large_body(msg, sizeof msg, r->v1, s->max_body);
            r->terminal = true;
            r->a_status = 413;
            return queue_simple(c, r, 413, msg);
        }
        pthread_mutex_lock(&r->mu);
        r->refs++; /* the handler's hold, released by the terminal call */
        pthread_mutex_unlock(&r->mu);
        atomic_fetch_add(&s->inflight, 1);
        s->fn(s->ctx, r, method, url, r->body ? r->body : "", r->len);
    }
    return try_queue(r);
}

/* One access-log line for r (polling thread). */
static void access_line(http_server *s, struct MHD_Connection *c, http_req *r)
{
    char client[INET6_ADDRSTRLEN + 16] = "-";
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        char ip[INET6_ADDRSTRLEN] = "";
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET) {
            const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
            inet_ntop(AF_INET, &a4->sin_addr, ip, sizeof ip);
            snprintf(client, sizeof client, "%s:%u", ip, (unsigned)ntohs(a4->sin_port));
        } else if (sa->sa_family == AF_INET6) {
            const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
            inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof ip);
            snprintf(client, sizeof client, "%s:%u", ip, (unsigned)ntohs(a6->sin6_port));
        }
    }
    const char *phrase = MHD_get_reason_phrase_for((unsigned)r->a_status);
    s->access_fn(s->access_ctx, client, r->a_method, r->a_path, r->a_version, r->a_status,
                 phrase ? phrase : "");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    http_server *s = cls;
    if (s->access_fn && r->a_status && r->a_method) access_line(s, c, r);
    pthread_mutex_lock(&r->mu);
    r->closed = true;
    r->suspended = false;
    /* on_close runs under r->mu: the owner cannot make its terminal call
     * (and free what close_arg points to) while it runs */
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->dispatched && !r->terminal && r->on_close)
        r->on_close(r->close_arg);
    r->on_close = NULL;
    req_unref_locked(r);
}

/* libmicrohttpd's own messages (mostly "client went away") at debug level:
 * a vanished client is normal operation, not an error. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    if (log_level_current > LOG_DEBUG) return;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
    log_debug("libmicrohttpd: %s", buf);
}

http_server *http_start(const http_config *cfg, http_handler_fn fn, void *ctx, char *err,
                        size_t errlen)
{
    http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->fn = fn;
    s->ctx = ctx;
    s->access_fn = cfg->access_fn;
    s->access_ctx = cfg->access_ctx;
    s->max_body = cfg->max_body ? cfg->max_body : (size_t)64 << 20;
    s->cors = cfg->cors;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    const char *host = cfg->host && *cfg->host ? cfg->host : "127.0.0.1";
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    socklen_t slen;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
        slen = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        slen = sizeof *a6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--host must be an IPv4 or IPv6 address (got '%s')", host);
        free(s);
        return NULL;
    }
    (void)slen;
    unsigned max_conns = cfg->max_conns ? cfg->max_conns : 65536;
    /* TLS options go through MHD_OPTION_ARRAY (pointer options take
     * ptr_value); an empty array when serving plain HTTP */
    struct MHD_OptionItem tls[5];
    int nt = 0;
    if (cfg->tls_cert_pem) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            snprintf(err, errlen, "this libmicrohttpd was built without TLS: cannot serve HTTPS");
            free(s);
            return NULL;
        }
        flags |= MHD_USE_TLS;
        tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cfg->tls_cert_pem};
        tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)cfg->tls_key_pem};
        if (cfg->tls_key_password)
            tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_KEY_PASSWORD, 0, (void *)cfg->tls_key_password};
        if (cfg->tls_trust_pem)
            tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *)cfg->tls_trust_pem};
    }
    tls[nt] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_access, s,
                            MHD_OPTION_ARRAY, tls,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_CONNECTION_LIMIT, max_conns,
                            MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u, MHD_OPTION_END);
    if (!s->d && cfg->tls_cert_pem) {
        /* MHD does not say which: a bad key/certificate/password or the port */
        snprintf(err, errlen,
                 "cannot serve HTTPS on %s:%d: bad --ssl-keyfile / --ssl-certfile / --ssl-keyfile-password "
                 "(key not matching the certificate, wrong password) or the address is in use",
                 host, cfg->port);
        free(s);
        return NULL;
    }
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%d (address in use or not available)", host,
                 cfg->port);
        free(s);
        return NULL;
    }
    return s;
}

void http_quiesce(http_server *s)
{
    if (s && s->d) MHD_quiesce_daemon(s->d);
}

int http_inflight(http_server *s) { return atomic_load(&s->inflight); }

void http_stop(http_server *s)
{
    if (!s) return;
    if (s->d) MHD_stop_daemon(s->d);
    free(s);
}

/* First value of `name` (case-insensitive, as libmicrohttpd's lookup). */
static const char *kv_find(const kv_copy *kv, const char *name)
{
    for (size_t i = 0; i < kv->n; i++)
        if (!strcasecmp(kv->key[i], name)) return kv->val[i];
    return NULL;
}

const char *http_req_header(http_req *r, const char *name)
{
    if (r->kv_detached) return kv_find(&r->hdr, name);
    return r->conn ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name) : NULL;
}

const char *http_req_query(http_req *r, const char *name)
{
    if (r->kv_detached) return kv_find(&r->arg, name);
    return r->conn ? MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name) : NULL;
}

static enum MHD_Result kv_add(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    kv_copy *kv = cls;
    if (kv->n == kv->cap) {
        size_t nc = kv->cap ? kv->cap * 2 : 16;
        char **k = realloc(kv->key, nc * sizeof *k);
        if (!k) return MHD_NO;
        kv->key = k;
        char **v = realloc(kv->val, nc * sizeof *v);
        if (!v) return MHD_NO;
        kv->val = v;
        kv->cap = nc;
    }
    char *kd = strdup(key ? key : "");
    char *vd = value ? strdup(value) : NULL;
    if (!kd || (value && !vd)) {
        free(kd);
        free(vd);
        return MHD_NO;
    }
    kv->key[kv->n] = kd;
    kv->val[kv->n] = vd;
    kv->n++;
    return MHD_YES;
}

int http_req_detach(http_req *r)
{
    if (r->kv_detached || !r->conn) {
        r->kv_detached = true;
        return 0;
    }
    kv_copy h = {0}, a = {0};
    int nh = MHD_get_connection_values(r->conn, MHD_HEADER_KIND, kv_add, &h);
    int na = MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, kv_add, &a);
    if (nh < 0 || na < 0 || (size_t)nh != h.n || (size_t)na != a.n) {
        kv_free(&h);
        kv_free(&a);
        return -1;
    }
    r->hdr = h;
    r->arg = a;
    r->kv_detached = true;
    return 0;
}

bool http_req_peer_gone(http_req *r)
{
    pthread_mutex_lock(&r->mu);
    bool gone = r->closed;
    if (!gone && r->conn) {
        /* under r->mu: on_completed cannot end the connection meanwhile */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct pollfd p = {.fd = ci ? ci->connect_fd : -1, .events = POLLRDHUP};
        if (ci && poll(&p, 1, 0) == 1)
            gone = (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
    }
    pthread_mutex_unlock(&r->mu);
    return gone;
}

static http_server detached_srv; /* only its inflight counter is used */

http_req *http_req_detached(void)
{
    http_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->srv = &detached_srv;
    r->refs = 2;
    r->dispatched = true;
    atomic_fetch_add(&detached_srv.inflight, 1);
    return r;
}

int http_req_detached_result(http_req *r, const char **body, size_t *len, bool *ended)
{
    pthread_mutex_lock(&r->mu);
    int st = 0;
    if (r->resp == RESP_FULL) {
        st = r->status;
        *body = r->rbody;
        *len = r->rlen;
    } else if (r->resp == RESP_STREAM) {
        st = 200;
        *body = r->sbuf;
        *len = r->s_len;
    } else {
        *body = NULL;
        *len = 0;
    }
    *ended = r->terminal;
    pthread_mutex_unlock(&r->mu);
    return st;
}

void http_req_detached_free(http_req *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    req_unref_locked(r);
}

void http_req_on_close(http_req *r, http_close_fn fn, void *arg)
{
    pthread_mutex_lock(&r->mu);
    if (r->closed) {
        /* the connection ended before the hook was installed (a request
         * served by another thread): report it now, once */
        r->on_close = NULL;
        if (fn && !r->terminal) fn(arg);
    } else {
        r->on_close = fn;
        r->close_arg = arg;
    }
    pthread_mutex_unlock(&r->mu);
}

static void wake_locked(http_req *r)
{
    if (r->suspended && !r->closed) {
        r->suspended = false;
        MHD_resume_connection(r->conn);
    }
}

static char *dup_s(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

void http_respond(http_req *r, int status, const char *content_type, const char *body, size_t len,
                  const char *const *extra_headers)
{
    pthread_mutex_lock(&r->mu);
    if (!r->terminal && r->resp == RESP_NONE) {
        r->status = status;
        r->ctype = content_type ? dup_s(content_type) : NULL;
        r->rbody = malloc(len ? len : 1);
        if (r->rbody) {
            memcpy(r->rbody, body, len);
            r->rlen = len;
        } else {
            r->status = 500;
            r->rlen = 0;
        }
        if (extra_headers) {
            size_t n = 0;
            while (extra_headers[n]) n++;
            r->hdrs = calloc(n + 1, sizeof(char *));
            if (r->hdrs)
                for (size_t i = 0; i < n; i++) r->hdrs[i] = dup_s(extra_headers[i]);
        }
        r->resp = RESP_FULL;
    }
    r->terminal = true;
    r->on_close = NULL;
    atomic_fetch_sub(&r->srv->inflight, 1);
    wake_locked(r);
    req_unref_locked(r);
}

void http_stream_begin(http_req *r, const char *content_type)
{
    pthread_mutex_lock(&r->mu);
    if (r->resp == RESP_NONE) {
        r->resp = RESP_STREAM;
        r->ctype = content_type ? dup_s(content_type) : NULL;
        wake_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
}

bool http_stream_write(http_req *r, const char *data, size_t len)
{
    pthread_mutex_lock(&r->mu);
    bool ok = !r->closed && r->resp == RESP_STREAM && r->s_len + len <= HTTP_STREAM_BUF_MAX;
    if (ok && len) {
        if (r->s_len + len > r->s_cap) {
            size_t nc = r->s_cap ? r->s_cap : 4096;
            while (nc < r->s_len + len) nc *= 2;
            char *g = realloc(r->sbuf, nc);
            if (!g) {
                pthread_mutex_unlock(&r->mu);
                return false;
            }
            r->sbuf = g;
            r->s_cap = nc;
        }
        memcpy(r->sbuf + r->s_len, data, len);
        r->s_len += len;
        wake_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

void http_stream_end(http_req *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->resp == RESP_NONE) { /* contract breach: never leave it hanging */
        r->resp = RESP_FULL;
        r->status = 500;
    }
    r->s_end = true;
    r->terminal = true;
    r->on_close = NULL;
    atomic_fetch_sub(&r->srv->inflight, 1);
    wake_locked(r);
    req_unref_locked(r);
}
