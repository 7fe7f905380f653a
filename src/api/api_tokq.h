/* api_tokq — tokenizer workers: the requests that need parsing, a chat
 * template or tokenizing leave the HTTP polling thread.
 *
 * DESIGN
 *   polling thread  api_handle -> api_tokq_offer: a request with a body is
 *                   detached (http_req_detach) and queued; its connection
 *                   is suspended meanwhile, so it costs no polling and is
 *                   never closed by the idle timeout (libmicrohttpd does
 *                   not time out suspended connections and restarts the
 *                   clock on resume).  Requests without a body (GET
 *                   /health, /get_model_info, /v1/models, /metrics ...)
 *                   are answered on the polling thread as before.
 *   N workers       (--tokenizer-worker-num, default 1) take, in order:
 *                   small jobs, items of a batch encode in progress, large
 *                   jobs in arrival order.  Each job runs the route (parse
 *                   JSON -> validate -> chat template -> tokenize ->
 *                   sched_submit), which answers or hands the request to
 *                   the dispatcher exactly as it did on the polling thread.
 *   express thread  takes small jobs only (body <= API_TOKQ_EXPRESS_MAX):
 *                   a small request never waits behind large prompts, even
 *                   while every worker is busy with one.
 * Priorities: the workers run at nice +10 (a thread's own), so that when
 * the cores are all busy, the polling thread, the express thread, the
 * scheduler (model forwards: decode latency of running requests) and
 * the dispatcher get the CPU first and tokenizing large prompts takes the
 * rest; on an idle machine the workers run at full speed.  With two
 * workers on two cores this took /health p99 from 31 to 24 ms.
 * A job is small by its body size, known before parsing: the body bounds
 * the work (JSON, template input, text to tokenize).  A 64 KiB /generate
 * or chat body takes 27-36 ms on the loaded 2-core development machine
 * (4 KiB: 2 ms; 256 KiB: 190-210 ms; docs/notes/tokw.md), so a small
 * request waits at most about that long behind another small one.
 *
 * Batch encode (--enable-tokenizer-batch-encode, SGLang's semantics): the
 * texts of one batch request (/generate `text` list, /v1/completions
 * `prompt` list, /encode `text` list, /v1/embeddings `input` list) whose
 * n is 1 are tokenized in one batch call before the route runs
 * (api_tokq_encode_ahead), spread over the idle workers; the route then
 * finds each text's ids with api_tokq_pre_take instead of encoding it.
 * The ids are the same either way: only who encodes, and when, changes.
 * Refused as SGLang refuses it: a /generate text batch with multimodal
 * data.  (Batches of input_ids need no tokenizing and pass as before.)
 *
 * Threads: api_tokq_offer on the polling thread; api_tokq_encode_ahead,
 * api_tokq_pre_take and api_tokq_pre_clear on the thread running a route
 * (the table they share is thread-local).  Shutdown: api_tokq_destroy
 * lets the workers run every job still queued (the caller sets the
 * server draining first, so generation routes answer 503), then joins.
 *
 * Ownership: api_tokq owns its threads and queued jobs; a queued job
 * holds the handler's reference on its http_req until `run` makes the
 * terminal call (or passes the request on, as routes do). */
#ifndef SGLC_API_TOKQ_H
#define SGLC_API_TOKQ_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "http/http.h"
#include "tokenizer/tokenizer.h"

/* Bodies up to this size are small jobs (express lane). */
#define API_TOKQ_EXPRESS_MAX ((size_t)64 << 10)
/* The workers' nice value (the express thread keeps the process's). */
#define API_TOKQ_WORKER_NICE 10

typedef struct api_tokq api_tokq;

/* Runs one request on a worker: the handler body (same arguments as an
 * http_handler_fn).  It must make the terminal call on r or hand r on. */
typedef void (*api_tokq_run_fn)(void *ctx, http_req *r, const char *method, const char *path,
                                const char *body, size_t body_len);

/* workers >= 1.  NULL with a message in err. */
api_tokq *api_tokq_create(int workers, api_tokq_run_fn run, void *ctx, char *err, size_t errlen);
/* Runs every job still queued, stops and joins the threads, frees. */
void api_tokq_destroy(api_tokq *q);

/* Polling thread, from the handler: queue r for a worker.  Returns false
 * when r is not queued (no body; out of memory): serve it inline then.
 * body: r's own buffer (valid until the terminal call). */
bool api_tokq_offer(api_tokq *q, http_req *r, const char *method, const char *path, const char *body,
                    size_t body_len);

/* One text of a batch (borrowed). */
typedef struct api_tokq_text {
    const char *s;
    size_t len;
} api_tokq_text;

/* Encode n texts in one batch call: out[i] gets the ids of texts[i]
 * (out zero-initialized by the caller, freed by it with tok_ids_free).
 * The items are shared with the workers that are idle (q NULL: all on the
 * calling thread); the caller encodes too and returns when all are done.
 * 0, or -1 when one failed (every out[] is then freed). */
int api_tokq_encode_batch(api_tokq *q, const tok_tokenizer *t, const api_tokq_text *texts, size_t n,
                          bool add_special, tok_ids *out);

/* Batch encode ahead of a route (see DESIGN): when `body` (the parsed
 * request of `path`) is a batch whose texts SGLang batch-encodes, encode
 * them all and keep the ids for api_tokq_pre_take on this thread.
 * Returns 0 (nothing to do, or ids kept), or an HTTP status with a
 * message in err (the request is refused: the caller answers it). */
int api_tokq_encode_ahead(api_tokq *q, const tok_tokenizer *t, const char *path, const json_t *body,
                          char *err, size_t errlen);
/* The ids encoded ahead for this text (same bytes, same add_special), as a
 * copy in *out (appended; caller frees).  false: none kept, encode it. */
bool api_tokq_pre_take(const char *text, size_t len, bool add_special, tok_ids *out);
/* Forget the ids kept on this thread (after the route ran). */
void api_tokq_pre_clear(void);

#endif
