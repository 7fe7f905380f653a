/* api_toolcall_impl — internal to api_toolcall*.c: the parser state, the
 * buffer and emission helpers (api_toolcall.c) and the formats' state
 * machines (api_toolcall_fmt.c). */
#ifndef SGLC_API_TOOLCALL_IMPL_H
#define SGLC_API_TOOLCALL_IMPL_H

#include <stdint.h>

#include "api/api_toolcall.h"

typedef struct tc_parser tc_parser;

/* An incremental JSON value validator (api_toolcall_json.c). */
typedef struct tc_jpush {
    uint8_t stk[128];            /* (depth) 'o' object / 'a' array */
    int depth;
    int st, sub;                 /* state, and its sub-state (number part, literal index, hex count) */
    const char *lit;             /* the literal being matched */
    bool key;                    /* the string is an object key */
} tc_jpush;
void tc_jpush_init(tc_jpush *j);
/* Feed s[0..n): 1 the value is complete (*used = the bytes of it taken
 * from s), 0 it needs more (*used = n), -1 invalid (*used = the bad
 * byte).  final: a number ending the input is complete. */
int tc_jpush_feed(tc_jpush *j, const char *s, size_t n, bool final, size_t *used);

/* One step of a format over the held bytes: 1 = progress (step again),
 * 0 = waiting for more input (or, at final, done), -1 = out of memory. */
typedef int (*tc_step_fn)(tc_parser *p, bool final);

/* Framed formats: a call is open, name, args-prefix, JSON args, end. */
typedef struct tc_framed {
    const char *open;            /* opens the tool section (or each call when call == NULL) */
    const char *call;            /* begins each call inside the section, or NULL */
    const char *close;           /* closes the section, or NULL */
    const char *name_pre;        /* precedes the name (skipped), or NULL */
    const char *name_end;        /* ends the name */
    const char *args_pre;        /* skipped (after whitespace) before the JSON arguments, or NULL */
    const char *call_end;        /* ends a call (what is between the arguments and it is dropped) */
} tc_framed;

typedef enum {
    TCF_HERMES = 0, TCF_LLAMA3, TCF_MISTRAL, TCF_JSON_ARRAY, TCF_FRAMED, TCF_QWEN3_CODER, TCF_GLM45, TCF_PYTHONIC
} tc_family;

struct api_toolcall_format {
    const char *name;
    tc_family family;
    const tc_framed *fr;         /* TCF_FRAMED */
    const char *const *drop;     /* NULL-terminated markers removed from normal text, or NULL */
    const char *skip_open, *skip_close; /* a region dropped from the text (gpt-oss's analysis channel), or NULL */
};

struct tc_parser {
    const api_toolcall_format *f;
    json_t *tools;               /* owned reference or NULL: any name accepted */
    api_pieces *out;             /* the current feed's output (borrowed) */
    char *buf;                   /* (len) owned: held input; [off, len) not consumed yet */
    size_t len, cap, off;
    int st;                      /* the format's state */
    int after;                   /* the state after a JSON call object (wrapper formats) */
    bool head;                   /* nothing but whitespace seen yet (head rules) */
    bool strip_lead;             /* drop the whitespace that leads the next normal text */
    bool any_call;               /* a call was begun */
    char *ws;                    /* (ws_len) owned: trailing whitespace of normal text, held */
    size_t ws_len, ws_cap;
    const char *marker;          /* the marker that opened the current call attempt (given back as text) */
    /* the current call */
    int index;                   /* the next call's index */
    bool in_call, skip;          /* skip: a name not among the tools, dropped */
    bool args_any;               /* an argument byte was sent */
    size_t args_sent;            /* JSON formats: bytes of the arguments value sent */
    bool args_str_done;          /* the arguments were a JSON string, sent decoded */
    char *name;                  /* owned: the current call's name */
    char *key;                   /* owned: XML formats' current parameter name */
    int n_params;
    size_t scanned;              /* XML value states: bytes already searched for an end marker */
    /* JSON arguments (wrapper and raw formats): */
    int wphase;                  /* S_WRAP: 0 members before the arguments, 1 the arguments, 2 members after */
    size_t w_as, w_ae;           /* the arguments value [w_as, w_ae) in the held bytes */
    size_t w_pushed;             /* bytes of it fed to jp */
    tc_jpush jp;
};

/* bytes not consumed */
static inline const char *tc_data(const tc_parser *p) { return p->buf + p->off; }
static inline size_t tc_avail(const tc_parser *p) { return p->len - p->off; }
static inline void tc_consume(tc_parser *p, size_t n) { p->off += n; }

/* Normal text out (trailing whitespace held until more text comes). */
int tc_text(tc_parser *p, const char *s, size_t n);
/* Begin a call (name checked against the tools), its argument bytes, its end. */
int tc_call_begin(tc_parser *p, const char *name, size_t n);
int tc_call_args(tc_parser *p, const char *s, size_t n);
int tc_call_end(tc_parser *p);
/* Give the opening marker back as text (a body that broke before its name). */
int tc_give_back(tc_parser *p, int text_state);

/* Find the earliest of the markers in the held bytes: emits the text
 * before it, consumes the marker, sets *which and returns 1.  Otherwise
 * emits what cannot begin a marker (everything at final) and returns 0.
 * -1 on OOM. */
int tc_scan_text(tc_parser *p, const char *const *markers, int n_markers, bool final, int *which);
/* As tc_scan_text, but what is before the marker is dropped. */
int tc_seek(tc_parser *p, const char *const *markers, int n_markers, bool final, int *which);
/* After optional whitespace, the literal: 1 matched (consumed, with the
 * whitespace), 0 not decided yet, -1 something else (nothing consumed).  Final: a partial match is -1. */
int tc_expect(tc_parser *p, const char *lit, bool final);
/* Skip whitespace; 1 when a byte follows it, 0 when the input ran out. */
int tc_skip_ws(tc_parser *p);
/* The first occurrence of s in [from, from + n) or NULL. */
const char *tc_find(const char *hay, size_t n, const char *needle);
/* The longest suffix of s[0..n) that is a proper prefix of lit. */
size_t tc_partial(const char *s, size_t n, const char *lit);

/* ---- JSON prefixes ---- */
/* Scan one JSON value at s[*i] (leading whitespace skipped): 1 complete
 * (*i after it), 0 the input ran out inside it (*i = n), -1 invalid (*i
 * at the bad byte).  final: a number ending the input is complete. */
int tc_json_value(const char *s, size_t n, size_t *i, bool final);

/* The JSON wrapper object {"name": ..., "arguments"|"parameters": ...}
 * at the head of the held bytes, rescanned at each step. */
typedef struct tc_wrap {
    int st;                      /* 1 complete, 0 incomplete (or stopped at the arguments), -1 invalid */
    size_t end;                  /* complete: after '}'; invalid: the bad byte */
    bool name_done;              /* the name's string value is complete */
    size_t ns, ne;               /* the name value [ns, ne) with quotes */
    bool at_args;                /* stopped where the arguments value begins, at `as` */
    size_t as;
} tc_wrap;
/* resume 0: scan from the '{'; else from `resume`, right after the
 * arguments value (have_args: a second arguments key is a plain member).
 * The scan stops at the arguments value (at_args): its bytes are the
 * caller's, fed to a tc_jpush. */
void tc_scan_wrap(const char *s, size_t n, bool final, size_t resume, tc_wrap *w);

/* The format's step function. */
tc_step_fn tc_step_of(const api_toolcall_format *f);
/* The schema type of a tool's parameter ("string", "integer", ... or NULL). */
const char *tc_param_type(const tc_parser *p, const char *param);
/* An XML-format parameter value as JSON text (malloc'd): typed by the
 * schema, else (guess) as JSON when it parses, else a string. */
char *tc_xml_value(const char *v, size_t n, const char *type, bool guess);
/* JSON string literal of s[0..n) (malloc'd). */
char *tc_json_quote(const char *s, size_t n);

#endif
