/* http — an event-driven HTTP/1.1 front on libmicrohttpd, no model knowledge.
 *
 * DESIGN
 * One libmicrohttpd daemon with its internal polling thread (epoll where
 * available) serves every connection; no thread per connection.  The body of
 * a request is collected up to a size limit (larger bodies get 413 without
 * being buffered), then the handler is called once, on the polling thread,
 * with the method, path, headers and body.  The handler must not block: it
 * either answers at once or keeps the request and answers later from any
 * thread.  Meanwhile the connection is suspended (it costs no polling):
 *
 *   handler ──▶ http_respond(r, ...)         full answer (any thread)
 *           └─▶ http_stream_begin(r, ctype)  then http_stream_write(r, ...)
 *                                            ... http_stream_end(r)
 *
 * Streaming uses a content-reader callback: it copies what the producer has
 * queued; with nothing queued it suspends the connection, and the next
 * write resumes it.  A client that goes away is reported once through the
 * close hook (http_req_on_close), so the owner can abort the work.
 *
 * Contract: every request handed to the handler gets exactly one terminal
 * call, http_respond or http_stream_end, even after its client left; that
 * call releases the handler's hold on the request.  Until then `r` stays
 * valid.
 *
 * Handing a request to another thread (the API's tokenizer workers): the
 * handler calls http_req_detach first, on the polling thread; from then on
 * the headers, the query arguments and the body may be read from any
 * thread until the terminal call, and the close hook may be installed
 * after the client already left (it then runs at once).
 *
 * Ownership: http_server owns its daemon and every http_req; the body
 * passed to the handler is the request's own buffer, valid until the
 * terminal call (detached requests: the caller's buffer, which must live
 * as long); header values are borrowed (see http_req_header). */
#ifndef SGLC_HTTP_H
#define SGLC_HTTP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct http_server http_server;
typedef struct http_req http_req;

typedef void (*http_handler_fn)(void *ctx, http_req *r, const char *method, const char *path,
                                const char *body, size_t body_len);
/* Called once when the connection of r ends before its answer was fully
 * sent (client gone, write error, server stop).  Runs on the polling
 * thread (or see http_req_on_close); must not block. */
typedef void (*http_close_fn)(void *arg);
/* Access-log hook: called once per answered request when its connection
 * is done with it (polling thread; must not block long): client
 * "ip:port", method, path (without the query), "HTTP/1.1", the status
 * sent and its reason phrase.  Requests that never got an answer out are
 * not reported. */
typedef void (*http_access_fn)(void *ctx, const char *client, const char *method, const char *path,
                               const char *version, int status, const char *phrase);

typedef struct http_config {
    const char *host;        /* bind address, "127.0.0.1", "0.0.0.0", "::" */
    int port;
    size_t max_body;         /* bytes; larger bodies get 413 */
    unsigned max_conns;      /* connection limit (0 = 65536) */
    unsigned idle_timeout_s; /* idle connection timeout (0 = none) */
    http_access_fn access_fn; /* NULL = no access log */
    void *access_ctx;
    /* HTTPS (libmicrohttpd over GnuTLS) when tls_cert_pem is set: PEM
     * texts, borrowed: keep them until http_stop */
    const char *tls_cert_pem;     /* certificate (chain) */
    const char *tls_key_pem;      /* private key, maybe encrypted */
    const char *tls_key_password; /* NULL = key not encrypted */
    const char *tls_trust_pem;    /* CA bundle for client certs (asked for, not required); NULL = none */
    /* 1: CORS for every origin, as SGLang (answers to requests with an
     * Origin carry Access-Control-Allow-*; OPTIONS preflights are answered
     * 200 without reaching the handler) */
    int cors;
} http_config;

/* Start listening; NULL with a message in err. */
http_server *http_start(const http_config *cfg, http_handler_fn fn, void *ctx, char *err,
                        size_t errlen);
/* Stop accepting new connections (in-flight ones continue). */
void http_quiesce(http_server *s);
/* Requests handed to the handler and not yet terminated. */
int http_inflight(http_server *s);
/* Stop the daemon (call after every request got its terminal call). */
void http_stop(http_server *s);

/* Request header value (case-insensitive name) or NULL.  Valid on the
 * polling thread during the handler call; after http_req_detach, on any
 * thread until the terminal call. */
const char *http_req_header(http_req *r, const char *name);
/* Query-string argument or NULL; same validity as http_req_header. */
const char *http_req_query(http_req *r, const char *name);

/* Prepare r to be served by another thread: copies its headers and query
 * arguments (libmicrohttpd's lists belong to the polling thread).  Call in
 * the handler, on the polling thread.  0, or -1 out of memory (then serve
 * r on the polling thread). */
int http_req_detach(http_req *r);

/* Install the close hook (see http_close_fn).  If the client already left
 * (possible for a detached request), fn(arg) runs at once on the calling
 * thread, under the same lock as from the polling thread. */
void http_req_on_close(http_req *r, http_close_fn fn, void *arg);

/* Has the client of a request that is still waiting for its answer hung
 * up (peer closed / reset, or its connection already ended)?  For
 * suspended requests, which libmicrohttpd does not poll: a non-blocking
 * poll of the socket for POLLRDHUP.  Any thread, before the terminal
 * call. */
bool http_req_peer_gone(http_req *r);

/* Terminal: a complete answer.  body copied.  extra_headers: NULL or a
 * NULL-terminated list "Name", "value", ... */
void http_respond(http_req *r, int status, const char *content_type, const char *body, size_t len,
                  const char *const *extra_headers);
/* Start a chunked streaming answer (status 200). */
void http_stream_begin(http_req *r, const char *content_type);
/* Queue bytes (copied).  Returns false when the client is gone or more
 * than 32 MiB are waiting for a client that does not read (keep
 * calling http_stream_end anyway). */
bool http_stream_write(http_req *r, const char *data, size_t len);
/* Terminal for streams: the answer ends after the queued bytes. */
void http_stream_end(http_req *r);

/* ---- detached requests (tests, fuzzing) ----
 * A request with no connection: the handler runs as usual, the answer
 * (full body, or everything streamed) is kept for inspection.  Created
 * holding both references (owner + handler); the handler's terminal call
 * releases one, http_req_detached_free the other. */
http_req *http_req_detached(void);
/* 0 while unanswered, else the status; *body and *len: the answer or the
 * streamed bytes so far (borrowed until free). */
int http_req_detached_result(http_req *r, const char **body, size_t *len, bool *ended);
void http_req_detached_free(http_req *r);

#endif
