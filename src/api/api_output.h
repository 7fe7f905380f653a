/* api_output — one output stage per request slot: each output token is
 * detokenized once, stop strings are matched in that text, and a list of
 * output parsers turns the text deltas into what the client sees.
 *
 * DESIGN
 *   scheduler thread, through the output hook (api_output_hook, installed
 *   with sched_set_output_hook; the request opts in with
 *   sched_req_spec.output_ctx = its slots' api_output array):
 *     check  a token of a request with stop strings: decode the tokens not
 *            decoded yet (tok_stream), then look for each stop string, in
 *            list order, in the text that can hold a new match: the last
 *            (longest stop - 1) bytes decoded before + the new text + the
 *            text the stream still holds back (SGLang: `stop_str in
 *            decoded_text`; held-back text counts, so "The end" stops on
 *            the token "end" even while a cleanup rule holds " end" back).
 *     text   an event is built: decode what check has not, and move the
 *            text since the previous event into the event (sched_event
 *            .text).  On the FINISH event, flush the stream; a matched
 *            stop token is not decoded unless no_stop_trim.
 *   dispatcher thread (api.c handle_event, then the route files):
 *     api_output_add   append the event's text: `text` is then the whole
 *                      output text, as tok_decode of all the ids would be.
 *     api_output_final the final text: minus a matched stop string (from
 *                      its first occurrence) unless no_stop_trim, as
 *                      SGLang's trim_matched_stop.
 *     api_output_parse the parser list over the deltas the client is sent,
 *                      in order: each parser reads the content pieces the
 *                      one before it let through and may turn text into
 *                      reasoning or tool-call pieces (issue 10's reasoning
 *                      and tool-call parsers plug in here).  No parser is
 *                      registered by default: the delta is the content.
 *
 * The two halves share nothing but the struct: the scheduler-thread
 * fields are touched only by the hook until the slot's FINISH event is
 * queued, the dispatcher fields only by the dispatcher (the outbox mutex
 * orders the two).  Requests without a tokenizer (--skip-tokenizer-init)
 * get no stage: their text is "" and stop strings are refused at submit.
 *
 * Ownership: api_output owns its stream, its buffers and its parsers;
 * it borrows the tokenizer (which must outlive it). */
#ifndef SGLC_API_OUTPUT_H
#define SGLC_API_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"
#include "tokenizer/tokenizer.h"

/* What a parser makes of the text: content (read by the next parser, then
 * the client's `content`), reasoning (`reasoning_content`) or a tool call
 * (`tool_calls`; index = which call): TOOL_NAME opens call `index` with
 * its name, TOOL_CALL pieces are its argument fragments (api_toolcall.h). */
typedef enum { API_PIECE_CONTENT = 0, API_PIECE_REASONING, API_PIECE_TOOL_CALL, API_PIECE_TOOL_NAME } api_piece_kind;

typedef struct api_piece {
    api_piece_kind kind;
    char *text;                  /* (len) owned, NUL-terminated */
    size_t len;
    int index;                   /* TOOL_CALL: the call's index */
} api_piece;

typedef struct api_pieces {
    api_piece *v;                /* (n) owned */
    int n, cap;
} api_pieces;

/* Append a piece (text copied).  0 or -1 (OOM). */
int api_pieces_add(api_pieces *ps, api_piece_kind kind, const char *text, size_t len, int index);
/* The concatenated text of every piece of one kind (malloc'd, "" when
 * none; NULL on OOM). */
char *api_pieces_join(const api_pieces *ps, api_piece_kind kind);
void api_pieces_free(api_pieces *ps);

/* An output parser.  feed gets the content deltas in order (final: the
 * last call, the request finished: flush what is held back) and appends
 * what it makes of them to out.  0 or -1 (the route answers 500). */
typedef struct api_output_parser {
    const char *name;
    void *state;                 /* owned by the parser */
    int (*feed)(struct api_output_parser *self, const char *text, size_t len, bool final, api_pieces *out);
    void (*destroy)(struct api_output_parser *self); /* frees state and self; may be NULL */
} api_output_parser;

#define API_OUTPUT_MAX_PARSERS 4

typedef struct api_output {
    const tok_tokenizer *tok;    /* borrowed; NULL = no stage (text stays "") */
    bool no_stop_trim;           /* the request's sampling_params.no_stop_trim (the front sets it) */
    /* scheduler thread (the hook) */
    tok_stream *ts;              /* owned; created at the first token (options from the params) */
    int64_t n_decoded;           /* output ids fed to ts */
    char *pend;                  /* (pend_len) owned: decoded, not yet moved into an event */
    size_t pend_len, pend_cap;
    char *tail;                  /* (tail_len) owned: the last bytes decoded before (stop-string search) */
    size_t tail_len;
    bool flushed;                /* the FINISH event's text was taken */
    /* dispatcher thread */
    char *text;                  /* (len) owned: the output text received so far, NUL-terminated */
    size_t len, cap;
    api_output_parser *parsers[API_OUTPUT_MAX_PARSERS]; /* owned */
    int n_parsers;
} api_output;

/* tok NULL: an inert stage. */
void api_output_init(api_output *o, const tok_tokenizer *tok);
void api_output_free(api_output *o);

/* The hook: sched_set_output_hook(s, &api_output_hook, NULL); a request
 * opts in with spec.output_ctx = an array of api_output, one per sibling
 * (n > 1). */
extern const sched_output_hook api_output_hook;

/* Dispatcher: append an event's text.  0 or -1 (OOM). */
int api_output_add(api_output *o, const char *text, size_t len);
/* The final text of a finished slot (malloc'd; NULL on OOM): the whole
 * text, cut at the first occurrence of a matched stop string
 * (finish == SCHED_FINISH_STOP_STR, stop_str) unless no_stop_trim. */
char *api_output_final(const api_output *o, sched_finish_kind finish, const char *stop_str, bool no_stop_trim);

/* Register a parser (taken; runs after those registered before).  0, or
 * -1 when the list is full (p is then destroyed). */
int api_output_add_parser(api_output *o, api_output_parser *p);
/* Run the parser list over one delta the client is sent (final: the last
 * one).  With no parser the delta is one content piece (none when
 * empty).  0 or -1. */
int api_output_parse(api_output *o, const char *delta, size_t len, bool final, api_pieces *out);

#endif
