/* cli_bserve — the parts of `sglc bench-serving` that read outside input: the
 * streamed (SSE) answer of a serving backend, and ShareGPT dataset files.
 *
 * DESIGN: a cli_bserve_stream is fed the raw bytes of one HTTP response body as
 * they arrive (any split), each feed stamped with the arrival time.  It
 * assembles lines, decodes each `data:` event as JSON and keeps per-request
 * timing: the first chunk that carries output is the first token (TTFT);
 * each later one adds its gap to the inter-token latencies, divided evenly
 * over the tokens it carries when the backend says how many (SGLang's
 * native stream reports cumulative meta_info.completion_tokens; OpenAI
 * streams carry one chunk per step, counted as one token).  Generated text
 * is kept (cumulative for the native backend, appended deltas for the
 * OpenAI ones) for the retokenized count.  No network code here, so the
 * fuzzer can drive it.
 */
#ifndef SGLC_CLI_BSERVE_H
#define SGLC_CLI_BSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cli_bserve_backend {
    CLI_BSERVE_SGLANG = 0,   /* POST /generate, native SSE */
    CLI_BSERVE_OAI = 1,      /* POST /v1/completions */
    CLI_BSERVE_OAI_CHAT = 2, /* POST /v1/chat/completions */
} cli_bserve_backend;

typedef struct cli_bserve_stream {
    cli_bserve_backend backend;
    double t_start;             /* request sent (seconds, monotonic) */
    double ttft;                /* seconds; < 0 until the first token */
    double t_last;              /* time of the last chunk with output */
    double *itl;                /* (n_itl) seconds, owned */
    size_t n_itl, cap_itl;
    char *text;                 /* (text_len) generated text, NUL-terminated, owned */
    size_t text_len, text_cap;
    int64_t completion_tokens;  /* reported by the server; -1 unknown */
    int64_t prompt_tokens;      /* reported by the server; -1 unknown */
    int64_t chunks;             /* chunks that carried output */
    bool done;                  /* saw data: [DONE] */
    char *error;                /* first error reported in the stream (owned) or NULL */
    char *line;                 /* (line_len) partial line being assembled, owned */
    size_t line_len, line_cap;
    bool oom;                   /* an allocation failed: the request counts as failed */
} cli_bserve_stream;

void cli_bserve_stream_init(cli_bserve_stream *s, cli_bserve_backend b, double t_start);
void cli_bserve_stream_free(cli_bserve_stream *s);
/* Feed n bytes of the response body that arrived at time t.  Never fails
 * hard: malformed events are ignored, an `error` object in an event is
 * recorded in s->error, allocation failure sets s->oom. */
void cli_bserve_stream_feed(cli_bserve_stream *s, const char *data, size_t n, double t);
/* End of body: processes a last line without a newline. */
void cli_bserve_stream_finish(cli_bserve_stream *s, double t);

/* One ShareGPT conversation turned into a request: the first human turn is
 * the prompt, the next (gpt) turn the reference completion. */
typedef struct cli_bserve_conv {
    char *prompt, *completion; /* owned, NUL-terminated */
} cli_bserve_conv;

/* Parse a ShareGPT JSON document ([{"conversations": [{"from", "value"},
 * ...]}, ...]); conversations with fewer than two turns or non-string
 * values are skipped.  On success returns 0 and a malloc'd array (*out, *n;
 * free with cli_bserve_convs_free); -1 with a message in err otherwise. */
int cli_bserve_sharegpt_parse(const char *json, size_t len, cli_bserve_conv **out, size_t *n, char *err, size_t errlen);
void cli_bserve_convs_free(cli_bserve_conv *c, size_t n);

#endif
